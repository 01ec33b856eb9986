/* The dtype table (longvk/dtype.h). */
#include <stdio.h>

#include "longvk/dtype.h"

size_t lv_dtype_size(lv_dtype dtype) {
    switch (dtype) {
    case LV_F16:
    case LV_BF16: return 2;
    case LV_F32:
    case LV_I32: return 4;
    case LV_Q8_0:
    case LV_Q4_K: return 0; /* per block: lv_dtype_block */
    }
    return 0;
}

int64_t lv_dtype_block(lv_dtype dtype, size_t *block_bytes) {
    size_t bytes = 0;
    int64_t elems = 0;
    switch (dtype) {
    case LV_F16:
    case LV_BF16: elems = 1, bytes = 2; break;
    case LV_F32:
    case LV_I32: elems = 1, bytes = 4; break;
    case LV_Q8_0: elems = 32, bytes = 2 + 32; break;
    case LV_Q4_K: elems = 256, bytes = 2 + 2 + 12 + 128; break;
    }
    if (block_bytes) *block_bytes = bytes;
    return elems;
}

int lv_dtype_quantized(lv_dtype dtype) { return dtype == LV_Q8_0 || dtype == LV_Q4_K; }

uint64_t lv_dtype_bytes(lv_dtype dtype, int64_t n) {
    size_t bb;
    int64_t be = lv_dtype_block(dtype, &bb);
    if (!be || n < 0 || n % be) return 0;
    uint64_t blocks = (uint64_t)(n / be);
    if (blocks > UINT64_MAX / bb) return 0;
    return blocks * bb;
}

const char *lv_dtype_name(lv_dtype dtype) {
    switch (dtype) {
    case LV_F32: return "f32";
    case LV_F16: return "f16";
    case LV_BF16: return "bf16";
    case LV_I32: return "i32";
    case LV_Q8_0: return "q8_0";
    case LV_Q4_K: return "q4_k";
    }
    return "?";
}

const char *lv_dtype_tag(lv_dtype dtype) {
    switch (dtype) {
    case LV_F32: return "F32";
    case LV_F16: return "F16";
    case LV_BF16: return "BF16";
    case LV_I32: return "I32";
    case LV_Q8_0: return "Q8_0";
    case LV_Q4_K: return "Q4_K";
    }
    return "?";
}

void lv_shape_format(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
}
