// Read-only tensors bound as uniform texel buffers (ops.def binding kind 't'): the whole
// memory block seen as R32G32B32A32_UINT texels, the tensor's element offset counting from
// the block's start. 32-bit element e is component e & 3 of texel e >> 2; with a 4-aligned
// offset, four consecutive elements are one texel. On lavapipe a texel fetch is one vector
// gather, where a storage-buffer load is a serial loop over the subgroup's lanes.
//
// The bindings are utextureBuffer, read with texelFetch from GL_EXT_samplerless_texture_
// functions (every shader that includes this file enables it): the same uniform texel
// buffer descriptor as a usamplerBuffer, without the sampled-image wrapper. Mesa 25's SPIR-V
// front end warns on a sampled image of Dim Buffer ("Image Type operand of
// OpTypeSampledImage should not have a Dim of Buffer"), and the engine fails on warnings.

uint lv_texel_u32(utextureBuffer t, uint e) { return texelFetch(t, int(e >> 2))[e & 3u]; }
float lv_texel_f32(utextureBuffer t, uint e) { return uintBitsToFloat(lv_texel_u32(t, e)); }
// the four 32-bit elements 4 q .. 4 q + 3
uvec4 lv_texel_u32x4(utextureBuffer t, uint q) { return texelFetch(t, int(q)); }
vec4 lv_texel_f32x4(utextureBuffer t, uint q) { return uintBitsToFloat(texelFetch(t, int(q))); }
// An activation of dtype dt (f32, or f16 / bf16 as halves of words: shaders/common.glsl):
// element e, and elements e .. e + 3 with e a multiple of 4
float lv_texel_act(utextureBuffer t, uint e, uint dt) {
    return dt == LV_DTYPE_F32 ? lv_texel_f32(t, e) : lv_half_at(lv_texel_u32(t, e >> 1), e, dt);
}
vec4 lv_texel_act4(utextureBuffer t, uint e, uint dt) {
    if (dt == LV_DTYPE_F32) return lv_texel_f32x4(t, e >> 2);
    uvec4 w = texelFetch(t, int(e >> 3));
    return lv_half4((e & 4u) != 0u ? w.zw : w.xy, dt);
}
