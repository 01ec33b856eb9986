#version 450
// Fill a float tensor with one value.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "push_fill.h"

layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };

void main() {
    uint i = lv_group_index() * 256u + gl_LocalInvocationID.x;
    if (i < pc.count) out_data[pc.offset + i] = pc.value;
}
