/* Tensors: shapes, views, host transfers, and half-precision conversions. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "longvk/quant.h"
#include "lv_internal.h"

int64_t lv_tensor_numel(const lv_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* block-quantized tensors (q8_0, q4_k) are whole blocks: lv_tensor_create checks their rows */
uint64_t lv_tensor_nbytes(const lv_tensor *t) {
    return lv_dtype_bytes(t->dtype, lv_tensor_numel(t));
}

lv_status lv_tensor_create(lv_ctx *ctx, lv_dtype dtype, int ndim, const int64_t *shape,
                           lv_tensor *out) {
    memset(out, 0, sizeof *out);
    if (ndim < 1 || ndim > LV_MAX_DIMS)
        return lv_error(LV_ERR_INVALID, "tensors have 1 to %d dimensions, not %d", LV_MAX_DIMS, ndim);
    if (!lv_dtype_block(dtype, NULL))
        return lv_error(LV_ERR_UNSUPPORTED, "no device tensor of dtype %s (%d)", lv_dtype_name(dtype), (int)dtype);
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0)
            return lv_error(LV_ERR_INVALID, "dimension %d of a tensor is %lld (must be positive)",
                            i, (long long)shape[i]);
    /* a block-quantized tensor (a matmul weight) is rows of whole blocks, as its files hold it */
    int64_t block = lv_dtype_block(dtype, NULL);
    if (shape[ndim - 1] % block)
        return lv_error(LV_ERR_UNSUPPORTED, "a %s tensor's rows are whole blocks of %lld elements, not %lld",
                        lv_dtype_name(dtype), (long long)block, (long long)shape[ndim - 1]);
    out->dtype = dtype;
    out->ndim = ndim;
    memcpy(out->shape, shape, (size_t)ndim * sizeof *shape);
    lv_status s = lv_alloc_create(ctx, lv_tensor_nbytes(out), &out->alloc);
    if (s != LV_OK) memset(out, 0, sizeof *out);
    return s;
}

void lv_tensor_free(lv_ctx *ctx, lv_tensor *t) {
    if (!t || !t->alloc || t->is_view) return;
    lv_alloc_free(ctx, t->alloc);
    memset(t, 0, sizeof *t);
}

lv_tensor lv_tensor_view(const lv_tensor *t, int64_t elem_offset, int ndim, const int64_t *shape) {
    lv_tensor v = *t;
    v.is_view = 1;
    size_t block_bytes;
    int64_t block = lv_dtype_block(t->dtype, &block_bytes); /* 1 but for q8_0, q4_k: whole blocks */
    v.offset = t->offset + (uint64_t)(elem_offset / block) * block_bytes;
    v.ndim = ndim;
    memset(v.shape, 0, sizeof v.shape);
    memcpy(v.shape, shape, (size_t)ndim * sizeof *shape);
    return v;
}

lv_tensor lv_tensor_rows(const lv_tensor *t, int64_t row0, int64_t nrows) {
    int64_t row = lv_tensor_numel(t) / t->shape[0];
    int64_t shape[LV_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = nrows;
    return lv_tensor_view(t, row0 * row, t->ndim, shape);
}

int lv_tensor_same_shape(const lv_tensor *a, const lv_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *lv_tensor_describe(const lv_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int i = 0; i < t->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "] %s", lv_dtype_name(t->dtype));
    return buf;
}

static lv_status check_size(const lv_tensor *t, uint64_t nbytes, const char *what) {
    if (!t->alloc) return lv_error(LV_ERR_INVALID, "%s: tensor has no storage", what);
    if (nbytes != lv_tensor_nbytes(t)) {
        char d[96];
        return lv_error(LV_ERR_INVALID, "%s: %llu bytes given for a tensor %s of %llu bytes", what,
                        (unsigned long long)nbytes, lv_tensor_describe(t, d, sizeof d),
                        (unsigned long long)lv_tensor_nbytes(t));
    }
    return LV_OK;
}

lv_status lv_tensor_write(lv_ctx *ctx, const lv_tensor *t, const void *src, uint64_t nbytes) {
    LV_TRY(check_size(t, nbytes, "tensor write"));
    return lv_alloc_upload(ctx, t->alloc, t->offset, src, nbytes);
}

lv_status lv_tensor_read(lv_ctx *ctx, const lv_tensor *t, void *dst, uint64_t nbytes) {
    LV_TRY(check_size(t, nbytes, "tensor read"));
    return lv_alloc_download(ctx, t->alloc, t->offset, dst, nbytes);
}

lv_status lv_tensor_zero(lv_ctx *ctx, const lv_tensor *t) {
    uint64_t n = lv_tensor_nbytes(t);
    uint64_t start = t->alloc->offset + t->offset;
    if ((start | n) & 3) return lv_error(LV_ERR_INVALID, "lv_tensor_zero needs a 4-byte aligned range");
    LV_TRY(lv_stream_begin(ctx));
    lv_stream_track(ctx, t->alloc, true);
    vkCmdFillBuffer(ctx->cmd, t->alloc->buffer, start, n, 0);
    return LV_OK;
}

lv_status lv_tensor_copy(lv_ctx *ctx, const lv_tensor *dst, const lv_tensor *src) {
    uint64_t n = lv_tensor_nbytes(src);
    if (n != lv_tensor_nbytes(dst))
        return lv_error(LV_ERR_INVALID, "tensor copy of %llu bytes into %llu bytes",
                        (unsigned long long)n, (unsigned long long)lv_tensor_nbytes(dst));
    LV_TRY(lv_stream_begin(ctx));
    lv_stream_track(ctx, src->alloc, false);
    lv_stream_track(ctx, dst->alloc, true);
    VkBufferCopy region = {.srcOffset = src->alloc->offset + src->offset,
                           .dstOffset = dst->alloc->offset + dst->offset,
                           .size = n};
    vkCmdCopyBuffer(ctx->cmd, src->alloc->buffer, dst->alloc->buffer, 1, &region);
    return LV_OK;
}

float lv_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                mant <<= 1;
                e++;
            } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t lv_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t mant = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)half;
}

float lv_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t lv_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float lv_weight_float(const lv_weight *w, size_t i) {
    if (w->dtype == LV_F32) {
        float v;
        memcpy(&v, (const char *)w->data + 4 * i, 4);
        return v;
    }
    uint16_t b;
    memcpy(&b, (const char *)w->data + 2 * i, 2);
    return w->dtype == LV_F16 ? lv_half_to_float(b) : lv_bf16_to_float(b);
}

static bool float_dtype(lv_dtype d) { return d == LV_F32 || d == LV_F16 || d == LV_BF16; }

/* w (f32, f16 or bf16) quantized row by row on the host (longvk/quant.h) and written to out */
static lv_status quantize_upload(lv_ctx *ctx, const lv_weight *w, lv_dtype dtype, int64_t k, int64_t n,
                                 const lv_tensor *out) {
    uint64_t row_bytes = lv_dtype_bytes(dtype, k), bytes = lv_dtype_bytes(dtype, n);
    uint8_t *buf = malloc((size_t)bytes);
    float *row = malloc((size_t)k * sizeof *row);
    lv_status s = LV_OK;
    if (!buf || !row)
        s = lv_error(LV_ERR_NOMEM, "out of host memory quantizing '%s' to %s", w->name, lv_dtype_name(dtype));
    for (int64_t r = 0; s == LV_OK && r < n / k; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = lv_weight_float(w, (size_t)(r * k + i));
        s = dtype == LV_Q8_0 ? lv_quantize_row_q8_0(row, k, buf + r * row_bytes)
                             : lv_quantize_row_q4_k(row, k, buf + r * row_bytes);
        if (s != LV_OK)
            s = lv_error_prefix(s, "'%s' row %lld to %s", w->name, (long long)r, lv_dtype_name(dtype));
    }
    if (s == LV_OK) s = lv_tensor_write(ctx, out, buf, bytes);
    free(buf);
    free(row);
    return s;
}

lv_status lv_tensor_from_weight(lv_ctx *ctx, const lv_weight *w, lv_dtype dtype, int ndim, const int64_t *shape,
                                lv_tensor *out) {
    if (!ctx || !w || !shape || !out) return lv_error(LV_ERR_INVALID, "lv_tensor_from_weight: a NULL argument");
    /* float to float or to quantized; quantized as it is, or dequantised to f32 */
    bool ok = float_dtype(w->dtype) ? float_dtype(dtype) || lv_dtype_quantized(dtype)
                                    : lv_dtype_quantized(w->dtype) && (dtype == w->dtype || dtype == LV_F32);
    if (!ok)
        return lv_error(LV_ERR_INVALID, "'%s': %s to %s: f32, f16 and bf16 convert to each other, q8_0 and q4_k; "
                        "q8_0 and q4_k only to f32", w->name, lv_dtype_name(w->dtype), lv_dtype_name(dtype));
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((uint64_t)n != lv_weight_numel(w))
        return lv_error(LV_ERR_FORMAT, "model: tensor '%s' has %llu elements, expected %lld", w->name,
                        (unsigned long long)lv_weight_numel(w), (long long)n);
    if (lv_dtype_quantized(dtype) && shape[ndim - 1] % lv_dtype_block(dtype, NULL))
        return lv_error(LV_ERR_INVALID, "'%s': rows of %lld are not whole %s blocks of %lld", w->name,
                        (long long)shape[ndim - 1], lv_dtype_name(dtype), (long long)lv_dtype_block(dtype, NULL));
    LV_TRY(lv_tensor_create(ctx, dtype, ndim, shape, out));
    lv_status s;
    if (dtype == w->dtype) {
        s = lv_tensor_write(ctx, out, w->data, w->nbytes);
    } else if (lv_dtype_quantized(dtype)) {
        s = quantize_upload(ctx, w, dtype, shape[ndim - 1], n, out);
    } else if (lv_dtype_quantized(w->dtype)) { /* a quantized file's tensor the model needs in f32 */
        float *buf = malloc((size_t)n * sizeof *buf);
        s = buf ? lv_dequantize_row(w->dtype, w->data, n, buf)
                : lv_error(LV_ERR_NOMEM, "out of host memory dequantising '%s'", w->name);
        if (s == LV_OK) s = lv_tensor_write(ctx, out, buf, (uint64_t)n * sizeof *buf);
        else s = lv_error_prefix(s, "'%s'", w->name);
        free(buf);
    } else {
        size_t es = lv_dtype_size(dtype);
        void *buf = malloc((size_t)n * es);
        if (!buf) {
            lv_tensor_free(ctx, out);
            return lv_error(LV_ERR_NOMEM, "out of host memory converting '%s' to %s", w->name, lv_dtype_name(dtype));
        }
        for (size_t i = 0; i < (size_t)n; i++) {
            float v = lv_weight_float(w, i);
            if (dtype == LV_F32) ((float *)buf)[i] = v;
            else ((uint16_t *)buf)[i] = dtype == LV_BF16 ? lv_float_to_bf16(v) : lv_float_to_half(v);
        }
        s = lv_tensor_write(ctx, out, buf, (uint64_t)n * es);
        free(buf);
    }
    if (s != LV_OK) lv_tensor_free(ctx, out);
    return s;
}
