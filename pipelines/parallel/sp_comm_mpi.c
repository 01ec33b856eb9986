/* The MPI transport of longvk/sp_comm.h (see longvk/sp_comm_mpi.h). Data goes through host
 * buffers (a device-to-device path such as CUDA-aware MPI does not exist for Vulkan
 * memory); per DiT layer that is one partial state (about 1 MB for SANA-Video 2B) and two
 * halo rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sp_comm_mpi.h"
#include "mpi_status.h"
#include "sp_comm_internal.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    int rank, size;
} mpi_impl;

lv_status lv_mpi_status(int err, const char *feature, const char *call, int rank) {
    if (err == MPI_SUCCESS) return LV_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    return lv_error(LV_ERR_IO, "%s: %s on rank %d: %s", feature, call, rank, text);
}

static lv_status mpi_check(int err, const char *call, int rank) {
    return lv_mpi_status(err, "sequence parallel", call, rank);
}

/* Every rank's partial [1, M] gathered on the host, then summed on the device in band
 * order as sp_comm_emulated.c does (copy, then one add per band). */
static lv_status mpi_state_sum(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials, const lv_tensor *sum) {
    mpi_impl *m = c->impl;
    const int64_t n = lv_tensor_numel(sum);
    float *mine = malloc((size_t)n * sizeof *mine), *all = malloc((size_t)n * c->bands * sizeof *all);
    lv_status s = mine && all ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for %d partial states", c->bands);
    if (s == LV_OK) s = lv_tensor_read(ctx, partials, mine, (uint64_t)n * sizeof *mine);
    if (s == LV_OK)
        s = mpi_check(MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, m->comm), "MPI_Allgather",
                      m->rank);
    if (s == LV_OK) s = lv_sp_sum_host_partials(ctx, all, c->bands, n, sum);
    free(mine);
    free(all);
    return s;
}

/* The band's first row goes up, its last row down; the neighbours' edge rows come back
 * into the band's halo rows. */
static lv_status mpi_halo(lv_sp_comm *c, lv_ctx *ctx, const sp_halo_band *b) {
    mpi_impl *m = c->impl;
    const lv_tensor *o = b->src;
    const int64_t count = o->shape[0] * o->shape[2] * o->shape[3];
    const int up = m->rank > 0 ? m->rank - 1 : MPI_PROC_NULL, down = m->rank < m->size - 1 ? m->rank + 1 : MPI_PROC_NULL;
    float *buf = malloc((size_t)count * 4 * sizeof *buf);
    if (!buf) return lv_error(LV_ERR_NOMEM, "out of host memory for the halo rows");
    float *first = buf, *last = buf + count, *from_up = buf + 2 * count, *from_down = buf + 3 * count;
    lv_status s = lv_sp_stage_row(ctx, o, b->first, first, true);
    if (s == LV_OK) s = lv_sp_stage_row(ctx, o, b->last, last, true);
    /* downward: my last row to the rank below, the rank above's last row to me; then upward */
    if (s == LV_OK)
        s = mpi_check(MPI_Sendrecv(last, (int)count, MPI_FLOAT, down, 1, from_up, (int)count, MPI_FLOAT, up, 1, m->comm,
                                   MPI_STATUS_IGNORE), "MPI_Sendrecv (halo down)", m->rank);
    if (s == LV_OK)
        s = mpi_check(MPI_Sendrecv(first, (int)count, MPI_FLOAT, up, 2, from_down, (int)count, MPI_FLOAT, down, 2,
                                   m->comm, MPI_STATUS_IGNORE), "MPI_Sendrecv (halo up)", m->rank);
    if (s == LV_OK && up != MPI_PROC_NULL) s = lv_sp_stage_row(ctx, b->dst, b->above, from_up, false);
    if (s == LV_OK && down != MPI_PROC_NULL) s = lv_sp_stage_row(ctx, b->dst, b->below, from_down, false);
    free(buf);
    return s;
}

/* Each rank's band rows [F, rows_r, X] packed, MPI_Allgatherv (or MPI_Gatherv to rank 0),
 * unpacked into all [F, H, X]. */
static lv_status mpi_gather_rows(lv_sp_comm *c, float *all, int F, int H0, int scale, int64_t X, bool to_first) {
    mpi_impl *m = c->impl;
    const int64_t H = (int64_t)H0 * scale;
    int *counts = calloc((size_t)c->bands, sizeof *counts), *displs = calloc((size_t)c->bands, sizeof *displs);
    float *packed = malloc((size_t)F * H * X * sizeof *packed);
    lv_status s = counts && displs && packed ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for the gather");
    int64_t at = 0;
    for (int r = 0; s == LV_OK && r < c->bands; r++) {
        int row0, rows;
        s = lv_sp_band(H0, c->bands, r, &row0, &rows);
        const int64_t r0 = (int64_t)row0 * scale, n = (int64_t)rows * scale;
        if (s == LV_OK && (int64_t)F * n * X > 0x7fffffff)
            s = lv_error(LV_ERR_LIMIT, "sequence parallel gather: %lld values for band %d exceed MPI's int count",
                         (long long)F * n * X, r);
        counts[r] = (int)((int64_t)F * n * X);
        displs[r] = (int)at; /* the whole [F, H, X] fits an int: checked below */
        at += counts[r];
        if (r == m->rank)
            for (int f = 0; s == LV_OK && f < F; f++)
                memcpy(packed + displs[r] + (int64_t)f * n * X, all + ((int64_t)f * H + r0) * X,
                       (size_t)(n * X) * sizeof *packed);
    }
    if (s == LV_OK && at > 0x7fffffff)
        s = lv_error(LV_ERR_LIMIT, "sequence parallel gather: %lld values exceed MPI's int count", (long long)at);
    if (s == LV_OK && !to_first)
        s = mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, packed, counts, displs, MPI_FLOAT, m->comm),
                      "MPI_Allgatherv", m->rank);
    if (s == LV_OK && to_first) /* rank 0 receives in place; the others send their part */
        s = mpi_check(m->rank == 0 ? MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, packed, counts, displs, MPI_FLOAT,
                                                 0, m->comm)
                                   : MPI_Gatherv(packed + displs[m->rank], counts[m->rank], MPI_FLOAT, NULL, NULL,
                                                 NULL, MPI_FLOAT, 0, m->comm),
                      "MPI_Gatherv", m->rank);
    for (int r = 0; s == LV_OK && r < c->bands && (!to_first || m->rank == 0); r++) {
        int row0, rows;
        lv_sp_band(H0, c->bands, r, &row0, &rows);
        const int64_t r0 = (int64_t)row0 * scale, n = (int64_t)rows * scale;
        for (int f = 0; f < F; f++)
            memcpy(all + ((int64_t)f * H + r0) * X, packed + displs[r] + (int64_t)f * n * X,
                   (size_t)(n * X) * sizeof *all);
    }
    free(counts);
    free(displs);
    free(packed);
    return s;
}

/* From rank 0 to every rank, in pieces MPI's int count can take. */
static lv_status mpi_broadcast(lv_sp_comm *c, void *data, uint64_t bytes) {
    mpi_impl *m = c->impl;
    for (uint64_t at = 0; at < bytes;) {
        const uint64_t piece = bytes - at > (1u << 30) ? (1u << 30) : bytes - at;
        LV_TRY(mpi_check(MPI_Bcast((char *)data + at, (int)piece, MPI_BYTE, 0, m->comm), "MPI_Bcast", m->rank));
        at += piece;
    }
    return LV_OK;
}

/* MPI_MAX of an int: exact, whatever order MPI combines in (D1 forbids only float sums). */
static lv_status mpi_agree_max(lv_sp_comm *c, int *value) {
    mpi_impl *m = c->impl;
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MAX, m->comm), "MPI_Allreduce (MAX)", m->rank);
}

static lv_status mpi_gather_bytes(lv_sp_comm *c, const void *mine, void *all, uint64_t bytes) {
    mpi_impl *m = c->impl;
    if (bytes > (uint64_t)(1u << 30)) return lv_error(LV_ERR_LIMIT, "sequence parallel: %llu bytes to gather",
                                                      (unsigned long long)bytes);
    return mpi_check(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->comm), "MPI_Allgather",
                     m->rank);
}

static void mpi_destroy(lv_sp_comm *c) {
    mpi_impl *m = c->impl;
    if (m) {
        MPI_Comm_free(&m->comm);
        free(m);
    }
    c->impl = NULL;
}

static const lv_sp_comm_ops mpi_ops = {
    .state_sum = mpi_state_sum, .halo = mpi_halo, .gather_rows = mpi_gather_rows, .destroy = mpi_destroy,
    /* generate's block loop */
    .broadcast = mpi_broadcast, .agree_max = mpi_agree_max, .gather_bytes = mpi_gather_bytes};

lv_status lv_sp_comm_mpi_create(MPI_Comm comm, lv_sp_comm **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_sp_comm_mpi_create: out is NULL");
    *out = NULL;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) return lv_error(LV_ERR_INVALID, "lv_sp_comm_mpi_create: MPI_Init has not been called");
    mpi_impl *m = calloc(1, sizeof *m);
    lv_sp_comm *c = calloc(1, sizeof *c);
    if (!m || !c) {
        free(m);
        free(c);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    lv_status s = mpi_check(MPI_Comm_dup(comm, &m->comm), "MPI_Comm_dup", -1);
    if (s == LV_OK) MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (s == LV_OK) MPI_Comm_rank(m->comm, &m->rank);
    if (s == LV_OK) MPI_Comm_size(m->comm, &m->size);
    if (s != LV_OK) {
        free(m);
        free(c);
        return s;
    }
    c->ops = &mpi_ops;
    c->bands = m->size;
    c->first = m->rank;
    c->count = 1;
    c->impl = m;
    *out = c;
    return LV_OK;
}
