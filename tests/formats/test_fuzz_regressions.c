/* Replays every input kept under tests/fuzz/regressions/ (crashers and hangs the fuzzers
 * found, see tests/fuzz/CMakeLists.txt) and the fuzz seeds (safetensors, pickle, GGUF)
 * through the parsers they were found in: each must end in a result or a clean error with a message. Runs in every build,
 * so the sanitizer build of CI re-checks them. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "sana_config.h"
#include "ts_files.h"
#include "weights_internal.h"

#define FUZZ_DIR LONGVK_ASSETS_DIR "/../tests/fuzz"

static lv_status capped_storage(void *user, lv_weights *w, const char *tensor, const char *key, uint64_t nbytes,
                              const void **out) {
    (void)user;
    (void)tensor;
    if (nbytes > (1u << 20)) return lv_error(LV_ERR_FORMAT, "storage '%s' over the 1 MiB cap", key);
    void *b = calloc(1, nbytes ? nbytes : 1);
    LV_TRY(lv_weights_own(w, b));
    *out = b;
    return LV_OK;
}

static void replay_safetensors(const uint8_t *data, size_t len, const char *name) {
    lv_weights *w = lv_weights_new(name, "safetensors");
    lv_clear_error();
    if (lv_safetensors_parse(w, data, len) == LV_OK) {
        for (int i = 0; i < lv_weights_count(w); i++) {
            const lv_weight *t = lv_weights_at(w, i);
            cr_assert_eq(lv_weights_find(w, t->name), t);
        }
        const char *cfg = lv_weights_metadata(w, "config");
        lv_sana_config c;
        if (cfg) lv_sana_config_parse(cfg, strlen(cfg), name, &c);
    } else {
        cr_assert(lv_last_error()[0], "%s: refused without a message", name);
    }
    lv_weights_close(w);
}

static void replay_pickle(const uint8_t *data, size_t len, const char *name) {
    lv_weights *w = lv_weights_new(name, "pytorch");
    lv_clear_error();
    if (lv_pth_from_pickle(w, data, len, capped_storage, NULL) != LV_OK)
        cr_assert(lv_last_error()[0], "%s: refused without a message", name);
    lv_weights_close(w);
}

static void replay_gguf(const uint8_t *data, size_t len, const char *name) {
    lv_weights *w = lv_weights_new(name, "gguf");
    lv_clear_error();
    if (lv_gguf_parse(w, data, len) == LV_OK) {
        for (int i = 0; i < lv_weights_count(w); i++) {
            const lv_weight *t = lv_weights_at(w, i);
            cr_assert_eq(lv_weights_find(w, t->name), t);
            cr_assert_eq(t->nbytes, lv_dtype_bytes(t->dtype, (int64_t)lv_weight_numel(t)), "%s: '%s'", name, t->name);
        }
    } else {
        cr_assert(lv_last_error()[0], "%s: refused without a message", name);
    }
    lv_weights_close(w);
}

/* Feeds every file of `dir` to `replay`; returns how many. */
static int replay_dir(const char *dir, void (*replay)(const uint8_t *, size_t, const char *)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *data = ts_slurp(path, &len);
        replay(data, len, path);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

Test(fuzz_regressions, safetensors_inputs_end_cleanly) {
    int n = replay_dir(FUZZ_DIR "/regressions/safetensors", replay_safetensors);
    int seeds = replay_dir(FUZZ_DIR "/seeds/safetensors", replay_safetensors);
    cr_assert_gt(seeds, 0, "no seeds found under %s", FUZZ_DIR);
    cr_log_info("%d regression inputs, %d seeds", n, seeds);
}

Test(fuzz_regressions, pickle_inputs_end_cleanly) {
    int n = replay_dir(FUZZ_DIR "/regressions/pickle", replay_pickle);
    int seeds = replay_dir(FUZZ_DIR "/seeds/pickle", replay_pickle);
    cr_assert_gt(seeds, 0, "no seeds found under %s", FUZZ_DIR);
    cr_log_info("%d regression inputs, %d seeds", n, seeds);
}

Test(fuzz_regressions, gguf_inputs_end_cleanly) {
    int n = replay_dir(FUZZ_DIR "/regressions/gguf", replay_gguf);
    int seeds = replay_dir(FUZZ_DIR "/seeds/gguf", replay_gguf);
    cr_assert_gt(seeds, 0, "no seeds found under %s", FUZZ_DIR);
    cr_log_info("%d regression inputs, %d seeds", n, seeds);
}
