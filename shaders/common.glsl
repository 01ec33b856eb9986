// Shared helpers for longvk compute shaders.
//
// Conventions:
// - every tensor is a storage buffer; the push constants carry each binding's element
//   offset (lv_binding.elem_offset) which the shader adds to its indices;
// - 16-bit tensors (fp16, bf16) are bound as uint words: element e is half (e & 1) of
//   word e >> 1, widened to fp32 here, so no 16-bit storage feature is needed;
// - a 1-D grid larger than maxComputeWorkGroupCount[0] is spread over x and y
//   (lv_grid_1d); lv_group_index() undoes that.

uint lv_group_index() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

float lv_f16_at(uint word, uint e) {
    return unpackHalf2x16(word >> ((e & 1u) * 16u)).x;
}

float lv_bf16_at(uint word, uint e) {
    return uintBitsToFloat(((word >> ((e & 1u) * 16u)) & 0xffffu) << 16);
}

// dtype codes shared with C (lv_dtype): 0 f32, 1 f16, 2 bf16
#define LV_DTYPE_F32 0u
#define LV_DTYPE_F16 1u
#define LV_DTYPE_BF16 2u

// 16-bit activations (lv_ctx_options.precision f16 / bf16): element e of a tensor of dtype
// dt is half (e & 1) of 32-bit word e >> 1, read through texel or uint bindings and written
// as whole words (four elements as a uvec2) or, one element at a time, by two atomics on
// its word (lv_store_half in the shaders), so no 16-bit storage feature is needed. Rounding
// to f16 is packHalf2x16's, to bf16 the nearest even of the fp32 bits (inf and NaN kept).
float lv_half_at(uint word, uint e, uint dt) {
    return dt == LV_DTYPE_F16 ? lv_f16_at(word, e) : lv_bf16_at(word, e);
}
vec4 lv_half4(uvec2 words, uint dt) {
    if (dt == LV_DTYPE_F16) return vec4(unpackHalf2x16(words.x), unpackHalf2x16(words.y));
    uvec2 l = words << 16, h = words & 0xffff0000u;
    return uintBitsToFloat(uvec4(l.x, h.x, l.y, h.y));
}
uint lv_half_bits(float v, uint dt) {
    if (dt == LV_DTYPE_F16) return packHalf2x16(vec2(v, 0.0)) & 0xffffu;
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return (u >> 16) | ((u & 0x7fffffu) != 0u ? 0x40u : 0u);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
uvec2 lv_half_bits4(vec4 v, uint dt) {
    return uvec2(lv_half_bits(v.x, dt) | (lv_half_bits(v.y, dt) << 16),
                 lv_half_bits(v.z, dt) | (lv_half_bits(v.w, dt) << 16));
}
// element e of a 16-bit tensor in the uint array `words` set to `bits`, leaving the other
// half of its word, which another invocation may be writing, alone
#define LV_STORE_HALF(words, e, bits)                                  \
    {                                                                  \
        uint lv_sh_ = ((e) & 1u) * 16u;                                \
        atomicAnd(words[(e) >> 1], ~(0xffffu << lv_sh_));              \
        atomicOr(words[(e) >> 1], (bits) << lv_sh_);                   \
    }
