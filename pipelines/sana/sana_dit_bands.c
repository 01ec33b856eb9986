/* The DiT forward split into R bands of token rows (lv_dit_options.sp_bands, the design in
 * pipelines/parallel/README.md). Each band holds its rows of every frame as its own
 * tensors and runs exactly what one rank of R would: the per-token ops, its partial
 * linear-attention state, its queries, cross-attention, its Mix-FFN with a halo row per
 * side, its slice of the temporal conv's cache and its final layer. Everything a band
 * needs from the others goes through dit->sp (longvk/sp_comm.h): the band-ordered sum of
 * the partial states and the halo rows. The carried state is replicated (one object here);
 * the conv cache [P, C] is shared, each band using its rows' slice, so a dit can switch
 * between split and unsplit passes and saves the same state either way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "sana_dit_internal.h"

typedef struct band {
    int row0, rows;         /* token rows [row0, row0 + rows) of every frame */
    int top, bottom;        /* 1 where a halo row comes from a band above / below */
    int64_t P, T;           /* tokens per frame, tokens */
    lv_tensor x, rope, h, q, k, v, o;   /* [T, C], rope [T, D] */
    lv_tensor hpad;         /* [F, top + rows + bottom, Wp, C]: h with the halo rows */
    lv_tensor a, g;         /* [F * padded rows * Wp, Fh] */
    lv_tensor da, dg;       /* [F, padded rows, Wp, Fh] */
    lv_tensor dsel;         /* [T, Fh]: the band's own rows of da */
    lv_tensor u, tc;        /* [T, C] */
} band;

typedef struct bands {
    int R, F, Hp, Wp;
    int first, count;       /* the bands this process holds: b[i] is band first + i */
    band *b;
    lv_tensor partials;     /* [count, M]: each local band's partial (S, z) */
    lv_tensor own;          /* [M]: their band-ordered sum */
    lv_tensor *h4;          /* per band: h seen as [F, rows, Wp, C], for the halo exchange */
    const lv_tensor **h4p, **hpadp;
} bands;

static void bands_free(lv_ctx *ctx, bands *bs) {
    for (int r = 0; bs->b && r < bs->count; r++) {
        band *b = &bs->b[r];
        lv_tensor *ts[] = {&b->x, &b->rope, &b->h, &b->q, &b->k, &b->v, &b->o, &b->hpad,
                           &b->a, &b->g, &b->da, &b->dg, &b->dsel, &b->u, &b->tc};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lv_tensor_free(ctx, ts[i]);
    }
    free(bs->b);
    free(bs->h4);
    free(bs->h4p);
    free(bs->hpadp);
    lv_tensor_free(ctx, &bs->partials);
    lv_tensor_free(ctx, &bs->own);
}

static lv_status t2(lv_ctx *ctx, int64_t rows, int64_t cols, lv_tensor *t) {
    int64_t shape[2] = {rows, cols};
    return lv_tensor_create(ctx, LV_F32, 2, shape, t);
}

static lv_status t4(lv_ctx *ctx, int64_t a, int64_t b, int64_t c, int64_t d, lv_tensor *t) {
    int64_t shape[4] = {a, b, c, d};
    return lv_tensor_create(ctx, LV_F32, 4, shape, t);
}

static lv_status bands_alloc(lv_ctx *ctx, const lv_dit *dit, bands *bs) {
    const lv_sana_config *cfg = &dit->cfg;
    const int64_t C = cfg->hidden, Fh = cfg->ffn_hidden, D = cfg->head_dim;
    bs->b = calloc((size_t)bs->count, sizeof *bs->b);
    bs->h4 = calloc((size_t)bs->count, sizeof *bs->h4);
    bs->h4p = calloc((size_t)bs->count, sizeof *bs->h4p);
    bs->hpadp = calloc((size_t)bs->count, sizeof *bs->hpadp);
    if (!bs->b || !bs->h4 || !bs->h4p || !bs->hpadp) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < bs->count; i++) {
        const int r = bs->first + i; /* the band's number of R */
        band *b = &bs->b[i];
        lv_status st = lv_sp_band(bs->Hp, bs->R, r, &b->row0, &b->rows);
        if (st != LV_OK)
            return lv_error(LV_ERR_INVALID, "dit: %d sequence-parallel bands but the chunk has %d token rows "
                            "(latent height %d / patch %d): at most %d bands", bs->R, bs->Hp,
                            bs->Hp * cfg->patch[1], cfg->patch[1], bs->Hp);
        b->top = r > 0;
        b->bottom = r < bs->R - 1;
        b->P = (int64_t)b->rows * bs->Wp;
        b->T = b->P * bs->F;
        const int64_t padded = (int64_t)bs->F * (b->top + b->rows + b->bottom) * bs->Wp;
        LV_TRY(t2(ctx, b->T, C, &b->x));
        LV_TRY(t2(ctx, b->T, D, &b->rope));
        LV_TRY(t2(ctx, b->T, C, &b->h));
        LV_TRY(t2(ctx, b->T, C, &b->q));
        LV_TRY(t2(ctx, b->T, C, &b->k));
        LV_TRY(t2(ctx, b->T, C, &b->v));
        LV_TRY(t2(ctx, b->T, C, &b->o));
        LV_TRY(t4(ctx, bs->F, b->top + b->rows + b->bottom, bs->Wp, C, &b->hpad));
        LV_TRY(t2(ctx, padded, Fh, &b->a));
        LV_TRY(t2(ctx, padded, Fh, &b->g));
        LV_TRY(t4(ctx, bs->F, b->top + b->rows + b->bottom, bs->Wp, Fh, &b->da));
        LV_TRY(t4(ctx, bs->F, b->top + b->rows + b->bottom, bs->Wp, Fh, &b->dg));
        LV_TRY(t2(ctx, b->T, Fh, &b->dsel));
        LV_TRY(t2(ctx, b->T, C, &b->u));
        LV_TRY(t2(ctx, b->T, C, &b->tc));
        int64_t h4shape[4] = {bs->F, b->rows, bs->Wp, C};
        bs->h4[i] = lv_tensor_view(&b->h, 0, 4, h4shape);
        bs->h4p[i] = &bs->h4[i];
        bs->hpadp[i] = &b->hpad;
    }
    const int64_t m = lv_linattn_state_slot_floats(dit->blocks[0].state);
    LV_TRY(t2(ctx, bs->count, m, &bs->partials));
    return lv_tensor_create(ctx, LV_F32, 1, &m, &bs->own);
}

/* Host: the band's rows of a token-major [F * Hp * Wp, cols] array, and back. */
static void band_gather(const float *all, float *part, const bands *bs, const band *b, int64_t cols) {
    const size_t n = (size_t)b->P * cols;
    for (int f = 0; f < bs->F; f++)
        memcpy(part + f * n, all + ((size_t)f * bs->Hp + b->row0) * bs->Wp * cols, n * sizeof *part);
}

static void band_scatter(float *all, const float *part, const bands *bs, const band *b, int64_t cols) {
    const size_t n = (size_t)b->P * cols;
    for (int f = 0; f < bs->F; f++)
        memcpy(all + ((size_t)f * bs->Hp + b->row0) * bs->Wp * cols, part + f * n, n * sizeof *part);
}

/* Upload the band's rows of a host [T, cols] array into t [b->T, cols]. */
static lv_status band_upload(lv_ctx *ctx, const float *all, const bands *bs, const band *b, int64_t cols,
                             const lv_tensor *t) {
    float *part = malloc((size_t)b->T * cols * sizeof *part);
    if (!part) return lv_error(LV_ERR_NOMEM, "out of host memory");
    band_gather(all, part, bs, b, cols);
    lv_status st = lv_tensor_write(ctx, t, part, (uint64_t)b->T * cols * 4);
    free(part);
    return st;
}

/* The tap (lv_dit_set_tap) at one band: the band is then the whole pass, and its tensors
 * are the unsplit pass's under the same names, which tests hold the two paths to. With
 * more bands no tap is called (a band's rows are not the tensor the name means). */
static void tap_whole(lv_dit *dit, lv_ctx *ctx, const bands *bs, const char *name, int layer, const lv_tensor *t) {
    if (!dit->tap || bs->R != 1) return;
    char full[64];
    if (layer >= 0) snprintf(full, sizeof full, "block%d_%s", layer, name);
    else snprintf(full, sizeof full, "%s", name);
    dit->tap(dit->tap_user, full, ctx, t);
}

/* ---- one layer, band by band ---------------------------------------------------------- */

/* adaLN, q, k, v with their norms, and the band's partial (S_r, z_r) into `partial` */
static lv_status attention_partial(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, band *b,
                                   lv_tensor *const t0[6], const lv_tensor *partial) {
    const int H = dit->cfg.heads, D = dit->cfg.head_dim;
    LV_TRY(lv_dit_block_qkv(ctx, dit, blk, &b->x, t0, &b->h, &b->q, &b->k, &b->v));
    int64_t sshape[3] = {H, D, D}, zshape[2] = {H, D};
    lv_tensor S = lv_tensor_view(partial, 0, 3, sshape);
    lv_tensor z = lv_tensor_view(partial, (int64_t)H * D * D, 2, zshape);
    return lv_op_linattn_state(ctx, &S, &z, &b->k, &b->v, &b->rope, lv_linattn_state_config(blk->state)->phi,
                               false);
}

/* the band's queries over carried + summed contribution, projection, gated residual */
static lv_status attention_finish(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, const bands *bs, band *b,
                                  lv_tensor *const t0[6]) {
    LV_TRY(lv_linattn_block_query(ctx, blk->state, &b->o, &b->q, &b->rope));
    LV_TRY(lv_op_matmul(ctx, &b->h, &b->o, &blk->proj_w, &blk->proj_b));
    tap_whole(dit, ctx, bs, "attn_out", (int)(blk - dit->blocks), &b->h);
    LV_TRY(lv_op_add_gated(ctx, &b->x, &b->x, &b->h, t0[2]));
    tap_whole(dit, ctx, bs, "after_attn", (int)(blk - dit->blocks), &b->x);
    return LV_OK;
}

/* the rest of the Mix-FFN once hpad holds the band's rows and its halo rows */
static lv_status ffn_finish(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, const bands *bs, band *b,
                            lv_tensor *const t0[6], bool commit) {
    const int C = dit->cfg.hidden, Fh = dit->cfg.ffn_hidden;
    const int64_t rp = b->top + b->rows + b->bottom;
    /* inverted 1x1 conv + SiLU on every row, halo rows included (recomputed, as a rank that
     * received rows of h would), as two halves a and g */
    lv_tensor wa = lv_tensor_rows(&blk->inv_w, 0, Fh), wg = lv_tensor_rows(&blk->inv_w, Fh, Fh);
    int64_t bshape[1] = {Fh};
    lv_tensor ba = lv_tensor_view(&blk->inv_b, 0, 1, bshape), bg = lv_tensor_view(&blk->inv_b, Fh, 1, bshape);
    lv_tensor h2 = lv_tensor_view(&b->hpad, 0, 2, (int64_t[]){(int64_t)bs->F * rp * bs->Wp, C});
    LV_TRY(lv_op_matmul_act(ctx, &b->a, &h2, &wa, &ba, LV_ACT_SILU));
    LV_TRY(lv_op_matmul_act(ctx, &b->g, &h2, &wg, &bg, LV_ACT_SILU));
    /* depthwise 3x3 over the padded rows: the halo rows stand in for the neighbours' rows,
     * and where there is none (the image border) the op's zero padding applies, as on one
     * rank; the halo rows' own outputs are dropped below */
    int64_t grid[4] = {bs->F, rp, bs->Wp, Fh};
    int64_t dwshape[4] = {Fh, 1, 3, 3};
    lv_tensor dwa = lv_tensor_view(&blk->dw_w, 0, 4, dwshape);
    lv_tensor dwg = lv_tensor_view(&blk->dw_w, (int64_t)Fh * 9, 4, dwshape);
    lv_tensor dba = lv_tensor_view(&blk->dw_b, 0, 1, bshape), dbg = lv_tensor_view(&blk->dw_b, Fh, 1, bshape);
    lv_tensor a4 = lv_tensor_view(&b->a, 0, 4, grid), g4 = lv_tensor_view(&b->g, 0, 4, grid);
    LV_TRY(lv_op_dwconv3x3(ctx, &b->da, &a4, &dwa, &dba));
    LV_TRY(lv_op_dwconv3x3(ctx, &b->dg, &g4, &dwg, &dbg));
    LV_TRY(lv_op_mul_silu(ctx, &b->da, &b->da, &b->dg));
    lv_tensor sel4 = lv_tensor_view(&b->dsel, 0, 4, (int64_t[]){bs->F, b->rows, bs->Wp, Fh});
    LV_TRY(lv_sp_copy_rows(ctx, &sel4, 0, &b->da, b->top, b->rows));
    LV_TRY(lv_op_matmul(ctx, &b->u, &b->dsel, &blk->point_w, NULL));
    /* temporal conv over frames with the band's slice of the carried last frame */
    int64_t fpc[3] = {bs->F, b->P, C};
    lv_tensor u3 = lv_tensor_view(&b->u, 0, 3, fpc), tc3 = lv_tensor_view(&b->tc, 0, 3, fpc);
    lv_tensor cache = {0};
    if (blk->conv_cache.alloc) cache = lv_tensor_rows(&blk->conv_cache, (int64_t)b->row0 * bs->Wp, b->P);
    LV_TRY((blk->tconv_taps ? lv_op_temporal_conv_gemm : lv_op_temporal_conv)(ctx, &tc3, &u3, blk->conv_valid ? &cache : NULL, &blk->tconv_w));
    if (commit) { /* the band's rows of the last frame; the bands' slices are disjoint */
        lv_tensor last = lv_tensor_rows(&b->u, (int64_t)(bs->F - 1) * b->P, b->P);
        LV_TRY(lv_tensor_copy(ctx, &cache, &last));
    }
    LV_TRY(lv_op_add(ctx, &b->u, &b->u, &b->tc));
    tap_whole(dit, ctx, bs, "ffn_out", (int)(blk - dit->blocks), &b->u);
    LV_TRY(lv_op_add_gated(ctx, &b->x, &b->x, &b->u, t0[5]));
    tap_whole(dit, ctx, bs, "after_ffn", (int)(blk - dit->blocks), &b->x);
    return LV_OK;
}

static lv_status layer(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, bands *bs, lv_tensor *const t0[6],
                       const lv_dit_pass *pass) {
    const int R = bs->count; /* the local bands */
    const int64_t P = (int64_t)bs->Hp * bs->Wp;
    /* linear attention: partials, their band-ordered sum, then every band's queries */
    for (int r = 0; r < R; r++) {
        lv_tensor partial = lv_tensor_rows(&bs->partials, r, 1);
        LV_TRY(attention_partial(ctx, dit, blk, &bs->b[r], t0, &partial));
    }
    LV_TRY(lv_sp_comm_state_sum(dit->sp, ctx, &bs->partials, &bs->own));
    LV_TRY(lv_linattn_block_begin(ctx, blk->state, &bs->own));
    for (int r = 0; r < R; r++) LV_TRY(attention_finish(ctx, dit, blk, bs, &bs->b[r], t0));
    if (pass->commit) LV_TRY(lv_linattn_block_commit(ctx, blk->state));

    for (int r = 0; r < R; r++) {
        LV_TRY(lv_dit_block_cross_attention(ctx, dit, blk, &bs->b[r].q, &bs->b[r].o, &bs->b[r].x, pass->text_slot));
        tap_whole(dit, ctx, bs, "after_cross", (int)(blk - dit->blocks), &bs->b[r].x);
    }

    /* Mix-FFN: each band's modulated rows, the halo exchange, then the convs */
    if (blk->conv_cache.alloc && blk->conv_cache.shape[0] != P && (blk->conv_valid || pass->commit))
        return lv_error(LV_ERR_INVALID, "dit: chunk has %lld tokens per frame but the carried "
                        "conv cache has %lld", (long long)P, (long long)blk->conv_cache.shape[0]);
    if (pass->commit && !blk->conv_cache.alloc) {
        int64_t cshape[2] = {P, dit->cfg.hidden};
        LV_TRY(lv_tensor_create(ctx, LV_F32, 2, cshape, &blk->conv_cache));
        /* zeros where no local band writes (another process's rows): finite for the checks */
        LV_TRY(lv_tensor_zero(ctx, &blk->conv_cache));
        dit->state_bytes += lv_tensor_nbytes(&blk->conv_cache);
    }
    for (int r = 0; r < R; r++) {
        band *b = &bs->b[r];
        LV_TRY(lv_op_layernorm_modulate(ctx, &b->h, &b->x, t0[3], t0[4], dit->cfg.ln_eps));
        LV_TRY(lv_sp_copy_rows(ctx, &b->hpad, b->top, &bs->h4[r], 0, b->rows));
    }
    LV_TRY(lv_sp_comm_halo(dit->sp, ctx, bs->h4p, bs->hpadp));
    for (int r = 0; r < R; r++) LV_TRY(ffn_finish(ctx, dit, blk, bs, &bs->b[r], t0, pass->commit));
    if (pass->commit) blk->conv_valid = true;
    return LV_OK;
}

/* The final layer of every local band into the host tokens [T, Ko], then the other
 * processes' bands gathered (rows reassembled). */
static lv_status final_layer(lv_ctx *ctx, lv_dit *dit, bands *bs, const lv_dit_cond *cond, float *tokens) {
    const lv_sana_config *cfg = &dit->cfg;
    const int64_t Ko = (int64_t)cfg->out_channels * cfg->patch[0] * cfg->patch[1] * cfg->patch[2];
    for (int r = 0; r < bs->count; r++) {
        band *b = &bs->b[r];
        lv_tensor final = {0};
        LV_TRY(t2(ctx, b->T, Ko, &final));
        float *part = malloc((size_t)b->T * Ko * sizeof *part);
        lv_status st = part ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory");
        if (st == LV_OK) st = lv_op_layernorm_modulate(ctx, &b->h, &b->x, &cond->shift, &cond->scale, cfg->ln_eps);
        if (st == LV_OK) st = lv_op_matmul(ctx, &final, &b->h, &dit->final_w, &dit->final_b);
        if (st == LV_OK) tap_whole(dit, ctx, bs, "final_tokens", -1, &final);
        if (st == LV_OK) st = lv_tensor_read(ctx, &final, part, (uint64_t)b->T * Ko * 4);
        if (st == LV_OK) band_scatter(tokens, part, bs, b, Ko);
        free(part);
        lv_tensor_free(ctx, &final);
        LV_TRY(st);
    }
    return lv_sp_comm_gather_rows(dit->sp, tokens, bs->F, bs->Hp, (int64_t)bs->Wp * Ko);
}

/* The prediction's non-finite check, on the host: the tokens are here anyway, and a band's
 * device count would name a band-local token. */
static lv_status check_prediction(const float *tokens, int64_t T, int64_t Ko) {
    uint32_t nan = 0, inf = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < T * Ko; i++) {
        if (isfinite(tokens[i])) continue;
        if (isnan(tokens[i])) nan++;
        else inf++;
        if (first < 0) first = i;
    }
    return lv_dit_prediction_status(nan, inf, first, T, Ko);
}

lv_status lv_dit_forward_bands(lv_ctx *ctx, lv_dit *dit, const lv_dit_pass *pass_in, lv_dit_scratch *s, float *out) {
    /* cached_blocks 0: nothing is carried, so a write pass is a read pass */
    lv_dit_pass pass = *pass_in;
    if (dit->opt.cached_blocks == 0) pass.commit = false;
    const lv_sana_config *cfg = &dit->cfg;
    bands bs = {.R = lv_sp_comm_bands(dit->sp),
                .first = lv_sp_comm_first(dit->sp),
                .count = lv_sp_comm_count(dit->sp),
                .F = pass.frames / cfg->patch[0],
                .Hp = pass.height / cfg->patch[1],
                .Wp = pass.width / cfg->patch[2]};
    const int64_t T = (int64_t)bs.F * bs.Hp * bs.Wp;
    const int K = cfg->in_channels * cfg->patch[0] * cfg->patch[1] * cfg->patch[2];
    const int D = cfg->head_dim;
    lv_status st = bands_alloc(ctx, dit, &bs);

    /* patch embedding and rotary table per band: the band's rows of the global ones (RoPE
     * positions are global) */
    float *host = NULL;
    if (st == LV_OK) {
        host = malloc((size_t)T * (K > D ? K : D) * sizeof *host);
        if (!host) st = lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    lv_tensor patches = {0};
    if (st == LV_OK) {
        lv_dit_gather_patches(cfg, pass.x, pass.frames, pass.height, pass.width, host);
        for (int r = 0; st == LV_OK && r < bs.count; r++) {
            band *b = &bs.b[r];
            st = t2(ctx, b->T, K, &patches);
            if (st == LV_OK) st = band_upload(ctx, host, &bs, b, K, &patches);
            if (st == LV_OK) st = lv_op_matmul(ctx, &b->x, &patches, &dit->x_embed_w, &dit->x_embed_b);
            if (st == LV_OK) tap_whole(dit, ctx, &bs, "patch_embed", -1, &b->x);
            lv_tensor_free(ctx, &patches);
        }
    }
    if (st == LV_OK) {
        lv_rope_table_3d(host, bs.F, bs.Hp, bs.Wp, pass.frame_offset / cfg->patch[0], D, cfg->rope_dims[0],
                         cfg->rope_dims[1], cfg->rope_dims[2], cfg->rope_theta);
        for (int r = 0; st == LV_OK && r < bs.count; r++) st = band_upload(ctx, host, &bs, &bs.b[r], D, &bs.b[r].rope);
    }
    free(host);

    /* the timestep conditioning is replicated: every band computes the same */
    const lv_dit_cond *cond = NULL;
    if (st == LV_OK) st = lv_dit_pass_conditioning(ctx, dit, s, &pass, &cond);
    if (st == LV_OK) tap_whole(dit, ctx, &bs, "temb", -1, &cond->temb);

    for (int l = 0; st == LV_OK && l < cfg->depth; l++) {
        lv_tensor mod[6], *modp[6];
        for (int j = 0; j < 6; j++) {
            mod[j] = lv_tensor_rows(&cond->mod[l], (int64_t)j * bs.F, bs.F);
            modp[j] = &mod[j];
        }
        st = layer(ctx, dit, &dit->blocks[l], &bs, modp, &pass);
    }

    if (st == LV_OK) st = lv_tensor_zero(ctx, &dit->checks);
    if (st == LV_OK && pass.commit) st = lv_dit_count_state(ctx, dit);
    if (st == LV_OK && pass.commit) dit->conv_rows = bs.Hp; /* the local bands' rows of the caches */
    if (st == LV_OK && out) {
        const int64_t Ko = (int64_t)cfg->out_channels * cfg->patch[0] * cfg->patch[1] * cfg->patch[2];
        float *tokens = malloc((size_t)T * Ko * sizeof *tokens);
        if (!tokens) st = lv_error(LV_ERR_NOMEM, "out of host memory");
        if (st == LV_OK) st = final_layer(ctx, dit, &bs, cond, tokens);
        /* like the unsplit pass: a prediction with non-finite values is still written */
        if (st == LV_OK) lv_dit_unpatchify(cfg, tokens, pass.frames, pass.height, pass.width, out);
        if (st == LV_OK) st = check_prediction(tokens, T, Ko);
        free(tokens);
    }
    if (st == LV_OK && pass.commit) st = lv_dit_state_verdict(ctx, dit);
    bands_free(ctx, &bs);
    return st;
}
