/* Loading the Wan VAE decoder: the layer structure is read from the tensors present
 * (original Wan2.1 names, or diffusers AutoencoderKLWan names mapped to them), every
 * shape is checked against it, and the weights are uploaded in fp32, convolutions in the
 * packed layout of longvk/ops_vae.h. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops_vae.h"
#include "wan_vae_internal.h"

/* Wan2.1's de-normalisation tables (z = 16), from the specification. */
static const float wan21_mean[16] = {-0.7571f, -0.7089f, -0.9113f, 0.1075f, -0.1745f, 0.9653f,
                                     -0.1517f, 1.5508f,  0.4134f,  -0.0715f, 0.5517f, -0.3632f,
                                     -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
static const float wan21_std[16] = {2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f,
                                    2.6052f, 2.0743f, 3.2687f, 2.1526f, 2.8652f, 1.5579f,
                                    1.6382f, 1.1253f, 2.8251f, 1.9160f};

/* The tensor of an original name, under its diffusers name when the file uses those. */
const lv_weight *vae_find(const vae_loader *L, const char *name, char *file_name, size_t size) {
    if (!L->diffusers) {
        snprintf(file_name, size, "%s", name);
        return lv_weights_find(L->w, name);
    }
    if (!vae_diffusers_name(name, L->nres, file_name, size)) return NULL;
    return lv_weights_find(L->w, file_name);
}

static const lv_weight *probe(const vae_loader *L, const char *fmt, int i) {
    char name[128], file_name[160];
    snprintf(name, sizeof name, fmt, i);
    return vae_find(L, name, file_name, sizeof file_name);
}

static void describe_shape(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* The tensor `name` with exactly this shape, as a malloc'd f32 array. */
static lv_status fetch(const vae_loader *L, const char *name, int ndim, const int64_t *shape,
                       float **out) {
    char file_name[160], want[96], got[96];
    *out = NULL;
    const lv_weight *t = vae_find(L, name, file_name, sizeof file_name);
    if (!t)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor '%s'%s%s%s is missing",
                        lv_weights_path(L->w), name, L->diffusers ? " (diffusers name '" : "",
                        L->diffusers ? file_name : "", L->diffusers ? "')" : "");
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        describe_shape(shape, ndim, want, sizeof want);
        describe_shape(t->shape, t->ndim, got, sizeof got);
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor '%s' is %s, want %s",
                        lv_weights_path(L->w), file_name, got, want);
    }
    if (t->dtype != LV_F32 && t->dtype != LV_F16 && t->dtype != LV_BF16)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor '%s' is %s, want a float type",
                        lv_weights_path(L->w), file_name, lv_dtype_name(t->dtype));
    uint64_t n = lv_weight_numel(t);
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) return lv_error(LV_ERR_NOMEM, "out of host memory loading '%s'", file_name);
    if (t->dtype == LV_F32) {
        memcpy(f, t->data, n * sizeof *f);
    } else {
        const uint16_t *h = t->data;
        for (uint64_t i = 0; i < n; i++)
            f[i] = t->dtype == LV_F16 ? lv_half_to_float(h[i]) : lv_bf16_to_float(h[i]);
    }
    *out = f;
    return LV_OK;
}

static lv_status upload(lv_ctx *ctx, const float *data, int ndim, const int64_t *shape,
                        lv_tensor *dst) {
    LV_TRY(lv_tensor_create(ctx, LV_F32, ndim, shape, dst));
    return lv_tensor_write(ctx, dst, data, lv_tensor_nbytes(dst));
}

/* A tensor of `numel` values whose file shape is `shape`, uploaded as 1-D or 2-D. */
static lv_status load_plain(const vae_loader *L, const char *name, int ndim, const int64_t *shape,
                            int dev_ndim, const int64_t *dev_shape, lv_tensor *dst) {
    float *f;
    LV_TRY(fetch(L, name, ndim, shape, &f));
    lv_status s = upload(L->ctx, f, dev_ndim, dev_shape, dst);
    free(f);
    return s;
}

/* A norm's gamma: [C, 1, 1, 1] (5-D inputs) or [C, 1, 1] (the attention's 4-D input). */
lv_status vae_load_gamma(const vae_loader *L, const char *name, int C, int ndim, lv_tensor *dst) {
    int64_t shape[4] = {C, 1, 1, 1}, dev[1] = {C};
    return load_plain(L, name, ndim, shape, 1, dev, dst);
}

/* prefix.weight [co, ci, kt, k, k] (or [co, ci, k, k] when kt = 0: a Conv2d) packed, and
 * prefix.bias [co]. */
lv_status vae_load_conv(const vae_loader *L, const char *prefix, int co, int ci, int kt, int k,
                           vae_conv *c) {
    char name[128];
    int tk = kt ? kt : 1;
    int64_t shape5[5] = {co, ci, kt, k, k}, shape4[4] = {co, ci, k, k};
    snprintf(name, sizeof name, "%s.weight", prefix);
    float *f;
    LV_TRY(fetch(L, name, kt ? 5 : 4, kt ? shape5 : shape4, &f));
    size_t n = (size_t)co * ci * tk * k * k;
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        free(f);
        return lv_error(LV_ERR_NOMEM, "out of host memory packing '%s'", name);
    }
    lv_vae_pack_conv_weight(f, co, ci, tk, k, k, p);
    free(f);
    int64_t packed[5] = {co, tk, k, k, ci};
    lv_status s = upload(L->ctx, p, 5, packed, &c->w);
    free(p);
    LV_TRY(s);
    int64_t bshape[1] = {co};
    snprintf(name, sizeof name, "%s.bias", prefix);
    return load_plain(L, name, 1, bshape, 1, bshape, &c->b);
}

/* A 1x1 conv prefix.weight [co, ci, 1, ...] (ones: trailing 1s) as a matmul weight [co, ci]. */
lv_status vae_load_pointwise(const vae_loader *L, const char *prefix, int co, int ci, int ones,
                                lv_tensor *w, lv_tensor *b) {
    char name[128];
    int64_t shape[5] = {co, ci, 1, 1, 1}, dev[2] = {co, ci}, bshape[1] = {co};
    snprintf(name, sizeof name, "%s.weight", prefix);
    LV_TRY(load_plain(L, name, 2 + ones, shape, 2, dev, w));
    snprintf(name, sizeof name, "%s.bias", prefix);
    return load_plain(L, name, 1, bshape, 1, bshape, b);
}

lv_status vae_load_block(const vae_loader *L, const char *prefix, int ci, int co, int *slot,
                            vae_block *b) {
    char name[128];
    b->ci = ci;
    b->co = co;
    snprintf(name, sizeof name, "%s.residual.0.gamma", prefix);
    LV_TRY(vae_load_gamma(L, name, ci, 4, &b->g0));
    snprintf(name, sizeof name, "%s.residual.2", prefix);
    LV_TRY(vae_load_conv(L, name, co, ci, 3, 3, &b->a));
    snprintf(name, sizeof name, "%s.residual.3.gamma", prefix);
    LV_TRY(vae_load_gamma(L, name, co, 4, &b->g3));
    snprintf(name, sizeof name, "%s.residual.6", prefix);
    LV_TRY(vae_load_conv(L, name, co, co, 3, 3, &b->b));
    b->shortcut = ci != co;
    if (b->shortcut) {
        snprintf(name, sizeof name, "%s.shortcut", prefix);
        LV_TRY(vae_load_pointwise(L, name, co, ci, 3, &b->sc_w, &b->sc_b));
    }
    b->slot_a = (*slot)++;
    b->slot_b = (*slot)++;
    return LV_OK;
}

/* latents_mean / latents_std from the metadata (JSON lists of z numbers), else Wan2.1's
 * for z = 16 (a .pth or a diffusers file has no metadata). */
lv_status vae_load_tables(const vae_loader *L, lv_vae_decoder *dec) {
    const int z = dec->arch.z;
    const char *keys[2] = {"latents_mean", "latents_std"};
    float *dst[2] = {dec->mean, dec->std};
    for (int k = 0; k < 2; k++) {
        const char *text = lv_weights_metadata(L->w, keys[k]);
        if (!text) {
            /* other widths: identity until lv_vae_set_normalization (decoding refuses) */
            for (int i = 0; i < z; i++) dst[k][i] = k == 0 ? 0.0f : 1.0f;
            if (z == 16) memcpy(dst[k], k == 0 ? wan21_mean : wan21_std, sizeof wan21_mean);
            else dec->tables_missing = true;
            continue;
        }
        cJSON *j = cJSON_Parse(text);
        bool ok = cJSON_IsArray(j) && cJSON_GetArraySize(j) == z;
        for (int i = 0; ok && i < z; i++) {
            const cJSON *v = cJSON_GetArrayItem(j, i);
            ok = cJSON_IsNumber(v) && isfinite(v->valuedouble) && (k == 0 || v->valuedouble > 0);
            if (ok) dst[k][i] = (float)v->valuedouble;
        }
        cJSON_Delete(j);
        if (!ok)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: metadata '%s' must be a JSON list "
                            "of %d finite numbers%s", lv_weights_path(L->w), keys[k], z,
                            k ? " (all > 0)" : "");
    }
    return LV_OK;
}

/* The upsampling modules, from the tensors present: a residual block has residual.2, an
 * upsample3d a time_conv, an upsample2d only resample.1. */
static lv_status read_structure(const vae_loader *L, vae_arch *arch) {
    char file_name[160];
    const lv_weight *t = vae_find(L, "conv2.weight", file_name, sizeof file_name);
    if (!t || t->ndim != 5)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: no decoder 'conv2.weight' [z, z, 1, 1, 1] "
                        "(or diffusers 'post_quant_conv.weight'): not a Wan VAE file?",
                        lv_weights_path(L->w));
    arch->z = (int)t->shape[0];
    if (arch->z < 1 || arch->z > VAE_MAX_Z)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: %d latent channels (at most %d)",
                        lv_weights_path(L->w), arch->z, VAE_MAX_Z);
    t = vae_find(L, "decoder.conv1.weight", file_name, sizeof file_name);
    if (!t || t->ndim != 5)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor 'decoder.conv1.weight' is missing "
                        "or not 5-D", lv_weights_path(L->w));
    arch->trunk = (int)t->shape[0];
    t = vae_find(L, "decoder.head.2.weight", file_name, sizeof file_name);
    if (!t || t->ndim != 5)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor 'decoder.head.2.weight' is missing "
                        "or not 5-D", lv_weights_path(L->w));
    arch->out_ch = (int)t->shape[0];
    arch->head_ch = (int)t->shape[1];
    arch->nres = L->nres;
    int width = arch->trunk;
    for (int i = 0;; i++) {
        const lv_weight *res = probe(L, "decoder.upsamples.%d.residual.2.weight", i);
        const lv_weight *tc = probe(L, "decoder.upsamples.%d.time_conv.weight", i);
        const lv_weight *rs = probe(L, "decoder.upsamples.%d.resample.1.weight", i);
        if (!res && !rs) break;
        if (i == VAE_MAX_UPS)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: more than %d upsampling modules",
                            lv_weights_path(L->w), VAE_MAX_UPS);
        vae_arch_layer *l = &arch->ups[arch->nups++];
        const lv_weight *src = res ? res : rs;
        if (src->ndim < 2)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: upsampling module %d has a weight of "
                            "%d dims", lv_weights_path(L->w), i, src->ndim);
        l->kind = res ? VAE_RES : tc ? VAE_UP3D : VAE_UP2D;
        l->co = (int)src->shape[0];
        l->ci = (int)src->shape[1];
        if (l->ci != width)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: decoder.upsamples.%d takes %d channels "
                            "but the layer before gives %d", lv_weights_path(L->w), i, l->ci, width);
        width = l->co;
    }
    if (arch->nups == 0)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: no decoder.upsamples modules",
                        lv_weights_path(L->w));
    if (width != arch->head_ch)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: the head takes %d channels but the last "
                        "upsampling module gives %d", lv_weights_path(L->w), arch->head_ch, width);
    return LV_OK;
}

/* The loader's naming (original or diffusers) and the decoder's structure, read from the
 * tensors present: nothing uploaded. */
static lv_status loader_structure(vae_loader *L, vae_arch *arch) {
    const lv_weights *weights = L->w;
    /* diffusers files name the decoder's first conv conv_in; count up_blocks.0's resnets */
    L->diffusers = lv_weights_find(weights, "decoder.conv_in.weight") != NULL &&
                  lv_weights_find(weights, "decoder.conv1.weight") == NULL;
    if (L->diffusers) {
        int n = 0;
        char name[96];
        for (;; n++) {
            snprintf(name, sizeof name, "decoder.up_blocks.0.resnets.%d.conv1.weight", n);
            if (!lv_weights_find(weights, name)) break;
        }
        if (n == 0)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: diffusers names without "
                            "decoder.up_blocks.0.resnets", lv_weights_path(weights));
        L->nres = n - 1;
    }
    return read_structure(L, arch);
}

lv_status lv_vae_weights_memory(const lv_weights *weights, int h, int w, lv_precision precision, uint64_t *bytes) {
    if (!weights || !bytes) return lv_error(LV_ERR_INVALID, "lv_vae_weights_memory: %s is NULL", !weights ? "the weights" : "bytes");
    *bytes = 0;
    if (h < 1 || w < 1) return lv_error(LV_ERR_INVALID, "lv_vae_weights_memory: latent size %d x %d", h, w);
    vae_loader L = {.w = weights};
    vae_arch arch = {0}; /* read_structure counts nups up from here */
    LV_TRY(loader_structure(&L, &arch));
    vae_memory m;
    vae_arch_memory(&arch, h, w, 1, lv_vae_activation_dtype(precision), &m);
    *bytes = m.weights + m.history + m.work;
    return LV_OK;
}

lv_status vae_load(lv_ctx *ctx, const lv_weights *weights, lv_vae_decoder *dec) {
    vae_loader L = {.ctx = ctx, .w = weights};
    vae_arch *arch = &dec->arch;
    LV_TRY(loader_structure(&L, arch));
    LV_TRY(vae_load_tables(&L, dec));

    const int z = arch->z, C = arch->trunk;
    int slot = 0;
    LV_TRY(vae_load_pointwise(&L, "conv2", z, z, 3, &dec->conv2_w, &dec->conv2_b));
    LV_TRY(vae_load_conv(&L, "decoder.conv1", C, z, 3, 3, &dec->conv1));
    dec->slot_conv1 = slot++;
    dec->hist[dec->slot_conv1] = (vae_hist){.C = z, .scale = 1};
    LV_TRY(vae_load_block(&L, "decoder.middle.0", C, C, &slot, &dec->mid0));
    LV_TRY(vae_load_gamma(&L, "decoder.middle.1.norm.gamma", C, 3, &dec->attn_g));
    LV_TRY(vae_load_pointwise(&L, "decoder.middle.1.to_qkv", 3 * C, C, 2, &dec->qkv_w, &dec->qkv_b));
    LV_TRY(vae_load_pointwise(&L, "decoder.middle.1.proj", C, C, 2, &dec->proj_w, &dec->proj_b));
    LV_TRY(vae_load_block(&L, "decoder.middle.2", C, C, &slot, &dec->mid2));
    for (int s = 1; s <= 4; s++) dec->hist[s] = (vae_hist){.C = C, .scale = 1};

    int scale = 1;
    for (int i = 0; i < arch->nups; i++) {
        vae_up *u = &dec->ups[i];
        u->arch = arch->ups[i];
        char prefix[64], name[96];
        snprintf(prefix, sizeof prefix, "decoder.upsamples.%d", i);
        int ci = u->arch.ci, co = u->arch.co;
        switch (u->arch.kind) {
        case VAE_RES:
            LV_TRY(vae_load_block(&L, prefix, ci, co, &slot, &u->res));
            dec->hist[u->res.slot_a] = (vae_hist){.C = ci, .scale = scale};
            dec->hist[u->res.slot_b] = (vae_hist){.C = co, .scale = scale};
            break;
        case VAE_UP3D:
        case VAE_UP2D:
            if (u->arch.kind == VAE_UP3D) {
                snprintf(name, sizeof name, "%s.time_conv", prefix);
                LV_TRY(vae_load_conv(&L, name, 2 * ci, ci, 3, 1, &u->time_conv));
                u->slot_t = slot++;
                dec->hist[u->slot_t] = (vae_hist){.C = ci, .scale = scale};
            }
            snprintf(name, sizeof name, "%s.resample.1", prefix);
            LV_TRY(vae_load_conv(&L, name, co, ci, 0, 3, &u->conv));
            scale *= 2;
            break;
        }
    }
    LV_TRY(vae_load_gamma(&L, "decoder.head.0.gamma", arch->head_ch, 4, &dec->head_g));
    LV_TRY(vae_load_conv(&L, "decoder.head.2", arch->out_ch, arch->head_ch, 3, 3, &dec->head));
    dec->slot_head = slot++;
    dec->hist[dec->slot_head] = (vae_hist){.C = arch->head_ch, .scale = scale};
    dec->nslots = slot;
    return LV_OK;
}

void vae_free_conv(lv_ctx *ctx, vae_conv *c) {
    lv_tensor_free(ctx, &c->w);
    lv_tensor_free(ctx, &c->b);
}

void vae_free_block(lv_ctx *ctx, vae_block *b) {
    lv_tensor_free(ctx, &b->g0);
    lv_tensor_free(ctx, &b->g3);
    vae_free_conv(ctx, &b->a);
    vae_free_conv(ctx, &b->b);
    lv_tensor_free(ctx, &b->sc_w);
    lv_tensor_free(ctx, &b->sc_b);
}

void vae_free_tensors(lv_ctx *ctx, lv_vae_decoder *dec) {
    lv_tensor_free(ctx, &dec->conv2_w);
    lv_tensor_free(ctx, &dec->conv2_b);
    vae_free_conv(ctx, &dec->conv1);
    vae_free_block(ctx, &dec->mid0);
    vae_free_block(ctx, &dec->mid2);
    lv_tensor *attn[5] = {&dec->attn_g, &dec->qkv_w, &dec->qkv_b, &dec->proj_w, &dec->proj_b};
    for (int i = 0; i < 5; i++) lv_tensor_free(ctx, attn[i]);
    for (int i = 0; i < dec->arch.nups; i++) {
        vae_free_block(ctx, &dec->ups[i].res);
        vae_free_conv(ctx, &dec->ups[i].time_conv);
        vae_free_conv(ctx, &dec->ups[i].conv);
    }
    lv_tensor_free(ctx, &dec->head_g);
    vae_free_conv(ctx, &dec->head);
    for (int i = 0; i < VAE_MAX_SLOTS; i++) lv_tensor_free(ctx, &dec->hist[i].frames);
    for (int i = 0; i < 3; i++) lv_tensor_free(ctx, &dec->work[i]);
}
