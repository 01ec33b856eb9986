#version 450
// Linear combination of linear-attention states (S and z stored together):
//   out[i] = alpha * sum_{s < na} a[s * a_stride + i] + beta * b[i]
// Sums token-split partials, adds the carried state to a block's own contribution
// (additive: alpha = beta = 1; decay: beta = lambda) and re-sums a window's ring of block
// contributions (never subtracting). b may alias out; with beta == 0 b is not read.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_linattn_combine.h"
#include "texel.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer OBuf { float out_data[]; };
layout(binding = 1) uniform utextureBuffer AT;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer BT;

void main() {
    uint i = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= pc.count) return;
    float sum = 0.0;
    for (uint s = 0; s < pc.na; s++) sum += lv_texel_f32(AT, pc.a_off + s * pc.a_stride + i);
    float r = pc.alpha * sum;
    if (pc.beta != 0.0) r += pc.beta * lv_texel_f32(BT, pc.b_off + i);
    out_data[pc.out_off + i] = r;
}
