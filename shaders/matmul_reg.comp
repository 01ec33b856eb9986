#version 450
// Matrix multiply, register-blocked, for CPU devices (lavapipe):
//   out[z, m, n] = sum_k a[z, m, k] * w[z?, n, k] + bias[n]
//
// Why it looks like this (measured on lavapipe / llvmpipe, LLVM 15, 8-wide SIMD):
// - a, w and bias are uniform texel buffers (shaders/texel.glsl): a texel fetch is one
//   vector gather, where a storage-buffer load is a serial loop over the 8 lanes of the
//   subgroup (~200 cycles, whatever the address pattern); 3-4x faster at the default
//   model's shapes. Even so the kernel loads as little as possible per multiply-add: each subgroup owns a TM x (8 * TN) block of outputs in registers and
//   per 8 values of k loads TN rows of w per lane (its own columns) and TM / 8 rows of a
//   per lane, which subgroupShuffle with a constant lane (a single permute) hands to all
//   lanes (subgroupBroadcast is itself a loop over the lanes there);
// - arrays live in registers only while every index is a constant, hence [[unroll]]
//   everywhere but the k loop, and a store epilogue of vec4 rows (scalar per-lane stores
//   dominate compile time).
// - lavapipe splits fma into a multiply and an add anyway, so plain s += p * q.
// Spec constant VEC selects the fast path (K % 8 == 0, 16-byte aligned rows, whole column
// tiles, vec4 loads/stores, needs SHUF); VEC == 0 is the general path (any shape, scalar
// loads, guarded stores) used for odd shapes and the column remainder.
// Spec constants ADT and ODT: a and out in f32, or 16-bit (f16 / bf16 activations,
// shaders/common.glsl): the fast path then loads 8 elements of a as one texel and stores 4
// as a uvec2; the general path stores an element by two atomics on its word. Arithmetic
// stays fp32.
// WDT may also be q8_0 or q4_K (shaders/quant.glsl): w stays in its blocks, w_off counts
// bytes, and each weight is dequantised as it is loaded (8 of one block per fast-path load).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "push_matmul.h"
#include "texel.glsl"

// the fused activation (lv_activation)
float mm_act(float v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }
vec4 mm_act4(vec4 v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }

layout(local_size_x_id = 0) in;             // invocations per workgroup (8 = one subgroup)
layout(constant_id = 1) const uint TM = 32;  // rows per workgroup, a multiple of 8
layout(constant_id = 2) const uint TN = 8;   // columns per invocation (multiple of 4 if VEC)
layout(constant_id = 3) const uint WDT = 0;  // w dtype: LV_DTYPE_F32 / F16 / BF16 / Q8_0 / Q4_K
layout(constant_id = 4) const uint VEC = 1;  // fast path, see above
layout(constant_id = 5) const uint SHUF = 1; // rows of a shared by subgroupShuffle (subgroup of 8)
layout(constant_id = 6) const uint ADT = 0;  // a dtype: LV_DTYPE_F32 / F16 / BF16
layout(constant_id = 7) const uint ODT = 0;  // out dtype: LV_DTYPE_F32 / F16 / BF16 (no accumulate)

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 0) buffer Out4 { vec4 o4[]; };
layout(std430, binding = 0) buffer OutW { uint ow[]; };    // 16-bit out: words
layout(std430, binding = 0) buffer OutW2 { uvec2 ow2[]; }; // 16-bit out: four elements
layout(binding = 1) uniform utextureBuffer A;    // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer W;
layout(binding = 3) uniform utextureBuffer Bias;
#define LV_QWORD(i) lv_texel_u32(W, i)
#include "quant.glsl"

const uint TR = TM / 8u; // rows of a each lane loads per k step

const bool WQ = WDT == LV_DTYPE_Q8_0 || WDT == LV_DTYPE_Q4_K;

// element e of w, any dtype (quantized: e counts from the view's first weight)
float w_at(uint e) {
    if (WDT == LV_DTYPE_Q8_0) return lv_q8_0_at(pc.w_off, e);
    if (WDT == LV_DTYPE_Q4_K) return lv_q4_k_at(pc.w_off, e);
    if (WDT == LV_DTYPE_F32) return lv_texel_f32(W, e);
    if (WDT == LV_DTYPE_F16) return lv_f16_at(lv_texel_u32(W, e >> 1), e);
    return lv_bf16_at(lv_texel_u32(W, e >> 1), e);
}

// element e of a, any dtype
float a_at(uint e) { return lv_texel_act(A, e, ADT); }

// a[e .. e + 7] as two vec4, e a multiple of 4 (f32) or 8 (16-bit) (VEC path)
void a_at8(uint e, out vec4 lo, out vec4 hi) {
    if (ADT == LV_DTYPE_F32) {
        lo = lv_texel_f32x4(A, e >> 2);
        hi = lv_texel_f32x4(A, (e >> 2) + 1u);
    } else {
        uvec4 t = lv_texel_u32x4(A, e >> 3);
        lo = lv_half4(t.xy, ADT);
        hi = lv_half4(t.zw, ADT);
    }
}

// w[e .. e + 7] as two vec4, e a multiple of 8 (VEC path)
void w_at8(uint e, out vec4 lo, out vec4 hi) {
    if (WDT == LV_DTYPE_Q8_0) {
        lv_q8_0_at8(pc.w_off, e, lo, hi);
    } else if (WDT == LV_DTYPE_Q4_K) {
        lv_q4_k_at8(pc.w_off, e, lo, hi);
    } else if (WDT == LV_DTYPE_F32) {
        lo = lv_texel_f32x4(W, e >> 2);
        hi = lv_texel_f32x4(W, (e >> 2) + 1u);
    } else {
        uvec4 t = lv_texel_u32x4(W, e >> 3);
        if (WDT == LV_DTYPE_F16) {
            lo = vec4(unpackHalf2x16(t.x), unpackHalf2x16(t.y));
            hi = vec4(unpackHalf2x16(t.z), unpackHalf2x16(t.w));
        } else {
            uvec4 l = t << 16, h = t & 0xffff0000u;
            lo = uintBitsToFloat(uvec4(l.x, h.x, l.y, h.y));
            hi = uintBitsToFloat(uvec4(l.z, h.z, l.w, h.w));
        }
    }
}

void main() {
    uint L = gl_WorkGroupSize.x;
    uint lane = gl_LocalInvocationID.x;
    uint sl = gl_SubgroupInvocationID;
    uint m0 = gl_WorkGroupID.y * TM;
    uint n0 = gl_WorkGroupID.x * TN * L + lane * TN; // this invocation's first column
    uint z = gl_WorkGroupID.z;
    uint abase = pc.a_off + z * pc.a_batch;
    uint wbase = (WQ ? 0u : pc.w_off) + z * pc.w_batch;

    // row starts; loads of rows/columns past the edge are clamped, their results unused
    uint arow[TR];
    [[unroll]] for (uint r = 0; r < TR; r++)
        arow[r] = abase + min(m0 + r * 8u + (SHUF != 0u ? sl : 0u), pc.M - 1u) * pc.K;
    uint wrow[TN];
    [[unroll]] for (uint j = 0; j < TN; j++) wrow[j] = wbase + min(n0 + j, pc.N - 1u) * pc.K;

    float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] = 0.0;

    if (VEC != 0u) {
        for (uint k = 0; k < pc.K; k += 8u) {
            vec4 w0[TN], w1[TN];
            [[unroll]] for (uint j = 0; j < TN; j++) w_at8(wrow[j] + k, w0[j], w1[j]);
            [[unroll]] for (uint r = 0; r < TR; r++) {
                vec4 x0, x1;
                a_at8(arow[r] + k, x0, x1);
                // row (8 r + l): lane l's a values, shuffled to every lane
#define LV_MM_ROW(l)                                                                      \
                {                                                                         \
                    vec4 p = subgroupShuffle(x0, l), q = subgroupShuffle(x1, l);          \
                    [[unroll]] for (uint j = 0; j < TN; j++) {                            \
                        float s = acc[(r * 8u + l) * TN + j];                             \
                        s += p.x * w0[j].x; s += p.y * w0[j].y;                           \
                        s += p.z * w0[j].z; s += p.w * w0[j].w;                           \
                        s += q.x * w1[j].x; s += q.y * w1[j].y;                           \
                        s += q.z * w1[j].z; s += q.w * w1[j].w;                           \
                        acc[(r * 8u + l) * TN + j] = s;                                   \
                    }                                                                     \
                }
                LV_MM_ROW(0) LV_MM_ROW(1) LV_MM_ROW(2) LV_MM_ROW(3)
                LV_MM_ROW(4) LV_MM_ROW(5) LV_MM_ROW(6) LV_MM_ROW(7)
#undef LV_MM_ROW
            }
        }
        vec4 b[(TN + 3u) / 4u];
        [[unroll]] for (uint j = 0; j < TN / 4u; j++) {
            b[j] = vec4(0.0);
            if (pc.has_bias != 0u) b[j] = lv_texel_f32x4(Bias, (pc.bias_off + n0) / 4u + j); // only when bound
        }
        uint obase = pc.out_off + z * pc.out_batch + n0;
        [[unroll]] for (uint i = 0; i < TM; i++) {
            if (m0 + i < pc.M) {
                uint row = (obase + (m0 + i) * pc.ldo) / 4u;
                [[unroll]] for (uint j = 0; j < TN / 4u; j++)
                {
                    vec4 r = mm_act4(vec4(acc[i * TN + 4u * j], acc[i * TN + 4u * j + 1u],
                                          acc[i * TN + 4u * j + 2u], acc[i * TN + 4u * j + 3u]) + b[j]);
                    if (ODT != LV_DTYPE_F32) {
                        ow2[row + j] = lv_half_bits4(r, ODT);
                        continue;
                    }
                    if (pc.accumulate != 0u) r += o4[row + j];
                    o4[row + j] = r;
                }
            }
        }
    } else {
        for (uint k = 0; k < pc.K; k++) {
            float wv[TN];
            [[unroll]] for (uint j = 0; j < TN; j++) wv[j] = w_at(wrow[j] + k);
            [[unroll]] for (uint r = 0; r < TR; r++) {
                if (SHUF != 0u) {
                    float x = a_at(arow[r] + k);
#define LV_MM_ROW(l)                                                                      \
                    {                                                                     \
                        float p = subgroupShuffle(x, l);                                  \
                        [[unroll]] for (uint j = 0; j < TN; j++)                          \
                            acc[(r * 8u + l) * TN + j] += p * wv[j];                      \
                    }
                    LV_MM_ROW(0) LV_MM_ROW(1) LV_MM_ROW(2) LV_MM_ROW(3)
                    LV_MM_ROW(4) LV_MM_ROW(5) LV_MM_ROW(6) LV_MM_ROW(7)
#undef LV_MM_ROW
                } else {
                    // no subgroup of 8 to share through: every lane reads the rows itself
                    [[unroll]] for (uint l = 0; l < 8u; l++) {
                        float p = a_at(abase + min(m0 + r * 8u + l, pc.M - 1u) * pc.K + k);
                        [[unroll]] for (uint j = 0; j < TN; j++) acc[(r * 8u + l) * TN + j] += p * wv[j];
                    }
                }
            }
        }
        uint obase = pc.out_off + z * pc.out_batch;
        [[unroll]] for (uint j = 0; j < TN; j++) {
            uint n = n0 + j;
            float bj = 0.0;
            if (pc.has_bias != 0u) bj = lv_texel_f32(Bias, pc.bias_off + min(n, pc.N - 1u));
            [[unroll]] for (uint i = 0; i < TM; i++)
                if (m0 + i < pc.M && n < pc.N) {
                    uint e = obase + (m0 + i) * pc.ldo + n;
                    if (ODT != LV_DTYPE_F32) LV_STORE_HALF(ow, e, lv_half_bits(mm_act(acc[i * TN + j] + bj), ODT))
                    else o[e] = mm_act(acc[i * TN + j] + bj) + (pc.accumulate != 0u ? o[e] : 0.0);
                }
        }
    }
}
