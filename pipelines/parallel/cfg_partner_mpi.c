/* CFG parallelism over MPI (lv_cfg_split_mpi, longvk/sp_comm_mpi.h): the world's ranks in
 * two groups, the first half running the conditional passes of the guided steps and the
 * second the unconditional ones; rank b of one group swaps predictions with rank b of the
 * other (lv_cfg_partner), each group being its own communicator for the bands. */
#include <limits.h>
#include <stdlib.h>

#include "longvk/sp_comm_mpi.h"
#include "mpi_status.h"

typedef struct mpi_partner {
    lv_cfg_partner partner; /* first: the object handed out */
    MPI_Comm pair;          /* two ranks: 0 conditional, 1 unconditional */
    int world_rank;
} mpi_partner;

static lv_status mpi_failed(int err, const char *call, int rank) {
    return lv_mpi_status(err, "CFG parallel", call, rank);
}

/* MPI counts are ints: a prediction of more than INT_MAX floats goes in pieces. */
static lv_status swap_predictions(void *user, const float *mine, float *theirs, size_t n) {
    mpi_partner *m = user;
    const int other = m->partner.role == LV_CFG_COND ? 1 : 0;
    for (size_t at = 0; at < n;) {
        const int count = n - at > (size_t)INT_MAX ? INT_MAX : (int)(n - at);
        int err = MPI_Sendrecv(mine + at, count, MPI_FLOAT, other, 7, theirs + at, count, MPI_FLOAT, other, 7, m->pair,
                               MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return mpi_failed(err, "MPI_Sendrecv (the CFG partner's prediction)", m->world_rank);
        at += (size_t)count;
    }
    return LV_OK;
}

static lv_status share_bytes(void *user, void *data, uint64_t bytes) {
    mpi_partner *m = user;
    for (uint64_t at = 0; at < bytes;) {
        const int count = bytes - at > (uint64_t)INT_MAX ? INT_MAX : (int)(bytes - at);
        int err = MPI_Bcast((char *)data + at, count, MPI_BYTE, 0, m->pair);
        if (err != MPI_SUCCESS) return mpi_failed(err, "MPI_Bcast (to the CFG partner)", m->world_rank);
        at += (uint64_t)count;
    }
    return LV_OK;
}

static lv_status agree_max(void *user, int *value) {
    mpi_partner *m = user;
    int err = MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MAX, m->pair);
    return err == MPI_SUCCESS ? LV_OK : mpi_failed(err, "MPI_Allreduce (the CFG partners' agreement)", m->world_rank);
}

lv_status lv_cfg_split_mpi(MPI_Comm world, MPI_Comm *bands, lv_cfg_partner **partner) {
    if (!bands || !partner) return lv_error(LV_ERR_INVALID, "lv_cfg_split_mpi: %s is NULL", !bands ? "bands" : "partner");
    *bands = MPI_COMM_NULL;
    *partner = NULL;
    int rank, size;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    if (size < 2 || size % 2)
        return lv_error(LV_ERR_INVALID, "CFG parallel needs an even number of ranks (two groups of the same size), "
                        "not %d", size);
    mpi_partner *m = calloc(1, sizeof *m);
    if (!m) return lv_error(LV_ERR_NOMEM, "out of host memory");
    const int half = size / 2, group = rank / half, band = rank % half;
    m->world_rank = rank;
    m->partner = (lv_cfg_partner){.role = group == 0 ? LV_CFG_COND : LV_CFG_UNCOND, .swap = swap_predictions,
                                  .share = share_bytes, .agree_max = agree_max, .user = m};
    int err = MPI_Comm_split(world, group, rank, bands);
    if (err == MPI_SUCCESS) err = MPI_Comm_split(world, band, group, &m->pair);
    if (err == MPI_SUCCESS) err = MPI_Comm_set_errhandler(m->pair, MPI_ERRORS_RETURN);
    if (err != MPI_SUCCESS) {
        if (*bands != MPI_COMM_NULL) MPI_Comm_free(bands);
        if (m->pair != MPI_COMM_NULL) MPI_Comm_free(&m->pair);
        free(m);
        return mpi_failed(err, "MPI_Comm_split", rank);
    }
    *partner = &m->partner;
    return LV_OK;
}

void lv_cfg_partner_mpi_destroy(lv_cfg_partner *partner) {
    if (!partner) return;
    mpi_partner *m = partner->user;
    MPI_Comm_free(&m->pair);
    free(m);
}
