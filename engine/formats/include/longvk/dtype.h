/* Element types and rank of tensors, on the device (longvk/engine.h) and in model files
 * (longvk/weights.h): one table for both, in engine/formats/dtype.c. */
#ifndef LONGVK_DTYPE_H
#define LONGVK_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a tensor has, on the device or in a file. */
#define LV_MAX_DIMS 5

/* LV_Q8_0 and LV_Q4_K are ggml's block-quantized types, as GGUF files hold them (host only:
 * no device tensor has them yet). A block of LV_Q8_0 is 32 weights in 34 bytes (an f16 scale
 * d, then 32 int8 q: x = d * q); a block of LV_Q4_K is 256 weights in 144 bytes (f16 d, f16
 * dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, 128 bytes of 4-bit q:
 * x = d * sc * q - dmin * m). Rows are whole blocks; longvk/quant.h converts them. */
typedef enum lv_dtype { LV_F32 = 0, LV_F16, LV_BF16, LV_I32, LV_Q8_0, LV_Q4_K } lv_dtype;
#define LV_DTYPE_COUNT 6

/* Bytes per element; 0 for a block-quantized dtype (it has no per-element size: see
 * lv_dtype_block) and for a value outside the enum. Code that sizes buffers by element
 * refuses a dtype whose size is 0. */
size_t lv_dtype_size(lv_dtype dtype);
/* Elements per block (1 for f32, f16, bf16, i32; 32 for q8_0; 256 for q4_k), and in
 * *block_bytes (if not NULL) the bytes of one block; 0 for a value outside the enum. */
int64_t lv_dtype_block(lv_dtype dtype, size_t *block_bytes);
/* 1 for a block-quantized dtype (q8_0, q4_k). */
int lv_dtype_quantized(lv_dtype dtype);
/* The bytes of `n` elements: 0 when n is not a whole number of blocks, when the dtype is not
 * in the enum or when the size overflows (n < 0 included). */
uint64_t lv_dtype_bytes(lv_dtype dtype, int64_t n);
/* "f32", "f16", "bf16", "i32", "q8_0", "q4_k": the name used in messages and on the command
 * line. */
const char *lv_dtype_name(lv_dtype dtype);
/* "F32", "F16", "BF16", "I32" (the safetensors header's spelling), "Q8_0", "Q4_K" (ggml's;
 * safetensors has no quantized dtype: the writer refuses them). */
const char *lv_dtype_tag(lv_dtype dtype);
/* "[2, 3, 4]": a shape for messages. */
void lv_shape_format(const int64_t *shape, int ndim, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
