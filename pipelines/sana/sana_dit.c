/* The SANA-Video DiT forward pass on the engine (pipelines/sana/README.md).
 *
 * Activations are token-major [T, C] with tokens in frame-major, row, column order, so a
 * frame's tokens are contiguous and per-frame modulation is a [frames, C] broadcast.
 * Every product that the original code does as one wide Linear and then splits (qkv,
 * kv_linear, the Mix-FFN's inverted conv into a and g, t_block into six modulations) is
 * done here as separate products over row slices of the same weight, so that every
 * intermediate is a contiguous tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dit.h"
#include "longvk/ops.h"
#include "sana_dit_internal.h"

/* ---- scratch tensors of one pass ------------------------------------------------------ */

#define SCRATCH_MAX LV_DIT_SCRATCH_MAX

typedef lv_dit_scratch scratch;

static lv_status scratch_typed(scratch *s, lv_dtype dtype, int ndim, const int64_t *shape, lv_tensor **out) {
    if (s->n == SCRATCH_MAX) return lv_error(LV_ERR_INVALID, "dit: scratch tensor table full");
    LV_TRY(lv_tensor_create(s->ctx, dtype, ndim, shape, &s->t[s->n]));
    *out = &s->t[s->n++];
    return LV_OK;
}

static lv_status scratch_new(scratch *s, int ndim, const int64_t *shape, lv_tensor **out) {
    return scratch_typed(s, LV_F32, ndim, shape, out);
}

static lv_status scratch_2d(scratch *s, int64_t rows, int64_t cols, lv_tensor **out) {
    int64_t shape[2] = {rows, cols};
    return scratch_new(s, 2, shape, out);
}

/* Activations that only feed matrix products and the Mix-FFN's convs and gate are
 * stored in the context's precision: f32, or f16 / bf16 (engine/README.md, "Tensor cores":
 * which tensors and why). Everything else, the residual stream x included, stays f32. */
static lv_dtype act_dtype(const lv_ctx *ctx) {
    lv_precision p = lv_ctx_precision(ctx);
    return p == LV_PRECISION_F16 ? LV_F16 : p == LV_PRECISION_BF16 ? LV_BF16 : LV_F32;
}

static lv_status scratch_act(scratch *s, int64_t rows, int64_t cols, lv_tensor **out) {
    int64_t shape[2] = {rows, cols};
    return scratch_typed(s, act_dtype(s->ctx), 2, shape, out);
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < s->n; i++) lv_tensor_free(s->ctx, &s->t[i]);
    s->n = 0;
}

static void tap(lv_dit *dit, lv_ctx *ctx, const char *name, const lv_tensor *t) {
    if (dit->tap) dit->tap(dit->tap_user, name, ctx, t);
}

static void tap_block(lv_dit *dit, lv_ctx *ctx, const char *what, const lv_dit_block *blk,
                      const lv_tensor *t) {
    if (!dit->tap) return;
    char name[64];
    snprintf(name, sizeof name, "block%d_%s", (int)(blk - dit->blocks), what);
    dit->tap(dit->tap_user, name, ctx, t);
}

/* ---- embedders ------------------------------------------------------------------------ */

/* 256-dim sinusoid of integer timesteps, cos first: [cos(t f_i), sin(t f_i)],
 * f_i = exp(-ln(10000) i / 128). The frequencies and the products t f_i are rounded to
 * float32 as the original computes them, so results agree to float32 rounding. */
static void timestep_sinusoid(const float *timesteps, int frames, float *out) {
    const float neg_log_period = (float)-log(10000.0);
    for (int f = 0; f < frames; f++) {
        float t = floorf(timesteps[f]); /* the model receives int(t) */
        for (int i = 0; i < 128; i++) {
            float freq = expf(neg_log_period * (float)i / 128.0f);
            float arg = t * freq;
            out[f * 256 + i] = (float)cos((double)arg);
            out[f * 256 + 128 + i] = (float)sin((double)arg);
        }
    }
}

/* The conditioning of the timesteps ts[F] (see lv_dit_cond): temb = MLP(sinusoid(t)),
 * each block's modulations scale_shift_table[j] + t_block(SiLU(temb))[j] laid out as
 * [6F, C] (row j*F + f), and the final layer's shift and scale table[0/1] + temb. Taken
 * from the cache when the same timesteps were seen; else computed into the least recently
 * used entry. */
lv_status lv_dit_timestep_conditioning(lv_ctx *ctx, lv_dit *dit, lv_dit_scratch *s, const float *ts, int F,
                                       const lv_dit_cond **out) {
    const int C = dit->cfg.hidden, depth = dit->cfg.depth;
    lv_dit_cond *c = NULL;
    for (int i = 0; i < LV_DIT_COND_CACHE; i++) {
        lv_dit_cond *e = &dit->cond[i];
        if (e->frames == F && memcmp(e->t, ts, (size_t)F * sizeof *ts) == 0) c = e;
    }
    if (c) {
        c->used = ++dit->cond_clock;
        *out = c;
        return LV_OK;
    }
    c = &dit->cond[0];
    for (int i = 1; i < LV_DIT_COND_CACHE; i++)
        if (dit->cond[i].used < c->used) c = &dit->cond[i];
    lv_dit_cond_free(ctx, dit, c);

    float *sinus = malloc((size_t)F * 256 * sizeof *sinus);
    if (!sinus) return lv_error(LV_ERR_NOMEM, "out of host memory");
    timestep_sinusoid(ts, F, sinus);
    lv_tensor *sin_t = NULL, *h = NULL, *act = NULL, *t0 = NULL;
    lv_status st = scratch_2d(s, F, 256, &sin_t);
    if (st == LV_OK) st = lv_tensor_write(ctx, sin_t, sinus, (uint64_t)F * 256 * 4);
    free(sinus);
    LV_TRY(st);
    LV_TRY(scratch_2d(s, F, C, &h));
    LV_TRY(scratch_2d(s, F, C, &act));
    LV_TRY(scratch_2d(s, 6 * (int64_t)F, C, &t0));
    int64_t fc[2] = {F, C}, mc[2] = {6 * (int64_t)F, C};
    c->mod = calloc((size_t)depth, sizeof *c->mod);
    if (!c->mod) return lv_error(LV_ERR_NOMEM, "out of host memory");
    st = lv_tensor_create(ctx, LV_F32, 2, fc, &c->temb);
    if (st == LV_OK) st = lv_tensor_create(ctx, LV_F32, 2, fc, &c->shift);
    if (st == LV_OK) st = lv_tensor_create(ctx, LV_F32, 2, fc, &c->scale);
    for (int b = 0; st == LV_OK && b < depth; b++) st = lv_tensor_create(ctx, LV_F32, 2, mc, &c->mod[b]);
    if (st != LV_OK) {
        lv_dit_cond_free(ctx, dit, c);
        return st;
    }
    st = lv_op_matmul_act(ctx, h, sin_t, &dit->t_mlp0_w, &dit->t_mlp0_b, LV_ACT_SILU);
    if (st == LV_OK) st = lv_op_matmul(ctx, &c->temb, h, &dit->t_mlp2_w, &dit->t_mlp2_b);
    if (st == LV_OK) st = lv_op_silu(ctx, act, &c->temb);
    for (int j = 0; st == LV_OK && j < 6; j++) {
        lv_tensor w = lv_tensor_rows(&dit->t_block_w, (int64_t)j * C, C);
        int64_t bshape[1] = {C};
        lv_tensor bias = lv_tensor_view(&dit->t_block_b, (int64_t)j * C, 1, bshape);
        lv_tensor rows = lv_tensor_rows(t0, (int64_t)j * F, F);
        st = lv_op_matmul(ctx, &rows, act, &w, &bias);
    }
    /* [6F, C] + [6, C]: row r uses table row r / F */
    for (int b = 0; st == LV_OK && b < depth; b++) st = lv_op_add(ctx, &c->mod[b], t0, &dit->blocks[b].sst);
    int64_t row[2] = {1, C};
    lv_tensor shift_row = lv_tensor_view(&dit->final_sst, 0, 2, row);
    lv_tensor scale_row = lv_tensor_view(&dit->final_sst, C, 2, row);
    if (st == LV_OK) st = lv_op_add(ctx, &c->shift, &c->temb, &shift_row);
    if (st == LV_OK) st = lv_op_add(ctx, &c->scale, &c->temb, &scale_row);
    if (st != LV_OK) {
        lv_dit_cond_free(ctx, dit, c);
        return st;
    }
    if (F <= LV_DIT_COND_MAX_FRAMES) {
        c->frames = F;
        memcpy(c->t, ts, (size_t)F * sizeof *ts);
    } else {
        c->frames = -1; /* used by this pass only; freed when evicted */
    }
    c->used = ++dit->cond_clock;
    *out = c;
    return LV_OK;
}

lv_status lv_dit_pass_conditioning(lv_ctx *ctx, lv_dit *dit, lv_dit_scratch *s, const lv_dit_pass *pass,
                                   const lv_dit_cond **out) {
    /* timesteps per token frame (patch[0] latent frames share one token frame) */
    const int pt = dit->cfg.patch[0], F = pass->frames / pt;
    float *ts = malloc((size_t)F * sizeof *ts);
    if (!ts) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int f = 0; f < F; f++) ts[f] = pass->timesteps[f * pt];
    lv_status st = lv_dit_timestep_conditioning(ctx, dit, s, ts, F, out);
    free(ts);
    return st;
}

/* x [C_in, F, H, W] -> patches [T, C_in * pt * ph * pw] in the weight's (c, o, p, q) order. */
void lv_dit_gather_patches(const lv_sana_config *cfg, const float *x, int F, int H, int W,
                           float *patches) {
    const int pt = cfg->patch[0], ph = cfg->patch[1], pw = cfg->patch[2];
    const int Fp = F / pt, Hp = H / ph, Wp = W / pw;
    const int K = cfg->in_channels * pt * ph * pw;
    for (int f = 0; f < Fp; f++)
        for (int h = 0; h < Hp; h++)
            for (int w = 0; w < Wp; w++) {
                float *row = patches + ((size_t)(f * Hp + h) * Wp + w) * K;
                int k = 0;
                for (int c = 0; c < cfg->in_channels; c++)
                    for (int o = 0; o < pt; o++)
                        for (int p = 0; p < ph; p++)
                            for (int q = 0; q < pw; q++)
                                row[k++] = x[(((size_t)c * F + f * pt + o) * H + h * ph + p) * W +
                                             w * pw + q];
            }
}

/* Final tokens [T, C_out * pt * ph * pw] ((o, p, q, c) order) -> out [C_out, F, H, W]. */
void lv_dit_unpatchify(const lv_sana_config *cfg, const float *tokens, int F, int H, int W,
                       float *out) {
    const int pt = cfg->patch[0], ph = cfg->patch[1], pw = cfg->patch[2];
    const int Fp = F / pt, Hp = H / ph, Wp = W / pw, Co = cfg->out_channels;
    const int K = Co * pt * ph * pw;
    for (int f = 0; f < Fp; f++)
        for (int h = 0; h < Hp; h++)
            for (int w = 0; w < Wp; w++) {
                const float *row = tokens + ((size_t)(f * Hp + h) * Wp + w) * K;
                for (int o = 0; o < pt; o++)
                    for (int p = 0; p < ph; p++)
                        for (int q = 0; q < pw; q++)
                            for (int c = 0; c < Co; c++)
                                out[(((size_t)c * F + f * pt + o) * H + h * ph + p) * W + w * pw + q] =
                                    row[((o * ph + p) * pw + q) * Co + c];
            }
}

lv_status lv_dit_set_text(lv_ctx *ctx, lv_dit *dit, int slot, const float *y, int L,
                          const float *mask) {
    if (!ctx || !dit || !y)
        return lv_error(LV_ERR_INVALID, "lv_dit_set_text: %s is NULL", !ctx ? "the context" : !dit ? "the dit" : "y");
    const lv_sana_config *cfg = &dit->cfg;
    const int C = cfg->hidden;
    if (slot < 0 || slot >= LV_DIT_TEXT_SLOTS)
        return lv_error(LV_ERR_INVALID, "text slot %d (0 to %d)", slot, LV_DIT_TEXT_SLOTS - 1);
    if (L <= 0 || L > LV_DIT_MAX_TEXT)
        return lv_error(LV_ERR_INVALID, "text: %d tokens (1 to %d supported)", L, LV_DIT_MAX_TEXT);
    lv_dit_text_free(ctx, dit, slot);
    scratch s = {.ctx = ctx};
    lv_tensor *yt = NULL, *h = NULL, *cap = NULL;
    lv_status st = scratch_2d(&s, L, cfg->caption_channels, &yt);
    if (st == LV_OK) st = lv_tensor_write(ctx, yt, y, (uint64_t)L * cfg->caption_channels * 4);
    if (st == LV_OK) st = scratch_2d(&s, L, C, &h);
    if (st == LV_OK) st = scratch_2d(&s, L, C, &cap);
    if (st == LV_OK) st = lv_op_matmul(ctx, h, yt, &dit->y_fc1_w, &dit->y_fc1_b);
    if (st == LV_OK) st = lv_op_gelu_tanh(ctx, h, h);
    if (st == LV_OK) st = lv_op_matmul(ctx, cap, h, &dit->y_fc2_w, &dit->y_fc2_b);
    if (st == LV_OK) st = lv_op_rmsnorm(ctx, cap, cap, &dit->y_norm_w, cfg->caption_norm_eps);
    if (st == LV_OK) tap(dit, ctx, "caption", cap);

    int64_t mshape[1] = {L};
    if (st == LV_OK) st = lv_tensor_create(ctx, LV_F32, 1, mshape, &dit->text_mask[slot]);
    if (st == LV_OK) {
        float *m = malloc((size_t)L * sizeof *m);
        if (!m) st = lv_error(LV_ERR_NOMEM, "out of host memory");
        for (int i = 0; m && i < L; i++) m[i] = mask ? (mask[i] != 0.0f ? 1.0f : 0.0f) : 1.0f;
        if (m) st = lv_tensor_write(ctx, &dit->text_mask[slot], m, (uint64_t)L * 4);
        free(m);
    }
    for (int b = 0; st == LV_OK && b < cfg->depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        int64_t shape[2] = {L, C};
        lv_tensor kw = lv_tensor_rows(&blk->ckv_w, 0, C), vw = lv_tensor_rows(&blk->ckv_w, C, C);
        int64_t bshape[1] = {C};
        lv_tensor kb = lv_tensor_view(&blk->ckv_b, 0, 1, bshape), vb = lv_tensor_view(&blk->ckv_b, C, 1, bshape);
        st = lv_tensor_create(ctx, LV_F32, 2, shape, &blk->text_k[slot]);
        if (st == LV_OK) st = lv_tensor_create(ctx, LV_F32, 2, shape, &blk->text_v[slot]);
        if (st == LV_OK) st = lv_op_matmul(ctx, &blk->text_k[slot], cap, &kw, &kb);
        if (st == LV_OK) st = lv_op_rmsnorm(ctx, &blk->text_k[slot], &blk->text_k[slot], &blk->ck_norm, cfg->cross_norm_eps);
        if (st == LV_OK) st = lv_op_matmul(ctx, &blk->text_v[slot], cap, &vw, &vb);
    }
    if (st == LV_OK) st = lv_flush(ctx);
    scratch_free(&s);
    if (st == LV_OK) dit->text_tokens[slot] = L;
    else lv_dit_text_free(ctx, dit, slot);
    return st;
}

/* ---- one block ------------------------------------------------------------------------ */

typedef struct pass_geometry {
    int F, Hp, Wp;   /* token grid */
    int64_t T, P;    /* tokens, tokens per frame */
} pass_geometry;

lv_status lv_dit_block_qkv(lv_ctx *ctx, const lv_dit *dit, const lv_dit_block *blk, const lv_tensor *x,
                           lv_tensor *const t0[6], const lv_tensor *h, const lv_tensor *q, const lv_tensor *k,
                           const lv_tensor *v) {
    const int C = dit->cfg.hidden;
    /* adaLN: LN without affine, then * (1 + scale1) + shift1 per frame */
    LV_TRY(lv_op_layernorm_modulate(ctx, h, x, t0[0], t0[1], dit->cfg.ln_eps));
    lv_tensor wq = lv_tensor_rows(&blk->qkv_w, 0, C);
    lv_tensor wk = lv_tensor_rows(&blk->qkv_w, C, C);
    lv_tensor wv = lv_tensor_rows(&blk->qkv_w, 2 * C, C);
    LV_TRY(lv_op_matmul(ctx, q, h, &wq, NULL));
    LV_TRY(lv_op_matmul(ctx, k, h, &wk, NULL));
    LV_TRY(lv_op_matmul(ctx, v, h, &wv, NULL));
    LV_TRY(lv_op_rmsnorm(ctx, q, q, &blk->q_norm, dit->cfg.qk_norm_eps));
    return lv_op_rmsnorm(ctx, k, k, &blk->k_norm, dit->cfg.qk_norm_eps);
}

static lv_status block_linear_attention(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk,
                                        scratch *s, const pass_geometry *g, lv_tensor *x,
                                        lv_tensor *const t0[6], const lv_tensor *rope,
                                        const lv_dit_pass *pass) {
    const int C = dit->cfg.hidden;
    lv_tensor *h = NULL, *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    LV_TRY(scratch_act(s, g->T, C, &h)); /* LN + modulate: the q, k, v products' input */
    LV_TRY(scratch_2d(s, g->T, C, &q));
    LV_TRY(scratch_2d(s, g->T, C, &k));
    LV_TRY(scratch_2d(s, g->T, C, &v));
    LV_TRY(scratch_2d(s, g->T, C, &o));
    LV_TRY(lv_dit_block_qkv(ctx, dit, blk, x, t0, h, q, k, v));
    if (pass->commit)
        LV_TRY(lv_linattn_block_write(ctx, blk->state, o, q, k, v, rope));
    else
        LV_TRY(lv_linattn_block_read(ctx, blk->state, o, q, k, v, rope));
    lv_tensor *proj = h->dtype == LV_F32 ? h : q; /* added to x: f32 (q is free again) */
    LV_TRY(lv_op_matmul(ctx, proj, o, &blk->proj_w, &blk->proj_b));
    tap_block(dit, ctx, "attn_out", blk, proj);
    return lv_op_add_gated(ctx, x, x, proj, t0[2]);
}

lv_status lv_dit_block_cross_attention(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk,
                                       const lv_tensor *q, const lv_tensor *o, const lv_tensor *x,
                                       int slot) {
    LV_TRY(lv_op_matmul(ctx, q, x, &blk->cq_w, &blk->cq_b));
    LV_TRY(lv_op_rmsnorm(ctx, q, q, &blk->cq_norm, dit->cfg.cross_norm_eps));
    LV_TRY(lv_op_softmax_attention(ctx, o, q, &blk->text_k[slot], &blk->text_v[slot], &dit->text_mask[slot],
                                   dit->cfg.heads, 1.0f / sqrtf((float)dit->cfg.head_dim)));
    return lv_op_matmul_add(ctx, x, o, &blk->cproj_w, &blk->cproj_b); /* x += proj(o) */
}

int lv_dit_ffn_slice_tokens(void) { return (int)lv_env_u64("LONGVK_FFN_SLICE", 4096, 1, 1u << 30); }

int lv_dit_ffn_slice_frames(int F, int64_t P, int slice_tokens) {
    if (slice_tokens <= 0) slice_tokens = lv_dit_ffn_slice_tokens();
    int64_t fs = P > 0 ? slice_tokens / P : F;
    return fs < 1 ? 1 : fs > F ? F : (int)fs;
}

static lv_status block_mix_ffn(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, scratch *s,
                               const pass_geometry *g, lv_tensor *x, lv_tensor *const t0[6],
                               const lv_dit_pass *pass) {
    const int C = dit->cfg.hidden, Fh = dit->cfg.ffn_hidden;
    lv_tensor *h = NULL, *a = NULL, *gate = NULL, *da = NULL, *dg = NULL, *u = NULL, *tc = NULL;
    /* The wide intermediates (a, gate: SiLU outputs read only by the depthwise conv; da, dg:
     * its outputs, read only by the gate, whose product, in place in da, is the point conv's
     * input; all in the activation dtype) are made over slices of whole frames, the same
     * four tensors reused by each slice: the depthwise conv is per frame and every product
     * per row, so the result is the unsliced one bit for bit, with 4 x [slice, Fh] held
     * instead of 4 x [T, Fh] (lv_dit_ffn_slice_frames). h, u and tc are whole. */
    const int fs = lv_dit_ffn_slice_frames(g->F, g->P, dit->ffn_slice_tokens);
    const int64_t rows = (int64_t)fs * g->P;
    LV_TRY(scratch_act(s, g->T, C, &h));
    LV_TRY(scratch_act(s, rows, Fh, &a));
    LV_TRY(scratch_act(s, rows, Fh, &gate));
    int64_t grid[4] = {fs, g->Hp, g->Wp, Fh};
    LV_TRY(scratch_typed(s, act_dtype(ctx), 4, grid, &da));
    LV_TRY(scratch_typed(s, act_dtype(ctx), 4, grid, &dg));
    LV_TRY(scratch_2d(s, g->T, C, &u));
    LV_TRY(scratch_2d(s, g->T, C, &tc));
    LV_TRY(lv_op_layernorm_modulate(ctx, h, x, t0[3], t0[4], dit->cfg.ln_eps));
    /* inverted 1x1 conv + SiLU, as two halves: a (channels 0..Fh) and g (Fh..2Fh) */
    lv_tensor wa = lv_tensor_rows(&blk->inv_w, 0, Fh), wg = lv_tensor_rows(&blk->inv_w, Fh, Fh);
    int64_t bshape[1] = {Fh};
    lv_tensor ba = lv_tensor_view(&blk->inv_b, 0, 1, bshape), bg = lv_tensor_view(&blk->inv_b, Fh, 1, bshape);
    int64_t dwshape[4] = {Fh, 1, 3, 3};
    lv_tensor dwa = lv_tensor_view(&blk->dw_w, 0, 4, dwshape), dwg = lv_tensor_view(&blk->dw_w, (int64_t)Fh * 9, 4, dwshape);
    lv_tensor dba = lv_tensor_view(&blk->dw_b, 0, 1, bshape), dbg = lv_tensor_view(&blk->dw_b, Fh, 1, bshape);
    for (int f0 = 0; f0 < g->F; f0 += fs) {
        const int nf = g->F - f0 < fs ? g->F - f0 : fs;
        const int64_t r0 = (int64_t)f0 * g->P, n = (int64_t)nf * g->P;
        int64_t sgrid[4] = {nf, g->Hp, g->Wp, Fh};
        lv_tensor hs = lv_tensor_rows(h, r0, n), us = lv_tensor_rows(u, r0, n);
        lv_tensor as = lv_tensor_rows(a, 0, n), gs = lv_tensor_rows(gate, 0, n);
        lv_tensor das = lv_tensor_rows(da, 0, nf), dgs = lv_tensor_rows(dg, 0, nf);
        LV_TRY(lv_op_matmul_act(ctx, &as, &hs, &wa, &ba, LV_ACT_SILU));
        LV_TRY(lv_op_matmul_act(ctx, &gs, &hs, &wg, &bg, LV_ACT_SILU));
        /* depthwise 3x3 per frame on each half */
        lv_tensor a4 = lv_tensor_view(a, 0, 4, sgrid), g4 = lv_tensor_view(gate, 0, 4, sgrid);
        LV_TRY(lv_op_dwconv3x3(ctx, &das, &a4, &dwa, &dba));
        LV_TRY(lv_op_dwconv3x3(ctx, &dgs, &g4, &dwg, &dbg));
        /* a * SiLU(g), then the point 1x1 conv back to C */
        LV_TRY(lv_op_mul_silu(ctx, &das, &das, &dgs));
        lv_tensor da2 = lv_tensor_view(da, 0, 2, (int64_t[]){n, Fh});
        LV_TRY(lv_op_matmul(ctx, &us, &da2, &blk->point_w, NULL));
    }
    /* temporal conv over frames; in long-video mode the previous chunk's last frame
     * (cached by its write pass) replaces the zero padding before the first frame */
    int64_t fpc[3] = {g->F, g->P, C};
    lv_tensor u3 = lv_tensor_view(u, 0, 3, fpc), tc3 = lv_tensor_view(tc, 0, 3, fpc);
    bool have_prev = blk->conv_valid;
    if (have_prev && blk->conv_cache.shape[0] != g->P)
        return lv_error(LV_ERR_INVALID, "dit: chunk has %lld tokens per frame but the carried "
                        "conv cache has %lld", (long long)g->P, (long long)blk->conv_cache.shape[0]);
    LV_TRY((blk->tconv_taps ? lv_op_temporal_conv_gemm : lv_op_temporal_conv)(ctx, &tc3, &u3, have_prev ? &blk->conv_cache : NULL, &blk->tconv_w));
    if (pass->commit) {
        if (!blk->conv_cache.alloc) {
            int64_t cshape[2] = {g->P, C};
            LV_TRY(lv_tensor_create(ctx, LV_F32, 2, cshape, &blk->conv_cache));
            dit->state_bytes += lv_tensor_nbytes(&blk->conv_cache);
        } else if (blk->conv_cache.shape[0] != g->P) {
            return lv_error(LV_ERR_INVALID, "dit: chunk has %lld tokens per frame but the carried "
                            "conv cache has %lld", (long long)g->P, (long long)blk->conv_cache.shape[0]);
        }
        lv_tensor last = lv_tensor_rows(u, (int64_t)(g->F - 1) * g->P, g->P);
        LV_TRY(lv_tensor_copy(ctx, &blk->conv_cache, &last));
        blk->conv_valid = true;
    }
    LV_TRY(lv_op_add(ctx, u, u, tc));
    tap_block(dit, ctx, "ffn_out", blk, u);
    return lv_op_add_gated(ctx, x, x, u, t0[5]);
}

/* ---- the whole pass ------------------------------------------------------------------- */

static lv_status check_pass(const lv_dit *dit, const lv_dit_pass *p) {
    const lv_sana_config *cfg = &dit->cfg;
    if (!p->x || !p->timesteps) return lv_error(LV_ERR_INVALID, "dit: latents and timesteps are required");
    if (p->frames <= 0 || p->height <= 0 || p->width <= 0)
        return lv_error(LV_ERR_INVALID, "dit: latent size %dx%dx%d", p->frames, p->height, p->width);
    if (p->frames % cfg->patch[0] || p->height % cfg->patch[1] || p->width % cfg->patch[2])
        return lv_error(LV_ERR_INVALID, "dit: latent size %dx%dx%d (frames x height x width) is not "
                        "a multiple of the patch size %dx%dx%d", p->frames, p->height, p->width,
                        cfg->patch[0], cfg->patch[1], cfg->patch[2]);
    if (p->text_slot < 0 || p->text_slot >= LV_DIT_TEXT_SLOTS || !dit->text_tokens[p->text_slot])
        return lv_error(LV_ERR_INVALID, "dit: no text conditioning in slot %d (lv_dit_set_text)", p->text_slot);
    if (p->frame_offset < 0) return lv_error(LV_ERR_INVALID, "dit: negative frame offset");
    for (int f = 0; f < p->frames; f++)
        if (!(p->timesteps[f] >= 0.0f && p->timesteps[f] <= 1000.0f))
            return lv_error(LV_ERR_INVALID, "dit: timestep %g of frame %d is outside [0, 1000]",
                            (double)p->timesteps[f], f);
    return LV_OK;
}

/* ---- non-finite checks ------------------------------------------------------------------
 * Every pass counts, on the device, the NaN and infinite values of what it hands on: the
 * prediction (slot 0 of dit->checks) and, after a write pass, each layer's carried state
 * (slot 1 + b: the linear-attention state, then the conv cache). One small kernel per
 * tensor, no atomic unless a value is bad, and 16 bytes a layer read back: a NaN weight,
 * input or overflow is an error at the pass that meets it instead of black frames. */

lv_tensor lv_dit_check_slot(lv_dit *dit, int slot) {
    int64_t four = 4;
    return lv_tensor_view(&dit->checks, (int64_t)slot * 4, 1, &four);
}

lv_status lv_dit_count_state(lv_ctx *ctx, lv_dit *dit) {
    for (int b = 0; b < dit->cfg.depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        lv_tensor slot = lv_dit_check_slot(dit, 1 + b);
        const lv_tensor *st = lv_linattn_state_tensor(blk->state);
        LV_TRY(lv_op_count_nonfinite(ctx, &slot, st, 0));
        if (blk->conv_valid) LV_TRY(lv_op_count_nonfinite(ctx, &slot, &blk->conv_cache, (uint32_t)lv_tensor_numel(st)));
    }
    return LV_OK;
}

lv_status lv_dit_state_verdict(lv_ctx *ctx, lv_dit *dit) {
    int64_t n = lv_tensor_numel(&dit->checks);
    uint32_t *c = malloc((size_t)n * sizeof *c);
    if (!c) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status st = lv_tensor_read(ctx, &dit->checks, c, (uint64_t)n * 4);
    for (int b = 0; st == LV_OK && b < dit->cfg.depth; b++) {
        const uint32_t *k = c + 4 * (1 + b);
        if (k[0] + k[1] == 0) continue;
        int64_t lin = lv_tensor_numel(lv_linattn_state_tensor(dit->blocks[b].state));
        int64_t first = (int64_t)(uint32_t)~k[2];
        st = lv_error(LV_ERR_INVALID, "the carried state of layer %d has non-finite values after the write pass "
                      "(%u NaN and %u infinite; the first in its %s, value %lld): the chunk written (an input) "
                      "or a weight holds NaN or infinity, or the activations overflowed", b, k[0], k[1],
                      first < lin ? "linear-attention state" : "temporal conv cache",
                      (long long)(first < lin ? first : first - lin));
    }
    free(c);
    return st;
}

static lv_status prediction_verdict(lv_ctx *ctx, lv_dit *dit, int64_t tokens, int64_t channels) {
    uint32_t k[4];
    lv_tensor slot = lv_dit_check_slot(dit, 0);
    LV_TRY(lv_tensor_read(ctx, &slot, k, sizeof k));
    return lv_dit_prediction_status(k[0], k[1], k[0] + k[1] ? (int64_t)(uint32_t)~k[2] : 0, tokens, channels);
}

lv_status lv_dit_prediction_status(uint32_t nan, uint32_t inf, int64_t first, int64_t tokens, int64_t channels) {
    if (nan + inf == 0) return LV_OK;
    return lv_error(LV_ERR_INVALID, "the DiT's output has non-finite values (%u NaN and %u infinite of %lld; the "
                    "first at token %lld, channel %lld): a weight of the model or an input holds NaN or infinity, "
                    "or the activations overflowed", nan, inf, (long long)(tokens * channels),
                    (long long)(first / channels), (long long)(first % channels));
}

static lv_status forward(lv_ctx *ctx, lv_dit *dit, const lv_dit_pass *pass_in, scratch *s, float *out) {
    /* cached_blocks 0: nothing is carried, so a write pass is a read pass */
    lv_dit_pass no_commit = *pass_in;
    if (dit->opt.cached_blocks == 0) no_commit.commit = false;
    const lv_dit_pass *pass = &no_commit;
    const lv_sana_config *cfg = &dit->cfg;
    const int C = cfg->hidden;
    pass_geometry g = {.F = pass->frames / cfg->patch[0],
                       .Hp = pass->height / cfg->patch[1],
                       .Wp = pass->width / cfg->patch[2]};
    g.P = (int64_t)g.Hp * g.Wp;
    g.T = g.P * g.F;
    const int K = cfg->in_channels * cfg->patch[0] * cfg->patch[1] * cfg->patch[2];

    /* patch embedding */
    lv_tensor *patches = NULL, *x = NULL;
    LV_TRY(scratch_2d(s, g.T, K, &patches));
    LV_TRY(scratch_2d(s, g.T, C, &x));
    {
        float *host = malloc((size_t)g.T * K * sizeof *host);
        if (!host) return lv_error(LV_ERR_NOMEM, "out of host memory");
        lv_dit_gather_patches(cfg, pass->x, pass->frames, pass->height, pass->width, host);
        lv_status st = lv_tensor_write(ctx, patches, host, (uint64_t)g.T * K * 4);
        free(host);
        LV_TRY(st);
    }
    LV_TRY(lv_op_matmul(ctx, x, patches, &dit->x_embed_w, &dit->x_embed_b));
    tap(dit, ctx, "patch_embed", x);

    const lv_dit_cond *cond = NULL;
    LV_TRY(lv_dit_pass_conditioning(ctx, dit, s, pass, &cond));
    tap(dit, ctx, "temb", &cond->temb);
    lv_status st;

    /* rotary table for this chunk's grid, time positions from the absolute frame index */
    lv_tensor *rope = NULL;
    LV_TRY(scratch_2d(s, g.T, cfg->head_dim, &rope));
    {
        float *table = malloc((size_t)g.T * cfg->head_dim * sizeof *table);
        if (!table) return lv_error(LV_ERR_NOMEM, "out of host memory");
        lv_rope_table_3d(table, g.F, g.Hp, g.Wp, pass->frame_offset / cfg->patch[0], cfg->head_dim,
                         cfg->rope_dims[0], cfg->rope_dims[1], cfg->rope_dims[2], cfg->rope_theta);
        st = lv_tensor_write(ctx, rope, table, (uint64_t)g.T * cfg->head_dim * 4);
        free(table);
        LV_TRY(st);
    }

    char name[64];
    for (int b = 0; b < cfg->depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        /* the block's six modulations, each [F, C] */
        lv_tensor mod[6], *modp[6];
        for (int j = 0; j < 6; j++) {
            mod[j] = lv_tensor_rows(&cond->mod[b], (int64_t)j * g.F, g.F);
            modp[j] = &mod[j];
        }
        int mark = s->n;
        LV_TRY(block_linear_attention(ctx, dit, blk, s, &g, x, modp, rope, pass));
        snprintf(name, sizeof name, "block%d_after_attn", b);
        tap(dit, ctx, name, x);
        {
            lv_tensor *q = NULL, *o = NULL;
            LV_TRY(scratch_2d(s, g.T, C, &q));
            LV_TRY(scratch_2d(s, g.T, C, &o));
            LV_TRY(lv_dit_block_cross_attention(ctx, dit, blk, q, o, x, pass->text_slot));
        }
        snprintf(name, sizeof name, "block%d_after_cross", b);
        tap(dit, ctx, name, x);
        LV_TRY(block_mix_ffn(ctx, dit, blk, s, &g, x, modp, pass));
        snprintf(name, sizeof name, "block%d_after_ffn", b);
        tap(dit, ctx, name, x);
        /* release this block's temporaries. Recorded work still reads them, so the engine
         * defers their release to the next flush: flush now, or every block's temporaries
         * stay held until the pass ends (on an H200, 39 GiB of a 480p chunk's 43.6 at
         * depth 20 instead of one block's). One submit-and-wait a block costs nothing next
         * to the block's work. */
        for (int i = s->n - 1; i >= mark; i--) lv_tensor_free(ctx, &s->t[i]);
        s->n = mark;
        LV_TRY(lv_flush(ctx));
    }

    LV_TRY(lv_tensor_zero(ctx, &dit->checks));
    if (pass->commit) LV_TRY(lv_dit_count_state(ctx, dit));
    if (!out) return pass->commit ? lv_dit_state_verdict(ctx, dit) : LV_OK; /* a write pass that only updates the state */

    /* final layer: LN, modulation by table(2, C) + temb (shift, scale), linear */
    lv_tensor *h = NULL, *final = NULL;
    const int Ko = cfg->out_channels * cfg->patch[0] * cfg->patch[1] * cfg->patch[2];
    LV_TRY(scratch_act(s, g.T, C, &h));
    LV_TRY(scratch_2d(s, g.T, Ko, &final));
    LV_TRY(lv_op_layernorm_modulate(ctx, h, x, &cond->shift, &cond->scale, cfg->ln_eps));
    LV_TRY(lv_op_matmul(ctx, final, h, &dit->final_w, &dit->final_b));
    tap(dit, ctx, "final_tokens", final);

    lv_tensor pred_slot = lv_dit_check_slot(dit, 0);
    LV_TRY(lv_op_count_nonfinite(ctx, &pred_slot, final, 0));

    float *tokens = malloc((size_t)g.T * Ko * sizeof *tokens);
    if (!tokens) return lv_error(LV_ERR_NOMEM, "out of host memory");
    st = lv_tensor_read(ctx, final, tokens, (uint64_t)g.T * Ko * 4);
    if (st == LV_OK) lv_dit_unpatchify(cfg, tokens, pass->frames, pass->height, pass->width, out);
    free(tokens);
    if (st == LV_OK) st = prediction_verdict(ctx, dit, g.T, Ko);
    if (st == LV_OK && pass->commit) st = lv_dit_state_verdict(ctx, dit);
    return st;
}

lv_status lv_dit_forward(lv_ctx *ctx, lv_dit *dit, const lv_dit_pass *pass, float *out) {
    if (!ctx || !dit || !pass)
        return lv_error(LV_ERR_INVALID, "lv_dit_forward: %s is NULL", !ctx ? "the context" : !dit ? "the dit" : "the pass");
    LV_TRY(check_pass(dit, pass));
    scratch s = {.ctx = ctx};
    /* sp_bands > 1: the same pass as R bands, each what one rank would compute */
    lv_status st = dit->sp ? lv_dit_forward_bands(ctx, dit, pass, &s, out) : forward(ctx, dit, pass, &s, out);
    if (st == LV_OK) st = lv_flush(ctx);
    scratch_free(&s);
    if (st == LV_OK && pass->commit) dit->chunks++;
    return st;
}
