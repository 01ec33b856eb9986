/* Under mpirun every rank runs the same command line, so a usage error is found by every
 * rank: rank 0 alone says it (issue 53, item 14), once, with exit status 2 (mpirun then
 * reports the non-zero status). Runs mpirun even on a build without MPI: the ranks read
 * their rank from the launcher's environment before any MPI call; skipped without mpirun. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_files.h"
#include "ts_mpi.h"

static int count(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(ranks_cli, a_usage_error_is_said_once, .timeout = 120) {
    if (system("command -v mpirun > /dev/null 2>&1") != 0) cr_skip_test("no mpirun");
    const char *out = ts_tmp("ranks-w33.mkv");
    char cmd[2048], *text;
    /* -W 33: not a multiple of the default model's patch */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate -p 'two red balls bouncing on a blue background' -W 33 "
             "--sequence-parallel -o %s 2>&1", LONGVK_CLI, out);
    int rc = ts_run(cmd, &text);
    cr_assert_neq(rc, 0, "%s", text);
    cr_assert_eq(count(text, "must be multiples of"), 1, "2 ranks, the error said %d times:\n%s",
                 count(text, "must be multiples of"), text);
    free(text);
    /* started as 2 processes without --sequence-parallel: said once too */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate -p 'two red balls bouncing on a blue background' -o %s 2>&1",
             LONGVK_CLI, out);
    rc = ts_run(cmd, &text);
    cr_assert_neq(rc, 0, "%s", text);
    cr_assert_eq(count(text, "without --sequence-parallel"), 1, "%s", text);
    free(text);
    cr_assert_eq(access(out, F_OK), -1, "a refused run wrote %s", out);
}
