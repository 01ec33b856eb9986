#version 450
// Matrix multiply on the tensor cores (VK_KHR_cooperative_matrix), for GPUs that offer it:
//   out[z, m, n] = sum_k a[z, m, k] * w[z?, n, k] + bias[n]
// with the inputs rounded to fp16 and the products accumulated in fp32 (the C reference of
// this variant rounds a and w to fp16 first: tests/engine/test_matmul.c). a and out may be 16-bit
// activations (f16 or bf16, ADT / ODT, read and written through 32-bit words as in
// matmul_tiled.comp; a 16-bit out takes no residual add).
//
// A workgroup of SUBGROUPS subgroups computes a BM x BN block of out (128 x 128 by default:
// engine/ops/ops_matmul.c). Per step of BK values of k its invocations copy a BM x BK block of
// a and a BN x BK block of w into shared memory as fp16, four consecutive k at a time (one
// 16-byte load of f32 data, one 8-byte load of 16-bit data, where K and the view's start allow
// it; element by element elsewhere). The next step's values are loaded into registers while
// the current step multiplies (one shared buffer, two barriers a step). Each subgroup owns a
// WM x WN part of the block, held as (WM / TM) x (WN / TN) accumulator matrices of the
// device's TM x TN x TK shape; per TK slice it loads the A tiles row-major and the B tiles
// from the w block, which is B = w^T in column-major order. At the end each subgroup passes
// its accumulators one at a time through its own TM x TN of shared memory, so that bias,
// activation, the residual add and the edges are handled per element as in the other matmul
// kernels (a 16-bit out is written a word, two columns, at a time where aligned). Any M, N,
// K: loads past an edge read zero.
// w may be q8_0 or q4_K blocks (shaders/quant.glsl; w_off in bytes): each weight dequantised
// in fp32 as it is loaded, then rounded to fp16 like any other w (one element at a time).
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

layout(local_size_x_id = 0) in;              // the reported subgroup size * SUBGROUPS: one
                                             // subgroup per part where the device runs it at
                                             // that size (any other works: see main)
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;  // a multiple of TK and of 4
layout(constant_id = 4) const uint WM = 64;  // one subgroup's part of the block
layout(constant_id = 5) const uint WN = 32;
layout(constant_id = 6) const uint WDT = 0;  // w dtype: LV_DTYPE_F32 / F16 / BF16 / Q8_0 / Q4_K
layout(constant_id = 7) const uint TM = 16;  // the device's cooperative-matrix shape
layout(constant_id = 8) const uint TN = 16;
layout(constant_id = 9) const uint TK = 16;
layout(constant_id = 10) const uint ADT = 0; // a dtype (16-bit: words, shaders/common.glsl)
layout(constant_id = 11) const uint ODT = 0; // out dtype (16-bit: stored as words; no accumulate)
layout(constant_id = 12) const uint SUBGROUPS = 8; // (BM / WM) * (BN / WN)
layout(constant_id = 13) const uint NT = 256;      // the workgroup's invocations (= local size)

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 0) buffer OutW { uint ow[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 1) readonly buffer AW2 { uvec2 aw2[]; };
layout(std430, binding = 2) readonly buffer W { uint w[]; };
layout(std430, binding = 2) readonly buffer W4 { uvec4 w4[]; };
layout(std430, binding = 2) readonly buffer W2 { uvec2 w2[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
#define LV_QWORD(i) w[i]
#include "quant.glsl"

const bool WQ = WDT == LV_DTYPE_Q8_0 || WDT == LV_DTYPE_Q4_K;

// row strides of the shared blocks: + 8 halves keeps rows 16-byte aligned for the loads
// and spreads them over the banks
const uint LDS = BK + 8u;
shared float16_t As[BM * LDS];
shared float16_t Ws[BN * LDS];
shared float Cs[SUBGROUPS * TM * TN];

// groups of 4 consecutive k: per block row, per block, per invocation
const uint QROW = BK / 4u;
const uint QA = BM * QROW, QW = BN * QROW;
const uint LA = (QA + NT - 1u) / NT, LW = (QW + NT - 1u) / NT;

uint abase, wbase;
bool a_vec, w_vec;

float a_at(uint e) { return ADT == LV_DTYPE_F32 ? a[e] : lv_half_at(aw[e >> 1], e, ADT); }

// element e of w (quantized: e counts from the view's first weight)
float w_at(uint e) {
    if (WDT == LV_DTYPE_Q8_0) return lv_q8_0_at(pc.w_off, e);
    if (WDT == LV_DTYPE_Q4_K) return lv_q4_k_at(pc.w_off, e);
    if (WDT == LV_DTYPE_F32) return uintBitsToFloat(w[e]);
    if (WDT == LV_DTYPE_F16) return lv_f16_at(w[e >> 1], e);
    return lv_bf16_at(w[e >> 1], e);
}

// a[m, k .. k + 3], zero past the edges
vec4 load_a4(uint m, uint k) {
    if (m >= pc.M || k >= pc.K) return vec4(0.0);
    uint e = abase + m * pc.K + k;
    if (a_vec) return ADT == LV_DTYPE_F32 ? a4[e >> 2] : lv_half4(aw2[e >> 2], ADT);
    vec4 v = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 4u; i++)
        if (k + i < pc.K) v[i] = a_at(e + i);
    return v;
}

// w[n, k .. k + 3], zero past the edges
vec4 load_w4(uint n, uint k) {
    if (n >= pc.N || k >= pc.K) return vec4(0.0);
    uint e = wbase + n * pc.K + k;
    if (w_vec) return WDT == LV_DTYPE_F32 ? uintBitsToFloat(w4[e >> 2]) : lv_half4(w2[e >> 2], WDT);
    vec4 v = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 4u; i++)
        if (k + i < pc.K) v[i] = w_at(e + i);
    return v;
}

float mm_act(float v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }

const uint TILES_M = WM / TM, TILES_N = WN / TN;

// The block's SUBGROUPS parts go to the subgroups the device actually runs the workgroup in
// (gl_NumSubgroups): the workgroup is sized from the subgroup size the device reports, but a
// device whose subgroup size varies per pipeline (AMD's wave32 / wave64, Intel's SIMD8 to 32)
// may run it in more subgroups (the extra ones only help stage the blocks) or in fewer (then
// each takes several parts, one after the other, the k loop once per round). Which part is a
// subgroup's depends on its id only, so the cooperative-matrix operations stay in
// subgroup-uniform control flow and every barrier in workgroup-uniform control flow.
void main() {
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    abase = pc.a_off + z * pc.a_batch;
    wbase = (WQ ? 0u : pc.w_off) + z * pc.w_batch;
    // four k at a time in one load where K and the views' starts are multiples of 4
    a_vec = (pc.K & 3u) == 0u && (abase & 3u) == 0u;
    w_vec = !WQ && (pc.K & 3u) == 0u && (wbase & 3u) == 0u;
    uint nsg = gl_NumSubgroups, rounds = (SUBGROUPS + nsg - 1u) / nsg;
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint obase = pc.out_off + z * pc.out_batch;
    // a 16-bit out: a word (columns n, n + 1) at a time where rows start on a word
    bool words = ODT != LV_DTYPE_F32 && (pc.ldo & 1u) == 0u && (obase & 1u) == 0u;

    for (uint round = 0u; round < rounds; round++) {
        uint part = gl_SubgroupID + round * nsg;       // this subgroup's part of the block
        bool mine = part < SUBGROUPS;
        uint sg_m = (part / (BN / WN)) * WM, sg_n = (part % (BN / WN)) * WN;

        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[TILES_M * TILES_N];
        [[unroll]] for (uint i = 0; i < TILES_M * TILES_N; i++)
            acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

        // consecutive invocations read consecutive groups of k along one row
        vec4 ra[LA], rw[LW];
        [[unroll]] for (uint t = 0; t < LA; t++) {
            uint q = tid + t * NT;
            ra[t] = q < QA ? load_a4(m0 + q / QROW, (q % QROW) * 4u) : vec4(0.0);
        }
        [[unroll]] for (uint t = 0; t < LW; t++) {
            uint q = tid + t * NT;
            rw[t] = q < QW ? load_w4(n0 + q / QROW, (q % QROW) * 4u) : vec4(0.0);
        }

        for (uint k0 = 0; k0 < pc.K; k0 += BK) {
            [[unroll]] for (uint t = 0; t < LA; t++) {
                uint q = tid + t * NT, s = (q / QROW) * LDS + (q % QROW) * 4u;
                if (q < QA) {
                    As[s] = float16_t(ra[t].x);
                    As[s + 1u] = float16_t(ra[t].y);
                    As[s + 2u] = float16_t(ra[t].z);
                    As[s + 3u] = float16_t(ra[t].w);
                }
            }
            [[unroll]] for (uint t = 0; t < LW; t++) {
                uint q = tid + t * NT, s = (q / QROW) * LDS + (q % QROW) * 4u;
                if (q < QW) {
                    Ws[s] = float16_t(rw[t].x);
                    Ws[s + 1u] = float16_t(rw[t].y);
                    Ws[s + 2u] = float16_t(rw[t].z);
                    Ws[s + 3u] = float16_t(rw[t].w);
                }
            }
            barrier();
            // the next step's loads are in flight while this one multiplies
            uint k1 = k0 + BK;
            if (k1 < pc.K) {
                [[unroll]] for (uint t = 0; t < LA; t++) {
                    uint q = tid + t * NT;
                    if (q < QA) ra[t] = load_a4(m0 + q / QROW, k1 + (q % QROW) * 4u);
                }
                [[unroll]] for (uint t = 0; t < LW; t++) {
                    uint q = tid + t * NT;
                    if (q < QW) rw[t] = load_w4(n0 + q / QROW, k1 + (q % QROW) * 4u);
                }
            }
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

        // each subgroup passes its tiles through its part's TM x TN of shared memory
        if (!mine) continue;
        uint cbase = part * TM * TN;
        [[unroll]] for (uint i = 0; i < TILES_M; i++)
            [[unroll]] for (uint j = 0; j < TILES_N; j++) {
                coopMatStore(acc[i * TILES_N + j], Cs, cbase, TN, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                uint mt = m0 + sg_m + i * TM, nt = n0 + sg_n + j * TN;
                if (ODT == LV_DTYPE_F32) {
                    for (uint e = lane; e < TM * TN; e += lanes) {
                        uint r = e / TN, c = e % TN, m = mt + r, n = nt + c;
                        if (m < pc.M && n < pc.N) {
                            float b = pc.has_bias != 0u ? bias[pc.bias_off + n] : 0.0;
                            uint oe = obase + m * pc.ldo + n;
                            o[oe] = mm_act(Cs[cbase + e] + b) + (pc.accumulate != 0u ? o[oe] : 0.0);
                        }
                    }
                } else {
                    // pairs of columns (c, c + 1) of the tile; nt and TN are even
                    for (uint e = lane; e < TM * TN / 2u; e += lanes) {
                        uint r = e / (TN / 2u), c = (e % (TN / 2u)) * 2u, m = mt + r, n = nt + c;
                        if (m >= pc.M || n >= pc.N) continue;
                        uint oe = obase + m * pc.ldo + n;
                        float b0 = pc.has_bias != 0u ? bias[pc.bias_off + n] : 0.0;
                        uint lo = lv_half_bits(mm_act(Cs[cbase + r * TN + c] + b0), ODT);
                        if (n + 1u < pc.N) {
                            float b1 = pc.has_bias != 0u ? bias[pc.bias_off + n + 1u] : 0.0;
                            uint hi = lv_half_bits(mm_act(Cs[cbase + r * TN + c + 1u] + b1), ODT);
                            if (words) {
                                ow[oe >> 1] = lo | (hi << 16);
                            } else {
                                LV_STORE_HALF(ow, oe, lo)
                                LV_STORE_HALF(ow, oe + 1u, hi)
                            }
                        } else {
                            LV_STORE_HALF(ow, oe, lo)
                        }
                    }
                }
                // every lane has read the tile before the next one is stored
                subgroupMemoryBarrierShared();
                subgroupBarrier();
            }
    }
}
