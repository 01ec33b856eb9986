#version 450
// The contribution of a run of tokens to the linear-attention state, per head h:
//
//   S[h][r][c] (+)= sum_n v[n][h][r] * rot_n(phi(k[n][h]))[c]       (r: value row, c: key column)
//   z[h][c]    (+)= sum_n phi(k[n][h][c])                            (never rotated)
//
// A reduction over tokens of outer products. A workgroup owns TR value rows of one head
// (row tile rt) and its lanes split the key columns in adjacent pairs (the rotation mixes
// the two members of a pair): lane l holds pairs l, l + L, ... (PP of them), so each lane
// keeps a TR x 2*PP strip of S in registers while the workgroup walks the tokens; no
// shared memory, no barriers. Row tile 0 also sums z. The token loop can be split over
// `splits` partial outputs (s_slot / z_slot apart) that linattn_combine sums, for GPUs
// that need more workgroups.
//
// Loading v[n][r0 .. r0 + TR): on CPU devices such as lavapipe (BCAST = 1, subgroups of
// 8) every buffer load costs a loop over the SIMD lanes whether or not the address is
// uniform, so each lane of a subgroup loads different rows and subgroupBroadcast hands
// them to the others (8 useful values per load). GPUs (BCAST = 0) load the uniform rows
// directly; their caches broadcast them.
//
// Rotation (rope table [tokens, D] of (cos, sin) per adjacent pair, as lv_op_rope):
//   out[2i] = x[2i] c - x[2i+1] s,  out[2i+1] = x[2i] s + x[2i+1] c.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "linattn_common.glsl"
#include "push_linattn_state.h"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TR = 32;   // value rows per workgroup (a multiple of 8 with BCAST)
layout(constant_id = 2) const uint PP = 2;    // key column pairs per lane
layout(constant_id = 3) const uint PHI = 0;   // lv_feature_map
layout(constant_id = 4) const uint ROPE = 0;  // 1: rotate phi(k) with the rope table
layout(constant_id = 5) const uint BCAST = 0; // 1: share v rows through subgroupBroadcast (subgroups of 8)

layout(std430, binding = 0) buffer SBuf { float s_data[]; };
layout(std430, binding = 1) buffer ZBuf { float z_data[]; };
layout(binding = 2) uniform utextureBuffer KT;  // texel bindings (ops.def kind 't')
layout(binding = 3) uniform utextureBuffer VT;
layout(binding = 4) uniform utextureBuffer RT;

const uint PC = 2u * PP; // key columns per lane
const uint RB = BCAST != 0u ? TR / 8u : 1u;

void main() {
    const uint D = pc.dim;
    const uint L = gl_WorkGroupSize.x;
    // workgroup index: column group fastest, then row tile, head, split
    uint wg = lv_group_index();
    uint cg = wg % pc.col_tiles;
    uint t = wg / pc.col_tiles;
    uint rt = t % pc.row_tiles;
    t /= pc.row_tiles;
    uint h = t % pc.heads;
    uint p = t / pc.heads;
    if (p >= pc.splits) return;

    uint n0 = p * pc.split_tokens;
    uint n1 = min(n0 + pc.split_tokens, pc.tokens);
    uint head = h * D;
    uint r0 = rt * TR;
    bool with_z = rt == 0u;
    // this lane's columns: pair (cg * PP + j) * L + lane -> columns 2 * pair, 2 * pair + 1;
    // out-of-range columns and rows read a clamped element and are not stored
    uint col[PC];
    [[unroll]] for (uint j = 0; j < PP; j++) {
        uint c = 2u * ((cg * PP + j) * L + gl_LocalInvocationID.x);
        col[2 * j] = min(c, D - 1u);
        col[2 * j + 1] = min(c + 1u, D - 1u);
    }
    uint vrow[RB];
    [[unroll]] for (uint m = 0; m < RB; m++) vrow[m] = min(r0 + m * 8u + gl_SubgroupInvocationID, D - 1u);

    float acc[TR * PC];
    float zacc[PC];
    [[unroll]] for (uint i = 0; i < TR * PC; i++) acc[i] = 0.0;
    [[unroll]] for (uint j = 0; j < PC; j++) zacc[j] = 0.0;

    for (uint n = n0; n < n1; n++) {
        uint base = n * pc.row_stride + head;
        float kk[PC];
        [[unroll]] for (uint j = 0; j < PC; j++) kk[j] = linattn_phi(PHI, lv_texel_f32(KT, pc.k_off + base + col[j]));
        if (with_z) [[unroll]] for (uint j = 0; j < PC; j++) zacc[j] += kk[j];
        if (ROPE != 0u) {
            uint rbase = pc.rope_off + n * D;
            [[unroll]] for (uint j = 0; j < PC; j += 2) {
                uint c = min(col[j], D - 2u); // D is even with rope
                float cs = lv_texel_f32(RT, rbase + c), sn = lv_texel_f32(RT, rbase + c + 1u);
                float a = kk[j], b = kk[j + 1];
                kk[j] = a * cs - b * sn;
                kk[j + 1] = a * sn + b * cs;
            }
        }
        if (BCAST != 0u) {
            [[unroll]] for (uint m = 0; m < RB; m++) {
                float x = lv_texel_f32(VT, pc.v_off + base + vrow[m]);
#define LINATTN_ROW(l)                                                                      \
    {                                                                                       \
        float vi = subgroupBroadcast(x, l);                                                 \
        [[unroll]] for (uint j = 0; j < PC; j++)                                            \
            acc[(m * 8u + l) * PC + j] = fma(vi, kk[j], acc[(m * 8u + l) * PC + j]);        \
    }
                LINATTN_ROW(0) LINATTN_ROW(1) LINATTN_ROW(2) LINATTN_ROW(3)
                LINATTN_ROW(4) LINATTN_ROW(5) LINATTN_ROW(6) LINATTN_ROW(7)
#undef LINATTN_ROW
            }
        } else {
            [[unroll]] for (uint i = 0; i < TR; i++) {
                float vi = lv_texel_f32(VT, pc.v_off + base + min(r0 + i, D - 1u));
                [[unroll]] for (uint j = 0; j < PC; j++) acc[i * PC + j] = fma(vi, kk[j], acc[i * PC + j]);
            }
        }
    }

    bool keep[PC];
    [[unroll]] for (uint j = 0; j < PP; j++) {
        uint c = 2u * ((cg * PP + j) * L + gl_LocalInvocationID.x);
        keep[2 * j] = c < D;
        keep[2 * j + 1] = c + 1u < D;
    }
    if (with_z) {
        uint zbase = pc.z_off + p * pc.z_slot + head;
        [[unroll]] for (uint j = 0; j < PC; j++)
            if (keep[j]) z_data[zbase + col[j]] = (pc.accumulate != 0u ? z_data[zbase + col[j]] : 0.0) + zacc[j];
    }
    uint sbase = pc.s_off + p * pc.s_slot + h * D * D;
    [[unroll]] for (uint i = 0; i < TR; i++) {
        uint r = r0 + i;
        if (r >= D) break;
        [[unroll]] for (uint j = 0; j < PC; j++) {
            if (keep[j]) {
                uint idx = sbase + r * D + col[j];
                s_data[idx] = (pc.accumulate != 0u ? s_data[idx] : 0.0) + acc[i * PC + j];
            }
        }
    }
}
