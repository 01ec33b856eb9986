/* The same seed gives the same file whatever CPUs the process may use (issue 53, item 11):
 * libx264's frames depended on its thread count, which was the CPU count, so `taskset -c 0`
 * (or an MPI rank bound to one core) made other .mp4 frames than an unrestricted run. The
 * encoder's thread count is fixed now: the two runs' frames, decoded by ffmpeg, are equal.
 * On a one-CPU machine both runs see one CPU and the test shows nothing (it still passes).
 * libx265 sizes its frame threads by the CPUs it counts (not the affinity: taskset changes
 * nothing), and from 4 CPUs on encodes several frames at once, which changes them: longvk
 * gives it one frame thread and a fixed worker pool. Shown on any machine by a preloaded
 * library that makes libx265 count 16 CPUs (x265_cpus_preload.c), against one CPU under
 * taskset: the frames (768 x 768, where two frame threads change them) are equal. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_files.h"

#define PROMPT "two red balls bouncing on a blue background"

static char *run(const char *cmd) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d of %s:\n%s", rc, cmd, out);
    return out;
}

Test(encoder_threads_cli, lossy_frames_do_not_depend_on_the_cpus, .timeout = 300) {
    const char *one = ts_tmp("threads-one.mp4"), *all = ts_tmp("threads-all.mp4");
    const char *outs[2] = {one, all}, *prefix[2] = {"taskset -c 0 ", ""};
    char cmd[2048];
    for (int i = 0; i < 2; i++) {
        unlink(outs[i]);
        snprintf(cmd, sizeof cmd, "%s%s generate -p '" PROMPT "' --frames 24 --burn-in-blocks 0 -s 4 --codec libx264 "
                 "-q -o %s 2>&1", prefix[i], LONGVK_CLI, outs[i]);
        free(run(cmd));
    }
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", one);
    char *a = run(cmd);
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", all);
    char *b = run(cmd);
    int lines = 0;
    for (const char *c = a; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 24, "%s", a);
    cr_assert_str_eq(a, b, "taskset -c 0 made other libx264 frames than an unrestricted run (%ld CPUs)",
                     sysconf(_SC_NPROCESSORS_ONLN));
    free(a);
    free(b);
}

Test(encoder_threads_cli, libx265_frames_do_not_depend_on_the_cpus, .timeout = 300) {
    const char *one = ts_tmp("threads-x265-one.mp4"), *many = ts_tmp("threads-x265-16.mp4");
    const char *outs[2] = {one, many}, *prefix[2] = {"LONGVK_TEST_X265_CPUS=1 taskset -c 0 ",
                                                     "LONGVK_TEST_X265_CPUS=16 "};
    const char *asan = getenv("ASAN_OPTIONS");
    char cmd[4096];
    for (int i = 0; i < 2; i++) {
        unlink(outs[i]);
        /* a preloaded library comes before the sanitizer's runtime: ASan is told that is fine */
        snprintf(cmd, sizeof cmd, "ASAN_OPTIONS='%s%sverify_asan_link_order=0' LD_PRELOAD=%s %s%s generate -p '" PROMPT
                 "' --frames 8 --burn-in-blocks 0 -s 4 --scale 24 --codec libx265 --preset ultrafast -q -o %s 2>&1",
                 asan ? asan : "", asan && *asan ? ":" : "", LONGVK_X265_CPUS_PRELOAD, prefix[i], LONGVK_CLI, outs[i]);
        free(run(cmd));
    }
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", one);
    char *a = run(cmd);
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", many);
    char *b = run(cmd);
    int lines = 0;
    for (const char *c = a; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 8, "%s", a);
    cr_assert_str_eq(a, b, "libx265 made other frames counting 16 CPUs than counting one");
    free(a);
    free(b);
}
