/* Softmax attention over a short, masked key set: the DiT's cross-attention to text. */
#include <math.h>

#include "longvk/ops.h"
#include "lv_internal.h"
#include "push_softmax_attention.h"

/* Largest head dimension: the query and the accumulator of one head live in registers. */
#define LV_ATTN_MAX_HEAD_DIM 256

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
                        "the kernel's %d (registers per invocation)", (long long)head_dim,
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
    if (n == 0 || l == 0) return n == 0 ? LV_OK : lv_op_fill(ctx, out, 0.0f);
    if (heads > (int64_t)ctx->limits.maxComputeWorkGroupCount[1])
        return lv_error(LV_ERR_LIMIT, "softmax_attention: %d heads exceed the device's "
                        "maxComputeWorkGroupCount[1] (%u)", heads,
                        ctx->limits.maxComputeWorkGroupCount[1]);

    /* Queries go in chunks so that q and out fit one binding each; k, v and the mask (at
     * most a few MiB for text) are bound whole. */
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
    /* CPU devices: a workgroup is run as SIMD lanes by one thread, so a small one is as
     * good as a big one and wastes less on the last chunk; GPUs want at least a warp. */
    uint32_t local = lv_ctx_device(ctx)->type == LV_DEVICE_CPU ? 8 : 64;
    int64_t max_chunk = (int64_t)ctx->limits.maxComputeWorkGroupCount[0] * local;
    if (chunk > max_chunk) chunk = max_chunk;
    uint32_t spec[3] = {local, (uint32_t)head_dim, 8};

    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
        int64_t rows = n - n0 < chunk ? n - n0 : chunk;
        lv_tensor qc = lv_tensor_rows(q, n0, rows), oc = lv_tensor_rows(out, n0, rows);
        lv_binding b[5] = {{&oc, true, 0}, {&qc, false, 0}, {k, false, 0}, {v, false, 0},
                           {mask ? mask : k, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, b, 5));
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
        uint32_t gx = (uint32_t)((rows + local - 1) / local);
        LV_TRY(lv_dispatch(ctx, LV_OP_SOFTMAX_ATTN, spec, 3, b, 5, &pc, sizeof pc, gx,
                           (uint32_t)heads, 1));
    }
    return LV_OK;
}
