/* The in-process transport of longvk/sp_comm.h: all R bands in one process on one device.
 * It does on the device what the MPI transport will do through host buffers: the same
 * ordered sum (the same kernel, the same order, so the same bits) and row copies. */
#include <stdlib.h>

#include "longvk/ops.h"
#include "sp_comm_internal.h"

/* sum = ((p_0 + p_1) + ...) + p_{R-1}: one add per band, in band order */
static lv_status emulated_state_sum(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials,
                                    const lv_tensor *sum) {
    const int64_t m = lv_tensor_numel(sum);
    lv_tensor flat = lv_tensor_view(sum, 0, 1, &m);
    lv_tensor p0 = lv_tensor_view(partials, 0, 1, &m);
    LV_TRY(lv_tensor_copy(ctx, &flat, &p0));
    for (int r = 1; r < c->bands; r++) {
        lv_tensor pr = lv_tensor_view(partials, (int64_t)r * m, 1, &m);
        LV_TRY(lv_op_add(ctx, &flat, &flat, &pr));
    }
    return LV_OK;
}

static lv_status emulated_halo(lv_sp_comm *c, lv_ctx *ctx, const sp_halo_band *b) {
    for (int r = 0; r < c->bands; r++) {
        if (r > 0) LV_TRY(lv_sp_copy_rows(ctx, b[r].dst, b[r].above, b[r - 1].src, b[r - 1].last, 1));
        if (r < c->bands - 1) LV_TRY(lv_sp_copy_rows(ctx, b[r].dst, b[r].below, b[r + 1].src, b[r + 1].first, 1));
    }
    return LV_OK;
}

static const lv_sp_comm_ops emulated_ops = {
    .state_sum = emulated_state_sum,
    .halo = emulated_halo,
    .destroy = NULL,
};

lv_status lv_sp_comm_emulated_create(int bands, lv_sp_comm **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_sp_comm_emulated_create: out is NULL");
    *out = NULL;
    if (bands < 1 || bands > 4096)
        return lv_error(LV_ERR_INVALID, "sequence parallel emulation: %d bands (1 to 4096)", bands);
    lv_sp_comm *c = calloc(1, sizeof *c);
    if (!c) return lv_error(LV_ERR_NOMEM, "out of host memory");
    c->ops = &emulated_ops;
    c->bands = bands;
    c->first = 0;
    c->count = bands;
    *out = c;
    return LV_OK;
}
