/* Run under mpirun by tests/models/test_sp_mpi.c: each rank holds band `rank` of R and runs the MPI
 * transport of longvk/sp_comm.h on inputs every process can rebuild (sp_check_inputs.h),
 * then writes what it got to DIR/rank<r>.bin: the band-ordered state sum [M] and its padded
 * band [F, top + rows + bottom, W, X]. The test compares them with the in-process emulation,
 * bit for bit. Exit status 0 on success; a failure prints its message, prefixed with the rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "longvk/sp_comm_mpi.h"
#include "sp_check_inputs.h"

static int fail(int rank, const char *what) {
    fprintf(stderr, "sp_comm_check rank %d: %s: %s\n", rank, what, lv_last_error());
    return 1;
}

static int run(int rank, int R, const char *dir) {
    lv_ctx_options o;
    lv_ctx_options_default(&o);
    lv_ctx *ctx;
    if (lv_ctx_create(&o, &ctx) != LV_OK) return fail(rank, "context");
    lv_sp_comm *comm;
    if (lv_sp_comm_mpi_create(MPI_COMM_WORLD, &comm) != LV_OK) return fail(rank, "communicator");
    if (lv_sp_comm_bands(comm) != R || lv_sp_comm_first(comm) != rank || lv_sp_comm_count(comm) != 1) {
        fprintf(stderr, "sp_comm_check rank %d: the communicator holds bands %d+%d of %d\n", rank,
                lv_sp_comm_first(comm), lv_sp_comm_count(comm), lv_sp_comm_bands(comm));
        return 1;
    }
    sp_check_band band;
    if (sp_check_band_of(R, rank, &band) != LV_OK) return fail(rank, "band");
    float *partial = sp_check_partial(rank), *own = sp_check_own(&band);
    int64_t pshape[2] = {1, SP_CHECK_M}, sshape[1] = {SP_CHECK_M};
    int64_t oshape[4] = {SP_CHECK_F, band.rows, SP_CHECK_W, SP_CHECK_X};
    int64_t padshape[4] = {SP_CHECK_F, band.top + band.rows + band.bottom, SP_CHECK_W, SP_CHECK_X};
    lv_tensor tp, ts, to, tpad;
    if (lv_tensor_create(ctx, LV_F32, 2, pshape, &tp) || lv_tensor_create(ctx, LV_F32, 1, sshape, &ts) ||
        lv_tensor_create(ctx, LV_F32, 4, oshape, &to) || lv_tensor_create(ctx, LV_F32, 4, padshape, &tpad) ||
        lv_tensor_write(ctx, &tp, partial, SP_CHECK_M * sizeof(float)) ||
        lv_tensor_write(ctx, &to, own, (uint64_t)lv_tensor_numel(&to) * sizeof(float)) || lv_tensor_zero(ctx, &tpad))
        return fail(rank, "tensors");
    const lv_tensor *ownp[1] = {&to}, *padp[1] = {&tpad};
    if (lv_sp_comm_state_sum(comm, ctx, &tp, &ts) != LV_OK) return fail(rank, "state sum");
    if (lv_sp_comm_halo(comm, ctx, ownp, padp) != LV_OK) return fail(rank, "halo");
    size_t npad = (size_t)lv_tensor_numel(&tpad);
    float *sum = malloc(SP_CHECK_M * sizeof *sum), *pad = malloc(npad * sizeof *pad);
    if (!sum || !pad || lv_tensor_read(ctx, &ts, sum, SP_CHECK_M * sizeof *sum) ||
        lv_tensor_read(ctx, &tpad, pad, npad * sizeof *pad))
        return fail(rank, "read back");
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.bin", dir, rank);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(sum, sizeof *sum, SP_CHECK_M, f) != SP_CHECK_M || fwrite(pad, sizeof *pad, npad, f) != npad ||
        fclose(f) != 0) {
        fprintf(stderr, "sp_comm_check rank %d: cannot write %s\n", rank, path);
        return 1;
    }
    free(sum);
    free(pad);
    free(partial);
    free(own);
    lv_tensor *all[] = {&tp, &ts, &to, &tpad};
    for (int i = 0; i < 4; i++) lv_tensor_free(ctx, all[i]);
    /* D4: the same text on every rank passes; a rank with another fails everywhere, named */
    if (lv_sp_comm_check_same(comm, "the check", "same") != LV_OK) return fail(rank, "the same text");
    if (R > 1) {
        lv_status s = lv_sp_comm_check_same(comm, "the check", rank == R - 1 ? "other" : "same");
        char want[64];
        snprintf(want, sizeof want, "band %d 'other'", R - 1);
        if (s != LV_ERR_INVALID || !strstr(lv_last_error(), want) || !strstr(lv_last_error(), "band 0 has 'same'")) {
            fprintf(stderr, "sp_comm_check rank %d: differing texts gave status %d, '%s'\n", rank, (int)s,
                    lv_last_error());
            return 1;
        }
    }
    lv_sp_comm_destroy(comm);
    uint64_t messages = lv_ctx_validation_messages(ctx);
    lv_ctx_destroy(ctx);
    if (messages) {
        fprintf(stderr, "sp_comm_check rank %d: %llu validation messages\n", rank, (unsigned long long)messages);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, R = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    int rc = argc == 2 ? run(rank, R, argv[1]) : (fprintf(stderr, "usage: sp_comm_check DIR\n"), 2);
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
