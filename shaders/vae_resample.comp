#version 450
// Gather copies of the VAE decoder (see push_vae_resample.h): nearest 2x upsample and
// the time_conv channel-half interleave. x of the grid walks (column, channel) pairs of
// one output row, y the rows of the dispatch.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_samplerless_texture_functions : require
#include "common.glsl"
#include "push_vae_resample.h"
#include "texel.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint IDT = LV_DTYPE_F32; // in's dtype: f32, or f16 / bf16 (common.glsl)
layout(constant_id = 1) const uint ODT = LV_DTYPE_F32; // out's
layout(std430, binding = 0) writeonly buffer Out { float out_data[]; };
layout(std430, binding = 0) buffer OutW { uint out_words[]; }; // 16-bit: halves of words
layout(binding = 1) uniform utextureBuffer IN;  // texel bindings (ops.def kind 't')

void main() {
    uint i = gl_GlobalInvocationID.x;
    uint row = gl_WorkGroupID.y;
    uint C = pc.channels;
    if (i >= pc.out_w * C || row >= pc.rows) return;
    uint x = i / C, c = i - x * C;
    uint y = pc.row0 + row;
    uint src;
    if (pc.mode == 0u)
        src = (((y >> 1) - pc.in_row0) * pc.in_w + (x >> 1)) * pc.in_channels + c;
    else
        src = ((y - pc.in_row0) * pc.in_w + x) * pc.in_channels + pc.half_sel * C + c;
    uint o = pc.out_offset + row * pc.out_w * C + i;
    float v = lv_texel_act(IN, pc.in_offset + src, IDT);
    if (ODT != LV_DTYPE_F32) LV_STORE_HALF(out_words, o, lv_half_bits(v, ODT))
    else out_data[o] = v;
}
