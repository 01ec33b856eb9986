#version 450
// Masked softmax attention over a short key set (cross-attention to text tokens), and,
// with specialization constant 5 CAUSAL, causal self-attention over a short sequence (a
// text encoder's): query p sees keys j <= p, within a sliding window if pc.window > 0.
// k and v may have fewer heads than q (pc.kv_heads: grouped-query attention). With
// specialization constant 6 SOFTCAP, scores are soft-capped: s = c tanh(s / c).
//
// An invocation owns QUERY_BLOCK queries of one head (query n0 + lane + i * LOCAL_SIZE
// for i < QUERY_BLOCK); a workgroup's queries all share that head. Keys go in blocks of
// KEY_BLOCK with an online softmax that keeps, per query, the running maximum m and sum l:
//   s_j = scale * q.k_j (masked keys: excluded), m' = max(m, max_j s_j),
//   acc = acc e^(m - m') + sum_j e^(s_j - m') v_j,  l = l e^(m - m') + sum_j e^(s_j - m').
// Scores are in base 2 (the scale is premultiplied by log2 e) so exp2 is used directly.
// A query with no valid key writes zeros. No N x L matrix, no shared memory, no barrier.
//
// Register blocking: each k or v element loaded is used by QUERY_BLOCK queries and each q
// or acc element by KEY_BLOCK keys. On lavapipe every buffer load inside a loop is a
// per-lane gather, so loads per FMA decide the speed.
//
// Loops over the head dimension run in unrolled steps of DIM_STEP. GPUs take DIM_STEP =
// HEAD_DIM (fully unrolled: q and acc in registers). On lavapipe they stay loops on
// purpose: fully unrolled they make its LLVM compile for minutes, and every loop
// iteration counts against a limit of 65535 per invocation (loops stop silently there);
// this shader runs about L / KEY_BLOCK * 2 * HEAD_DIM / DIM_STEP, which the wrapper checks.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "push_softmax_attention.h"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 112;
layout(constant_id = 2) const uint KEY_BLOCK = 8;
layout(constant_id = 3) const uint QUERY_BLOCK = 4;
layout(constant_id = 4) const uint DIM_STEP = 4;
layout(constant_id = 5) const uint CAUSAL = 0;
layout(constant_id = 6) const uint SOFTCAP = 0;
const uint DIM_PADDED = (HEAD_DIM + DIM_STEP - 1) / DIM_STEP * DIM_STEP;
const float LOWEST = -3.0e38; // a finite "minus infinity": e^(LOWEST - s) is 0, never NaN

layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(binding = 1) uniform utextureBuffer QT;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer KT;
layout(binding = 3) uniform utextureBuffer VT;
layout(binding = 4) uniform utextureBuffer MT;

// dimension d exists (constant true when HEAD_DIM is a multiple of DIM_STEP)
bool in_head(uint d) { return HEAD_DIM % DIM_STEP == 0u || d < HEAD_DIM; }

// tanh with a relative error of a few ulp everywhere (no cancellation near 0): the [7/6]
// Pade approximant of Lambert's continued fraction for |x| <= 1 (relative error 2.2e-12
// before rounding; positive terms only), (1 - e^-2|x|) / (1 + e^-2|x|) beyond.
float tanh_accurate(float x) {
    float a = abs(x);
    float r;
    if (a <= 1.0) {
        float x2 = a * a;
        r = a * (135135.0 + x2 * (17325.0 + x2 * (378.0 + x2))) /
            (135135.0 + x2 * (62370.0 + x2 * (3150.0 + 28.0 * x2)));
    } else {
        float t = exp(-2.0 * a);
        r = (1.0 - t) / (1.0 + t);
    }
    return x < 0.0 ? -r : r;
}

// a score in base 2 from q . k, q premultiplied by pc.scale_log2e
float score(float dot) {
    if (SOFTCAP == 0u) return dot;
    return (pc.softcap * 1.4426950408889634) * tanh_accurate(dot / pc.softcap);
}

void main() {
    uint width = pc.heads * HEAD_DIM;
    uint kv_width = pc.kv_heads * HEAD_DIM;
    uint head = gl_WorkGroupID.y;
    uint kv_head = head / (pc.heads / pc.kv_heads);
    uint first = gl_WorkGroupID.x * gl_WorkGroupSize.x * QUERY_BLOCK + gl_LocalInvocationID.x;
    if (first >= pc.n) return;

    // CAUSAL: the positions of the queries, and the keys any of them sees
    uint qpos[QUERY_BLOCK];
    [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++)
        qpos[i] = pc.q_pos0 + min(first + i * gl_WorkGroupSize.x, pc.n - 1u);
    uint j_begin = 0u, j_end = pc.l;
    if (CAUSAL != 0u) {
        j_end = min(pc.l, qpos[QUERY_BLOCK - 1u] + 1u); // the last query is the latest
        if (pc.window > 0u && qpos[0] + 1u > pc.window) j_begin = qpos[0] + 1u - pc.window;
    }

    // Queries past the end repeat the last one and are not stored.
    uint qrow[QUERY_BLOCK];
    [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++)
        qrow[i] = min(first + i * gl_WorkGroupSize.x, pc.n - 1u) * width + head * HEAD_DIM;

    float q[QUERY_BLOCK * DIM_PADDED];
    float acc[QUERY_BLOCK * DIM_PADDED];
    [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
        [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
            uint d = d0 + u;
            [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++) {
                q[i * DIM_PADDED + d] =
                    in_head(d) ? lv_texel_f32(QT, pc.q_offset + qrow[i] + d) * pc.scale_log2e : 0.0;
                acc[i * DIM_PADDED + d] = 0.0;
            }
        }
    }
    float m[QUERY_BLOCK], l[QUERY_BLOCK];
    [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++) {
        m[i] = LOWEST;
        l[i] = 0.0;
    }

    for (uint j0 = j_begin; j0 < j_end; j0 += KEY_BLOCK) {
        // keys past the end repeat the last one and count as masked
        uint krow[KEY_BLOCK];
        bool valid[KEY_BLOCK];
        [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
            uint j = min(j0 + b, pc.l - 1u);
            krow[b] = j * kv_width + kv_head * HEAD_DIM;
            valid[b] = j0 + b < pc.l && (pc.has_mask == 0u || lv_texel_f32(MT, pc.mask_offset + j) != 0.0);
        }

        float s[QUERY_BLOCK * KEY_BLOCK];
        [[unroll]] for (uint e = 0; e < QUERY_BLOCK * KEY_BLOCK; e++) s[e] = 0.0;
        [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
            [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
                uint d = d0 + u;
                if (!in_head(d)) continue;
                [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
                    float kv = lv_texel_f32(KT, pc.k_offset + krow[b] + d);
                    [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++)
                        s[i * KEY_BLOCK + b] = fma(q[i * DIM_PADDED + d], kv, s[i * KEY_BLOCK + b]);
                }
            }
        }

        // s becomes the weight e^(s - m'); m, l updated; correction kept for acc
        float correction[QUERY_BLOCK];
        [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++) {
            bool sees[KEY_BLOCK];
            [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
                uint j = j0 + b;
                sees[b] = valid[b] && (CAUSAL == 0u || (j <= qpos[i] && (pc.window == 0u ||
                                                                        qpos[i] - j < pc.window)));
                s[i * KEY_BLOCK + b] = score(s[i * KEY_BLOCK + b]);
            }
            float mnew = m[i];
            [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++)
                if (sees[b]) mnew = max(mnew, s[i * KEY_BLOCK + b]);
            correction[i] = exp2(m[i] - mnew);
            float sum = 0.0;
            [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++) {
                float p = sees[b] ? exp2(s[i * KEY_BLOCK + b] - mnew) : 0.0;
                s[i * KEY_BLOCK + b] = p;
                sum += p;
            }
            l[i] = l[i] * correction[i] + sum;
            m[i] = mnew;
        }

        [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
            [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
                uint d = d0 + u;
                if (!in_head(d)) continue;
                float vv[KEY_BLOCK];
                [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++)
                    vv[b] = lv_texel_f32(VT, pc.v_offset + krow[b] + d);
                [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++) {
                    float a = acc[i * DIM_PADDED + d] * correction[i];
                    [[unroll]] for (uint b = 0; b < KEY_BLOCK; b++)
                        a = fma(s[i * KEY_BLOCK + b], vv[b], a);
                    acc[i * DIM_PADDED + d] = a;
                }
            }
        }
    }

    [[unroll]] for (uint i = 0; i < QUERY_BLOCK; i++) {
        uint n = first + i * gl_WorkGroupSize.x;
        if (n >= pc.n) break;
        float inv = l[i] > 0.0 ? 1.0 / l[i] : 0.0;
        uint obase = pc.out_offset + n * width + head * HEAD_DIM;
        [[dont_unroll]] for (uint d0 = 0; d0 < DIM_PADDED; d0 += DIM_STEP) {
            [[unroll]] for (uint u = 0; u < DIM_STEP; u++) {
                uint d = d0 + u;
                if (in_head(d)) out_data[obase + d] = acc[i * DIM_PADDED + d] * inv;
            }
        }
    }
}
