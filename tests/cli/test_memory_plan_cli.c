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

#include "ts_files.h"

#define PROMPT "'two red balls bouncing on a blue background'"
/* the embedded model, 2 s, no CFG twin (one context: the run's report is the whole DiT) */
#define ARGS "generate -p " PROMPT " --seconds 2 --codec ffv1 -s 7 --parallel-cfg off"

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
    double planned = figure_after(out, "\n  DiT ");
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
