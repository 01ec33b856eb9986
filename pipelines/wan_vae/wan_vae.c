/* The Wan2.1 VAE decoder on the engine (pipelines/wan_vae/README.md), run causally
 * step by step: de-normalisation and the channels-last layout on the host, then conv2,
 * Decoder3d and the head on the device.
 *
 * Every causal conv keeps the last two input frames it has seen (vae_hist); a step of
 * latent frames reads them as the frames before its own, which is the original's
 * feat_cache with CACHE_T = 2 (section 7 of the spec). The first-frame rule: the very first
 * frame of the video skips both time_convs (it is not doubled and never enters their
 * history); every later frame goes through them. Because only that one frame is special,
 * steps of any size give the same video.
 *
 * Memory: three work buffers, each large enough for the largest activation of a step
 * (the plan in wan_vae_arch.c), rotate through the layers; residual blocks need exactly
 * three (input/output, norm, conv), attention puts q, k, v side by side in one.
 *
 * Over the bands of sequence parallelism (lv_vae_set_sequence_parallel) every activation
 * is this process's bands stacked with one halo row per side (longvk/sp_comm.h): each 3x3
 * conv first refreshes its input's halo rows, the causal history keeps them (so cached
 * frames have theirs), the resample's conv computes only the band's rows at twice the size
 * plus one halo row per side, and the middle attention takes its keys and values from the
 * normalised rows of every band, gathered. Everything else is per pixel, so the halo rows
 * just ride along. Each band's rows come out as an unsplit decode's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "longvk/ops_vae.h"
#include "longvk/sp_comm.h"
#include "wan_vae_internal.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static lv_tensor buf4(const lv_vae_decoder *d, int i, int64_t T, int64_t H, int64_t W, int64_t C) {
    int64_t shape[4] = {T, H, W, C};
    return lv_tensor_view(&d->work[i], 0, 4, shape);
}

static lv_tensor rows2(const lv_tensor *t, int64_t elem0, int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols};
    return lv_tensor_view(t, elem0, 2, shape);
}

static lv_tensor frames_of(const lv_tensor *t, int64_t f0, int64_t n) {
    int64_t shape[4] = {n, t->shape[1], t->shape[2], t->shape[3]};
    return lv_tensor_view(t, f0 * t->shape[1] * t->shape[2] * t->shape[3], 4, shape);
}

static lv_tensor hist_frame(const vae_hist *h, int i) {
    int64_t shape[3] = {h->frames.shape[1], h->frames.shape[2], h->frames.shape[3]};
    return lv_tensor_view(&h->frames, i * shape[0] * shape[1] * shape[2], 3, shape);
}

lv_dtype vae_act_dtype(const lv_vae_decoder *d) { return d->comm ? LV_F32 : d->act; }

lv_dtype lv_vae_activation_dtype(lv_precision precision) { return precision == LV_PRECISION_F16 ? LV_F16 : LV_F32; }

/* Host floats into t (f32, or f16 rounded on the host). */
static lv_status write_floats(lv_ctx *ctx, const lv_tensor *t, const float *host) {
    if (t->dtype == LV_F32) return lv_tensor_write(ctx, t, host, lv_tensor_nbytes(t));
    const int64_t n = lv_tensor_numel(t);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!h) return lv_error(LV_ERR_NOMEM, "VAE decoder: out of host memory for %lld values", (long long)n);
    for (int64_t i = 0; i < n; i++) h[i] = lv_float_to_half(host[i]);
    lv_status s = lv_tensor_write(ctx, t, h, lv_tensor_nbytes(t));
    free(h);
    return s;
}

/* t (f32 or f16) into host floats. */
static lv_status read_floats(lv_ctx *ctx, const lv_tensor *t, float *host) {
    if (t->dtype == LV_F32) return lv_tensor_read(ctx, t, host, lv_tensor_nbytes(t));
    const int64_t n = lv_tensor_numel(t);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!h) return lv_error(LV_ERR_NOMEM, "VAE decoder: out of host memory for %lld values", (long long)n);
    lv_status s = lv_tensor_read(ctx, t, h, lv_tensor_nbytes(t));
    for (int64_t i = 0; s == LV_OK && i < n; i++) host[i] = lv_half_to_float(h[i]);
    free(h);
    return s;
}

static void tap(lv_vae_decoder *d, lv_ctx *ctx, const char *name, const lv_tensor *t) {
    if (d->tap && !d->comm) d->tap(d->tap_user, name, ctx, t); /* whole frames only */
}

/* Rows of an activation at `scale` times the latent size: this process's bands stacked
 * with their halo rows, or (no bands) the frame. Checked when the buffers were made. */
static int64_t rows_at(const lv_vae_decoder *d, int scale) {
    int64_t rows = (int64_t)d->h * scale;
    if (d->comm) lv_sp_stacked_height(d->comm, d->h, scale, &rows);
    return rows;
}

/* The halo rows of t [T, rows_at(scale), W, C] from the neighbouring bands. */
static lv_status refresh_halo(lv_ctx *ctx, lv_vae_decoder *d, const lv_tensor *t, int scale) {
    return d->comm ? lv_sp_comm_halo_stacked(d->comm, ctx, t, d->h, scale) : LV_OK;
}

/* A causal conv (or the time_conv, whose output has twice the frames) over x with the
 * slot's history, then the history becomes the last two frames of cat(history, x). */
lv_status vae_causal(lv_ctx *ctx, lv_vae_decoder *d, int slot, const vae_conv *c,
                     const lv_tensor *x, const lv_tensor *out, const lv_tensor *res,
                     bool time_conv) {
    vae_hist *h = &d->hist[slot];
    lv_tensor f0 = hist_frame(h, 0), f1 = hist_frame(h, 1);
    const lv_tensor *newest = h->newest ? &f1 : &f0, *older = h->newest ? &f0 : &f1;
    const lv_tensor *hold = h->valid == 2 ? older : NULL, *hnew = h->valid >= 1 ? newest : NULL;
    if (!time_conv && c->w.shape[2] == 3) LV_TRY(refresh_halo(ctx, d, x, h->scale));
    if (time_conv) LV_TRY(lv_op_vae_time_conv(ctx, out, x, hold, hnew, &c->w, &c->b));
    else LV_TRY(lv_op_vae_conv3d(ctx, out, x, hold, hnew, &c->w, &c->b, res));
    int64_t T = x->shape[0];
    if (T >= 2) {
        lv_tensor last2 = frames_of(x, T - 2, 2);
        LV_TRY(lv_tensor_copy(ctx, &h->frames, &last2));
        h->newest = 1;
        h->valid = 2;
    } else if (T == 1) {
        int dst = h->valid == 0 ? 0 : 1 - h->newest;
        lv_tensor fdst = hist_frame(h, dst), x0 = frames_of(x, 0, 1);
        LV_TRY(lv_tensor_copy(ctx, &fdst, &x0));
        h->newest = dst;
        h->valid = h->valid < 2 ? h->valid + 1 : 2;
    }
    return LV_OK;
}

/* Buffer indices other than `cur`. */
static int other(int cur, int k) { return (cur + k) % 3; }

/* ResidualBlock on work[*cur] [T, H, W, ci]; the output stays in work[*cur]. */
lv_status vae_res_block(lv_ctx *ctx, lv_vae_decoder *d, const vae_block *b, int cur,
                        int64_t T, int64_t H, int64_t W) {
    int A = cur, B = other(cur, 1), C = other(cur, 2);
    lv_tensor x = buf4(d, A, T, H, W, b->ci), n1 = buf4(d, B, T, H, W, b->ci);
    LV_TRY(lv_op_vae_rmsnorm(ctx, &n1, &x, &b->g0, 1));
    lv_tensor y = buf4(d, C, T, H, W, b->co);
    LV_TRY(vae_causal(ctx, d, b->slot_a, &b->a, &n1, &y, NULL, false));
    lv_tensor n2 = buf4(d, B, T, H, W, b->co);
    LV_TRY(lv_op_vae_rmsnorm(ctx, &n2, &y, &b->g3, 1));
    if (b->shortcut) {
        /* h = shortcut(x) into C (y is consumed), out = conv(n2) + h into A (x is consumed) */
        lv_tensor h = buf4(d, C, T, H, W, b->co);
        lv_tensor h2 = rows2(&d->work[C], 0, T * H * W, b->co), x2 = rows2(&d->work[A], 0, T * H * W, b->ci);
        LV_TRY(lv_op_matmul(ctx, &h2, &x2, &b->sc_w, &b->sc_b));
        lv_tensor out = buf4(d, A, T, H, W, b->co);
        return vae_causal(ctx, d, b->slot_b, &b->b, &n2, &out, &h, false);
    }
    return vae_causal(ctx, d, b->slot_b, &b->b, &n2, &x, &x, false); /* + x, in place */
}

/* The middle's AttentionBlock on work[cur] [T, H, W, C]: per frame, single-head attention
 * over all h * w pixels, plus the input. Over bands, H is the stacked rows: the queries are
 * the band's (halo rows included, not used), the keys and values every band's, from the
 * normalised rows gathered from every band into work[B] after the band's own. */
lv_status vae_attention(lv_ctx *ctx, lv_vae_decoder *d, int cur, int64_t T, int64_t H,
                        int64_t W) {
    const int64_t C = d->arch.trunk, N = H * W, R = T * N;
    const int64_t Nk = (int64_t)d->h * W, Rk = T * Nk; /* keys: every pixel of the frame */
    int A = cur, B = other(cur, 1), Cb = other(cur, 2);
    lv_tensor x = rows2(&d->work[A], 0, R, C), f = rows2(&d->work[B], 0, R, C);
    LV_TRY(lv_op_vae_rmsnorm(ctx, &f, &x, &d->attn_g, 0));
    lv_tensor fk = f;
    if (d->comm) {
        float *all = malloc((size_t)Rk * C * sizeof *all);
        if (!all) return lv_error(LV_ERR_NOMEM, "VAE attention: out of host memory for %lld rows", (long long)Rk);
        lv_tensor f4 = buf4(d, B, T, H, W, C);
        fk = rows2(&d->work[B], R * C, Rk, C);
        lv_status s = lv_sp_comm_gather_stacked(d->comm, ctx, &f4, d->h, 1, all, false);
        if (s == LV_OK) s = lv_tensor_write(ctx, &fk, all, (uint64_t)Rk * C * sizeof *all);
        free(all);
        LV_TRY(s);
    }
    lv_tensor qkv[3];
    for (int j = 0; j < 3; j++) {
        qkv[j] = j == 0 ? rows2(&d->work[Cb], 0, R, C) : rows2(&d->work[Cb], R * C + (j - 1) * Rk * C, Rk, C);
        lv_tensor w = lv_tensor_rows(&d->qkv_w, j * C, C);
        int64_t bn = C;
        lv_tensor b = lv_tensor_view(&d->qkv_b, j * C, 1, &bn);
        LV_TRY(lv_op_matmul(ctx, &qkv[j], j == 0 ? &f : &fk, &w, &b));
    }
    lv_tensor o = rows2(&d->work[B], 0, R, C); /* f and fk are consumed */
    float scale = (float)(1.0 / sqrt((double)C));
    for (int64_t t = 0; t < T; t++) {
        lv_tensor ot = lv_tensor_rows(&o, t * N, N);
        lv_tensor qt = lv_tensor_rows(&qkv[0], t * N, N), kt = lv_tensor_rows(&qkv[1], t * Nk, Nk);
        lv_tensor vt = lv_tensor_rows(&qkv[2], t * Nk, Nk);
        LV_TRY(lv_op_flash_attention(ctx, &ot, &qt, &kt, &vt, scale));
    }
    lv_tensor p = rows2(&d->work[Cb], 0, R, C); /* q is consumed */
    LV_TRY(lv_op_matmul(ctx, &p, &o, &d->proj_w, &d->proj_b));
    return lv_op_add(ctx, &x, &x, &p);
}

/* Resample's conv on the 2x frame, in [T, H, W, ci] at `scale`, out [T, H', 2W, co] at
 * 2 scale: over bands, each band's rows at twice the size and one halo row per side (the
 * rows between, which the stacked input would also give, are not computed). */
static lv_status resample_conv(lv_ctx *ctx, lv_vae_decoder *d, const vae_conv *c, const lv_tensor *in,
                               const lv_tensor *out, int scale) {
    if (!d->comm) return lv_op_vae_conv2d(ctx, out, in, &c->w, &c->b, 1);
    LV_TRY(refresh_halo(ctx, d, in, scale));
    const int count = lv_sp_comm_count(d->comm);
    const int64_t T = in->shape[0], oh = out->shape[1], ow = out->shape[2], co = out->shape[3];
    for (int i = 0; i < count; i++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(d->comm, d->h, scale, i);
        lv_sp_stacked_band g2 = lv_sp_stacked_band_at(d->comm, d->h, 2 * scale, i);
        const int64_t row0 = 2 * (g.offset + g.top) - g2.top, rows = g2.top + g2.rows + g2.bottom;
        if (count == 1) /* the band is the whole stacked tensor */
            LV_TRY(lv_op_vae_conv2d_rows(ctx, out, in, &c->w, &c->b, 1, row0));
        for (int64_t t = 0; count > 1 && t < T; t++) {
            int64_t shape[4] = {1, rows, ow, co};
            lv_tensor ov = lv_tensor_view(out, (t * oh + g2.offset) * ow * co, 4, shape), iv = frames_of(in, t, 1);
            LV_TRY(lv_op_vae_conv2d_rows(ctx, &ov, &iv, &c->w, &c->b, 1, row0));
        }
    }
    return LV_OK;
}

/* Latent frames [T, h, w, z] from the host into x [T, H, w, z]: over bands, each band's
 * rows with the rows next to it as its halo rows (every process has the whole frame). */
static lv_status write_latents(lv_ctx *ctx, const lv_vae_decoder *d, const lv_tensor *x, const float *host) {
    if (!d->comm) return write_floats(ctx, x, host);
    const int64_t T = x->shape[0], H = x->shape[1], row = x->shape[2] * x->shape[3];
    float *stacked = malloc((size_t)lv_tensor_numel(x) * sizeof *stacked);
    if (!stacked) return lv_error(LV_ERR_NOMEM, "VAE decoder: out of host memory for %lld latent rows", (long long)(T * H));
    for (int i = 0; i < lv_sp_comm_count(d->comm); i++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(d->comm, d->h, 1, i);
        const int64_t n = g.top + g.rows + g.bottom;
        for (int64_t t = 0; t < T; t++)
            memcpy(stacked + (t * H + g.offset) * row, host + (t * d->h + g.row0 - g.top) * row,
                   (size_t)(n * row) * sizeof *stacked);
    }
    lv_status s = lv_tensor_write(ctx, x, stacked, lv_tensor_nbytes(x));
    free(stacked);
    return s;
}

/* One step: n latent frames already de-normalised, channels-last, in host memory. */
typedef struct step_out {
    lv_vae_frame_fn fn;
    void *user;
    float *frame; /* [3, OH, OW] scratch */
    float *raw;   /* [T, OH, OW, 3] scratch */
} step_out;

static lv_status run_step(lv_ctx *ctx, lv_vae_decoder *d, const float *x_host, int n,
                          step_out *so) {
    const vae_arch *a = &d->arch;
    bool first = !d->started;
    int scale = 1; /* of the current activations: 1, 2, 4, 8 times the latent size */
    int64_t T = n, H = rows_at(d, 1), W = d->w;
    int cur = 0;
    lv_tensor x = buf4(d, cur, T, H, W, a->z);
    LV_TRY(write_latents(ctx, d, &x, x_host));
    tap(d, ctx, "latents_denorm", &x);
    lv_tensor y = buf4(d, other(cur, 1), T, H, W, a->z);
    lv_tensor x2 = rows2(&d->work[cur], 0, T * H * W, a->z), y2 = rows2(&y, 0, T * H * W, a->z);
    LV_TRY(lv_op_matmul(ctx, &y2, &x2, &d->conv2_w, &d->conv2_b));
    tap(d, ctx, "conv2", &y);
    cur = other(cur, 1);

    lv_tensor c1 = buf4(d, other(cur, 1), T, H, W, a->trunk);
    LV_TRY(vae_causal(ctx, d, d->slot_conv1, &d->conv1, &y, &c1, NULL, false));
    cur = other(cur, 1);
    lv_tensor view = buf4(d, cur, T, H, W, a->trunk);
    tap(d, ctx, "decoder.conv1", &view);
    LV_TRY(vae_res_block(ctx, d, &d->mid0, cur, T, H, W));
    tap(d, ctx, "decoder.middle.0", &view);
    LV_TRY(vae_attention(ctx, d, cur, T, H, W));
    tap(d, ctx, "decoder.middle.1", &view);
    LV_TRY(vae_res_block(ctx, d, &d->mid2, cur, T, H, W));
    tap(d, ctx, "decoder.middle.2", &view);

    int64_t C = a->trunk;
    for (int i = 0; i < a->nups; i++) {
        const vae_up *u = &d->ups[i];
        if (u->arch.kind == VAE_RES) {
            LV_TRY(vae_res_block(ctx, d, &u->res, cur, T, H, W));
            C = u->arch.co;
        } else {
            int src = cur;
            int64_t ci = u->arch.ci;
            if (u->arch.kind == VAE_UP3D && !(first && T == 1)) {
                /* frame 0 of the video passes (alone, it stays where it is); every later
                 * frame j becomes 2j, 2j + 1 */
                int64_t lead = first ? 1 : 0, rest = T - lead, T2 = lead + 2 * rest;
                lv_tensor in = buf4(d, cur, T, H, W, ci);
                lv_tensor out = buf4(d, other(cur, 1), T2, H, W, ci);
                if (lead) {
                    lv_tensor o0 = frames_of(&out, 0, 1), i0 = frames_of(&in, 0, 1);
                    LV_TRY(lv_tensor_copy(ctx, &o0, &i0));
                }
                if (rest > 0) {
                    lv_tensor ir = frames_of(&in, lead, rest), orr = frames_of(&out, lead, 2 * rest);
                    LV_TRY(vae_causal(ctx, d, u->slot_t, &u->time_conv, &ir, &orr, NULL, true));
                }
                src = other(cur, 1);
                T = T2;
            }
            lv_tensor in = buf4(d, src, T, H, W, ci);
            int dst = other(src, 1);
            lv_tensor out = buf4(d, dst, T, rows_at(d, 2 * scale), 2 * W, u->arch.co);
            LV_TRY(resample_conv(ctx, d, &u->conv, &in, &out, scale));
            cur = dst;
            scale *= 2;
            H = rows_at(d, scale), W *= 2;
            C = u->arch.co;
        }
        char name[48];
        snprintf(name, sizeof name, "decoder.upsamples.%d", i);
        lv_tensor v = buf4(d, cur, T, H, W, C);
        tap(d, ctx, name, &v);
    }

    lv_tensor xh = buf4(d, cur, T, H, W, a->head_ch), nh = buf4(d, other(cur, 1), T, H, W, a->head_ch);
    LV_TRY(lv_op_vae_rmsnorm(ctx, &nh, &xh, &d->head_g, 1));
    lv_tensor rgb = buf4(d, other(cur, 2), T, H, W, a->out_ch);
    LV_TRY(vae_causal(ctx, d, d->slot_head, &d->head, &nh, &rgb, NULL, false));
    tap(d, ctx, "decoder.head", &rgb);
    d->started = true;

    /* [T, H, W, 3] -> one [3, H, W] frame at a time; over bands, the frame's rows from
     * every band to the process holding band 0, which alone passes frames on */
    const int64_t OH = (int64_t)d->h * scale, P = OH * W, oc = a->out_ch;
    if (d->comm) LV_TRY(lv_sp_comm_gather_stacked(d->comm, ctx, &rgb, d->h, scale, so->raw, true));
    else LV_TRY(read_floats(ctx, &rgb, so->raw));
    if (d->comm && lv_sp_comm_first(d->comm) != 0) {
        d->frames_done += T;
        return LV_OK;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *src = so->raw + t * P * oc;
        for (int64_t c = 0; c < oc; c++)
            for (int64_t p = 0; p < P; p++) {
                float v = src[p * oc + c];
                if (d->clamp) v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
                so->frame[c * P + p] = v;
            }
        LV_TRY(so->fn(so->user, d->frames_done, so->frame, (int)OH, (int)W));
        d->frames_done++;
    }
    return LV_OK;
}

/* ---- allocation --------------------------------------------------------------------------- */

/* Device memory of this decoder at latent h x w: the plan of wan_vae_arch.c over the
 * stacked rows of its bands (at scale s a band has s * rows + its halo rows, at most s
 * times its rows and halo rows at the latent size), and over bands what the attention
 * needs: the band's rows and the whole frame's in work[B] (its input, the gathered rows)
 * and in work[C] (q, then k and v). */
static lv_status band_plan(const lv_vae_decoder *d, int h, int w, vae_memory *m) {
    int64_t rows = h;
    if (d->comm) {
        lv_status s = lv_sp_stacked_height(d->comm, h, 1, &rows);
        if (s != LV_OK) return lv_error_prefix(s, "VAE decoder at latent %d x %d", h, w);
    }
    vae_arch_memory(&d->arch, (int)rows, w, d->step_frames, vae_act_dtype(d), m);
    if (d->comm) {
        const uint64_t attn = (uint64_t)d->step_frames * ((uint64_t)rows + 2u * (uint64_t)h) * (uint64_t)w *
                              (uint64_t)d->arch.trunk;
        if (attn > m->work_elems) {
            m->work_elems = attn;
            m->work = 3 * lv_dtype_size(vae_act_dtype(d)) * attn;
        }
    }
    return LV_OK;
}

lv_status vae_ensure_buffers(lv_ctx *ctx, lv_vae_decoder *d, int h, int w) {
    vae_memory m;
    LV_TRY(band_plan(d, h, w, &m));
    const lv_dtype act = vae_act_dtype(d);
    if (d->h != h || d->w != w || d->buf_dtype != act) {
        d->h = h;
        d->w = w;
        d->buf_dtype = act;
        for (int i = 0; i < d->nslots; i++) {
            vae_hist *hs = &d->hist[i];
            lv_tensor_free(ctx, &hs->frames);
            int64_t shape[4] = {2, rows_at(d, hs->scale), (int64_t)w * hs->scale, hs->C};
            lv_status s = lv_tensor_create(ctx, act, 4, shape, &hs->frames);
            if (s != LV_OK) {
                d->h = d->w = 0;
                return lv_error_prefix(s, "VAE decoder at latent %d x %d: conv history", h, w);
            }
        }
        for (int i = 0; i < 3; i++) lv_tensor_free(ctx, &d->work[i]);
        d->work_elems = 0;
    }
    if (m.work_elems > d->work_elems) {
        for (int i = 0; i < 3; i++) {
            lv_tensor_free(ctx, &d->work[i]);
            int64_t n = (int64_t)m.work_elems;
            lv_status s = lv_tensor_create(ctx, act, 1, &n, &d->work[i]);
            if (s != LV_OK) {
                d->work_elems = 0;
                return lv_error_prefix(s, "VAE decoder at latent %d x %d: work buffers", h, w);
            }
        }
        d->work_elems = m.work_elems;
    }
    return LV_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

lv_status lv_vae_decoder_create(lv_ctx *ctx, const lv_weights *weights, lv_vae_decoder **out) {
    *out = NULL;
    if (!ctx || !weights) return lv_error(LV_ERR_INVALID, "lv_vae_decoder_create: ctx and weights are required");
    lv_vae_decoder *d = calloc(1, sizeof *d);
    if (!d) return lv_error(LV_ERR_NOMEM, "out of host memory");
    d->step_frames = 1;
    d->act = lv_vae_activation_dtype(lv_ctx_precision(ctx));
    lv_status s = vae_load(ctx, weights, d);
    if (s != LV_OK) {
        vae_free_tensors(ctx, d);
        free(d);
        return s;
    }
    *out = d;
    return LV_OK;
}

void lv_vae_decoder_destroy(lv_ctx *ctx, lv_vae_decoder *dec) {
    if (!dec) return;
    lv_sp_comm_destroy(dec->own_comm);
    vae_free_tensors(ctx, dec);
    free(dec);
}

int lv_vae_z_dim(const lv_vae_decoder *dec) { return dec->arch.z; }

lv_status lv_vae_set_normalization(lv_vae_decoder *dec, const float *mean, const float *std) {
    for (int i = 0; i < dec->arch.z; i++)
        if (!isfinite(mean[i]) || !isfinite(std[i]) || !(std[i] > 0))
            return lv_error(LV_ERR_INVALID, "lv_vae_set_normalization: entry %d (mean %g, std %g) "
                            "must be finite with std > 0", i, (double)mean[i], (double)std[i]);
    memcpy(dec->mean, mean, (size_t)dec->arch.z * sizeof *mean);
    memcpy(dec->std, std, (size_t)dec->arch.z * sizeof *std);
    dec->tables_missing = false;
    return LV_OK;
}
int lv_vae_has_normalization(const lv_vae_decoder *dec) { return dec && !dec->tables_missing; }
void lv_vae_set_clamp(lv_vae_decoder *dec, int clamp) { dec->clamp = clamp != 0; }

lv_status lv_vae_set_step_frames(lv_vae_decoder *dec, int step_frames) {
    if (step_frames < 1 || step_frames > 1024)
        return lv_error(LV_ERR_INVALID, "VAE decoder: step_frames %d is outside 1..1024", step_frames);
    dec->step_frames = step_frames;
    return LV_OK;
}

lv_status lv_vae_set_sequence_parallel(lv_vae_decoder *dec, int bands, struct lv_sp_comm *comm) {
    if (!dec) return lv_error(LV_ERR_INVALID, "lv_vae_set_sequence_parallel: decoder is NULL");
    if (bands < 0 || bands > 4096 || (bands > 0 && comm))
        return lv_error(LV_ERR_INVALID, "lv_vae_set_sequence_parallel: %d bands%s (0 to 4096 emulated bands, or a "
                        "communicator)", bands, comm ? " and a communicator" : "");
    if (dec->started || dec->frames_done)
        return lv_error(LV_ERR_INVALID, "lv_vae_set_sequence_parallel: a video is being decoded (lv_vae_reset first)");
    lv_sp_comm *own = NULL;
    if (bands > 0) LV_TRY(lv_sp_comm_emulated_create(bands, &own));
    lv_sp_comm_destroy(dec->own_comm);
    dec->own_comm = own;
    dec->comm = own ? own : comm;
    dec->comm_checked = own != NULL; /* one process: nothing to compare */
    dec->h = dec->w = 0; /* the buffers' rows change: made again by the next decode */
    return LV_OK;
}

void lv_vae_reset(lv_vae_decoder *dec) {
    for (int i = 0; i < dec->nslots; i++) dec->hist[i].valid = dec->hist[i].newest = 0;
    dec->started = false;
    dec->frames_done = 0;
}

int64_t lv_vae_frames_for(const lv_vae_decoder *dec, int n) {
    if (n <= 0) return 0;
    return dec->started ? 4 * (int64_t)n : 1 + 4 * ((int64_t)n - 1);
}

int64_t lv_vae_frames_decoded(const lv_vae_decoder *dec) { return dec->frames_done; }

int lv_vae_history_frames(const lv_vae_decoder *dec) { return vae_arch_history_frames(&dec->arch); }
void lv_vae_set_tap(lv_vae_decoder *dec, lv_vae_tap fn, void *user) {
    dec->tap = fn;
    dec->tap_user = user;
}

lv_status lv_vae_decode_frames_cb(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents,
                                  int n, int h, int w, lv_vae_frame_fn fn, void *user) {
    if (!ctx || !dec || !fn || (n > 0 && !latents))
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_frames: ctx, decoder, latents and a frame "
                        "callback are required");
    if (n < 0 || h < 1 || w < 1 || h > 4096 || w > 4096)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_frames: %d latent frames of %d x %d", n, h, w);
    if (n == 0) return LV_OK;
    if (dec->tables_missing)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_frames: the weights have %d latent channels "
                        "and no latents_mean / latents_std metadata (Wan2.1's tables have 16): set "
                        "them with lv_vae_set_normalization, or load weights whose safetensors "
                        "metadata holds both", dec->arch.z);
    if (dec->started && (h != dec->h || w != dec->w))
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_frames: latents are %d x %d but this video "
                        "started at %d x %d (lv_vae_reset starts a new one)", h, w, dec->h, dec->w);
    if (dec->comm && !dec->comm_checked) { /* D4: ranks on other kinds of device would not make the same bits */
        const lv_device_info *dev = lv_ctx_device(ctx);
        char kind[600]; /* the comparison takes the first 511 bytes */
        snprintf(kind, sizeof kind, "%.250s (%.250s)", dev->name, dev->driver);
        LV_TRY(lv_sp_comm_check_same(dec->comm, "the device", kind));
        dec->comm_checked = true;
    }
    LV_TRY(vae_ensure_buffers(ctx, dec, h, w));

    const vae_arch *a = &dec->arch;
    /* every upsampling module doubles the size, every upsample3d the frames */
    const int64_t P = (int64_t)h * w;
    int64_t up = 1, tmul = 1;
    for (int i = 0; i < a->nups; i++) {
        if (a->ups[i].kind != VAE_RES) up *= 2;
        if (a->ups[i].kind == VAE_UP3D) tmul *= 2;
    }
    int step = dec->step_frames < n ? dec->step_frames : n;
    int64_t out_px = P * up * up;
    float *x = malloc((size_t)step * P * a->z * sizeof *x);
    step_out so = {.fn = fn, .user = user};
    so.frame = malloc((size_t)out_px * a->out_ch * sizeof *so.frame);
    so.raw = malloc((size_t)tmul * step * out_px * a->out_ch * sizeof *so.raw);
    lv_status s = LV_OK;
    if (!x || !so.frame || !so.raw) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int f0 = 0; s == LV_OK && f0 < n; f0 += step) {
        int cnt = n - f0 < step ? n - f0 : step;
        /* [z, n, h, w] -> [cnt, h, w, z], de-normalised as the original does it:
         * z / (1 / std) + mean */
        for (int c = 0; c < a->z; c++) {
            float inv = 1.0f / dec->std[c], mean = dec->mean[c];
            for (int t = 0; t < cnt; t++) {
                const float *src = latents + ((size_t)c * n + f0 + t) * P;
                for (int64_t p = 0; p < P; p++) x[((size_t)t * P + p) * a->z + c] = src[p] / inv + mean;
            }
        }
        s = run_step(ctx, dec, x, cnt, &so);
    }
    free(x);
    free(so.frame);
    free(so.raw);
    return s;
}

typedef struct array_sink {
    float *out;
    int64_t base, T, P;
    int channels;
} array_sink;

static lv_status to_array(void *user, int64_t index, const float *rgb, int height, int width) {
    array_sink *s = user;
    int64_t t = index - s->base;
    if (t < 0 || t >= s->T || (int64_t)height * width != s->P)
        return lv_error(LV_ERR_INVALID, "VAE decoder: frame %lld does not fit the output array",
                        (long long)index);
    for (int c = 0; c < s->channels; c++)
        memcpy(s->out + ((size_t)c * s->T + t) * s->P, rgb + (size_t)c * s->P, (size_t)s->P * sizeof *rgb);
    return LV_OK;
}

lv_status lv_vae_decode_frames(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents, int n,
                               int h, int w, float *frames_out) {
    if (!dec || (n > 0 && !frames_out))
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_frames: decoder and frames_out are required");
    int64_t up = 1;
    for (int i = 0; i < dec->arch.nups; i++)
        if (dec->arch.ups[i].kind != VAE_RES) up *= 2;
    array_sink s = {.out = frames_out, .base = dec->frames_done, .T = lv_vae_frames_for(dec, n),
                    .P = (int64_t)h * w * up * up, .channels = dec->arch.out_ch};
    return lv_vae_decode_frames_cb(ctx, dec, latents, n, h, w, to_array, &s);
}

uint64_t lv_vae_memory_estimate_at(int h, int w, lv_precision precision) {
    vae_arch arch;
    vae_arch_wan21(&arch);
    vae_memory m;
    vae_arch_memory(&arch, h, w, 1, lv_vae_activation_dtype(precision), &m);
    return m.weights + m.history + m.work;
}

uint64_t lv_vae_memory_estimate(int h, int w) { return lv_vae_memory_estimate_at(h, w, LV_PRECISION_F32); }

void lv_vae_memory_estimate_parts_at(int h, int w, lv_precision precision, lv_vae_memory *out) {
    vae_arch arch;
    vae_arch_wan21(&arch);
    vae_memory m;
    vae_arch_memory(&arch, h, w, 1, lv_vae_activation_dtype(precision), &m);
    *out = (lv_vae_memory){.weights = m.weights, .history = m.history, .work = m.work};
}

void lv_vae_memory_estimate_parts(int h, int w, lv_vae_memory *out) {
    lv_vae_memory_estimate_parts_at(h, w, LV_PRECISION_F32, out);
}

void lv_vae_decoder_info(const lv_vae_decoder *dec, lv_vae_info *out) {
    int up = 1;
    for (int i = 0; i < dec->arch.nups; i++)
        if (dec->arch.ups[i].kind != VAE_RES) up *= 2;
    *out = (lv_vae_info){.z = dec->arch.z, .trunk = dec->arch.trunk, .head_ch = dec->arch.head_ch,
                         .out_ch = dec->arch.out_ch, .upscale = up};
}

double lv_vae_decoder_macs(const lv_vae_decoder *dec, int h, int w) { return vae_arch_macs(&dec->arch, h, w); }

lv_status lv_vae_expected_tensors(int dim, int z, lv_vae_tensor_spec **out, int *count) {
    if (!out || !count) return lv_error(LV_ERR_INVALID, "lv_vae_expected_tensors: %s is NULL", !out ? "out" : "count");
    *out = NULL;
    *count = 0;
    if (dim < 4 || dim % 4 || z < 1 || z > VAE_MAX_Z)
        return lv_error(LV_ERR_INVALID, "lv_vae_expected_tensors: base width %d (a positive multiple of 4), "
                        "z %d (1 to %d)", dim, z, VAE_MAX_Z);
    vae_arch arch;
    vae_arch_make(&arch, dim, z);
    int n = vae_arch_tensors(&arch, NULL, 0);
    if (n < 0) return lv_error(LV_ERR_INVALID, "lv_vae_expected_tensors: a tensor name longer than %d", LV_VAE_NAME_MAX - 1);
    lv_vae_tensor_spec *specs = calloc((size_t)n, sizeof *specs);
    if (!specs) return lv_error(LV_ERR_NOMEM, "out of host memory for %d VAE tensor descriptions", n);
    vae_arch_tensors(&arch, specs, n);
    *out = specs;
    *count = n;
    return LV_OK;
}

uint64_t lv_vae_decoder_memory(const lv_vae_decoder *dec, int h, int w) {
    vae_memory m;
    if (band_plan(dec, h, w, &m) != LV_OK) vae_arch_memory(&dec->arch, h, w, dec->step_frames, vae_act_dtype(dec), &m);
    return m.weights + m.history + m.work;
}
