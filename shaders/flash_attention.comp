#version 450
// Single-head softmax attention over a long key set with an online softmax (flash
// attention): the scores of one tile of KT keys live in registers, the running max m,
// the running sum l and the output accumulator are rescaled as tiles go by; no score
// matrix is ever stored.
//
// A workgroup is one subgroup of 8 lanes and handles QB queries. Lane `lane` owns the
// dimensions d = m * 8 + lane (m < DPL) of q and of the output; a score is the
// subgroupAdd of the lanes' partial dot products. No shared memory, no barrier.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "push_flash_attention.h"
#include "texel.glsl"

layout(local_size_x = 8) in;
layout(constant_id = 0) const uint DPL = 4; // dimensions per lane: ceil(d / 8)
layout(constant_id = 1) const uint QB = 1;  // queries per workgroup
layout(constant_id = 2) const uint KT = 8;  // keys per tile
// q, k, v's dtype (IDT) and out's (ODT): f32, or f16 / bf16 as halves of words (common.glsl);
// scores, softmax and the accumulator are f32 either way
layout(constant_id = 3) const uint IDT = LV_DTYPE_F32;
layout(constant_id = 4) const uint ODT = LV_DTYPE_F32;

layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; }; // ODT 16-bit
layout(binding = 1) uniform utextureBuffer QTEX;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer KTEX;
layout(binding = 3) uniform utextureBuffer VTEX;

const float NEG_INF = -1.0 / 0.0;

void main() {
    uint lane = gl_LocalInvocationID.x;
    uint q0 = lv_group_index() * QB;
    uint D = pc.d;
    float qv[QB * DPL], ov[QB * DPL], m[QB], l[QB];
    [[unroll]] for (uint b = 0; b < QB; b++) {
        uint row = min(q0 + b, pc.nq - 1u);
        [[unroll]] for (uint t = 0; t < DPL; t++) {
            uint d = t * 8u + lane;
            qv[b * DPL + t] = d < D ? lv_texel_act(QTEX, pc.q_offset + row * D + d, IDT) * pc.scale : 0.0;
            ov[b * DPL + t] = 0.0;
        }
        m[b] = NEG_INF;
        l[b] = 0.0;
    }

    for (uint j0 = 0; j0 < pc.nk; j0 += KT) {
        float s[QB * KT];
        [[unroll]] for (uint jj = 0; jj < KT; jj++) {
            uint j = min(j0 + jj, pc.nk - 1u);
            float kv[DPL];
            [[unroll]] for (uint t = 0; t < DPL; t++) {
                uint d = t * 8u + lane;
                kv[t] = d < D ? lv_texel_act(KTEX, pc.k_offset + j * D + d, IDT) : 0.0;
            }
            [[unroll]] for (uint b = 0; b < QB; b++) {
                float part = 0.0;
                [[unroll]] for (uint t = 0; t < DPL; t++) part = fma(qv[b * DPL + t], kv[t], part);
                float sc = subgroupAdd(part);
                s[b * KT + jj] = j0 + jj < pc.nk ? sc : NEG_INF;
            }
        }
        [[unroll]] for (uint b = 0; b < QB; b++) {
            float mt = s[b * KT];
            [[unroll]] for (uint jj = 1; jj < KT; jj++) mt = max(mt, s[b * KT + jj]);
            float mn = max(m[b], mt);
            float alpha = exp(m[b] - mn); // 0 on the first tile (m = -inf)
            float psum = 0.0;
            [[unroll]] for (uint jj = 0; jj < KT; jj++) {
                float p = exp(s[b * KT + jj] - mn);
                s[b * KT + jj] = p;
                psum += p;
            }
            l[b] = l[b] * alpha + psum;
            m[b] = mn;
            [[unroll]] for (uint t = 0; t < DPL; t++) ov[b * DPL + t] *= alpha;
        }
        [[unroll]] for (uint jj = 0; jj < KT; jj++) {
            if (j0 + jj >= pc.nk) break;
            uint j = j0 + jj;
            [[unroll]] for (uint t = 0; t < DPL; t++) {
                uint d = t * 8u + lane;
                float vv = d < D ? lv_texel_act(VTEX, pc.v_offset + j * D + d, IDT) : 0.0;
                [[unroll]] for (uint b = 0; b < QB; b++)
                    ov[b * DPL + t] = fma(s[b * KT + jj], vv, ov[b * DPL + t]);
            }
        }
    }

    [[unroll]] for (uint b = 0; b < QB; b++) {
        if (q0 + b >= pc.nq) continue;
        float inv = 1.0 / l[b];
        [[unroll]] for (uint t = 0; t < DPL; t++) {
            uint d = t * 8u + lane;
            if (d >= D) continue;
            uint e = pc.out_offset + (q0 + b) * D + d;
            if (ODT != LV_DTYPE_F32) LV_STORE_HALF(out_words, e, lv_half_bits(ov[b * DPL + t] * inv, ODT))
            else out_data[e] = ov[b * DPL + t] * inv;
        }
    }
}
