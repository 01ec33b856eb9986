#version 450
// Per-frame depthwise 3x3 convolution with zero padding 1, channels-last [F, H, W, C].
//
// One invocation per (group of CPI channels, strip of X_BLOCK columns, row): consecutive
// invocations take consecutive channel groups, so a subgroup's loads and stores are
// contiguous. Each input row of the 3-row window is read once into X_BLOCK + 2 values and
// reused by the three horizontal taps of every output column in the strip. With VEC the
// group is 4 channels read and written as vec4 (C % 4 == 0 and 4-aligned offsets): on
// lavapipe each load is a serial loop over the lanes, so a vec4 load costs what a float
// load does; x, w and bias are texel bindings (shaders/texel.glsl), one gather a fetch. VEC also needs the weights' offset 4-aligned (their 36 are read as 9 vec4). Padding: rows outside [0, H) of the output's own frame and columns outside
// [0, W) count as zero.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "push_dwconv3x3.h"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint X_BLOCK = 4;
layout(constant_id = 2) const uint VEC = 0;
layout(constant_id = 3) const uint XDT = LV_DTYPE_F32; // x: f32, or f16 / bf16 in 32-bit words
layout(constant_id = 4) const uint ODT = LV_DTYPE_F32; // out: the same choice

layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) writeonly buffer Out4 { vec4 out4[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; };           // 16-bit out
layout(std430, binding = 0) writeonly buffer OutW2 { uvec2 out_words2[]; };
layout(binding = 1) uniform utextureBuffer X;  // texel bindings (ops.def kind 't')
layout(binding = 2) uniform utextureBuffer Wt;
layout(binding = 3) uniform utextureBuffer Bias;

const uint CPI = VEC != 0u ? 4u : 1u; // channels per invocation

void main() {
    uint i = lv_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint C = pc.channels, W = pc.width;
    uint groups = C / CPI;
    uint c = (i % groups) * CPI;
    uint t = i / groups;
    uint strip = t % pc.strips;
    uint r = t / pc.strips;
    if (r >= pc.rows) return;
    uint row = pc.row0 + r; // global row f * H + y
    uint y = row % pc.height;
    uint x0 = strip * X_BLOCK;

    // wk[k][u] = w[c + u, 0, k / 3, k % 3]; with VEC the 4 channels' 36 weights are
    // contiguous and 16-byte aligned: 9 vec4 loads
    float wf[9 * CPI];
    if (VEC != 0u) {
        [[unroll]] for (uint q = 0; q < 9u; q++) {
            vec4 t4 = lv_texel_f32x4(Wt, (pc.w_offset + c * 9u) / 4u + q);
            [[unroll]] for (uint e = 0; e < 4u; e++) wf[4u * q + e] = t4[e];
        }
    } else {
        [[unroll]] for (uint k = 0; k < 9u; k++) wf[k] = lv_texel_f32(Wt, pc.w_offset + c * 9u + k);
    }
    vec4 wk[9];
    [[unroll]] for (uint k = 0; k < 9u; k++) {
        wk[k] = vec4(0.0);
        [[unroll]] for (uint u = 0; u < CPI; u++) wk[k][u] = wf[9u * u + k];
    }
    vec4 b0 = vec4(0.0);
    if (pc.has_bias != 0u)
        [[unroll]] for (uint u = 0; u < CPI; u++) b0[u] = lv_texel_f32(Bias, pc.bias_offset + c + u);
    vec4 acc[X_BLOCK];
    [[unroll]] for (uint b = 0; b < X_BLOCK; b++) acc[b] = b0;

    [[unroll]] for (uint ky = 0; ky < 3u; ky++) {
        int yy = int(y) + int(ky) - 1;
        if (yy < 0 || yy >= int(pc.height)) continue;
        uint in_row = row + ky - 1u - pc.in_row0; // inside the bound halo by construction
        uint base = pc.x_offset + in_row * W * C + c;
        vec4 v[X_BLOCK + 2];
        [[unroll]] for (uint b = 0; b < X_BLOCK + 2u; b++) {
            int xx = int(x0 + b) - 1;
            bool inside = xx >= 0 && xx < int(W);
            uint e = base + uint(inside ? xx : 0) * C;
            vec4 val = VEC != 0u ? lv_texel_act4(X, e, XDT) : vec4(lv_texel_act(X, e, XDT), 0.0, 0.0, 0.0);
            v[b] = inside ? val : vec4(0.0);
        }
        [[unroll]] for (uint b = 0; b < X_BLOCK; b++)
            acc[b] += wk[ky * 3u] * v[b] + wk[ky * 3u + 1u] * v[b + 1u] + wk[ky * 3u + 2u] * v[b + 2u];
    }

    uint obase = pc.out_offset + r * W * C + c;
    [[unroll]] for (uint b = 0; b < X_BLOCK; b++) {
        if (x0 + b >= W) break;
        uint e = obase + (x0 + b) * C;
        if (ODT != LV_DTYPE_F32) {
            if (VEC != 0u) out_words2[e / 4u] = lv_half_bits4(acc[b], ODT);
            else LV_STORE_HALF(out_words, e, lv_half_bits(acc[b].x, ODT))
        } else if (VEC != 0u) {
            out4[e / 4u] = acc[b];
        } else {
            out_data[e] = acc[b].x;
        }
    }
}
