#version 450
// LayerNorm over the last dimension: out = (x - mean) / sqrt(var + eps) * weight + bias,
// var the biased variance. Two passes (mean, then the squared deviations) so a large mean
// does not cancel the variance away. Specialization constants: 0 workgroup size, 1 row
// layout (row_reduce.glsl), 2 HAS_WEIGHT, 3 HAS_BIAS (0: that binding is a placeholder),
// 4 VEC4 (units of four elements with vec4 access, as in rmsnorm.comp), 5 MODULATE (adaLN:
// no affine, then out = y * (1 + scale) + shift with scale in the weight binding and shift in
// the bias binding, one row of each per group of pc.group_rows rows), 6 ODT (out's dtype:
// f32, or f16 / bf16 written through 32-bit words, shaders/common.glsl; statistics fp32).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_layernorm.h"
#include "texel.glsl"
#include "row_reduce.glsl"

layout(constant_id = 2) const uint HAS_WEIGHT = 1;
layout(constant_id = 3) const uint HAS_BIAS = 1;
layout(constant_id = 4) const uint VEC4 = 0;
layout(constant_id = 5) const uint MODULATE = 0;
layout(constant_id = 6) const uint ODT = LV_DTYPE_F32;

// out may be the same range as x (in place): each lane writes only the elements it read,
// after the row's reductions.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; };                // 16-bit out
layout(std430, binding = 0) writeonly buffer OutW2 { uvec2 out_words2[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer W;
layout(binding = 3) uniform utextureBuffer B;

// Unit u of a row starting at element `base`: elements 4u..4u+3 (VEC4) or element u in .x
// (MASK zeroes the unused components where they would count).
const vec4 MASK = VEC4 != 0u ? vec4(1.0) : vec4(1.0, 0.0, 0.0, 0.0);
vec4 load_x(uint base, uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(X, base / 4u + u) : vec4(lv_texel_f32(X, base + u), 0.0, 0.0, 0.0);
}
// `g0` is the first element of the parameter row: 0, or the group's row for MODULATE
vec4 load_w(uint g0, uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(W, (pc.w_offset + g0) / 4u + u) : vec4(lv_texel_f32(W, pc.w_offset + g0 + u));
}
vec4 load_b(uint g0, uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(B, (pc.b_offset + g0) / 4u + u) : vec4(lv_texel_f32(B, pc.b_offset + g0 + u));
}
void store(uint base, uint u, vec4 v) {
    if (ODT != LV_DTYPE_F32) {
        if (VEC4 != 0u) out_words2[base / 4u + u] = lv_half_bits4(v, ODT);
        else LV_STORE_HALF(out_words, base + u, lv_half_bits(v.x, ODT))
    } else if (VEC4 != 0u) {
        out_data4[base / 4u + u] = v;
    } else {
        out_data[base + u] = v.x;
    }
}

float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }

void main() {
    uint row = lv_row_index();
    if (row >= pc.rows) return; // whole rows leave together: reductions stay uniform
    uint lane = lv_row_lane(), lanes = lv_row_lanes();
    uint units = VEC4 != 0u ? pc.cols / 4u : pc.cols;
    uint x0 = pc.x_offset + row * pc.cols, o0 = pc.out_offset + row * pc.cols;
    vec4 s = vec4(0.0);
    for (uint u = lane; u < units; u += lanes) s += load_x(x0, u);
    float mean = lv_row_sum(hsum(s)) / float(pc.cols);
    vec4 ss = vec4(0.0);
    for (uint u = lane; u < units; u += lanes) {
        vec4 d = (load_x(x0, u) - mean) * MASK;
        ss += d * d;
    }
    float r = inversesqrt(lv_row_sum(hsum(ss)) / float(pc.cols) + pc.eps);
    uint g0 = MODULATE != 0u ? ((row + pc.group_phase) / pc.group_rows) * pc.cols : 0u;
    for (uint u = lane; u < units; u += lanes) {
        vec4 y = (load_x(x0, u) - mean) * r;
        if (MODULATE != 0u) {
            y = y * (1.0 + load_w(g0, u)) + load_b(g0, u);
        } else {
            if (HAS_WEIGHT != 0u) y *= load_w(g0, u);
            if (HAS_BIAS != 0u) y += load_b(g0, u);
        }
        store(o0, u, y);
    }
}
