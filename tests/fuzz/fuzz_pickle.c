/* libFuzzer harness: the restricted pickle reader and the state-dict extraction of PyTorch
 * checkpoints on arbitrary data.pkl bytes. Storages come from a stand-in loader (zero bytes,
 * capped at 1 MiB) so that tensor views, offsets and strides are exercised without a zip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lv_status fake_storage(void *user, lv_weights *w, const char *tensor, const char *key, uint64_t nbytes,
                              const void **out) {
    (void)user;
    (void)tensor;
    if (nbytes > ((uint64_t)1 << 20)) return lv_error(LV_ERR_FORMAT, "storage '%s': %llu bytes is over the fuzz cap", key,
                                                      (unsigned long long)nbytes);
    void *buf = calloc(1, nbytes ? (size_t)nbytes : 1);
    if (!buf) return lv_error(LV_ERR_NOMEM, "out of memory");
    LV_TRY(lv_weights_own(w, buf));
    *out = buf;
    return LV_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lv_weights *w = lv_weights_new("fuzz.pth", "pytorch");
    if (!w) return 0;
    lv_clear_error();
    lv_status s = lv_pth_from_pickle(w, data, size, fake_storage, NULL);
    if (s != LV_OK) {
        if (!lv_last_error()[0]) abort();
    } else {
        volatile uint8_t acc = 0;
        for (int i = 0; i < lv_weights_count(w); i++) {
            const lv_weight *t = lv_weights_at(w, i);
            const uint8_t *p = t->data;
            for (uint64_t j = 0; j < t->nbytes; j++) acc ^= p[j];
            if (lv_weights_find(w, t->name) != t) abort();
        }
        (void)acc;
    }
    lv_weights_close(w);
    return 0;
}
