/* Band geometry and the transport-independent part of longvk/sp_comm.h: argument checks,
 * then the transport's operation. */
#include <stdlib.h>

#include "sp_comm_internal.h"

lv_status lv_sp_band(int Hp, int R, int r, int *row0, int *rows) {
    if (R < 1 || Hp < 1 || R > Hp)
        return lv_error(LV_ERR_INVALID, "sequence parallel: %d bands over %d token rows (each band needs at "
                        "least one row: 1 to %d bands)", R, Hp, Hp);
    if (r < 0 || r >= R) return lv_error(LV_ERR_INVALID, "sequence parallel: band %d of %d", r, R);
    const int base = Hp / R, extra = Hp % R;
    *rows = base + (r < extra ? 1 : 0);
    *row0 = r * base + (r < extra ? r : extra);
    return LV_OK;
}

lv_status lv_sp_copy_rows(lv_ctx *ctx, const lv_tensor *dst, int64_t d0, const lv_tensor *src, int64_t r0,
                           int64_t n) {
    if (!ctx || !dst || !src || dst->ndim != 4 || src->ndim != 4 || dst->shape[0] != src->shape[0] ||
        dst->shape[2] != src->shape[2] || dst->shape[3] != src->shape[3] || r0 < 0 || d0 < 0 || n < 0 ||
        r0 + n > src->shape[1] || d0 + n > dst->shape[1])
        return lv_error(LV_ERR_INVALID, "sequence parallel row copy: rows %lld+%lld into %lld+%lld of tensors that are "
                        "not [F, rows, W, X] alike", (long long)r0, (long long)n, (long long)d0, (long long)n);
    const int64_t F = src->shape[0], WX = src->shape[2] * src->shape[3];
    int64_t shape[2] = {n * src->shape[2], src->shape[3]};
    for (int64_t f = 0; f < F; f++) {
        lv_tensor s = lv_tensor_view(src, (f * src->shape[1] + r0) * WX, 2, shape);
        lv_tensor d = lv_tensor_view(dst, (f * dst->shape[1] + d0) * WX, 2, shape);
        LV_TRY(lv_tensor_copy(ctx, &d, &s));
    }
    return LV_OK;
}

void lv_sp_comm_destroy(lv_sp_comm *c) {
    if (c && c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}

int lv_sp_comm_bands(const lv_sp_comm *c) { return c ? c->bands : 0; }
int lv_sp_comm_first(const lv_sp_comm *c) { return c ? c->first : 0; }
int lv_sp_comm_count(const lv_sp_comm *c) { return c ? c->count : 0; }

lv_status lv_sp_comm_state_sum(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials,
                               const lv_tensor *sum) {
    if (!c || !ctx || !partials || !sum)
        return lv_error(LV_ERR_INVALID, "sequence parallel state sum: %s is NULL",
                        !c ? "the communicator" : !ctx ? "the context" : !partials ? "the partials" : "the sum");
    const int64_t m = lv_tensor_numel(sum);
    if (partials->dtype != LV_F32 || sum->dtype != LV_F32 || partials->ndim != 2 ||
        partials->shape[0] != c->count || partials->shape[1] != m)
        return lv_error(LV_ERR_INVALID, "sequence parallel state sum: partials %lldx%lld for %d local bands "
                        "and a sum of %lld values (f32)", (long long)partials->shape[0],
                        partials->ndim > 1 ? (long long)partials->shape[1] : 0LL, c->count, (long long)m);
    return c->ops->state_sum(c, ctx, partials, sum);
}

lv_status lv_sp_comm_halo(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *const *own,
                          const lv_tensor *const *padded) {
    if (!c || !ctx || !own || !padded)
        return lv_error(LV_ERR_INVALID, "sequence parallel halo: %s is NULL",
                        !c ? "the communicator" : !ctx ? "the context" : !own ? "the bands" : "the padded bands");
    for (int i = 0; i < c->count; i++) {
        const lv_tensor *o = own[i], *p = padded[i];
        const int r = c->first + i;
        const int64_t halo = (r > 0) + (r < c->bands - 1);
        if (!o || !p || o->ndim != 4 || p->ndim != 4 || o->dtype != LV_F32 || p->dtype != LV_F32 ||
            p->shape[0] != o->shape[0] || p->shape[1] != o->shape[1] + halo || p->shape[2] != o->shape[2] ||
            p->shape[3] != o->shape[3])
            return lv_error(LV_ERR_INVALID, "sequence parallel halo: band %d of %d needs [F, rows, W, X] f32 and "
                            "[F, rows + %lld, W, X] f32", r, c->bands, (long long)halo);
    }
    return c->ops->halo(c, ctx, own, padded);
}

lv_status lv_sp_comm_gather_rows(lv_sp_comm *c, float *all, int F, int H, int64_t X) {
    if (!c || !all) return lv_error(LV_ERR_INVALID, "sequence parallel gather: %s is NULL", !c ? "the communicator" : "the rows");
    if (F < 1 || X < 1 || H < c->bands)
        return lv_error(LV_ERR_INVALID, "sequence parallel gather: %d frames of %d rows of %lld values for %d bands", F,
                        H, (long long)X, c->bands);
    return c->ops->gather_rows ? c->ops->gather_rows(c, all, F, H, X) : LV_OK;
}

lv_status lv_sp_comm_broadcast(lv_sp_comm *c, void *data, uint64_t bytes) {
    if (!c || (!data && bytes > 0))
        return lv_error(LV_ERR_INVALID, "sequence parallel broadcast: %s is NULL", !c ? "the communicator" : "the data");
    return c->ops->broadcast && bytes > 0 ? c->ops->broadcast(c, data, bytes) : LV_OK;
}

lv_status lv_sp_comm_agree_max(lv_sp_comm *c, int *value) {
    if (!c || !value)
        return lv_error(LV_ERR_INVALID, "sequence parallel agreement: %s is NULL", !c ? "the communicator" : "the value");
    return c->ops->agree_max ? c->ops->agree_max(c, value) : LV_OK;
}
