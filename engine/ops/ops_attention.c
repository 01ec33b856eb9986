/* Softmax attention over a short, masked key set: the DiT's cross-attention to text; and
 * causal self-attention with grouped-query heads, a sliding window and a soft-cap: a text
 * encoder's (Gemma-2). One shader, told apart by specialization constants. */
#include <math.h>

#include "longvk/ops.h"
#include "lv_internal.h"
#include "op_helpers.h"
#include "push_softmax_attention.h"

/* Largest head dimension: the queries and accumulators of an invocation live in its
 * registers (or, on CPU devices, its stack). */
#define LV_ATTN_MAX_HEAD_DIM 256
/* lavapipe (llvmpipe) stops every loop of an invocation once their iterations add up to
 * 65535 (LP_MAX_TGSI_LOOP_ITERATIONS), silently; stay well below. */
#define LV_LAVAPIPE_LOOP_BUDGET 60000

/* Specialization constants of shaders/softmax_attention.comp. */
typedef struct attn_tile {
    uint32_t local;       /* invocations per workgroup */
    uint32_t key_block;   /* keys per online-softmax step */
    uint32_t query_block; /* queries per invocation */
    uint32_t dim_step;    /* head dims per unrolled loop step */
} attn_tile;

static attn_tile choose_tile(const lv_ctx *ctx, int64_t head_dim) {
    if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU)
        /* lavapipe: one thread runs a workgroup as 8-wide SIMD, every buffer load in a loop
         * is a per-lane gather: reuse each loaded k/v value for 8 queries and each q/acc
         * value for 8 keys (measured: 1.3 GFLOP/s with 1 query per invocation, 4.3 with
         * 8); head-dim loops stay loops (compile time, see the shader) */
        return (attn_tile){8, 8, 8, 4};
    /* GPUs: one query per thread, head dims fully unrolled so q and acc are registers */
    return (attn_tile){64, 8, 1, (uint32_t)head_dim};
}

/* Loop iterations one invocation runs for L keys (the lavapipe limit above). */
static int64_t loop_iterations(const attn_tile *t, int64_t head_dim, int64_t l) {
    int64_t steps = (head_dim + t->dim_step - 1) / t->dim_step;
    int64_t blocks = (l + t->key_block - 1) / t->key_block;
    return blocks * (2 * steps + 1) + steps * (1 + t->query_block);
}

/* What sets the two ops apart. */
typedef struct attn_mode {
    const char *op;
    int kv_heads;
    bool causal;
    int window;
    float softcap;
} attn_mode;

static lv_status attention(lv_ctx *ctx, const attn_mode *md, const lv_tensor *out, const lv_tensor *q,
                           const lv_tensor *k, const lv_tensor *v, const lv_tensor *mask, int heads,
                           float scale) {
    const char *op = md->op;
    char d0[96], d1[96], d2[96];
    if (!out || !q || !k || !v)
        return lv_error(LV_ERR_INVALID, "%s: out, q, k and v are required", op);
    const lv_tensor *all[5] = {out, q, k, v, mask};
    const char *names[5] = {"out", "q", "k", "v", "mask"};
    for (int i = 0; i < 5; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "%s: %s must be f32, got %s", op,
                            names[i], lv_tensor_describe(all[i], d0, sizeof d0));
    if (q->ndim != 2 || k->ndim != 2 || v->ndim != 2 || !lv_tensor_same_shape(out, q))
        return lv_error(LV_ERR_INVALID, "%s: want q and out [N, H*D], k and v "
                        "[L, %s*D]; got q %s, out %s, k %s", op, md->causal ? "KV" : "H",
                        lv_tensor_describe(q, d0, sizeof d0), lv_tensor_describe(out, d1, sizeof d1),
                        lv_tensor_describe(k, d2, sizeof d2));
    int64_t n = q->shape[0], width = q->shape[1], l = k->shape[0];
    if (heads <= 0 || width % heads != 0)
        return lv_error(LV_ERR_INVALID, "%s: %d heads do not divide the row "
                        "width %lld", op, heads, (long long)width);
    int64_t head_dim = width / heads;
    if (md->kv_heads <= 0 || heads % md->kv_heads != 0)
        return lv_error(LV_ERR_INVALID, "%s: %d kv heads do not divide the %d query heads", op,
                        md->kv_heads, heads);
    int64_t kv_width = head_dim * md->kv_heads;
    if (!lv_tensor_same_shape(k, v) || k->shape[1] != kv_width)
        return lv_error(LV_ERR_INVALID, "%s: k %s and v %s must both be [L, %lld] "
                        "(%d heads of %lld)", op, lv_tensor_describe(k, d0, sizeof d0),
                        lv_tensor_describe(v, d1, sizeof d1), (long long)kv_width, md->kv_heads,
                        (long long)head_dim);
    if (head_dim > LV_ATTN_MAX_HEAD_DIM)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: head dimension %lld exceeds "
                        "the kernel's %d (held per invocation)", op, (long long)head_dim,
                        LV_ATTN_MAX_HEAD_DIM);
    if (mask && lv_tensor_numel(mask) != l)
        return lv_error(LV_ERR_INVALID, "%s: mask %s must have L = %lld "
                        "elements", op, lv_tensor_describe(mask, d0, sizeof d0), (long long)l);
    if (!isfinite(scale))
        return lv_error(LV_ERR_INVALID, "%s: scale %g is not finite", op, (double)scale);
    if (md->causal && n > l)
        return lv_error(LV_ERR_INVALID, "%s: %lld queries but %lld keys: the queries are the "
                        "last N of the L positions, so N <= L", op, (long long)n, (long long)l);
    if (md->window < 0)
        return lv_error(LV_ERR_INVALID, "%s: window %d is negative (0: none)", op, md->window);
    if (!(md->softcap >= 0.0f) || !isfinite(md->softcap))
        return lv_error(LV_ERR_INVALID, "%s: soft-cap %g must be 0 (off) or positive", op,
                        (double)md->softcap);
    for (int i = 1; i < 5; i++)
        if (all[i]) LV_TRY(lv_check_alias(op, out, names[i], all[i], false));
    if (n == 0) return LV_OK;
    if (l == 0) return lv_op_fill(ctx, out, 0.0f); /* no key at all: like all masked */
    if (l > (int64_t)UINT32_MAX / 2 || n > (int64_t)UINT32_MAX / 2)
        return lv_error(LV_ERR_LIMIT, "%s: %lld keys, %lld queries: too many", op, (long long)l,
                        (long long)n);
    if ((uint64_t)heads > ctx->limits.maxComputeWorkGroupCount[1])
        return lv_error(LV_ERR_LIMIT, "%s: %d heads exceed the device's "
                        "maxComputeWorkGroupCount[1] (%u)", op, heads,
                        ctx->limits.maxComputeWorkGroupCount[1]);
    attn_tile tile = choose_tile(ctx, head_dim);
    if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU &&
        loop_iterations(&tile, head_dim, l) > LV_LAVAPIPE_LOOP_BUDGET)
        return lv_error(LV_ERR_LIMIT, "%s: %lld keys of head dimension %lld need "
                        "%lld loop iterations per invocation; CPU Vulkan drivers (lavapipe) stop "
                        "loops after 65535", op, (long long)l, (long long)head_dim,
                        (long long)loop_iterations(&tile, head_dim, l));

    /* Queries go in chunks so that q and out fit one binding each; k, v and the mask (a
     * few MiB at most for text) are bound whole. */
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    uint64_t row_bytes = (uint64_t)width * 4;
    uint64_t max_binding = lv_ctx_max_binding(ctx);
    if (lv_tensor_nbytes(k) + align > max_binding)
        return lv_error(LV_ERR_LIMIT, "%s: k and v %s need %llu bytes in one "
                        "binding; the device allows %llu (maxStorageBufferRange)", op,
                        lv_tensor_describe(k, d0, sizeof d0),
                        (unsigned long long)(lv_tensor_nbytes(k) + align),
                        (unsigned long long)max_binding);
    int64_t chunk = row_bytes + align <= max_binding ? (int64_t)((max_binding - align) / row_bytes) : 0;
    if (chunk < 1)
        return lv_error(LV_ERR_LIMIT, "%s: one query row (%llu bytes) exceeds "
                        "the device's binding limit (%llu bytes)", op, (unsigned long long)row_bytes,
                        (unsigned long long)max_binding);
    int64_t per_group = (int64_t)tile.local * tile.query_block;
    int64_t max_chunk = (int64_t)ctx->limits.maxComputeWorkGroupCount[0] * per_group;
    if (chunk > max_chunk) chunk = max_chunk;
    uint32_t spec[7] = {tile.local, (uint32_t)head_dim, tile.key_block, tile.query_block,
                        tile.dim_step, md->causal ? 1u : 0u, md->softcap > 0.0f ? 1u : 0u};
    /* the non-causal op keeps its five constants: the same pipelines as before */
    uint32_t nspec = md->causal || md->softcap > 0.0f ? 7 : 5;

    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
        int64_t rows = n - n0 < chunk ? n - n0 : chunk;
        lv_tensor qc = lv_tensor_rows(q, n0, rows), oc = lv_tensor_rows(out, n0, rows);
        lv_binding b[5] = {{&oc, true, 0}, {&qc, false, 0}, {k, false, 0}, {v, false, 0},
                           {mask ? mask : k, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_SOFTMAX_ATTN, b, 5));
        lv_push_softmax_attention pc = {
            .out_offset = b[0].elem_offset,
            .q_offset = b[1].elem_offset,
            .k_offset = b[2].elem_offset,
            .v_offset = b[3].elem_offset,
            .mask_offset = b[4].elem_offset,
            .n = (uint32_t)rows,
            .l = (uint32_t)l,
            .heads = (uint32_t)heads,
            .has_mask = mask ? 1u : 0u,
            .scale_log2e = md->softcap > 0.0f ? scale : scale * 1.44269504088896340736f,
            .kv_heads = (uint32_t)md->kv_heads,
            .q_pos0 = (uint32_t)(l - n + n0),
            .window = (uint32_t)md->window,
            .softcap = md->softcap,
        };
        uint32_t gx = (uint32_t)((rows + per_group - 1) / per_group);
        LV_TRY(lv_dispatch(ctx, LV_OP_SOFTMAX_ATTN, spec, nspec, b, 5, &pc, sizeof pc, gx,
                           (uint32_t)heads, 1));
    }
    return LV_OK;
}

lv_status lv_op_softmax_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                  const lv_tensor *k, const lv_tensor *v,
                                  const lv_tensor *mask, int heads, float scale) {
    attn_mode md = {"softmax_attention", heads, false, 0, 0.0f};
    return attention(ctx, &md, out, q, k, v, mask, heads, scale);
}

lv_status lv_op_causal_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                 const lv_tensor *k, const lv_tensor *v, int heads, int kv_heads,
                                 float scale, int window, float softcap) {
    attn_mode md = {"causal_attention", kv_heads, true, window, softcap};
    return attention(ctx, &md, out, q, k, v, NULL, heads, scale);
}
