/* A run with quantized weights (`generate --weights-dtype q8_0`) stopped after a block and
 * resumed: the run identity records the dtype, so a resume without it, or with q4_K, is
 * refused naming weights_dtype (and one adding --text-weights-dtype, naming that), and a
 * resume with it gives the frames of the uninterrupted q8_0 run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_files.h"
#include "ts_process.h"

#define COMMON "-p", "two red balls bouncing on a blue background", "--seconds", "2", "--burn-in-blocks", "2", \
               "--codec", "ffv1", "--scale", "1", "-s", "7", "-q"

Test(quantized_resume, the_dtype_is_part_of_the_run, .timeout = 900) {
    const char *full = LONGVK_TEST_TMP "/q8_full.mkv", *k = LONGVK_TEST_TMP "/q8_k.mkv";
    char state[512];
    snprintf(state, sizeof state, "%s.longvk-state", k);
    remove(full), remove(k), remove(state);
    ts_proc p =
        ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", COMMON, "--weights-dtype", "q8_0", "-o", full, NULL});
    cr_assert_eq(p.status, 0, "the whole run: exit %d\n%s", p.status, p.err);
    free(p.err);
    setenv("LONGVK_TEST_STOP", "0:4", 1);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", COMMON, "--weights-dtype", "q8_0", "-o", k, NULL});
    unsetenv("LONGVK_TEST_STOP");
    cr_assert_eq(p.status, 130, "the stopped run: exit %d\n%s", p.status, p.err);
    free(p.err);
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", COMMON, "--resume", "-o", k, NULL});
    cr_assert(p.status != 0 && strstr(p.err, "belongs to another run: weights_dtype was \"q8_0\", now not set"),
              "exit %d: %s", p.status, p.err);
    free(p.err);
    p = ts_spawn_cli(
        (const char *[]){LONGVK_CLI, "generate", COMMON, "--weights-dtype", "q4_K", "--resume", "-o", k, NULL});
    cr_assert(p.status != 0 && strstr(p.err, "weights_dtype was \"q8_0\", now \"q4_K\""), "exit %d: %s", p.status,
              p.err);
    free(p.err);
    /* the text encoder's dtype is recorded likewise (only when not as stored) */
    p = ts_spawn_cli((const char *[]){LONGVK_CLI, "generate", COMMON, "--weights-dtype", "q8_0", "--text-weights-dtype",
                                      "q8_0", "--resume", "-o", k, NULL});
    cr_assert(p.status != 0 && strstr(p.err, "text_weights_dtype was not set (the default), now \"q8_0\"") &&
                  strstr(p.err, "--text-weights-dtype"),
              "exit %d: %s", p.status, p.err);
    /* and said to do nothing on this model, whose prompt goes through word tables */
    cr_assert(strstr(p.err, "--text-weights-dtype q8_0 changes nothing here: this model reads its prompt through "
                            "word tables"), "%s", p.err);
    free(p.err);
    p = ts_spawn_cli(
        (const char *[]){LONGVK_CLI, "generate", COMMON, "--weights-dtype", "q8_0", "--resume", "-o", k, NULL});
    cr_assert_eq(p.status, 0, "the resumed run: exit %d\n%s", p.status, p.err);
    free(p.err);
    int64_t n1, n2;
    size_t b1, b2;
    uint8_t *v1 = ts_decode_all(full, &n1, &b1), *v2 = ts_decode_all(k, &n2, &b2);
    cr_assert(n1 == 32 && n2 == n1 && b1 == b2, "%lld and %lld frames", (long long)n1, (long long)n2);
    cr_assert(memcmp(v1, v2, (size_t)n1 * b1) == 0, "the resumed q8_0 run's frames differ from the whole run's");
    free(v1), free(v2);
}
