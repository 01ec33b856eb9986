#version 450
// One tap of the temporal conv, a matrix product over pixel rows:
//   out[r, o] (+)= sum_i w[o, i, tap] * in[r, i]      (w in PyTorch layout [C, C, 3])
// The wrapper shifts `in` and `out` by whole frames so that the three taps (and the
// cached previous frame) become three (or four) such products accumulated into out.
//
// Register blocking, no shared memory (lavapipe runs barriers and shared memory slowly):
// a workgroup covers ROW_BLOCK rows and LOCAL_SIZE * OUT_BLOCK output channels; each
// invocation keeps ROW_BLOCK x OUT_BLOCK accumulators. The rows are the same for the
// whole workgroup, so each in[r, i] load is a broadcast; each invocation loads OUT_BLOCK
// weights per i. Output channel of accumulator b: o = group_o + b * LOCAL_SIZE + lane, so
// stores of a subgroup are contiguous.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "push_temporal_conv.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OUT_BLOCK = 4;
layout(constant_id = 2) const uint ROW_BLOCK = 8;

layout(std430, binding = 0) buffer Out { float out_data[]; };
layout(std430, binding = 1) readonly buffer In { float in_data[]; };
layout(std430, binding = 2) readonly buffer Wt { float w_data[]; };

void main() {
    uint C = pc.channels;
    uint lane = gl_LocalInvocationID.x;
    uint o0 = gl_WorkGroupID.x * gl_WorkGroupSize.x * OUT_BLOCK + lane;
    uint r0 = gl_WorkGroupID.y * ROW_BLOCK;

    // Out-of-range rows and channels read a valid row (the last) and are not stored.
    uint wbase[OUT_BLOCK];
    for (uint b = 0; b < OUT_BLOCK; b++)
        wbase[b] = pc.w_offset + min(o0 + b * gl_WorkGroupSize.x, C - 1u) * 3u * C + pc.tap;
    uint xbase[ROW_BLOCK];
    for (uint rb = 0; rb < ROW_BLOCK; rb++)
        xbase[rb] = pc.in_offset + min(r0 + rb, pc.rows - 1u) * C;

    float acc[ROW_BLOCK * OUT_BLOCK];
    for (uint k = 0; k < ROW_BLOCK * OUT_BLOCK; k++) acc[k] = 0.0;

    for (uint i = 0; i < C; i++) {
        float wv[OUT_BLOCK];
        for (uint b = 0; b < OUT_BLOCK; b++) wv[b] = w_data[wbase[b] + 3u * i];
        for (uint rb = 0; rb < ROW_BLOCK; rb++) {
            float xv = in_data[xbase[rb] + i];
            for (uint b = 0; b < OUT_BLOCK; b++)
                acc[rb * OUT_BLOCK + b] = fma(xv, wv[b], acc[rb * OUT_BLOCK + b]);
        }
    }

    for (uint rb = 0; rb < ROW_BLOCK; rb++) {
        uint r = r0 + rb;
        if (r >= pc.rows) break;
        for (uint b = 0; b < OUT_BLOCK; b++) {
            uint o = o0 + b * gl_WorkGroupSize.x;
            if (o >= C) break;
            uint idx = pc.out_offset + r * C + o;
            float val = acc[rb * OUT_BLOCK + b];
            out_data[idx] = pc.accumulate != 0u ? out_data[idx] + val : val;
        }
    }
}
