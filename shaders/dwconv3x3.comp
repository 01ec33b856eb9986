#version 450
// Per-frame depthwise 3x3 convolution with zero padding 1, channels-last [F, H, W, C].
//
// One invocation per (channel, strip of X_BLOCK columns, row): consecutive invocations
// take consecutive channels, so loads and stores of a subgroup are contiguous. Each input
// row of the 3-row window is read once into X_BLOCK + 2 registers and reused by the three
// horizontal taps of every output column in the strip (3 (X_BLOCK + 2) loads instead of
// 9 X_BLOCK). Padding: rows outside [0, H) of the output's own frame and columns outside
// [0, W) count as zero.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "push_dwconv3x3.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint X_BLOCK = 4;

layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 1) readonly buffer X { float x_data[]; };
layout(std430, binding = 2) readonly buffer W { float w_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };

void main() {
    uint i = lv_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint C = pc.channels, W = pc.width;
    uint c = i % C;
    uint t = i / C;
    uint strip = t % pc.strips;
    uint r = t / pc.strips;
    if (r >= pc.rows) return;
    uint row = pc.row0 + r;     // global row f * H + y
    uint y = row % pc.height;
    uint x0 = strip * X_BLOCK;

    float wk[9];
    for (uint k = 0; k < 9u; k++) wk[k] = w_data[pc.w_offset + c * 9u + k];
    float b0 = pc.has_bias != 0u ? bias_data[pc.bias_offset + c] : 0.0;
    float acc[X_BLOCK];
    for (uint b = 0; b < X_BLOCK; b++) acc[b] = b0;

    for (uint ky = 0; ky < 3u; ky++) {
        int yy = int(y) + int(ky) - 1;
        if (yy < 0 || yy >= int(pc.height)) continue;
        uint in_row = row + ky - 1u - pc.in_row0;   // inside the bound halo by construction
        uint base = pc.x_offset + in_row * W * C + c;
        float v[X_BLOCK + 2];
        for (uint b = 0; b < X_BLOCK + 2u; b++) {
            int xx = int(x0 + b) - 1;
            v[b] = (xx >= 0 && xx < int(W)) ? x_data[base + uint(xx) * C] : 0.0;
        }
        for (uint b = 0; b < X_BLOCK; b++)
            acc[b] += wk[ky * 3u] * v[b] + wk[ky * 3u + 1u] * v[b + 1u] + wk[ky * 3u + 2u] * v[b + 2u];
    }

    uint obase = pc.out_offset + r * W * C + c;
    for (uint b = 0; b < X_BLOCK; b++)
        if (x0 + b < W) out_data[obase + (x0 + b) * C] = acc[b];
}
