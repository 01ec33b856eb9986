/* Random SANA-Video weights for `bench dit` (bench_dit_model.c): a safetensors image in host
 * memory, opened as a model, with no file read or written. */
#ifndef LONGVK_BENCH_DIT_MODEL_H
#define LONGVK_BENCH_DIT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/sana.h"

typedef struct bench_dit_model {
    void *image; /* the safetensors bytes (mmap'd); lv_sana_file points into them */
    size_t size;
    lv_sana_file *file;
    uint64_t params;
} bench_dit_model;

/* Every tensor `cfg` needs, in bf16, uniform in [-0.02, 0.02] (norm weights 1 + that), from a
 * counter-based generator of `seed`. On failure the message is in lv_last_error() and *m is
 * left empty. Call bench_dit_model_free in either case. */
lv_status bench_dit_model_make(const lv_sana_config *cfg, uint64_t seed, bench_dit_model *m);
/* Closes the file and frees the image (once the dit is created, the weights are on the device). */
void bench_dit_model_free(bench_dit_model *m);

#endif
