/* The solo transport of longvk/sp_comm.h: one band of R with no peer, for measuring what
 * one rank computes and stages (`longvk bench sp`). Each operation does the device work and
 * the host staging of sp_comm_mpi.c, with the network left out: the band's own partial
 * state stands in for the others' in the gathered [R, M] (so the device adds R - 1 times,
 * as a rank does), its own edge rows for the rows the neighbours would send, and the other
 * bands' prediction rows are zeros. The results are finite but no video's. */
#include <stdlib.h>
#include <string.h>

#include "sp_comm_internal.h"

static lv_status solo_state_sum(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials, const lv_tensor *sum) {
    const int64_t n = lv_tensor_numel(sum);
    float *all = malloc((size_t)n * c->bands * sizeof *all);
    if (!all) return lv_error(LV_ERR_NOMEM, "out of host memory for %d partial states", c->bands);
    lv_status s = lv_tensor_read(ctx, partials, all, (uint64_t)n * sizeof *all);
    for (int r = 1; s == LV_OK && r < c->bands; r++) memcpy(all + (size_t)r * n, all, (size_t)n * sizeof *all);
    if (s == LV_OK) s = lv_sp_sum_host_partials(ctx, all, c->bands, n, sum);
    free(all);
    return s;
}

static lv_status solo_halo(lv_sp_comm *c, lv_ctx *ctx, const sp_halo_band *b) {
    (void)c;
    const lv_tensor *o = b->src;
    const int64_t count = o->shape[0] * o->shape[2] * o->shape[3];
    float *buf = malloc((size_t)count * 2 * sizeof *buf);
    if (!buf) return lv_error(LV_ERR_NOMEM, "out of host memory for the halo rows");
    float *first = buf, *last = buf + count;
    lv_status s = lv_sp_stage_row(ctx, o, b->first, first, true);
    if (s == LV_OK) s = lv_sp_stage_row(ctx, o, b->last, last, true);
    /* what would come from the band above (its last row) and below (its first row) */
    if (s == LV_OK && b->above >= 0) s = lv_sp_stage_row(ctx, b->dst, b->above, last, false);
    if (s == LV_OK && b->below >= 0) s = lv_sp_stage_row(ctx, b->dst, b->below, first, false);
    free(buf);
    return s;
}

static lv_status solo_gather_rows(lv_sp_comm *c, float *all, int F, int H0, int scale, int64_t X, bool to_first) {
    (void)to_first;
    int row0, rows;
    LV_TRY(lv_sp_band(H0, c->bands, c->first, &row0, &rows));
    const int64_t H = (int64_t)H0 * scale, r0 = (int64_t)row0 * scale, n = (int64_t)rows * scale;
    for (int f = 0; f < F; f++) {
        float *frame = all + (int64_t)f * H * X;
        memset(frame, 0, (size_t)(r0 * X) * sizeof *all);
        memset(frame + (r0 + n) * X, 0, (size_t)((H - r0 - n) * X) * sizeof *all);
    }
    return LV_OK;
}

static const lv_sp_comm_ops solo_ops = {
    .state_sum = solo_state_sum, .halo = solo_halo, .gather_rows = solo_gather_rows, .destroy = NULL};

lv_status lv_sp_comm_solo_create(int bands, int band, lv_sp_comm **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_sp_comm_solo_create: out is NULL");
    *out = NULL;
    if (bands < 1 || bands > 4096 || band < 0 || band >= bands)
        return lv_error(LV_ERR_INVALID, "sequence parallel solo rank: band %d of %d (1 to 4096 bands)", band, bands);
    lv_sp_comm *c = calloc(1, sizeof *c);
    if (!c) return lv_error(LV_ERR_NOMEM, "out of host memory");
    c->ops = &solo_ops;
    c->bands = bands;
    c->first = band;
    c->count = 1;
    *out = c;
    return LV_OK;
}
