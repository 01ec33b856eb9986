/* Loading the Wan VAE encoder: encoder.* and conv1.* (diffusers: encoder.conv_in,
 * encoder.down_blocks, encoder.mid_block, encoder.norm_out, encoder.conv_out, quant_conv)
 * from the same files as the decoder, the structure read from the tensors present and every
 * shape checked against it, with the decoder's readers (wan_vae_weights.c). Also what a file
 * holds of each half (lv_vae_weights_halves). */
#include <stdio.h>
#include <string.h>

#include "wan_vae_internal.h"

static const lv_weight *probe(const vae_loader *L, const char *fmt, int i) {
    char name[128], file_name[160];
    snprintf(name, sizeof name, fmt, i);
    return vae_find(L, name, file_name, sizeof file_name);
}

static lv_status no_encoder(const vae_loader *L) {
    return lv_error(LV_ERR_FORMAT, "VAE weights %s: no encoder half (no 'encoder.conv1.weight' and 'conv1.weight', "
                    "nor diffusers 'encoder.conv_in.weight' and 'quant_conv.weight'): a decoder-only file. Encoding "
                    "needs the whole VAE: Wan2.1_VAE.pth as released, or a diffusers vae/ folder's "
                    "diffusion_pytorch_model.safetensors with its encoder", lv_weights_path(L->w));
}

/* The structure: conv1 [2z, 2z, 1, 1, 1], encoder.conv1 [d0, 3, 3, 3, 3], the downsampling
 * modules (a residual block has residual.2, a downsample3d a time_conv, a downsample2d only
 * resample.1), the head [2z, C, 3, 3, 3] at the last module's width C. */
static lv_status read_structure(const vae_loader *L, lv_vae_encoder *e, int *d0) {
    char file_name[160];
    const char *path = lv_weights_path(L->w);
    const lv_weight *q = vae_find(L, "conv1.weight", file_name, sizeof file_name);
    const lv_weight *c1 = vae_find(L, "encoder.conv1.weight", file_name, sizeof file_name);
    if (!q && !c1) return no_encoder(L);
    if (!q || q->ndim != 5 || q->shape[0] != q->shape[1] || q->shape[0] % 2 || q->shape[0] < 2 ||
        q->shape[0] > 2 * VAE_MAX_Z)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: the encoder's 'conv1.weight' (diffusers 'quant_conv.weight') "
                        "is missing or not [2z, 2z, 1, 1, 1] with z at most %d", path, VAE_MAX_Z);
    e->core.arch.z = (int)q->shape[0] / 2;
    if (!c1 || c1->ndim != 5)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: tensor 'encoder.conv1.weight' is missing or not 5-D", path);
    *d0 = (int)c1->shape[0];
    e->in_ch = (int)c1->shape[1];
    int width = *d0;
    e->downscale = 1;
    for (int i = 0;; i++) {
        const lv_weight *res = probe(L, "encoder.downsamples.%d.residual.2.weight", i);
        const lv_weight *tc = probe(L, "encoder.downsamples.%d.time_conv.weight", i);
        const lv_weight *rs = probe(L, "encoder.downsamples.%d.resample.1.weight", i);
        if (!res && !rs) break;
        if (i == VAE_MAX_UPS)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: more than %d downsampling modules", path, VAE_MAX_UPS);
        vae_enc_layer *l = &e->layers[e->nlayers++];
        const lv_weight *src = res ? res : rs;
        if (src->ndim < 2)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: downsampling module %d has a weight of %d dims", path, i,
                            src->ndim);
        l->kind = res ? VAE_ENC_RES : tc ? VAE_ENC_DOWN3D : VAE_ENC_DOWN2D;
        l->co = (int)src->shape[0];
        l->ci = (int)src->shape[1];
        if (l->ci != width)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: encoder.downsamples.%d takes %d channels but the layer "
                            "before gives %d", path, i, l->ci, width);
        if (!res && l->co != l->ci)
            return lv_error(LV_ERR_FORMAT, "VAE weights %s: encoder.downsamples.%d.resample.1 maps %d channels to %d "
                            "(a Resample keeps its width)", path, i, l->ci, l->co);
        if (!res) e->downscale *= 2;
        width = l->co;
    }
    if (e->nlayers == 0 || e->downscale == 1)
        return lv_error(LV_ERR_FORMAT, "VAE weights %s: no encoder.downsamples resampling modules", path);
    e->core.arch.trunk = width;
    return LV_OK;
}

lv_status vae_encoder_load(lv_ctx *ctx, const lv_weights *weights, lv_vae_encoder *e) {
    vae_loader L = {.ctx = ctx, .w = weights};
    L.diffusers = lv_weights_find(weights, "encoder.conv_in.weight") != NULL &&
                  lv_weights_find(weights, "encoder.conv1.weight") == NULL;
    int d0 = 0;
    LV_TRY(read_structure(&L, e, &d0));
    lv_vae_decoder *core = &e->core;
    LV_TRY(vae_load_tables(&L, core));
    const int z = core->arch.z, C = core->arch.trunk;
    int slot = 0, scale = e->downscale; /* scale: the level's size in latent pixels */
    LV_TRY(vae_load_pointwise(&L, "conv1", 2 * z, 2 * z, 3, &e->mu_w, &e->mu_b));
    LV_TRY(vae_load_conv(&L, "encoder.conv1", d0, e->in_ch, 3, 3, &core->conv1));
    core->slot_conv1 = slot++;
    core->hist[core->slot_conv1] = (vae_hist){.C = e->in_ch, .scale = scale};
    for (int i = 0; i < e->nlayers; i++) {
        vae_enc_layer *l = &e->layers[i];
        char prefix[64], name[96];
        snprintf(prefix, sizeof prefix, "encoder.downsamples.%d", i);
        if (l->kind == VAE_ENC_RES) {
            LV_TRY(vae_load_block(&L, prefix, l->ci, l->co, &slot, &l->res));
            core->hist[l->res.slot_a] = (vae_hist){.C = l->ci, .scale = scale};
            core->hist[l->res.slot_b] = (vae_hist){.C = l->co, .scale = scale};
            continue;
        }
        snprintf(name, sizeof name, "%s.resample.1", prefix);
        LV_TRY(vae_load_conv(&L, name, l->co, l->ci, 0, 3, &l->conv));
        if (l->kind == VAE_ENC_DOWN3D) {
            snprintf(name, sizeof name, "%s.time_conv", prefix);
            LV_TRY(vae_load_conv(&L, name, l->co, l->co, 3, 1, &l->time_conv));
        }
        scale /= 2;
    }
    LV_TRY(vae_load_block(&L, "encoder.middle.0", C, C, &slot, &core->mid0));
    LV_TRY(vae_load_gamma(&L, "encoder.middle.1.norm.gamma", C, 3, &core->attn_g));
    LV_TRY(vae_load_pointwise(&L, "encoder.middle.1.to_qkv", 3 * C, C, 2, &core->qkv_w, &core->qkv_b));
    LV_TRY(vae_load_pointwise(&L, "encoder.middle.1.proj", C, C, 2, &core->proj_w, &core->proj_b));
    LV_TRY(vae_load_block(&L, "encoder.middle.2", C, C, &slot, &core->mid2));
    for (int s = core->mid0.slot_a; s <= core->mid2.slot_b; s++) core->hist[s] = (vae_hist){.C = C, .scale = 1};
    LV_TRY(vae_load_gamma(&L, "encoder.head.0.gamma", C, 4, &core->head_g));
    LV_TRY(vae_load_conv(&L, "encoder.head.2", 2 * z, C, 3, 3, &core->head));
    core->slot_head = slot++;
    core->hist[core->slot_head] = (vae_hist){.C = C, .scale = 1};
    core->nslots = slot;
    return LV_OK;
}

void vae_encoder_free_tensors(lv_ctx *ctx, lv_vae_encoder *e) {
    for (int i = 0; i < e->nlayers; i++) {
        vae_enc_layer *l = &e->layers[i];
        vae_free_block(ctx, &l->res);
        vae_free_conv(ctx, &l->conv);
        vae_free_conv(ctx, &l->time_conv);
        lv_tensor_free(ctx, &l->last);
    }
    lv_tensor_free(ctx, &e->mu_w);
    lv_tensor_free(ctx, &e->mu_b);
    vae_free_tensors(ctx, &e->core);
}

/* ---- what a file holds ------------------------------------------------------------------------ */

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

void lv_vae_weights_halves(const lv_weights *w, lv_vae_halves *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; w && i < lv_weights_count(w); i++) {
        const lv_weight *t = lv_weights_at(w, i);
        if (starts(t->name, "encoder.") || starts(t->name, "conv1.") || starts(t->name, "quant_conv.")) {
            out->encoder_params += lv_weight_numel(t);
            out->encoder_tensors++;
        } else if (starts(t->name, "decoder.") || starts(t->name, "conv2.") || starts(t->name, "post_quant_conv.")) {
            out->decoder_params += lv_weight_numel(t);
            out->decoder_tensors++;
        }
    }
}
