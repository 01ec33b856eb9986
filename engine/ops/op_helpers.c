/* Helpers shared by the row-wise op wrappers: see op_helpers.h. */
#include "op_helpers.h"

lv_fastdiv lv_fastdiv_make(uint32_t d) {
    lv_fastdiv f = {0, 0};
    if (d <= 1) return f;
    /* l = floor(log2 d), k = 31 + l >= 32, m = ceil(2^k / d) <= 2^31. With e = m d - 2^k < d,
     * n m / 2^k = n / d + n e / (d 2^k), and n e < n d <= 2^30 d < 2^k keeps the floor exact
     * for n <= 2^30. The shader takes the high word of n m and shifts it by k - 32. */
    uint32_t l = 31u - (uint32_t)__builtin_clz(d);
    uint32_t k = 31u + l;
    f.magic = (uint32_t)(((1ull << k) + d - 1) / d);
    f.shift = k - 32u;
    return f;
}

void lv_rows_cols(const lv_tensor *t, int64_t *rows, int64_t *cols) {
    int64_t n = lv_tensor_numel(t);
    int64_t c = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    *cols = c;
    *rows = c > 0 ? n / c : 0;
}

lv_status lv_rows_per_binding(lv_ctx *ctx, const char *op, const lv_tensor *t,
                              uint64_t row_bytes, int64_t *rows) {
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    if (align < 4) align = 4;
    uint64_t limit = lv_ctx_max_binding(ctx);
    uint64_t usable = limit > align ? limit - align : 0;
    if (row_bytes == 0) row_bytes = 4;
    if (row_bytes > usable) {
        char d[96];
        return lv_error(LV_ERR_LIMIT,
                        "%s: one row of %s is %llu bytes, more than one kernel binding may "
                        "cover (%llu bytes on '%s', less %llu bytes of alignment); rows are "
                        "not split further",
                        op, lv_tensor_describe(t, d, sizeof d), (unsigned long long)row_bytes,
                        (unsigned long long)limit, ctx->info.name, (unsigned long long)align);
    }
    *rows = (int64_t)(usable / row_bytes);
    return LV_OK;
}

lv_tensor lv_rows_view(const lv_tensor *t, int64_t row0, int64_t nrows, int64_t cols) {
    int64_t shape[2] = {nrows, cols};
    return lv_tensor_view(t, row0 * cols, 2, shape);
}

lv_status lv_check_alias(const char *op, const lv_tensor *out, const char *in_name,
                         const lv_tensor *in, bool exact_ok) {
    if (!out->alloc || out->alloc != in->alloc) return LV_OK;
    uint64_t o0 = out->offset, o1 = o0 + lv_tensor_nbytes(out);
    uint64_t i0 = in->offset, i1 = i0 + lv_tensor_nbytes(in);
    if (o1 <= i0 || i1 <= o0) return LV_OK;
    if (exact_ok && o0 == i0 && o1 == i1) return LV_OK;
    char d1[96], d2[96];
    return lv_error(LV_ERR_INVALID,
                    "%s: out %s overlaps %s %s in memory (bytes %llu..%llu vs %llu..%llu of one "
                    "allocation)%s",
                    op, lv_tensor_describe(out, d1, sizeof d1), in_name,
                    lv_tensor_describe(in, d2, sizeof d2), (unsigned long long)o0,
                    (unsigned long long)o1, (unsigned long long)i0, (unsigned long long)i1,
                    exact_ok ? "; only the exact same range may be shared (in place)"
                             : "; it may not share memory with it at all");
}

lv_status lv_check_act(const char *op, const char *name, const lv_tensor *t) {
    if (t && t->alloc && (t->dtype == LV_F16 || t->dtype == LV_BF16)) return LV_OK;
    return lv_check_f32(op, name, t);
}

lv_status lv_check_f32(const char *op, const char *name, const lv_tensor *t) {
    if (!t) return lv_error(LV_ERR_INVALID, "%s: %s is NULL", op, name);
    if (!t->alloc) return lv_error(LV_ERR_INVALID, "%s: %s has no storage", op, name);
    if (t->dtype != LV_F32) {
        char d[96];
        return lv_error(LV_ERR_INVALID, "%s: %s %s must be f32", op, name,
                        lv_tensor_describe(t, d, sizeof d));
    }
    return LV_OK;
}
