/* Matrix multiply, PyTorch Linear layout: out[b, m, n] = sum_k a[b, m, k] w[(b,) n, k] + bias[n].
 *
 * Two kernel variants, chosen per device:
 * - register-blocked (shaders/matmul_reg.comp) for CPU devices such as lavapipe, where
 *   shared memory and barriers are slow: every invocation keeps a block of outputs in
 *   registers and streams a and w from the buffers;
 * - shared-memory tiled (shaders/matmul_tiled.comp) for GPUs.
 * Tile shapes are specialization constants. Work whose tensors exceed one binding
 * (lv_ctx_max_binding) is split over batches, rows of a / out and rows of w / columns of out;
 * every dispatch binds views that start at its chunk.
 * a and out may be 16-bit activations (f16 / bf16, lv_ctx_options.precision): the register
 * and tiled kernels read and write them through 32-bit words (specialization constants ADT,
 * ODT) and compute in fp32; the tensor-core kernel reads a as f32 or 16-bit and rounds it
 * and w to fp16 (16-bit precision only).
 * w may be block-quantized (q8_0, q4_k: rows of whole blocks, as GGUF holds them): the
 * register and tiled kernels dequantise each weight as they load it (shaders/quant.glsl). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops_matmul.h"
#include "lv_internal.h"
#include "op_helpers.h"
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

/* ---- kernels ------------------------------------------------------------------------ */

/* Why the tensor-core kernel cannot tile with shape c (NULL: it can). It stages fp16 A and
 * B and accumulates in fp32 at subgroup scope, each side dividing its 32 x 32 subgroup part
 * and its 32-deep k step. */
const char *lv_matmul_coopmat_unusable(const lv_coopmat_shape *c) {
    if (c->a_type != VK_COMPONENT_TYPE_FLOAT16_KHR || c->b_type != VK_COMPONENT_TYPE_FLOAT16_KHR)
        return "A and B are not f16 (the kernel stages its inputs as fp16)";
    if (c->c_type != VK_COMPONENT_TYPE_FLOAT32_KHR || c->result_type != VK_COMPONENT_TYPE_FLOAT32_KHR)
        return "the accumulator is not f32 (the kernel accumulates in fp32)";
    if (c->scope != VK_SCOPE_SUBGROUP_KHR) return "not at subgroup scope";
    if (c->m == 0 || c->n == 0 || c->k == 0 || 32 % c->m || 32 % c->n || 32 % c->k)
        return "a side does not divide the kernel's 32 x 32 x 32 step";
    return NULL;
}

/* The device's shape the coopmat kernel tiles with: the largest usable one, or the one
 * LONGVK_COOPMAT_SHAPE=i names (index into the device's list, as `longvk devices` prints it;
 * the tests run every usable shape this way); NULL if none, or if the named one is unusable. */
static const lv_coopmat_shape *coopmat_shape(const lv_ctx *ctx) {
    const lv_device_info *d = lv_ctx_device(ctx);
    if (!lv_ctx_coopmat(ctx)) return NULL;
    int n = d->coopmat_count < LV_COOPMAT_MAX_SHAPES ? d->coopmat_count : LV_COOPMAT_MAX_SHAPES;
    const char *forced = lv_env_str("LONGVK_COOPMAT_SHAPE");
    if (forced && *forced) {
        char *end;
        long i = strtol(forced, &end, 10);
        if (*end || i < 0 || i >= n || lv_matmul_coopmat_unusable(&d->coopmat_shapes[i])) return NULL;
        return &d->coopmat_shapes[i];
    }
    const lv_coopmat_shape *best = NULL;
    for (int i = 0; i < n; i++) {
        const lv_coopmat_shape *c = &d->coopmat_shapes[i];
        if (lv_matmul_coopmat_unusable(c)) continue;
        if (!best || c->m * c->n * c->k > best->m * best->n * best->k) best = c; /* the largest */
    }
    return best;
}

const lv_coopmat_shape *lv_matmul_coopmat_shape(const lv_ctx *ctx) { return coopmat_shape(ctx); }

/* The tensor-core kernel rounds a and w to fp16 (shaders/coopmat/matmul_coopmat.comp): it
 * runs only where the context's precision is 16-bit, never at f32, whose bounds it would miss
 * (the VAE's f32 columns through it: 8.75e-4 against 3.61e-4). Chosen by itself at f16
 * precision on any device that enabled the tensor cores with a usable shape (what the device
 * reports, whatever its vendor), except on CPU devices: on lavapipe (Mesa 26, llvmpipe's
 * 8 x 8 x 8 shapes emulated on AVX2) the register kernel is faster (measured: see
 * engine/README.md), so it keeps the register kernel unless forced. */
lv_matmul_variant lv_matmul_auto_variant(const lv_ctx *ctx) {
    const bool half = lv_ctx_precision(ctx) != LV_PRECISION_F32;
    const char *v = lv_env_str("LONGVK_MATMUL_VARIANT");
    if (v && strcmp(v, "register") == 0) return LV_MATMUL_REGISTER;
    if (v && strcmp(v, "tiled") == 0) return LV_MATMUL_TILED;
    if (v && strcmp(v, "coopmat") == 0 && half) return LV_MATMUL_COOPMAT; /* at f32: as unset */
    return lv_matmul_pick(lv_ctx_device(ctx), lv_ctx_precision(ctx),
                          coopmat_shape(ctx) && lv_op_available(ctx, LV_OP_MATMUL_COOPMAT));
}

lv_matmul_variant lv_matmul_pick(const lv_device_info *d, lv_precision precision, bool coopmat_usable) {
    const bool cpu = d->type == LV_DEVICE_CPU;
    if (precision == LV_PRECISION_F16 && coopmat_usable && !cpu) return LV_MATMUL_COOPMAT;
    return cpu ? LV_MATMUL_REGISTER : LV_MATMUL_TILED;
}

/* Rows of a are shared within a subgroup through subgroupShuffle, which needs subgroups of
 * exactly 8 lanes. CPU devices have one fixed subgroup size; on GPUs it may vary per
 * pipeline, so the register kernel's shuffles are trusted on CPU devices only (elsewhere it
 * runs its general path, which loads every row itself). */
static bool register_shuffle_ok(const lv_ctx *ctx) {
    return lv_ctx_device(ctx)->type == LV_DEVICE_CPU && lv_ctx_device(ctx)->subgroup_size == 8;
}

/* Register-blocked kernel (shaders/matmul_reg.comp), one subgroup of 8 per workgroup.
 * Fast path: TM = 64 rows x 8 lanes x TN = 8 columns per workgroup, 512 accumulators per
 * invocation: per 8 values of k it loads 8 + 16 (f32 w: 16 + 16) vec4 per lane for 4096
 * multiply-adds per lane, which is what pays on lavapipe where each load is a serial loop
 * over the lanes (measured: 1024^3 fp32 at 64 x 8 about 25% faster than 32 x 8, but twice
 * the LLVM compile time, ~5 s). Fewer rows for small M so that little work is wasted,
 * and TN = 4 where N is a multiple of 32 but not of 64 (a small model's N = 96 in one
 * dispatch instead of a fast 64 and a general 32: half the dispatches of the default model).
 * General path: 16 (8 for small M) rows x 8 lanes x 4 columns, scalar loads, any shape. */
static void kernel_register(const lv_ctx *ctx, const lv_tensor *a, const lv_tensor *out, lv_dtype wdtype,
                            int64_t M, int64_t N, bool vec, mm_config *c) {
    uint32_t tm = M <= 8 ? 8 : 16, tn = 4;
    if (vec) {
        /* 64 columns per workgroup, or 32 where that covers N and 64 would not (N = 96,
         * 288, ...): the whole product then takes the fast path in one dispatch */
        tn = N % 64 != 0 && N % 32 == 0 ? 4 : 8;
        tm = M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
    }
    c->op = LV_OP_MATMUL;
    c->spec[0] = 8;
    c->spec[1] = tm;
    c->spec[2] = tn;
    c->spec[3] = (uint32_t)wdtype;
    c->spec[4] = vec;
    c->spec[5] = register_shuffle_ok(ctx);
    c->spec[6] = (uint32_t)a->dtype;
    c->spec[7] = (uint32_t)out->dtype;
    c->nspec = 8;
    c->tile_m = tm;
    c->tile_n = tn * c->spec[0];
}

/* Shared-memory tiled kernel: BM x BN blocks per workgroup, BK-deep slabs in shared memory,
 * TM x TN per invocation; 64 x 64 x 16 with 256 invocations, or 32 x 32 x 16 with 64 where
 * the device allows fewer invocations or less shared memory. */
static void kernel_tiled(const lv_ctx *ctx, const lv_tensor *a, const lv_tensor *out, lv_dtype wdtype,
                         mm_config *c) {
    const lv_device_info *d = lv_ctx_device(ctx);
    uint32_t bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;
    if (d->max_workgroup_invocations < 256 || d->max_shared_memory_bytes < 2 * bk * (bm + 1) * 4) bm = bn = 32;
    c->op = LV_OP_MATMUL_TILED;
    c->spec[0] = (bm / tm) * (bn / tn);
    c->spec[1] = bm;
    c->spec[2] = bn;
    c->spec[3] = bk;
    c->spec[4] = tm;
    c->spec[5] = tn;
    c->spec[6] = (uint32_t)wdtype;
    c->spec[7] = (uint32_t)a->dtype;
    c->spec[8] = (uint32_t)out->dtype;
    c->nspec = 9;
    c->tile_m = bm;
    c->tile_n = bn;
}

/* Tensor-core kernel (shaders/coopmat/matmul_coopmat.comp): BM x BN blocks per workgroup of
 * (BM / WM) x (BN / WN) subgroups, each computing WM x WN as tiles of the device's shape,
 * BK-deep k steps staged in shared memory as fp16. 128 x 128 x 32 with 8 subgroups of 64 x 32
 * by default (a subgroup does 8 products of 16 x 16 x 16 per 6 tile loads on NVIDIA); the
 * 64 x 64 x 32 blocks of 4 subgroups of 32 x 32 on CPU devices and where the device allows fewer
 * invocations or less shared memory. LONGVK_COOPMAT_TILE=BMxBNxBKxWMxWN sets another, for tuning
 * (tests/bench/device/device-run.sh compares some on a GPU). */
typedef struct coopmat_tile {
    uint32_t bm, bn, bk, wm, wn;
} coopmat_tile;

static uint32_t coopmat_invocations(const lv_ctx *ctx, const coopmat_tile *t) {
    return lv_ctx_device(ctx)->subgroup_size * (t->bm / t->wm) * (t->bn / t->wn);
}

static uint64_t coopmat_shared_bytes(const lv_coopmat_shape *shape, const coopmat_tile *t) {
    return 2ull * (t->bm + t->bn) * (t->bk + 8) + 4ull * (t->bm / t->wm) * (t->bn / t->wn) * shape->m * shape->n;
}

/* NULL if the tile fits the shape and the device, else what is wrong */
static const char *coopmat_tile_problem(const lv_ctx *ctx, const lv_coopmat_shape *shape, const coopmat_tile *t) {
    const lv_device_info *d = lv_ctx_device(ctx);
    if (!t->bm || !t->bn || !t->bk || !t->wm || !t->wn || t->bm % t->wm || t->bn % t->wn)
        return "BM and BN must be multiples of WM and WN";
    if (256 % t->bm || 256 % t->bn) return "BM and BN must divide 256 (the chunks' row and column multiple)";
    if (t->wm % shape->m || t->wn % shape->n || t->bk % shape->k || t->bk % 4)
        return "WM, WN and BK must be multiples of the cooperative-matrix shape's M, N and K (BK also of 4)";
    if (coopmat_invocations(ctx, t) > d->max_workgroup_invocations) return "too many invocations for the device";
    if (coopmat_shared_bytes(shape, t) > d->max_shared_memory_bytes) return "more shared memory than the device has";
    return NULL;
}

static lv_status kernel_coopmat(const lv_ctx *ctx, lv_dtype wdtype, lv_dtype adtype, lv_dtype odtype,
                                const lv_coopmat_shape *shape, mm_config *c) {
    coopmat_tile t = {128, 128, 32, 64, 32};
    const char *env = lv_env_str("LONGVK_COOPMAT_TILE");
    if (env) {
        char end;
        if (sscanf(env, "%ux%ux%ux%ux%u%c", &t.bm, &t.bn, &t.bk, &t.wm, &t.wn, &end) != 5)
            return lv_error(LV_ERR_INVALID, "LONGVK_COOPMAT_TILE=%s: expected BMxBNxBKxWMxWN, e.g. 128x128x32x64x32",
                            env);
        const char *why = coopmat_tile_problem(ctx, shape, &t);
        if (why)
            return lv_error(LV_ERR_INVALID, "LONGVK_COOPMAT_TILE=%s: %s (cooperative-matrix shape %ux%ux%u)", env, why,
                            shape->m, shape->n, shape->k);
    } else if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU || coopmat_tile_problem(ctx, shape, &t)) {
        /* CPU devices (lavapipe, where only the tests run it) take the small block: LLVM
         * compiles the large block's unrolled loads and products for minutes */
        t = (coopmat_tile){64, 64, 32, 32, 32};
    }
    c->op = LV_OP_MATMUL_COOPMAT;
    c->spec[0] = coopmat_invocations(ctx, &t);
    c->spec[1] = t.bm;
    c->spec[2] = t.bn;
    c->spec[3] = t.bk;
    c->spec[4] = t.wm;
    c->spec[5] = t.wn;
    c->spec[6] = (uint32_t)wdtype;
    c->spec[7] = shape->m;
    c->spec[8] = shape->n;
    c->spec[9] = shape->k;
    c->spec[10] = (uint32_t)adtype;
    c->spec[11] = (uint32_t)odtype;
    c->spec[12] = (t.bm / t.wm) * (t.bn / t.wn);
    c->spec[13] = c->spec[0];
    c->nspec = 14;
    c->tile_m = t.bm;
    c->tile_n = t.bn;
    return LV_OK;
}

/* ---- shape checks -------------------------------------------------------------------- */

typedef struct mm_shape {
    int64_t batch;   /* dispatch batches (1 when w is shared: a's leading dims fold into M) */
    int64_t M, N, K;
    int batched_w;
    lv_activation act;
    bool accumulate;
} mm_shape;

static lv_status shape_error(const char *what, const lv_tensor *x, const char *xname,
                             const lv_tensor *y, const char *yname) {
    char dx[96], dy[96];
    return lv_error(LV_ERR_INVALID, "matmul: %s: %s is %s, %s is %s", what, xname,
                    lv_tensor_describe(x, dx, sizeof dx), yname, lv_tensor_describe(y, dy, sizeof dy));
}

static lv_status check_shapes(const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                              const lv_tensor *bias, mm_shape *s) {
    char d[96];
    if (!out || !a || !w || !out->alloc || !a->alloc || !w->alloc)
        return lv_error(LV_ERR_INVALID, "matmul: out, a and w must be tensors with storage");
    if (a->dtype != LV_F32 && a->dtype != LV_F16 && a->dtype != LV_BF16)
        return lv_error(LV_ERR_INVALID, "matmul: a must be f32, f16 or bf16, not %s", lv_tensor_describe(a, d, sizeof d));
    if (out->dtype != LV_F32 && out->dtype != LV_F16 && out->dtype != LV_BF16)
        return lv_error(LV_ERR_INVALID, "matmul: out must be f32, f16 or bf16, not %s",
                        lv_tensor_describe(out, d, sizeof d));
    if (w->dtype != LV_F32 && w->dtype != LV_F16 && w->dtype != LV_BF16 && !lv_dtype_quantized(w->dtype))
        return lv_error(LV_ERR_INVALID, "matmul: w must be f32, f16, bf16, q8_0 or q4_k, not %s",
                        lv_tensor_describe(w, d, sizeof d));
    if (w->ndim != 2 && w->ndim != 3)
        return lv_error(LV_ERR_INVALID, "matmul: w must be [N, K] or [B, N, K], not %s",
                        lv_tensor_describe(w, d, sizeof d));
    s->K = w->shape[w->ndim - 1];
    int64_t block = lv_dtype_block(w->dtype, NULL);
    if (s->K % block) /* a quantized row is whole blocks (shaders/quant.glsl) */
        return lv_error(LV_ERR_INVALID, "matmul: a %s w needs K a multiple of %lld, not %lld: w is %s",
                        lv_dtype_name(w->dtype), (long long)block, (long long)s->K, lv_tensor_describe(w, d, sizeof d));
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
        LV_TRY(lv_check_alias("matmul", out, "bias", bias, false));
    }
    LV_TRY(lv_check_alias("matmul", out, "a", a, false));
    LV_TRY(lv_check_alias("matmul", out, "w", w, false));
    return LV_OK;
}

/* ---- chunking ------------------------------------------------------------------------ */

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* A chunk: batches [b0, b0 + nb), rows [m0, m0 + mc), columns [n0, n0 + nc). */
typedef struct mm_chunk {
    int64_t b0, nb, m0, mc, n0, nc;
} mm_chunk;

typedef struct mm_views {
    lv_tensor out, a, w, bias;
} mm_views;

/* Views of the chunk's ranges: a rows, w rows, out from (m0, n0) to (m0 + mc - 1, n0 + nc - 1)
 * (rows of out are ldo = N apart), bias [n0, n0 + nc). Without bias, a stands in (unread). */
static void chunk_views(const mm_shape *s, const lv_tensor *out, const lv_tensor *a,
                        const lv_tensor *w, const lv_tensor *bias, const mm_chunk *c, mm_views *v) {
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t a_len = ((c->nb - 1) * M + c->mc) * K;
    v->a = lv_tensor_view(a, (c->b0 * M + c->m0) * K, 1, &a_len);
    int64_t wb0 = s->batched_w ? c->b0 : 0, wnb = s->batched_w ? c->nb : 1;
    int64_t w_len = ((wnb - 1) * N + c->nc) * K;
    v->w = lv_tensor_view(w, (wb0 * N + c->n0) * K, 1, &w_len);
    int64_t o_len = ((c->nb - 1) * M + c->mc - 1) * N + c->nc;
    v->out = lv_tensor_view(out, (c->b0 * M + c->m0) * N + c->n0, 1, &o_len);
    v->bias = bias ? lv_tensor_view(bias, c->n0, 1, &c->nc) : v->a;
}

static lv_status dispatch(lv_ctx *ctx, const mm_config *k, const mm_shape *s, mm_views *v,
                          bool has_bias, const mm_chunk *c) {
    lv_binding b[4] = {{&v->out, true, 0}, {&v->a, false, 0}, {&v->w, false, 0}, {&v->bias, false, 0}};
    LV_TRY(lv_bindings_prepare(ctx, k->op, b, 4));
    lv_push_matmul pc = {
        .M = (uint32_t)c->mc,
        .N = (uint32_t)c->nc,
        .K = (uint32_t)s->K,
        .a_off = b[1].elem_offset,
        .w_off = b[2].elem_offset,
        .bias_off = b[3].elem_offset,
        .out_off = b[0].elem_offset,
        .ldo = (uint32_t)s->N,
        .a_batch = (uint32_t)(s->M * s->K),
        .w_batch = s->batched_w ? (uint32_t)(s->N * s->K) : 0,
        .out_batch = (uint32_t)(s->M * s->N),
        .has_bias = has_bias,
        .act = (uint32_t)s->act,
        .accumulate = s->accumulate,
    };
    uint32_t gx = (uint32_t)((c->nc + k->tile_n - 1) / k->tile_n);
    uint32_t gy = (uint32_t)((c->mc + k->tile_m - 1) / k->tile_m);
    return lv_dispatch(ctx, k->op, k->spec, k->nspec, b, 4, &pc, sizeof pc, gx, gy, (uint32_t)c->nb);
}

/* Element offset of a view inside its binding, as lv_bindings_prepare will compute it. */
static uint64_t bound_elem_offset(const lv_ctx *ctx, const lv_tensor *t) {
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    if (align < 4) align = 4;
    return (t->alloc->offset + t->offset) % align / lv_dtype_size(t->dtype);
}

/* The register kernel's fast path: K a multiple of 8 and every row start a multiple of
 * 4 elements (8 for 16-bit w and a) from its binding's start, so rows load and store as vec4. */
static bool register_fast_ok(const lv_ctx *ctx, const mm_shape *s, const mm_views *v, bool has_bias) {
    uint64_t wq = v->w.dtype == LV_F32 ? 4 : 8, aq = v->a.dtype == LV_F32 ? 4 : 8;
    /* quantized w: any block start (blocks are read by byte address, shaders/quant.glsl) */
    bool w_ok = lv_dtype_quantized(v->w.dtype) || bound_elem_offset(ctx, &v->w) % wq == 0;
    return s->K % 8 == 0 && s->N % 4 == 0 && bound_elem_offset(ctx, &v->a) % aq == 0 && w_ok &&
           bound_elem_offset(ctx, &v->out) % 4 == 0 &&
           (!has_bias || bound_elem_offset(ctx, &v->bias) % 4 == 0);
}

static lv_status run_chunk(lv_ctx *ctx, lv_matmul_variant variant, const mm_shape *s,
                           const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                           const lv_tensor *bias, const mm_chunk *c) {
    mm_config k;
    mm_views v;
    memset(&k, 0, sizeof k);
    if (variant == LV_MATMUL_COOPMAT) {
        LV_TRY(kernel_coopmat(ctx, w->dtype, a->dtype, out->dtype, coopmat_shape(ctx), &k));
        chunk_views(s, out, a, w, bias, c, &v);
        return dispatch(ctx, &k, s, &v, bias != NULL, c);
    }
    if (variant == LV_MATMUL_TILED) {
        kernel_tiled(ctx, a, out, w->dtype, &k);
        chunk_views(s, out, a, w, bias, c, &v);
        return dispatch(ctx, &k, s, &v, bias != NULL, c);
    }
    /* fast path over whole column tiles, general path for the rest */
    kernel_register(ctx, a, out, w->dtype, c->mc, c->nc, true, &k);
    mm_chunk main = *c;
    main.nc = register_shuffle_ok(ctx) ? c->nc - c->nc % k.tile_n : 0;
    if (main.nc > 0) {
        chunk_views(s, out, a, w, bias, &main, &v);
        if (register_fast_ok(ctx, s, &v, bias != NULL)) LV_TRY(dispatch(ctx, &k, s, &v, bias != NULL, &main));
        else main.nc = 0;
    }
    mm_chunk rest = *c;
    rest.n0 = c->n0 + main.nc;
    rest.nc = c->nc - main.nc;
    if (rest.nc == 0) return LV_OK;
    kernel_register(ctx, a, out, w->dtype, c->mc, c->nc, false, &k);
    chunk_views(s, out, a, w, bias, &rest, &v);
    return dispatch(ctx, &k, s, &v, bias != NULL, &rest);
}

static lv_status run(lv_ctx *ctx, lv_matmul_variant variant, const mm_shape *s, const lv_tensor *out,
                     const lv_tensor *a, const lv_tensor *w, const lv_tensor *bias) {
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t w_row = (int64_t)lv_dtype_bytes(w->dtype, K); /* bytes of one row of w (whole blocks) */
    /* bytes a binding may cover, less the slack lv_bindings_prepare adds for an unaligned start */
    int64_t budget = (int64_t)lv_ctx_max_binding(ctx) - (int64_t)ctx->limits.minStorageBufferOffsetAlignment - 8;
    if (budget < K * 4 || budget < N * 4 || budget < w_row) {
        char da[96], dw[96];
        return lv_error(LV_ERR_LIMIT, "matmul: one row of a %s, w %s or out (%lld columns) exceeds "
                        "the device's %llu-byte binding limit", lv_tensor_describe(a, da, sizeof da),
                        lv_tensor_describe(w, dw, sizeof dw), (long long)N,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    }
    /* the largest tiles any kernel uses: chunks are cut at multiples of them, and grids
     * stay within maxComputeWorkGroupCount */
    const int64_t tile = 256;
    const uint32_t *maxg = ctx->limits.maxComputeWorkGroupCount;
    /* rows per chunk: a rows and out rows must fit one binding */
    int64_t mc = min64(M, min64(budget / (K * 4), budget / (N * 4)));
    mc = min64(mc, (int64_t)maxg[1] * 8);
    if (mc < M && mc > tile) mc -= mc % tile;
    /* columns per chunk: w rows must fit one binding */
    int64_t nc = min64(N, budget / w_row);
    nc = min64(nc, (int64_t)maxg[0] * 16);
    if (nc < N && nc > tile) nc -= nc % tile;
    /* whole batches per dispatch when a batch fits entirely */
    int64_t nb = 1;
    if (mc == M && nc == N && s->batch > 1) {
        nb = min64(s->batch, min64(budget / (M * K * 4), budget / (M * N * 4)));
        if (s->batched_w) nb = min64(nb, budget / (N * w_row));
        nb = min64(nb, (int64_t)maxg[2]);
        if (nb < 1) nb = 1;
    }
    for (int64_t b0 = 0; b0 < s->batch; b0 += nb)
        for (int64_t m0 = 0; m0 < M; m0 += mc)
            for (int64_t n0 = 0; n0 < N; n0 += nc) {
                mm_chunk c = {b0, min64(nb, s->batch - b0), m0, min64(mc, M - m0), n0, min64(nc, N - n0)};
                LV_TRY(run_chunk(ctx, variant, s, out, a, w, bias, &c));
            }
    return LV_OK;
}

lv_status lv_op_matmul_ex(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                          const lv_tensor *bias, lv_activation act, bool accumulate, lv_matmul_variant variant) {
    mm_shape s = {0, 0, 0, 0, 0, LV_ACT_NONE, false};
    LV_TRY(check_shapes(out, a, w, bias, &s));
    if (act != LV_ACT_NONE && act != LV_ACT_SILU) return lv_error(LV_ERR_INVALID, "matmul: unknown activation %d", (int)act);
    s.act = act;
    s.accumulate = accumulate;
    char d[96];
    if (accumulate && out->dtype != LV_F32)
        return lv_error(LV_ERR_INVALID, "matmul: out += a w^T needs an f32 out (the residual stream), not %s",
                        lv_tensor_describe(out, d, sizeof d));
    bool quantized = lv_dtype_quantized(w->dtype), explicit_variant = variant != LV_MATMUL_AUTO;
    if (variant == LV_MATMUL_AUTO) variant = lv_matmul_auto_variant(ctx);
    /* the tensor-core kernel reads quantized blocks too, but has not run on a device with
     * cooperative matrices yet: chosen for them only when asked (LONGVK_MATMUL_VARIANT, the
     * tests), else the fp32 kernel of the device */
    if (variant == LV_MATMUL_COOPMAT && quantized && !lv_env_str("LONGVK_MATMUL_VARIANT") && !explicit_variant)
        variant = lv_ctx_device(ctx)->type == LV_DEVICE_CPU ? LV_MATMUL_REGISTER : LV_MATMUL_TILED;
    if (variant == LV_MATMUL_COOPMAT && lv_ctx_precision(ctx) == LV_PRECISION_F32)
        return lv_error(LV_ERR_UNSUPPORTED, "matmul: the tensor-core kernel rounds its inputs to fp16: not at f32 "
                        "precision (a context at --precision f16 uses it where `longvk devices` says it can)");
    if (variant == LV_MATMUL_COOPMAT && (!coopmat_shape(ctx) || !lv_op_available(ctx, LV_OP_MATMUL_COOPMAT)))
        return lv_error(LV_ERR_UNSUPPORTED, "matmul: the tensor-core kernel needs a device with fp16 cooperative "
                        "matrices enabled (`longvk devices` says why not here) and a build with its shader%s",
                        lv_env_str("LONGVK_COOPMAT_SHAPE") ? " (LONGVK_COOPMAT_SHAPE names a shape it cannot use)" : "");
    return run(ctx, variant, &s, out, a, w, bias);
}

lv_status lv_op_matmul_variant(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                               const lv_tensor *w, const lv_tensor *bias,
                               lv_matmul_variant variant) {
    return lv_op_matmul_ex(ctx, out, a, w, bias, LV_ACT_NONE, false, variant);
}

lv_status lv_op_matmul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                       const lv_tensor *bias) {
    return lv_op_matmul_ex(ctx, out, a, w, bias, LV_ACT_NONE, false, LV_MATMUL_AUTO);
}

lv_status lv_op_matmul_act(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                           const lv_tensor *bias, lv_activation act) {
    return lv_op_matmul_ex(ctx, out, a, w, bias, act, false, LV_MATMUL_AUTO);
}

lv_status lv_op_matmul_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                           const lv_tensor *bias) {
    return lv_op_matmul_ex(ctx, out, a, w, bias, LV_ACT_NONE, true, LV_MATMUL_AUTO);
}
