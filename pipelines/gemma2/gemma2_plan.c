/* Gemma-2's device-memory plan (longvk/gemma2.h, lv_gemma2_memory_plan): what lv_gemma2_create
 * uploads and what a pass over `tokens` tokens reserves (gemma2.c's upload and work_reserve),
 * each tensor rounded up to the engine's allocation granularity as lv_ctx_memory_in_use
 * counts it. */
#include "gemma2_internal.h"

lv_dtype g2_matmul_dtype(int requested, int64_t k, lv_dtype stored) {
    if (requested < 0 || lv_dtype_quantized(stored)) return requested == LV_F32 ? LV_F32 : stored;
    lv_dtype d = (lv_dtype)requested;
    if (d == LV_Q4_K && k % lv_dtype_block(LV_Q4_K, NULL)) d = LV_Q8_0;
    if (d == LV_Q8_0 && k % lv_dtype_block(LV_Q8_0, NULL)) d = stored;
    return d;
}

lv_dtype g2_param_dtype(int requested, lv_dtype stored) {
    if (requested < 0 || lv_dtype_quantized((lv_dtype)requested) || lv_dtype_quantized(stored)) return stored;
    return (lv_dtype)requested;
}

static uint64_t rounded(uint64_t bytes, uint64_t align) { return (bytes + align - 1) / align * align; }

lv_status lv_gemma2_memory_plan(const lv_gemma2_config *c, lv_dtype stored, int weight_dtype, int tokens,
                                uint64_t alignment, lv_gemma2_memory *out) {
    if (!c || !out) return lv_error(LV_ERR_INVALID, "lv_gemma2_memory_plan: %s is NULL", !c ? "the config" : "out");
    *out = (lv_gemma2_memory){0};
    if (stored != LV_F32 && stored != LV_F16 && stored != LV_BF16 && !lv_dtype_quantized(stored))
        return lv_error(LV_ERR_INVALID, "gemma2 memory plan: matmul weights stored as %s (f32, f16, bf16, q8_0 or "
                        "q4_k)", lv_dtype_name(stored));
    if (weight_dtype != -1 && weight_dtype != LV_F32 && weight_dtype != LV_F16 && weight_dtype != LV_BF16 &&
        weight_dtype != LV_Q8_0 && weight_dtype != LV_Q4_K)
        return lv_error(LV_ERR_INVALID, "gemma2 memory plan: weight_dtype %d (-1 as stored, or f32, f16, bf16, "
                        "q8_0, q4_k)", weight_dtype);
    if (tokens < 1 || c->num_layers < 1 || c->hidden_size < 1)
        return lv_error(LV_ERR_INVALID, "gemma2 memory plan: %d tokens through %d layers of %d", tokens, c->num_layers,
                        c->hidden_size);
    const uint64_t a = alignment < 16 ? 16 : alignment;
    uint64_t layer = 0;
    for (int t = 0; t < G2_LAYER_TENSORS; t++) {
        int64_t shape[2];
        int ndim;
        g2_layer_shape(c, t, shape, &ndim);
        if (g2_layer_is_matmul[t]) {
            lv_dtype d = g2_matmul_dtype(weight_dtype, shape[1], stored);
            uint64_t bytes = lv_dtype_bytes(d, shape[0] * shape[1]);
            if (!bytes)
                return lv_error(LV_ERR_INVALID, "gemma2 memory plan: a [%lld, %lld] matrix is not whole %s blocks",
                                (long long)shape[0], (long long)shape[1], lv_dtype_name(d));
            layer += rounded(bytes, a);
        } else {
            layer += rounded(4 * (uint64_t)shape[0], a); /* norms: f32 (1 + w) */
        }
    }
    out->weights = (uint64_t)c->num_layers * layer + rounded(4 * (uint64_t)c->hidden_size, a);
    const int64_t H = c->hidden_size, I = c->intermediate_size, QW = (int64_t)c->num_heads * c->head_dim,
                  KW = (int64_t)c->num_kv_heads * c->head_dim;
    const int64_t cols[] = {H, H, H, QW, KW, KW, QW, I, I, c->head_dim}; /* work_reserve's buffers */
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) out->work += rounded(4 * (uint64_t)tokens * cols[i], a);
    return LV_OK;
}
