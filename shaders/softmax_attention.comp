#version 450
// Masked softmax attention over a short key set (cross-attention to text tokens).
//
// One invocation per (query, head); a workgroup holds LOCAL_SIZE queries of one head, so
// every key and value load is the same address for the whole workgroup (a broadcast on
// lavapipe, a cached load on GPUs) and no shared memory or barrier is needed. The query
// and the output accumulator stay in the invocation; an online softmax over blocks of
// KEY_BLOCK keys keeps the running maximum m and the running sum l:
//   per block: s_j = scale * q.k_j (valid keys only), m' = max(m, max_j s_j),
//   acc *= e^(m - m'), l *= e^(m - m'), then acc += e^(s_j - m') v_j, l += e^(s_j - m').
// Scores are kept in base 2 (scale premultiplied by log2 e) so exp2 is used directly.
// Masked keys (mask == 0) are skipped; a query with no valid key writes zeros.
//
// Loops over the head dimension run in unrolled steps of DIM_STEP. Not unrolled fully on
// purpose: a fully unrolled 112-dim body makes lavapipe's LLVM compile for minutes, and
// on lavapipe every loop iteration counts against a per-invocation limit of 65535 (loops
// silently stop there), so the wrapper bounds L * 2 * D / DIM_STEP.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "push_softmax_attention.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 112;
layout(constant_id = 2) const uint KEY_BLOCK = 8;
const uint DIM_STEP = 8;
const uint DIM_STEPS = (HEAD_DIM + DIM_STEP - 1) / DIM_STEP;
const uint DIM_PADDED = DIM_STEPS * DIM_STEP;

layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 1) readonly buffer Q { float q_data[]; };
layout(std430, binding = 2) readonly buffer K { float k_data[]; };
layout(std430, binding = 3) readonly buffer V { float v_data[]; };
layout(std430, binding = 4) readonly buffer Mask { float mask_data[]; };

// dimension d exists (always true when HEAD_DIM is a multiple of DIM_STEP)
bool in_head(uint d) { return HEAD_DIM % DIM_STEP == 0u || d < HEAD_DIM; }

void main() {
    uint n = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint head = gl_WorkGroupID.y;
    if (n >= pc.n) return;
    uint width = pc.heads * HEAD_DIM;

    float q[DIM_PADDED];
    float acc[DIM_PADDED];
    uint qbase = pc.q_offset + n * width + head * HEAD_DIM;
    [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
        [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
            uint d = d0 + u;
            q[d] = in_head(d) ? q_data[qbase + d] * pc.scale_log2e : 0.0;
            acc[d] = 0.0;
        }
    }

    // m starts at the most negative finite float: e^(m - s) underflows to 0 for the first
    // block without producing inf - inf.
    float m = -3.0e38;
    float l = 0.0;
    for (uint j0 = 0; j0 < pc.l; j0 += KEY_BLOCK) {
        float s[KEY_BLOCK];
        bool valid[KEY_BLOCK];
        bool any = false;
        float mnew = m;
        [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
            uint j = j0 + b;
            valid[b] = j < pc.l && (pc.has_mask == 0u || mask_data[pc.mask_offset + j] != 0.0);
            s[b] = 0.0;
            if (valid[b]) {
                uint kbase = pc.k_offset + j * width + head * HEAD_DIM;
                float dot = 0.0;
                [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
                    [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
                        uint d = d0 + u;
                        if (in_head(d)) dot = fma(q[d], k_data[kbase + d], dot);
                    }
                }
                s[b] = dot;
                mnew = max(mnew, dot);
                any = true;
            }
        }
        if (!any) continue;
        float correction = exp2(m - mnew);
        l *= correction;
        [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP)
            [[unroll]] for (uint u = 0; u < DIM_STEP; u++) acc[d0 + u] *= correction;
        m = mnew;
        [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
            if (valid[b]) {
                float p = exp2(s[b] - m);
                l += p;
                uint vbase = pc.v_offset + (j0 + b) * width + head * HEAD_DIM;
                [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
                    [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
                        uint d = d0 + u;
                        if (in_head(d)) acc[d] = fma(p, v_data[vbase + d], acc[d]);
                    }
                }
            }
        }
    }

    float inv = l > 0.0 ? 1.0 / l : 0.0;
    uint obase = pc.out_offset + n * width + head * HEAD_DIM;
    [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
        [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
            uint d = d0 + u;
            if (in_head(d)) out_data[obase + d] = acc[d] * inv;
        }
    }
}
