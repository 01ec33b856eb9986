/* Limits said before any work (issue 53, item 13): a block larger than the sampler takes
 * (-W 8192 -H 8192 --scale 1: four frames of 8192 x 8192 positions) and --sp-emulate with
 * more bands than a frame has token rows were found only at the first block, after the
 * model's upload (6 to 12 s, 900 MB), as "lv_longsana_chunk: 4 frames of 8192x8192" with no
 * reason, or at "block 1, step 1". Now: exit 2 at once, naming the limit and what to change. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_files.h"
#include "ts_process.h"

#define PROMPT "two red balls bouncing on a blue background"

static void expect_refused(const char *const *argv, const char *const *needles) {
    ts_proc p = ts_spawn(argv, 120);
    cr_assert(!p.timed_out && p.signal == 0 && p.status == 2, "status %d (signal %d), want 2:\n%s", p.status, p.signal,
              p.err);
    for (int i = 0; needles[i]; i++)
        cr_assert_not_null(strstr(p.err, needles[i]), "'%s' not in:\n%s", needles[i], p.err);
    /* before any work: no device, no model upload (the default model's is small, so the
     * bound is loose; the late failure took 6 s here) */
    cr_assert_lt(p.seconds, 3.0, "refused after %.1f s:\n%s", p.seconds, p.err);
    free(p.err);
}

Test(limits_cli, found_before_any_work, .timeout = 120) {
    const char *out = ts_tmp("limits.mkv");
    unlink(out);
    expect_refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT, "-W", "8192", "-H", "8192", "--scale", "1",
                                    "--frames", "4", "--burn-in-blocks", "0", "--codec", "ffv1", "-o", out, NULL},
                   (const char *[]){"a block of 4 frames of 8192x8192", "over the sampler's limit of 33554432",
                                    "lower -W/-H or --block-frames", NULL});
    expect_refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT, "--sp-emulate", "9", "--frames", "4",
                                    "--burn-in-blocks", "0", "--codec", "ffv1", "-o", out, NULL},
                   (const char *[]){"9 sequence-parallel bands (--sp-emulate)", "has 8 token rows", "at most 8 bands",
                                    NULL});
    cr_assert_eq(access(out, F_OK), -1, "a refused run wrote %s", out);
}
