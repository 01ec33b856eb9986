/* Gemma-2 on the engine (longvk/gemma2.h; the specification: README.md here, section 2).
 *
 * Per layer, on f32 activations [n, .]:
 *   x = rmsnorm(h, 1 + w_in)
 *   q, k, v = x Wq^T, x Wk^T, x Wv^T;  rotate-half RoPE on q and k (lv_op_rope_half)
 *   o = causal GQA attention (scale query_pre_attn_scalar^-0.5, sliding window on the
 *       config's sliding layers, optional soft-cap)          (lv_op_causal_attention)
 *   h = h + rmsnorm(o Wo^T, 1 + w_post_attn)
 *   x = rmsnorm(h, 1 + w_pre_ff)
 *   h = h + rmsnorm((gelu_tanh(x Wg^T) * x Wu^T) Wd^T, 1 + w_post_ff)
 * then out = rmsnorm(h, 1 + w_final). The embedding rows are looked up on the host from the
 * mapped file and scaled by sqrt(hidden) rounded to the table's dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma2_internal.h"
#include "longvk/ops.h"
#include "longvk/quant.h"

typedef struct g2_layer {
    lv_tensor t[G2_LAYER_TENSORS]; /* matmul weights in their dtype; norms f32 (1 + w) */
} g2_layer;

/* The work buffers, sized for `cap` tokens. */
typedef struct g2_work {
    int cap;
    lv_tensor h, x, a, q, k, v, o, g, u, rope;
} g2_work;

struct lv_gemma2 {
    lv_ctx *ctx;
    const lv_gemma2_file *file;
    lv_gemma2_config cfg;
    lv_gemma2_options opt;
    float softcap;
    float scale;
    float normalizer;
    int max_tokens;
    lv_dtype embed_dtype; /* the dtype embedding rows are rounded to (their stored one, or the
                             weight_dtype option) */
    g2_layer *layers;
    lv_tensor final_norm;
    uint64_t weight_bytes;
    g2_work w;
    float *host_rows; /* [cap, hidden] staging for the embedding rows */
    float *host_rope; /* [cap, head_dim] */
};

void lv_gemma2_options_default(lv_gemma2_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->attn_softcap = 0.0f;
    opt->weight_dtype = -1;
    opt->max_tokens = 0;
}

/* ---- host conversions ------------------------------------------------------------------ */

/* v rounded to dtype and back */
static float round_to(float v, lv_dtype dtype) {
    if (dtype == LV_BF16) return lv_bf16_to_float(lv_float_to_bf16(v));
    if (dtype == LV_F16) return lv_half_to_float(lv_float_to_half(v));
    return v;
}

/* ---- upload --------------------------------------------------------------------------- */

static lv_status upload_matmul(lv_gemma2 *m, const lv_weight *w, lv_tensor *out) {
    lv_dtype dst = g2_matmul_dtype(m->opt.weight_dtype, w->shape[w->ndim - 1], w->dtype);
    LV_TRY(lv_tensor_from_weight(m->ctx, w, dst, w->ndim, w->shape, out));
    m->weight_bytes += lv_tensor_nbytes(out);
    return LV_OK;
}

/* Gemma's RMSNorm scales by (1 + w), w in the parameter dtype, the sum in f32. */
static lv_status upload_norm(lv_gemma2 *m, const lv_weight *w, lv_tensor *out) {
    size_t n = (size_t)lv_weight_numel(w);
    lv_dtype param = g2_param_dtype(m->opt.weight_dtype, w->dtype);
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return lv_error(LV_ERR_NOMEM, "out of host memory for '%s'", w->name);
    /* a GGUF from llama.cpp holds 1 + w already (its converter adds the 1) */
    const float one = g2_file_norms_hold_one(m->file) ? 0.0f : 1.0f;
    for (size_t i = 0; i < n; i++) buf[i] = one + round_to(lv_weight_float(w, i), param);
    int64_t shape[1] = {(int64_t)n};
    lv_status s = lv_tensor_create(m->ctx, LV_F32, 1, shape, out);
    if (s == LV_OK) {
        m->weight_bytes += lv_tensor_nbytes(out);
        s = lv_tensor_write(m->ctx, out, buf, (uint64_t)(n * 4));
    }
    free(buf);
    return s;
}

static lv_status upload(lv_gemma2 *m) {
    const lv_gemma2_config *c = &m->cfg;
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int l = 0; l < c->num_layers; l++) {
        const lv_weight *const *src = g2_file_layer(m->file, l);
        for (int t = 0; t < G2_LAYER_TENSORS; t++) {
            lv_status s = g2_layer_is_matmul[t] ? upload_matmul(m, src[t], &m->layers[l].t[t])
                                                : upload_norm(m, src[t], &m->layers[l].t[t]);
            if (s != LV_OK) return lv_error_prefix(s, "gemma2: uploading '%s'", src[t]->name);
        }
    }
    LV_TRY(upload_norm(m, g2_file_norm(m->file), &m->final_norm));
    return lv_flush(m->ctx);
}

lv_status lv_gemma2_create(lv_ctx *ctx, const lv_gemma2_file *file, const lv_gemma2_options *opt,
                           lv_gemma2 **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_gemma2_create: no output pointer");
    *out = NULL;
    if (!ctx || !file) return lv_error(LV_ERR_INVALID, "lv_gemma2_create: no context or no model file");
    lv_gemma2 *m = calloc(1, sizeof *m);
    if (!m) return lv_error(LV_ERR_NOMEM, "out of host memory");
    m->ctx = ctx;
    m->file = file;
    m->cfg = *lv_gemma2_file_config(file);
    if (opt) m->opt = *opt;
    else lv_gemma2_options_default(&m->opt);
    const lv_gemma2_config *c = &m->cfg;
    lv_status s = LV_OK;
    float cap = m->opt.attn_softcap;
    if (cap == LV_GEMMA2_SOFTCAP_CONFIG) m->softcap = (float)c->attn_logit_softcapping;
    else if (cap >= 0.0f && isfinite(cap)) m->softcap = cap;
    else
        s = lv_error(LV_ERR_INVALID, "gemma2: attn_softcap %g: 0 (off), LV_GEMMA2_SOFTCAP_CONFIG (-1) or a cap > 0",
                     (double)cap);
    int wd = m->opt.weight_dtype;
    if (s == LV_OK && wd != -1 && wd != LV_F32 && wd != LV_F16 && wd != LV_BF16 && wd != LV_Q8_0 && wd != LV_Q4_K)
        s = lv_error(LV_ERR_INVALID, "gemma2: weight_dtype %d: -1 (as stored), LV_F32, LV_F16, LV_BF16, LV_Q8_0 or "
                     "LV_Q4_K", wd);
    if (s == LV_OK && m->opt.max_tokens < 0)
        s = lv_error(LV_ERR_INVALID, "gemma2: max_tokens %d is negative (0: the config's max_position_embeddings)",
                     m->opt.max_tokens);
    if (s == LV_OK && c->head_dim > 256)
        s = lv_error(LV_ERR_UNSUPPORTED, "gemma2: head_dim %d: the attention kernel holds at most 256 per invocation",
                     c->head_dim);
    if (s == LV_OK) {
        m->max_tokens = m->opt.max_tokens ? m->opt.max_tokens : c->max_position_embeddings;
        if (m->max_tokens > c->max_position_embeddings) m->max_tokens = c->max_position_embeddings;
        const lv_weight *e = g2_file_embed(file);
        m->embed_dtype = g2_param_dtype(wd, e->dtype);
        /* transformers: torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype) */
        m->normalizer = round_to((float)sqrt((double)c->hidden_size), m->embed_dtype);
        m->scale = (float)pow(c->query_pre_attn_scalar, -0.5);
        s = upload(m);
    }
    if (s != LV_OK) {
        lv_gemma2_destroy(m);
        return s;
    }
    *out = m;
    return LV_OK;
}

static void work_free(lv_gemma2 *m) {
    lv_tensor *ts[] = {&m->w.h, &m->w.x, &m->w.a, &m->w.q, &m->w.k, &m->w.v, &m->w.o, &m->w.g, &m->w.u, &m->w.rope};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lv_tensor_free(m->ctx, ts[i]);
    memset(&m->w, 0, sizeof m->w);
    free(m->host_rows);
    free(m->host_rope);
    m->host_rows = m->host_rope = NULL;
}

void lv_gemma2_release_work(lv_gemma2 *m) {
    if (m) work_free(m);
}

void lv_gemma2_destroy(lv_gemma2 *m) {
    if (!m) return;
    work_free(m);
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++)
        for (int t = 0; t < G2_LAYER_TENSORS; t++) lv_tensor_free(m->ctx, &m->layers[l].t[t]);
    free(m->layers);
    lv_tensor_free(m->ctx, &m->final_norm);
    free(m);
}

const lv_gemma2_config *lv_gemma2_config_of(const lv_gemma2 *m) { return m ? &m->cfg : NULL; }
float lv_gemma2_softcap(const lv_gemma2 *m) { return m ? m->softcap : 0.0f; }

void lv_gemma2_memory_usage(const lv_gemma2 *m, lv_gemma2_memory *out) {
    memset(out, 0, sizeof *out);
    if (!m) return;
    out->weights = m->weight_bytes;
    const lv_tensor *ts[] = {&m->w.h, &m->w.x, &m->w.a, &m->w.q, &m->w.k, &m->w.v, &m->w.o, &m->w.g, &m->w.u,
                             &m->w.rope};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (ts[i]->alloc) out->work += lv_tensor_nbytes(ts[i]);
    out->host_embedding = g2_file_embed(m->file)->nbytes;
}

/* ---- the forward pass ------------------------------------------------------------------- */

static lv_status work_reserve(lv_gemma2 *m, int n) {
    if (m->w.cap >= n) return LV_OK;
    work_free(m);
    const lv_gemma2_config *c = &m->cfg;
    int64_t H = c->hidden_size, I = c->intermediate_size, QW = (int64_t)c->num_heads * c->head_dim,
            KW = (int64_t)c->num_kv_heads * c->head_dim;
    struct { lv_tensor *t; int64_t cols; } need[] = {
        {&m->w.h, H}, {&m->w.x, H}, {&m->w.a, H}, {&m->w.q, QW}, {&m->w.k, KW}, {&m->w.v, KW},
        {&m->w.o, QW}, {&m->w.g, I}, {&m->w.u, I}, {&m->w.rope, c->head_dim},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        int64_t shape[2] = {n, need[i].cols};
        lv_status s = lv_tensor_create(m->ctx, LV_F32, 2, shape, need[i].t);
        if (s != LV_OK) {
            work_free(m);
            return lv_error_prefix(s, "gemma2: work buffers for %d tokens", n);
        }
    }
    m->host_rows = malloc((size_t)n * (size_t)H * sizeof(float));
    m->host_rope = malloc((size_t)n * (size_t)c->head_dim * sizeof(float));
    if (!m->host_rows || !m->host_rope) {
        work_free(m);
        return lv_error(LV_ERR_NOMEM, "gemma2: out of host memory for %d tokens", n);
    }
    m->w.cap = n;
    return LV_OK;
}

/* h = embed[ids] * normalizer, rows looked up in the mapped file. */
static lv_status embed(lv_gemma2 *m, const int32_t *ids, int n, const lv_tensor *h) {
    const lv_weight *e = g2_file_embed(m->file);
    const int64_t H = m->cfg.hidden_size;
    int round = e->dtype != m->embed_dtype;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return lv_error(LV_ERR_INVALID, "gemma2: token id %d at position %d is outside the vocabulary (%d)",
                            (int)ids[i], i, m->cfg.vocab_size);
        float *dst = m->host_rows + (size_t)i * H;
        size_t base = (size_t)ids[i] * (size_t)H;
        if (lv_dtype_quantized(e->dtype)) { /* a GGUF's q8_0 table: the row's blocks */
            LV_TRY(lv_dequantize_row(e->dtype, (const uint8_t *)e->data + lv_dtype_bytes(e->dtype, (int64_t)base), H,
                                     dst));
            for (int64_t j = 0; j < H; j++) dst[j] *= m->normalizer;
            continue;
        }
        for (int64_t j = 0; j < H; j++) {
            float v = lv_weight_float(e, base + (size_t)j);
            if (round) v = round_to(v, m->embed_dtype);
            dst[j] = v * m->normalizer;
        }
    }
    return lv_tensor_write(m->ctx, h, m->host_rows, (uint64_t)n * (uint64_t)H * 4);
}

/* The rotary table [n, head_dim] of (cos, sin) per pair j at positions 0..n-1, computed the
 * way transformers does in fp32: inv_freq_j = 1 / theta^(2j / d), angle = pos * inv_freq_j. */
static lv_status rope_table(lv_gemma2 *m, int n, const lv_tensor *table) {
    const int d = m->cfg.head_dim;
    const float theta = (float)m->cfg.rope_theta;
    for (int j = 0; j < d / 2; j++) {
        float inv = 1.0f / powf(theta, (float)(2 * j) / (float)d);
        for (int p = 0; p < n; p++) {
            float ang = (float)p * inv;
            m->host_rope[(size_t)p * d + 2 * j] = (float)cos((double)ang);
            m->host_rope[(size_t)p * d + 2 * j + 1] = (float)sin((double)ang);
        }
    }
    return lv_tensor_write(m->ctx, table, m->host_rope, (uint64_t)n * (uint64_t)d * 4);
}

static lv_status layer(lv_gemma2 *m, int l, int n) {
    lv_ctx *ctx = m->ctx;
    const lv_gemma2_config *c = &m->cfg;
    const lv_tensor *W = m->layers[l].t;
    const float eps = (float)c->rms_norm_eps;
    lv_tensor h = lv_tensor_rows(&m->w.h, 0, n), x = lv_tensor_rows(&m->w.x, 0, n), a = lv_tensor_rows(&m->w.a, 0, n);
    lv_tensor q = lv_tensor_rows(&m->w.q, 0, n), k = lv_tensor_rows(&m->w.k, 0, n), v = lv_tensor_rows(&m->w.v, 0, n);
    lv_tensor o = lv_tensor_rows(&m->w.o, 0, n), g = lv_tensor_rows(&m->w.g, 0, n), u = lv_tensor_rows(&m->w.u, 0, n);
    lv_tensor rope = lv_tensor_rows(&m->w.rope, 0, n);
    int window = c->sliding[l] ? c->sliding_window : 0;

    LV_TRY(lv_op_rmsnorm(ctx, &x, &h, &W[G2_IN_NORM], eps));
    LV_TRY(lv_op_matmul(ctx, &q, &x, &W[G2_Q], NULL));
    LV_TRY(lv_op_matmul(ctx, &k, &x, &W[G2_K], NULL));
    LV_TRY(lv_op_matmul(ctx, &v, &x, &W[G2_V], NULL));
    LV_TRY(lv_op_rope_half(ctx, &q, &q, &rope));
    LV_TRY(lv_op_rope_half(ctx, &k, &k, &rope));
    LV_TRY(lv_op_causal_attention(ctx, &o, &q, &k, &v, c->num_heads, c->num_kv_heads, m->scale, window, m->softcap));
    LV_TRY(lv_op_matmul(ctx, &a, &o, &W[G2_O], NULL));
    LV_TRY(lv_op_rmsnorm(ctx, &x, &a, &W[G2_POST_ATTN_NORM], eps));
    LV_TRY(lv_op_add(ctx, &h, &h, &x));
    LV_TRY(lv_op_rmsnorm(ctx, &x, &h, &W[G2_PRE_FF_NORM], eps));
    LV_TRY(lv_op_matmul(ctx, &g, &x, &W[G2_GATE], NULL));
    LV_TRY(lv_op_matmul(ctx, &u, &x, &W[G2_UP], NULL));
    LV_TRY(lv_op_mul_gelu_tanh(ctx, &u, &u, &g));
    LV_TRY(lv_op_matmul(ctx, &a, &u, &W[G2_DOWN], NULL));
    LV_TRY(lv_op_rmsnorm(ctx, &x, &a, &W[G2_POST_FF_NORM], eps));
    LV_TRY(lv_op_add(ctx, &h, &h, &x));
    return LV_OK;
}

/* Runs the embedding and `layers` layers; the result (final-normed if asked) is left in
 * *result: a view of the work buffers, valid until the next call. */
static lv_status run(lv_gemma2 *m, const int32_t *ids, int n, int layers, int final_norm, lv_tensor *result) {
    if (!m) return lv_error(LV_ERR_INVALID, "gemma2: no encoder");
    if (n < 1 || !ids) return lv_error(LV_ERR_INVALID, "gemma2: %d tokens: at least one (<bos>) is needed", n);
    if (n > m->max_tokens)
        return lv_error(LV_ERR_LIMIT,
                        "gemma2: %d tokens exceed the encoder's limit of %d (max_tokens, at most the config's "
                        "max_position_embeddings %d): truncate the prompt (SANA-Video keeps 300 tokens after its "
                        "instruction)",
                        n, m->max_tokens, m->cfg.max_position_embeddings);
    if (layers < 0 || layers > m->cfg.num_layers)
        return lv_error(LV_ERR_INVALID, "gemma2: %d layers asked for, the model has %d", layers, m->cfg.num_layers);
    LV_TRY(work_reserve(m, n));
    lv_tensor h = lv_tensor_rows(&m->w.h, 0, n), x = lv_tensor_rows(&m->w.x, 0, n);
    lv_tensor rope = lv_tensor_rows(&m->w.rope, 0, n);
    LV_TRY(embed(m, ids, n, &h));
    LV_TRY(rope_table(m, n, &rope));
    for (int l = 0; l < layers; l++) {
        if (m->opt.stop && *m->opt.stop)
            return lv_error(LV_ERR_INTERRUPTED, "gemma2: stopped on request after %d of %d layers", l, layers);
        lv_status s = layer(m, l, n);
        if (s == LV_OK && m->opt.stop) s = lv_flush(m->ctx); /* the layer done: a stop waits for one layer at most */
        if (s != LV_OK) return lv_error_prefix(s, "gemma2: layer %d of %d tokens", l, n);
    }
    if (final_norm) {
        LV_TRY(lv_op_rmsnorm(m->ctx, &x, &h, &m->final_norm, (float)m->cfg.rms_norm_eps));
        *result = x;
    } else {
        *result = h;
    }
    return LV_OK;
}

lv_status lv_gemma2_encode_layers(lv_gemma2 *m, const int32_t *ids, int n, int layers, int final_norm, float *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "gemma2: no output array");
    lv_tensor r;
    LV_TRY(run(m, ids, n, layers, final_norm, &r));
    return lv_tensor_read(m->ctx, &r, out, lv_tensor_nbytes(&r));
}

lv_status lv_gemma2_encode(lv_gemma2 *m, const int32_t *ids, int n, float *out) {
    return lv_gemma2_encode_layers(m, ids, n, m ? m->cfg.num_layers : 0, 1, out);
}

lv_status lv_gemma2_forward(lv_gemma2 *m, const int32_t *ids, int n, const lv_tensor *out) {
    if (!m || !out) return lv_error(LV_ERR_INVALID, "gemma2: no encoder or no output tensor");
    char d[96];
    if (out->dtype != LV_F32 || out->ndim != 2 || out->shape[0] != n || out->shape[1] != m->cfg.hidden_size)
        return lv_error(LV_ERR_INVALID, "gemma2: the output tensor is %s, want [%d, %d] f32",
                        lv_tensor_describe(out, d, sizeof d), n, m->cfg.hidden_size);
    lv_tensor r;
    LV_TRY(run(m, ids, n, m->cfg.num_layers, 1, &r));
    return lv_tensor_copy(m->ctx, out, &r);
}
