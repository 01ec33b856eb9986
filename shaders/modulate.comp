#version 450
// adaLN element-wise ops with two broadcast operands p, q (LV_BCAST_*):
// modulate x * (1 + scale) + shift, and the gated residual x + gate * y.
// Specialization constants: 0 the op (LV_MOD_*); 1 VEC4 as in elementwise.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_modulate.h"
#include "texel.glsl"
#include "broadcast.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = LV_MOD_MODULATE;
layout(constant_id = 1) const uint VEC4 = 0;

// out may be the same buffer range as x, p or q when that operand is not broadcast (in
// place). Each binding is also seen as vec4s for the VEC4 path.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer P;
layout(binding = 3) uniform utextureBuffer Q;

vec4 apply(vec4 x, vec4 p, vec4 q) {
    if (KIND == LV_MOD_MODULATE) return x * (1.0 + q) + p;
    return x + q * p;
}

// element indices of p and q read by output element i
uvec2 operand_index(uint i) {
    uint row = 0u, col = 0u;
    if (pc.p_mode != LV_BCAST_FULL || pc.q_mode != LV_BCAST_FULL) {
        row = lv_fastdiv(i, pc.cols_magic, pc.cols_shift);
        col = i - row * pc.cols;
    }
    return uvec2(lv_bcast_index(i, row, col, pc.cols, pc.p_mode, pc.p_phase, pc.p_magic, pc.p_shift),
                 lv_bcast_index(i, row, col, pc.cols, pc.q_mode, pc.q_phase, pc.q_magic, pc.q_shift));
}

void scalar_element(uint i) {
    uvec2 pq = operand_index(i);
    float r = apply(vec4(lv_texel_f32(X, pc.x_offset + i)), vec4(lv_texel_f32(P, pc.p_offset + pq.x)),
                    vec4(lv_texel_f32(Q, pc.q_offset + pq.y))).x;
    out_data[pc.out_offset + i] = r;
}

void main() {
    uint j = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (VEC4 == 0u) {
        if (j < pc.count) scalar_element(j);
        return;
    }
    uint i = 4u * j;
    if (i + 4u <= pc.count) {
        uvec2 pq = operand_index(i);
        vec4 x = lv_texel_f32x4(X, (pc.x_offset + i) / 4u);
        vec4 p = lv_texel_f32x4(P, (pc.p_offset + pq.x) / 4u);
        vec4 q = lv_texel_f32x4(Q, (pc.q_offset + pq.y) / 4u);
        out_data4[(pc.out_offset + i) / 4u] = apply(x, p, q);
    } else {
        for (; i < pc.count; i++) scalar_element(i); // the last 1..3 elements
    }
}
