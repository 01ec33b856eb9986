/* The Mix-FFN convolutions: per-frame depthwise 3x3 and the temporal conv over frames. */
#include <string.h>

#include "longvk/ops.h"
#include "lv_internal.h"
#include "op_helpers.h"
#include "push_dwconv3x3.h"
#include "push_temporal_conv.h"

/* How many rows of `row_bytes` fit one binding (beside `extra` rows of halo), or 0. */
static int64_t rows_per_binding(const lv_ctx *ctx, uint64_t row_bytes, int64_t extra) {
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    uint64_t max_binding = lv_ctx_max_binding(ctx);
    if (max_binding <= align) return 0;
    int64_t rows = (int64_t)((max_binding - align) / row_bytes) - extra;
    return rows > 0 ? rows : 0;
}

/* ---- depthwise 3x3 --------------------------------------------------------------------- */

#define DW_LOCAL 64
/* Output columns per invocation: each input value loaded serves up to 3 of them. */
#define DW_X_BLOCK 8

lv_status lv_op_dwconv3x3(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *w, const lv_tensor *bias) {
    char d0[96], d1[96];
    if (!out || !x || !w)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: out, x and w are required");
    const lv_tensor *all[4] = {out, x, w, bias};
    const char *names[4] = {"out", "x", "w", "bias"};
    /* x and out may be 16-bit activations (f16 / bf16: the Mix-FFN's), read and written as words */
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->dtype != LV_F32 && !(i < 2 && (all[i]->dtype == LV_F16 || all[i]->dtype == LV_BF16)))
            return lv_error(LV_ERR_INVALID, "dwconv3x3: %s must be f32%s, got %s", names[i],
                            i < 2 ? ", f16 or bf16" : "", lv_tensor_describe(all[i], d0, sizeof d0));
    if (x->ndim != 4 || !lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "dwconv3x3: want x and out [F, H, W, C] of one shape; "
                        "got x %s, out %s", lv_tensor_describe(x, d0, sizeof d0),
                        lv_tensor_describe(out, d1, sizeof d1));
    int64_t F = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    if (w->ndim != 4 || w->shape[0] != C || w->shape[1] != 1 || w->shape[2] != 3 || w->shape[3] != 3)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: w %s must be [%lld, 1, 3, 3]",
                        lv_tensor_describe(w, d0, sizeof d0), (long long)C);
    if (bias && lv_tensor_numel(bias) != C)
        return lv_error(LV_ERR_INVALID, "dwconv3x3: bias %s must have C = %lld elements",
                        lv_tensor_describe(bias, d0, sizeof d0), (long long)C);
    for (int i = 1; i < 4; i++)
        if (all[i]) LV_TRY(lv_check_alias("dwconv3x3", out, names[i], all[i], false));
    int64_t total_rows = F * H;
    if (total_rows == 0 || W == 0 || C == 0) return LV_OK;

    /* Split over rows (of all frames together): a chunk's input binding holds its rows
     * plus one halo row above and below. */
    uint64_t row_bytes = (uint64_t)W * (uint64_t)C * 4;
    int64_t chunk = rows_per_binding(ctx, row_bytes, 2);
    if (chunk < 1)
        return lv_error(LV_ERR_LIMIT, "dwconv3x3: three image rows of x %s (%llu bytes each) "
                        "exceed the device's binding limit (%llu bytes)",
                        lv_tensor_describe(x, d0, sizeof d0), (unsigned long long)row_bytes,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    if ((uint64_t)lv_tensor_nbytes(w) + ctx->limits.minStorageBufferOffsetAlignment >
        lv_ctx_max_binding(ctx))
        return lv_error(LV_ERR_LIMIT, "dwconv3x3: w %s exceeds the device's binding limit "
                        "(%llu bytes)", lv_tensor_describe(w, d0, sizeof d0),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    int64_t strips = (W + DW_X_BLOCK - 1) / DW_X_BLOCK;
    int64_t row_elems = W * C;
    int64_t xrows_shape[2] = {total_rows, row_elems};
    lv_tensor x2 = lv_tensor_view(x, 0, 2, xrows_shape), o2 = lv_tensor_view(out, 0, 2, xrows_shape);

    for (int64_t r0 = 0; r0 < total_rows; r0 += chunk) {
        int64_t rows = total_rows - r0 < chunk ? total_rows - r0 : chunk;
        int64_t in0 = r0 > 0 ? r0 - 1 : 0;
        int64_t in1 = r0 + rows < total_rows ? r0 + rows + 1 : total_rows;
        lv_tensor oc = lv_tensor_rows(&o2, r0, rows), xc = lv_tensor_rows(&x2, in0, in1 - in0);
        lv_binding b[4] = {{&oc, true, 0}, {&xc, false, 0}, {w, false, 0},
                           {bias ? bias : w, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_DWCONV3X3, b, 4));
        /* 4 channels per invocation as vec4 when rows and bindings are 16-byte aligned */
        bool vec = C % 4 == 0 && b[0].elem_offset % 4 == 0 && b[1].elem_offset % 4 == 0 &&
                   b[2].elem_offset % 4 == 0;
        uint32_t spec[5] = {DW_LOCAL, DW_X_BLOCK, vec ? 1u : 0u, (uint32_t)x->dtype, (uint32_t)out->dtype};
        lv_push_dwconv3x3 pc = {
            .out_offset = b[0].elem_offset,
            .x_offset = b[1].elem_offset,
            .w_offset = b[2].elem_offset,
            .bias_offset = b[3].elem_offset,
            .has_bias = bias ? 1u : 0u,
            .row0 = (uint32_t)r0,
            .rows = (uint32_t)rows,
            .in_row0 = (uint32_t)in0,
            .height = (uint32_t)H,
            .width = (uint32_t)W,
            .channels = (uint32_t)C,
            .strips = (uint32_t)strips,
        };
        uint64_t invocations = (uint64_t)rows * (uint64_t)strips * (uint64_t)(vec ? C / 4 : C);
        if (invocations > UINT32_MAX)
            return lv_error(LV_ERR_LIMIT, "dwconv3x3: %llu invocations in one dispatch exceed "
                            "32-bit indexing", (unsigned long long)invocations);
        uint32_t gx, gy;
        lv_grid_1d(ctx, (invocations + DW_LOCAL - 1) / DW_LOCAL, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_DWCONV3X3, spec, 5, b, 4, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

/* ---- temporal conv ---------------------------------------------------------------------- */

/* lavapipe (llvmpipe) stops every loop of an invocation once their iterations add up to
 * 65535 (LP_MAX_TGSI_LOOP_ITERATIONS), silently; the kernel loops once per channel (or
 * per 4 channels). */
#define LV_LAVAPIPE_LOOP_BUDGET 60000

/* Specialization constants of shaders/temporal_conv.comp. */
typedef struct tconv_tile {
    uint32_t local, tm, tn, vec, shuf;
} tconv_tile;

/* Rows of the source are shared within a subgroup through subgroupShuffle, which needs
 * subgroups of exactly 8 lanes: trusted on CPU devices (one fixed subgroup size) only. */
static tconv_tile tconv_choose_tile(const lv_ctx *ctx, bool vec) {
    const lv_device_info *dev = lv_ctx_device(ctx);
    if (dev->type == LV_DEVICE_CPU && dev->subgroup_size == 8)
        /* lavapipe, each load a serial loop over the lanes: 32 rows x 8 lanes x 8 channels,
         * per 4 input channels 24 + 12 vec4 loads per lane for 3072 multiply-adds */
        return vec ? (tconv_tile){8, 32, 8, 1, 1} : (tconv_tile){8, 16, 4, 0, 1};
    /* GPUs (untuned): 64 invocations, each 8 rows x 4 channels, rows read by every lane */
    return (tconv_tile){64, 8, 4, vec ? 1u : 0u, 0};
}

/* What one kernel pass computes: output rows [r0, r1) (global, over [F, P]) of out2, from
 * src2 (src_frames frames of P rows), taps in tap_mask, source frame = f + t - 1 + shift. */
typedef struct tconv_pass {
    const lv_tensor *out2, *src2, *w;
    int64_t P, C, src_frames, shift;
    uint32_t tap_mask;
    bool accumulate;
    int64_t r0, r1;
} tconv_pass;

static int tap_lo(uint32_t mask) { return mask & 1u ? 0 : mask & 2u ? 1 : 2; }
static int tap_hi(uint32_t mask) { return mask & 4u ? 2 : mask & 2u ? 1 : 0; }

/* Rows of halo a chunk's source binding holds beyond its output rows. */
static int64_t tconv_halo(const tconv_pass *ps) {
    return (int64_t)(tap_hi(ps->tap_mask) - tap_lo(ps->tap_mask)) * ps->P;
}

static lv_status tconv_run(lv_ctx *ctx, const tconv_pass *ps, int64_t chunk) {
    int64_t src_rows = ps->src_frames * ps->P;
    for (int64_t c0 = ps->r0; c0 < ps->r1; c0 += chunk) {
        int64_t rows = ps->r1 - c0 < chunk ? ps->r1 - c0 : chunk;
        /* source rows the chunk reads: its rows moved by the lowest and highest tap */
        int64_t s0 = c0 + (tap_lo(ps->tap_mask) - 1 + ps->shift) * ps->P;
        int64_t s1 = c0 + rows + (tap_hi(ps->tap_mask) - 1 + ps->shift) * ps->P;
        if (s0 < 0) s0 = 0;
        if (s1 > src_rows) s1 = src_rows;
        if (s1 <= s0) { /* every tap reads padding: a plain pass would add zeros */
            s0 = 0;
            s1 = 1;
        }
        lv_tensor oc = lv_tensor_rows(ps->out2, c0, rows), sc = lv_tensor_rows(ps->src2, s0, s1 - s0);
        lv_binding b[3] = {{&oc, true, 0}, {&sc, false, 0}, {ps->w, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_TEMPORAL_CONV, b, 3));
        bool vec = ps->C % 4 == 0 && b[0].elem_offset % 4 == 0 && b[1].elem_offset % 4 == 0 &&
                   b[2].elem_offset % 4 == 0;
        tconv_tile t = tconv_choose_tile(ctx, vec);
        uint32_t spec[5] = {t.local, t.tm, t.tn, t.vec, t.shuf};
        lv_push_temporal_conv pc = {
            .out_offset = b[0].elem_offset,
            .in_offset = b[1].elem_offset,
            .w_offset = b[2].elem_offset,
            .row0 = (uint32_t)c0,
            .rows = (uint32_t)rows,
            .in_row0 = (uint32_t)s0,
            .pixels = (uint32_t)ps->P,
            .src_frames = (uint32_t)ps->src_frames,
            .frame_shift = (int32_t)ps->shift,
            .channels = (uint32_t)ps->C,
            .tap_mask = ps->tap_mask,
            .accumulate = ps->accumulate ? 1u : 0u,
        };
        uint64_t per_group = (uint64_t)t.local * t.tn;
        uint32_t gx = (uint32_t)(((uint64_t)ps->C + per_group - 1) / per_group);
        uint32_t gy = (uint32_t)((rows + t.tm - 1) / t.tm);
        LV_TRY(lv_dispatch(ctx, LV_OP_TEMPORAL_CONV, spec, 5, b, 3, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_temporal_conv(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *prev, const lv_tensor *w) {
    char d0[96], d1[96];
    if (!out || !x || !w)
        return lv_error(LV_ERR_INVALID, "temporal_conv: out, x and w are required");
    const lv_tensor *all[4] = {out, x, prev, w};
    const char *names[4] = {"out", "x", "prev", "w"};
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "temporal_conv: %s must be f32, got %s", names[i],
                            lv_tensor_describe(all[i], d0, sizeof d0));
    if (x->ndim != 3 || !lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "temporal_conv: want x and out [F, P, C] of one shape; "
                        "got x %s, out %s", lv_tensor_describe(x, d0, sizeof d0),
                        lv_tensor_describe(out, d1, sizeof d1));
    int64_t F = x->shape[0], P = x->shape[1], C = x->shape[2];
    /* [C, C, 3], or PyTorch's [C, C, 3, 1] / [C, C, 3, 1, 1] */
    bool w_ok = w->ndim >= 3 && w->shape[0] == C && w->shape[1] == C && w->shape[2] == 3;
    for (int i = 3; w_ok && i < w->ndim; i++) w_ok = w->shape[i] == 1;
    if (!w_ok)
        return lv_error(LV_ERR_INVALID, "temporal_conv: w %s must be [%lld, %lld, 3] (trailing "
                        "1s allowed)", lv_tensor_describe(w, d0, sizeof d0), (long long)C,
                        (long long)C);
    if (prev && (prev->ndim != 2 || prev->shape[0] != P || prev->shape[1] != C))
        return lv_error(LV_ERR_INVALID, "temporal_conv: prev %s must be [P, C] = [%lld, %lld]",
                        lv_tensor_describe(prev, d0, sizeof d0), (long long)P, (long long)C);
    for (int i = 1; i < 4; i++)
        if (all[i]) LV_TRY(lv_check_alias("temporal_conv", out, names[i], all[i], false));
    if (F == 0 || P == 0 || C == 0) return LV_OK;
    if (lv_tensor_nbytes(w) + ctx->limits.minStorageBufferOffsetAlignment > lv_ctx_max_binding(ctx))
        return lv_error(LV_ERR_LIMIT, "temporal_conv: w %s (%llu bytes) exceeds the device's "
                        "binding limit (%llu bytes, maxStorageBufferRange)",
                        lv_tensor_describe(w, d0, sizeof d0),
                        (unsigned long long)lv_tensor_nbytes(w),
                        (unsigned long long)lv_ctx_max_binding(ctx));
    if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU && C > LV_LAVAPIPE_LOOP_BUDGET)
        return lv_error(LV_ERR_LIMIT, "temporal_conv: %lld channels need as many loop iterations "
                        "per invocation; CPU Vulkan drivers (lavapipe) stop loops after 65535",
                        (long long)C);
    int64_t budget = rows_per_binding(ctx, (uint64_t)C * 4, 0);
    if (budget < 1)
        return lv_error(LV_ERR_LIMIT, "temporal_conv: one pixel row of %lld channels exceeds "
                        "the device's binding limit (%llu bytes)", (long long)C,
                        (unsigned long long)lv_ctx_max_binding(ctx));
    /* chunks must also keep the grid within maxComputeWorkGroupCount[1] (rows / tile) */
    int64_t max_rows = (int64_t)ctx->limits.maxComputeWorkGroupCount[1] * 8;

    int64_t shape2[2] = {F * P, C};
    lv_tensor x2 = lv_tensor_view(x, 0, 2, shape2), o2 = lv_tensor_view(out, 0, 2, shape2);
    /* All three taps in one pass when a chunk of rows and its source halo of two frames fit
     * one binding; otherwise one pass per tap (each reads rows shifted by whole frames). */
    tconv_pass ps = {&o2, &x2, w, P, C, F, 0, 7u, false, 0, F * P};
    int64_t chunk = budget - tconv_halo(&ps);
    if (chunk >= 1) {
        LV_TRY(tconv_run(ctx, &ps, chunk < max_rows ? chunk : max_rows));
    } else {
        static const uint32_t order[3] = {2u, 1u, 4u}; /* centre tap first: it covers all rows */
        chunk = budget < max_rows ? budget : max_rows;
        for (int i = 0; i < 3; i++) {
            ps.tap_mask = order[i];
            ps.accumulate = i > 0;
            LV_TRY(tconv_run(ctx, &ps, chunk));
        }
    }
    if (prev) {
        /* frame 0's tap 0 reads the cached previous frame: source frame f + 0 - 1 + 1 = 0 */
        int64_t pshape[2] = {P, C};
        lv_tensor p2 = lv_tensor_view(prev, 0, 2, pshape);
        tconv_pass pp = {&o2, &p2, w, P, C, 1, 1, 1u, true, 0, P};
        LV_TRY(tconv_run(ctx, &pp, budget < max_rows ? budget : max_rows));
    }
    return LV_OK;
}

/* ---- temporal conv as matrix products (GPUs) -------------------------------------------- */

bool lv_temporal_conv_uses_gemm(const lv_ctx *ctx) {
    const char *forced = lv_env_str("LONGVK_TCONV");
    if (forced && strcmp(forced, "gemm") == 0) return true;
    if (forced && strcmp(forced, "direct") == 0) return false;
    return lv_matmul_auto_variant(ctx) != LV_MATMUL_REGISTER;
}

void lv_temporal_conv_taps(const lv_weight *w, int64_t C, float *dst) {
    for (int64_t o = 0; o < C; o++)
        for (int64_t i = 0; i < C; i++)
            for (int t = 0; t < 3; t++)
                dst[((int64_t)t * C + o) * C + i] = lv_weight_float(w, (size_t)((o * C + i) * 3 + t));
}

lv_status lv_op_temporal_conv_gemm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                   const lv_tensor *prev, const lv_tensor *w_taps) {
    char d0[96], d1[96];
    if (!ctx || !out || !x || !w_taps)
        return lv_error(LV_ERR_INVALID, "temporal_conv_gemm: ctx, out, x and w_taps are required");
    const lv_tensor *all[3] = {out, x, prev};
    const char *names[3] = {"out", "x", "prev"};
    for (int i = 0; i < 3; i++)
        if (all[i] && all[i]->dtype != LV_F32)
            return lv_error(LV_ERR_INVALID, "temporal_conv_gemm: %s must be f32, got %s", names[i],
                            lv_tensor_describe(all[i], d0, sizeof d0));
    if (x->ndim != 3 || !lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "temporal_conv_gemm: want x and out [F, P, C] of one shape; "
                        "got x %s, out %s", lv_tensor_describe(x, d0, sizeof d0),
                        lv_tensor_describe(out, d1, sizeof d1));
    int64_t F = x->shape[0], P = x->shape[1], C = x->shape[2];
    if (w_taps->ndim != 3 || w_taps->shape[0] != 3 || w_taps->shape[1] != C || w_taps->shape[2] != C)
        return lv_error(LV_ERR_INVALID, "temporal_conv_gemm: w_taps %s must be [3, %lld, %lld] "
                        "(tap-major: lv_temporal_conv_taps)", lv_tensor_describe(w_taps, d0, sizeof d0),
                        (long long)C, (long long)C);
    if (prev && (prev->ndim != 2 || prev->shape[0] != P || prev->shape[1] != C))
        return lv_error(LV_ERR_INVALID, "temporal_conv_gemm: prev %s must be [P, C] = [%lld, %lld]",
                        lv_tensor_describe(prev, d0, sizeof d0), (long long)P, (long long)C);
    for (int i = 1; i < 3; i++)
        if (all[i]) LV_TRY(lv_check_alias("temporal_conv_gemm", out, names[i], all[i], false));
    if (F == 0 || P == 0 || C == 0) return LV_OK;

    int64_t wshape[2] = {C, C}, shape2[2] = {F * P, C};
    lv_tensor tap[3];
    for (int t = 0; t < 3; t++) tap[t] = lv_tensor_view(w_taps, (int64_t)t * C * C, 2, wshape);
    lv_tensor x2 = lv_tensor_view(x, 0, 2, shape2), o2 = lv_tensor_view(out, 0, 2, shape2);
    /* the centre tap covers every row and sets out; the others add whole frames moved by one */
    LV_TRY(lv_op_matmul(ctx, &o2, &x2, &tap[1], NULL));
    if (F > 1) {
        lv_tensor o_late = lv_tensor_rows(&o2, P, (F - 1) * P), x_early = lv_tensor_rows(&x2, 0, (F - 1) * P);
        lv_tensor o_early = lv_tensor_rows(&o2, 0, (F - 1) * P), x_late = lv_tensor_rows(&x2, P, (F - 1) * P);
        LV_TRY(lv_op_matmul_add(ctx, &o_late, &x_early, &tap[0], NULL));
        LV_TRY(lv_op_matmul_add(ctx, &o_early, &x_late, &tap[2], NULL));
    }
    if (prev) {
        int64_t pshape[2] = {P, C};
        lv_tensor p2 = lv_tensor_view(prev, 0, 2, pshape), o_first = lv_tensor_rows(&o2, 0, P);
        LV_TRY(lv_op_matmul_add(ctx, &o_first, &p2, &tap[0], NULL));
    }
    return LV_OK;
}
