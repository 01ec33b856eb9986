#version 450
// Linear combination of linear-attention states (S and z stored together):
//   out[i] = alpha * sum_{s < na} a[s * a_stride + i] + beta * b[i]
// Sums token-split partials, adds the carried state to a block's own contribution
// (additive: alpha = beta = 1; decay: beta = lambda) and re-sums a window's ring of block
// contributions (never subtracting). b may alias out; with beta == 0 b is not read.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "push_linattn_combine.h"

layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer OBuf { float out_data[]; };
layout(std430, binding = 1) readonly buffer ABuf { float a_data[]; };
layout(std430, binding = 2) readonly buffer BBuf { float b_data[]; };

void main() {
    uint i = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= pc.count) return;
    float sum = 0.0;
    for (uint s = 0; s < pc.na; s++) sum += a_data[pc.a_off + s * pc.a_stride + i];
    float r = pc.alpha * sum;
    if (pc.beta != 0.0) r += pc.beta * b_data[pc.b_off + i];
    out_data[pc.out_off + i] = r;
}
