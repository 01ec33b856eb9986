#version 450
// The columns of the VAE's convolutions as a matrix (push_vae_im2col.h), for the
// tensor-core path: the convolution becomes one matrix product (engine/ops/ops_vae.c), as
// ggml's Vulkan backend does its 2-D convs. Each invocation writes 4 consecutive columns of
// one output pixel (VEC: ci % 4 == 0, so they share the tap and read one vec4 of the source)
// or one. Zeros outside the (optionally 2x nearest-upsampled) frame and for an absent frame.
// col is f32, or f16 / bf16 written as 32-bit words (ODT): the matrix product reads it so.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_vae_im2col.h"
#include "texel.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KS = 3;                // spatial kernel size (3 or 1)
layout(constant_id = 1) const uint UP = 0;                // 1: the source is read 2x nearest-upsampled
layout(constant_id = 2) const uint VEC = 1;               // 4 columns an invocation
layout(constant_id = 3) const uint ODT = LV_DTYPE_F32;    // col: f32, or f16 / bf16 in 32-bit words
layout(constant_id = 4) const uint DOWN = 0;              // 1: stride 2, padded after the frame only
layout(constant_id = 5) const uint IDT = LV_DTYPE_F32;    // the source frames: f32, or f16 / bf16

layout(std430, binding = 0) writeonly buffer Col { float col_data[]; };
layout(std430, binding = 0) writeonly buffer Col4 { vec4 col_data4[]; };
layout(std430, binding = 0) buffer ColW { uint col_words[]; };               // 16-bit, one element
layout(std430, binding = 0) writeonly buffer ColW2 { uvec2 col_words2[]; };  // 16-bit, four
layout(binding = 1) uniform utextureBuffer IN0;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer IN1;
layout(binding = 3) uniform utextureBuffer IN2;

vec4 load_src(uint f, uint idx) {
    if (VEC != 0u)
        return f == 0u ? lv_texel_act4(IN0, idx, IDT) : (f == 1u ? lv_texel_act4(IN1, idx, IDT) : lv_texel_act4(IN2, idx, IDT));
    return vec4(f == 0u ? lv_texel_act(IN0, idx, IDT) : (f == 1u ? lv_texel_act(IN1, idx, IDT) : lv_texel_act(IN2, idx, IDT)),
                0.0, 0.0, 0.0);
}

void main() {
    uint g = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= pc.groups) return;
    uint n = VEC != 0u ? 4u : 1u;
    uint e = g * n;                            // first col element of this invocation
    uint K = pc.kt * KS * KS * pc.ci;
    uint p = e / K, k = e - p * K;             // output pixel (of this dispatch), column
    uint vw = pc.src_w << UP, vh = pc.src_h << UP; // the source as read (upsampled or not)
    uint ow = DOWN != 0u ? pc.src_w >> 1 : vw;
    uint row = p / ow, x = p - row * ow;
    uint tap = k / pc.ci, i = k - tap * pc.ci;
    uint f = tap / (KS * KS), t2 = tap - f * KS * KS;
    uint dy = t2 / KS, dx = t2 - dy * KS;
    int P = int(KS / 2u);
    int uy = int(pc.out_row0 + row) + int(dy) - P, ux = int(x) + int(dx) - P;
    if (DOWN != 0u) {
        uy = 2 * int(pc.out_row0 + row) + int(dy);
        ux = 2 * int(x) + int(dx);
    }
    vec4 v = vec4(0.0);
    if ((pc.flags & (1u << f)) != 0u && uy >= 0 && uy < int(vh) && ux >= 0 && ux < int(vw)) {
        uint sy = uint(uy) >> UP, sx = uint(ux) >> UP;
        uint ioff = f == 0u ? pc.in_off0 : (f == 1u ? pc.in_off1 : pc.in_off2);
        v = load_src(f, ioff + ((sy - pc.in_row0) * pc.src_w + sx) * pc.ci + i);
    }
    uint at = pc.col_off + e;
    if (VEC != 0u) {
        if (ODT != LV_DTYPE_F32) col_words2[at / 4u] = lv_half_bits4(v, ODT);
        else col_data4[at / 4u] = v;
    } else {
        if (ODT != LV_DTYPE_F32) LV_STORE_HALF(col_words, at, lv_half_bits(v.x, ODT))
        else col_data[at] = v.x;
    }
}
