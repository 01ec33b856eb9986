#version 450
// Temporal conv over frames, kernel 3, full channel mix (w in PyTorch layout [C, C, 3]):
//   out[R, o] (+)= sum_{t in taps} sum_i w[o, i, t] * src(R, t)[i]
// with R an output pixel row and src(R, t) the same pixel of frame f + t - 1 (see
// push_temporal_conv.h). A matrix product with K = 3C whose rows of "a" are three pixel
// rows of neighbouring frames, read in place (no im2col copy).
//
// The input and the weights are uniform texel buffers (shaders/texel.glsl): on lavapipe a
// texel fetch is one vector gather, a storage-buffer load a serial loop over the 8 lanes.
// Register blocking for lavapipe (llvmpipe), where even so every load counts: a workgroup is one subgroup of 8 lanes
// owning TM rows x (8 * TN) output channels; lane l keeps TM x TN accumulators for
// channels o0 + l * TN + j. Per step of 4 input channels (VEC path) a lane loads, per
// output channel, the 12 consecutive weights w[o, i..i+3, 0..2] (3 vec4) and, for TM / 8
// rows of its own, the three taps' 4 inputs (3 vec4); subgroupShuffle with a constant lane
// hands every row to all lanes (SHUF). Without SHUF (subgroups not of 8) every lane loads
// all TM rows itself. Out-of-range taps are loaded from a valid row and multiplied by 0.
// VEC needs C % 4 == 0 and 4-aligned element offsets; VEC == 0 is the scalar general path.
// Loops other than the one over channels are unrolled (arrays stay in registers only with
// constant indices); on lavapipe all loops of an invocation together may run at most
// 65535 iterations, the wrapper checks C.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "push_temporal_conv.h"
#include "texel.glsl"

layout(local_size_x_id = 0) in;             // 8: one subgroup (SHUF), else any
layout(constant_id = 1) const uint TM = 32;  // rows per workgroup (multiple of 8 with SHUF)
layout(constant_id = 2) const uint TN = 8;   // output channels per invocation (x4 with VEC)
layout(constant_id = 3) const uint VEC = 1;
layout(constant_id = 4) const uint SHUF = 1;

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 0) buffer Out4 { vec4 o4[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer Wt;

const uint LANES = SHUF != 0u ? 8u : 1u;  // rows are spread over this many lanes
const uint TR = TM / LANES;               // rows each invocation loads per step

// Element offset of output row m's source row for tap t (a valid row in any case), and
// whether that tap contributes.
void source_row(uint m, uint t, out uint base, out float factor) {
    uint r = pc.row0 + min(m, pc.rows - 1u);
    int f = int(r / pc.pixels), p = int(r % pc.pixels);
    int s = f + int(t) - 1 + pc.frame_shift;
    bool on = (pc.tap_mask & (1u << t)) != 0u && s >= 0 && s < int(pc.src_frames) &&
              m < pc.rows;
    int local = on ? s * int(pc.pixels) + p - int(pc.in_row0) : 0;
    base = pc.in_offset + uint(local) * pc.channels;
    factor = on ? 1.0 : 0.0;
}

void main() {
    uint C = pc.channels;
    uint lane = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * TM;
    uint c0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + lane) * TN; // first output channel

    // rows this invocation loads: m0 + r * LANES + (lane with SHUF)
    uint xbase[TR * 3];
    float xon[TR * 3];
    [[unroll]] for (uint r = 0; r < TR; r++)
        [[unroll]] for (uint t = 0; t < 3u; t++)
            source_row(m0 + r * LANES + (SHUF != 0u ? gl_SubgroupInvocationID : 0u), t,
                       xbase[r * 3u + t], xon[r * 3u + t]);
    uint wrow[TN];
    [[unroll]] for (uint j = 0; j < TN; j++) wrow[j] = pc.w_offset + min(c0 + j, C - 1u) * 3u * C;

    float acc[TM * TN];
    [[unroll]] for (uint e = 0; e < TM * TN; e++) acc[e] = 0.0;

    if (VEC != 0u) {
        for (uint i = 0; i < C; i += 4u) {
            // w[o, i + u, t] = component (3u + t) of the 12 weights
            vec4 wv[TN * 3];
            [[unroll]] for (uint j = 0; j < TN; j++)
                [[unroll]] for (uint q = 0; q < 3u; q++) wv[j * 3u + q] = lv_texel_f32x4(Wt, (wrow[j] + 3u * i) / 4u + q);
            [[unroll]] for (uint r = 0; r < TR; r++) {
                vec4 xv[3];
                [[unroll]] for (uint t = 0; t < 3u; t++)
                    xv[t] = lv_texel_f32x4(X, (xbase[r * 3u + t] + i) / 4u) * xon[r * 3u + t];
                [[unroll]] for (uint l = 0; l < LANES; l++) {
                    vec4 a0 = SHUF != 0u ? subgroupShuffle(xv[0], l) : xv[0];
                    vec4 a1 = SHUF != 0u ? subgroupShuffle(xv[1], l) : xv[1];
                    vec4 a2 = SHUF != 0u ? subgroupShuffle(xv[2], l) : xv[2];
                    uint m = r * LANES + l;
                    [[unroll]] for (uint j = 0; j < TN; j++) {
                        vec4 p = wv[j * 3u], q = wv[j * 3u + 1u], s = wv[j * 3u + 2u];
                        float sum = acc[m * TN + j];
                        sum += a0.x * p.x; sum += a1.x * p.y; sum += a2.x * p.z;
                        sum += a0.y * p.w; sum += a1.y * q.x; sum += a2.y * q.y;
                        sum += a0.z * q.z; sum += a1.z * q.w; sum += a2.z * s.x;
                        sum += a0.w * s.y; sum += a1.w * s.z; sum += a2.w * s.w;
                        acc[m * TN + j] = sum;
                    }
                }
            }
        }
        [[unroll]] for (uint m = 0; m < TM; m++) {
            if (m0 + m >= pc.rows) break;
            uint row = pc.out_offset + (m0 + m) * C; // out binds this dispatch's rows
            [[unroll]] for (uint j = 0; j < TN; j += 4u) {
                if (c0 + j >= C) break;
                vec4 v = vec4(acc[m * TN + j], acc[m * TN + j + 1u], acc[m * TN + j + 2u],
                              acc[m * TN + j + 3u]);
                uint e = (row + c0 + j) / 4u;
                o4[e] = pc.accumulate != 0u ? o4[e] + v : v;
            }
        }
    } else {
        for (uint i = 0; i < C; i++) {
            float wv[TN * 3];
            [[unroll]] for (uint j = 0; j < TN; j++)
                [[unroll]] for (uint t = 0; t < 3u; t++) wv[j * 3u + t] = lv_texel_f32(Wt, wrow[j] + 3u * i + t);
            [[unroll]] for (uint r = 0; r < TR; r++) {
                float xv[3];
                [[unroll]] for (uint t = 0; t < 3u; t++) xv[t] = lv_texel_f32(X, xbase[r * 3u + t] + i) * xon[r * 3u + t];
                [[unroll]] for (uint l = 0; l < LANES; l++) {
                    float a0 = SHUF != 0u ? subgroupShuffle(xv[0], l) : xv[0];
                    float a1 = SHUF != 0u ? subgroupShuffle(xv[1], l) : xv[1];
                    float a2 = SHUF != 0u ? subgroupShuffle(xv[2], l) : xv[2];
                    uint m = r * LANES + l;
                    [[unroll]] for (uint j = 0; j < TN; j++)
                        acc[m * TN + j] += a0 * wv[j * 3u] + a1 * wv[j * 3u + 1u] + a2 * wv[j * 3u + 2u];
                }
            }
        }
        [[unroll]] for (uint m = 0; m < TM; m++) {
            if (m0 + m >= pc.rows) break;
            uint row = pc.out_offset + (m0 + m) * C; // out binds this dispatch's rows
            [[unroll]] for (uint j = 0; j < TN; j++) {
                if (c0 + j >= C) break;
                uint e = row + c0 + j;
                o[e] = pc.accumulate != 0u ? o[e] + acc[m * TN + j] : acc[m * TN + j];
            }
        }
    }
}
