#version 450
// The Wan VAE's RMS_norm over channels (channels-last rows), optionally fused with SiLU:
//   y = x / max(||x||_2, 1e-12) * sqrt(C) * gamma;  out = silu ? y / (1 + exp(-y)) : y
// (F.normalize then the scale and gamma, in that order). Specialization constants:
// 0 workgroup size, 1 row layout (row_reduce.glsl), 2 VEC4 (the host sets it when C and
// every bound offset are multiples of 4), 3 XDT and 4 ODT (x's and out's dtypes: f32, or
// f16 / bf16 as halves of words, common.glsl; the sums and the norm are f32 either way).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_vae_rmsnorm.h"
#include "texel.glsl"
#include "row_reduce.glsl"

layout(constant_id = 2) const uint VEC4 = 0;
layout(constant_id = 3) const uint XDT = LV_DTYPE_F32;
layout(constant_id = 4) const uint ODT = LV_DTYPE_F32;

// out may be the same range as x: each lane writes only elements it read, after the
// row's reduction.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; };              // 16-bit, one element
layout(std430, binding = 0) writeonly buffer OutW2 { uvec2 out_words2[]; };  // 16-bit, four
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer G;

vec4 load_x(uint base, uint u) {
    return VEC4 != 0u ? lv_texel_act4(X, base + 4u * u, XDT) : vec4(lv_texel_act(X, base + u, XDT), 0.0, 0.0, 0.0);
}
vec4 load_g(uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(G, pc.g_offset / 4u + u) : vec4(lv_texel_f32(G, pc.g_offset + u));
}
void store(uint base, uint u, vec4 v) {
    if (ODT != LV_DTYPE_F32) {
        if (VEC4 != 0u) out_words2[base / 4u + u] = lv_half_bits4(v, ODT);
        else LV_STORE_HALF(out_words, base + u, lv_half_bits(v.x, ODT))
    } else if (VEC4 != 0u) out_data4[base / 4u + u] = v;
    else out_data[base + u] = v.x;
}

void main() {
    uint row = lv_row_index();
    if (row >= pc.rows) return; // whole rows leave together: reductions stay uniform
    uint lane = lv_row_lane(), lanes = lv_row_lanes();
    uint units = VEC4 != 0u ? pc.cols / 4u : pc.cols;
    uint x0 = pc.x_offset + row * pc.cols, o0 = pc.out_offset + row * pc.cols;
    vec4 ss = vec4(0.0);
    for (uint u = lane; u < units; u += lanes) {
        vec4 v = load_x(x0, u);
        ss += v * v;
    }
    float denom = max(sqrt(lv_row_sum(ss.x + ss.y + ss.z + ss.w)), 1e-12);
    for (uint u = lane; u < units; u += lanes) {
        vec4 y = load_x(x0, u) / denom * pc.sqrt_cols * load_g(u);
        if (pc.silu != 0u) y = y / (1.0 + exp(-y));
        store(o0, u, y);
    }
}
