/* The Wan VAE decoder over sequence-parallel bands (lv_vae_set_sequence_parallel;
 * pipelines/wan_vae/wan_vae.c, pipelines/parallel/README.md "In longvk").
 *
 * Each band computes its rows as one rank would: every 3x3 conv reads one halo row from
 * each neighbour, the resample's conv makes the band's rows at twice the size, the middle
 * attention takes keys and values from every band's rows. Every output pixel then sums
 * the same products in the same order as an unsplit decode, so the frames are asserted
 * equal to the unsplit decoder's bit for bit (a missing or stale halo row changes the
 * pixels next to a band edge; the attention over the band's own rows only changes every
 * pixel), at 1, 2, 3 and 7 bands over 7 latent rows (uneven bands, single-row bands),
 * in steps of 1 and 2 latent frames, and on the original module's vectors (NMSE 1e-9, as
 * tests/models/test_vae.c). What the bands send is counted against the decoder's layer table. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk/npy.h"
#include "longvk/sp_comm.h"
#include "longvk/vae.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_mpi.h"
#include "wan_vae_internal.h"

#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.vectors.safetensors"
#define NMSE_BOUND 1e-9

/* the random video: z 4 (the tiny decoder), 3 latent frames of 7 x 5 */
enum { Z = 4, N = 3, LH = 7, LW = 5, FRAMES = 1 + 4 * (N - 1) };
#define FRAME_FLOATS ((size_t)3 * 64 * LH * LW)

typedef struct collect {
    float *out; /* [T][3, H, W] */
    size_t per;
    int64_t calls;
} collect;

static lv_status collect_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    collect *c = user;
    cr_assert_eq((size_t)3 * height * width, c->per);
    memcpy(c->out + (size_t)index * c->per, rgb, c->per * sizeof *rgb);
    c->calls++;
    return LV_OK;
}

/* The video of latents [Z, n, h, w] decoded in chunks of `chunk` latent frames with steps
 * of `step`, over `bands` emulated bands or the communicator `comm` (both 0/NULL: whole). */
static float *decode(lv_ctx *ctx, lv_vae_decoder *dec, const float *lat, int n, int h, int w, int bands,
                     lv_sp_comm *comm, int chunk, int step) {
    lv_vae_reset(dec);
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, bands, comm), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_set_step_frames(dec, step), LV_OK);
    collect c = {.per = (size_t)3 * 64 * h * w};
    c.out = calloc((size_t)(1 + 4 * (n - 1)) * c.per, sizeof *c.out);
    const size_t plane = (size_t)h * w;
    float *part = malloc((size_t)Z * chunk * plane * sizeof *part);
    for (int f0 = 0; f0 < n; f0 += chunk) {
        int k = n - f0 < chunk ? n - f0 : chunk;
        for (int z = 0; z < Z; z++)
            memcpy(part + (size_t)z * k * plane, lat + ((size_t)z * n + f0) * plane, (size_t)k * plane * sizeof *part);
        cr_assert_eq(lv_vae_decode_frames_cb(ctx, dec, part, k, h, w, collect_frame, &c), LV_OK, "%s",
                     lv_last_error());
    }
    cr_assert_eq(c.calls, 1 + 4 * (n - 1));
    free(part);
    return c.out;
}

Test(vae_bands, every_band_count_gives_the_unsplit_frames, .timeout = 600) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_z_dim(dec), Z);
    float *lat = ts_rand_alloc((size_t)Z * N * LH * LW, 4501, -2, 2);
    const size_t count = FRAMES * FRAME_FLOATS;
    float *whole = decode(ctx, dec, lat, N, LH, LW, 0, NULL, 1, 1);
    const int bands[] = {1, 2, 3, 7}; /* 7 rows: 7; 4/3; 3/2/2; 1 each */
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
        for (int way = 0; way < 2; way++) { /* chunks of 1 with 1-frame steps; one chunk, 2-frame steps */
            float *got = way == 0 ? decode(ctx, dec, lat, N, LH, LW, bands[i], NULL, 1, 1)
                                  : decode(ctx, dec, lat, N, LH, LW, bands[i], NULL, N, 2);
            cr_log_info("%d bands, %s: max|diff| vs unsplit %.3g", bands[i], way ? "2-frame steps" : "1-frame chunks",
                        ts_max_abs_diff(got, whole, count));
            cr_assert_eq(memcmp(got, whole, count * sizeof *got), 0, "%d bands (%s) differ from the unsplit decode",
                         bands[i], way ? "2-frame steps" : "1-frame chunks");
            free(got);
        }
    free(whole);
    free(lat);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

Test(vae_bands, bands_match_the_original_module) {
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    const lv_weight *lat = lv_weights_find(v, "latents"), *video = lv_weights_find(v, "video");
    cr_assert(lat && video);
    const int n = (int)lat->shape[1], h = (int)lat->shape[2], wd = (int)lat->shape[3];
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    float *got = decode(ctx, dec, lat->data, n, h, wd, 2, NULL, 1, 1);
    /* the vectors are [3, T, H, W]; the callback gave [T][3, H, W] */
    const int64_t T = video->shape[1];
    const size_t P = (size_t)video->shape[2] * video->shape[3];
    float *planar = malloc((size_t)3 * T * P * sizeof *planar);
    for (int64_t t = 0; t < T; t++)
        for (int c = 0; c < 3; c++)
            memcpy(planar + ((size_t)c * T + t) * P, got + ((size_t)t * 3 + c) * P, P * sizeof *planar);
    double e = ts_nmse(planar, video->data, (size_t)3 * T * P);
    cr_log_info("2 bands over %d latent rows vs the original: nmse %.3g", h, e);
    cr_assert(e <= NMSE_BOUND, "nmse %.3g > %.0e", e, NMSE_BOUND);
    free(planar);
    free(got);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(v);
    lv_weights_close(w);
}

/* The spatial (3x3) convs of one step: conv1, two per residual block, the resamples' 2-D
 * conv, the head; each reads one halo exchange. */
static int spatial_convs(const vae_arch *a) {
    int n = 1 + 2 + 2 + 1;
    for (int i = 0; i < a->nups; i++) n += a->ups[i].kind == VAE_RES ? 2 : 1;
    return n;
}

/* Values in one halo row of every frame of every 3x3 conv's input, over a step of one latent
 * frame w wide: the frames double at each upsample3d except in the video's first step, the
 * width at each resample; a conv's input has its input channels. */
static uint64_t halo_row_values(const vae_arch *a, int w, bool first) {
    uint64_t T = 1, W = (uint64_t)w;
    uint64_t n = T * W * ((uint64_t)a->z + 4u * (uint64_t)a->trunk); /* conv1; the middle's 2 blocks */
    for (int i = 0; i < a->nups; i++) {
        const vae_arch_layer *u = &a->ups[i];
        if (u->kind == VAE_RES) {
            n += T * W * ((uint64_t)u->ci + (uint64_t)u->co);
            continue;
        }
        if (u->kind == VAE_UP3D && !first) T *= 2;
        n += T * W * (uint64_t)u->ci; /* the resample's conv reads the frame before the 2x */
        W *= 2;
    }
    return n + T * W * (uint64_t)a->head_ch;
}

Test(vae_bands, what_the_bands_send) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    lv_sp_comm *comm;
    const int R = 3;
    cr_assert_eq(lv_sp_comm_emulated_create(R, &comm), LV_OK);
    float *lat = ts_rand_alloc((size_t)Z * 2 * LH * LW, 4502, -2, 2);
    float *got = decode(ctx, dec, lat, 2, LH, LW, 0, comm, 1, 1); /* two steps: 1 pixel frame, then 4 */
    lv_sp_comm_stats st;
    lv_sp_comm_stats_get(comm, &st);
    const vae_arch *a = &dec->arch;
    cr_assert_eq(st.calls[LV_SP_HALO], 2u * (uint64_t)spatial_convs(a), "halo exchanges: %llu",
                 (unsigned long long)st.calls[LV_SP_HALO]);
    /* every band's edge rows to each neighbour: 4 rows a conv over 3 bands */
    const uint64_t halo = 4u * 4u * (halo_row_values(a, LW, true) + halo_row_values(a, LW, false));
    cr_assert_eq(st.bytes_sent[LV_SP_HALO], halo, "halo bytes %llu, want %llu",
                 (unsigned long long)st.bytes_sent[LV_SP_HALO], (unsigned long long)halo);
    /* per step: the attention's rows to every band, the pixel rows to band 0 */
    cr_assert_eq(st.calls[LV_SP_GATHER_ROWS], 4u);
    int row0, rows0;
    cr_assert_eq(lv_sp_band(LH, R, 0, &row0, &rows0), LV_OK);
    const uint64_t attn = 2u * (R - 1) * (uint64_t)LH * LW * a->trunk * 4, /* 2 steps of 1 frame */
        pixels = 5u * (uint64_t)(LH - rows0) * 8 * 8 * LW * 3 * 4;        /* 1 + 4 frames */
    cr_assert_eq(st.bytes_sent[LV_SP_GATHER_ROWS], attn + pixels, "gathered %llu bytes, want %llu",
                 (unsigned long long)st.bytes_sent[LV_SP_GATHER_ROWS], (unsigned long long)(attn + pixels));
    cr_assert_eq(st.calls[LV_SP_STATE_SUM], 0u);
    cr_log_info("3 bands, 2 latent frames of %dx%d: %llu halo exchanges (%llu bytes), gathers %llu bytes", LH, LW,
                (unsigned long long)st.calls[LV_SP_HALO], (unsigned long long)st.bytes_sent[LV_SP_HALO],
                (unsigned long long)st.bytes_sent[LV_SP_GATHER_ROWS]);
    free(got);
    free(lat);
    lv_vae_decoder_destroy(ctx, dec); /* the communicator is borrowed: still ours */
    lv_sp_comm_destroy(comm);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

Test(vae_bands, errors_are_clean) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    float *lat = ts_rand_alloc((size_t)Z * N * LH * LW, 4503, -2, 2);
    float *out = malloc(FRAMES * FRAME_FLOATS * sizeof *out);
    /* more bands than latent rows */
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, LH + 1, NULL), LV_OK);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, N, LH, LW, out), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "8 bands over 7 rows"), "%s", lv_last_error());
    cr_assert_eq(lv_vae_frames_decoded(dec), 0);
    /* emulated bands and a communicator at once; a negative count */
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_emulated_create(2, &comm), LV_OK);
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, 2, comm), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, -1, NULL), LV_ERR_INVALID);
    /* not in the middle of a video */
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, 2, NULL), LV_OK);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, 1, LH, LW, out), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, 3, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_vae_reset"), "%s", lv_last_error());
    /* tiles or bands */
    lv_vae_tiling tiles = {4, 4, 2};
    cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat, N, LH, LW, &tiles, out), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "one or the other"), "%s", lv_last_error());
    lv_sp_comm_destroy(comm);
    free(lat);
    free(out);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

/* ---- longvk decode --sp-emulate / --sequence-parallel ------------------------------------- */

static char *run(const char *cmd, bool fail) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert(fail ? rc != 0 : rc == 0, "%s: exit %d\n%s", cmd, rc, out);
    return out;
}

/* The random latents as an .npy file, and their frames decoded by one process (ffv1 is
 * lossless: decoded frames compare exactly). */
static const char *latents_file(void) {
    static char path[1100];
    snprintf(path, sizeof path, "%s", ts_tmp("vb_latents.npy"));
    float *lat = ts_rand_alloc((size_t)Z * N * LH * LW, 4504, -2, 2);
    int64_t shape[4] = {Z, N, LH, LW};
    cr_assert_eq(lv_npy_write(path, 4, shape, lat), LV_OK, "%s", lv_last_error());
    free(lat);
    return path;
}

static uint8_t *decoded_frames(const char *path) {
    int64_t n;
    size_t fb;
    uint8_t *f = ts_decode_all(path, &n, &fb);
    cr_assert_eq(n, FRAMES, "%s: %lld frames", path, (long long)n);
    cr_assert_eq(fb, (size_t)64 * LH * LW * 3);
    return f;
}

#define DECODE_FRAME_BYTES ((size_t)FRAMES * 64 * LH * LW * 3)

static uint8_t *decode_cli(const char *env, const char *lat, const char *extra, const char *name) {
    char cmd[4096], out[1100];
    snprintf(out, sizeof out, "%s", ts_tmp(name));
    snprintf(cmd, sizeof cmd, "%s %s decode --vae " WEIGHTS " --latents %s --codec ffv1 %s -o %s", env, LONGVK_CLI,
             lat, extra, out);
    free(run(cmd, false));
    return decoded_frames(out);
}

Test(vae_bands, cli_emulated_bands_write_the_frames, .timeout = 300) {
    const char *lat = latents_file();
    uint8_t *one = decode_cli("", lat, "", "vb_one.mkv"), *three = decode_cli("", lat, "--sp-emulate 3", "vb_e3.mkv");
    cr_assert_eq(memcmp(one, three, DECODE_FRAME_BYTES), 0, "--sp-emulate 3 wrote other frames");
    free(one);
    free(three);
    /* refused before anything is written: more bands than latent rows, bands with tiles */
    char cmd[4096];
    const char *never = ts_tmp("vb_never.mkv");
    snprintf(cmd, sizeof cmd, "%s decode --vae " WEIGHTS " --latents %s --sp-emulate 8 -o %s", LONGVK_CLI, lat, never);
    char *out = run(cmd, true);
    cr_assert(strstr(out, "8 sequence-parallel bands over 7 latent rows"), "%s", out);
    free(out);
    cr_assert_neq(access(never, F_OK), 0, "%s was written", never);
    snprintf(cmd, sizeof cmd, "%s decode --vae " WEIGHTS " --latents %s --sp-emulate 2 --vae-tiling -o %s", LONGVK_CLI,
             lat, never);
    out = run(cmd, true);
    cr_assert(strstr(out, "tiles or bands"), "%s", out);
    free(out);
    cr_assert_neq(access(never, F_OK), 0, "%s was written", never);
}

#ifdef LONGVK_HAVE_MPI
Test(vae_bands, cli_ranks_write_the_frames_of_one_process, .timeout = 600) {
    const char *lat = latents_file();
    uint8_t *one = decode_cli("", lat, "", "vb_one.mkv");
    for (int R = 2; R <= 3; R++) { /* 7 rows: 4/3, 3/2/2 */
        char mpirun[256];
        snprintf(mpirun, sizeof mpirun, TS_MPIRUN "-np %d", R);
        uint8_t *m = decode_cli(mpirun, lat, "--sequence-parallel", R == 2 ? "vb_m2.mkv" : "vb_m3.mkv");
        cr_assert_eq(memcmp(one, m, DECODE_FRAME_BYTES), 0, "%d ranks wrote other frames", R);
        free(m);
    }
    free(one);
    /* more ranks than latent rows: refused, nothing written */
    char cmd[4096];
    const char *never = ts_tmp("vb_never.mkv");
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 8 %s decode --vae " WEIGHTS " --latents %s --sequence-parallel -o %s",
             LONGVK_CLI, lat, never);
    char *out = run(cmd, true);
    cr_assert(strstr(out, "8 sequence-parallel bands over 7 latent rows"), "%s", out);
    free(out);
    cr_assert_neq(access(never, F_OK), 0, "%s was written", never);
    /* started by mpirun without the flag: refused */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s decode --vae " WEIGHTS " --latents %s -o %s", LONGVK_CLI, lat, never);
    out = run(cmd, true);
    cr_assert(strstr(out, "without --sequence-parallel"), "%s", out);
    free(out);
    cr_assert_neq(access(never, F_OK), 0, "%s was written", never);
}
#else
Test(vae_bands, cli_sequence_parallel_needs_mpi) {
    char cmd[4096];
    const char *never = ts_tmp("vb_never.mkv");
    snprintf(cmd, sizeof cmd, "%s decode --vae " WEIGHTS " --latents %s --sequence-parallel -o %s", LONGVK_CLI,
             latents_file(), never);
    char *out = run(cmd, true);
    cr_assert(strstr(out, "needs a build with MPI"), "%s", out);
    free(out);
    cr_assert_neq(access(never, F_OK), 0, "%s was written", never);
}
#endif
