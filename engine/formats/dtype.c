/* The dtype table (longvk/dtype.h). */
#include <stdio.h>

#include "longvk/dtype.h"

size_t lv_dtype_size(lv_dtype dtype) {
    switch (dtype) {
    case LV_F16:
    case LV_BF16: return 2;
    case LV_F32:
    case LV_I32: return 4;
    }
    return 0;
}

const char *lv_dtype_name(lv_dtype dtype) {
    switch (dtype) {
    case LV_F32: return "f32";
    case LV_F16: return "f16";
    case LV_BF16: return "bf16";
    case LV_I32: return "i32";
    }
    return "?";
}

const char *lv_dtype_tag(lv_dtype dtype) {
    switch (dtype) {
    case LV_F32: return "F32";
    case LV_F16: return "F16";
    case LV_BF16: return "BF16";
    case LV_I32: return "I32";
    }
    return "?";
}

void lv_shape_format(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
}
