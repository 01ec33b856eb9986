/* The Wan2.1 VAE encoder on the engine (pipelines/wan_vae/README.md, "The encoder"), run
 * causally chunk by chunk as the original's WanVAE_.encode: frame 0 alone, then 4 frames at
 * a time, every chunk giving one latent frame.
 *
 * Its causal convs, residual blocks and middle attention are the decoder's (wan_vae.c),
 * run on the encoder's lv_vae_decoder core: every causal conv keeps the last two input
 * frames it has seen (the original's feat_cache, CACHE_T = 2). What only the encoder has:
 * the Resamples' stride-2 conv (lv_op_vae_conv2d_down) and downsample3d's time_conv, a
 * 3x1x1 conv with stride 2 in time whose history is one frame: the first frame of the video
 * passes it unchanged and is remembered; a later chunk of 2m frames x_0 .. x_{2m-1} gives m
 * frames, frame k from (s_{2k}, s_{2k+1}, s_{2k+2}) of s = (remembered frame, x_0, ...), and
 * x_{2m-1} is remembered. Then conv1 (1x1x1, 2z -> 2z) and the mean's z channels, normalised
 * on the host: (mean - latents_mean) * (1 / latents_std), as WanVAE.encode computes it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "longvk/ops_vae.h"
#include "wan_vae_internal.h"

#define CHUNK 4 /* pixel frames per chunk after the first (the original's) */

/* ---- helpers ------------------------------------------------------------------------------ */

static lv_tensor buf4(const lv_vae_decoder *d, int i, int64_t T, int64_t H, int64_t W, int64_t C) {
    int64_t shape[4] = {T, H, W, C};
    return lv_tensor_view(&d->work[i], 0, 4, shape);
}

static lv_tensor frames_of(const lv_tensor *t, int64_t f0, int64_t n) {
    int64_t shape[4] = {n, t->shape[1], t->shape[2], t->shape[3]};
    return lv_tensor_view(t, f0 * t->shape[1] * t->shape[2] * t->shape[3], 4, shape);
}

static lv_tensor frame3(const lv_tensor *t, int64_t f) {
    int64_t shape[3] = {t->shape[1], t->shape[2], t->shape[3]};
    return lv_tensor_view(t, f * shape[0] * shape[1] * shape[2], 3, shape);
}

static int other(int cur, int k) { return (cur + k) % 3; }

static void tap(lv_vae_encoder *e, lv_ctx *ctx, const char *name, const lv_tensor *t) {
    if (e->tap) e->tap(e->tap_user, name, ctx, t);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- the memory plan ---------------------------------------------------------------------- */

/* The largest activation of a 4-frame chunk (floats in each of the three work buffers) and the
 * history of every slot and of the downsample3d frames, walking the layers as run_chunk does. */
static void plan(const lv_vae_encoder *e, int H, int W, uint64_t *work, uint64_t *hist) {
    const lv_vae_decoder *d = &e->core;
    int64_t T = CHUNK, P = (int64_t)H * W, d0 = d->conv1.w.shape[0], C = d->arch.trunk, z2 = 2 * d->arch.z;
    int64_t act = T * P * max64(e->in_ch, d0), h = 2 * P * e->in_ch;
    for (int i = 0; i < e->nlayers; i++) {
        const vae_enc_layer *l = &e->layers[i];
        if (l->kind == VAE_ENC_RES) {
            act = max64(act, T * P * max64(l->ci, l->co));
            h += 2 * P * (l->ci + l->co);
            continue;
        }
        P /= 4;
        act = max64(act, T * P * l->co);
        if (l->kind == VAE_ENC_DOWN3D) {
            h += P * l->co;
            T /= 2;
        }
    }
    act = max64(act, 3 * T * P * C); /* attention: q, k, v side by side */
    act = max64(act, T * P * max64(C, z2));
    h += 5 * 2 * P * C;               /* the middle's four convs and the head's */
    *work = (uint64_t)act;
    *hist = (uint64_t)h;
}

static lv_status ensure_buffers(lv_ctx *ctx, lv_vae_encoder *e, int H, int W) {
    if (e->H == H && e->W == W) return LV_OK;
    lv_vae_decoder *d = &e->core;
    const int ds = e->downscale;
    d->h = H / ds;
    d->w = W / ds;
    e->H = e->W = 0;
    for (int i = 0; i < d->nslots; i++) {
        vae_hist *hs = &d->hist[i];
        lv_tensor_free(ctx, &hs->frames);
        int64_t shape[4] = {2, (int64_t)d->h * hs->scale, (int64_t)d->w * hs->scale, hs->C};
        lv_status s = lv_tensor_create(ctx, LV_F32, 4, shape, &hs->frames);
        if (s != LV_OK) return lv_error_prefix(s, "VAE encoder at %d x %d: conv history", W, H);
    }
    int64_t h = H, w = W;
    for (int i = 0; i < e->nlayers; i++) {
        vae_enc_layer *l = &e->layers[i];
        if (l->kind == VAE_ENC_RES) continue;
        h /= 2, w /= 2;
        lv_tensor_free(ctx, &l->last);
        if (l->kind != VAE_ENC_DOWN3D) continue;
        int64_t shape[3] = {h, w, l->co};
        lv_status s = lv_tensor_create(ctx, LV_F32, 3, shape, &l->last);
        if (s != LV_OK) return lv_error_prefix(s, "VAE encoder at %d x %d: time_conv history", W, H);
    }
    uint64_t work, hist;
    plan(e, H, W, &work, &hist);
    for (int i = 0; i < 3; i++) {
        lv_tensor_free(ctx, &d->work[i]);
        int64_t n = (int64_t)work;
        lv_status s = lv_tensor_create(ctx, LV_F32, 1, &n, &d->work[i]);
        if (s != LV_OK) return lv_error_prefix(s, "VAE encoder at %d x %d: work buffers", W, H);
    }
    d->work_elems = work;
    e->H = H;
    e->W = W;
    return LV_OK;
}

/* ---- one chunk ---------------------------------------------------------------------------- */

/* downsample3d's time_conv on work[*cur] [*T, H, W, C] (already spatially downsampled). */
static lv_status time_down(lv_ctx *ctx, lv_vae_encoder *e, vae_enc_layer *l, int *cur, int64_t *T, int64_t H,
                           int64_t W, int64_t C) {
    lv_vae_decoder *d = &e->core;
    lv_tensor in = buf4(d, *cur, *T, H, W, C);
    if (l->has_last) {
        if (*T % 2)
            return lv_error(LV_ERR_INVALID, "VAE encoder: %lld frames reach a time downsampling after the first "
                            "chunk (an even count is needed)", (long long)*T);
        const int64_t T2 = *T / 2;
        const int dst = other(*cur, 1);
        lv_tensor out = buf4(d, dst, T2, H, W, C);
        for (int64_t k = 0; k < T2; k++) {
            /* frames s_{2k}, s_{2k+1}, s_{2k+2} of s = (remembered, in_0, in_1, ...) */
            lv_tensor a = k == 0 ? l->last : frame3(&in, 2 * k - 1), b = frame3(&in, 2 * k);
            lv_tensor x = frames_of(&in, 2 * k + 1, 1), o = frames_of(&out, k, 1);
            LV_TRY(lv_op_vae_conv3d(ctx, &o, &x, &a, &b, &l->time_conv.w, &l->time_conv.b, NULL));
        }
        *cur = dst;
        *T = T2;
    }
    /* the video's first frame passes; either way the chunk's last input frame is remembered */
    lv_tensor last = frame3(&in, in.shape[0] - 1);
    LV_TRY(lv_tensor_copy(ctx, &l->last, &last));
    l->has_last = true;
    return LV_OK;
}

/* n frames [n, H, W, in_ch] (host, channels-last) through the encoder; the means of the
 * latent frames they give into mu_host [*frames_out, h, w, z]. */
static lv_status run_chunk(lv_ctx *ctx, lv_vae_encoder *e, const float *x_host, int n, float *mu_host,
                           int64_t *frames_out) {
    lv_vae_decoder *d = &e->core;
    int64_t T = n, H = e->H, W = e->W, C = d->conv1.w.shape[0];
    lv_tensor x = buf4(d, 0, T, H, W, e->in_ch);
    LV_TRY(lv_tensor_write(ctx, &x, x_host, lv_tensor_nbytes(&x)));
    int cur = 1;
    lv_tensor y = buf4(d, cur, T, H, W, C);
    LV_TRY(vae_causal(ctx, d, d->slot_conv1, &d->conv1, &x, &y, NULL, false));
    tap(e, ctx, "encoder.conv1", &y);
    for (int i = 0; i < e->nlayers; i++) {
        vae_enc_layer *l = &e->layers[i];
        if (l->kind == VAE_ENC_RES) {
            LV_TRY(vae_res_block(ctx, d, &l->res, cur, T, H, W));
            C = l->co;
        } else {
            lv_tensor in = buf4(d, cur, T, H, W, C);
            cur = other(cur, 1);
            H /= 2, W /= 2;
            lv_tensor out = buf4(d, cur, T, H, W, C);
            LV_TRY(lv_op_vae_conv2d_down(ctx, &out, &in, &l->conv.w, &l->conv.b));
            if (l->kind == VAE_ENC_DOWN3D) LV_TRY(time_down(ctx, e, l, &cur, &T, H, W, C));
        }
        char name[48];
        snprintf(name, sizeof name, "encoder.downsamples.%d", i);
        lv_tensor v = buf4(d, cur, T, H, W, C);
        tap(e, ctx, name, &v);
    }
    lv_tensor v = buf4(d, cur, T, H, W, C);
    LV_TRY(vae_res_block(ctx, d, &d->mid0, cur, T, H, W));
    tap(e, ctx, "encoder.middle.0", &v);
    LV_TRY(vae_attention(ctx, d, cur, T, H, W));
    tap(e, ctx, "encoder.middle.1", &v);
    LV_TRY(vae_res_block(ctx, d, &d->mid2, cur, T, H, W));
    tap(e, ctx, "encoder.middle.2", &v);

    const int64_t z = d->arch.z, R = T * H * W;
    lv_tensor nh = buf4(d, other(cur, 1), T, H, W, C), hz = buf4(d, other(cur, 2), T, H, W, 2 * z);
    LV_TRY(lv_op_vae_rmsnorm(ctx, &nh, &v, &d->head_g, 1));
    LV_TRY(vae_causal(ctx, d, d->slot_head, &d->head, &nh, &hz, NULL, false));
    tap(e, ctx, "encoder.head", &hz);
    /* conv1's first z output channels: the mean (the log-variance is not computed) */
    int64_t ms[2] = {R, z}, hs[2] = {R, 2 * z}, bn = z;
    lv_tensor mu = lv_tensor_view(&d->work[cur], 0, 2, ms), h2 = lv_tensor_view(&hz, 0, 2, hs);
    lv_tensor w = lv_tensor_rows(&e->mu_w, 0, z), b = lv_tensor_view(&e->mu_b, 0, 1, &bn);
    LV_TRY(lv_op_matmul(ctx, &mu, &h2, &w, &b));
    LV_TRY(lv_tensor_read(ctx, &mu, mu_host, lv_tensor_nbytes(&mu)));
    *frames_out = T;
    return LV_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

lv_status lv_vae_encoder_create(lv_ctx *ctx, const lv_weights *weights, lv_vae_encoder **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_vae_encoder_create: out is NULL");
    *out = NULL;
    if (!ctx || !weights) return lv_error(LV_ERR_INVALID, "lv_vae_encoder_create: ctx and weights are required");
    lv_vae_encoder *e = calloc(1, sizeof *e);
    if (!e) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status s = vae_encoder_load(ctx, weights, e);
    if (s != LV_OK) {
        vae_encoder_free_tensors(ctx, e);
        free(e);
        return s;
    }
    lv_vae_halves halves;
    lv_vae_weights_halves(weights, &halves);
    e->params = halves.encoder_params;
    *out = e;
    return LV_OK;
}

void lv_vae_encoder_destroy(lv_ctx *ctx, lv_vae_encoder *enc) {
    if (!enc) return;
    vae_encoder_free_tensors(ctx, enc);
    free(enc);
}

int lv_vae_encoder_z_dim(const lv_vae_encoder *enc) { return enc->core.arch.z; }
int lv_vae_encoder_downscale(const lv_vae_encoder *enc) { return enc->downscale; }
uint64_t lv_vae_encoder_params(const lv_vae_encoder *enc) { return enc->params; }

lv_status lv_vae_encoder_set_normalization(lv_vae_encoder *enc, const float *mean, const float *std) {
    if (!enc || !mean || !std) return lv_error(LV_ERR_INVALID, "lv_vae_encoder_set_normalization: NULL argument");
    return lv_vae_set_normalization(&enc->core, mean, std);
}

void lv_vae_encoder_set_tap(lv_vae_encoder *enc, lv_vae_tap fn, void *user) {
    enc->tap = fn;
    enc->tap_user = user;
}

int lv_vae_encoded_frames(int T) { return T < 1 ? 0 : 1 + (T - 1) / CHUNK; }

uint64_t lv_vae_encoder_memory(const lv_vae_encoder *enc, int H, int W) {
    uint64_t work, hist;
    plan(enc, H, W, &work, &hist);
    return 4 * (enc->params + hist + 3 * work);
}

lv_status lv_vae_encode_frames(lv_ctx *ctx, lv_vae_encoder *enc, const float *rgb, int T, int H, int W,
                               float *latents_out) {
    if (!ctx || !enc || !rgb || !latents_out)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_frames: ctx, encoder, frames and latents_out are required");
    const int ds = enc->downscale;
    if (T < 1 || H < ds || W < ds || H % ds || W % ds || H > 16384 || W > 16384)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_frames: %d frames of %d x %d pixels (at least 1 frame; width "
                        "and height multiples of %d, at most 16384)", T, W, H, ds);
    if (enc->core.tables_missing)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_frames: the weights have %d latent channels and no "
                        "latents_mean / latents_std metadata (Wan2.1's tables have 16): set them with "
                        "lv_vae_encoder_set_normalization", enc->core.arch.z);
    LV_TRY(ensure_buffers(ctx, enc, H, W));
    lv_vae_decoder *d = &enc->core;
    for (int i = 0; i < d->nslots; i++) d->hist[i].valid = d->hist[i].newest = 0;
    for (int i = 0; i < enc->nlayers; i++) enc->layers[i].has_last = false;

    const int z = d->arch.z, C = enc->in_ch, F = lv_vae_encoded_frames(T);
    const int64_t P = (int64_t)H * W, p = (int64_t)d->h * d->w;
    float *x = malloc((size_t)CHUNK * P * C * sizeof *x), *mu = malloc((size_t)p * z * sizeof *mu);
    lv_status s = x && mu ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for a chunk of %d x %d frames", W, H);
    float inv[VAE_MAX_Z];
    for (int c = 0; c < z; c++) inv[c] = 1.0f / d->std[c]; /* as WanVAE's scale[1] = 1 / std */
    for (int f = 0; s == LV_OK && f < F; f++) {
        const int f0 = f == 0 ? 0 : 1 + CHUNK * (f - 1), n = f == 0 ? 1 : CHUNK;
        /* [3, T, H, W] -> [n, H, W, 3] */
        for (int c = 0; c < C; c++)
            for (int t = 0; t < n; t++) {
                const float *src = rgb + ((size_t)c * T + f0 + t) * P;
                for (int64_t q = 0; q < P; q++) x[((size_t)t * P + q) * C + c] = src[q];
            }
        int64_t got = 0;
        s = run_chunk(ctx, enc, x, n, mu, &got);
        if (s == LV_OK && got != 1)
            s = lv_error(LV_ERR_INVALID, "VAE encoder: a chunk of %d frames gave %lld latent frames, not 1 (the "
                         "weights' time downsampling is not the Wan2.1 VAE's 4x)", n, (long long)got);
        for (int c = 0; s == LV_OK && c < z; c++)
            for (int64_t q = 0; q < p; q++)
                latents_out[((size_t)c * F + f) * p + q] = (mu[q * z + c] - d->mean[c]) * inv[c];
    }
    free(x);
    free(mu);
    return s;
}
