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
