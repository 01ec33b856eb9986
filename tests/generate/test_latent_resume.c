/* --resume for a latent model (issue 53, item 6): the tiny SANA-Video DiT (tiny-hd32, from
 * prompt embeddings: the tiny Gemma-2's 642-token template would cost a second a run) with the
 * tiny Wan2.1 VAE, killed with SIGKILL at chosen moments: after each block (the burn-in's, no
 * frame yet; the last, before the video is closed) and inside the VAE's decode of a block (at a
 * pixel frame: its first, middle or last, before the block's frames are flushed). Each killed run is a child
 * process (forked before this process touches the device); what it leaves is checked: a resume
 * state always (written before the device is set up), and either no video or one that plays and
 * holds the uninterrupted run's first frames bit for bit. Then --resume finishes it, and the
 * video is the uninterrupted run's, bit for bit (ffv1), and no state is left.
 *
 * The cases: a short video (5 latent frames, 1 a block, after 2 burn-in blocks); a long one (45
 * latent frames, more than the 40 the decoder's history spans, so that the resume decodes the
 * last 40 again rather than the video from its start: pipelines/wan_vae/README.md, "Resuming a
 * decode"); the VAE in tiles chosen under a small budget (LONGVK_VAE_BUDGET) and resumed
 * without it (the interrupted run's tiles are used, not chosen again; other --vae-tiles are
 * refused naming the option: test_run_identity_cli.c); two sequence-parallel bands
 * (--sp-emulate 2).
 * Each run costs about a second of set-up (the device, the kernels): 18 moments in one process
 * (15 of the short video) and the two rank counts below, about 2.4 s each.
 *
 * Under mpirun (builds with -DLONGVK_MPI=ON), through the CLI: rank 1 of 2 (of 3) killed after
 * a block (LONGVK_TEST_KILL) leaves a video that plays the blocks written and a state, and
 * --resume at the same count finishes the video of --sp-emulate 2 (3) bit for bit (a latent
 * DiT's bands are within 1e-10 of each other, not bit for bit: test_sp_generate.c; so a count
 * changed at the resume gives such frames, not the same bytes). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_mpi.h"

#define SANA LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"

/* Prompt embeddings for tiny-hd32 (ts_write_tiny_embeds). */
static const char *write_embeds(void) {
    const char *path = ts_tmp("latent-resume-embeds.safetensors");
    ts_write_tiny_embeds(path);
    return path;
}

/* Where a child is killed. */
typedef enum moment_kind { AFTER_BLOCK, AT_FRAME } moment_kind;
typedef struct moment {
    moment_kind kind;
    int at; /* the block (1-based, burn-in counted) or the pixel frame (0-based) */
} moment;

static moment kill_at;

static void killing_progress(void *user, const lv_generate_progress *p) {
    (void)user;
    if (kill_at.kind == AFTER_BLOCK && p->phase == LV_GEN_PHASE_BLOCK && p->block == kill_at.at)
        raise(SIGKILL);
}

static lv_status killing_sink(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)user, (void)rgb, (void)height, (void)width;
    if (kill_at.kind == AT_FRAME && index == kill_at.at) raise(SIGKILL);
    return LV_OK;
}

typedef struct video {
    int width, height, frames, block_frames, burn_in, sp_bands;
    const char *budget; /* LONGVK_VAE_BUDGET while the interrupted run runs (NULL: none) */
} video;

static lv_generate_options options(const char *embeds, const video *v, const char *out) {
    lv_generate_options o;
    lv_generate_options_default(&o);
    o.model_path = SANA;
    o.vae_path = VAE;
    o.text_embeds_path = embeds;
    o.frames = v->frames;
    o.width = v->width;
    o.height = v->height;
    o.block_frames = v->block_frames;
    o.burn_in_blocks = v->burn_in;
    o.sp_bands = v->sp_bands;
    o.seed = 5;
    o.encoder.codec = "ffv1";
    o.output = out;
    return o;
}

static void remove_outputs(const char *out) {
    char state[1200];
    snprintf(state, sizeof state, "%.1000s.longvk-state", out);
    remove(out);
    remove(state);
}

/* A child that runs the video to `out` and is killed at m. */
static void killed_run(const char *embeds, const video *v, const char *out, moment m) {
    remove_outputs(out);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (v->budget) setenv("LONGVK_VAE_BUDGET", v->budget, 1);
        /* without the validation layer: the whole run and every resume in the parent go
         * through the same ops with it on, and this child's only product is what it leaves */
        unsetenv("LONGVK_VALIDATE");
        kill_at = m;
        lv_generate_options o = options(embeds, v, out);
        o.frame_sink = killing_sink;
        lv_status s = lv_generate(&o, killing_progress, NULL, NULL, NULL);
        if (s != LV_OK) {
            FILE *f = fopen(LONGVK_TEST_TMP "/latent-resume-error.txt", "w");
            if (f) fprintf(f, "the run to %s: %s\n", out, lv_last_error()), fclose(f);
        }
        _exit(s == LV_OK ? 3 : 4); /* not killed */
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the run to %s was not killed at %d/%d (status %d)",
              out, m.kind, m.at, status);
}

/* What a killed run left: a state, and no video or the whole run's first frames. */
static void check_left(const char *out, const uint8_t *full, int64_t full_frames, size_t frame_bytes) {
    char state[1200];
    snprintf(state, sizeof state, "%.1000s.longvk-state", out);
    cr_assert_eq(access(state, F_OK), 0, "no resume state beside %s", out);
    if (access(out, F_OK) != 0) return;
    int64_t n;
    size_t b;
    uint8_t *got = ts_decode_all(out, &n, &b);
    cr_assert(n > 0 && n <= full_frames && b == frame_bytes, "%s: %lld frames of %zu bytes", out, (long long)n, b);
    cr_assert_eq(memcmp(got, full, (size_t)n * b), 0, "%s: its %lld frames are not the whole run's first", out,
                 (long long)n);
    free(got);
}

static void resume_and_compare(const char *embeds, const video *v, const char *out, const uint8_t *full,
                               int64_t full_frames, size_t frame_bytes) {
    lv_generate_options o = options(embeds, v, out);
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "--resume %s: %s", out, lv_last_error());
    int64_t n;
    size_t b;
    uint8_t *got = ts_decode_all(out, &n, &b);
    cr_assert(n == full_frames && b == frame_bytes, "%s: %lld frames, want %lld", out, (long long)n,
              (long long)full_frames);
    cr_assert_eq(memcmp(got, full, (size_t)n * b), 0, "%s: the resumed video differs from the whole run's", out);
    free(got);
    char state[1200];
    snprintf(state, sizeof state, "%.1000s.longvk-state", out);
    cr_assert_eq(access(state, F_OK), -1, "the finished run left %s", state);
}

/* Every moment of v killed (children first: none of them inherits a device), then the whole
 * run and each resume in this process. */
static void kill_and_resume(const char *embeds, const video *v, const moment *m, int count, const char *name) {
    char outs[32][256];
    for (int i = 0; i < count; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/latent-resume-%s-%d.mkv", LONGVK_TEST_TMP, name, i);
        killed_run(embeds, v, outs[i], m[i]);
    }
    char full_path[256];
    snprintf(full_path, sizeof full_path, "%s/latent-resume-%s.mkv", LONGVK_TEST_TMP, name);
    remove_outputs(full_path);
    if (v->budget) setenv("LONGVK_VAE_BUDGET", v->budget, 1);
    lv_generate_options o = options(embeds, v, full_path);
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    unsetenv("LONGVK_VAE_BUDGET"); /* resumed without it: the interrupted run's tiles all the same */
    int64_t frames;
    size_t fb;
    uint8_t *full = ts_decode_all(full_path, &frames, &fb);
    cr_assert_eq(frames, v->frames);
    for (int i = 0; i < count; i++) {
        check_left(outs[i], full, frames, fb);
        resume_and_compare(embeds, v, outs[i], full, frames, fb);
        remove_outputs(outs[i]);
    }
    remove_outputs(full_path);
    free(full);
}

Test(latent_resume, killed_at_every_moment_of_a_short_video, .timeout = 900) {
    const char *embeds = write_embeds();
    /* 17 frames at 16 x 16: 5 latent frames of 2 x 2, a block each, after 2 burn-in blocks: blocks
     * 3 to 7 give pixel frames 0, 1-4, 5-8, 9-12, 13-16 */
    const video v = {.width = 16, .height = 16, .frames = 17, .block_frames = 1, .burn_in = 2};
    /* every block's end (burn-in and last included) and the VAE's first, middle and last frames
     * of each block: with the three cases below and the two rank counts, the 20 moments */
    const moment m[] = {{AFTER_BLOCK, 1}, {AFTER_BLOCK, 2}, {AFTER_BLOCK, 3}, {AFTER_BLOCK, 4}, {AFTER_BLOCK, 5},
                        {AFTER_BLOCK, 6}, {AFTER_BLOCK, 7}, {AT_FRAME, 0},     {AT_FRAME, 1},     {AT_FRAME, 3},
                        {AT_FRAME, 4},    {AT_FRAME, 6},    {AT_FRAME, 9},     {AT_FRAME, 12},    {AT_FRAME, 16}};
    kill_and_resume(embeds, &v, m, (int)(sizeof m / sizeof m[0]), "short");
}

Test(latent_resume, a_video_longer_than_the_decoders_history, .timeout = 900) {
    const char *embeds = write_embeds();
    /* 45 latent frames in blocks of 4 (the first 5): after block 10, 41 are decoded, the
     * resume decodes the last 40 again */
    const video v = {.width = 16, .height = 16, .frames = 1 + 4 * 44, .block_frames = 4};
    const moment m[] = {{AT_FRAME, 1 + 4 * 41 + 2}};
    kill_and_resume(embeds, &v, m, 1, "long");
}

Test(latent_resume, tiles_and_bands, .timeout = 900) {
    const char *embeds = write_embeds();
    /* tiles: 64 x 32 (latent 8 x 4) under a budget one byte below the untiled decode's */
    char budget[32];
    lv_weights *w;
    cr_assert_eq(lv_weights_open(VAE, &w), LV_OK, "%s", lv_last_error());
    uint64_t untiled = 0;
    cr_assert_eq(lv_vae_weights_memory(w, 4, 8, LV_PRECISION_F32, &untiled), LV_OK, "%s", lv_last_error());
    lv_weights_close(w);
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)(untiled - 1));
    const video tiled = {.width = 64, .height = 32, .frames = 13, .block_frames = 1, .budget = budget};
    const moment mt[] = {{AT_FRAME, 7}};
    kill_and_resume(embeds, &tiled, mt, 1, "tiles");
    /* a tiled run resumed over bands is refused, naming the tiles, and its state is kept */
    const char *refused = LONGVK_TEST_TMP "/latent-resume-tiles-bands.mkv";
    killed_run(embeds, &tiled, refused, mt[0]);
    const video tiled_bands = {.width = 64, .height = 32, .frames = 13, .block_frames = 1, .sp_bands = 2};
    lv_generate_options ob = options(embeds, &tiled_bands, refused);
    ob.resume = true;
    cr_assert_eq(lv_generate(&ob, NULL, NULL, NULL, NULL), LV_ERR_INVALID, "%s", lv_last_error());
    cr_assert(strstr(lv_last_error(), "decoded the VAE in tiles of") && strstr(lv_last_error(), "without them"), "%s",
              lv_last_error());
    char refused_state[300];
    snprintf(refused_state, sizeof refused_state, "%s.longvk-state", refused);
    cr_assert_eq(access(refused_state, F_OK), 0, "the refused resume removed the state");
    remove_outputs(refused);
    /* bands: 2 over 4 latent rows (2 token rows) */
    const video banded = {.width = 16, .height = 32, .frames = 13, .block_frames = 1, .sp_bands = 2};
    const moment mb[] = {{AT_FRAME, 7}};
    kill_and_resume(embeds, &banded, mb, 1, "bands");
}

#ifdef LONGVK_HAVE_MPI
/* The CLI with the latent model at 16 x 48 (3 token rows); `pre` goes before it (an mpirun
 * line, LONGVK_TEST_KILL=...). */
static int cli(const char *pre, const char *embeds, const char *extra, const char *out) {
    char cmd[4096], *text;
    snprintf(cmd, sizeof cmd, "%s %s generate --model %s --text-embeds %s --vae %s -W 16 -H 48 --frames 13 "
             "--block-frames 1 --burn-in-blocks 1 --codec ffv1 -s 5 -q %s -o %s", pre, LONGVK_CLI, SANA, embeds, VAE,
             extra, out);
    int rc = ts_run(cmd, &text);
    cr_log_info("%s: exit %d\n%s", cmd, rc, text);
    free(text);
    return rc;
}

Test(latent_resume, a_rank_killed, .timeout = 900) {
    const char *embeds = write_embeds();
    for (int ranks = 2; ranks <= 3; ranks++) {
        char want_path[512], out[512], emulate[64], mpirun[256], kill_env[300];
        snprintf(want_path, sizeof want_path, "%s/latent-resume-mpi-emulated-%d.mkv", LONGVK_TEST_TMP, ranks);
        snprintf(out, sizeof out, "%s/latent-resume-mpi-%d.mkv", LONGVK_TEST_TMP, ranks);
        remove_outputs(want_path);
        remove_outputs(out);
        snprintf(emulate, sizeof emulate, "--sp-emulate %d", ranks);
        cr_assert_eq(cli("", embeds, emulate, want_path), 0);
        int64_t frames;
        size_t fb;
        uint8_t *want = ts_decode_all(want_path, &frames, &fb);
        cr_assert_eq(frames, 13);
        /* killed after block 3 (the first burn-in, then latent frames 0 and 1: 5 pixel frames) */
        snprintf(mpirun, sizeof mpirun, TS_MPIRUN "-np %d", ranks);
        snprintf(kill_env, sizeof kill_env, "LONGVK_TEST_KILL=1:3 %s", mpirun);
        cr_assert_neq(cli(kill_env, embeds, "--sequence-parallel", out), 0, "the killed job exited 0");
        check_left(out, want, frames, fb);
        cr_assert_eq(cli(mpirun, embeds, "--sequence-parallel --resume", out), 0, "--resume at %d ranks", ranks);
        int64_t n;
        size_t b;
        uint8_t *got = ts_decode_all(out, &n, &b);
        cr_assert(n == frames && b == fb && memcmp(got, want, (size_t)n * b) == 0,
                  "resumed at %d ranks: not the frames of --sp-emulate %d", ranks, ranks);
        free(got);
        free(want);
        remove_outputs(want_path);
        remove_outputs(out);
    }
}
#endif
