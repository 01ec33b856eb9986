/* `longvk generate` over sequence-parallel bands (lv_generate_options.sp_bands / sp_comm;
 * pipelines/parallel/README.md, "In longvk").
 *
 * Emulated in this process (every build): the tiny latent model's 4 token rows (-W/-H 64:
 * 8x8 latents, patch 2) in 2 and 3 bands (2/2 and 2/1/1: uneven, single-row bands), three
 * chunks over the carried state, its latents (.npy) within NMSE 1e-10 of the unsplit run
 * (tests/models/test_sequence_parallel.c's bound) and bit-identical from run to run; the default
 * pixel model at 32x16 (4 token rows) the same way through the codec (ffv1: lossless, so
 * decoded frames compare exactly). More bands than rows, CFG's twin with bands: errors.
 *
 * Under mpirun (builds with -DLONGVK_MPI=ON): 2 and 3 ranks write the bytes of
 * --sp-emulate 2 and 3 (latents) and the same frames (video); a rank killed after a block
 * (LONGVK_TEST_KILL, test only) leaves a video that plays that block and a resume file equal
 * byte for byte to the one --sp-emulate 2 leaves at the same block, which --resume completes
 * at 2 ranks, 3 ranks and in one process into the uninterrupted run's frames; a stop
 * signal that reaches one rank stops every rank after the same block (LONGVK_TEST_STOP).
 *
 * The videos several tests compare against (the unsplit run, --sp-emulate 2 and 3) are each
 * made once per run of this program, by a run of their own, and shared (reference_frames). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "longvk/npy.h"
#include "longvk/sp_comm.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_mpi.h"

#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors"
#define SPLIT_BOUND 1e-10
/* the default model at 32x16 pixels: 4 token rows; 2 burn-in blocks, then 3 blocks of 4 frames */
#define PIXEL_ARGS "-p 'a red ball' --frames 12 -H 16 --burn-in-blocks 2 --scale 1 --codec ffv1"
#define PIXEL_FRAMES 12

/* The tiny latent model's prompt rows, from its vectors. */
static const char *text_embeds(void) {
    static char path[1100];
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    snprintf(path, sizeof path, "%s", ts_tmp("spg_text.safetensors"));
    ts_forward_inputs(v, ts_tmp("spg_x.npy"), path);
    lv_weights_close(v);
    return path;
}

/* 21 pixel frames = 6 latent frames: 3 chunks of 2 over the carried state, 8x8 latents. */
static void latent_options(lv_generate_options *o, const char *text, const char *out, int bands) {
    lv_generate_options_default(o);
    o->model_path = WEIGHTS;
    o->text_embeds_path = text;
    o->frames = 21;
    o->width = o->height = 64;
    o->block_frames = 2;
    o->output = out;
    o->sp_bands = bands;
}

static lv_npy generate_latents(const char *text, int bands, const char *name) {
    lv_generate_options o;
    latent_options(&o, text, ts_tmp(name), bands);
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%d bands: %s", bands, lv_last_error());
    lv_npy a;
    cr_assert_eq(lv_npy_read(o.output, &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_npy_numel(&a), 4 * 6 * 8 * 8, "latents [4, 6, 8, 8]");
    return a;
}

Test(sp_generate, latent_bands_match_unsplit, .timeout = 600) {
    const char *text = text_embeds();
    lv_npy one = generate_latents(text, 0, "spg_r1.npy");
    for (int R = 2; R <= 3; R++) {
        lv_npy a = generate_latents(text, R, R == 2 ? "spg_e2.npy" : "spg_e3.npy");
        double e = ts_nmse(a.data, one.data, (size_t)lv_npy_numel(&a));
        cr_log_info("generate, %d bands against none: NMSE %.3g", R, e);
        cr_assert(e <= SPLIT_BOUND, "%d bands against the unsplit run: NMSE %.3g > %.0e", R, e, SPLIT_BOUND);
        if (R == 3) { /* the emulation is deterministic */
            lv_npy b = generate_latents(text, R, "spg_e3b.npy");
            cr_assert_eq(memcmp(a.data, b.data, (size_t)lv_npy_numel(&a) * sizeof(float)), 0,
                         "two runs at 3 bands differ");
            lv_npy_free(&b);
        }
        lv_npy_free(&a);
    }
    lv_npy_free(&one);
}

static char *run(const char *cmd, bool fail) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert(fail ? rc != 0 : rc == 0, "%s: exit %d\n%s", cmd, rc, out);
    return out;
}

/* The default model through the CLI; `extra` adds options (--sp-emulate R, --resume, ...),
 * `env` goes before the command (an mpirun line, LONGVK_TEST_KILL=...). */
static char *generate_video(const char *env, const char *extra, const char *out, bool fail) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s generate " PIXEL_ARGS " %s -o %s", env, LONGVK_CLI, extra, out);
    return run(cmd, fail);
}

static uint8_t *frames_of(const char *path, int64_t want) {
    int64_t n;
    size_t fb;
    uint8_t *f = ts_decode_all(path, &n, &fb);
    cr_assert_eq(n, want, "%s: %lld frames, %lld expected", path, (long long)n, (long long)want);
    cr_assert_eq(fb, (size_t)32 * 16 * 3);
    return f;
}

#define FRAME_BYTES ((size_t)32 * 16 * 3)

/* The reference videos: [0] the unsplit run, [1] and [2] --sp-emulate 2 and 3. */
static const char *const reference_names[3] = {"spg_ref1.mkv", "spg_ref2.mkv", "spg_ref3.mkv"};

/* In the runner, before any test: no reference of an earlier run (an earlier build) is reused. */
ReportHook(PRE_ALL)(struct criterion_test_set *tests) {
    (void)tests;
    for (int i = 0; i < 3; i++) remove(ts_tmp(reference_names[i]));
}

/* The frames of a reference video (bands 1: the unsplit run; 2, 3: --sp-emulate), made by a
 * run of its own as each test made its own before, but once per run of this program: the first
 * test that needs it makes it under a name of its own (this process's) and renames it into
 * place, so that tests run at the same time (--jobs) read a whole file or make their own; the
 * next tests decode that file. Each test still runs alone (--filter). */
static uint8_t *reference_frames(int bands) {
    char path[1100];
    snprintf(path, sizeof path, "%s", ts_tmp(reference_names[bands - 1]));
    if (access(path, F_OK) != 0) {
        char part[1100], name[64], extra[64] = "";
        snprintf(name, sizeof name, "spg_ref%d.%ld.mkv", bands, (long)getpid());
        snprintf(part, sizeof part, "%s", ts_tmp(name));
        if (bands > 1) snprintf(extra, sizeof extra, "--sp-emulate %d", bands);
        free(generate_video("", extra, part, false));
        cr_assert_eq(rename(part, path), 0, "cannot rename %s to %s", part, path);
        cr_log_info("made the reference %s (%s), shared by the next tests of this run", path,
                    bands > 1 ? extra : "unsplit");
    }
    return frames_of(path, PIXEL_FRAMES);
}

Test(sp_generate, pixel_bands_match_unsplit, .timeout = 600) {
    char b[1100];
    uint8_t *want = reference_frames(1);
    for (int R = 2; R <= 3; R++) {
        uint8_t *got = reference_frames(R);
        /* rounding-level differences in the floats, none left in 8-bit frames (measured) */
        cr_assert_eq(memcmp(got, want, PIXEL_FRAMES * FRAME_BYTES), 0, "--sp-emulate %d: frames differ from the "
                     "unsplit run's", R);
        if (R == 3) { /* a second run of its own: the emulation is deterministic */
            snprintf(b, sizeof b, "%s", ts_tmp("spg_pe3b.mkv"));
            free(generate_video("", "--sp-emulate 3", b, false));
            uint8_t *again = frames_of(b, PIXEL_FRAMES);
            cr_assert_eq(memcmp(got, again, PIXEL_FRAMES * FRAME_BYTES), 0, "two runs at 3 bands differ");
            free(again);
        }
        free(got);
    }
    free(want);
}

Test(sp_generate, errors, .timeout = 300) {
    const char *text = text_embeds();
    lv_generate_options o;
    /* 5 bands over 4 token rows: said before any block, nothing left behind */
    latent_options(&o, text, ts_tmp("spg_r5.npy"), 5);
    remove(o.output);
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "5 sequence-parallel bands") && strstr(lv_last_error(), "4 token rows"), "%s",
              lv_last_error());
    cr_assert_neq(access(o.output, F_OK), 0, "a failed run left %s", o.output);
    /* CFG's twin is not split into bands */
    latent_options(&o, text, ts_tmp("spg_twin.npy"), 2);
    o.parallel_cfg = 1;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "--parallel-cfg"), "%s", lv_last_error());
    /* bands in this process and a communicator: one or the other */
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_emulated_create(2, &comm), LV_OK);
    latent_options(&o, text, ts_tmp("spg_both.npy"), 2);
    o.sp_comm = comm;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "one or the other"), "%s", lv_last_error());
    lv_sp_comm_destroy(comm);
    /* the CLI: the same error, and both flags refused */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s generate " PIXEL_ARGS " --sp-emulate 5 -o %s", LONGVK_CLI, ts_tmp("spg_c5.mkv"));
    char *out = run(cmd, true);
    cr_assert(strstr(out, "5 sequence-parallel bands") && strstr(out, "4 token rows"), "%s", out);
    free(out);
    cr_assert_neq(access(ts_tmp("spg_c5.mkv"), F_OK), 0);
    cr_assert_neq(access(ts_tmp("spg_c5.mkv.longvk-state"), F_OK), 0);
}

#ifdef LONGVK_HAVE_MPI
/* A video and the resume state beside it: a fresh run is refused where an interrupted
 * run's state is left (issue 53), so an earlier run's is removed with its video. */
static void remove_run(const char *out) {
    char state[1200];
    snprintf(state, sizeof state, "%s.longvk-state", out);
    remove(out);
    remove(state);
}

Test(sp_generate, ranks_equal_the_emulation, .timeout = 600) {
    const char *text = text_embeds();
    char cmd[4096], e[1100], m[1100];
    for (int R = 2; R <= 3; R++) {
        /* the latents: the same bytes */
        snprintf(e, sizeof e, "%s", ts_tmp(R == 2 ? "spg_le2.npy" : "spg_le3.npy"));
        snprintf(m, sizeof m, "%s", ts_tmp(R == 2 ? "spg_lm2.npy" : "spg_lm3.npy"));
        const char *common = "generate --model " WEIGHTS " --frames 21 -W 64 -H 64 --block-frames 2";
        snprintf(cmd, sizeof cmd, "%s %s --text-embeds %s --sp-emulate %d -o %s", LONGVK_CLI, common, text, R, e);
        free(run(cmd, false));
        snprintf(cmd, sizeof cmd, TS_MPIRUN "-np %d %s %s --text-embeds %s --sequence-parallel -o %s", R, LONGVK_CLI,
                 common, text, m);
        char *out = run(cmd, false);
        /* rank 0 alone prints the summary */
        const char *w = strstr(out, "wrote ");
        cr_assert(w && !strstr(w + 1, "wrote "), "one summary line expected:\n%s", out);
        free(out);
        size_t la, lb;
        uint8_t *ba = ts_slurp(e, &la), *bb = ts_slurp(m, &lb);
        cr_assert(la == lb && memcmp(ba, bb, la) == 0, "%d ranks: the latents differ from --sp-emulate %d's", R, R);
        free(ba);
        free(bb);
        /* the video: the same frames as --sp-emulate R's */
        char mpirun[256];
        snprintf(m, sizeof m, "%s", ts_tmp(R == 2 ? "spg_vm2.mkv" : "spg_vm3.mkv"));
        snprintf(mpirun, sizeof mpirun, TS_MPIRUN "-np %d", R);
        free(generate_video(mpirun, "--sequence-parallel", m, false));
        uint8_t *fe = reference_frames(R), *fm = frames_of(m, PIXEL_FRAMES);
        cr_assert_eq(memcmp(fe, fm, PIXEL_FRAMES * FRAME_BYTES), 0, "%d ranks: frames differ from --sp-emulate %d's",
                     R, R);
        free(fe);
        free(fm);
    }
}

/* OUT and its resume file copied to another name, to resume one interruption several ways. */
static void copy_run(const char *from, const char *to) {
    char a[1200], b[1200];
    size_t n;
    uint8_t *d = ts_slurp(from, &n);
    ts_spit(to, d, n);
    free(d);
    snprintf(a, sizeof a, "%s.longvk-state", from);
    snprintf(b, sizeof b, "%s.longvk-state", to);
    d = ts_slurp(a, &n);
    ts_spit(b, d, n);
    free(d);
}

Test(sp_generate, killed_rank_resumes_at_any_count, .timeout = 900) {
    char k[1100], e[1100], r1[1100], r3[1100];
    uint8_t *want = reference_frames(2); /* the uninterrupted run */

    /* rank 1 of 2 killed once block 3 (the first written, 4 frames) is made */
    snprintf(k, sizeof k, "%s", ts_tmp("spg_k2.mkv"));
    remove_run(k);
    char *out = generate_video("LONGVK_TEST_KILL=1:3 " TS_MPIRUN "-np 2", "--sequence-parallel", k, true);
    cr_log_info("a killed rank:\n%s", out);
    cr_assert(strstr(out, "rank 1") && strstr(out, "signal 9"), "mpirun names the killed rank:\n%s", out);
    free(out);
    uint8_t *part = frames_of(k, 4); /* the file plays, with the block flushed */
    cr_assert_eq(memcmp(part, want, 4 * FRAME_BYTES), 0, "the partial video is not the run's first block");
    free(part);

    /* the resume file is independent of how the bands ran: --sp-emulate 2 stopped there too */
    snprintf(e, sizeof e, "%s", ts_tmp("spg_ke2.mkv"));
    remove_run(e);
    free(generate_video("LONGVK_TEST_KILL=0:3", "--sp-emulate 2", e, true));
    char ks[1200], es[1200];
    snprintf(ks, sizeof ks, "%s.longvk-state", k);
    snprintf(es, sizeof es, "%s.longvk-state", e);
    size_t la, lb;
    uint8_t *sa = ts_slurp(ks, &la), *sb = ts_slurp(es, &lb);
    cr_assert(la == lb && memcmp(sa, sb, la) == 0, "the resume file of 2 ranks differs from --sp-emulate 2's");
    free(sa);
    free(sb);

    /* resumed at 1 process, 3 ranks and 2 ranks: the uninterrupted run's frames */
    snprintf(r1, sizeof r1, "%s", ts_tmp("spg_k1.mkv"));
    snprintf(r3, sizeof r3, "%s", ts_tmp("spg_k3.mkv"));
    copy_run(k, r1);
    copy_run(k, r3);
    free(generate_video("", "--resume", r1, false));
    free(generate_video(TS_MPIRUN "-np 3", "--sequence-parallel --resume", r3, false));
    free(generate_video(TS_MPIRUN "-np 2", "--sequence-parallel --resume", k, false));
    const char *done[3] = {r1, r3, k}, *how[3] = {"in one process", "at 3 ranks", "at 2 ranks"};
    for (int i = 0; i < 3; i++) {
        uint8_t *got = frames_of(done[i], PIXEL_FRAMES);
        cr_assert_eq(memcmp(got, want, PIXEL_FRAMES * FRAME_BYTES), 0, "resumed %s: frames differ from the "
                     "uninterrupted run's", how[i]);
        free(got);
        char st[1200];
        snprintf(st, sizeof st, "%s.longvk-state", done[i]);
        cr_assert_neq(access(st, F_OK), 0, "a finished run leaves no resume file (%s)", how[i]);
    }
    free(want);
}

/* Started by mpirun without --sequence-parallel, every copy would write the same file. */
Test(sp_generate, ranks_without_the_flag_refuse, .timeout = 300) {
    char o[1100];
    snprintf(o, sizeof o, "%s", ts_tmp("spg_noflag.mkv"));
    remove_run(o);
    char *out = generate_video(TS_MPIRUN "-np 2", "", o, true);
    cr_assert(strstr(out, "without --sequence-parallel"), "%s", out);
    free(out);
    cr_assert_neq(access(o, F_OK), 0, "%s was written", o);
}

/* SIGUSR1 (what `kill -USR1 <mpirun>` forwards) reaching rank 1 alone after block 3: the
 * stop flag is agreed at the block boundary, so both ranks stop after block 3 (without the
 * agreement rank 0 would wait for rank 1 forever), rank 0 says so, and --resume completes. */
Test(sp_generate, a_stop_on_one_rank_stops_every_rank, .timeout = 600) {
    char k[1100];
    uint8_t *want = reference_frames(2); /* the uninterrupted run */
    snprintf(k, sizeof k, "%s", ts_tmp("spg_s2.mkv"));
    remove_run(k);
    char *out = generate_video("LONGVK_TEST_STOP=1:3 " TS_MPIRUN "-np 2", "--sequence-parallel", k, true);
    cr_assert(strstr(out, "interrupted after block 3 of 5") && strstr(out, "--resume"), "%s", out);
    free(out);
    uint8_t *part = frames_of(k, 4);
    cr_assert_eq(memcmp(part, want, 4 * FRAME_BYTES), 0, "the stopped video is not the run's first block");
    free(part);
    free(generate_video(TS_MPIRUN "-np 2", "--sequence-parallel --resume", k, false));
    uint8_t *got = frames_of(k, PIXEL_FRAMES);
    cr_assert_eq(memcmp(got, want, PIXEL_FRAMES * FRAME_BYTES), 0, "resumed: frames differ from the uninterrupted "
                 "run's");
    free(got);
    free(want);
}

/* CFG parallelism (--cfg-parallel): 2 ranks (one per group, whole passes) and 4 (two groups
 * of 2 bands) make the frames of one process; a stop reaching a rank of the unconditional
 * group stops both groups after the same block (agreed across them), and --resume, whose
 * file only the conditional group's rank 0 reads, completes the run on 4 ranks. */
Test(sp_generate, cfg_parallel_groups_make_the_frames_of_one, .timeout = 900) {
    char m[1100];
    uint8_t *want = reference_frames(1); /* one process */
    for (int W = 2; W <= 4; W += 2) {
        char mpirun[256];
        snprintf(mpirun, sizeof mpirun, TS_MPIRUN "-np %d", W);
        snprintf(m, sizeof m, "%s", ts_tmp(W == 2 ? "spg_cfg2.mkv" : "spg_cfg4.mkv"));
        char *out = generate_video(mpirun, W == 2 ? "--cfg-parallel" : "--cfg-parallel --sequence-parallel", m, false);
        const char *w = strstr(out, "wrote ");
        cr_assert(w && !strstr(w + 1, "wrote "), "one summary line expected:\n%s", out);
        free(out);
        uint8_t *got = frames_of(m, PIXEL_FRAMES);
        cr_assert_eq(memcmp(got, want, PIXEL_FRAMES * FRAME_BYTES), 0, "%d ranks with --cfg-parallel: frames differ "
                     "from one process's", W);
        free(got);
    }
    /* rank 3: the unconditional group's second band */
    snprintf(m, sizeof m, "%s", ts_tmp("spg_cfgs.mkv"));
    remove_run(m);
    char *out = generate_video("LONGVK_TEST_STOP=3:3 " TS_MPIRUN "-np 4", "--cfg-parallel --sequence-parallel", m,
                               true);
    cr_assert(strstr(out, "interrupted after block 3 of 5"), "%s", out);
    free(out);
    free(generate_video(TS_MPIRUN "-np 4", "--cfg-parallel --sequence-parallel --resume", m, false));
    uint8_t *got = frames_of(m, PIXEL_FRAMES);
    cr_assert_eq(memcmp(got, want, PIXEL_FRAMES * FRAME_BYTES), 0, "resumed with --cfg-parallel: frames differ");
    free(got);
    free(want);
    /* two groups of the same size, or nothing */
    snprintf(m, sizeof m, "%s", ts_tmp("spg_cfg3.mkv"));
    remove_run(m);
    out = generate_video(TS_MPIRUN "-np 3", "--cfg-parallel", m, true);
    cr_assert(strstr(out, "even number of ranks") && strstr(out, "not 3"), "%s", out);
    free(out);
    cr_assert_neq(access(m, F_OK), 0, "%s was written", m);
}
#else
Test(sp_generate, cfg_parallel_needs_mpi) {
    char *out = generate_video("", "--cfg-parallel", ts_tmp("spg_never.mkv"), true);
    cr_assert(strstr(out, "--cfg-parallel needs a build with MPI"), "%s", out);
    free(out);
    cr_assert_neq(access(ts_tmp("spg_never.mkv"), F_OK), 0);
}

Test(sp_generate, sequence_parallel_needs_mpi) {
    char *out = generate_video("", "--sequence-parallel", ts_tmp("spg_never.mkv"), true);
    cr_assert(strstr(out, "needs a build with MPI"), "%s", out);
    free(out);
    cr_assert_neq(access(ts_tmp("spg_never.mkv"), F_OK), 0);
}
#endif
