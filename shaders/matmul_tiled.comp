#version 450
// Matrix multiply with shared-memory tiles, for GPUs:
//   out[z, m, n] = sum_k a[z, m, k] * w[z?, n, k] + bias[n]
//
// A workgroup computes a BM x BN block of out. Per step of BK values of k, its invocations
// copy a BM x BK block of a and a BN x BK block of w (widened to fp32) into shared memory,
// k-major, reading the buffers along k (rows are K-contiguous), then each invocation
// accumulates a TM x TN micro-tile in registers from the shared blocks. Rows and columns of
// a micro-tile are BM / TM (BN / TN) apart so that neighbouring invocations read neighbouring
// shared words. Any M, N, K: loads past an edge read zero, stores past an edge are skipped.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "push_matmul.h"

// the fused activation (lv_activation)
float mm_act(float v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }
vec4 mm_act4(vec4 v) { return pc.act == 1u ? v / (1.0 + exp(-v)) : v; }

layout(local_size_x_id = 0) in;              // (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const uint WDT = 0;  // w dtype: LV_DTYPE_F32 / F16 / BF16 / Q8_0 / Q4_K (quant.glsl)
layout(constant_id = 7) const uint ADT = 0;  // a dtype (16-bit: words, shaders/common.glsl)
layout(constant_id = 8) const uint ODT = 0;  // out dtype (16-bit: stored by atomics on words; no accumulate)

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 0) buffer OutW { uint ow[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 2) readonly buffer W { uint w[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
#define LV_QWORD(i) w[i]
#include "quant.glsl"

// k-major blocks; the padding (+1) spreads the column-wise stores over the banks
shared float As[BK * (BM + 1u)];
shared float Ws[BK * (BN + 1u)];

const bool WQ = WDT == LV_DTYPE_Q8_0 || WDT == LV_DTYPE_Q4_K;

// element e of w (quantized: e counts from the view's first weight, w_off in bytes)
float w_at(uint e) {
    if (WDT == LV_DTYPE_Q8_0) return lv_q8_0_at(pc.w_off, e);
    if (WDT == LV_DTYPE_Q4_K) return lv_q4_k_at(pc.w_off, e);
    if (WDT == LV_DTYPE_F32) return uintBitsToFloat(w[e]);
    if (WDT == LV_DTYPE_F16) return lv_f16_at(w[e >> 1], e);
    return lv_bf16_at(w[e >> 1], e);
}

void main() {
    const uint NT = gl_WorkGroupSize.x;
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % (BN / TN), ty = tid / (BN / TN);
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint abase = pc.a_off + z * pc.a_batch;
    uint wbase = (WQ ? 0u : pc.w_off) + z * pc.w_batch;

    float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

    for (uint k0 = 0; k0 < pc.K; k0 += BK) {
        // consecutive invocations read consecutive k of one row
        [[unroll]] for (uint t = 0; t < (BM * BK + NT - 1u) / NT; t++) {
            uint e = tid + t * NT;
            uint r = e / BK, kk = e % BK, m = m0 + r, k = k0 + kk;
            float v = 0.0;
            if (m < pc.M && k < pc.K) { // no read past the edge
                uint ea = abase + m * pc.K + k;
                v = ADT == LV_DTYPE_F32 ? a[ea] : lv_half_at(aw[ea >> 1], ea, ADT);
            }
            if (e < BM * BK) As[kk * (BM + 1u) + r] = v;
        }
        [[unroll]] for (uint t = 0; t < (BN * BK + NT - 1u) / NT; t++) {
            uint e = tid + t * NT;
            uint c = e / BK, kk = e % BK, n = n0 + c, k = k0 + kk;
            float v = 0.0;
            if (n < pc.N && k < pc.K) v = w_at(wbase + n * pc.K + k);
            if (e < BN * BK) Ws[kk * (BN + 1u) + c] = v;
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk++) {
            float ar[TM], wr[TN];
            [[unroll]] for (uint i = 0; i < TM; i++) ar[i] = As[kk * (BM + 1u) + ty + i * (BM / TM)];
            [[unroll]] for (uint j = 0; j < TN; j++) wr[j] = Ws[kk * (BN + 1u) + tx + j * (BN / TN)];
            [[unroll]] for (uint i = 0; i < TM; i++)
                [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] = fma(ar[i], wr[j], acc[i * TN + j]);
        }
        barrier();
    }

    uint obase = pc.out_off + z * pc.out_batch;
    [[unroll]] for (uint j = 0; j < TN; j++) {
        uint n = n0 + tx + j * (BN / TN);
        float b = 0.0;
        if (pc.has_bias != 0u) b = bias[pc.bias_off + min(n, pc.N - 1u)];
        [[unroll]] for (uint i = 0; i < TM; i++) {
            uint m = m0 + ty + i * (BM / TM);
            if (m < pc.M && n < pc.N) {
                uint e = obase + m * pc.ldo + n;
                if (ODT != LV_DTYPE_F32) LV_STORE_HALF(ow, e, lv_half_bits(mm_act(acc[i * TN + j] + b), ODT))
                else o[e] = mm_act(acc[i * TN + j] + b) + (pc.accumulate != 0u ? o[e] : 0.0);
            }
        }
    }
}
