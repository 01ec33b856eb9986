/* libFuzzer harness: the safetensors reader on arbitrary bytes (header length, JSON header,
 * dtypes, shapes, offsets), then the SANA-Video config parser on __metadata__.config.
 * A rejected input must leave a message; an accepted one must only hand out in-range bytes
 * (AddressSanitizer checks every byte read below). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sana_config.h"
#include "weights_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lv_weights *w = lv_weights_new("fuzz.safetensors", "safetensors");
    if (!w) return 0;
    lv_clear_error();
    lv_status s = lv_safetensors_parse(w, data, size);
    if (s != LV_OK) {
        if (!lv_last_error()[0]) abort(); /* every failure explains itself */
    } else {
        volatile uint8_t acc = 0;
        for (int i = 0; i < lv_weights_count(w); i++) {
            const lv_weight *t = lv_weights_at(w, i);
            const uint8_t *p = t->data;
            for (uint64_t j = 0; j < t->nbytes; j++) acc ^= p[j];
            if (lv_weights_find(w, t->name) != t) abort();
            if (lv_weight_numel(t) * lv_dtype_size(t->dtype) != t->nbytes) abort();
        }
        (void)acc;
        const char *config = lv_weights_metadata(w, "config");
        if (config) {
            lv_sana_config cfg;
            lv_sana_config_parse(config, strlen(config), "fuzz config", &cfg);
        }
    }
    lv_weights_close(w);
    return 0;
}
