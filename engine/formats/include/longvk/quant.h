/* Host conversions of weight rows to and from f32 (engine/formats/quant.c), for loaders that
 * need f32 whatever a file stores, and for writing quantized weights. No device here. */
#ifndef LONGVK_QUANT_H
#define LONGVK_QUANT_H

#include <stdint.h>

#include "longvk/dtype.h"
#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `n` elements of `dtype` at `src` (lv_dtype_bytes(dtype, n) bytes, any alignment) to f32 in
 * `dst`: f32 copied, f16 and bf16 widened exactly, q8_0 as d * q, q4_k as d * sc * q - dmin * m
 * (each product in f32, as ggml). `n` must be a whole number of blocks (32 for q8_0, 256 for
 * q4_k); i32 is not a weight type here. LV_ERR_INVALID otherwise. */
lv_status lv_dequantize_row(lv_dtype dtype, const void *src, int64_t n, float *dst);

/* `n` f32 values (a multiple of 32) to q8_0 blocks at `dst` (n / 32 * 34 bytes): each block's
 * scale d is max|x| / 127 rounded up to f16 (so that no value clips), q = round-to-nearest(x / d)
 * (ties away from zero). Then |x - d * q| <= d / 2 for every element. LV_ERR_INVALID for a
 * non-finite value or a block whose scale overflows f16 (max|x| over 65504 * 127). */
lv_status lv_quantize_row_q8_0(const float *src, int64_t n, void *dst);

/* `n` f32 values (a multiple of 256) to q4_k blocks at `dst` (n / 256 * 144 bytes, ggml's
 * block_q4_K, so llama.cpp's readers take them): per sub-block of 32 the step (max - min(0,
 * min)) / 15 and the offset -min(0, min) as 6-bit multiples of the block's f16 d and dmin
 * (all rounded up, so nothing clips), q = round((x + dmin * m) / (d * sc)) in 0..15. Then
 * |x - (d * sc * q - dmin * m)| <= d * sc / 2 (to rounding). LV_ERR_INVALID for a
 * non-finite value or a range past f16. A plain min-max fit, not ggml's searched one. */
lv_status lv_quantize_row_q4_k(const float *src, int64_t n, void *dst);

/* `rows` rows of `k` values of src_dtype (f32, f16 or bf16) at `src` to `dtype` (q8_0 or
 * q4_k; k whole blocks) at `dst` (lv_dtype_bytes(dtype, rows * k) bytes), row by row as
 * above. A message naming the row otherwise. */
lv_status lv_quantize_rows(lv_dtype dtype, const void *src, lv_dtype src_dtype, int64_t rows, int64_t k, void *dst);

/* IEEE half and bfloat16 to f32, exactly (the formats layer's own: the engine has its own). */
float lv_f16_to_f32(uint16_t h);
float lv_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif
#endif
