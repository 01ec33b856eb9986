/* `longvk generate`'s device-memory plan (pipelines/generate/README.md, "The device-memory
 * plan"): --dry-run prints it and writes nothing, its DiT figure is what the run then
 * measures (the engine's own accounting, "device memory: X at most"), and a budget it
 * exceeds (LONGVK_DEVICE_BUDGET) refuses the run before any upload (exit 1) with the
 * settings that fit, leaving no file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk/vae.h"
#include "ts_files.h"

#define PROMPT "'two red balls bouncing on a blue background'"
/* the embedded model, 2 s, no CFG twin (one context: the run's report is the whole DiT); one
 * burn-in block instead of the card's 120: a block holds the same memory, burn-in or not */
#define ARGS "generate -p " PROMPT " --seconds 2 --burn-in-blocks 1 --codec ffv1 -s 7 --parallel-cfg off"

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* "  DiT                        3.7  ..." -> 3.7 */
static double figure_after(const char *out, const char *label) {
    const char *p = strstr(out, label);
    cr_assert_not_null(p, "no '%s' in:\n%s", label, out);
    return strtod(p + strlen(label), NULL);
}

static void dry_run_equals_measured(const char *extra, const char *name) {
    char cmd[2048], *out, *run;
    const char *video = ts_tmp(name);
    char state[1024];
    snprintf(state, sizeof state, "%s.longvk-state", video);
    remove(video);
    snprintf(cmd, sizeof cmd, "%s " ARGS " %s -o %s --dry-run", LONGVK_CLI, extra, video);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "device memory plan on ") && strstr(out, "nothing uploaded") && strstr(out, ": fits"),
              "%s", out);
    cr_assert(!exists(video) && !exists(state), "--dry-run wrote a file");
    double planned = figure_after(out, "\n  DiT phase ");
    snprintf(cmd, sizeof cmd, "%s " ARGS " %s -o %s", LONGVK_CLI, extra, video);
    rc = ts_run(cmd, &run);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, run);
    double measured = figure_after(run, "device memory: ");
    cr_log_info("%s: planned %.1f MiB, measured %.1f MiB", extra, planned, measured);
    /* both printed to 0.1 MiB: equal within 2 % and the rounding */
    cr_assert(planned <= measured * 1.02 + 0.1 && planned >= measured * 0.98 - 0.1, "%s: planned %.1f MiB, the run held %.1f",
              extra, planned, measured);
    remove(video);
    free(out);
    free(run);
}

Test(memory_plan_cli, dry_run_f32) { dry_run_equals_measured("", "plan_f32.mkv"); }

Test(memory_plan_cli, dry_run_q8_0_f16) {
    dry_run_equals_measured("--weights-dtype q8_0 --precision f16", "plan_q8.mkv");
}

/* The twin (CFG on a second context) doubles the DiT: a budget between one and two DiTs is
 * refused with --parallel-cfg off named, a smaller one with what fits, the smallest with
 * nothing that fits; no file is left. */
Test(memory_plan_cli, refused_over_budget) {
    const char *video = ts_tmp("plan_refused.mkv");
    char state[1024];
    snprintf(state, sizeof state, "%s.longvk-state", video);
    remove(video);
    char cmd[2048], *out;
    /* the plan with the twin on, from the plan itself: the DiT twice */
    snprintf(cmd, sizeof cmd, "%s generate -p " PROMPT " --seconds 2 --codec ffv1 -s 7 --parallel-cfg on -o %s --dry-run",
             LONGVK_CLI, video);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    double dit = figure_after(out, "\n  DiT "), peak = figure_after(out, "\n  peak ");
    cr_assert(strstr(out, "CFG twin's DiT"), "%s", out);
    cr_assert(peak >= 2 * dit - 0.2 && peak <= 2 * dit + 0.2, "peak %.1f, DiT %.1f:\n%s", peak, dit, out);
    free(out);
    struct {
        double mib;
        const char *want;
    } cases[] = {
        {dit * 1.05, "It would fit with --parallel-cfg off (peak "},
        {dit * 0.1, "No single setting makes it fit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "LONGVK_DEVICE_BUDGET=%llu %s generate -p " PROMPT " --seconds 2 --codec ffv1 -s 7 "
                 "--parallel-cfg on -o %s", (unsigned long long)(cases[i].mib * 1048576), LONGVK_CLI, video);
        int rc = ts_run(cmd, &out);
        cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
        cr_assert(strstr(out, "of device memory at its peak") && strstr(out, "(LONGVK_DEVICE_BUDGET)") &&
                      strstr(out, "nothing was uploaded") && strstr(out, cases[i].want),
                  "want '%s' in:\n%s", cases[i].want, out);
        cr_assert(!exists(video) && !exists(state), "a refused run left a file");
        free(out);
    }
}

/* Whether a run has the CFG twin, as its plan says: --parallel-cfg, else LONGVK_PARALLEL_CFG
 * (CTest sets it off), else the automatic rule (on for this CPU device with 2+ cores); a value
 * that is neither on nor off is ignored. */
Test(memory_plan_cli, parallel_cfg_from_the_environment) {
    const char *video = ts_tmp("plan_twin.mkv");
    const bool automatic = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    struct {
        const char *env, *option;
        bool twin;
    } cases[] = {
        {"env -u LONGVK_PARALLEL_CFG", "", automatic},
        {"LONGVK_PARALLEL_CFG=off", "", false},
        {"LONGVK_PARALLEL_CFG=on", "", true},
        {"LONGVK_PARALLEL_CFG=off", "--parallel-cfg on", true},
        {"LONGVK_PARALLEL_CFG=on", "--parallel-cfg off", false},
        {"LONGVK_PARALLEL_CFG=sometimes", "", automatic},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[2048], *out;
        snprintf(cmd, sizeof cmd, "%s %s generate -p " PROMPT " --seconds 2 --codec ffv1 -s 7 %s -o %s --dry-run",
                 cases[i].env, LONGVK_CLI, cases[i].option, video);
        cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
        cr_expect_eq(strstr(out, "CFG twin's DiT") != NULL, cases[i].twin, "%s %s: the twin %s expected:\n%s",
                     cases[i].env, cases[i].option, cases[i].twin ? "was" : "was not", out);
        free(out);
    }
    cr_assert(!exists(video), "a dry run wrote the video");
}

/* `info --plan` from a preset alone: the text encoder's phase is Gemma-2 2B's bf16 matrices
 * (26 layers of q, k, v, o 2304 x 2048 / 1024 / 1024 / 2048, gate, up, down 2304 x 9216) and f32
 * norms (4 a layer and the final one, 2304 each), plus a 600-token pass's f32 work buffers
 * (h, x, a 2304; q, o 2048; k, v 1024; gate, up 9216; rope 256 wide); q8_0 shrinks the DiT. */
Test(memory_plan_cli, info_plan_of_a_preset) {
    const double H = 2304, QW = 2048, KW = 1024, I = 9216, L = 26;
    const double mat = H * QW + 2 * H * KW + QW * H + 3 * H * I;
    const double gemma = (L * (2 * mat + 4 * 4 * H) + 4 * H + 600 * 4 * (3 * H + 2 * QW + 2 * KW + 2 * I + 256)) / 1048576;
    char cmd[1024], *bf16, *q8;
    snprintf(cmd, sizeof cmd, "%s info --plan --preset sana-video-2b-480p --precision f16", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &bf16), 0, "%s", bf16);
    snprintf(cmd, sizeof cmd, "%s info --plan --preset sana-video-2b-480p --precision f16 --weights-dtype q8_0", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &q8), 0, "%s", q8);
    double text = figure_after(bf16, "text encoder phase");
    cr_assert(text > gemma - 0.1 && text < gemma + 0.1, "text phase %.1f MiB, Gemma-2 2B needs %.1f:\n%s", text, gemma, bf16);
    cr_assert(strstr(bf16, "weights bf16, activations f16") && strstr(q8, "weights q8_0, activations f16"), "%s\n%s", bf16, q8);
    /* q8_0: 34 bytes a 32 weights against bf16's 64 (only the matrices shrink) */
    double w16 = figure_after(bf16, "\n    weights "), w8 = figure_after(q8, "\n    weights ");
    cr_assert(w8 < w16 * 0.8 && w8 > w16 * 34.0 / 64.0, "weights: bf16 %.1f MiB, q8_0 %.1f:\n%s\n%s", w16, w8, bf16, q8);
    /* --text-weights-dtype q8_0 / q4_K: the text encoder's matrices at 34 bytes a 32 weights /
     * 144 a 256 (every K of the 2B is whole q4_K blocks), the norms and the work as before */
    const char *dtypes[2] = {"q8_0", "q4_K"};
    const double per_weight[2] = {34.0 / 32, 144.0 / 256};
    for (int i = 0; i < 2; i++) {
        char *t;
        snprintf(cmd, sizeof cmd, "%s info --plan --preset sana-video-2b-480p --text-weights-dtype %s", LONGVK_CLI,
                 dtypes[i]);
        cr_assert_eq(ts_run(cmd, &t), 0, "%s", t);
        const double want = gemma - L * mat * (2 - per_weight[i]) / 1048576;
        double got = figure_after(t, "text encoder phase");
        cr_assert(got > want - 0.1 && got < want + 0.1, "%s: text phase %.1f MiB, want %.1f:\n%s", dtypes[i], got,
                  want, t);
        cr_assert(strstr(t, dtypes[i]), "%s", t);
        free(t);
    }
    free(bf16);
    free(q8);
}

/* `info --plan --vae-tiles` as generate decides (generate_vae_tiles.c): under a budget that
 * holds the DiT's phase but not the untiled decoder beside it, auto plans the largest square
 * tiles whose one-tile decoder fits what the DiT leaves (the next larger square does not); off
 * plans the untiled decoder and says it does not fit; HxW plans that tile's decoder. */
Test(memory_plan_cli, info_plan_tiles_the_vae_under_a_budget) {
#define PLAN_ARGS " info --plan --preset sana-video-2b-480p --precision f16 --weights-dtype q8_0 --cfg off"
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s" PLAN_ARGS " --vae-tiles off", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    const double untiled = figure_after(out, "VAE decoder "), phase = figure_after(out, "DiT phase ");
    cr_assert(strstr(out, "untiled, f16 activations"), "%s", out);
    free(out);
    const double dit = phase - untiled, budget = dit + untiled / 2; /* MiB */
    const unsigned long long budget_bytes = (unsigned long long)(budget * 1048576);

    snprintf(cmd, sizeof cmd, "LONGVK_DEVICE_BUDGET=%llu %s" PLAN_ARGS, budget_bytes, LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    const char *tiles = strstr(out, "tiles of ");
    int th = 0, tw = 0;
    cr_assert(tiles && sscanf(tiles, "tiles of %d x %d", &th, &tw) == 2, "auto planned no tiles:\n%s", out);
    const double vae = figure_after(out, "VAE decoder "), peak = figure_after(out, "\n  peak ");
    const double want = (double)lv_vae_memory_estimate_at(th, tw, LV_PRECISION_F16) / 1048576;
    cr_assert(vae > want - 0.1 && vae < want + 0.1, "tiles of %d x %d: %.1f MiB planned, their decoder %.1f", th, tw,
              vae, want);
    cr_assert(peak <= budget + 0.1 && strstr(out, ": fits"), "peak %.1f MiB over the budget %.1f:\n%s", peak, budget,
              out);
    /* square tiles (the frame is 60 x 104: at most 60 high), the largest that fit */
    cr_assert(th == (tw < 60 ? tw : 60), "tiles of %d x %d are not square within 60 x 104", th, tw);
    const int t = tw + 1;
    const double larger = (double)lv_vae_memory_estimate_at(t < 60 ? t : 60, t, LV_PRECISION_F16) / 1048576;
    cr_assert(dit + larger > budget, "tiles of %d fit too (%.1f MiB beside %.1f, budget %.1f)", t, larger, dit, budget);
    free(out);

    snprintf(cmd, sizeof cmd, "LONGVK_DEVICE_BUDGET=%llu %s" PLAN_ARGS " --vae-tiles off", budget_bytes, LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "does NOT fit") && strstr(out, "untiled"), "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s" PLAN_ARGS " --vae-tiles 32x32", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    const double fixed = figure_after(out, "VAE decoder ");
    const double want32 = (double)lv_vae_memory_estimate_at(32, 32, LV_PRECISION_F16) / 1048576;
    cr_assert(strstr(out, "tiles of 32 x 32") && fixed > want32 - 0.1 && fixed < want32 + 0.1, "want %.1f MiB:\n%s",
              want32, out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s" PLAN_ARGS " --vae-tiles 0x3 2>&1", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &out), 2, "%s", out);
    cr_assert(strstr(out, "--vae-tiles") && strstr(out, "auto, off or HxW"), "%s", out);
    free(out);
#undef PLAN_ARGS
}
