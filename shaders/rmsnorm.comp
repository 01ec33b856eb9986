#version 450
// RMSNorm over the last dimension: out = x / sqrt(mean(x^2) + eps) * weight.
// Specialization constants: 0 workgroup size, 1 row layout (row_reduce.glsl),
// 2 HAS_WEIGHT (0: the weight binding is a placeholder and is not read), 3 VEC4 (rows are
// walked in units of four elements with vec4 access; the host sets it when C and every
// bound offset are multiples of 4).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_rmsnorm.h"
#include "texel.glsl"
#include "row_reduce.glsl"

layout(constant_id = 2) const uint HAS_WEIGHT = 1;
layout(constant_id = 3) const uint VEC4 = 0;

// out may be the same range as x (in place): each lane writes only the elements it read,
// after the row's reduction.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer W;

// Unit u of a row starting at element `base`: elements 4u..4u+3 (VEC4) or element u in .x.
vec4 load_x(uint base, uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(X, base / 4u + u) : vec4(lv_texel_f32(X, base + u), 0.0, 0.0, 0.0);
}
vec4 load_w(uint u) {
    return VEC4 != 0u ? lv_texel_f32x4(W, pc.w_offset / 4u + u) : vec4(lv_texel_f32(W, pc.w_offset + u));
}
void store(uint base, uint u, vec4 v) {
    if (VEC4 != 0u) out_data4[base / 4u + u] = v;
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
    float r = inversesqrt(lv_row_sum(ss.x + ss.y + ss.z + ss.w) / float(pc.cols) + pc.eps);
    for (uint u = lane; u < units; u += lanes) {
        vec4 y = load_x(x0, u) * r;
        if (HAS_WEIGHT != 0u) y *= load_w(u);
        store(o0, u, y);
    }
}
