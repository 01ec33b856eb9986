/* Random Wan2.1 decoder weights under the original tensor names (bench vae, bench
 * generate): the structure of wan_vae_arch.c at any base width. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_vae_weights.h"
#include "wan_vae_internal.h"

#define MAX_TENSORS 256

typedef struct tensor_list {
    lv_weight t[MAX_TENSORS];
    char names[MAX_TENSORS][96];
    float *data[MAX_TENSORS];
    int n;
    uint64_t state;
} tensor_list;

static float rnd(tensor_list *l) { /* uniform in [-1, 1) */
    l->state = l->state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((l->state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* kind: 0 conv weight (unit variance / fan in), 1 bias (0.1 u), 2 gamma (1 + 0.1 u) */
static int add(tensor_list *l, const char *name, int kind, int ndim, const int64_t *shape) {
    if (l->n == MAX_TENSORS) return -1;
    lv_weight *w = &l->t[l->n];
    memset(w, 0, sizeof *w);
    snprintf(l->names[l->n], sizeof l->names[l->n], "%s", name);
    w->name = l->names[l->n];
    w->dtype = LV_F32;
    w->ndim = ndim;
    int64_t count = 1, fan_in = 1;
    for (int d = 0; d < ndim; d++) {
        w->shape[d] = shape[d];
        count *= shape[d];
        if (d > 0) fan_in *= shape[d];
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

#define ADD(kind, ...)                                                                       \
    do {                                                                                     \
        int64_t shp_[] = {__VA_ARGS__};                                                      \
        if (add(l, name, kind, (int)(sizeof shp_ / sizeof shp_[0]), shp_)) return -1;        \
    } while (0)

static int add_conv(tensor_list *l, const char *prefix, int64_t co, int64_t ci, int kt, int k) {
    char name[96];
    /* checked returns: a name that does not fit is a bug here, not silent truncation */
    if (snprintf(name, sizeof name, "%s.weight", prefix) >= (int)sizeof name) return -1;
    if (kt) ADD(0, co, ci, kt, k, k);
    else ADD(0, co, ci, k, k);
    if (snprintf(name, sizeof name, "%s.bias", prefix) >= (int)sizeof name) return -1;
    ADD(1, co);
    return 0;
}

static int add_block(tensor_list *l, const char *p, int64_t ci, int64_t co) {
    char name[96];
    snprintf(name, sizeof name, "%s.residual.0.gamma", p);
    ADD(2, ci, 1, 1, 1);
    snprintf(name, sizeof name, "%s.residual.2", p);
    if (add_conv(l, name, co, ci, 3, 3)) return -1;
    snprintf(name, sizeof name, "%s.residual.3.gamma", p);
    ADD(2, co, 1, 1, 1);
    snprintf(name, sizeof name, "%s.residual.6", p);
    if (add_conv(l, name, co, co, 3, 3)) return -1;
    if (ci != co) {
        snprintf(name, sizeof name, "%s.shortcut", p);
        if (add_conv(l, name, co, ci, 1, 1)) return -1;
    }
    return 0;
}

/* Random decoder weights of structure `a` under the original names. */
static int random_weights(tensor_list *l, const vae_arch *a) {
    int64_t z = a->z, t = a->trunk;
    char name[96];
    if (add_conv(l, "conv2", z, z, 1, 1) || add_conv(l, "decoder.conv1", t, z, 3, 3) ||
        add_block(l, "decoder.middle.0", t, t))
        return -1;
    snprintf(name, sizeof name, "decoder.middle.1.norm.gamma");
    ADD(2, t, 1, 1);
    snprintf(name, sizeof name, "decoder.middle.1.to_qkv.weight");
    ADD(0, 3 * t, t, 1, 1);
    snprintf(name, sizeof name, "decoder.middle.1.to_qkv.bias");
    ADD(1, 3 * t);
    snprintf(name, sizeof name, "decoder.middle.1.proj.weight");
    ADD(0, t, t, 1, 1);
    snprintf(name, sizeof name, "decoder.middle.1.proj.bias");
    ADD(1, t);
    if (add_block(l, "decoder.middle.2", t, t)) return -1;
    for (int i = 0; i < a->nups; i++) {
        char p[64], q[96];
        snprintf(p, sizeof p, "decoder.upsamples.%d", i);
        const vae_arch_layer *u = &a->ups[i];
        if (u->kind == VAE_RES) {
            if (add_block(l, p, u->ci, u->co)) return -1;
            continue;
        }
        if (u->kind == VAE_UP3D) {
            snprintf(q, sizeof q, "%s.time_conv", p);
            if (add_conv(l, q, 2 * u->ci, u->ci, 3, 1)) return -1;
        }
        snprintf(q, sizeof q, "%s.resample.1", p);
        if (add_conv(l, q, u->co, u->ci, 0, 3)) return -1;
    }
    snprintf(name, sizeof name, "decoder.head.0.gamma");
    ADD(2, a->head_ch, 1, 1, 1);
    return add_conv(l, "decoder.head.2", a->out_ch, a->head_ch, 3, 3);
}

lv_status bench_vae_write_random(const char *path, int dim) {
    if (dim < 4 || dim % 4) return lv_error(LV_ERR_INVALID, "bench: a VAE base width of %d (a multiple of 4)", dim);
    vae_arch a;
    vae_arch_make(&a, dim, 16);
    tensor_list *tl = calloc(1, sizeof *tl);
    if (!tl) return lv_error(LV_ERR_NOMEM, "out of host memory");
    tl->state = 12345;
    lv_status s = random_weights(tl, &a) ? lv_error(LV_ERR_NOMEM, "out of host memory for the random VAE weights")
                                          : lv_safetensors_write(path, tl->t, tl->n, NULL, 0);
    for (int i = 0; i < tl->n; i++) free(tl->data[i]);
    free(tl);
    return s;
}
