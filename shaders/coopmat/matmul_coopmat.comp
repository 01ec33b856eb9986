#version 450
// Matrix multiply on the tensor cores (VK_KHR_cooperative_matrix), for GPUs that offer it:
//   out[z, m, n] = sum_k a[z, m, k] * w[z?, n, k] + bias[n]
// with the inputs rounded to fp16 and the products accumulated in fp32 (the C reference of
// this variant rounds a and w to fp16 first: tests/test_matmul.c). a and out may be 16-bit
// activations (f16 or bf16, ADT / ODT, read and written through 32-bit words as in
// matmul_tiled.comp; a 16-bit out takes no residual add).
//
// A workgroup of SUBGROUPS subgroups computes a BM x BN block of out. Per step of BK values
// of k its invocations copy a BM x BK block of a and a BN x BK block of w into shared memory
// as fp16, row by row along k (coalesced: rows are K-contiguous in both). Each subgroup owns
// a WM x WN part of the block, held as (WM / TM) x (WN / TN) accumulator matrices of the
// device's TM x TN x TK shape; per TK slice it loads the A tiles row-major and the B tiles
// from the w block, which is B = w^T in column-major order. At the end the accumulators go
// through shared memory so that bias, activation, the residual add and the edges are handled
// per element as in the other matmul kernels. Any M, N, K: loads past an edge read zero.
//
// Compiled only with a glslang that knows GL_KHR_cooperative_matrix (shaders/CMakeLists.txt,
// .ci/glslang; Debian 13's own glslang-tools does); chosen by engine/ops/ops_matmul.c on a GPU
// whose context enabled the extension, at fp16 precision, never at f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "push_matmul.h"

layout(local_size_x_id = 0) in;              // the reported subgroup size * (BM / WM) * (BN / WN):
                                             // one subgroup per part where the device runs it
                                             // at that size (any other works: see main)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint WM = 32;  // one subgroup's part of the block
layout(constant_id = 5) const uint WN = 32;
layout(constant_id = 6) const uint WDT = 0;  // w dtype: LV_DTYPE_F32 / F16 / BF16
layout(constant_id = 7) const uint TM = 16;  // the device's cooperative-matrix shape
layout(constant_id = 8) const uint TN = 16;
layout(constant_id = 9) const uint TK = 16;
layout(constant_id = 10) const uint ADT = 0; // a dtype (16-bit: words, shaders/common.glsl)
layout(constant_id = 11) const uint ODT = 0; // out dtype (16-bit: stored by atomics on words; no accumulate)

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 0) buffer OutW { uint ow[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 2) readonly buffer W { uint w[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };

// row strides of the shared blocks: + 8 halves keeps rows 16-byte aligned for the loads
// and spreads them over the banks
const uint LDS = BK + 8u;
const uint LDC = BN + 4u;
shared float16_t As[BM * LDS];
shared float16_t Ws[BN * LDS];
shared float Cs[BM * LDC];

float w_at(uint e) {
    if (WDT == LV_DTYPE_F32) return uintBitsToFloat(w[e]);
    if (WDT == LV_DTYPE_F16) return lv_f16_at(w[e >> 1], e);
    return lv_bf16_at(w[e >> 1], e);
}

float mm_act(float v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }

const uint TILES_M = WM / TM, TILES_N = WN / TN;

// The block's PARTS parts go to the subgroups the device actually runs the workgroup in
// (gl_NumSubgroups): the workgroup is sized from the subgroup size the device reports, but a
// device whose subgroup size varies per pipeline (AMD's wave32 / wave64, Intel's SIMD8 to 32)
// may run it in more subgroups (the extra ones only help stage the blocks) or in fewer (then
// each takes several parts, one after the other, the k loop once per round). Which part is a
// subgroup's depends on its id only, so the cooperative-matrix operations stay in
// subgroup-uniform control flow and every barrier in workgroup-uniform control flow.
const uint PARTS = (BM / WM) * (BN / WN);

void main() {
    const uint NT = gl_WorkGroupSize.x;
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint abase = pc.a_off + z * pc.a_batch;
    uint wbase = pc.w_off + z * pc.w_batch;
    uint nsg = gl_NumSubgroups;
    uint rounds = (PARTS + nsg - 1u) / nsg;

    for (uint round = 0u; round < rounds; round++) {
        uint part = gl_SubgroupID + round * nsg;   // this subgroup's part of the block
        bool mine = part < PARTS;
        uint sg_m = (part / (BN / WN)) * WM, sg_n = (part % (BN / WN)) * WN;

        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[TILES_M * TILES_N];
        [[unroll]] for (uint i = 0; i < TILES_M * TILES_N; i++)
            acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

        for (uint k0 = 0; k0 < pc.K; k0 += BK) {
            // consecutive invocations read consecutive k of one row
            [[unroll]] for (uint t = 0; t < (BM * BK + NT - 1u) / NT; t++) {
                uint e = tid + t * NT;
                uint r = e / BK, kk = e % BK, m = m0 + r, k = k0 + kk;
                float v = 0.0;
                if (m < pc.M && k < pc.K) {
                    uint ea = abase + m * pc.K + k;
                    v = ADT == LV_DTYPE_F32 ? a[ea] : lv_half_at(aw[ea >> 1], ea, ADT);
                }
                if (e < BM * BK) As[r * LDS + kk] = float16_t(v);
            }
            [[unroll]] for (uint t = 0; t < (BN * BK + NT - 1u) / NT; t++) {
                uint e = tid + t * NT;
                uint c = e / BK, kk = e % BK, n = n0 + c, k = k0 + kk;
                float v = 0.0;
                if (n < pc.N && k < pc.K) v = w_at(wbase + n * pc.K + k);
                if (e < BN * BK) Ws[c * LDS + kk] = float16_t(v);
            }
            barrier();
            if (mine) {
                [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
                    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> ta[TILES_M];
                    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> tb[TILES_N];
                    [[unroll]] for (uint i = 0; i < TILES_M; i++)
                        coopMatLoad(ta[i], As, (sg_m + i * TM) * LDS + kk, LDS, gl_CooperativeMatrixLayoutRowMajor);
                    // B[k][n] = w[n][k]: the w block, n-major, is B in column-major order
                    [[unroll]] for (uint j = 0; j < TILES_N; j++)
                        coopMatLoad(tb[j], Ws, (sg_n + j * TN) * LDS + kk, LDS, gl_CooperativeMatrixLayoutColumnMajor);
                    [[unroll]] for (uint i = 0; i < TILES_M; i++)
                        [[unroll]] for (uint j = 0; j < TILES_N; j++)
                            acc[i * TILES_N + j] = coopMatMulAdd(ta[i], tb[j], acc[i * TILES_N + j]);
                }
            }
            barrier();
        }

        if (mine)
            [[unroll]] for (uint i = 0; i < TILES_M; i++)
                [[unroll]] for (uint j = 0; j < TILES_N; j++)
                    coopMatStore(acc[i * TILES_N + j], Cs, (sg_m + i * TM) * LDC + sg_n + j * TN, LDC,
                                 gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();

    uint obase = pc.out_off + z * pc.out_batch;
    for (uint e = tid; e < BM * BN; e += NT) {
        uint r = e / BN, c = e % BN, m = m0 + r, n = n0 + c;
        if (m < pc.M && n < pc.N) {
            float b = pc.has_bias != 0u ? bias[pc.bias_off + n] : 0.0;
            uint oe = obase + m * pc.ldo + n;
            if (ODT != LV_DTYPE_F32) LV_STORE_HALF(ow, oe, lv_half_bits(mm_act(Cs[r * LDC + c] + b), ODT))
            else o[oe] = mm_act(Cs[r * LDC + c] + b) + (pc.accumulate != 0u ? o[oe] : 0.0);
        }
    }
}
