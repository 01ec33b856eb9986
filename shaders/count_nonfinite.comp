#version 450
// Counts the NaN and infinite values of an f32 tensor: counts[0] += NaNs, counts[1] +=
// infinities, counts[2] = max(counts[2], ~(base + i)) over the non-finite elements i, so
// that once counts[2] != 0, ~counts[2] is the first non-finite index. The test reads the
// bits (exponent all ones), not isnan/isinf, which a compiler assuming finite math may
// fold away. A finite tensor costs one texel read per element and no atomic: it is the
// per-block check of generation (the DiT's predictions and its carried state).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_count_nonfinite.h"
#include "texel.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Counts { uint counts[]; };
layout(binding = 1) uniform utextureBuffer X; // texel binding (ops.def kind 't')

void main() {
    uint i = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= pc.count) return;
    uint bits = lv_texel_u32(X, pc.x_offset + i);
    if ((bits & 0x7f800000u) != 0x7f800000u) return;
    uint o = pc.counts_offset;
    if ((bits & 0x007fffffu) != 0u) atomicAdd(counts[o], 1u);
    else atomicAdd(counts[o + 1u], 1u);
    atomicMax(counts[o + 2u], ~(pc.base + i));
}
