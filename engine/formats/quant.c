/* Row conversions of weights on the host (longvk/quant.h): f16, bf16, q8_0 and q4_k to f32,
 * f32 to q8_0 and q4_k. The block layouts are ggml's (ggml-common.h, ggml-quants.c), written here from
 * their description. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/quant.h"

float lv_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, NaN */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else {
        float v = ldexpf((float)man, -24); /* zero and subnormals: exact */
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float lv_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* f32 to f16, rounded to nearest even; finite positive inputs in the normal/subnormal range
 * (what a q8_0 scale is). Returns 0x7c00 (inf) past 65504. */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    x &= 0x7fffffff;
    if (x >= 0x47800000u) return (uint16_t)(sign | 0x7c00); /* >= 65536: inf */
    if (x < 0x38800000u) {                                 /* below 2^-14: subnormal */
        float a;
        memcpy(&a, &x, 4);
        return (uint16_t)(sign | (uint16_t)lrintf(a * 16777216.0f)); /* units of 2^-24 */
    }
    uint32_t r = x + 0xfff + ((x >> 13) & 1);
    uint32_t h = ((r >> 13) - (112u << 10));
    if (h >= 0x7c00) h = 0x7c00;
    return (uint16_t)(sign | h);
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of a q4_k block:
 * sub-blocks 0-3 hold theirs in the low 6 bits of bytes j and j+4; 4-7 take their low 4 bits
 * from byte j+4 (scale: low nibble, min: high nibble) and their top 2 bits from the top bits
 * of bytes j-4 (scale) and j (min). */
static void q4k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

lv_status lv_dequantize_row(lv_dtype dtype, const void *src, int64_t n, float *dst) {
    if (n < 0 || (n && (!src || !dst))) return lv_error(LV_ERR_INVALID, "lv_dequantize_row: bad arguments");
    int64_t block = lv_dtype_block(dtype, NULL);
    if (!block || dtype == LV_I32)
        return lv_error(LV_ERR_INVALID, "lv_dequantize_row: %s is not a weight dtype", lv_dtype_name(dtype));
    if (n % block)
        return lv_error(LV_ERR_INVALID, "lv_dequantize_row: %lld %s elements are not whole blocks of %lld",
                        (long long)n, lv_dtype_name(dtype), (long long)block);
    const uint8_t *p = src;
    switch (dtype) {
    case LV_F32: memcpy(dst, src, (size_t)n * 4); break;
    case LV_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = lv_f16_to_f32(le16(p + 2 * i));
        break;
    case LV_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = lv_bf16_to_f32(le16(p + 2 * i));
        break;
    case LV_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, p += 34) {
            float d = lv_f16_to_f32(le16(p));
            for (int i = 0; i < 32; i++) *dst++ = d * (float)(int8_t)p[2 + i];
        }
        break;
    case LV_Q4_K:
        for (int64_t b = 0; b < n / 256; b++, p += 144) {
            float d = lv_f16_to_f32(le16(p)), dmin = lv_f16_to_f32(le16(p + 2));
            const uint8_t *scales = p + 4, *q = p + 16;
            /* 4 groups of 64 weights: 32 bytes of q, low nibbles the first sub-block, high the second */
            for (int g = 0; g < 4; g++, q += 32) {
                uint8_t sc0, m0, sc1, m1;
                q4k_scale_min(2 * g, scales, &sc0, &m0);
                q4k_scale_min(2 * g + 1, scales, &sc1, &m1);
                float d0 = d * (float)sc0, mm0 = dmin * (float)m0;
                float d1 = d * (float)sc1, mm1 = dmin * (float)m1;
                for (int l = 0; l < 32; l++) dst[l] = d0 * (float)(q[l] & 0x0f) - mm0;
                for (int l = 0; l < 32; l++) dst[32 + l] = d1 * (float)(q[l] >> 4) - mm1;
                dst += 64;
            }
        }
        break;
    case LV_I32: break;
    }
    return LV_OK;
}

lv_status lv_quantize_row_q8_0(const float *src, int64_t n, void *dst) {
    if (n < 0 || n % 32 || (n && (!src || !dst)))
        return lv_error(LV_ERR_INVALID, "lv_quantize_row_q8_0: %lld values are not whole blocks of 32", (long long)n);
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / 32; b++, p += 34) {
        const float *x = src + 32 * b;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            if (!isfinite(x[i]))
                return lv_error(LV_ERR_INVALID, "lv_quantize_row_q8_0: value %lld is not finite",
                                (long long)(32 * b + i));
            if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
        }
        uint16_t h = f32_to_f16(amax / 127.0f);
        if (h >= 0x7c00)
            return lv_error(LV_ERR_INVALID, "lv_quantize_row_q8_0: block %lld: max |x| %g overflows an f16 scale",
                            (long long)b, (double)amax);
        /* rounded up, so that max|x| / d <= 127 and nothing clips */
        if (lv_f16_to_f32(h) * 127.0f < amax && ++h >= 0x7c00)
            return lv_error(LV_ERR_INVALID, "lv_quantize_row_q8_0: block %lld: max |x| %g overflows an f16 scale",
                            (long long)b, (double)amax);
        float d = lv_f16_to_f32(h);
        p[0] = (uint8_t)(h & 0xff);
        p[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < 32; i++) {
            float q = d > 0.0f ? roundf(x[i] / d) : 0.0f;
            if (q > 127.0f) q = 127.0f;
            if (q < -127.0f) q = -127.0f;
            p[2 + i] = (uint8_t)(int8_t)q;
        }
    }
    return LV_OK;
}

/* An f16 at least `v` (v finite, >= 0): the nearest, moved up one step if it fell below, so
 * that a scale made from it never clips. 0x7c00 (inf) when v is past the f16 range. */
static uint16_t f16_at_least(float v) {
    uint16_t h = f32_to_f16(v);
    if (h < 0x7c00 && lv_f16_to_f32(h) < v) h++;
    return h;
}

lv_status lv_quantize_row_q4_k(const float *src, int64_t n, void *dst) {
    if (n < 0 || n % 256 || (n && (!src || !dst)))
        return lv_error(LV_ERR_INVALID, "lv_quantize_row_q4_k: %lld values are not whole blocks of 256", (long long)n);
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / 256; b++, p += 144) {
        const float *x = src + 256 * b;
        /* per sub-block of 32: the step covering [min(0, lo), hi] in 15 steps, and the offset */
        float step[8], off[8], max_step = 0.0f, max_off = 0.0f;
        for (int j = 0; j < 8; j++) {
            float lo = 0.0f, hi = -INFINITY;
            for (int i = 0; i < 32; i++) {
                float v = x[32 * j + i];
                if (!isfinite(v))
                    return lv_error(LV_ERR_INVALID, "lv_quantize_row_q4_k: value %lld is not finite",
                                    (long long)(256 * b + 32 * j + i));
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            step[j] = (hi - lo) / 15.0f;
            off[j] = -lo;
            if (step[j] > max_step) max_step = step[j];
            if (off[j] > max_off) max_off = off[j];
        }
        /* d and dmin rounded up so that the 6-bit scales and mins reach every sub-block's */
        uint16_t hd = f16_at_least(max_step / 63.0f), hm = f16_at_least(max_off / 63.0f);
        if (hd >= 0x7c00 || hm >= 0x7c00)
            return lv_error(LV_ERR_INVALID, "lv_quantize_row_q4_k: block %lld: its range overflows an f16 scale",
                            (long long)b);
        float d = lv_f16_to_f32(hd), dmin = lv_f16_to_f32(hm);
        uint8_t sc[8], mn[8], q[256];
        for (int j = 0; j < 8; j++) {
            /* the scale rounded up (no clipping at the top), the min rounded up (none below 0) */
            float s = d > 0.0f ? ceilf(step[j] / d) : 0.0f, m = dmin > 0.0f ? ceilf(off[j] / dmin) : 0.0f;
            sc[j] = (uint8_t)(s > 63.0f ? 63 : s);
            mn[j] = (uint8_t)(m > 63.0f ? 63 : m);
            float ds = d * (float)sc[j], dm = dmin * (float)mn[j];
            for (int i = 0; i < 32; i++) {
                float v = ds > 0.0f ? roundf((x[32 * j + i] + dm) / ds) : 0.0f;
                q[32 * j + i] = (uint8_t)(v < 0.0f ? 0 : v > 15.0f ? 15 : v);
            }
        }
        p[0] = (uint8_t)(hd & 0xff), p[1] = (uint8_t)(hd >> 8);
        p[2] = (uint8_t)(hm & 0xff), p[3] = (uint8_t)(hm >> 8);
        uint8_t *scales = p + 4, *qs = p + 16;
        for (int j = 0; j < 4; j++) { /* the packing q4k_scale_min undoes */
            scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
            scales[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
            scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) qs[32 * g + l] = (uint8_t)(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
    }
    return LV_OK;
}

lv_status lv_quantize_rows(lv_dtype dtype, const void *src, lv_dtype src_dtype, int64_t rows, int64_t k, void *dst) {
    if ((dtype != LV_Q8_0 && dtype != LV_Q4_K) || (src_dtype != LV_F32 && src_dtype != LV_F16 && src_dtype != LV_BF16))
        return lv_error(LV_ERR_INVALID, "lv_quantize_rows: %s to %s: f32, f16 or bf16 to q8_0 or q4_k only",
                        lv_dtype_name(src_dtype), lv_dtype_name(dtype));
    if (rows < 0 || k <= 0 || k % lv_dtype_block(dtype, NULL))
        return lv_error(LV_ERR_INVALID, "lv_quantize_rows: rows of %lld are not whole %s blocks of %lld", (long long)k,
                        lv_dtype_name(dtype), (long long)lv_dtype_block(dtype, NULL));
    float *row = malloc((size_t)k * sizeof *row);
    if (!row) return lv_error(LV_ERR_NOMEM, "lv_quantize_rows: out of memory for a row of %lld", (long long)k);
    const uint8_t *in = src;
    uint8_t *out = dst;
    uint64_t in_row = lv_dtype_bytes(src_dtype, k), out_row = lv_dtype_bytes(dtype, k);
    lv_status s = LV_OK;
    for (int64_t r = 0; s == LV_OK && r < rows; r++) {
        s = lv_dequantize_row(src_dtype, in + r * in_row, k, row); /* f16 / bf16 widened, f32 copied */
        if (s == LV_OK)
            s = dtype == LV_Q8_0 ? lv_quantize_row_q8_0(row, k, out + r * out_row)
                                 : lv_quantize_row_q4_k(row, k, out + r * out_row);
        if (s != LV_OK) s = lv_error_prefix(s, "row %lld", (long long)r);
    }
    free(row);
    return s;
}
