/* Band geometry and the transport-independent part of longvk/sp_comm.h: argument checks,
 * the byte counts and clocks of the statistics, then the transport's operation; and the
 * host staging that the MPI and solo transports share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longvk/ops.h"
#include "sp_comm_internal.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one operation under the statistics: bytes as the header defines them, the clock
 * around it (with timing on, between two flushes). */
typedef struct op_clock {
    double start;
} op_clock;

static lv_status op_begin(lv_sp_comm *c, lv_ctx *ctx, op_clock *k) {
    if (c->timing && ctx) LV_TRY(lv_flush(ctx));
    k->start = now_seconds();
    return LV_OK;
}

static lv_status op_end(lv_sp_comm *c, lv_ctx *ctx, const op_clock *k, lv_sp_op op, uint64_t bytes,
                        uint64_t messages, lv_status s) {
    if (s == LV_OK && c->timing && ctx) s = lv_flush(ctx);
    c->stats.calls[op]++;
    c->stats.bytes_sent[op] += bytes;
    c->stats.messages[op] += messages;
    c->stats.seconds[op] += now_seconds() - k->start;
    return s;
}

/* The halo exchange of local bands b[0 .. count) under the statistics. */
static lv_status run_halo(lv_sp_comm *c, lv_ctx *ctx, const sp_halo_band *b) {
    uint64_t bytes = 0, messages = 0; /* each band's edge row of every frame to each neighbour */
    for (int i = 0; i < c->count; i++) {
        const int r = c->first + i;
        const lv_tensor *o = b[i].src;
        const uint64_t neighbours = (uint64_t)((r > 0) + (r < c->bands - 1));
        messages += neighbours;
        bytes += neighbours * (uint64_t)(o->shape[0] * o->shape[2] * o->shape[3]) * sizeof(float);
    }
    op_clock k;
    LV_TRY(op_begin(c, ctx, &k));
    return op_end(c, ctx, &k, LV_SP_HALO, bytes, messages, c->ops->halo(c, ctx, b));
}

/* The rows of all [F, H0 * scale, X] that the local bands hold, to the other processes, or
 * (to_first) to band 0's, under the statistics. */
static lv_status gather_rows(lv_sp_comm *c, float *all, int F, int H0, int scale, int64_t X, bool to_first) {
    if (F < 1 || X < 1 || H0 < c->bands || scale < 1)
        return lv_error(LV_ERR_INVALID, "sequence parallel gather: %d frames of %d rows (x %d) of %lld values for %d "
                        "bands", F, H0, scale, (long long)X, c->bands);
    uint64_t bytes = 0, messages = 0; /* each local band's rows to each of the R - 1 others, or to band 0 */
    for (int i = 0; i < c->count; i++) {
        int row0, rows;
        LV_TRY(lv_sp_band(H0, c->bands, c->first + i, &row0, &rows));
        const uint64_t to = to_first ? (uint64_t)(c->first + i > 0) : (uint64_t)(c->bands - 1);
        messages += to;
        bytes += to * (uint64_t)F * (uint64_t)rows * (uint64_t)scale * (uint64_t)X * sizeof(float);
    }
    op_clock k;
    LV_TRY(op_begin(c, NULL, &k)); /* host memory only */
    return op_end(c, NULL, &k, LV_SP_GATHER_ROWS, bytes, messages,
                  c->ops->gather_rows ? c->ops->gather_rows(c, all, F, H0, scale, X, to_first) : LV_OK);
}

const char *lv_sp_op_name(lv_sp_op op) {
    static const char *const names[LV_SP_OPS] = {"state sum", "halo", "gather rows"};
    return op >= 0 && op < LV_SP_OPS ? names[op] : "?";
}

void lv_sp_comm_stats_get(const lv_sp_comm *c, lv_sp_comm_stats *out) {
    if (!out) return;
    if (c) *out = c->stats;
    else memset(out, 0, sizeof *out);
}

void lv_sp_comm_stats_reset(lv_sp_comm *c) {
    if (c) memset(&c->stats, 0, sizeof c->stats);
}

void lv_sp_comm_set_timing(lv_sp_comm *c, bool on) {
    if (c) c->timing = on;
}

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
    op_clock k;
    LV_TRY(op_begin(c, ctx, &k));
    /* every local band's partial to each of the R - 1 others */
    const uint64_t bytes = (uint64_t)c->count * (uint64_t)(c->bands - 1) * (uint64_t)m * sizeof(float);
    return op_end(c, ctx, &k, LV_SP_STATE_SUM, bytes, (uint64_t)c->count * (uint64_t)(c->bands - 1),
                  c->ops->state_sum(c, ctx, partials, sum));
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
    sp_halo_band *b = calloc(c->count > 0 ? (size_t)c->count : 1, sizeof *b);
    if (!b) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < c->count; i++) {
        const int r = c->first + i;
        const int64_t last = padded[i]->shape[1] - 1;
        b[i] = (sp_halo_band){.src = own[i], .dst = padded[i], .first = 0, .last = own[i]->shape[1] - 1,
                              .above = r > 0 ? 0 : -1, .below = r < c->bands - 1 ? last : -1};
    }
    lv_status s = run_halo(c, ctx, b);
    free(b);
    return s;
}

lv_status lv_sp_comm_gather_rows(lv_sp_comm *c, float *all, int F, int H, int64_t X) {
    if (!c || !all) return lv_error(LV_ERR_INVALID, "sequence parallel gather: %s is NULL", !c ? "the communicator" : "the rows");
    return gather_rows(c, all, F, H, 1, X, false);
}

/* ---- bands stacked with their halo rows ---- */

static int64_t stacked_geometry(const lv_sp_comm *c, int H0, int scale, int i, lv_sp_stacked_band *out) {
    const int R = c ? c->bands : 1, first = c ? c->first : 0, count = c ? c->count : 1;
    int64_t at = 0;
    for (int j = 0; j < count; j++) {
        int row0 = 0, rows = H0;
        if (R > 1) lv_sp_band(H0, R, first + j, &row0, &rows); /* checked by lv_sp_stacked_height */
        lv_sp_stacked_band b = {.offset = at, .top = first + j > 0, .rows = (int64_t)rows * scale,
                                .bottom = first + j < R - 1, .row0 = (int64_t)row0 * scale};
        if (j == i && out) *out = b;
        at += b.top + b.rows + b.bottom;
    }
    return at;
}

lv_status lv_sp_stacked_height(const lv_sp_comm *c, int H0, int scale, int64_t *height) {
    *height = 0;
    if (H0 < 1 || scale < 1 || (c && c->bands > H0))
        return lv_error(LV_ERR_INVALID, "sequence parallel: %d bands over %d rows (each band needs at least one "
                        "row: 1 to %d bands)", c ? c->bands : 1, H0, H0);
    *height = stacked_geometry(c, H0, scale, -1, NULL);
    return LV_OK;
}

lv_sp_stacked_band lv_sp_stacked_band_at(const lv_sp_comm *c, int H0, int scale, int i) {
    lv_sp_stacked_band b = {0};
    stacked_geometry(c, H0, scale, i, &b);
    return b;
}

/* t [F, height, W, X] f32 with height that of the stacked bands at H0, scale. */
static lv_status check_stacked(const char *what, const lv_sp_comm *c, const lv_tensor *t, int H0, int scale) {
    int64_t height;
    LV_TRY(lv_sp_stacked_height(c, H0, scale, &height));
    if (!t || t->ndim != 4 || t->dtype != LV_F32 || t->shape[1] != height)
        return lv_error(LV_ERR_INVALID, "sequence parallel %s: the stacked bands need [F, %lld, W, X] f32 (%d rows "
                        "at scale %d)", what, (long long)height, H0, scale);
    return LV_OK;
}

lv_status lv_sp_comm_halo_stacked(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *t, int H0, int scale) {
    if (!c || !ctx || !t)
        return lv_error(LV_ERR_INVALID, "sequence parallel halo: %s is NULL",
                        !c ? "the communicator" : !ctx ? "the context" : "the stacked bands");
    LV_TRY(check_stacked("halo", c, t, H0, scale));
    sp_halo_band *b = calloc(c->count > 0 ? (size_t)c->count : 1, sizeof *b);
    if (!b) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < c->count; i++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(c, H0, scale, i);
        const int64_t own = g.offset + g.top;
        b[i] = (sp_halo_band){.src = t, .dst = t, .first = own, .last = own + g.rows - 1,
                              .above = g.top ? g.offset : -1, .below = g.bottom ? own + g.rows : -1};
    }
    lv_status s = run_halo(c, ctx, b);
    free(b);
    return s;
}

lv_status lv_sp_comm_gather_stacked(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *t, int H0, int scale, float *all,
                                    bool to_first) {
    if (!c || !ctx || !t || !all)
        return lv_error(LV_ERR_INVALID, "sequence parallel gather: %s is NULL",
                        !c ? "the communicator" : !ctx ? "the context" : !t ? "the stacked bands" : "the rows");
    LV_TRY(check_stacked("gather", c, t, H0, scale));
    const int64_t F = t->shape[0], Hs = t->shape[1], H = (int64_t)H0 * scale, X = t->shape[2] * t->shape[3];
    if (F < 1 || F > 0x7fffffff || X < 1)
        return lv_error(LV_ERR_INVALID, "sequence parallel gather: %lld frames of %lld values a row", (long long)F,
                        (long long)X);
    const uint64_t n = (uint64_t)F * (uint64_t)Hs * (uint64_t)X;
    float *local = n < ((uint64_t)1 << 40) ? malloc((size_t)n * sizeof *local) : NULL;
    if (!local) return lv_error(LV_ERR_NOMEM, "out of host memory for %lld stacked rows", (long long)(F * Hs));
    lv_status s = lv_tensor_read(ctx, t, local, lv_tensor_nbytes(t));
    for (int i = 0; s == LV_OK && i < c->count; i++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(c, H0, scale, i);
        for (int64_t f = 0; f < F; f++)
            memcpy(all + (f * H + g.row0) * X, local + (f * Hs + g.offset + g.top) * X,
                   (size_t)(g.rows * X) * sizeof *all);
    }
    free(local);
    return s == LV_OK ? gather_rows(c, all, (int)F, H0, scale, X, to_first) : s;
}

lv_status lv_sp_stage_row(lv_ctx *ctx, const lv_tensor *t, int64_t row, float *host, bool read) {
    const int64_t F = t->shape[0], W = t->shape[2], X = t->shape[3];
    int64_t shape[4] = {F, 1, W, X};
    const uint64_t bytes = (uint64_t)F * W * X * sizeof(float);
    lv_tensor rows = {0};
    LV_TRY(lv_tensor_create(ctx, LV_F32, 4, shape, &rows));
    lv_status s = read ? lv_sp_copy_rows(ctx, &rows, 0, t, row, 1) : lv_tensor_write(ctx, &rows, host, bytes);
    if (s == LV_OK) s = read ? lv_tensor_read(ctx, &rows, host, bytes) : lv_sp_copy_rows(ctx, t, row, &rows, 0, 1);
    lv_tensor_free(ctx, &rows);
    return s;
}

lv_status lv_sp_sum_host_partials(lv_ctx *ctx, const float *all, int R, int64_t n, const lv_tensor *sum) {
    int64_t shape[2] = {R, n};
    lv_tensor gathered = {0};
    LV_TRY(lv_tensor_create(ctx, LV_F32, 2, shape, &gathered));
    lv_status s = lv_tensor_write(ctx, &gathered, all, (uint64_t)n * R * sizeof *all);
    if (s == LV_OK) {
        lv_tensor flat = lv_tensor_view(sum, 0, 1, &n), p0 = lv_tensor_view(&gathered, 0, 1, &n);
        s = lv_tensor_copy(ctx, &flat, &p0);
        for (int r = 1; s == LV_OK && r < R; r++) {
            lv_tensor pr = lv_tensor_view(&gathered, (int64_t)r * n, 1, &n);
            s = lv_op_add(ctx, &flat, &flat, &pr);
        }
    }
    lv_tensor_free(ctx, &gathered); /* released once the stream has run */
    return s;
}

lv_status lv_sp_comm_broadcast(lv_sp_comm *c, void *data, uint64_t bytes) {
    if (!c || (!data && bytes > 0))
        return lv_error(LV_ERR_INVALID, "sequence parallel broadcast: %s is NULL", !c ? "the communicator" : "the data");
    return c->ops->broadcast && bytes > 0 ? c->ops->broadcast(c, data, bytes) : LV_OK;
}

lv_status lv_sp_comm_check_same(lv_sp_comm *c, const char *what, const char *mine) {
    enum { TEXT = 512 };
    if (!c || !what || !mine)
        return lv_error(LV_ERR_INVALID, "sequence parallel check: %s is NULL", !c ? "the communicator" : "a text");
    if (!c->ops->gather_bytes) return LV_OK; /* one process: nothing to compare */
    const int processes = c->bands / c->count;
    char text[TEXT] = {0}, *all = calloc((size_t)processes, TEXT);
    if (!all) return lv_error(LV_ERR_NOMEM, "out of host memory");
    snprintf(text, sizeof text, "%s", mine);
    lv_status s = c->ops->gather_bytes(c, text, all, TEXT);
    for (int p = 1; s == LV_OK && p < processes; p++)
        if (memcmp(all, all + (size_t)p * TEXT, TEXT) != 0)
            s = lv_error(LV_ERR_INVALID, "sequence parallel: %s differs between the ranks: band 0 has '%s', band %d "
                         "'%s'; every rank needs the same kind of device and driver, or the ranks would not compute "
                         "the same bits", what, all, p * c->count, all + (size_t)p * TEXT);
    free(all);
    return s;
}

lv_status lv_sp_comm_agree_max(lv_sp_comm *c, int *value) {
    if (!c || !value)
        return lv_error(LV_ERR_INVALID, "sequence parallel agreement: %s is NULL", !c ? "the communicator" : "the value");
    return c->ops->agree_max ? c->ops->agree_max(c, value) : LV_OK;
}
