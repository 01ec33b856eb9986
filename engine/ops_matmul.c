/* Matrix multiply, PyTorch Linear layout: out[b, m, n] = sum_k a[b, m, k] w[(b,) n, k] + bias[n].
 *
 * Two kernel variants, chosen per device:
 * - register-blocked (shaders/matmul_reg.comp) for CPU devices such as lavapipe, where
 *   shared memory and barriers are slow: every invocation keeps a block of outputs in
 *   registers and streams a and w from the buffers;
 * - shared-memory tiled (shaders/matmul_tiled.comp) for GPUs.
 * Tile shapes are specialization constants. Work whose tensors exceed one binding
 * (lv_ctx_max_binding) is split over batches, rows of a / out and rows of w / columns of out;
 * every dispatch binds views that start at its chunk. */
#include <stdlib.h>
#include <string.h>

#include "longvk/ops_matmul.h"
#include "lv_internal.h"
#include "ops_matmul_internal.h"
#include "push_matmul.h"

/* One kernel configuration: the op, its specialization constants, and the block of
 * outputs one workgroup computes. */
typedef struct mm_config {
    lv_op op;
    uint32_t spec[LV_MAX_SPEC];
    uint32_t nspec;
    uint32_t tile_m, tile_n;
} mm_config;

/* ---- configurations ------------------------------------------------------------------ */

static uint32_t env_u32(const char *name, uint32_t fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    return (uint32_t)strtoul(v, NULL, 10);
}

static void config_register(mm_config *c, lv_dtype wdtype) {
    uint32_t lanes = env_u32("LVX_L", 8), tm = env_u32("LVX_TM", 8), tn = env_u32("LVX_TN", 4);
    uint32_t vec = env_u32("LVX_VEC", 1);
    c->op = LV_OP_MATMUL;
    c->spec[0] = lanes;
    c->spec[1] = tm;
    c->spec[2] = tn;
    c->spec[3] = (uint32_t)wdtype;
    c->spec[4] = vec;
    c->spec[5] = env_u32("LVX_LD64", 0);
    c->spec[6] = env_u32("LVX_SHUF", 0);
    c->nspec = 7;
    c->tile_m = tm;
    c->tile_n = tn * lanes;
}

lv_matmul_variant lv_matmul_auto_variant(const lv_ctx *ctx) {
    const char *v = getenv("LONGVK_MATMUL_VARIANT");
    if (v && strcmp(v, "register") == 0) return LV_MATMUL_REGISTER;
    if (v && strcmp(v, "tiled") == 0) return LV_MATMUL_TILED;
    return lv_ctx_device(ctx)->type == LV_DEVICE_CPU ? LV_MATMUL_REGISTER : LV_MATMUL_TILED;
}

/* ---- shape checks -------------------------------------------------------------------- */

typedef struct mm_shape {
    int64_t batch;   /* dispatch batches (1 when w is shared: a's leading dims fold into M) */
    int64_t M, N, K;
    int batched_w;
} mm_shape;

static lv_status shape_error(const char *what, const lv_tensor *x, const char *xname,
                             const lv_tensor *y, const char *yname) {
    char dx[96], dy[96];
    return lv_error(LV_ERR_INVALID, "matmul: %s: %s is %s, %s is %s", what, xname,
                    lv_tensor_describe(x, dx, sizeof dx), yname, lv_tensor_describe(y, dy, sizeof dy));
}

static int overlaps(const lv_tensor *x, const lv_tensor *y) {
    if (x->alloc != y->alloc) return 0;
    uint64_t x0 = x->offset, x1 = x0 + lv_tensor_nbytes(x);
    uint64_t y0 = y->offset, y1 = y0 + lv_tensor_nbytes(y);
    return x0 < y1 && y0 < x1;
}

static lv_status check_shapes(const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                              const lv_tensor *bias, mm_shape *s) {
    char d[96];
    if (!out || !a || !w || !out->alloc || !a->alloc || !w->alloc)
        return lv_error(LV_ERR_INVALID, "matmul: out, a and w must be tensors with storage");
    if (a->dtype != LV_F32)
        return lv_error(LV_ERR_INVALID, "matmul: a must be f32, not %s", lv_tensor_describe(a, d, sizeof d));
    if (out->dtype != LV_F32)
        return lv_error(LV_ERR_INVALID, "matmul: out must be f32, not %s", lv_tensor_describe(out, d, sizeof d));
    if (w->dtype != LV_F32 && w->dtype != LV_F16 && w->dtype != LV_BF16)
        return lv_error(LV_ERR_INVALID, "matmul: w must be f32, f16 or bf16, not %s",
                        lv_tensor_describe(w, d, sizeof d));
    if (w->ndim != 2 && w->ndim != 3)
        return lv_error(LV_ERR_INVALID, "matmul: w must be [N, K] or [B, N, K], not %s",
                        lv_tensor_describe(w, d, sizeof d));
    s->K = w->shape[w->ndim - 1];
    s->N = w->shape[w->ndim - 2];
    s->batched_w = w->ndim == 3;
    if (a->shape[a->ndim - 1] != s->K)
        return shape_error("the last dimension of a must equal the last of w (K)", a, "a", w, "w");
    int64_t lead = lv_tensor_numel(a) / s->K; /* rows of a over all batches */
    if (s->batched_w) {
        if (a->ndim < 3)
            return shape_error("a batched w [B, N, K] needs a as [..., M, K] with batch dims", a, "a", w, "w");
        s->M = a->shape[a->ndim - 2];
        s->batch = lead / s->M;
        if (s->batch != w->shape[0])
            return shape_error("the batch dims of a must multiply to w's B", a, "a", w, "w");
    } else {
        s->M = lead;
        s->batch = 1;
    }
    int same = out->ndim == a->ndim && out->shape[out->ndim - 1] == s->N;
    for (int i = 0; same && i < a->ndim - 1; i++) same = out->shape[i] == a->shape[i];
    if (!same) {
        char da[96], dw[96], dout[96];
        return lv_error(LV_ERR_INVALID, "matmul: out is %s but a %s times w %s gives [..., %lld] with a's leading dims",
                        lv_tensor_describe(out, dout, sizeof dout), lv_tensor_describe(a, da, sizeof da),
                        lv_tensor_describe(w, dw, sizeof dw), (long long)s->N);
    }
    if (bias) {
        if (!bias->alloc) return lv_error(LV_ERR_INVALID, "matmul: bias has no storage");
        if (bias->dtype != LV_F32 || lv_tensor_numel(bias) != s->N || bias->shape[bias->ndim - 1] != s->N)
            return shape_error("bias must be f32 [N]", bias, "bias", w, "w");
        if (overlaps(out, bias)) return shape_error("out must not overlap bias", out, "out", bias, "bias");
    }
    if (overlaps(out, a)) return shape_error("out must not overlap a", out, "out", a, "a");
    if (overlaps(out, w)) return shape_error("out must not overlap w", out, "out", w, "w");
    return LV_OK;
}

/* ---- chunking ------------------------------------------------------------------------ */

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* Dispatch one chunk: batches [b0, b0 + nb), rows [m0, m0 + mc), columns [n0, n0 + nc). */
static lv_status dispatch_chunk(lv_ctx *ctx, const mm_config *cfg, const mm_shape *s,
                                const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                                const lv_tensor *bias, int64_t b0, int64_t nb, int64_t m0,
                                int64_t mc, int64_t n0, int64_t nc) {
    int64_t M = s->M, N = s->N, K = s->K;
    /* views: a rows, w rows, out from (m0, n0) to (m0 + mc - 1, n0 + nc - 1) */
    int64_t a_len = ((nb - 1) * M + mc) * K;
    lv_tensor av = lv_tensor_view(a, (b0 * M + m0) * K, 1, &a_len);
    int64_t wb0 = s->batched_w ? b0 : 0, wnb = s->batched_w ? nb : 1;
    int64_t w_len = ((wnb - 1) * N + nc) * K;
    lv_tensor wv = lv_tensor_view(w, (wb0 * N + n0) * K, 1, &w_len);
    int64_t o_len = ((nb - 1) * M + mc - 1) * N + nc;
    lv_tensor ov = lv_tensor_view(out, (b0 * M + m0) * N + n0, 1, &o_len);
    lv_tensor bv = av;
    if (bias) bv = lv_tensor_view(bias, n0, 1, &nc);
    lv_binding b[4] = {{&ov, true, 0}, {&av, false, 0}, {&wv, false, 0}, {&bv, false, 0}};
    LV_TRY(lv_bindings_prepare(ctx, b, 4));
    lv_push_matmul pc = {
        .M = (uint32_t)mc,
        .N = (uint32_t)nc,
        .K = (uint32_t)K,
        .a_off = b[1].elem_offset,
        .w_off = b[2].elem_offset,
        .bias_off = b[3].elem_offset,
        .out_off = b[0].elem_offset,
        .ldo = (uint32_t)N,
        .a_batch = (uint32_t)(M * K),
        .w_batch = s->batched_w ? (uint32_t)(N * K) : 0,
        .out_batch = (uint32_t)(M * N),
        .has_bias = bias != NULL,
    };
    uint32_t gx = (uint32_t)((nc + cfg->tile_n - 1) / cfg->tile_n);
    uint32_t gy = (uint32_t)((mc + cfg->tile_m - 1) / cfg->tile_m);
    return lv_dispatch(ctx, cfg->op, cfg->spec, cfg->nspec, b, 4, &pc, sizeof pc, gx, gy, (uint32_t)nb);
}

static lv_status run(lv_ctx *ctx, const mm_config *cfg, const mm_shape *s, const lv_tensor *out,
                     const lv_tensor *a, const lv_tensor *w, const lv_tensor *bias) {
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t ws = (int64_t)lv_dtype_size(w->dtype);
    /* bytes a binding may cover, less the slack lv_bindings_prepare adds for an unaligned start */
    int64_t budget = (int64_t)lv_ctx_max_binding(ctx) - (int64_t)ctx->limits.minStorageBufferOffsetAlignment - 8;
    const uint32_t *maxg = ctx->limits.maxComputeWorkGroupCount;
    if (budget < K * 4 || budget < K * ws || budget < N * 4) {
        char da[96], dw[96];
        return lv_error(LV_ERR_LIMIT, "matmul: a row of a %s, w %s or out (%lld columns) exceeds the "
                        "device's %llu-byte binding limit", lv_tensor_describe(a, da, sizeof da),
                        lv_tensor_describe(w, dw, sizeof dw), (long long)N,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    }
    /* rows per chunk: a rows and out rows must fit one binding, and the grid its limit */
    int64_t mc = min64(M, min64(budget / (K * 4), budget / (N * 4)));
    mc = min64(mc, (int64_t)maxg[1] * cfg->tile_m);
    if (mc < M && mc > (int64_t)cfg->tile_m) mc -= mc % cfg->tile_m;
    /* columns per chunk: w rows must fit one binding */
    int64_t nc = min64(N, budget / (K * ws));
    nc = min64(nc, (int64_t)maxg[0] * cfg->tile_n);
    if (nc < N && nc > (int64_t)cfg->tile_n) nc -= nc % cfg->tile_n;
    /* whole batches per dispatch when a batch fits entirely */
    int64_t nb = 1;
    if (mc == M && nc == N && s->batch > 1) {
        nb = min64(s->batch, min64(budget / (M * K * 4), budget / (M * N * 4)));
        if (s->batched_w) nb = min64(nb, budget / (N * K * ws));
        nb = min64(nb, (int64_t)maxg[2]);
        if (nb < 1) nb = 1;
    }
    for (int64_t b0 = 0; b0 < s->batch; b0 += nb) {
        int64_t bn = min64(nb, s->batch - b0);
        for (int64_t m0 = 0; m0 < M; m0 += mc)
            for (int64_t n0 = 0; n0 < N; n0 += nc)
                LV_TRY(dispatch_chunk(ctx, cfg, s, out, a, w, bias, b0, bn, m0, min64(mc, M - m0),
                                      n0, min64(nc, N - n0)));
    }
    return LV_OK;
}

lv_status lv_op_matmul_variant(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                               const lv_tensor *w, const lv_tensor *bias,
                               lv_matmul_variant variant) {
    mm_shape s = {0, 0, 0, 0, 0};
    LV_TRY(check_shapes(out, a, w, bias, &s));
    if (variant == LV_MATMUL_AUTO) variant = lv_matmul_auto_variant(ctx);
    mm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    config_register(&cfg, w->dtype);
    return run(ctx, &cfg, &s, out, a, w, bias);
}

lv_status lv_op_matmul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                       const lv_tensor *bias) {
    return lv_op_matmul_variant(ctx, out, a, w, bias, LV_MATMUL_AUTO);
}
