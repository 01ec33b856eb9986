/* The DiT's device-memory plan (longvk/dit.h, lv_dit_memory_plan_of): every tensor that
 * lv_dit_create, lv_dit_set_text and lv_dit_forward allocate, in the sizes the engine
 * counts them (each rounded up to the allocation granularity). Keep it in step with
 * sana_dit_weights.c (what is uploaded, in which dtype) and sana_dit.c (what a pass
 * allocates, and when it is released); tests/models/test_dit_memory_plan.c measures both. */
#include "longvk/ops.h"
#include "sana_dit_internal.h"

typedef struct plan_sizes {
    uint64_t align; /* the allocation granularity every tensor's bytes are rounded up to */
} plan_sizes;

static uint64_t tensor_bytes(const plan_sizes *p, lv_dtype dtype, int64_t n) {
    uint64_t b = lv_dtype_bytes(dtype, n);
    if (b == 0) b = 1;
    return (b + p->align - 1) / p->align * p->align;
}

static uint64_t f32(const plan_sizes *p, int64_t n) { return tensor_bytes(p, LV_F32, n); }

static lv_dtype rule_dtype(lv_dit_weights rule, lv_dtype stored) {
    int dt = lv_dit_matmul_dtype(rule);
    return dt < 0 ? stored : (lv_dtype)dt;
}

/* a [rows, k] matrix weight */
static uint64_t matrix(const plan_sizes *p, lv_dtype want, lv_dtype stored, int64_t rows, int64_t k) {
    return tensor_bytes(p, lv_dit_rows_fit(want, k, stored), rows * k);
}

static uint64_t weights_bytes(const plan_sizes *p, const lv_sana_config *c, const lv_dit_plan_input *in) {
    const lv_dtype w = rule_dtype(in->weights, in->stored), st = in->stored;
    const int64_t C = c->hidden, Fh = c->ffn_hidden;
    const int64_t Kin = (int64_t)c->in_channels * c->patch[0] * c->patch[1] * c->patch[2];
    const int64_t Kout = (int64_t)c->out_channels * c->patch[0] * c->patch[1] * c->patch[2];
    uint64_t b = matrix(p, w, st, C, Kin) + f32(p, C) + matrix(p, w, st, C, 256) + f32(p, C) +
                 matrix(p, w, st, C, C) + f32(p, C) + matrix(p, w, st, 6 * C, C) + f32(p, 6 * C) +
                 matrix(p, w, st, C, c->caption_channels) + f32(p, C) + matrix(p, w, st, C, C) + f32(p, C) +
                 f32(p, C) + matrix(p, w, st, Kout, C) + f32(p, Kout) + f32(p, 2 * C);
    uint64_t blk = f32(p, 6 * C) + matrix(p, w, st, 3 * C, C) + 2 * f32(p, C) + matrix(p, w, st, C, C) + f32(p, C) +
                   matrix(p, w, st, C, C) + f32(p, C) + matrix(p, w, st, 2 * C, C) + f32(p, 2 * C) +
                   matrix(p, w, st, C, C) + f32(p, C) + 2 * f32(p, C) + matrix(p, w, st, 2 * Fh, C) +
                   f32(p, 2 * Fh) + f32(p, 2 * Fh * 9) + f32(p, 2 * Fh) + matrix(p, w, st, C, Fh);
    /* the temporal conv: tap-major [3C, C] as a matmul weight (whose q8_0 fallback is f32),
     * or f32 [C, C, 3] for the direct kernel */
    blk += in->tconv_gemm ? tensor_bytes(p, lv_dit_rows_fit(w, C, LV_F32), 3 * C * C) : f32(p, 3 * C * C);
    return b + (uint64_t)c->depth * blk;
}

/* lv_linattn_state_create's slots, and the conv cache of the first write pass */
static uint64_t state_bytes(const plan_sizes *p, const lv_sana_config *c, const lv_dit_plan_input *in,
                            int64_t tokens_per_frame) {
    const int64_t m = (int64_t)c->heads * c->head_dim * (c->head_dim + 1);
    uint64_t layer = 2 * f32(p, m); /* own, eff */
    layer += f32(p, (in->cached_blocks > 0 ? in->cached_blocks : 1) * m); /* ring of K, or carried */
    if (in->linattn_splits > 1) layer += f32(p, (int64_t)in->linattn_splits * m);
    if (in->cached_blocks != 0 && tokens_per_frame > 0) layer += f32(p, tokens_per_frame * c->hidden);
    return (uint64_t)c->depth * layer;
}

lv_status lv_dit_memory_plan_of(const lv_sana_config *cfg, const lv_dit_plan_input *in, lv_dit_memory_plan *out) {
    if (!cfg || !in || !out)
        return lv_error(LV_ERR_INVALID, "lv_dit_memory_plan_of: %s is NULL", !cfg ? "the config" : !in ? "the input" : "out");
    *out = (lv_dit_memory_plan){0};
    const lv_sana_config *c = cfg;
    if (c->depth < 1 || c->hidden < 1 || c->heads < 1 || c->head_dim < 1 || c->ffn_hidden < 1 ||
        c->patch[0] < 1 || c->patch[1] < 1 || c->patch[2] < 1)
        return lv_error(LV_ERR_INVALID, "memory plan: the config is not a model's (depth %d, hidden %d)", c->depth, c->hidden);
    if (in->frames <= 0 || in->height <= 0 || in->width <= 0 || in->frames % c->patch[0] ||
        in->height % c->patch[1] || in->width % c->patch[2])
        return lv_error(LV_ERR_INVALID, "memory plan: latent size %dx%dx%d is not whole patches of %dx%dx%d",
                        in->frames, in->height, in->width, c->patch[0], c->patch[1], c->patch[2]);
    if (in->text_tokens < 1 || in->text_tokens > LV_DIT_MAX_TEXT || in->text_slots < 1 || in->text_slots > LV_DIT_TEXT_SLOTS)
        return lv_error(LV_ERR_INVALID, "memory plan: %d text slots of %d tokens (1 to %d slots of 1 to %d)",
                        in->text_slots, in->text_tokens, LV_DIT_TEXT_SLOTS, LV_DIT_MAX_TEXT);
    if (in->precision != LV_PRECISION_F32 && in->precision != LV_PRECISION_F16 && in->precision != LV_PRECISION_BF16)
        return lv_error(LV_ERR_INVALID, "memory plan: precision %d (f32, f16 or bf16)", (int)in->precision);
    if (!lv_dtype_size(in->stored) && !lv_dtype_quantized(in->stored))
        return lv_error(LV_ERR_INVALID, "memory plan: stored dtype %s", lv_dtype_name(in->stored));
    plan_sizes p = {.align = in->alignment < 16 ? 16 : in->alignment};
    const lv_dtype act = in->precision == LV_PRECISION_F16 ? LV_F16 : in->precision == LV_PRECISION_BF16 ? LV_BF16 : LV_F32;
    const int64_t C = c->hidden, Fh = c->ffn_hidden, L = in->text_tokens;
    const int64_t F = in->frames / c->patch[0];
    const int64_t P = (int64_t)(in->height / c->patch[1]) * (in->width / c->patch[2]), T = F * P;
    const int64_t Kin = (int64_t)c->in_channels * c->patch[0] * c->patch[1] * c->patch[2];
    const int64_t Kout = (int64_t)c->out_channels * c->patch[0] * c->patch[1] * c->patch[2];
    const uint64_t checks = tensor_bytes(&p, LV_I32, (1 + (int64_t)c->depth) * 4);

    out->weights = weights_bytes(&p, c, in);
    out->state = state_bytes(&p, c, in, P);
    const uint64_t slot = f32(&p, L) + (uint64_t)c->depth * 2 * f32(&p, L * C); /* mask, K and V per block */
    out->text = (uint64_t)in->text_slots * slot;
    /* lv_dit_set_text of the last slot: its caption input and embedder scratch beside the
     * other slots' and its own K and V; no conv cache is committed yet */
    out->set_text = out->weights + state_bytes(&p, c, in, 0) + checks + out->text + f32(&p, L * c->caption_channels) +
                    2 * f32(&p, L * C);
    /* every cache entry: temb, shift, scale [F, C] and each block's modulations [6F, C] */
    out->conditioning = LV_DIT_COND_CACHE * (3 * f32(&p, F * C) + (uint64_t)c->depth * f32(&p, 6 * F * C));
    /* patches, x, the conditioning's scratch (sinusoid, two [F, C], t_block's [6F, C]) when
     * the pass meets new timesteps, and the rotary table */
    out->pass = f32(&p, T * Kin) + f32(&p, T * C) + f32(&p, F * 256) + 2 * f32(&p, F * C) + f32(&p, 6 * F * C) +
                f32(&p, T * c->head_dim);
    /* linear attention: h (act), q, k, v, o; cross-attention: q, o; Mix-FFN: h (act), a and
     * gate (act), their depthwise convs' outputs (act), each [one slice of frames, Fh], u and
     * the temporal conv's output. Released together at the block's end. */
    const int64_t S = (int64_t)lv_dit_ffn_slice_frames((int)F, P, in->ffn_slice_tokens) * P;
    out->block = tensor_bytes(&p, act, T * C) + 4 * f32(&p, T * C) + 2 * f32(&p, T * C) + tensor_bytes(&p, act, T * C) +
                 4 * tensor_bytes(&p, act, S * Fh) + 2 * f32(&p, T * C);
    out->final_layer = tensor_bytes(&p, act, T * C) + f32(&p, T * Kout);
    const uint64_t held = out->weights + out->state + checks + out->text + out->conditioning;
    out->passes = held + out->pass + (out->block > out->final_layer ? out->block : out->final_layer);
    out->peak = out->passes > out->set_text ? out->passes : out->set_text;
    return LV_OK;
}

void lv_dit_plan_device(const lv_ctx *ctx, lv_dit_plan_input *in) {
    if (!ctx || !in) return;
    in->tconv_gemm = lv_temporal_conv_uses_gemm(ctx);
    in->linattn_splits = lv_linattn_splits(ctx);
    in->ffn_slice_tokens = lv_dit_ffn_slice_tokens();
    in->alignment = lv_ctx_alloc_alignment(ctx);
}
