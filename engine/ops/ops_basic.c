/* Basic ops: fill. */
#include "longvk/ops.h"
#include "lv_internal.h"
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
