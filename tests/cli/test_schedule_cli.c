/* A prompt schedule through `longvk generate` (issue 54), on the default model: 4 s at 16 fps
 * (64 frames, blocks of 4), 8 burn-in blocks instead of the card's 120 (a test's time), one
 * switch at 2 s from "two red balls bouncing on a blue background" to "three yellow squares
 * on a dark background" (block 9 of the video, 17 with the burn-in, frame 32):
 *
 * - one_switch: the frames before the switch are those of the first prompt alone; the new
 *   prompt takes hold: from 3 blocks after the switch block without a transition, and from
 *   2 blocks after a 1 s transition ends, every block's RGB histogram is within chi-square
 *   0.1 of the second prompt's video (same seed, same block) and at least 0.3 from the first
 *   prompt's (the two prompts' videos are 0.47 apart; the measure is codec/metrics'
 *   histogram distance: 32 bins a channel, 0 same palette, 1 disjoint). The seam at the
 *   switch (MAE of the frame pair across it) with --transition 1 is at most 1.5 times the
 *   video's median boundary seam, the largest over the transition at most 2 times (measured
 *   0.95 and 1.76; without a transition 2.09 at the switch). Progress and the summary name
 *   the block and the frame; `longvk metrics --switches` reports the seam.
 * - replay_and_resume: --schedule OUT.schedule with the same seed makes the same frames;
 *   a run stopped (LONGVK_TEST_STOP) before the switch and resumed makes the uninterrupted
 *   frames; a resume with another schedule, or none, is refused. --on-switch recache: keep's
 *   frames before the switch, other ones from it, and a resume just before the switch (the
 *   blocks it re-makes partly from the resume file) makes the uninterrupted frames.
 * - transitions_that_overlap: a switch at 2 s while the one at 1 s is still in its 3 s
 *   transition starts from the mixture in force: its seam is at most 1.5 times the median
 *   (measured 0.69x; 2.44x when the second transition started from the second prompt's own
 *   rows: a cut).
 * - recache_same_prompt: recache under the prompt already in force, from nothing, is the
 *   one-prompt video bit for bit.
 * - bad_input: every refused schedule exits 2 with its message before any work. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_frames.h"
#include "ts_process.h"

#define PROMPT_A "two red balls bouncing on a blue background"
#define PROMPT_B "three yellow squares on a dark background"
#define PROMPT_C "one white circle on a light background"
#define COMMON "--seconds", "4", "--burn-in-blocks", "8", "--codec", "ffv1", "--scale", "1", "-s", "7"
#define FRAME_BYTES (32 * 32 * 3)

static void clean(const char *out) { ts_remove_output(out, (const char *const[]){".schedule", ".longvk-state", NULL}); }

/* chi-square distance of the RGB histograms (32 bins a channel, each normalised) of frames
 * [f0, f0 + n) of two videos: codec/metrics' histogram distance */
static double hist_chi2(const uint8_t *a, const uint8_t *b, int f0, int n) {
    double ha[96] = {0}, hb[96] = {0};
    for (int f = f0; f < f0 + n; f++)
        for (int i = 0; i < FRAME_BYTES; i++) {
            ha[(i % 3) * 32 + a[(size_t)f * FRAME_BYTES + i] / 8] += 1;
            hb[(i % 3) * 32 + b[(size_t)f * FRAME_BYTES + i] / 8] += 1;
        }
    double total = (double)n * FRAME_BYTES / 3, d = 0;
    for (int k = 0; k < 96; k++) {
        double x = ha[k] / total, y = hb[k] / total;
        if (x + y > 0) d += 0.5 * (x - y) * (x - y) / (x + y);
    }
    return d / 3;
}

Test(schedule_cli, one_switch, .timeout = 1200) {
    const char *a = LONGVK_TEST_TMP "/sched_a.mkv", *b = LONGVK_TEST_TMP "/sched_b.mkv";
    const char *s0 = LONGVK_TEST_TMP "/sched_s0.mkv", *s1 = LONGVK_TEST_TMP "/sched_s1.mkv";
    clean(a), clean(b), clean(s0), clean(s1);
    ts_proc p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, COMMON, "-q", "-o", a, NULL});
    ts_assert_exit0(&p, "the first prompt alone");
    free(p.err);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_B, COMMON, "-q", "-o", b, NULL});
    ts_assert_exit0(&p, "the second prompt alone");
    free(p.err);
    p = ts_spawn_cli(
        (const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "2=" PROMPT_B, COMMON, "-o", s0, NULL});
    ts_assert_exit0(&p, "one switch");
    const char *line = "switch 1/1: block 17/24 (block 9 of the video) from frame 32 = 2.000 s (asked: frame 32), "
                       "transition 0 frames: \"" PROMPT_B "\"";
    const char *first = strstr(p.err, line);
    cr_assert(first && strstr(first + 1, line), "the progress and the summary name the switch:\n%s", p.err);
    free(p.err);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "0:02=" PROMPT_B,
                                      "--transition", "1", COMMON, "-q", "-o", s1, NULL});
    ts_assert_exit0(&p, "one switch with --transition 1");
    free(p.err);

    uint8_t *va = ts_decode_frames(a, 64, FRAME_BYTES), *vb = ts_decode_frames(b, 64, FRAME_BYTES);
    uint8_t *v0 = ts_decode_frames(s0, 64, FRAME_BYTES), *v1 = ts_decode_frames(s1, 64, FRAME_BYTES);
    cr_assert(memcmp(v0, va, 32 * FRAME_BYTES) == 0, "before the switch: the first prompt's frames");
    cr_assert(memcmp(v1, va, 32 * FRAME_BYTES) == 0, "before the switch (transition): the first prompt's frames");
    cr_assert(memcmp(v0 + 32 * FRAME_BYTES, va + 32 * FRAME_BYTES, FRAME_BYTES) != 0, "the switch block differs");
    double ab = hist_chi2(va, vb, 32, 32);
    cr_log_info("the two prompts' videos after frame 32: histogram distance %.3f", ab);
    for (int blk = 8; blk < 16; blk++) {
        double d0b = hist_chi2(v0, vb, 4 * blk, 4), d0a = hist_chi2(v0, va, 4 * blk, 4);
        double d1b = hist_chi2(v1, vb, 4 * blk, 4), d1a = hist_chi2(v1, va, 4 * blk, 4);
        cr_log_info("block %d: no transition: to B %.3f, to A %.3f; transition 1 s: to B %.3f, to A %.3f", blk + 1,
                    d0b, d0a, d1b, d1a);
        /* the switch block is block 9 (index 8); the 1 s transition spans blocks 9-12 */
        if (blk >= 8 + 3) cr_expect(d0b < 0.1 && d0a > 0.3, "block %d (no transition): %.3f to B, %.3f to A",
                                    blk + 1, d0b, d0a);
        if (blk >= 11 + 2) cr_expect(d1b < 0.1 && d1a > 0.3, "block %d (transition): %.3f to B, %.3f to A",
                                     blk + 1, d1b, d1a);
    }
    double m0 = ts_median_seam(v0, FRAME_BYTES, 64, 4), m1 = ts_median_seam(v1, FRAME_BYTES, 64, 4);
    double at0 = ts_pair_mae(v0, FRAME_BYTES, 31), at1 = ts_pair_mae(v1, FRAME_BYTES, 31);
    double most = 0;
    for (int f = 32; f <= 48; f += 4) most = fmax(most, ts_pair_mae(v1, FRAME_BYTES, f - 1));
    cr_log_info("seam at the switch: %.3f = %.2fx the median %.3f without a transition; %.3f = %.2fx the median "
                "%.3f with --transition 1, largest over the transition %.3f = %.2fx", at0, at0 / m0, m0, at1,
                at1 / m1, m1, most, most / m1);
    cr_expect(at1 <= 1.5 * m1, "--transition 1: the seam at the switch %.3f > 1.5 x the median %.3f", at1, m1);
    cr_expect(most <= 2.0 * m1, "--transition 1: the largest seam over the transition %.3f > 2 x the median %.3f",
              most, m1);

    /* longvk metrics --switches: the same figure */
    char cmd[2000], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s metrics %s --block-frames 4 --switches %s.schedule 2>&1", LONGVK_CLI, s1, s1);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    char want[200];
    snprintf(want, sizeof want, "frame 32 (2.000 s): seam %.3f = %.2fx the median", at1, at1 / m1);
    cr_expect(strstr(out, want), "metrics --switches: no '%s' in\n%s", want, out);
    free(out);
    free(va), free(vb), free(v0), free(v1);
}

Test(schedule_cli, replay_and_resume, .timeout = 1200) {
    const char *s = LONGVK_TEST_TMP "/sched_r.mkv", *r = LONGVK_TEST_TMP "/sched_replay.mkv";
    const char *k = LONGVK_TEST_TMP "/sched_k.mkv";
    clean(s), clean(r), clean(k);
    /* 1.9 s is frame 30, in block 8 of the video (frames 28-31, block 16 with the burn-in) */
    ts_proc p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "1.9=" PROMPT_B,
                                              "--transition", "0.5", COMMON, "-q", "-o", s, NULL});
    ts_assert_exit0(&p, "the scheduled run");
    free(p.err);
    size_t len;
    char *sched = (char *)ts_slurp(LONGVK_TEST_TMP "/sched_r.mkv.schedule", &len);
    cr_assert(strstr(sched, "\n28f | " PROMPT_B " |  | 8f\n"), "block-exact times in OUT.schedule:\n%s", sched);
    free(sched);
    /* the replay with CFG's twin (CTest turns it off by default): the same frames with the twin's
     * texts set at each change of the conditioning */
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "--schedule", LONGVK_TEST_TMP "/sched_r.mkv.schedule",
                                      COMMON, "--parallel-cfg", "on", "-q", "-o", r, NULL});
    ts_assert_exit0(&p, "--schedule OUT.schedule");
    free(p.err);
    uint8_t *vs = ts_decode_frames(s, 64, FRAME_BYTES), *vr = ts_decode_frames(r, 64, FRAME_BYTES);
    cr_assert(memcmp(vs, vr, (size_t)64 * FRAME_BYTES) == 0, "--schedule OUT.schedule: other frames");

    /* stopped after block 14 (6 of the video), before the switch at block 16; resumed */
    const char *const run[] = {LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "1.9=" PROMPT_B,
                               "--transition", "0.5", COMMON, "-q", "-o", k, NULL};
    setenv("LONGVK_TEST_STOP", "0:14", 1);
    p = ts_spawn_cli(run);
    unsetenv("LONGVK_TEST_STOP");
    cr_assert_eq(p.status, 130, "the stopped run: exit %d\n%s", p.status, p.err);
    free(p.err);
    /* another schedule, or none, is refused */
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "2=" PROMPT_B,
                                      "--transition", "0.5", COMMON, "-q", "--resume", "-o", k, NULL});
    cr_assert(p.status != 0 && strstr(p.err, "belongs to another run: schedule was"), "%s", p.err);
    free(p.err);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, COMMON, "-q", "--resume", "-o", k, NULL});
    cr_assert(p.status != 0 && strstr(p.err, "belongs to a run with a prompt schedule"), "%s", p.err);
    free(p.err);
    const char *resume[sizeof run / sizeof run[0] + 1];
    int n = 0;
    for (; run[n]; n++) resume[n] = run[n];
    resume[n++] = "--resume";
    resume[n] = NULL;
    p = ts_spawn_cli(resume);
    ts_assert_exit0(&p, "--resume");
    free(p.err);
    uint8_t *vk = ts_decode_frames(k, 64, FRAME_BYTES);
    cr_assert(memcmp(vs, vk, (size_t)64 * FRAME_BYTES) == 0, "--resume: other frames than the uninterrupted run");

    /* --on-switch recache: the frames before the switch are keep's; stopped after block 15,
     * the switch at block 16 re-makes blocks 13-15, two of them from the resume file */
    const char *q = LONGVK_TEST_TMP "/sched_q.mkv", *qk = LONGVK_TEST_TMP "/sched_qk.mkv";
    clean(q), clean(qk);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "1.9=" PROMPT_B,
                                      "--on-switch", "recache", COMMON, "-q", "-o", q, NULL});
    ts_assert_exit0(&p, "--on-switch recache");
    free(p.err);
    const char *const qrun[] = {LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "1.9=" PROMPT_B, "--on-switch",
                                "recache", COMMON, "-q", "-o", qk, NULL, NULL, NULL, NULL};
    setenv("LONGVK_TEST_STOP", "0:15", 1);
    p = ts_spawn_cli(qrun);
    unsetenv("LONGVK_TEST_STOP");
    cr_assert_eq(p.status, 130, "the stopped recache run: exit %d\n%s", p.status, p.err);
    free(p.err);
    const char *qresume[sizeof qrun / sizeof qrun[0]];
    memcpy(qresume, qrun, sizeof qrun);
    /* resumed with CFG's twin: the recache re-makes its state too (copied from the main DiT) */
    qresume[sizeof qrun / sizeof qrun[0] - 4] = "--resume";
    qresume[sizeof qrun / sizeof qrun[0] - 3] = "--parallel-cfg";
    qresume[sizeof qrun / sizeof qrun[0] - 2] = "on";
    p = ts_spawn_cli(qresume);
    ts_assert_exit0(&p, "--on-switch recache --resume");
    free(p.err);
    uint8_t *vq = ts_decode_frames(q, 64, FRAME_BYTES), *vqk = ts_decode_frames(qk, 64, FRAME_BYTES);
    cr_assert(memcmp(vq, vs, 28 * FRAME_BYTES) == 0, "recache: before the switch, keep's frames");
    cr_assert(memcmp(vq + 28 * FRAME_BYTES, vs + 28 * FRAME_BYTES, 4 * FRAME_BYTES) != 0,
              "recache: the switch block as keep makes it");
    cr_assert(memcmp(vq, vqk, (size_t)64 * FRAME_BYTES) == 0, "recache --resume: other frames than the uninterrupted run");
    free(vs), free(vr), free(vk), free(vq), free(vqk);
}

Test(schedule_cli, transitions_that_overlap, .timeout = 600) {
    const char *two = LONGVK_TEST_TMP "/sched_ov.mkv";
    clean(two);
    /* 3 s: 48 frames, 11 block boundaries (COMMON's --seconds 4 is replaced by the later one) */
    ts_proc p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompt-at", "1=" PROMPT_B,
                                              "--prompt-at", "2=" PROMPT_C, "--transition", "3", COMMON,
                                              "--seconds", "3", "-q", "-o", two, NULL});
    ts_assert_exit0(&p, "a second switch inside the first one's transition");
    free(p.err);
    uint8_t *v = ts_decode_frames(two, 48, FRAME_BYTES);
    double median = ts_median_seam(v, FRAME_BYTES, 48, 4), at = ts_pair_mae(v, FRAME_BYTES, 31);
    cr_log_info("the second switch (frame 32, the first's transition at 0.29): seam %.3f = %.2fx the median %.3f", at,
                at / median, median);
    cr_expect(at <= 1.5 * median, "the second switch: seam %.3f > 1.5 x the median %.3f", at, median);
    free(v);
    clean(two);
}

/* Recache's mechanics: a switch to the same prompt at block 3 without a burn-in re-makes the
 * state from nothing (blocks 1 and 2's write passes again, the conv caches' chain as the first
 * time), so the video is the one-prompt video bit for bit. */
Test(schedule_cli, recache_same_prompt, .timeout = 600) {
    const char *a = LONGVK_TEST_TMP "/sched_same_a.mkv", *q = LONGVK_TEST_TMP "/sched_same_q.mkv";
    clean(a), clean(q);
    ts_proc p =
        ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--seconds", "1", "--burn-in-blocks", "0",
                                      "--codec", "ffv1", "--scale", "1", "-q", "-o", a, NULL});
    ts_assert_exit0(&p, "one prompt");
    free(p.err);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI,
                                      "generate",
                                      "-p",
                                      PROMPT_A,
                                      "--prompt-at",
                                      "8f=" PROMPT_A,
                                      "--on-switch",
                                      "recache",
                                      "--seconds",
                                      "1",
                                      "--burn-in-blocks",
                                      "0",
                                      "--codec",
                                      "ffv1",
                                      "--scale",
                                      "1",
                                      "-q",
                                      "-o",
                                      q,
                                      NULL});
    ts_assert_exit0(&p, "a switch to the same prompt");
    free(p.err);
    int64_t na, nq;
    size_t fa, fq;
    uint8_t *va = ts_decode_all(a, &na, &fa), *vq = ts_decode_all(q, &nq, &fq);
    cr_assert(na == 16 && nq == 16 && fa == fq && memcmp(va, vq, (size_t)na * fa) == 0,
              "recache under the same prompt changed the video");
    free(va), free(vq);
}

/* exit 2 with `message` in stderr, and nothing written */
static void refused(const char *const *argv, const char *message) {
    ts_proc p = ts_spawn(argv, 120);
    cr_expect(p.status == 2 && strstr(p.err, message), "%s: exit %d, wanted 2 and '%s':\n%s", ts_argv_text(argv),
              p.status, message, p.err);
    free(p.err);
    cr_expect(access(LONGVK_TEST_TMP "/sched_bad.mkv", F_OK) != 0, "a refused run wrote its output");
    cr_expect(access(LONGVK_TEST_TMP "/sched_bad.mkv.longvk-state", F_OK) != 0, "a refused run wrote a resume file");
}

#define BAD(...) refused((const char *[]){LONGVK_CLI, "generate", __VA_ARGS__, "--seconds", "4", "-o", \
                                          LONGVK_TEST_TMP "/sched_bad.mkv", NULL}, msg)

Test(schedule_cli, bad_input, .timeout = 300) {
    clean(LONGVK_TEST_TMP "/sched_bad.mkv");
    const char *msg;
    msg = "schedule entry 3 (--prompt-at 1=three squares): time 1 is out of order (before schedule entry 2 "
          "(--prompt-at 2=two balls)'s 2): entries go in time order";
    BAD("-p", "a red ball", "--prompt-at", "2=two balls", "--prompt-at", "1=three squares");
    msg = "schedule entry 3 (--prompt-at 32f=three squares): time 32f is duplicated (schedule entry 2 (--prompt-at "
          "2=two balls) has it too)";
    BAD("-p", "a red ball", "--prompt-at", "2=two balls", "--prompt-at", "32f=three squares");
    msg = "--prompt-at: '-1=two balls' has a negative time";
    BAD("-p", "a red ball", "--prompt-at", "-1=two balls");
    msg = "schedule entry 2 (--prompt-at 4=two balls): time 4 is past the end (the video is 64 frames, 4 s)";
    BAD("-p", "a red ball", "--prompt-at", "4=two balls");
    msg = "--prompt-at: 'soon=two balls' has a time that is not seconds (12.5), mm:ss (1:05.5) or frames (80f)";
    BAD("-p", "a red ball", "--prompt-at", "soon=two balls");
    msg = "--prompt-at: '1:75=two balls' has a time that is not seconds";
    BAD("-p", "a red ball", "--prompt-at", "1:75=two balls");
    msg = "--prompt-at: 'two balls' is not TIME=PROMPT";
    BAD("-p", "a red ball", "--prompt-at", "two balls");
    msg = "schedule entry 2 (--prompt-at 2=): the prompt is empty";
    BAD("-p", "a red ball", "--prompt-at", "2=");
    msg = "schedule entry 3 (--prompt-at 2.1=three squares): time 2.1 falls in block 9 (frames 32-35) with "
          "schedule entry 2 (--prompt-at 2=two balls): one switch a block";
    BAD("-p", "a red ball", "--prompt-at", "2=two balls", "--prompt-at", "2.1=three squares");
    msg = "--on-switch recache re-makes a window of blocks: not with --cached-blocks all";
    BAD("-p", "a red ball", "--prompt-at", "2=two balls", "--on-switch", "recache", "--cached-blocks", "all");
    /* bands and ranks take a schedule (tests/generate/test_generate_pipeline.c); CFG groups
     * re-making their state each: not */
    msg = "--prompt-at / --schedule: --on-switch recache: not with --cfg-parallel (keep is";
    BAD("-p", "a red ball", "--prompt-at", "2=two balls", "--on-switch", "recache", "--cfg-parallel");
    msg = "--transition and --on-switch need a schedule";
    BAD("-p", "a red ball", "--transition", "1");
    msg = "--prompt is required (or --schedule";
    BAD("--seed", "1");

    /* the file: every entry's errors name its line */
    const char *file = LONGVK_TEST_TMP "/sched_bad.txt";
    const char *fargs[] = {LONGVK_CLI, "generate", "--schedule", file, "--seconds", "4", "-o",
                           LONGVK_TEST_TMP "/sched_bad.mkv", NULL};
    const char *t1 = "# a comment\n0 | a red ball\n\n0:03 | two balls | | 0.5 # three quarters in\n0:02.5 | three squares\n";
    ts_spit(file, t1, strlen(t1));
    char want[1200];
    snprintf(want, sizeof want, "schedule entry 3 (%s line 5): time 0:02.5 is out of order (before schedule entry 2 "
             "(%s line 4)'s 0:03)", file, file);
    refused(fargs, want);
    const char *t2 = "0 | a red ball\n2 |  \n";
    ts_spit(file, t2, strlen(t2));
    snprintf(want, sizeof want, "schedule entry 2 (%s line 2): the prompt is empty", file);
    refused(fargs, want);
    const char *t3 = "1 | a red ball\n";
    ts_spit(file, t3, strlen(t3));
    snprintf(want, sizeof want, "schedule entry 1 (%s line 1): the first entry must be at time 0", file);
    refused(fargs, want);
    const char *t4 = "0 | a red ball\n2 two balls\n";
    ts_spit(file, t4, strlen(t4));
    snprintf(want, sizeof want, "%s line 2: '2 two balls' is not TIME | PROMPT [| NEGATIVE [| TRANSITION]]", file);
    refused(fargs, want);
    const char *t5 = "0 | a red ball\n2 | two balls | | later\n";
    ts_spit(file, t5, strlen(t5));
    snprintf(want, sizeof want, "schedule entry 2 (%s line 2): the transition 'later' is not seconds", file);
    refused(fargs, want);
    remove(file);

    /* a word not in the vocabulary: warned per entry, naming it (the run then fails at its
     * codec, before any device work) */
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", "-p", "a red ball", "--prompt-at",
                                          "2=two purplish balls", "--seconds", "4", "--codec", "nosuchcodec", "-o",
                                          LONGVK_TEST_TMP "/sched_bad.mkv", NULL}, 120);
    cr_expect(strstr(p.err, "warning: schedule entry 2 (--prompt-at 2=two purplish balls): prompt: ignored (not in "
                            "the vocabulary): purplish"), "%s", p.err);
    cr_expect(!strstr(p.err, "schedule entry 1"), "entry 1 has no unknown word:\n%s", p.err);
    free(p.err);
    clean(LONGVK_TEST_TMP "/sched_bad.mkv");
}
