/* Basic ops: fill, and counting non-finite values. */
#include "longvk/ops.h"
#include "lv_internal.h"
#include "push_count_nonfinite.h"
#include "push_fill.h"

lv_status lv_op_fill(lv_ctx *ctx, const lv_tensor *t, float value) {
    if (t->dtype != LV_F32) return lv_error(LV_ERR_INVALID, "fill: tensor must be f32");
    int64_t n = lv_tensor_numel(t);
    /* split so that each binding stays within the device's range limit */
    int64_t per = (int64_t)(lv_ctx_max_binding(ctx) / 4) - 64;
    for (int64_t start = 0; start < n; start += per) {
        int64_t count = n - start < per ? n - start : per;
        lv_tensor part = lv_tensor_view(t, start, 1, &count);
        lv_binding b[1] = {{&part, true, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_FILL, b, 1));
        lv_push_fill pc = {.offset = b[0].elem_offset, .count = (uint32_t)count, .value = value};
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)count + 255) / 256, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_FILL, NULL, 0, b, 1, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_count_nonfinite(lv_ctx *ctx, const lv_tensor *counts, const lv_tensor *x, uint32_t index_base) {
    if (!ctx || !counts || !x) return lv_error(LV_ERR_INVALID, "count_nonfinite: a NULL argument");
    if (x->dtype != LV_F32) return lv_error(LV_ERR_INVALID, "count_nonfinite: x must be f32");
    if (counts->dtype != LV_I32 || lv_tensor_numel(counts) < 3)
        return lv_error(LV_ERR_INVALID, "count_nonfinite: counts must be i32 with at least 3 elements");
    int64_t n = lv_tensor_numel(x);
    if ((uint64_t)index_base + (uint64_t)n >= UINT32_MAX)
        return lv_error(LV_ERR_LIMIT, "count_nonfinite: %lld elements from index %u pass 2^32 - 1", (long long)n,
                        index_base);
    int64_t three = 3;
    lv_tensor c = lv_tensor_view(counts, 0, 1, &three);
    /* split so that each binding stays within the device's range limit */
    int64_t per = (int64_t)(lv_ctx_max_binding(ctx) / 4) - 64;
    for (int64_t start = 0; start < n; start += per) {
        int64_t count = n - start < per ? n - start : per;
        lv_tensor part = lv_tensor_view(x, start, 1, &count);
        lv_binding b[2] = {{&c, true, 0}, {&part, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_COUNT_NONFINITE, b, 2));
        lv_push_count_nonfinite pc = {.counts_offset = b[0].elem_offset, .x_offset = b[1].elem_offset,
                                      .count = (uint32_t)count, .base = index_base + (uint32_t)start};
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)count + 255) / 256, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_COUNT_NONFINITE, NULL, 0, b, 2, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}
