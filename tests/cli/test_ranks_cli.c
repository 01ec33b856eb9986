/* Under mpirun every rank runs the same command line, so a usage error is found by every
 * rank: rank 0 alone says it (issue 53, item 14), once, with exit status 2 (mpirun then
 * reports the non-zero status). Runs mpirun even on a build without MPI: the ranks read
 * their rank from the launcher's environment before any MPI call; skipped without mpirun.
 * In a build with MPI, the same for faults found at run time (cli_mpi.c, say_failure): a
 * missing model (before MPI starts) and a bad resume file (read by rank 0, refused by the
 * others after it) are said once, while a fault only rank 1 finds (its own --model, by
 * mpirun's A : B form) is said by rank 1, named. */
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

#ifdef LONGVK_HAVE_MPI
Test(ranks_cli, a_fault_every_rank_finds_is_said_once, .timeout = 180) {
    if (system("command -v mpirun > /dev/null 2>&1") != 0) cr_skip_test("no mpirun");
    const char *out = ts_tmp("ranks-fault.mkv"), *missing = ts_tmp("ranks-no-such-model.safetensors");
    char cmd[4096], *text;
    unlink(out);
    /* a model that is not there: every rank finds it before MPI starts */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate -p 'two red balls' --model %s --sequence-parallel -o %s "
             "2>&1", LONGVK_CLI, missing, out);
    cr_assert_neq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert_eq(count(text, "cannot open"), 1, "2 ranks, the missing model said %d times:\n%s",
                 count(text, "cannot open"), text);
    free(text);
    /* a resume file that is not one: rank 0 reads it, the others are refused after it */
    char state[1100];
    snprintf(state, sizeof state, "%s.longvk-state", out);
    ts_spit(out, "junk", 4);
    ts_spit(state, "not a state", 11);
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate -p 'two red balls' --frames 8 --resume "
             "--sequence-parallel -o %s 2>&1", LONGVK_CLI, out);
    cr_assert_neq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert_eq(count(text, "not a safetensors file"), 1, "%s", text);
    cr_assert_eq(count(text, "was refused by the process that reads it"), 0, "%s", text);
    free(text);
    unlink(state);
    unlink(out);
    /* only rank 1's model is missing: rank 1 says it, with its rank */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 1 %s generate -p 'two red balls' --frames 8 --sequence-parallel -o %s "
             ": -np 1 %s generate -p 'two red balls' --frames 8 --model %s --sequence-parallel -o %s 2>&1",
             LONGVK_CLI, out, LONGVK_CLI, missing, out);
    cr_assert_neq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert_eq(count(text, "cannot open"), 1, "%s", text);
    cr_assert_not_null(strstr(text, "longvk generate (rank 1 of 2): longvk: generate: "), "%s", text);
    free(text);
    unlink(state);
    unlink(out);
}
#endif
