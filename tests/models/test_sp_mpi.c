/* The MPI transport of sequence parallelism (pipelines/parallel/sp_comm_mpi.c) against the
 * in-process emulation, bit for bit: tests/mpi/sp_comm_check runs under `mpirun -np R` (2
 * and 3 ranks: bands of 4/3 and 3/2/2 rows; oversubscribed on lavapipe), one band per rank,
 * and writes each rank's band-ordered state sum and padded band; here the emulated
 * transport computes the same from the same inputs and every float must be identical.
 * Built with -DLONGVK_MPI=ON (CI's sanitizer build); elsewhere the test says so and skips. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_mpi.h"

/* ---- `longvk forward --sequence-parallel` under mpirun ----
 * The tiny model's chunks of 2 latent frames (a read pass, then the write pass that carries
 * the state to the next chunk), its 4 token rows over 2 and 3 ranks (2/2 and 2/1/1): the
 * output file of rank 0 is byte for byte --sp-emulate R's, and within NMSE 1e-10 of the
 * unsplit pass. 5 ranks for 4 rows: every rank stops, the message says why, no output. */
#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors"
static void forward_inputs(char *common, size_t size) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    char xp[1100], tp[1100];
    snprintf(xp, sizeof xp, "%s", ts_tmp("mpi_x.npy"));
    snprintf(tp, sizeof tp, "%s", ts_tmp("mpi_text.safetensors"));
    ts_forward_inputs(v, xp, tp);
    lv_weights_close(v);
    snprintf(common, size, "forward --model %s --latents %s --timestep 727 --block-frames 2 --text-embeds %s", WEIGHTS,
             xp, tp);
}

static char *run(const char *cmd, int want) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert(want ? rc != 0 : rc == 0, "%s: exit %d\n%s", cmd, rc, out);
    return out;
}

#ifdef LONGVK_HAVE_MPI
#include "../tests/mpi/sp_check_inputs.h"

static void check_ranks(int R) {
    char dir[1024], cmd[4096];
    snprintf(dir, sizeof dir, "%s", ts_tmp("sp-mpi"));
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np %d %s %s", R, LONGVK_SP_CHECK, dir);
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
    free(out);

    lv_ctx *ctx = ts_ctx();
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_emulated_create(R, &comm), LV_OK, "%s", lv_last_error());
    lv_tensor partials, sum, *own = calloc((size_t)R, sizeof *own), *pad = calloc((size_t)R, sizeof *pad);
    const lv_tensor **ownp = calloc((size_t)R, sizeof *ownp), **padp = calloc((size_t)R, sizeof *padp);
    sp_check_band *bands = calloc((size_t)R, sizeof *bands);
    cr_assert(own && pad && ownp && padp && bands);
    int64_t pshape[2] = {R, SP_CHECK_M}, sshape[1] = {SP_CHECK_M};
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, pshape, &partials), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, sshape, &sum), LV_OK);
    for (int r = 0; r < R; r++) {
        float *p = sp_check_partial(r);
        lv_tensor row = lv_tensor_view(&partials, (int64_t)r * SP_CHECK_M, 1, sshape);
        cr_assert_eq(lv_tensor_write(ctx, &row, p, SP_CHECK_M * sizeof(float)), LV_OK);
        free(p);
        sp_check_band *b = &bands[r];
        cr_assert_eq(sp_check_band_of(R, r, b), LV_OK);
        float *o = sp_check_own(b);
        int64_t os[4] = {SP_CHECK_F, b->rows, SP_CHECK_W, SP_CHECK_X};
        int64_t ps[4] = {SP_CHECK_F, b->top + b->rows + b->bottom, SP_CHECK_W, SP_CHECK_X};
        cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, os, &own[r]), LV_OK);
        cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, ps, &pad[r]), LV_OK);
        cr_assert_eq(lv_tensor_write(ctx, &own[r], o, (uint64_t)lv_tensor_numel(&own[r]) * 4), LV_OK);
        cr_assert_eq(lv_tensor_zero(ctx, &pad[r]), LV_OK);
        free(o);
        ownp[r] = &own[r];
        padp[r] = &pad[r];
    }
    cr_assert_eq(lv_sp_comm_state_sum(comm, ctx, &partials, &sum), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_sp_comm_halo(comm, ctx, ownp, padp), LV_OK, "%s", lv_last_error());
    float *want_sum = ts_read(ctx, &sum);
    for (int r = 0; r < R; r++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/rank%d.bin", dir, r);
        size_t len;
        uint8_t *got = ts_slurp(path, &len);
        size_t npad = (size_t)lv_tensor_numel(&pad[r]);
        cr_assert_eq(len, (SP_CHECK_M + npad) * sizeof(float), "rank %d wrote %zu bytes", r, len);
        cr_assert_eq(memcmp(got, want_sum, SP_CHECK_M * sizeof(float)), 0,
                     "rank %d of %d: the state sum differs from the emulation's", r, R);
        float *want_pad = ts_read(ctx, &pad[r]);
        cr_assert_eq(memcmp(got + SP_CHECK_M * sizeof(float), want_pad, npad * sizeof(float)), 0,
                     "rank %d of %d: the padded band (halo rows) differs from the emulation's", r, R);
        /* and, from the inputs themselves: the top halo row is the band above's last row */
        if (r > 0) {
            const sp_check_band *up = &bands[r - 1];
            float *above = sp_check_own(up);
            const float *g = (const float *)(got + SP_CHECK_M * sizeof(float));
            size_t row = (size_t)SP_CHECK_W * SP_CHECK_X, rows_pad = (size_t)(bands[r].top + bands[r].rows + bands[r].bottom);
            for (int f = 0; f < SP_CHECK_F; f++)
                cr_assert_eq(memcmp(g + f * rows_pad * row, above + ((size_t)f * up->rows + up->rows - 1) * row,
                                    row * sizeof(float)), 0, "rank %d frame %d: the top halo row", r, f);
            free(above);
        }
        free(want_pad);
        free(got);
        remove(path);
    }
    free(want_sum);
    for (int r = 0; r < R; r++) {
        lv_tensor_free(ctx, &own[r]);
        lv_tensor_free(ctx, &pad[r]);
    }
    lv_tensor_free(ctx, &partials);
    lv_tensor_free(ctx, &sum);
    free(own);
    free(pad);
    free(ownp);
    free(padp);
    free(bands);
    lv_sp_comm_destroy(comm);
    ts_ctx_done(ctx);
}

Test(sp_mpi, two_ranks_equal_the_emulation, .timeout = 300) { check_ranks(2); }
Test(sp_mpi, three_ranks_equal_the_emulation, .timeout = 300) { check_ranks(3); }

Test(sp_mpi, forward_ranks_equal_the_emulation, .timeout = 300) {
    char common[4096], cmd[8192], a[1100], b[1100], one[1100];
    forward_inputs(common, sizeof common);
    snprintf(one, sizeof one, "%s", ts_tmp("mpi_r1.npy"));
    snprintf(cmd, sizeof cmd, "%s %s -o %s", LONGVK_CLI, common, one);
    free(run(cmd, 0));
    lv_npy unsplit;
    cr_assert_eq(lv_npy_read(one, &unsplit), LV_OK, "%s", lv_last_error());
    for (int R = 2; R <= 3; R++) {
        snprintf(a, sizeof a, "%s", ts_tmp(R == 2 ? "mpi_e2.npy" : "mpi_e3.npy"));
        snprintf(b, sizeof b, "%s", ts_tmp(R == 2 ? "mpi_m2.npy" : "mpi_m3.npy"));
        snprintf(cmd, sizeof cmd, "%s %s --sp-emulate %d -o %s", LONGVK_CLI, common, R, a);
        free(run(cmd, 0));
        snprintf(cmd, sizeof cmd, TS_MPIRUN "-np %d %s %s --sequence-parallel -o %s", R, LONGVK_CLI, common, b);
        free(run(cmd, 0));
        size_t la, lb;
        uint8_t *ba = ts_slurp(a, &la), *bb = ts_slurp(b, &lb);
        cr_assert(la == lb && memcmp(ba, bb, la) == 0, "%d ranks: the output differs from --sp-emulate %d's", R, R);
        free(ba);
        free(bb);
        lv_npy m;
        cr_assert_eq(lv_npy_read(b, &m), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_npy_numel(&m), lv_npy_numel(&unsplit));
        double e = ts_nmse(m.data, unsplit.data, (size_t)lv_npy_numel(&m));
        cr_log_info("%d ranks against one: NMSE %.3g", R, e);
        cr_assert(e <= 1e-10, "%d ranks against the unsplit pass: NMSE %.3g > 1e-10", R, e);
        lv_npy_free(&m);
    }
    lv_npy_free(&unsplit);
}

Test(sp_mpi, forward_more_ranks_than_rows_stops_every_rank, .timeout = 300) {
    char common[4096], cmd[8192], o[1100];
    forward_inputs(common, sizeof common);
    snprintf(o, sizeof o, "%s", ts_tmp("mpi_r5.npy"));
    remove(o);
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 5 %s %s --sequence-parallel -o %s", LONGVK_CLI, common, o);
    char *out = run(cmd, 1);
    cr_assert(strstr(out, "5 sequence-parallel bands") && strstr(out, "4 token rows"), "%s", out);
    cr_assert(strstr(out, "stopping every rank"), "%s", out);
    free(out);
    cr_assert_neq(access(o, F_OK), 0, "a failed run left %s", o);
}
#else
Test(sp_mpi, built_without_mpi) {
    /* the flag is a clear error here, not a silent one-rank run */
    char common[4096], cmd[8192], *out;
    forward_inputs(common, sizeof common);
    snprintf(cmd, sizeof cmd, "%s %s -o %s --sequence-parallel", LONGVK_CLI, common, ts_tmp("never.npy"));
    out = run(cmd, 1);
    cr_assert(strstr(out, "needs a build with MPI"), "%s", out);
    free(out);
    cr_skip_test("built without -DLONGVK_MPI=ON: the MPI transport is not here");
}
#endif
