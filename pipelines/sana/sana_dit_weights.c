/* Creating a lv_dit: weights from a checked lv_sana_file to the device, the carried state
 * per layer, and the state accessors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "longvk/quant.h"
#include "sana_dit_internal.h"

lv_dtype lv_dit_rows_fit(lv_dtype dtype, int64_t k, lv_dtype stored) {
    if (dtype == LV_Q4_K && k % lv_dtype_block(LV_Q4_K, NULL)) dtype = LV_Q8_0;
    if (dtype == LV_Q8_0 && k % lv_dtype_block(LV_Q8_0, NULL)) dtype = stored;
    return dtype;
}

/* Upload tensor `name` reshaped to `shape` as `dtype`; -1: as stored. Matmul weights take
 * lv_dit_options.weights (as stored by default: f32, f16 or bf16; quantized row by row on the
 * host); the rest are f32. */
static lv_status upload(lv_ctx *ctx, const lv_sana_file *file, const char *name, int dtype, int ndim,
                        const int64_t *shape, lv_tensor *out) {
    const lv_weight *w = lv_sana_file_tensor(file, name);
    if (!w) return lv_error(LV_ERR_FORMAT, "model: tensor '%s' is missing", name);
    lv_dtype dt = dtype < 0 ? w->dtype : lv_dit_rows_fit((lv_dtype)dtype, shape[ndim - 1], w->dtype);
    return lv_tensor_from_weight(ctx, w, dt, ndim, shape, out);
}

const char *lv_dit_weights_name(lv_dit_weights rule) {
    static const char *const names[] = {"as-stored", "f32", "f16", "bf16", "q8_0", "q4_K"};
    return rule >= LV_DIT_WEIGHTS_AS_STORED && rule <= LV_DIT_WEIGHTS_Q4_K ? names[rule] : "?";
}

int lv_dit_matmul_dtype(lv_dit_weights rule) {
    switch (rule) {
    case LV_DIT_WEIGHTS_F32: return LV_F32;
    case LV_DIT_WEIGHTS_F16: return LV_F16;
    case LV_DIT_WEIGHTS_BF16: return LV_BF16;
    case LV_DIT_WEIGHTS_Q8_0: return LV_Q8_0;
    case LV_DIT_WEIGHTS_Q4_K: return LV_Q4_K;
    default: return -1;
    }
}

/* The temporal conv's [C, C, 3] weight laid out tap-major, [3, C, C] (lv_temporal_conv_taps),
 * as a matmul weight of dtype `dtype` (-1: as stored), for lv_op_temporal_conv_gemm. */
static lv_status upload_taps(lv_ctx *ctx, const lv_sana_file *file, const char *name, int dtype, int64_t C,
                             lv_tensor *out) {
    const lv_weight *w = lv_sana_file_tensor(file, name);
    if (!w) return lv_error(LV_ERR_FORMAT, "model: tensor '%s' is missing", name);
    if (lv_weight_numel(w) != (uint64_t)(3 * C * C))
        return lv_error(LV_ERR_FORMAT, "model: tensor '%s' has %llu elements, want %lld x %lld x 3", name,
                        (unsigned long long)lv_weight_numel(w), (long long)C, (long long)C);
    size_t n = (size_t)(3 * C * C);
    float *flat = malloc(n * sizeof *flat), *taps = malloc(n * sizeof *taps);
    if (!flat || !taps) {
        free(flat), free(taps);
        return lv_error(LV_ERR_NOMEM, "model: no host memory to lay out '%s'", name);
    }
    /* the file's values as f32 whatever their dtype (a GGUF's may be quantized), then tap-major */
    lv_status st = lv_dequantize_row(w->dtype, w->data, (int64_t)n, flat);
    if (st == LV_OK) {
        lv_weight f32 = {.name = name, .dtype = LV_F32, .ndim = 3, .shape = {C, C, 3}, .data = flat,
                         .nbytes = n * sizeof *flat};
        lv_temporal_conv_taps(&f32, C, taps);
        lv_weight host = {.name = name, .dtype = LV_F32, .ndim = 3, .shape = {3, C, C}, .data = taps,
                          .nbytes = n * sizeof *taps};
        lv_dtype dt = lv_dit_rows_fit(dtype < 0 ? w->dtype : (lv_dtype)dtype, C, LV_F32);
        st = lv_tensor_from_weight(ctx, &host, dt, 3, (const int64_t[]){3, C, C}, out);
    } else {
        lv_error_prefix(st, "model: tensor '%s'", name);
    }
    free(flat), free(taps);
    return st;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* keep: a matmul weight (dtype wdt); else f32 */
#define UP(keep, name, dst, ...) \
    LV_TRY(upload(ctx, file, name, (keep) ? wdt : LV_F32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), dst))

static lv_status upload_block(lv_ctx *ctx, const lv_sana_file *file, const lv_sana_config *c, int wdt,
                              int b, lv_dit_block *blk) {
    const int64_t C = c->hidden, Fh = c->ffn_hidden;
    char n[128];
#define BN(suffix) (snprintf(n, sizeof n, "blocks.%d.%s", b, suffix), n)
    UP(false, BN("scale_shift_table"), &blk->sst, 6, C);
    UP(true, BN("attn.qkv.weight"), &blk->qkv_w, 3 * C, C);
    UP(false, BN("attn.q_norm.weight"), &blk->q_norm, C);
    UP(false, BN("attn.k_norm.weight"), &blk->k_norm, C);
    UP(true, BN("attn.proj.weight"), &blk->proj_w, C, C);
    UP(false, BN("attn.proj.bias"), &blk->proj_b, C);
    UP(true, BN("cross_attn.q_linear.weight"), &blk->cq_w, C, C);
    UP(false, BN("cross_attn.q_linear.bias"), &blk->cq_b, C);
    UP(true, BN("cross_attn.kv_linear.weight"), &blk->ckv_w, 2 * C, C);
    UP(false, BN("cross_attn.kv_linear.bias"), &blk->ckv_b, 2 * C);
    UP(true, BN("cross_attn.proj.weight"), &blk->cproj_w, C, C);
    UP(false, BN("cross_attn.proj.bias"), &blk->cproj_b, C);
    UP(false, BN("cross_attn.q_norm.weight"), &blk->cq_norm, C);
    UP(false, BN("cross_attn.k_norm.weight"), &blk->ck_norm, C);
    UP(true, BN("mlp.inverted_conv.conv.weight"), &blk->inv_w, 2 * Fh, C);
    UP(false, BN("mlp.inverted_conv.conv.bias"), &blk->inv_b, 2 * Fh);
    UP(false, BN("mlp.depth_conv.conv.weight"), &blk->dw_w, 2 * Fh, 1, 3, 3);
    UP(false, BN("mlp.depth_conv.conv.bias"), &blk->dw_b, 2 * Fh);
    UP(true, BN("mlp.point_conv.conv.weight"), &blk->point_w, C, Fh);
#undef BN
    snprintf(n, sizeof n, "blocks.%d.mlp.t_conv.weight", b);
    blk->tconv_taps = lv_temporal_conv_uses_gemm(ctx);
    if (!blk->tconv_taps) return upload(ctx, file, n, LV_F32, 3, SHAPE(C, C, 3), &blk->tconv_w);
    return upload_taps(ctx, file, n, wdt, C, &blk->tconv_w);
}

static lv_status create_states(lv_ctx *ctx, lv_dit *dit) {
    lv_linattn_config lc = {
        .heads = dit->cfg.heads,
        .head_dim = dit->cfg.head_dim,
        .phi = LV_PHI_RELU,
        .normalize = true,
        .eps = dit->cfg.attn_eps,
        .rule = dit->opt.cached_blocks > 0 ? LV_RULE_WINDOW : LV_RULE_ADDITIVE,
        .window = dit->opt.cached_blocks > 0 ? dit->opt.cached_blocks : 0,
        .decay = 1.0f,
    };
    dit->state_bytes = 0;
    for (int b = 0; b < dit->cfg.depth; b++) {
        LV_TRY(lv_linattn_state_create(ctx, &lc, &dit->blocks[b].state));
        dit->state_bytes += lv_linattn_state_bytes(dit->blocks[b].state);
    }
    return LV_OK;
}

static lv_status create(lv_ctx *ctx, const lv_sana_file *file, lv_dit *dit) {
    const int wdt = lv_dit_matmul_dtype(dit->opt.weights);
    const lv_sana_config *c = &dit->cfg;
    const int64_t C = c->hidden;
    const int64_t Kin = (int64_t)c->in_channels * c->patch[0] * c->patch[1] * c->patch[2];
    const int64_t Kout = (int64_t)c->out_channels * c->patch[0] * c->patch[1] * c->patch[2];
    UP(true, "x_embedder.proj.weight", &dit->x_embed_w, C, Kin);
    UP(false, "x_embedder.proj.bias", &dit->x_embed_b, C);
    UP(true, "t_embedder.mlp.0.weight", &dit->t_mlp0_w, C, 256);
    UP(false, "t_embedder.mlp.0.bias", &dit->t_mlp0_b, C);
    UP(true, "t_embedder.mlp.2.weight", &dit->t_mlp2_w, C, C);
    UP(false, "t_embedder.mlp.2.bias", &dit->t_mlp2_b, C);
    UP(true, "t_block.1.weight", &dit->t_block_w, 6 * C, C);
    UP(false, "t_block.1.bias", &dit->t_block_b, 6 * C);
    UP(true, "y_embedder.y_proj.fc1.weight", &dit->y_fc1_w, C, c->caption_channels);
    UP(false, "y_embedder.y_proj.fc1.bias", &dit->y_fc1_b, C);
    UP(true, "y_embedder.y_proj.fc2.weight", &dit->y_fc2_w, C, C);
    UP(false, "y_embedder.y_proj.fc2.bias", &dit->y_fc2_b, C);
    UP(false, "attention_y_norm.weight", &dit->y_norm_w, C);
    UP(true, "final_layer.linear.weight", &dit->final_w, Kout, C);
    UP(false, "final_layer.linear.bias", &dit->final_b, Kout);
    UP(false, "final_layer.scale_shift_table", &dit->final_sst, 2, C);
    dit->blocks = calloc((size_t)c->depth, sizeof *dit->blocks);
    if (!dit->blocks) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int b = 0; b < c->depth; b++) LV_TRY(upload_block(ctx, file, c, wdt, b, &dit->blocks[b]));
    LV_TRY(create_states(ctx, dit));
    int64_t checks = (1 + (int64_t)c->depth) * 4;
    LV_TRY(lv_tensor_create(ctx, LV_I32, 1, &checks, &dit->checks));
    return lv_flush(ctx);
}

lv_status lv_dit_create(lv_ctx *ctx, const lv_sana_file *file, const lv_dit_options *opt,
                        lv_dit **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_dit_create: out is NULL");
    *out = NULL;
    if (!ctx || !file) return lv_error(LV_ERR_INVALID, "lv_dit_create: %s is NULL", !ctx ? "the context" : "the file");
    lv_dit *dit = calloc(1, sizeof *dit);
    if (!dit) return lv_error(LV_ERR_NOMEM, "out of host memory");
    dit->cfg = *lv_sana_file_config(file);
    dit->ffn_slice_tokens = lv_dit_ffn_slice_tokens();
    dit->opt.cached_blocks = LV_CACHED_ALL;
    if (opt) dit->opt = *opt;
    if (dit->opt.cached_blocks < 0) dit->opt.cached_blocks = LV_CACHED_ALL;
    lv_status s = LV_OK;
    if (dit->opt.weights < LV_DIT_WEIGHTS_AS_STORED || dit->opt.weights > LV_DIT_WEIGHTS_Q4_K)
        s = lv_error(LV_ERR_INVALID, "lv_dit_create: weights %d (lv_dit_weights)", (int)dit->opt.weights);
    else if (dit->opt.sp_bands < 0)
        s = lv_error(LV_ERR_INVALID, "lv_dit_create: %d sequence-parallel bands (0: off)", dit->opt.sp_bands);
    else if (dit->opt.sp_bands > 0 && dit->opt.sp_comm)
        s = lv_error(LV_ERR_INVALID, "lv_dit_create: sp_bands (%d) and sp_comm both set: one or the other",
                     dit->opt.sp_bands);
    else if (dit->opt.sp_bands > 0)
        s = lv_sp_comm_emulated_create(dit->opt.sp_bands, &dit->sp);
    else if (dit->opt.sp_comm) {
        dit->sp = dit->opt.sp_comm;
        dit->sp_borrowed = true;
    }
    if (s == LV_OK && dit->sp_borrowed) { /* D4: the same kind of device on every rank */
        const lv_device_info *dev = lv_ctx_device(ctx);
        char kind[600]; /* the comparison takes the first 511 bytes */
        snprintf(kind, sizeof kind, "%.250s (%.250s)", dev->name, dev->driver);
        s = lv_sp_comm_check_same(dit->sp, "the device", kind);
    }
    if (s == LV_OK) s = create(ctx, file, dit);
    if (s != LV_OK) {
        lv_dit_destroy(ctx, dit);
        return s;
    }
    *out = dit;
    return LV_OK;
}

void lv_dit_text_free(lv_ctx *ctx, lv_dit *dit, int slot) {
    lv_tensor_free(ctx, &dit->text_mask[slot]);
    for (int b = 0; dit->blocks && b < dit->cfg.depth; b++) {
        lv_tensor_free(ctx, &dit->blocks[b].text_k[slot]);
        lv_tensor_free(ctx, &dit->blocks[b].text_v[slot]);
    }
    dit->text_tokens[slot] = 0;
}

static void free_block(lv_ctx *ctx, lv_dit_block *blk) {
    lv_tensor *ts[] = {&blk->sst, &blk->qkv_w, &blk->q_norm, &blk->k_norm, &blk->proj_w,
                       &blk->proj_b, &blk->cq_w, &blk->cq_b, &blk->ckv_w, &blk->ckv_b,
                       &blk->cproj_w, &blk->cproj_b, &blk->cq_norm, &blk->ck_norm, &blk->inv_w,
                       &blk->inv_b, &blk->dw_w, &blk->dw_b, &blk->point_w, &blk->tconv_w,
                       &blk->conv_cache};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lv_tensor_free(ctx, ts[i]);
    if (blk->state) lv_linattn_state_destroy(ctx, blk->state);
    blk->state = NULL;
}

void lv_dit_cond_free(lv_ctx *ctx, lv_dit *dit, lv_dit_cond *c) {
    lv_tensor_free(ctx, &c->temb);
    lv_tensor_free(ctx, &c->shift);
    lv_tensor_free(ctx, &c->scale);
    for (int b = 0; c->mod && b < dit->cfg.depth; b++) lv_tensor_free(ctx, &c->mod[b]);
    free(c->mod);
    memset(c, 0, sizeof *c);
}

void lv_dit_destroy(lv_ctx *ctx, lv_dit *dit) {
    if (!dit || !ctx) return; /* its tensors belong to ctx: without it nothing can be freed */
    for (int i = 0; i < LV_DIT_COND_CACHE; i++) lv_dit_cond_free(ctx, dit, &dit->cond[i]);
    for (int slot = 0; slot < LV_DIT_TEXT_SLOTS; slot++) lv_dit_text_free(ctx, dit, slot);
    for (int b = 0; dit->blocks && b < dit->cfg.depth; b++) free_block(ctx, &dit->blocks[b]);
    free(dit->blocks);
    lv_tensor *ts[] = {&dit->x_embed_w, &dit->x_embed_b, &dit->t_mlp0_w, &dit->t_mlp0_b,
                       &dit->t_mlp2_w, &dit->t_mlp2_b, &dit->t_block_w, &dit->t_block_b,
                       &dit->y_fc1_w, &dit->y_fc1_b, &dit->y_fc2_w, &dit->y_fc2_b,
                       &dit->y_norm_w, &dit->final_w, &dit->final_b, &dit->final_sst, &dit->checks};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lv_tensor_free(ctx, ts[i]);
    if (!dit->sp_borrowed) lv_sp_comm_destroy(dit->sp);
    free(dit);
}

const lv_sana_config *lv_dit_config(const lv_dit *dit) { return dit ? &dit->cfg : NULL; }

lv_status lv_dit_reset(lv_ctx *ctx, lv_dit *dit) {
    if (!ctx || !dit) return lv_error(LV_ERR_INVALID, "lv_dit_reset: %s is NULL", !ctx ? "the context" : "the dit");
    for (int b = 0; b < dit->cfg.depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        lv_linattn_state_destroy(ctx, blk->state);
        blk->state = NULL;
        blk->conv_valid = false;
    }
    uint64_t conv = 0;
    for (int b = 0; b < dit->cfg.depth; b++)
        if (dit->blocks[b].conv_cache.alloc) conv += lv_tensor_nbytes(&dit->blocks[b].conv_cache);
    LV_TRY(create_states(ctx, dit));
    dit->state_bytes += conv;
    dit->chunks = 0;
    return LV_OK;
}

uint64_t lv_dit_state_bytes(const lv_dit *dit) { return dit ? dit->state_bytes : 0; }
bool lv_dit_carries_state(const lv_dit *dit) { return dit && dit->opt.cached_blocks != 0; }
int64_t lv_dit_chunks(const lv_dit *dit) { return dit ? dit->chunks : 0; }

void lv_dit_set_tap(lv_dit *dit, lv_dit_tap tap, void *user) {
    if (!dit) return;
    dit->tap = tap;
    dit->tap_user = user;
}

lv_status lv_dit_set_sp_comm(lv_dit *dit, struct lv_sp_comm *comm) {
    if (!dit) return lv_error(LV_ERR_INVALID, "lv_dit_set_sp_comm: the dit is NULL");
    if (!dit->sp_borrowed) lv_sp_comm_destroy(dit->sp);
    dit->sp = comm;
    dit->sp_borrowed = true;
    dit->opt.sp_bands = 0;
    dit->opt.sp_comm = comm;
    return LV_OK;
}

lv_status lv_dit_layer_state(lv_ctx *ctx, lv_dit *dit, int layer, float *S, float *z,
                             float *conv_last, int64_t conv_last_count) {
    if (!ctx || !dit)
        return lv_error(LV_ERR_INVALID, "lv_dit_layer_state: %s is NULL", !ctx ? "the context" : "the dit");
    if (layer < 0 || layer >= dit->cfg.depth)
        return lv_error(LV_ERR_INVALID, "layer %d of a %d-layer model", layer, dit->cfg.depth);
    lv_dit_block *blk = &dit->blocks[layer];
    LV_TRY(lv_linattn_state_read(ctx, blk->state, S, z));
    if (conv_last) {
        if (!blk->conv_valid) return lv_error(LV_ERR_INVALID, "layer %d has no cached frame yet", layer);
        if (conv_last_count != lv_tensor_numel(&blk->conv_cache))
            return lv_error(LV_ERR_INVALID, "conv cache of layer %d holds %lld values, %lld asked",
                            layer, (long long)lv_tensor_numel(&blk->conv_cache), (long long)conv_last_count);
        LV_TRY(lv_tensor_read(ctx, &blk->conv_cache, conv_last, (uint64_t)conv_last_count * 4));
    }
    return LV_OK;
}
