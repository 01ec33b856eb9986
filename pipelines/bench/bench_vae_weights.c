/* Random Wan2.1 decoder weights under the original tensor names (bench vae, bench
 * generate, bench sp --vae): the structure's tensors at any base width from
 * lv_vae_expected_tensors (longvk/vae.h), in its order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_vae_weights.h"

typedef struct tensor_list {
    lv_weight *t;
    float **data;
    int n;
    uint64_t state;
} tensor_list;

static float rnd(tensor_list *l) { /* uniform in [-1, 1) */
    l->state = l->state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((l->state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* kind: 0 conv weight (unit variance / fan in), 1 bias (0.1 u), 2 gamma (1 + 0.1 u) */
static int add(tensor_list *l, const lv_vae_tensor_spec *spec) {
    const int kind = ends_with(spec->name, ".gamma") ? 2 : ends_with(spec->name, ".bias") ? 1 : 0;
    lv_weight *w = &l->t[l->n];
    memset(w, 0, sizeof *w);
    w->name = spec->name;
    w->dtype = LV_F32;
    w->ndim = spec->ndim;
    int64_t count = 1, fan_in = 1;
    for (int d = 0; d < spec->ndim; d++) {
        w->shape[d] = spec->shape[d];
        count *= spec->shape[d];
        if (d > 0) fan_in *= spec->shape[d];
    }
    float *data = malloc((size_t)count * sizeof *data);
    if (!data) return -1;
    float scale = kind == 0 ? (float)sqrt(3.0 / (double)fan_in) : 0.1f;
    for (int64_t i = 0; i < count; i++) data[i] = (kind == 2 ? 1.0f : 0.0f) + scale * rnd(l);
    l->data[l->n] = data;
    w->data = data;
    w->nbytes = (uint64_t)count * sizeof *data;
    l->n++;
    return 0;
}

lv_status bench_vae_write_random(const char *path, int dim) {
    if (dim < 4 || dim % 4) return lv_error(LV_ERR_INVALID, "bench: a VAE base width of %d (a multiple of 4)", dim);
    lv_vae_tensor_spec *specs;
    int n;
    lv_status s = lv_vae_expected_tensors(dim, 16, &specs, &n);
    if (s != LV_OK) return s;
    tensor_list tl = {calloc((size_t)n, sizeof *tl.t), calloc((size_t)n, sizeof *tl.data), 0, 12345};
    if (!tl.t || !tl.data) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int i = 0; s == LV_OK && i < n; i++)
        if (add(&tl, &specs[i])) s = lv_error(LV_ERR_NOMEM, "out of host memory for the random VAE weights");
    if (s == LV_OK) s = lv_safetensors_write(path, tl.t, tl.n, NULL, 0);
    for (int i = 0; i < tl.n; i++) free(tl.data[i]);
    free(tl.t);
    free(tl.data);
    free(specs);
    return s;
}
