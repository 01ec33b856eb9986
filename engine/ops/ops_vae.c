/* Kernels of the Wan2.1 VAE: the causal conv3d with its two-frame history, the
 * time_conv with its channel-half interleave, the per-frame 2-D conv (optionally on the
 * 2x upsampled frame, or with stride 2 for the encoder), the channel RMS norm (+ SiLU), the nearest 2x upsample and the
 * half interleave as plain copies, and flash attention for the middle block.
 *
 * Convolutions run one output frame at a time, split into bands of rows so that every
 * binding (the band of output rows, the rows of each input frame it reads, the weight)
 * fits lv_ctx_max_binding(): one frame of the 480p decoder's last stage (96 channels at
 * 480 x 832) is 153 MB, more than lavapipe's 128 MiB. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "longvk/ops_vae.h"
#include "lv_internal.h"
#include "norm_modes.h"
#include "op_helpers.h"
#include "ops_matmul_internal.h"
#include "push_flash_attention.h"
#include "push_vae_conv.h"
#include "push_vae_im2col.h"
#include "push_vae_resample.h"
#include "push_vae_rmsnorm.h"

void lv_vae_pack_conv_weight(const float *torch_w, int co, int ci, int kt, int kh, int kw,
                             float *packed) {
    size_t taps = (size_t)kt * kh * kw;
    for (int o = 0; o < co; o++)
        for (int i = 0; i < ci; i++)
            for (size_t t = 0; t < taps; t++)
                packed[((size_t)o * taps + t) * ci + i] = torch_w[((size_t)o * ci + i) * taps + t];
}

/* ---- shared helpers ------------------------------------------------------------------- */

static bool same_range(const lv_tensor *a, const lv_tensor *b) {
    return a->alloc == b->alloc && a->offset == b->offset &&
           lv_tensor_nbytes(a) == lv_tensor_nbytes(b);
}

/* Bytes a binding may cover, less the slack of an unaligned start. */
static uint64_t usable_binding(const lv_ctx *ctx) {
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    if (align < 4) align = 4;
    uint64_t limit = lv_ctx_max_binding(ctx);
    return limit > align ? limit - align : 0;
}

static lv_tensor flat_view(const lv_tensor *t, int64_t elem0, int64_t count) {
    return lv_tensor_view(t, elem0, 1, &count);
}

static lv_status check_tensor(const char *op, const char *name, const lv_tensor *t) {
    return lv_check_f32(op, name, t);
}

/* An activation: f32, or f16 / bf16 (16-bit activations, read and written as halves of
 * 32-bit words; the shaders compute in f32). Weights, biases and gammas stay f32. */
static lv_status check_act(const char *op, const char *name, const lv_tensor *t) {
    return lv_check_act(op, name, t);
}

/* `t` must have the dtype of `like` (tensors one shader binding type reads). */
static lv_status same_dtype(const char *op, const char *name, const lv_tensor *t, const char *like_name,
                            const lv_tensor *like) {
    if (t->dtype == like->dtype) return LV_OK;
    char d1[96], d2[96];
    return lv_error(LV_ERR_INVALID, "%s: %s %s must have the dtype of %s %s", op, name,
                    lv_tensor_describe(t, d1, sizeof d1), like_name, lv_tensor_describe(like, d2, sizeof d2));
}

static lv_status shape_fail(const char *op, const char *name, const lv_tensor *t,
                            const char *want) {
    char d[96];
    return lv_error(LV_ERR_INVALID, "%s: %s is %s, want %s", op, name,
                    lv_tensor_describe(t, d, sizeof d), want);
}

/* ---- convolution ---------------------------------------------------------------------- */

/* One output frame of a convolution. */
typedef struct conv_frame_args {
    const lv_tensor *out;   /* the computed rows of one output frame, rows (or OH) * OW * co elements */
    const lv_tensor *in[3]; /* the source frame read by weight frame f (H * W * ci); NULL: zeros */
    const lv_tensor *w;     /* packed [co, kt, ks, ks, ci] */
    const lv_tensor *bias;  /* co elements or NULL */
    const lv_tensor *res;   /* like out, or NULL */
    int64_t H, W, ci, co;
    int kt, ks, up;
    int down;               /* 1: stride 2, zeros after the frame only (then up is 0) */
    int64_t row0, rows;     /* out holds output rows [row0, row0 + rows); rows 0: all of them */
} conv_frame_args;

/* The source rows [*lo, *hi] that output rows [r0, r0 + nr) read, and the frames given
 * (bits 0-2), as both convolution kernels take them. */
static uint32_t source_rows(const conv_frame_args *a, int64_t r0, int64_t nr, int64_t *lo, int64_t *hi) {
    const int64_t OH = a->H << a->up, P = a->ks / 2;
    if (a->down) { /* output row y reads source rows 2y .. 2y + ks - 1 */
        *lo = 2 * r0;
        *hi = 2 * (r0 + nr - 1) + a->ks - 1 > a->H - 1 ? a->H - 1 : 2 * (r0 + nr - 1) + a->ks - 1;
    } else {
        *lo = (r0 - P < 0 ? 0 : r0 - P) >> a->up;
        *hi = (r0 + nr - 1 + P > OH - 1 ? OH - 1 : r0 + nr - 1 + P) >> a->up;
    }
    uint32_t frames = 0;
    for (int f = 0; f < 3; f++)
        if (a->in[f]) frames |= 1u << f;
    return frames;
}

/* ---- the tensor-core path: columns, then one matrix product ---- */

/* Where the matrix product runs on cooperative matrices (lv_matmul_auto_variant: f16
 * precision on a device with them), a convolution is its columns (im2col, in the
 * precision's dtype) times the packed weight seen as [co, K]: the product takes almost all
 * the work onto the tensor cores, as ggml's Vulkan backend does its 2-D convs. Elsewhere
 * the direct kernel (vae_conv.comp) is faster: it never writes the K = 27 ci columns of a
 * pixel. LONGVK_VAE_CONV=gemm or =direct forces one (tests run the columns on lavapipe). */
static bool conv_as_gemm(lv_ctx *ctx) {
    const char *v = lv_env_str("LONGVK_VAE_CONV");
    if (v && strcmp(v, "gemm") == 0) return true;
    if (v && strcmp(v, "direct") == 0) return false;
    return lv_matmul_auto_variant(ctx) == LV_MATMUL_COOPMAT;
}

/* columns of at most this many bytes per product: 64 MiB is 12 output rows of the 480p
 * decoder's last stage (832 pixels x 27 x 96 columns in f16), M about 10,000 */
#define VAE_GEMM_COLUMN_BYTES (64ull << 20)

/* The columns' dtype: the precision's (f32 unless 16-bit activations were asked for). */
static lv_dtype column_dtype(const lv_ctx *ctx) {
    const lv_precision prec = lv_ctx_precision(ctx);
    return prec == LV_PRECISION_F16 ? LV_F16 : prec == LV_PRECISION_BF16 ? LV_BF16 : LV_F32;
}

/* Output rows per product: their columns within the cap and a binding, at most rmax (the
 * rows whose source rows fit a binding, as conv_frame reckons them). 0 when one row's
 * columns do not fit (tiny test bindings): the direct kernel then. */
/* Output width of a convolution: the source's, doubled (up) or halved (down). */
static int64_t out_width(const conv_frame_args *a) { return a->down ? a->W >> 1 : a->W << a->up; }

/* A 16-bit out with a residual: the product goes to f32 rows after the columns in the
 * scratch, then out = product + residual (the product's accumulate wants an f32 out). */
static bool gemm_product_rows(const conv_frame_args *a) { return a->res && a->out->dtype != LV_F32; }

static int64_t gemm_rows(const lv_ctx *ctx, const conv_frame_args *a, int64_t rows, int64_t rmax) {
    const int64_t OW = out_width(a), K = (int64_t)a->kt * a->ks * a->ks * a->ci;
    const uint64_t usable = usable_binding(ctx), cap = VAE_GEMM_COLUMN_BYTES < usable ? VAE_GEMM_COLUMN_BYTES : usable;
    const uint64_t row_bytes = (uint64_t)K * lv_dtype_size(column_dtype(ctx)) + (gemm_product_rows(a) ? (uint64_t)a->co * 4 : 0);
    int64_t band = (int64_t)(cap / ((uint64_t)OW * row_bytes));
    if (band > rmax) band = rmax;
    return band < rows ? band : rows;
}

/* Output rows [row_first, row_end) in products of `band` rows; `first`: a given input frame
 * (the absent ones' views point at it and are not read). */
static lv_status conv_frame_gemm(lv_ctx *ctx, const char *op, const conv_frame_args *a, int first, int64_t row_first,
                                 int64_t row_end, int64_t band) {
    const int64_t OW = out_width(a), ci = a->ci, co = a->co;
    const int64_t K = (int64_t)a->kt * a->ks * a->ks * ci;
    const lv_dtype cdt = column_dtype(ctx);
    /* the columns, then (16-bit out with a residual) f32 product rows from a 16-byte
     * aligned word on */
    const bool product_rows = gemm_product_rows(a);
    const int64_t col_words = ((band * OW * K * (int64_t)lv_dtype_size(cdt) + 15) / 16) * 4;
    lv_tensor scratch, col;
    LV_TRY(lv_ctx_scratch(ctx, LV_F32, col_words + (product_rows ? band * OW * co : 0), &scratch));
    col = scratch;
    col.dtype = cdt;
    int64_t wshape[2] = {co, K};
    lv_tensor w2 = lv_tensor_view(a->w, 0, 2, wshape);
    for (int64_t r0 = row_first; r0 < row_end; r0 += band) {
        int64_t nr = row_end - r0 < band ? row_end - r0 : band, lo, hi;
        const uint32_t flags = source_rows(a, r0, nr, &lo, &hi);
        int64_t cshape[2] = {nr * OW, K};
        lv_tensor cv = lv_tensor_view(&col, 0, 2, cshape), iv[3];
        for (int f = 0; f < 3; f++)
            iv[f] = flat_view(a->in[f] ? a->in[f] : a->in[first], lo * a->W * ci, (hi - lo + 1) * a->W * ci);
        lv_binding b[4] = {{&cv, true, 0}, {&iv[0], false, 0}, {&iv[1], false, 0}, {&iv[2], false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_VAE_IM2COL, b, 4));
        uint32_t vec = ci % 4 == 0 && b[0].elem_offset % 4 == 0;
        for (int f = 1; f <= 3; f++) vec = vec && b[f].elem_offset % 4 == 0;
        const uint64_t groups = (uint64_t)(nr * OW * K) / (vec ? 4u : 1u);
        if (groups > 0xffffffffu)
            return lv_error(LV_ERR_LIMIT, "%s: %llu column groups in one dispatch", op, (unsigned long long)groups);
        lv_push_vae_im2col pc = {
            .col_off = b[0].elem_offset,
            .in_off0 = b[1].elem_offset,
            .in_off1 = b[2].elem_offset,
            .in_off2 = b[3].elem_offset,
            .flags = flags,
            .ci = (uint32_t)ci,
            .kt = (uint32_t)a->kt,
            .src_h = (uint32_t)a->H,
            .src_w = (uint32_t)a->W,
            .out_row0 = (uint32_t)r0,
            .rows = (uint32_t)nr,
            .in_row0 = (uint32_t)lo,
            .groups = (uint32_t)groups,
        };
        uint32_t spec[6] = {(uint32_t)a->ks, (uint32_t)a->up, vec, (uint32_t)cdt, (uint32_t)a->down,
                            (uint32_t)iv[first].dtype};
        uint32_t gx, gy;
        lv_grid_1d(ctx, (groups + 255) / 256, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_VAE_IM2COL, spec, 6, b, 4, &pc, sizeof pc, gx, gy, 1));
        /* out rows = columns x w^T + bias (+ the residual, added in the product's store) */
        int64_t oshape[2] = {nr * OW, co};
        lv_tensor ov = lv_tensor_view(a->out, (r0 - row_first) * OW * co, 2, oshape);
        if (!a->res) {
            LV_TRY(lv_op_matmul(ctx, &ov, &cv, &w2, a->bias));
            continue;
        }
        lv_tensor rv = lv_tensor_view(a->res, (r0 - row_first) * OW * co, 2, oshape);
        if (product_rows) {
            lv_tensor pv = lv_tensor_view(&scratch, col_words, 2, oshape);
            LV_TRY(lv_op_matmul(ctx, &pv, &cv, &w2, a->bias));
            LV_TRY(lv_op_add(ctx, &ov, &pv, &rv));
            continue;
        }
        if (!same_range(&rv, &ov)) LV_TRY(lv_tensor_copy(ctx, &ov, &rv));
        LV_TRY(lv_op_matmul_add(ctx, &ov, &cv, &w2, a->bias));
    }
    return LV_OK;
}

static lv_status conv_frame(lv_ctx *ctx, const char *op, const conv_frame_args *a) {
    const int64_t OH = a->down ? a->H >> 1 : a->H << a->up, OW = out_width(a), P = a->ks / 2;
    const int64_t ci = a->ci, co = a->co;
    const int64_t row_first = a->rows ? a->row0 : 0, row_end = a->rows ? a->row0 + a->rows : OH;
    if (row_end <= row_first || OW == 0 || co == 0) return LV_OK;
    int first = -1;
    for (int f = 0; f < 3; f++)
        if (a->in[f] && first < 0) first = f;
    if (first < 0) return lv_error(LV_ERR_INVALID, "%s: no input frame", op);
    uint64_t usable = usable_binding(ctx);
    char d[96];
    if (lv_tensor_nbytes(a->w) > usable)
        return lv_error(LV_ERR_LIMIT, "%s: weight %s (%llu bytes) exceeds the device's binding "
                        "limit (%llu bytes)", op, lv_tensor_describe(a->w, d, sizeof d),
                        (unsigned long long)lv_tensor_nbytes(a->w),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    /* rows per band: the output band, and the source rows it reads, each fit a binding;
     * a band of nr rows reads at most ((nr - 1 + 2P) >> up) + 2 source rows */
    int64_t out_row = OW * co * (int64_t)lv_dtype_size(a->out->dtype),
            in_row = a->W * (ci > 0 ? ci : 1) * (int64_t)lv_dtype_size(a->in[first]->dtype);
    int64_t ro = (int64_t)(usable / (uint64_t)out_row), ri = (int64_t)(usable / (uint64_t)in_row);
    int64_t rmax = ri >= 2 ? ((ri - 2) << a->up) + 1 - 2 * P : 0;
    if (a->down) /* nr output rows read 2 nr + ks - 2 source rows */
        rmax = ri >= a->ks ? (ri - a->ks + 2) / 2 : 0;
    if (conv_as_gemm(ctx)) {
        const int64_t gb = gemm_rows(ctx, a, row_end - row_first, rmax);
        if (gb > 0) return conv_frame_gemm(ctx, op, a, first, row_first, row_end, gb);
    }
    int64_t band = row_end - row_first;
    if (band > ro) band = ro;
    if (band > rmax) band = rmax;
    /* register blocking: 8 pixels x tr rows x 8 tn channels per workgroup. On lavapipe (2
     * cores, 32 x 48 x 96 -> 96 and 16 x 24 x 192 -> 192) tr 2, tn 8 ran at 15-19 GFLOP/s
     * per 2 CPU-seconds against 11-13 for tr 1, tn 4; GPUs get the smaller register
     * footprint. LONGVK_VAE_CONV_TR / _TN override (tuning). */
    bool cpu = ctx->info.type == LV_DEVICE_CPU;
    uint32_t tr = (uint32_t)lv_env_u64("LONGVK_VAE_CONV_TR", cpu ? 2 : 1, 1, 64),
             tn = (uint32_t)lv_env_u64("LONGVK_VAE_CONV_TN", cpu ? 8 : 4, 1, 64);
    uint32_t tn_needed = (uint32_t)((co + 7) / 8);
    if (tn > tn_needed) tn = tn_needed;
    int64_t max_band = (int64_t)ctx->limits.maxComputeWorkGroupCount[1] * tr;
    if (band > max_band) band = max_band;
    if (band < 1)
        return lv_error(LV_ERR_LIMIT, "%s: one band of output rows (%lld bytes a row) and the "
                        "%lld source rows it reads (%lld bytes a row) exceed the device's "
                        "binding limit (%llu bytes)", op, (long long)out_row,
                        (long long)(2 * P + 2), (long long)in_row,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    uint64_t gx = (uint64_t)(OW + 7) / 8, gz = ((uint64_t)co + 8 * tn - 1) / (8 * tn);
    if (gx > ctx->limits.maxComputeWorkGroupCount[0] || gz > ctx->limits.maxComputeWorkGroupCount[2])
        return lv_error(LV_ERR_LIMIT, "%s: a frame %lld wide with %lld output channels needs "
                        "more workgroups than the device allows", op, (long long)OW, (long long)co);

    for (int64_t r0 = row_first; r0 < row_end; r0 += band) {
        int64_t nr = row_end - r0 < band ? row_end - r0 : band, lo, hi;
        const uint32_t frames = source_rows(a, r0, nr, &lo, &hi);
        int64_t nin = hi - lo + 1;
        lv_tensor ov = flat_view(a->out, (r0 - row_first) * OW * co, nr * OW * co);
        lv_tensor iv[3];
        for (int f = 0; f < 3; f++)
            iv[f] = flat_view(a->in[f] ? a->in[f] : a->in[first], lo * a->W * ci, nin * a->W * ci);
        lv_tensor rv = a->res ? flat_view(a->res, (r0 - row_first) * OW * co, nr * OW * co) : iv[first];
        lv_tensor bv = a->bias ? *a->bias : *a->w;
        lv_binding b[7] = {{&ov, true, 0},  {&iv[0], false, 0}, {&iv[1], false, 0},
                           {&iv[2], false, 0}, {a->w, false, 0}, {&bv, false, 0},
                           {&rv, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_VAE_CONV, b, 7));
        uint32_t vec = ci % 4 == 0 && b[4].elem_offset % 4 == 0;
        for (int f = 1; f <= 3; f++) vec = vec && b[f].elem_offset % 4 == 0;
        const uint32_t flags = frames | (a->bias ? 8u : 0u) | (a->res ? 16u : 0u);
        lv_push_vae_conv pc = {
            .out_off = b[0].elem_offset,
            .in_off0 = b[1].elem_offset,
            .in_off1 = b[2].elem_offset,
            .in_off2 = b[3].elem_offset,
            .w_off = b[4].elem_offset,
            .bias_off = b[5].elem_offset,
            .res_off = b[6].elem_offset,
            .flags = flags,
            .ci = (uint32_t)ci,
            .co = (uint32_t)co,
            .kt = (uint32_t)a->kt,
            .src_h = (uint32_t)a->H,
            .src_w = (uint32_t)a->W,
            .out_row0 = (uint32_t)r0,
            .rows = (uint32_t)nr,
            .in_row0 = (uint32_t)lo,
        };
        uint32_t spec[8] = {tr, tn, (uint32_t)a->ks, (uint32_t)a->up, vec, (uint32_t)a->down,
                            (uint32_t)iv[first].dtype, (uint32_t)a->out->dtype};
        uint32_t gy = (uint32_t)((nr + tr - 1) / tr);
        LV_TRY(lv_dispatch(ctx, LV_OP_VAE_CONV, spec, 8, b, 7, &pc, sizeof pc, (uint32_t)gx, gy,
                           (uint32_t)gz));
    }
    return LV_OK;
}

/* Checks shared by the causal convs: x [T, H, W, Ci], the history frames, out. */
static lv_status check_causal(const char *op, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *hist_old, const lv_tensor *hist_new,
                              const lv_tensor *w, const lv_tensor *bias) {
    if (!out || !x || !w) return lv_error(LV_ERR_INVALID, "%s: out, x and w are required", op);
    LV_TRY(check_act(op, "out", out));
    LV_TRY(check_act(op, "x", x));
    LV_TRY(check_tensor(op, "w", w));
    if (x->ndim != 4) return shape_fail(op, "x", x, "[T, H, W, Ci]");
    const lv_tensor *hist[2] = {hist_old, hist_new};
    const char *hname[2] = {"hist_old", "hist_new"};
    for (int i = 0; i < 2; i++) {
        if (!hist[i]) continue;
        LV_TRY(check_act(op, hname[i], hist[i]));
        LV_TRY(same_dtype(op, hname[i], hist[i], "x", x));
        if (hist[i]->ndim != 3 || hist[i]->shape[0] != x->shape[1] ||
            hist[i]->shape[1] != x->shape[2] || hist[i]->shape[2] != x->shape[3])
            return shape_fail(op, hname[i], hist[i], "[H, W, Ci] of x");
        LV_TRY(lv_check_alias(op, out, hname[i], hist[i], false));
    }
    if (bias) LV_TRY(check_tensor(op, "bias", bias));
    LV_TRY(lv_check_alias(op, out, "x", x, false));
    LV_TRY(lv_check_alias(op, out, "w", w, false));
    if (bias) LV_TRY(lv_check_alias(op, out, "bias", bias, false));
    return LV_OK;
}

static lv_tensor frame_view(const lv_tensor *t, int64_t frame) {
    int64_t shape[3] = {t->shape[1], t->shape[2], t->shape[3]};
    return lv_tensor_view(t, frame * shape[0] * shape[1] * shape[2], 3, shape);
}

/* The three input frames of causal output frame t: frames t .. t+2 of
 * cat(hist_old, hist_new, x), the two cached frames standing before x. */
static void causal_inputs(conv_frame_args *a, lv_tensor src[3], const lv_tensor *x,
                          const lv_tensor *hist_old, const lv_tensor *hist_new, int64_t t) {
    for (int f = 0; f < 3; f++) {
        int64_t s = t + f;
        if (s >= 2) {
            src[f] = frame_view(x, s - 2);
            a->in[f] = &src[f];
        } else {
            a->in[f] = s == 0 ? hist_old : hist_new;
        }
    }
}

lv_status lv_op_vae_conv3d(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                           const lv_tensor *hist_old, const lv_tensor *hist_new,
                           const lv_tensor *w, const lv_tensor *bias, const lv_tensor *residual) {
    const char *op = "lv_op_vae_conv3d";
    LV_TRY(check_causal(op, out, x, hist_old, hist_new, w, bias));
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], Ci = x->shape[3];
    if (w->ndim != 5 || w->shape[1] != 3 || w->shape[2] != w->shape[3] ||
        (w->shape[2] != 3 && w->shape[2] != 1) || w->shape[4] != Ci)
        return shape_fail(op, "w", w, "packed [Co, 3, k, k, Ci] with k = 3 or 1 and Ci of x");
    int64_t Co = w->shape[0];
    if (out->ndim != 4 || out->shape[0] != T || out->shape[1] != H || out->shape[2] != W ||
        out->shape[3] != Co)
        return shape_fail(op, "out", out, "[T, H, W, Co] of x and w");
    if (bias && lv_tensor_numel(bias) != Co) return shape_fail(op, "bias", bias, "Co elements");
    if (residual) {
        LV_TRY(check_act(op, "residual", residual));
        LV_TRY(same_dtype(op, "residual", residual, "out", out));
        if (!lv_tensor_same_shape(residual, out)) return shape_fail(op, "residual", residual, "out's shape");
        LV_TRY(lv_check_alias(op, out, "residual", residual, true)); /* in place is allowed */
    }
    for (int64_t t = 0; t < T; t++) {
        lv_tensor ov = frame_view(out, t), rv = residual ? frame_view(residual, t) : ov;
        lv_tensor src[3];
        conv_frame_args a = {.out = &ov, .w = w, .bias = bias, .res = residual ? &rv : NULL,
                             .H = H, .W = W, .ci = Ci, .co = Co, .kt = 3,
                             .ks = (int)w->shape[2], .up = 0};
        causal_inputs(&a, src, x, hist_old, hist_new, t);
        LV_TRY(conv_frame(ctx, op, &a));
    }
    return LV_OK;
}

lv_status lv_op_vae_time_conv(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *hist_old, const lv_tensor *hist_new,
                              const lv_tensor *w, const lv_tensor *bias) {
    const char *op = "lv_op_vae_time_conv";
    LV_TRY(check_causal(op, out, x, hist_old, hist_new, w, bias));
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    if (w->ndim != 5 || w->shape[0] != 2 * C || w->shape[1] != 3 || w->shape[2] != 1 ||
        w->shape[3] != 1 || w->shape[4] != C)
        return shape_fail(op, "w", w, "packed [2C, 3, 1, 1, C] with C of x");
    if (out->ndim != 4 || out->shape[0] != 2 * T || out->shape[1] != H || out->shape[2] != W ||
        out->shape[3] != C)
        return shape_fail(op, "out", out, "[2T, H, W, C] of x");
    if (bias && lv_tensor_numel(bias) != 2 * C) return shape_fail(op, "bias", bias, "2C elements");
    int64_t wshape[5] = {C, 3, 1, 1, C};
    for (int64_t t = 0; t < T; t++)
        for (int half = 0; half < 2; half++) {
            lv_tensor ov = frame_view(out, 2 * t + half);
            lv_tensor wv = lv_tensor_view(w, half * C * 3 * C, 5, wshape);
            lv_tensor bv = bias ? flat_view(bias, half * C, C) : wv;
            lv_tensor src[3];
            conv_frame_args a = {.out = &ov, .w = &wv, .bias = bias ? &bv : NULL, .res = NULL,
                                 .H = H, .W = W, .ci = C, .co = C, .kt = 3, .ks = 1, .up = 0};
            causal_inputs(&a, src, x, hist_old, hist_new, t);
            LV_TRY(conv_frame(ctx, op, &a));
        }
    return LV_OK;
}

lv_status lv_op_vae_conv2d_rows(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                const lv_tensor *w, const lv_tensor *bias, int upsample, int64_t out_row0) {
    const char *op = "lv_op_vae_conv2d";
    LV_TRY(check_causal(op, out, x, NULL, NULL, w, bias));
    if (upsample != 0 && upsample != 1)
        return lv_error(LV_ERR_INVALID, "%s: upsample must be 0 or 1, not %d", op, upsample);
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], Ci = x->shape[3];
    if (w->ndim != 5 || w->shape[1] != 1 || w->shape[2] != 3 || w->shape[3] != 3 ||
        w->shape[4] != Ci)
        return shape_fail(op, "w", w, "packed [Co, 1, 3, 3, Ci] with Ci of x");
    int64_t Co = w->shape[0], OH = H << upsample;
    if (out->ndim != 4 || out->shape[0] != T || out->shape[2] != W << upsample || out->shape[3] != Co)
        return shape_fail(op, "out", out, upsample ? "[T, rows of 2H, 2W, Co]" : "[T, rows of H, W, Co]");
    if (out_row0 < 0 || out->shape[1] < 1 || out_row0 + out->shape[1] > OH)
        return lv_error(LV_ERR_INVALID, "%s: output rows %lld to %lld are outside the %lld rows of the output "
                        "frame", op, (long long)out_row0, (long long)(out_row0 + out->shape[1]), (long long)OH);
    if (bias && lv_tensor_numel(bias) != Co) return shape_fail(op, "bias", bias, "Co elements");
    for (int64_t t = 0; t < T; t++) {
        lv_tensor ov = frame_view(out, t), src = frame_view(x, t);
        conv_frame_args a = {.out = &ov, .in = {&src, NULL, NULL}, .w = w, .bias = bias,
                             .res = NULL, .H = H, .W = W, .ci = Ci, .co = Co, .kt = 1, .ks = 3,
                             .up = upsample, .row0 = out_row0, .rows = out->shape[1]};
        LV_TRY(conv_frame(ctx, op, &a));
    }
    return LV_OK;
}

lv_status lv_op_vae_conv2d_down(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                const lv_tensor *w, const lv_tensor *bias) {
    const char *op = "lv_op_vae_conv2d_down";
    LV_TRY(check_causal(op, out, x, NULL, NULL, w, bias));
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], Ci = x->shape[3];
    if (H < 2 || W < 2) return shape_fail(op, "x", x, "frames of at least 2 x 2");
    if (w->ndim != 5 || w->shape[1] != 1 || w->shape[2] != 3 || w->shape[3] != 3 ||
        w->shape[4] != Ci)
        return shape_fail(op, "w", w, "packed [Co, 1, 3, 3, Ci] with Ci of x");
    int64_t Co = w->shape[0];
    if (out->ndim != 4 || out->shape[0] != T || out->shape[1] != H / 2 || out->shape[2] != W / 2 ||
        out->shape[3] != Co)
        return shape_fail(op, "out", out, "[T, H / 2, W / 2, Co] of x and w");
    if (bias && lv_tensor_numel(bias) != Co) return shape_fail(op, "bias", bias, "Co elements");
    for (int64_t t = 0; t < T; t++) {
        lv_tensor ov = frame_view(out, t), src = frame_view(x, t);
        conv_frame_args a = {.out = &ov, .in = {&src, NULL, NULL}, .w = w, .bias = bias,
                             .res = NULL, .H = H, .W = W, .ci = Ci, .co = Co, .kt = 1, .ks = 3,
                             .up = 0, .down = 1};
        LV_TRY(conv_frame(ctx, op, &a));
    }
    return LV_OK;
}

lv_status lv_op_vae_conv2d(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                           const lv_tensor *w, const lv_tensor *bias, int upsample) {
    if (out && x && out->ndim == 4 && x->ndim == 4 && (upsample == 0 || upsample == 1) &&
        out->shape[1] != x->shape[1] << upsample)
        return shape_fail("lv_op_vae_conv2d", "out", out, upsample ? "[T, 2H, 2W, Co]" : "[T, H, W, Co]");
    return lv_op_vae_conv2d_rows(ctx, out, x, w, bias, upsample, 0);
}

/* ---- channel RMS norm ----------------------------------------------------------------- */

lv_status lv_op_vae_rmsnorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                            const lv_tensor *gamma, int silu) {
    const char *op = "lv_op_vae_rmsnorm";
    if (!out || !x || !gamma) return lv_error(LV_ERR_INVALID, "%s: out, x and gamma are required", op);
    LV_TRY(check_act(op, "out", out));
    LV_TRY(check_act(op, "x", x));
    LV_TRY(check_tensor(op, "gamma", gamma));
    if (!lv_tensor_same_shape(out, x)) return shape_fail(op, "out", out, "the shape of x");
    LV_TRY(lv_check_alias(op, out, "x", x, true));
    LV_TRY(lv_check_alias(op, out, "gamma", gamma, false));
    int64_t R, C;
    lv_rows_cols(x, &R, &C);
    if (lv_tensor_numel(gamma) != C) return shape_fail(op, "gamma", gamma, "C (x's last dim) elements");
    if (R == 0 || C == 0) return LV_OK;

    VkPhysicalDeviceSubgroupProperties sg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &sg};
    vkGetPhysicalDeviceProperties2(ctx->physical, &props);
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sg.supportedOperations & need) != need || sg.subgroupSize < 4)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: device '%s' lacks subgroup arithmetic", op,
                        ctx->info.name);
    /* as the engine's norms: a row per subgroup on CPU devices, a workgroup per row else */
    bool cpu = ctx->info.type == LV_DEVICE_CPU;
    uint32_t wg = cpu ? sg.subgroupSize * 8 : (C >= 1024 ? 256 : 64);
    if (wg < sg.subgroupSize) wg = sg.subgroupSize;
    uint32_t mode = cpu ? LV_ROWS_PER_SUBGROUP : LV_ROWS_PER_WORKGROUP;
    uint32_t rows_per_wg = cpu ? 8 : 1;

    int64_t per;
    const uint64_t row_bytes = (uint64_t)C * (lv_dtype_size(x->dtype) > lv_dtype_size(out->dtype) ? lv_dtype_size(x->dtype) : lv_dtype_size(out->dtype));
    LV_TRY(lv_rows_per_binding(ctx, op, x, row_bytes, &per));
    for (int64_t r0 = 0; r0 < R; r0 += per) {
        int64_t nr = R - r0 < per ? R - r0 : per;
        lv_tensor vo = lv_rows_view(out, r0, nr, C), vx = lv_rows_view(x, r0, nr, C);
        lv_tensor vg = flat_view(gamma, 0, C);
        lv_binding b[3] = {{&vo, true, 0}, {&vx, false, 0}, {&vg, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_VAE_RMSNORM, b, 3));
        uint32_t vec4 = C % 4 == 0 && b[0].elem_offset % 4 == 0 && b[1].elem_offset % 4 == 0 &&
                        b[2].elem_offset % 4 == 0;
        uint32_t spec[5] = {wg, mode, vec4, (uint32_t)x->dtype, (uint32_t)out->dtype};
        lv_push_vae_rmsnorm pc = {
            .out_offset = b[0].elem_offset,
            .x_offset = b[1].elem_offset,
            .g_offset = b[2].elem_offset,
            .rows = (uint32_t)nr,
            .cols = (uint32_t)C,
            .silu = silu ? 1u : 0u,
            .sqrt_cols = (float)sqrt((double)C),
        };
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)nr + rows_per_wg - 1) / rows_per_wg, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_VAE_RMSNORM, spec, 5, b, 3, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

/* ---- gather copies: nearest 2x upsample, channel halves -------------------------------- */

/* One output frame [OH, OW, C] from one input frame [IH, IW, IC]; mode as in
 * push_vae_resample.h. Split into bands of rows that fit a binding. */
static lv_status resample_frame(lv_ctx *ctx, const char *op, const lv_tensor *out,
                                const lv_tensor *in, uint32_t mode, uint32_t half,
                                int64_t OH, int64_t OW, int64_t C, int64_t IW, int64_t IC) {
    if (OH == 0 || OW == 0 || C == 0) return LV_OK;
    uint64_t usable = usable_binding(ctx);
    int64_t ro = (int64_t)(usable / (uint64_t)(OW * C * (int64_t)lv_dtype_size(out->dtype)));
    int64_t ri = (int64_t)(usable / (uint64_t)(IW * IC * (int64_t)lv_dtype_size(in->dtype)));
    int64_t band = OH;
    if (band > ro) band = ro;
    /* mode 0 reads (nr + 1) / 2 + 1 rows at most for nr output rows */
    int64_t rmax = mode == 0 ? 2 * (ri - 1) - 1 : ri;
    if (band > rmax) band = rmax;
    if (band > (int64_t)ctx->limits.maxComputeWorkGroupCount[1])
        band = ctx->limits.maxComputeWorkGroupCount[1];
    if (band < 1)
        return lv_error(LV_ERR_LIMIT, "%s: a row of %lld x %lld values exceeds the device's "
                        "binding limit (%llu bytes)", op, (long long)OW, (long long)C,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    uint64_t groups = ((uint64_t)OW * C + 63) / 64;
    if (groups > ctx->limits.maxComputeWorkGroupCount[0])
        return lv_error(LV_ERR_LIMIT, "%s: a row of %lld x %lld values needs more workgroups "
                        "than the device allows", op, (long long)OW, (long long)C);
    for (int64_t r0 = 0; r0 < OH; r0 += band) {
        int64_t nr = OH - r0 < band ? OH - r0 : band;
        int64_t lo = mode == 0 ? r0 >> 1 : r0, hi = mode == 0 ? (r0 + nr - 1) >> 1 : r0 + nr - 1;
        lv_tensor ov = flat_view(out, r0 * OW * C, nr * OW * C);
        lv_tensor iv = flat_view(in, lo * IW * IC, (hi - lo + 1) * IW * IC);
        lv_binding b[2] = {{&ov, true, 0}, {&iv, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_VAE_RESAMPLE, b, 2));
        lv_push_vae_resample pc = {
            .out_offset = b[0].elem_offset,
            .in_offset = b[1].elem_offset,
            .mode = mode,
            .out_w = (uint32_t)OW,
            .channels = (uint32_t)C,
            .rows = (uint32_t)nr,
            .row0 = (uint32_t)r0,
            .in_row0 = (uint32_t)lo,
            .in_w = (uint32_t)IW,
            .in_channels = (uint32_t)IC,
            .half_sel = half,
        };
        uint32_t spec[2] = {(uint32_t)in->dtype, (uint32_t)out->dtype};
        LV_TRY(lv_dispatch(ctx, LV_OP_VAE_RESAMPLE, spec, 2, b, 2, &pc, sizeof pc,
                           (uint32_t)groups, (uint32_t)nr, 1));
    }
    return LV_OK;
}

static lv_status check_copy(const char *op, const lv_tensor *out, const lv_tensor *x) {
    if (!out || !x) return lv_error(LV_ERR_INVALID, "%s: out and x are required", op);
    LV_TRY(check_act(op, "out", out));
    LV_TRY(check_act(op, "x", x));
    if (x->ndim != 4) return shape_fail(op, "x", x, "[T, H, W, C]");
    LV_TRY(lv_check_alias(op, out, "x", x, false));
    return LV_OK;
}

lv_status lv_op_vae_upsample2x(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x) {
    const char *op = "lv_op_vae_upsample2x";
    LV_TRY(check_copy(op, out, x));
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    if (out->ndim != 4 || out->shape[0] != T || out->shape[1] != 2 * H ||
        out->shape[2] != 2 * W || out->shape[3] != C)
        return shape_fail(op, "out", out, "[T, 2H, 2W, C] of x");
    for (int64_t t = 0; t < T; t++) {
        lv_tensor ov = frame_view(out, t), iv = frame_view(x, t);
        LV_TRY(resample_frame(ctx, op, &ov, &iv, 0, 0, 2 * H, 2 * W, C, W, C));
    }
    return LV_OK;
}

lv_status lv_op_vae_interleave_halves(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x) {
    const char *op = "lv_op_vae_interleave_halves";
    LV_TRY(check_copy(op, out, x));
    int64_t T = x->shape[0], H = x->shape[1], W = x->shape[2], C2 = x->shape[3];
    if (C2 % 2 != 0) return shape_fail(op, "x", x, "an even channel count 2C");
    int64_t C = C2 / 2;
    if (out->ndim != 4 || out->shape[0] != 2 * T || out->shape[1] != H || out->shape[2] != W ||
        out->shape[3] != C)
        return shape_fail(op, "out", out, "[2T, H, W, C] of x [T, H, W, 2C]");
    for (int64_t t = 0; t < T; t++)
        for (uint32_t half = 0; half < 2; half++) {
            lv_tensor ov = frame_view(out, 2 * t + half), iv = frame_view(x, t);
            LV_TRY(resample_frame(ctx, op, &ov, &iv, 1, half, H, W, C, W, C2));
        }
    return LV_OK;
}

/* ---- flash attention ------------------------------------------------------------------ */

#define FA_MAX_D 512

lv_status lv_op_flash_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                const lv_tensor *k, const lv_tensor *v, float scale) {
    const char *op = "lv_op_flash_attention";
    if (!out || !q || !k || !v) return lv_error(LV_ERR_INVALID, "%s: out, q, k and v are required", op);
    LV_TRY(check_act(op, "out", out));
    LV_TRY(check_act(op, "q", q));
    LV_TRY(check_act(op, "k", k));
    LV_TRY(check_act(op, "v", v));
    LV_TRY(same_dtype(op, "k", k, "q", q));
    LV_TRY(same_dtype(op, "v", v, "q", q));
    if (q->ndim != 2) return shape_fail(op, "q", q, "[N, D]");
    int64_t N = q->shape[0], D = q->shape[1];
    if (k->ndim != 2 || k->shape[1] != D) return shape_fail(op, "k", k, "[L, D] with D of q");
    int64_t L = k->shape[0];
    if (!lv_tensor_same_shape(v, k)) return shape_fail(op, "v", v, "the shape of k");
    if (!lv_tensor_same_shape(out, q)) return shape_fail(op, "out", out, "the shape of q");
    if (D < 1 || D > FA_MAX_D)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: head dimension %lld is outside 1..%d", op,
                        (long long)D, FA_MAX_D);
    if (L < 1) return lv_error(LV_ERR_INVALID, "%s: no keys", op);
    LV_TRY(lv_check_alias(op, out, "q", q, false));
    LV_TRY(lv_check_alias(op, out, "k", k, false));
    LV_TRY(lv_check_alias(op, out, "v", v, false));
    if (!isfinite(scale)) return lv_error(LV_ERR_INVALID, "%s: scale must be finite", op);
    if (N == 0) return LV_OK;
    uint64_t usable = usable_binding(ctx);
    if (lv_tensor_nbytes(k) > usable) {
        char d[96];
        return lv_error(LV_ERR_LIMIT, "%s: keys %s (%llu bytes) exceed the device's binding "
                        "limit (%llu bytes); keys are not split", op,
                        lv_tensor_describe(k, d, sizeof d), (unsigned long long)lv_tensor_nbytes(k),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    }
    int64_t per;
    LV_TRY(lv_rows_per_binding(ctx, op, q, (uint64_t)D * 4, &per)); /* rows of q and of out, 4 bytes an element at most */
    uint32_t qb = (uint32_t)lv_env_u64("LONGVK_FA_QB", 1, 1, 64);
    uint32_t spec[5] = {(uint32_t)((D + 7) / 8), qb, 8, (uint32_t)q->dtype, (uint32_t)out->dtype};
    for (int64_t r0 = 0; r0 < N; r0 += per) {
        int64_t nr = N - r0 < per ? N - r0 : per;
        lv_tensor ov = lv_rows_view(out, r0, nr, D), qv = lv_rows_view(q, r0, nr, D);
        lv_binding b[4] = {{&ov, true, 0}, {&qv, false, 0}, {k, false, 0}, {v, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_FLASH_ATTN, b, 4));
        lv_push_flash_attention pc = {
            .out_offset = b[0].elem_offset,
            .q_offset = b[1].elem_offset,
            .k_offset = b[2].elem_offset,
            .v_offset = b[3].elem_offset,
            .nq = (uint32_t)nr,
            .nk = (uint32_t)L,
            .d = (uint32_t)D,
            .scale = scale,
        };
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)nr + qb - 1) / qb, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_FLASH_ATTN, spec, 5, b, 4, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}
