#version 450
// Rotary embedding on adjacent pairs from a (cos, sin) table [N, D]: one invocation per
// (token, unit of the head's dims), looping over the H heads so the table entry is read
// once. Specialization constant 0, VEC4: a unit is two pairs read as one vec4 (the host
// sets it when D and every bound offset are multiples of 4); otherwise one pair.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_rope3d.h"
#include "texel.glsl"
#include "fastdiv.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint VEC4 = 0;
layout(constant_id = 1) const uint HALF = 0;

// out may be the same range as x (in place): each invocation reads its elements, then
// writes them.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer T;

void main() {
    uint p = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (p >= pc.units) return;
    uint n = lv_fastdiv(p, pc.unit_magic, pc.unit_shift); // token
    uint e = 2u * (p - n * pc.head_units) * (VEC4 != 0u ? 2u : 1u); // first dim of the unit
    uint dim = 2u * pc.half_dim;
    uint t = pc.t_offset + n * dim + e;
    uint x0 = n * pc.heads * dim + e;
    if (HALF != 0u) {
        uint j = p - n * pc.head_units; // the pair
        float c = lv_texel_f32(T, pc.t_offset + n * dim + 2u * j);
        float s = lv_texel_f32(T, pc.t_offset + n * dim + 2u * j + 1u);
        for (uint h = 0u; h < pc.heads; h++) {
            uint xi = n * pc.heads * dim + h * dim + j;
            float a = lv_texel_f32(X, pc.x_offset + xi);
            float b = lv_texel_f32(X, pc.x_offset + xi + pc.half_dim);
            out_data[pc.out_offset + xi] = a * c - b * s;
            out_data[pc.out_offset + xi + pc.half_dim] = b * c + a * s;
        }
    } else if (VEC4 != 0u) {
        vec4 cs = lv_texel_f32x4(T, t / 4u); // (cos a, sin a, cos b, sin b)
        for (uint h = 0u; h < pc.heads; h++) {
            uint xi = x0 + h * dim;
            vec4 v = lv_texel_f32x4(X, (pc.x_offset + xi) / 4u);
            out_data4[(pc.out_offset + xi) / 4u] =
                vec4(v.x * cs.x - v.y * cs.y, v.x * cs.y + v.y * cs.x,
                     v.z * cs.z - v.w * cs.w, v.z * cs.w + v.w * cs.z);
        }
    } else {
        float c = lv_texel_f32(T, t), s = lv_texel_f32(T, t + 1u);
        for (uint h = 0u; h < pc.heads; h++) {
            uint xi = x0 + h * dim;
            float a = lv_texel_f32(X, pc.x_offset + xi), b = lv_texel_f32(X, pc.x_offset + xi + 1u);
            out_data[pc.out_offset + xi] = a * c - b * s;
            out_data[pc.out_offset + xi + 1u] = a * s + b * c;
        }
    }
}
