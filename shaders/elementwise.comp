#version 450
// Element-wise unary and binary ops (out, a and b each f32, f16 or bf16: spec constants 2-4);
// b broadcasts over rows (LV_BCAST_*).
// Specialization constants: 0 the op (LV_ELT_*), so each pipeline holds one formula;
// 1 VEC4: each invocation takes four consecutive elements with vec4 loads and stores (the
// host sets it when every bound offset is a multiple of 4 and, if b broadcasts, C is too,
// so the four elements share a row). On lavapipe vec4 access is ~4x faster than scalar.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_elementwise.h"
#include "texel.glsl"
#include "broadcast.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = LV_ELT_ADD;
layout(constant_id = 1) const uint VEC4 = 0;
layout(constant_id = 2) const uint ODT = LV_DTYPE_F32; // out: f32, or f16 / bf16 in 32-bit words
layout(constant_id = 3) const uint ADT = LV_DTYPE_F32; // a and b: the same choice
layout(constant_id = 4) const uint BDT = LV_DTYPE_F32;

// out may be the same buffer range as a or b (in place): every element is read and then
// written by the same invocation. Each binding is also seen as vec4s for the VEC4 path.
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out_data4[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; };              // 16-bit out
layout(std430, binding = 0) writeonly buffer OutW2 { uvec2 out_words2[]; };
layout(binding = 1) uniform utextureBuffer A;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer B;

const bool BINARY = KIND == LV_ELT_ADD || KIND == LV_ELT_MUL || KIND == LV_ELT_SCALE_ADD ||
                    KIND == LV_ELT_MUL_SILU || KIND == LV_ELT_MUL_GELU_TANH;

vec4 apply(vec4 a, vec4 b) {
    if (KIND == LV_ELT_ADD) return a + b;
    if (KIND == LV_ELT_MUL) return a * b;
    if (KIND == LV_ELT_SCALE_ADD) return pc.alpha * a + pc.beta * b;
    if (KIND == LV_ELT_MUL_SILU) return a * (b / (1.0 + exp(-b)));
    if (KIND == LV_ELT_MUL_GELU_TANH) {
        vec4 u = 0.7978845608028654 * (b + 0.044715 * b * b * b);
        return a * (b / (1.0 + exp(-2.0 * u)));
    }
    // exp(-a) overflows to +inf for a < -88: a / inf = -0, the right limit
    if (KIND == LV_ELT_SILU) return a / (1.0 + exp(-a));
    if (KIND == LV_ELT_GELU_TANH) {
        // 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): no tanh, no inf / inf for large |u|
        vec4 u = 0.7978845608028654 * (a + 0.044715 * a * a * a);
        return a / (1.0 + exp(-2.0 * u));
    }
    return max(a, vec4(0.0));
}

// element index of b read by output element i
uint b_index(uint i) {
    if (pc.b_mode == LV_BCAST_FULL) return i;
    uint row = lv_fastdiv(i, pc.cols_magic, pc.cols_shift);
    uint col = i - row * pc.cols;
    return lv_bcast_index(i, row, col, pc.cols, pc.b_mode, pc.b_phase, pc.b_magic, pc.b_shift);
}

void scalar_element(uint i) {
    float a = lv_texel_act(A, pc.a_offset + i, ADT);
    float b = BINARY ? lv_texel_act(B, pc.b_offset + b_index(i), BDT) : 0.0;
    float r = apply(vec4(a), vec4(b)).x;
    uint e = pc.out_offset + i;
    if (ODT != LV_DTYPE_F32) LV_STORE_HALF(out_words, e, lv_half_bits(r, ODT))
    else out_data[e] = r;
}

void main() {
    uint j = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (VEC4 == 0u) {
        if (j < pc.count) scalar_element(j);
        return;
    }
    uint i = 4u * j;
    if (i + 4u <= pc.count) {
        vec4 a = lv_texel_act4(A, pc.a_offset + i, ADT);
        vec4 b = BINARY ? lv_texel_act4(B, pc.b_offset + b_index(i), BDT) : vec4(0.0);
        if (ODT != LV_DTYPE_F32) out_words2[(pc.out_offset + i) / 4u] = lv_half_bits4(apply(a, b), ODT);
        else out_data4[(pc.out_offset + i) / 4u] = apply(a, b);
    } else {
        for (; i < pc.count; i++) scalar_element(i); // the last 1..3 elements
    }
}
