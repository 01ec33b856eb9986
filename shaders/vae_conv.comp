#version 450
// The VAE's convolutions (engine/ops/ops_vae.c): causal 3x3x3 and 3x1x1 convs over three
// input frames, and per-frame 3x3 convs, optionally on the 2x nearest-upsampled source
// (the decoder's Resample) or with stride 2 (the encoder's). Channels-last. One dispatch
// computes a band of rows of one output frame:
//
//   out[y, x, o] = bias[o] (+ res[y, x, o])
//                + sum_{f, dy, dx, i} w[o, f, dy, dx, i] * in_f[(y + dy - P) >> UP, (x + dx - P) >> UP, i]
//
// with zeros outside the (upsampled) frame, P = KS / 2, and w packed [Co, kt, KS, KS, Ci].
// DOWN = 1 reads in_f[2y + dy, 2x + dx, i] instead (no padding before the frame, zeros past
// its end: the encoder's ZeroPad2d((0, 1, 0, 1)) then a stride-2 conv; out is H/2 x W/2).
//
// Register blocking as in matmul_reg.comp, no shared memory (lavapipe runs barriers and
// shared memory slowly): a workgroup is one subgroup of 8 lanes and covers 8 consecutive
// output pixels of TR rows times 8 * TN output channels. Every lane keeps all 8 * TR
// pixels times its TN channels (o = n0 + j * 8 + lane) in registers. Per tap and group of
// 4 input channels, each lane loads the input vector of its own pixel and the weight
// vectors of its channels; input vectors reach the other lanes by subgroupBroadcast.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "push_vae_conv.h"
#include "texel.glsl"

layout(local_size_x = 8) in;
layout(constant_id = 0) const uint TR = 1;  // output rows per workgroup
layout(constant_id = 1) const uint TN = 4;  // output channels per lane
layout(constant_id = 2) const uint KS = 3;  // spatial kernel size (3 or 1)
layout(constant_id = 3) const uint UP = 0;  // 1: the source is read 2x nearest-upsampled
layout(constant_id = 4) const uint VEC = 1; // 1: channels in vec4 units (the host checks
                                            // ci % 4 == 0 and 4-aligned offsets)
layout(constant_id = 5) const uint DOWN = 0; // 1: stride 2, padded after the frame only
// The activations' dtypes (f32, or f16 / bf16 as halves of words: common.glsl): IDT of the
// three input frames, ODT of out and the residual. Arithmetic is f32 either way.
layout(constant_id = 6) const uint IDT = LV_DTYPE_F32;
layout(constant_id = 7) const uint ODT = LV_DTYPE_F32;

// out is also read when the residual binding aliases it (in place): each element is
// read and then written by the same invocation.
layout(std430, binding = 0) buffer Out { float out_data[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; }; // ODT 16-bit: halves of words
layout(binding = 1) uniform utextureBuffer IN0;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer IN1;
layout(binding = 3) uniform utextureBuffer IN2;
layout(binding = 4) uniform utextureBuffer WT;
layout(binding = 5) uniform utextureBuffer BIAS;
layout(binding = 6) uniform utextureBuffer RES;

const uint L = 8u;

// Source element(s) at `idx` of input frame f (f is a constant after inlining).
vec4 load_src(uint f, uint idx) {
    if (VEC != 0u)
        return f == 0u ? lv_texel_act4(IN0, idx, IDT) : (f == 1u ? lv_texel_act4(IN1, idx, IDT) : lv_texel_act4(IN2, idx, IDT));
    return vec4(f == 0u ? lv_texel_act(IN0, idx, IDT) : (f == 1u ? lv_texel_act(IN1, idx, IDT) : lv_texel_act(IN2, idx, IDT)),
                0.0, 0.0, 0.0);
}

vec4 load_w(uint idx) {
    if (VEC != 0u) return lv_texel_f32x4(WT, idx >> 2);
    return vec4(lv_texel_f32(WT, idx), 0.0, 0.0, 0.0);
}

void main() {
    uint lane = gl_LocalInvocationID.x;
    uint VW = pc.src_w << UP, VH = pc.src_h << UP; // the source as read (upsampled or not)
    uint OW = DOWN != 0u ? pc.src_w >> 1 : VW;
    uint x0 = gl_WorkGroupID.x * L;
    uint r0 = gl_WorkGroupID.y * TR; // relative to out_row0
    uint n0 = gl_WorkGroupID.z * TN * L;
    int P = int(KS / 2u);
    uint wstride = pc.kt * KS * KS * pc.ci;
    uint units = VEC != 0u ? pc.ci / 4u : pc.ci;
    uint ustep = VEC != 0u ? 4u : 1u;

    uint wrow[TN];
    [[unroll]] for (uint j = 0; j < TN; j++)
        wrow[j] = pc.w_off + min(n0 + j * L + lane, pc.co - 1u) * wstride;

    float acc[TR * L * TN];
    [[unroll]] for (uint k = 0; k < TR * L * TN; k++) acc[k] = 0.0;

    int ox = int(x0 + lane);
    [[unroll]] for (uint f = 0; f < 3u; f++) {
        if ((pc.flags & (1u << f)) == 0u) continue;
        uint ioff = f == 0u ? pc.in_off0 : (f == 1u ? pc.in_off1 : pc.in_off2);
        for (uint ky = 0; ky < KS; ky++) {
            uint rowbase[TR];
            bool rvalid[TR];
            [[unroll]] for (uint r = 0; r < TR; r++) {
                int oy = int(pc.out_row0 + min(r0 + r, pc.rows - 1u));
                int uy = DOWN != 0u ? 2 * oy + int(ky) : oy + int(ky) - P;
                rvalid[r] = uy >= 0 && uy < int(VH);
                uint sy = uint(clamp(uy, 0, int(VH) - 1)) >> UP;
                rowbase[r] = ioff + (sy - pc.in_row0) * pc.src_w * pc.ci;
            }
            for (uint kx = 0; kx < KS; kx++) {
                int ux = DOWN != 0u ? 2 * ox + int(kx) : ox + int(kx) - P;
                bool xvalid = ux >= 0 && ux < int(VW);
                uint sx = uint(clamp(ux, 0, int(VW) - 1)) >> UP;
                uint abase[TR];
                bool valid[TR];
                [[unroll]] for (uint r = 0; r < TR; r++) {
                    abase[r] = rowbase[r] + sx * pc.ci;
                    valid[r] = rvalid[r] && xvalid;
                }
                uint wtap = ((f * KS + ky) * KS + kx) * pc.ci;
                for (uint u = 0; u < units; u++) {
                    uint i = u * ustep;
                    vec4 wv[TN];
                    [[unroll]] for (uint j = 0; j < TN; j++) wv[j] = load_w(wrow[j] + wtap + i);
                    [[unroll]] for (uint r = 0; r < TR; r++) {
                        vec4 a = load_src(f, abase[r] + i);
                        a = valid[r] ? a : vec4(0.0);
#define PIX(l) {                                                                           \
                        vec4 p = subgroupBroadcast(a, l);                                  \
                        [[unroll]] for (uint j = 0; j < TN; j++) {                         \
                            float s = acc[(r * L + l) * TN + j];                           \
                            s = fma(p.x, wv[j].x, s);                                      \
                            if (VEC != 0u) {                                               \
                                s = fma(p.y, wv[j].y, s);                                  \
                                s = fma(p.z, wv[j].z, s);                                  \
                                s = fma(p.w, wv[j].w, s);                                  \
                            }                                                              \
                            acc[(r * L + l) * TN + j] = s;                                 \
                        } }
                        PIX(0) PIX(1) PIX(2) PIX(3) PIX(4) PIX(5) PIX(6) PIX(7)
#undef PIX
                    }
                }
            }
        }
    }

    bool has_bias = (pc.flags & 8u) != 0u, has_res = (pc.flags & 16u) != 0u;
    [[unroll]] for (uint j = 0; j < TN; j++) {
        uint n = n0 + j * L + lane;
        if (n >= pc.co) continue;
        float b = has_bias ? lv_texel_f32(BIAS, pc.bias_off + n) : 0.0;
        [[unroll]] for (uint r = 0; r < TR; r++) {
            uint row = r0 + r;
            if (row >= pc.rows) continue;
            [[unroll]] for (uint l = 0; l < L; l++) {
                uint x = x0 + l;
                if (x >= OW) continue;
                uint idx = (row * OW + x) * pc.co + n;
                float v = acc[(r * L + l) * TN + j] + b;
                if (has_res) v += lv_texel_act(RES, pc.res_off + idx, ODT);
                if (ODT != LV_DTYPE_F32) LV_STORE_HALF(out_words, pc.out_off + idx, lv_half_bits(v, ODT))
                else out_data[pc.out_off + idx] = v;
            }
        }
    }
}
