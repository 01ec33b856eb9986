/* Softmax attention over a short, masked key set: the DiT's cross-attention to text. */
#include <math.h>

#include "longvk/ops.h"
#include "lv_internal.h"
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

static bool overlaps(const lv_tensor *a, const lv_tensor *b) {
    if (!a->alloc || a->alloc != b->alloc) return false;
    uint64_t a0 = a->offset, a1 = a0 + lv_tensor_nbytes(a);
    uint64_t b0 = b->offset, b1 = b0 + lv_tensor_nbytes(b);
    return a0 < b1 && b0 < a1;
}

lv_status lv_op_softmax_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                  const lv_tensor *k, const lv_tensor *v,
                                  const lv_tensor *mask, int heads, float scale) {
    char d0[96], d1[96], d2[96];
    if (!out || !q || !k || !v)
        return lv_error(LV_ERR_INVALID, "softmax_attention: out, q, k and v are required");
    const lv_tensor *all[5] = {out, q, k, v, mask};
    const char *names[5] = {"out", "q", "k", "v", "mask"};
    for (int i = 0; i < 5; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "softmax_attention: %s must be f32, got %s",
                            names[i], lv_tensor_describe(all[i], d0, sizeof d0));
    if (q->ndim != 2 || k->ndim != 2 || v->ndim != 2 || !lv_tensor_same_shape(out, q))
        return lv_error(LV_ERR_INVALID, "softmax_attention: want q and out [N, H*D], k and v "
                        "[L, H*D]; got q %s, out %s, k %s",
                        lv_tensor_describe(q, d0, sizeof d0), lv_tensor_describe(out, d1, sizeof d1),
                        lv_tensor_describe(k, d2, sizeof d2));
    int64_t n = q->shape[0], width = q->shape[1], l = k->shape[0];
    if (!lv_tensor_same_shape(k, v) || k->shape[1] != width)
        return lv_error(LV_ERR_INVALID, "softmax_attention: k %s and v %s must both be [L, %lld] "
                        "like q's rows", lv_tensor_describe(k, d0, sizeof d0),
                        lv_tensor_describe(v, d1, sizeof d1), (long long)width);
    if (heads <= 0 || width % heads != 0)
        return lv_error(LV_ERR_INVALID, "softmax_attention: %d heads do not divide the row "
                        "width %lld", heads, (long long)width);
    int64_t head_dim = width / heads;
    if (head_dim > LV_ATTN_MAX_HEAD_DIM)
        return lv_error(LV_ERR_UNSUPPORTED, "softmax_attention: head dimension %lld exceeds "
                        "the kernel's %d (held per invocation)", (long long)head_dim,
                        LV_ATTN_MAX_HEAD_DIM);
    if (mask && lv_tensor_numel(mask) != l)
        return lv_error(LV_ERR_INVALID, "softmax_attention: mask %s must have L = %lld "
                        "elements", lv_tensor_describe(mask, d0, sizeof d0), (long long)l);
    if (!isfinite(scale))
        return lv_error(LV_ERR_INVALID, "softmax_attention: scale %g is not finite", (double)scale);
    for (int i = 1; i < 5; i++)
        if (all[i] && overlaps(out, all[i]))
            return lv_error(LV_ERR_INVALID, "softmax_attention: out overlaps %s (no in-place)",
                            names[i]);
    if (n == 0) return LV_OK;
    if (l == 0) return lv_op_fill(ctx, out, 0.0f); /* no key at all: like all masked */
    if ((uint64_t)heads > ctx->limits.maxComputeWorkGroupCount[1])
        return lv_error(LV_ERR_LIMIT, "softmax_attention: %d heads exceed the device's "
                        "maxComputeWorkGroupCount[1] (%u)", heads,
                        ctx->limits.maxComputeWorkGroupCount[1]);
    attn_tile tile = choose_tile(ctx, head_dim);
    if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU &&
        loop_iterations(&tile, head_dim, l) > LV_LAVAPIPE_LOOP_BUDGET)
        return lv_error(LV_ERR_LIMIT, "softmax_attention: %lld keys of head dimension %lld need "
                        "%lld loop iterations per invocation; CPU Vulkan drivers (lavapipe) stop "
                        "loops after 65535", (long long)l, (long long)head_dim,
                        (long long)loop_iterations(&tile, head_dim, l));

    /* Queries go in chunks so that q and out fit one binding each; k, v and the mask (a
     * few MiB at most for text) are bound whole. */
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    uint64_t row_bytes = (uint64_t)width * 4;
    uint64_t max_binding = lv_ctx_max_binding(ctx);
    if (lv_tensor_nbytes(k) + align > max_binding)
        return lv_error(LV_ERR_LIMIT, "softmax_attention: k and v %s need %llu bytes in one "
                        "binding; the device allows %llu (maxStorageBufferRange)",
                        lv_tensor_describe(k, d0, sizeof d0),
                        (unsigned long long)(lv_tensor_nbytes(k) + align),
                        (unsigned long long)max_binding);
    int64_t chunk = row_bytes + align <= max_binding ? (int64_t)((max_binding - align) / row_bytes) : 0;
    if (chunk < 1)
        return lv_error(LV_ERR_LIMIT, "softmax_attention: one query row (%llu bytes) exceeds "
                        "the device's binding limit (%llu bytes)", (unsigned long long)row_bytes,
                        (unsigned long long)max_binding);
    int64_t per_group = (int64_t)tile.local * tile.query_block;
    int64_t max_chunk = (int64_t)ctx->limits.maxComputeWorkGroupCount[0] * per_group;
    if (chunk > max_chunk) chunk = max_chunk;
    uint32_t spec[5] = {tile.local, (uint32_t)head_dim, tile.key_block, tile.query_block,
                        tile.dim_step};

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
            .scale_log2e = scale * 1.44269504088896340736f,
        };
        uint32_t gx = (uint32_t)((rows + per_group - 1) / per_group);
        LV_TRY(lv_dispatch(ctx, LV_OP_SOFTMAX_ATTN, spec, 5, b, 5, &pc, sizeof pc, gx,
                           (uint32_t)heads, 1));
    }
    return LV_OK;
}
