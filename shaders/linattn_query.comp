#version 450
// Queries read a linear-attention state, per token n and head h:
//
//   o[n][h][r] = sum_c S[h][r][c] * rot_n(phi(q[n][h]))[c]
//                [ / (sum_c z[h][c] * phi(q[n][h][c]) + eps) ]    (denominator unrotated)
//
// A workgroup owns TR value rows of one head (row tile rt) and L * TT tokens; lane l holds
// tokens l, l + L, ... (TT of them) with their TR outputs in registers, and the workgroup
// walks the key columns in adjacent pairs (the rotation mixes a pair). No shared memory.
//
// The S elements are the same for every lane. On CPU devices such as lavapipe (BCAST = 1,
// subgroups of 8) every buffer load costs a loop over the SIMD lanes, so each lane of a
// subgroup loads different rows and subgroupBroadcast hands them to the others; GPUs
// (BCAST = 0) load them directly and let their caches broadcast.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "linattn_common.glsl"
#include "push_linattn_query.h"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 4;        // tokens per lane
layout(constant_id = 2) const uint TR = 32;       // value rows per workgroup (a multiple of 8 with BCAST)
layout(constant_id = 3) const uint PHI = 0;       // lv_feature_map
layout(constant_id = 4) const uint ROPE = 0;      // 1: rotate phi(q) in the numerator
layout(constant_id = 5) const uint NORMALIZE = 0; // 1: divide by z . phi(q) + eps
layout(constant_id = 6) const uint BCAST = 0;     // 1: share S rows through subgroupBroadcast

layout(std430, binding = 0) writeonly buffer OBuf { float o_data[]; };
layout(binding = 1) uniform utextureBuffer QT;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer ST;
layout(binding = 3) uniform utextureBuffer ZT;
layout(binding = 4) uniform utextureBuffer RT;

const uint RB = BCAST != 0u ? TR / 8u : 1u;

void main() {
    const uint D = pc.dim;
    const uint L = gl_WorkGroupSize.x;
    // workgroup index: row tile fastest, then head, then token tile
    uint wg = lv_group_index();
    uint rt = wg % pc.row_tiles;
    uint t = wg / pc.row_tiles;
    uint h = t % pc.heads;
    uint tt = t / pc.heads;
    if (tt >= pc.token_tiles) return;

    uint r0 = rt * TR;
    uint head = h * D;
    uint sbase = pc.s_off + h * D * D;
    uint zbase = pc.z_off + head;
    uint qbase[TT], rbase[TT];
    [[unroll]] for (uint a = 0; a < TT; a++) {
        uint n = min((tt * TT + a) * L + gl_LocalInvocationID.x, pc.tokens - 1u);
        qbase[a] = pc.q_off + n * pc.row_stride + head;
        rbase[a] = pc.rope_off + n * D;
    }
    uint srow[RB]; // with BCAST: the S rows this lane loads for its subgroup
    [[unroll]] for (uint m = 0; m < RB; m++) srow[m] = sbase + min(r0 + m * 8u + gl_SubgroupInvocationID, D - 1u) * D;

    float acc[TT * TR];
    float den[TT];
    [[unroll]] for (uint i = 0; i < TT * TR; i++) acc[i] = 0.0;
    [[unroll]] for (uint a = 0; a < TT; a++) den[a] = 0.0;

    for (uint c = 0; c < D; c += 2u) {
        bool pair = c + 1u < D;        // false only for the last column of an odd D
        uint c1 = pair ? c + 1u : c;
        float qa[TT], qb[TT];
        float z0 = 0.0, z1 = 0.0;
        if (NORMALIZE != 0u) {
            z0 = lv_texel_f32(ZT, zbase + c);
            z1 = pair ? lv_texel_f32(ZT, zbase + c1) : 0.0;
        }
        [[unroll]] for (uint a = 0; a < TT; a++) {
            float x0 = linattn_phi(PHI, lv_texel_f32(QT, qbase[a] + c));
            float x1 = pair ? linattn_phi(PHI, lv_texel_f32(QT, qbase[a] + c1)) : 0.0;
            if (NORMALIZE != 0u) den[a] += z0 * x0 + z1 * x1;
            if (ROPE != 0u) {
                float cs = lv_texel_f32(RT, rbase[a] + c), sn = lv_texel_f32(RT, rbase[a] + c + 1u);
                float y0 = x0 * cs - x1 * sn;
                x1 = x0 * sn + x1 * cs;
                x0 = y0;
            }
            qa[a] = x0;
            qb[a] = x1;
        }
        if (BCAST != 0u) {
            [[unroll]] for (uint m = 0; m < RB; m++) {
                float sa = lv_texel_f32(ST, srow[m] + c);
                float sb = pair ? lv_texel_f32(ST, srow[m] + c1) : 0.0;
#define LINATTN_ROW(l)                                                                      \
    {                                                                                       \
        float s0 = subgroupBroadcast(sa, l), s1 = subgroupBroadcast(sb, l);                 \
        [[unroll]] for (uint a = 0; a < TT; a++)                                            \
            acc[a * TR + m * 8u + l] = fma(s1, qb[a], fma(s0, qa[a], acc[a * TR + m * 8u + l])); \
    }
                LINATTN_ROW(0) LINATTN_ROW(1) LINATTN_ROW(2) LINATTN_ROW(3)
                LINATTN_ROW(4) LINATTN_ROW(5) LINATTN_ROW(6) LINATTN_ROW(7)
#undef LINATTN_ROW
            }
        } else {
            [[unroll]] for (uint i = 0; i < TR; i++) {
                uint row = sbase + min(r0 + i, D - 1u) * D;
                float s0 = lv_texel_f32(ST, row + c);
                float s1 = pair ? lv_texel_f32(ST, row + c1) : 0.0;
                [[unroll]] for (uint a = 0; a < TT; a++)
                    acc[a * TR + i] = fma(s1, qb[a], fma(s0, qa[a], acc[a * TR + i]));
            }
        }
    }

    [[unroll]] for (uint a = 0; a < TT; a++) {
        uint n = (tt * TT + a) * L + gl_LocalInvocationID.x;
        if (n >= pc.tokens) continue;
        float d = NORMALIZE != 0u ? den[a] + pc.eps : 1.0;
        uint obase = pc.o_off + n * pc.row_stride + head;
        [[unroll]] for (uint i = 0; i < TR; i++) {
            uint r = r0 + i;
            if (r < D) o_data[obase + r] = NORMALIZE != 0u ? acc[a * TR + i] / d : acc[a * TR + i];
        }
    }
}
