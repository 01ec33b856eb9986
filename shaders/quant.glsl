// Block-quantized weights (ggml's q8_0 and q4_K, as GGUF files hold them), dequantised
// inside the kernels that read them: nothing is expanded in device memory.
//
// A quantized tensor is rows of whole blocks; its binding's element offset counts bytes
// (lv_binding.elem_offset), and element e counts from the tensor's first weight, so block
// e / 32 (q8_0) or e / 256 (q4_K) starts at byte `base` + that block's index times its size.
// Blocks start at even bytes (34 and 144 are even, allocations aligned), so a 16-bit field
// is half of one word. The includer defines LV_QWORD(i): 32-bit word i of the binding.
//   q8_0: 34 bytes, f16 d then 32 int8 q;                          x = d * q
//   q4_K: 144 bytes, f16 d, f16 dmin, 12 bytes of 6-bit scales and mins of 8 sub-blocks of
//         32, 128 bytes of nibbles (4 groups of 32 bytes: low nibbles sub-block 2g, high
//         nibbles 2g + 1);                                         x = d * sc * q - dmin * m
// The products are in fp32 in the order of the host's lv_dequantize_row (engine/formats/quant.c).

#define LV_DTYPE_Q8_0 4u
#define LV_DTYPE_Q4_K 5u

uint lv_q_byte(uint b) { return (LV_QWORD(b >> 2) >> ((b & 3u) * 8u)) & 0xffu; }
uint lv_q_u16(uint b) { return (LV_QWORD(b >> 2) >> ((b & 2u) * 8u)) & 0xffffu; } // b even

// the 8 bytes b .. b + 7 (b even) as two words, little-endian
uvec2 lv_q_bytes8(uint b) {
    uint i = b >> 2;
    uint w0 = LV_QWORD(i), w1 = LV_QWORD(i + 1u);
    if ((b & 2u) == 0u) return uvec2(w0, w1);
    uint w2 = LV_QWORD(i + 2u);
    return uvec2((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16));
}

// the four int8 of a word, widened
vec4 lv_q_i8x4(uint w) {
    int s = int(w);
    return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8),
                bitfieldExtract(s, 24, 8));
}

float lv_q8_0_at(uint base, uint e) {
    uint blk = base + (e >> 5) * 34u;
    float d = unpackHalf2x16(lv_q_u16(blk)).x;
    int q = bitfieldExtract(int(lv_q_byte(blk + 2u + (e & 31u))), 0, 8);
    return d * float(q);
}

// elements e .. e + 7, e a multiple of 8 (one block)
void lv_q8_0_at8(uint base, uint e, out vec4 lo, out vec4 hi) {
    uint blk = base + (e >> 5) * 34u;
    float d = unpackHalf2x16(lv_q_u16(blk)).x;
    uvec2 q = lv_q_bytes8(blk + 2u + (e & 31u));
    lo = d * lv_q_i8x4(q.x);
    hi = d * lv_q_i8x4(q.y);
}

// the 6-bit scale and min of sub-block j (0..7) from the 12 bytes at s: sub-blocks 0-3 in
// the low 6 bits of bytes j and j + 4; 4-7 their low 4 bits in byte j + 4 (scale low nibble,
// min high) and their top 2 bits in the top bits of bytes j - 4 (scale) and j (min)
uvec2 lv_q4_k_scale_min(uint s, uint j) {
    if (j < 4u) return uvec2(lv_q_byte(s + j) & 63u, lv_q_byte(s + j + 4u) & 63u);
    uint b = lv_q_byte(s + j + 4u);
    return uvec2((b & 15u) | ((lv_q_byte(s + j - 4u) >> 6) << 4), (b >> 4) | ((lv_q_byte(s + j) >> 6) << 4));
}

// d * sc and dmin * m of sub-block j of the block at blk
vec2 lv_q4_k_sub(uint blk, uint j) {
    vec2 dm = unpackHalf2x16(LV_QWORD(blk >> 2) >> ((blk & 2u) * 8u) | (lv_q_u16(blk + 2u) << 16));
    uvec2 sm = lv_q4_k_scale_min(blk + 4u, j);
    return vec2(dm.x * float(sm.x), dm.y * float(sm.y));
}

float lv_q4_k_at(uint base, uint e) {
    uint blk = base + (e >> 8) * 144u, i = e & 255u, j = i >> 5;
    vec2 s = lv_q4_k_sub(blk, j);
    uint q = (lv_q_byte(blk + 16u + (i >> 6) * 32u + (i & 31u)) >> ((j & 1u) * 4u)) & 15u;
    return s.x * float(q) - s.y;
}

// elements e .. e + 7, e a multiple of 8 (one sub-block)
void lv_q4_k_at8(uint base, uint e, out vec4 lo, out vec4 hi) {
    uint blk = base + (e >> 8) * 144u, i = e & 255u, j = i >> 5;
    vec2 s = lv_q4_k_sub(blk, j);
    uvec2 q = lv_q_bytes8(blk + 16u + (i >> 6) * 32u + (i & 31u));
    int sh = int(j & 1u) * 4;
    vec4 q0 = vec4(bitfieldExtract(q.x, sh, 4), bitfieldExtract(q.x, sh + 8, 4), bitfieldExtract(q.x, sh + 16, 4),
                   bitfieldExtract(q.x, sh + 24, 4));
    vec4 q1 = vec4(bitfieldExtract(q.y, sh, 4), bitfieldExtract(q.y, sh + 8, 4), bitfieldExtract(q.y, sh + 16, 4),
                   bitfieldExtract(q.y, sh + 24, 4));
    lo = s.x * q0 - s.y;
    hi = s.x * q1 - s.y;
}
