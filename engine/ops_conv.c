/* The Mix-FFN convolutions: per-frame depthwise 3x3 and the temporal conv over frames. */
#include "longvk/ops.h"
#include "lv_internal.h"
#include "push_dwconv3x3.h"
#include "push_temporal_conv.h"

static bool overlaps(const lv_tensor *a, const lv_tensor *b) {
    if (!a->alloc || a->alloc != b->alloc) return false;
    uint64_t a0 = a->offset, a1 = a0 + lv_tensor_nbytes(a);
    uint64_t b0 = b->offset, b1 = b0 + lv_tensor_nbytes(b);
    return a0 < b1 && b0 < a1;
}

/* How many rows of `row_bytes` fit one binding (beside `extra` rows of halo), or 0. */
static int64_t rows_per_binding(const lv_ctx *ctx, uint64_t row_bytes, int64_t extra) {
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    uint64_t max_binding = lv_ctx_max_binding(ctx);
    if (max_binding <= align) return 0;
    int64_t rows = (int64_t)((max_binding - align) / row_bytes) - extra;
    return rows > 0 ? rows : 0;
}

/* ---- depthwise 3x3 --------------------------------------------------------------------- */

#define DW_LOCAL 64
#define DW_X_BLOCK 4

lv_status lv_op_dwconv3x3(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *w, const lv_tensor *bias) {
    char d0[96], d1[96];
    if (!out || !x || !w)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: out, x and w are required");
    const lv_tensor *all[4] = {out, x, w, bias};
    const char *names[4] = {"out", "x", "w", "bias"};
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "dwconv3x3: %s must be f32, got %s", names[i],
                            lv_tensor_describe(all[i], d0, sizeof d0));
    if (x->ndim != 4 || !lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "dwconv3x3: want x and out [F, H, W, C] of one shape; "
                        "got x %s, out %s", lv_tensor_describe(x, d0, sizeof d0),
                        lv_tensor_describe(out, d1, sizeof d1));
    int64_t F = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    if (w->ndim != 4 || w->shape[0] != C || w->shape[1] != 1 || w->shape[2] != 3 || w->shape[3] != 3)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: w %s must be [%lld, 1, 3, 3]",
                        lv_tensor_describe(w, d0, sizeof d0), (long long)C);
    if (bias && lv_tensor_numel(bias) != C)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: bias %s must have C = %lld elements",
                        lv_tensor_describe(bias, d0, sizeof d0), (long long)C);
    for (int i = 1; i < 4; i++)
        if (all[i] && overlaps(out, all[i]))
            return lv_error(LV_ERR_INVALID, "dwconv3x3: out overlaps %s (no in-place)", names[i]);
    int64_t total_rows = F * H;
    if (total_rows == 0 || W == 0 || C == 0) return LV_OK;

    /* Split over rows (of all frames together): a chunk's input binding holds its rows
     * plus one halo row above and below. */
    uint64_t row_bytes = (uint64_t)W * (uint64_t)C * 4;
    int64_t chunk = rows_per_binding(ctx, row_bytes, 2);
    if (chunk < 1)
        return lv_error(LV_ERR_LIMIT, "dwconv3x3: three image rows of x %s (%llu bytes each) "
                        "exceed the device's binding limit (%llu bytes)",
                        lv_tensor_describe(x, d0, sizeof d0), (unsigned long long)row_bytes,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    if ((uint64_t)lv_tensor_nbytes(w) + ctx->limits.minStorageBufferOffsetAlignment >
        lv_ctx_max_binding(ctx))
        return lv_error(LV_ERR_LIMIT, "dwconv3x3: w %s exceeds the device's binding limit "
                        "(%llu bytes)", lv_tensor_describe(w, d0, sizeof d0),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    int64_t strips = (W + DW_X_BLOCK - 1) / DW_X_BLOCK;
    int64_t row_elems = W * C;
    int64_t xrows_shape[2] = {total_rows, row_elems};
    lv_tensor x2 = lv_tensor_view(x, 0, 2, xrows_shape), o2 = lv_tensor_view(out, 0, 2, xrows_shape);
    uint32_t spec[2] = {DW_LOCAL, DW_X_BLOCK};

    for (int64_t r0 = 0; r0 < total_rows; r0 += chunk) {
        int64_t rows = total_rows - r0 < chunk ? total_rows - r0 : chunk;
        int64_t in0 = r0 > 0 ? r0 - 1 : 0;
        int64_t in1 = r0 + rows < total_rows ? r0 + rows + 1 : total_rows;
        lv_tensor oc = lv_tensor_rows(&o2, r0, rows), xc = lv_tensor_rows(&x2, in0, in1 - in0);
        lv_binding b[4] = {{&oc, true, 0}, {&xc, false, 0}, {w, false, 0},
                           {bias ? bias : w, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, b, 4));
        lv_push_dwconv3x3 pc = {
            .out_offset = b[0].elem_offset,
            .x_offset = b[1].elem_offset,
            .w_offset = b[2].elem_offset,
            .bias_offset = b[3].elem_offset,
            .has_bias = bias ? 1u : 0u,
            .row0 = (uint32_t)r0,
            .rows = (uint32_t)rows,
            .in_row0 = (uint32_t)in0,
            .height = (uint32_t)H,
            .width = (uint32_t)W,
            .channels = (uint32_t)C,
            .strips = (uint32_t)strips,
        };
        uint64_t invocations = (uint64_t)rows * (uint64_t)strips * (uint64_t)C;
        if (invocations > UINT32_MAX)
            return lv_error(LV_ERR_LIMIT, "dwconv3x3: %llu invocations in one dispatch exceed "
                            "32-bit indexing", (unsigned long long)invocations);
        uint32_t gx, gy;
        lv_grid_1d(ctx, (invocations + DW_LOCAL - 1) / DW_LOCAL, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_DWCONV3X3, spec, 2, b, 4, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

/* ---- temporal conv ---------------------------------------------------------------------- */

/* out rows [0, rows) (+)= in rows [0, rows) times tap `tap` of w, split over rows so that
 * in and out each fit one binding. */
static lv_status tconv_tap(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *in,
                           const lv_tensor *w, int64_t C, uint32_t tap, bool accumulate) {
    bool cpu = lv_ctx_device(ctx)->type == LV_DEVICE_CPU;
    /* local size, output channels and rows per invocation */
    uint32_t spec[3] = {cpu ? 16u : 64u, 4, 8};
    int64_t total = out->shape[0];
    int64_t chunk = rows_per_binding(ctx, (uint64_t)C * 4, 0);
    int64_t max_chunk = (int64_t)ctx->limits.maxComputeWorkGroupCount[1] * spec[2];
    if (chunk > max_chunk) chunk = max_chunk;
    uint64_t per_group = (uint64_t)spec[0] * spec[1];
    uint32_t gx = (uint32_t)(((uint64_t)C + per_group - 1) / per_group);
    for (int64_t r0 = 0; r0 < total; r0 += chunk) {
        int64_t rows = total - r0 < chunk ? total - r0 : chunk;
        lv_tensor oc = lv_tensor_rows(out, r0, rows), ic = lv_tensor_rows(in, r0, rows);
        lv_binding b[3] = {{&oc, true, 0}, {&ic, false, 0}, {w, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, b, 3));
        lv_push_temporal_conv pc = {
            .out_offset = b[0].elem_offset,
            .in_offset = b[1].elem_offset,
            .w_offset = b[2].elem_offset,
            .rows = (uint32_t)rows,
            .channels = (uint32_t)C,
            .tap = tap,
            .accumulate = accumulate ? 1u : 0u,
        };
        uint32_t gy = (uint32_t)((rows + spec[2] - 1) / spec[2]);
        LV_TRY(lv_dispatch(ctx, LV_OP_TEMPORAL_CONV, spec, 3, b, 3, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_temporal_conv(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *prev, const lv_tensor *w) {
    char d0[96], d1[96];
    if (!out || !x || !w)
        return lv_error(LV_ERR_INVALID, "temporal_conv: out, x and w are required");
    const lv_tensor *all[4] = {out, x, prev, w};
    const char *names[4] = {"out", "x", "prev", "w"};
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "temporal_conv: %s must be f32, got %s", names[i],
                            lv_tensor_describe(all[i], d0, sizeof d0));
    if (x->ndim != 3 || !lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "temporal_conv: want x and out [F, P, C] of one shape; "
                        "got x %s, out %s", lv_tensor_describe(x, d0, sizeof d0),
                        lv_tensor_describe(out, d1, sizeof d1));
    int64_t F = x->shape[0], P = x->shape[1], C = x->shape[2];
    /* [C, C, 3], or PyTorch's [C, C, 3, 1] / [C, C, 3, 1, 1] */
    bool w_ok = w->ndim >= 3 && w->shape[0] == C && w->shape[1] == C && w->shape[2] == 3;
    for (int i = 3; w_ok && i < w->ndim; i++) w_ok = w->shape[i] == 1;
    if (!w_ok)
        return lv_error(LV_ERR_INVALID, "temporal_conv: w %s must be [%lld, %lld, 3] (trailing "
                        "1s allowed)", lv_tensor_describe(w, d0, sizeof d0), (long long)C,
                        (long long)C);
    if (prev && (prev->ndim != 2 || prev->shape[0] != P || prev->shape[1] != C))
        return lv_error(LV_ERR_INVALID, "temporal_conv: prev %s must be [P, C] = [%lld, %lld]",
                        lv_tensor_describe(prev, d0, sizeof d0), (long long)P, (long long)C);
    for (int i = 1; i < 4; i++)
        if (all[i] && overlaps(out, all[i]))
            return lv_error(LV_ERR_INVALID, "temporal_conv: out overlaps %s (no in-place)", names[i]);
    if (F == 0 || P == 0 || C == 0) return LV_OK;
    if (lv_tensor_nbytes(w) + ctx->limits.minStorageBufferOffsetAlignment > lv_ctx_max_binding(ctx))
        return lv_error(LV_ERR_LIMIT, "temporal_conv: w %s (%llu bytes) exceeds the device's "
                        "binding limit (%llu bytes, maxStorageBufferRange)",
                        lv_tensor_describe(w, d0, sizeof d0),
                        (unsigned long long)lv_tensor_nbytes(w),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    if (rows_per_binding(ctx, (uint64_t)C * 4, 0) < 1)
        return lv_error(LV_ERR_LIMIT, "temporal_conv: one pixel row of %lld channels exceeds "
                        "the device's binding limit (%llu bytes)", (long long)C,
                        (unsigned long long)lv_ctx_max_binding(ctx));

    /* As [F * P, C] row matrices, tap t reads frame f + t - 1 for output frame f:
     *   tap 1: out[0, F)      = W1 x[0, F)
     *   tap 0: out[1, F)     += W0 x[0, F - 1),   out[0] += W0 prev
     *   tap 2: out[0, F - 1) += W2 x[1, F)
     * (frame ranges; rows are P times that). */
    int64_t shape2[2] = {F * P, C};
    lv_tensor x2 = lv_tensor_view(x, 0, 2, shape2), o2 = lv_tensor_view(out, 0, 2, shape2);
    LV_TRY(tconv_tap(ctx, &o2, &x2, w, C, 1, false));
    if (F > 1) {
        int64_t shifted = (F - 1) * P;
        lv_tensor o_late = lv_tensor_rows(&o2, P, shifted), x_early = lv_tensor_rows(&x2, 0, shifted);
        lv_tensor o_early = lv_tensor_rows(&o2, 0, shifted), x_late = lv_tensor_rows(&x2, P, shifted);
        LV_TRY(tconv_tap(ctx, &o_late, &x_early, w, C, 0, true));
        LV_TRY(tconv_tap(ctx, &o_early, &x_late, w, C, 2, true));
    }
    if (prev) {
        lv_tensor o_first = lv_tensor_rows(&o2, 0, P);
        LV_TRY(tconv_tap(ctx, &o_first, prev, w, C, 0, true));
    }
    return LV_OK;
}
