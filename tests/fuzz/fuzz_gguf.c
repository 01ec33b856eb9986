/* libFuzzer harness: the GGUF reader on arbitrary bytes (header, counts, metadata strings and
 * arrays, tensor infos, dims, types, offsets, alignment), then the host dequantization of every
 * tensor it accepts. A rejected input must leave a message; an accepted one must only hand out
 * in-range bytes (AddressSanitizer checks every byte read below). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/quant.h"
#include "weights_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lv_weights *w = lv_weights_new("fuzz.gguf", "gguf");
    if (!w) return 0;
    lv_clear_error();
    lv_status s = lv_gguf_parse(w, data, size);
    if (s != LV_OK) {
        if (!lv_last_error()[0]) abort(); /* every failure explains itself */
    } else {
        volatile uint8_t acc = 0;
        for (int i = 0; i < lv_weights_count(w); i++) {
            const lv_weight *t = lv_weights_at(w, i);
            const uint8_t *p = t->data;
            for (uint64_t j = 0; j < t->nbytes; j++) acc ^= p[j];
            if (lv_weights_find(w, t->name) != t) abort();
            uint64_t numel = lv_weight_numel(t);
            if (numel && lv_dtype_bytes(t->dtype, (int64_t)numel) != t->nbytes) abort();
            /* the first row (at most 4096 values) to f32 */
            int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
            if (t->dtype != LV_I32 && numel && row <= 4096) {
                float out[4096];
                if (lv_dequantize_row(t->dtype, t->data, row, out) != LV_OK) abort();
            }
        }
        for (int i = 0; i < lv_weights_metadata_count(w); i++) {
            const char *key = lv_weights_metadata_key(w, i);
            uint64_t n = 0;
            const char *const *v = lv_weights_metadata_strings(w, key, &n);
            for (uint64_t j = 0; v && j < n; j++) acc ^= (uint8_t)strlen(v[j]);
            int type;
            const uint8_t *a = lv_weights_metadata_array(w, key, &type, &n);
            if (a && n) acc ^= a[0];
            (void)lv_weights_metadata_value(w, i);
        }
        (void)acc;
    }
    lv_weights_close(w);
    return 0;
}
