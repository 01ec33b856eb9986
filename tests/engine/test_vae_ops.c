/* The Wan VAE decoder and encoder kernels (engine/ops/ops_vae.c) against the double-precision C references
 * (tests/reference/ref_vae.c) on random inputs, several shapes including odd sizes (the
 * scalar channel path, partial workgroups), and contexts with a small binding limit so
 * that the row-band splitting runs.
 *
 * Bounds:
 * - Convolutions, per output: a sum of n terms (kt * k * k * Ci products, the bias and the
 *   residual) computed in fp32 in any order is off by at most gamma_n sum |terms| with
 *   gamma_n = n u / (1 - n u), u = 2^-24; the reference's rounding to float adds u |want|.
 *   We assert |got - want| <= (n + 3) u mag, mag = sum |terms| from the reference. A wrong
 *   tap, frame, channel, padding or upsampled index changes an output by a whole term,
 *   about mag / n, far above this.
 * - RMS norm (+ SiLU), per output: the sum of C squares is off by at most C u relative,
 *   its square root by C u / 2, then a division and three products, and SiLU's exp (at
 *   most 3 + 2|y| ulp in Vulkan; |y| < 4 here) and division: at most (C / 2 + 16) u
 *   relative. We assert (C + 32) u |want| + 1e-30.
 * - Copies (upsample, interleave): exact.
 * - Flash attention: fp32 scores over D terms and the online rescaling; the error of the
 *   output relative to its size is of the order sqrt(D) u |q| |k| scale (about 1e-6
 *   here), so NMSE ~1e-12..1e-11. We assert NMSE <= 1e-9 (the decoder's end-to-end
 *   bound); a wrong key, tile, rescale or scale gives NMSE above 1e-3. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longvk/ops_vae.h"
#include "lv_internal.h"
#include "ops_matmul_internal.h"
#include "ref_vae.h"
#include "test_support.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

/* The tensor-core path's tests (conv_as_columns_and_a_product) store the columns in 16 bits,
 * and on a device with cooperative matrices the product rounds the weights to fp16 too: the
 * inputs and weights are then made exactly representable in that dtype, so that both reach
 * the products unchanged and the f32 bounds below still apply. */
static lv_dtype round_inputs = LV_F32;

static void round_to(float *x, size_t n) {
    for (size_t i = 0; round_inputs != LV_F32 && i < n; i++)
        x[i] = round_inputs == LV_F16 ? lv_half_to_float(lv_float_to_half(x[i]))
                                      : lv_bf16_to_float(lv_float_to_bf16(x[i]));
}

/* The activations' dtype (x, the history frames, the residual, out): f32, or f16 in
 * f16_activations_match_reference, whose inputs are then f16 values (round_to), so that only
 * the output's rounding to f16 is new: at most 2^-11 |want| <= 2^-11 mag for a normal f16
 * and 2^-25 (half the subnormal spacing) below. */
static lv_dtype act = LV_F32;
#define U16 4.8828125e-04 /* 2^-11 */

static lv_tensor act_tensor(lv_ctx *ctx, int ndim, const int64_t *shape, const float *data) {
    return ts_tensor(ctx, act, ndim, shape, data);
}
static lv_tensor act_empty(lv_ctx *ctx, int ndim, const int64_t *shape) {
    lv_tensor t;
    cr_assert_eq(lv_tensor_create(ctx, act, ndim, shape, &t), LV_OK, "%s", lv_last_error());
    return t;
}

static void check_conv_bound(const char *what, const float *got, const float *want,
                             const double *mag, size_t n, int terms) {
    if (act == LV_F32) ts_check_bound(what, got, want, mag, n, (terms + 3) * U);
    else ts_check_bound_abs(what, got, want, mag, n, (terms + 3) * U + U16, U16 / 16384);
}

static float *packed(const float *torch_w, int co, int ci, int kt, int ks) {
    float *p = malloc((size_t)co * ci * kt * ks * ks * sizeof *p);
    cr_assert_not_null(p);
    lv_vae_pack_conv_weight(torch_w, co, ci, kt, ks, ks, p);
    return p;
}

/* ---- causal conv3d ----------------------------------------------------------------------- */

typedef struct conv3d_case {
    int T, H, W, Ci, Co, ks;
    int hist_old, hist_new; /* 1: given, 0: NULL (zeros) */
    int bias, residual;     /* residual: 0 none, 1 separate tensor, 2 in place (= out) */
} conv3d_case;

static void conv3d_run(lv_ctx *ctx, const conv3d_case *c, uint64_t seed) {
    const int T = c->T, H = c->H, W = c->W, Ci = c->Ci, Co = c->Co, ks = c->ks;
    size_t fr_in = (size_t)H * W * Ci, fr_out = (size_t)H * W * Co;
    float *s = calloc((size_t)(T + 2) * fr_in, sizeof *s); /* cat(old, new, x) for the reference */
    cr_assert_not_null(s);
    if (c->hist_old) ts_rand_fill(s, fr_in, seed, -1, 1);
    if (c->hist_new) ts_rand_fill(s + fr_in, fr_in, seed + 1, -1, 1);
    ts_rand_fill(s + 2 * fr_in, (size_t)T * fr_in, seed + 2, -1, 1);
    round_to(s, (size_t)(T + 2) * fr_in);
    size_t nw = (size_t)Co * Ci * 3 * ks * ks;
    float *wt = ts_rand_alloc(nw, seed + 3, -1, 1), *bias = ts_rand_alloc((size_t)Co, seed + 4, -1, 1);
    round_to(wt, nw);
    float *res = ts_rand_alloc((size_t)T * fr_out, seed + 5, -1, 1);
    if (act != LV_F32) ts_round_to(act, res, (size_t)T * fr_out);
    float *wp = packed(wt, Co, Ci, 3, ks);

    int64_t xs[4] = {T, H, W, Ci}, hs[3] = {H, W, Ci}, ws[5] = {Co, 3, ks, ks, Ci}, bs[1] = {Co};
    int64_t os[4] = {T, H, W, Co};
    lv_tensor tx = act_tensor(ctx, 4, xs, s + 2 * fr_in);
    lv_tensor told = act_tensor(ctx, 3, hs, s), tnew = act_tensor(ctx, 3, hs, s + fr_in);
    lv_tensor tw = ts_tensor(ctx, LV_F32, 5, ws, wp), tb = ts_tensor(ctx, LV_F32, 1, bs, bias);
    lv_tensor tres = act_tensor(ctx, 4, os, res);
    lv_tensor tout = c->residual == 2 ? tres : act_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_conv3d(ctx, &tout, &tx, c->hist_old ? &told : NULL,
                                  c->hist_new ? &tnew : NULL, &tw, c->bias ? &tb : NULL,
                                  c->residual ? &tres : NULL),
                 LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tout);
    size_t n = (size_t)T * fr_out;
    float *want = malloc(n * sizeof *want);
    double *mag = malloc(n * sizeof *mag);
    ref_vae_conv(want, mag, s, T + 2, H, W, Ci, wt, Co, 3, ks, c->bias ? bias : NULL,
                 c->residual ? res : NULL);
    char what[128];
    snprintf(what, sizeof what, "conv3d %s T%d %dx%d Ci%d Co%d k%d hist%d%d b%d r%d", lv_dtype_name(act), T, H, W,
             Ci, Co, ks, c->hist_old, c->hist_new, c->bias, c->residual);
    check_conv_bound(what, got, want, mag, n, 3 * ks * ks * Ci + 2);
    free(got), free(want), free(mag);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &told), lv_tensor_free(ctx, &tnew);
    lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &tb), lv_tensor_free(ctx, &tres);
    if (c->residual != 2) lv_tensor_free(ctx, &tout);
    free(s), free(wt), free(bias), free(res), free(wp);
}

Test(vae_ops, conv3d_matches_reference) {
    lv_ctx *ctx = ts_ctx();
    const conv3d_case cases[] = {
        {1, 5, 7, 8, 12, 3, 1, 1, 1, 0},   /* one frame, both history frames */
        {3, 4, 9, 5, 3, 3, 0, 0, 1, 0},    /* odd Ci (scalar path), Co = 3 like the head, zero history */
        {2, 6, 10, 16, 20, 3, 0, 1, 1, 2}, /* one history frame, residual in place */
        {4, 3, 5, 4, 9, 3, 1, 1, 0, 1},    /* more frames than history, separate residual */
        {2, 3, 17, 4, 33, 1, 1, 1, 1, 0},  /* 3x1x1 kernel (time_conv shape) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv3d_run(ctx, &cases[i], 100 + 10 * i);
    ts_ctx_done(ctx);
}

Test(vae_ops, conv3d_splits_rows_over_small_bindings) {
    /* 8 KiB bindings: a 33-pixel row of 8 channels is 1056 bytes, so a 12-row frame runs in
     * several bands, each reading its halo rows */
    lv_ctx *ctx = ts_ctx_with_binding(8192);
    conv3d_case c = {2, 12, 33, 8, 8, 3, 1, 1, 1, 1};
    conv3d_run(ctx, &c, 7);
    ts_ctx_done(ctx);
}

/* ---- time_conv with the channel-half interleave ------------------------------------------ */

static void time_conv_run(lv_ctx *ctx, int T, int H, int W, int C, int hist, uint64_t seed) {
    size_t fr = (size_t)H * W * C;
    float *s = calloc((size_t)(T + 2) * fr, sizeof *s);
    cr_assert_not_null(s);
    if (hist) ts_rand_fill(s, 2 * fr, seed, -1, 1);
    ts_rand_fill(s + 2 * fr, (size_t)T * fr, seed + 1, -1, 1);
    round_to(s, (size_t)(T + 2) * fr);
    float *wt = ts_rand_alloc((size_t)2 * C * C * 3, seed + 2, -1, 1);
    round_to(wt, (size_t)2 * C * C * 3);
    float *bias = ts_rand_alloc((size_t)2 * C, seed + 3, -1, 1);
    float *wp = packed(wt, 2 * C, C, 3, 1);
    int64_t xs[4] = {T, H, W, C}, hs[3] = {H, W, C}, ws[5] = {2 * C, 3, 1, 1, C}, bs[1] = {2 * C};
    int64_t os[4] = {2 * T, H, W, C};
    lv_tensor tx = act_tensor(ctx, 4, xs, s + 2 * fr);
    lv_tensor told = act_tensor(ctx, 3, hs, s), tnew = act_tensor(ctx, 3, hs, s + fr);
    lv_tensor tw = ts_tensor(ctx, LV_F32, 5, ws, wp), tb = ts_tensor(ctx, LV_F32, 1, bs, bias);
    lv_tensor tout = act_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_time_conv(ctx, &tout, &tx, hist ? &told : NULL, hist ? &tnew : NULL,
                                     &tw, &tb),
                 LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tout);
    size_t n = (size_t)T * fr * 2;
    float *conv = malloc(n * sizeof *conv), *want = malloc(n * sizeof *want);
    double *cmag = malloc(n * sizeof *cmag), *mag = malloc(n * sizeof *mag);
    ref_vae_conv(conv, cmag, s, T + 2, H, W, C, wt, 2 * C, 3, 1, bias, NULL);
    ref_vae_interleave_halves(want, conv, T, H, W, C);
    /* the magnitudes move with their values */
    size_t P = (size_t)H * W;
    for (int t = 0; t < T; t++)
        for (int half = 0; half < 2; half++)
            for (size_t p = 0; p < P; p++)
                for (int ch = 0; ch < C; ch++)
                    mag[((size_t)(2 * t + half) * P + p) * C + ch] =
                        cmag[((size_t)t * P + p) * 2 * C + (size_t)half * C + ch];
    char what[96];
    snprintf(what, sizeof what, "time_conv %s T%d %dx%d C%d hist%d", lv_dtype_name(act), T, H, W, C, hist);
    check_conv_bound(what, got, want, mag, n, 3 * C + 1);
    free(got), free(conv), free(want), free(cmag), free(mag);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &told), lv_tensor_free(ctx, &tnew);
    lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &tb), lv_tensor_free(ctx, &tout);
    free(s), free(wt), free(bias), free(wp);
}

Test(vae_ops, time_conv_interleaves_halves) {
    lv_ctx *ctx = ts_ctx();
    time_conv_run(ctx, 1, 4, 6, 8, 1, 300);
    time_conv_run(ctx, 3, 3, 5, 6, 0, 310);
    time_conv_run(ctx, 2, 2, 9, 7, 1, 320); /* odd C: scalar path */
    ts_ctx_done(ctx);
}

/* ---- per-frame conv2d, optionally on the 2x upsampled frame ------------------------------ */

/* The conv2d over [T, H, W, Ci], or (nrows > 0) only its output rows [row0, row0 + nrows)
 * of every frame (lv_op_vae_conv2d_rows), against the reference's rows; a window must also
 * hold the very bits of the whole conv's rows. */
static void conv2d_rows_run(lv_ctx *ctx, int T, int H, int W, int Ci, int Co, int up, int row0, int nrows,
                            uint64_t seed) {
    size_t n_in = (size_t)T * H * W * Ci;
    int OH = H << up, OW = W << up, R = nrows ? nrows : OH;
    float *x = ts_rand_alloc(n_in, seed, -1, 1);
    round_to(x, n_in);
    float *wt = ts_rand_alloc((size_t)Co * Ci * 9, seed + 1, -1, 1);
    round_to(wt, (size_t)Co * Ci * 9);
    float *bias = ts_rand_alloc((size_t)Co, seed + 2, -1, 1);
    float *wp = packed(wt, Co, Ci, 1, 3);
    int64_t xs[4] = {T, H, W, Ci}, ws[5] = {Co, 1, 3, 3, Ci}, bs[1] = {Co}, os[4] = {T, OH, OW, Co};
    int64_t rs[4] = {T, R, OW, Co};
    lv_tensor tx = act_tensor(ctx, 4, xs, x), tw = ts_tensor(ctx, LV_F32, 5, ws, wp);
    lv_tensor tb = ts_tensor(ctx, LV_F32, 1, bs, bias), tout = act_empty(ctx, 4, os), trows = act_empty(ctx, 4, rs);
    cr_assert_eq(lv_op_vae_conv2d(ctx, &tout, &tx, &tw, &tb, up), LV_OK, "%s", lv_last_error());
    if (nrows)
        cr_assert_eq(lv_op_vae_conv2d_rows(ctx, &trows, &tx, &tw, &tb, up, row0), LV_OK, "%s", lv_last_error());
    float *whole = ts_read(ctx, &tout), *got = nrows ? ts_read(ctx, &trows) : whole;
    float *src = x;
    if (up) {
        src = malloc((size_t)T * OH * OW * Ci * sizeof *src);
        ref_vae_upsample2x(src, x, T, H, W, Ci);
    }
    size_t n = (size_t)T * OH * OW * Co, per_row = (size_t)OW * Co;
    float *want = malloc(n * sizeof *want);
    double *mag = malloc(n * sizeof *mag);
    /* frames are independent: a kt = 1 conv over the T frames */
    ref_vae_conv(want, mag, src, T, OH, OW, Ci, wt, Co, 1, 3, bias, NULL);
    if (nrows) /* the window's rows of the reference, packed like the output */
        for (int t = 0; t < T; t++) {
            memmove(want + (size_t)t * R * per_row, want + ((size_t)t * OH + row0) * per_row, R * per_row * sizeof *want);
            memmove(mag + (size_t)t * R * per_row, mag + ((size_t)t * OH + row0) * per_row, R * per_row * sizeof *mag);
            cr_assert_eq(memcmp(got + (size_t)t * R * per_row, whole + ((size_t)t * OH + row0) * per_row,
                                R * per_row * sizeof *got), 0, "conv2d rows %d+%d of frame %d differ from the whole "
                         "conv's", row0, nrows, t);
        }
    char what[96];
    snprintf(what, sizeof what, "conv2d %s T%d %dx%d Ci%d Co%d up%d rows %d+%d", lv_dtype_name(act), T, H, W, Ci, Co,
             up, row0, R);
    check_conv_bound(what, got, want, mag, (size_t)T * R * per_row, 9 * Ci + 1);
    if (up) free(src);
    if (nrows) free(got);
    free(whole), free(want), free(mag), free(x), free(wt), free(bias), free(wp);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &tout), lv_tensor_free(ctx, &trows);
}

static void conv2d_run(lv_ctx *ctx, int T, int H, int W, int Ci, int Co, int up, uint64_t seed) {
    conv2d_rows_run(ctx, T, H, W, Ci, Co, up, 0, 0, seed);
}

Test(vae_ops, conv2d_with_and_without_upsample) {
    lv_ctx *ctx = ts_ctx();
    conv2d_run(ctx, 2, 3, 5, 8, 6, 1, 400);
    conv2d_run(ctx, 1, 4, 6, 7, 9, 0, 410);
    conv2d_run(ctx, 1, 5, 3, 12, 17, 1, 420);
    ts_ctx_done(ctx);
    /* 4 KiB bindings: a 2x upsampled row of 38 pixels x 8 channels is 1216 bytes */
    ctx = ts_ctx_with_binding(4096);
    conv2d_run(ctx, 1, 9, 19, 4, 8, 1, 430);
    ts_ctx_done(ctx);
}

/* A window of output rows (the VAE over bands: a band's rows at twice the size and a halo
 * row each side): at the frame's top, in the middle (odd start: half a source row), at the
 * bottom; over small bindings too. Rows outside the frame are refused. */
Test(vae_ops, conv2d_rows_window) {
    lv_ctx *ctx = ts_ctx();
    conv2d_rows_run(ctx, 2, 6, 5, 8, 6, 1, 0, 5, 440);
    conv2d_rows_run(ctx, 2, 6, 5, 8, 6, 1, 3, 7, 441);
    conv2d_rows_run(ctx, 1, 6, 5, 7, 9, 1, 7, 5, 442);
    conv2d_rows_run(ctx, 1, 7, 4, 8, 5, 0, 2, 3, 443);
    ts_ctx_done(ctx);
    ctx = ts_ctx_with_binding(4096);
    conv2d_rows_run(ctx, 1, 9, 19, 4, 8, 1, 5, 9, 444);
    int64_t xs[4] = {1, 4, 3, 4}, ws[5] = {4, 1, 3, 3, 4}, os[4] = {1, 3, 6, 4};
    lv_tensor tx = ts_empty(ctx, 4, xs), tw = ts_empty(ctx, 5, ws), to = ts_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_conv2d_rows(ctx, &to, &tx, &tw, NULL, 1, 6), LV_ERR_INVALID); /* rows 6..9 of 8 */
    cr_assert(strstr(lv_last_error(), "outside the 8 rows"), "%s", lv_last_error());
    cr_assert_eq(lv_op_vae_conv2d_rows(ctx, &to, &tx, &tw, NULL, 1, -1), LV_ERR_INVALID);
    cr_assert_eq(lv_op_vae_conv2d_rows(ctx, &to, &tx, &tw, NULL, 1, 5), LV_OK, "%s", lv_last_error());
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &to);
    ts_ctx_done(ctx);
}

/* ---- the encoder's stride-2 conv ------------------------------------------------------------ */

/* lv_op_vae_conv2d_down over [T, H, W, Ci] against the reference "same" conv read at the odd
 * positions: output (y, x) of ZeroPad2d((0, 1, 0, 1)) + stride-2 conv reads rows 2y .. 2y + 2
 * and columns 2x .. 2x + 2, which is exactly what the padding-1 conv centred on (2y + 1,
 * 2x + 1) reads, zeros past the last row and column included (odd H, W too). */
static void conv2d_down_run(lv_ctx *ctx, int T, int H, int W, int Ci, int Co, uint64_t seed) {
    size_t n_in = (size_t)T * H * W * Ci;
    int OH = H / 2, OW = W / 2;
    float *x = ts_rand_alloc(n_in, seed, -1, 1);
    round_to(x, n_in);
    float *wt = ts_rand_alloc((size_t)Co * Ci * 9, seed + 1, -1, 1);
    round_to(wt, (size_t)Co * Ci * 9);
    float *bias = ts_rand_alloc((size_t)Co, seed + 2, -1, 1);
    float *wp = packed(wt, Co, Ci, 1, 3);
    int64_t xs[4] = {T, H, W, Ci}, ws[5] = {Co, 1, 3, 3, Ci}, bs[1] = {Co}, os[4] = {T, OH, OW, Co};
    lv_tensor tx = ts_tensor(ctx, LV_F32, 4, xs, x), tw = ts_tensor(ctx, LV_F32, 5, ws, wp);
    lv_tensor tb = ts_tensor(ctx, LV_F32, 1, bs, bias), tout = ts_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_conv2d_down(ctx, &tout, &tx, &tw, &tb), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tout);
    size_t nf = (size_t)T * H * W * Co, n = (size_t)T * OH * OW * Co;
    float *full = malloc(nf * sizeof *full), *want = malloc(n * sizeof *want);
    double *fmag = malloc(nf * sizeof *fmag), *mag = malloc(n * sizeof *mag);
    ref_vae_conv(full, fmag, x, T, H, W, Ci, wt, Co, 1, 3, bias, NULL);
    for (int t = 0; t < T; t++)
        for (int y = 0; y < OH; y++)
            for (int xx = 0; xx < OW; xx++)
                for (int o = 0; o < Co; o++) {
                    size_t d = (((size_t)t * OH + y) * OW + xx) * Co + o;
                    size_t s = (((size_t)t * H + 2 * y + 1) * W + 2 * xx + 1) * Co + o;
                    want[d] = full[s];
                    mag[d] = fmag[s];
                }
    char what[96];
    snprintf(what, sizeof what, "conv2d_down T%d %dx%d Ci%d Co%d", T, H, W, Ci, Co);
    check_conv_bound(what, got, want, mag, n, 9 * Ci + 1);
    free(got), free(full), free(want), free(fmag), free(mag), free(x), free(wt), free(bias), free(wp);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &tb), lv_tensor_free(ctx, &tout);
}

Test(vae_ops, conv2d_down_stride_two) {
    lv_ctx *ctx = ts_ctx();
    conv2d_down_run(ctx, 2, 6, 8, 8, 6, 460);
    conv2d_down_run(ctx, 1, 5, 7, 7, 9, 470);   /* odd sizes, scalar channels */
    conv2d_down_run(ctx, 3, 16, 10, 12, 17, 480);
    ts_ctx_done(ctx);
    /* 4 KiB bindings: a row of 38 pixels x 8 channels is 1216 bytes, 3 rows per band */
    ctx = ts_ctx_with_binding(4096);
    conv2d_down_run(ctx, 1, 18, 38, 8, 8, 490);
    int64_t xs[4] = {1, 4, 6, 4}, ws[5] = {4, 1, 3, 3, 4}, os[4] = {1, 4, 3, 4};
    lv_tensor tx = ts_empty(ctx, 4, xs), tw = ts_empty(ctx, 5, ws), to = ts_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_conv2d_down(ctx, &to, &tx, &tw, NULL), LV_ERR_INVALID); /* 4 rows, not 2 */
    cr_assert(strstr(lv_last_error(), "H / 2"), "%s", lv_last_error());
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &to);
    ts_ctx_done(ctx);
}

/* ---- the tensor-core path: columns and one matrix product ----------------------------------- */

/* LONGVK_VAE_CONV=gemm: every convolution as its columns (vae_im2col.comp) times the packed
 * weight (lv_op_matmul; on lavapipe the register kernel, on a GPU with f16 precision the
 * tensor cores), columns in f32, f16 and bf16 (the context's precision). The same cases as
 * the direct kernel's, under the same bounds (16-bit columns: inputs exactly representable
 * in them, so only the f32 sums differ): causal 3x3x3 with and without history, residual in
 * place and separate, the scalar column path (odd Ci), the 3x1x1 time_conv, the 2x upsampled
 * 2-D conv and a window of its rows, the encoder's stride-2 conv. Bindings too small for one row's columns fall back to
 * the direct kernel (conv3d_splits_rows_over_small_bindings passes either way). */
static void columns_cases(lv_ctx *ctx, int p) {
    const conv3d_case cases[] = {
        {1, 5, 7, 8, 12, 3, 1, 1, 1, 0},
        {3, 4, 9, 5, 3, 3, 0, 0, 1, 0},
        {2, 6, 10, 16, 20, 3, 0, 1, 1, 2},
        {4, 3, 5, 4, 9, 3, 1, 1, 0, 1},
        {2, 3, 17, 4, 33, 1, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv3d_run(ctx, &cases[i], 600 + 10 * i + p);
    time_conv_run(ctx, 3, 3, 5, 8, 1, 650 + p);
    conv2d_run(ctx, 2, 3, 5, 8, 6, 1, 660 + p);
    conv2d_rows_run(ctx, 2, 6, 5, 8, 6, 1, 3, 7, 670 + p);
    conv2d_down_run(ctx, 2, 6, 9, 8, 6, 680 + p);
    cr_assert_not_null(ctx->scratch.alloc, "no columns were made: the direct kernel ran");
}

static const lv_precision column_precisions[3] = {LV_PRECISION_F32, LV_PRECISION_F16, LV_PRECISION_BF16};
static const lv_dtype column_dtypes[3] = {LV_F32, LV_F16, LV_BF16};

Test(vae_ops, conv_as_columns_and_a_product) {
    setenv("LONGVK_VAE_CONV", "gemm", 1);
    for (int p = 0; p < 3; p++) {
        lv_ctx_options opt;
        lv_ctx_options_default(&opt);
        opt.precision = column_precisions[p];
        lv_ctx *ctx = ts_ctx_with(opt);
        round_inputs = column_dtypes[p];
        columns_cases(ctx, p);
        ts_ctx_done(ctx);
    }
    round_inputs = LV_F32;
}

/* The columns times the weight on the tensor cores (LONGVK_MATMUL_VARIANT=coopmat), the same
 * cases under the same bounds, at f16 and bf16 precision through every cooperative-matrix
 * shape the device lists that the kernel can use (LONGVK_COOPMAT_SHAPE): the inputs are
 * representable in the columns' 16-bit type and in fp16 (the kernel's input type; the
 * weights are rounded likewise), so only the fp32 sums differ. The profile's count of the
 * kernel's dispatches says it ran. At f32 precision the forced kernel is not taken (it
 * rounds its inputs to fp16: issue 57 saw these columns miss their f32 bound, 8.75e-4
 * against 3.61e-4), the fp32 kernels meet the f32 bounds, and the count is 0. Without
 * cooperative matrices on the device (or with a validation layer older than them) the
 * 16-bit passes are reported NOT RUN. */
Test(vae_ops, columns_through_the_tensor_cores) {
    setenv("LONGVK_VAE_CONV", "gemm", 1);
    setenv("LONGVK_MATMUL_VARIANT", "coopmat", 1);
    for (int p = 0; p < 3; p++) {
        lv_ctx_options opt;
        lv_ctx_options_default(&opt);
        opt.precision = column_precisions[p];
        opt.profile = 1;
        lv_ctx *ctx = ts_ctx_with(opt);
        round_inputs = column_dtypes[p];
        const lv_device_info *d = lv_ctx_device(ctx);
        if (p == 0) {
            columns_cases(ctx, p);
            cr_assert_eq(lv_flush(ctx), LV_OK, "%s", lv_last_error());
            cr_assert_eq(ctx->op_calls[LV_OP_MATMUL_COOPMAT], 0, "the tensor-core kernel ran at f32 precision");
            cr_log_info("f32 columns with LONGVK_MATMUL_VARIANT=coopmat: fp32 kernels, %llu matmul dispatches",
                        (unsigned long long)ctx->op_calls[LV_OP_MATMUL]);
            ts_ctx_done(ctx);
            continue;
        }
        if (!lv_ctx_coopmat(ctx)) {
            cr_log_info("NOT RUN: %s columns through the tensor cores: %s has none enabled (coopmat state %d; "
                        "`longvk devices` says why)", lv_dtype_name(column_dtypes[p]), d->name, (int)d->coopmat);
            ts_ctx_done(ctx);
            continue;
        }
        int n = d->coopmat_count < LV_COOPMAT_MAX_SHAPES ? d->coopmat_count : LV_COOPMAT_MAX_SHAPES, ran = 0;
        for (int i = 0; i < n; i++) {
            const lv_coopmat_shape *c = &d->coopmat_shapes[i];
            if (lv_matmul_coopmat_unusable(c)) continue;
            char v[16];
            snprintf(v, sizeof v, "%d", i);
            setenv("LONGVK_COOPMAT_SHAPE", v, 1);
            uint64_t before = ctx->op_calls[LV_OP_MATMUL_COOPMAT];
            columns_cases(ctx, p);
            cr_assert_eq(lv_flush(ctx), LV_OK, "%s", lv_last_error());
            uint64_t calls = ctx->op_calls[LV_OP_MATMUL_COOPMAT] - before;
            cr_assert_gt(calls, 0, "shape %d: the tensor-core kernel did not run", i);
            cr_log_info("%s columns through the tensor cores, shape %d (%ux%ux%u %s x %s + %s): %llu coopmat matmul "
                        "dispatches, every bound met", lv_dtype_name(column_dtypes[p]), i, c->m, c->n, c->k,
                        lv_coopmat_type_name(c->a_type), lv_coopmat_type_name(c->b_type),
                        lv_coopmat_type_name(c->c_type), (unsigned long long)calls);
            ran++;
        }
        unsetenv("LONGVK_COOPMAT_SHAPE");
        cr_assert_gt(ran, 0, "%s: the tensor cores are enabled but no shape was usable", d->name);
        ts_ctx_done(ctx);
    }
    unsetenv("LONGVK_MATMUL_VARIANT");
    round_inputs = LV_F32;
}

/* ---- channel RMS norm -------------------------------------------------------------------- */

static void rmsnorm_run(lv_ctx *ctx, int rows, int C, int silu, int zero_row, uint64_t seed) {
    size_t n = (size_t)rows * C;
    float *x = ts_rand_alloc(n, seed, -2, 2), *g = ts_rand_alloc((size_t)C, seed + 1, 0.5f, 1.5f);
    if (zero_row) memset(x, 0, (size_t)C * sizeof *x);
    if (act != LV_F32) ts_round_to(act, x, n);
    int64_t xs[2] = {rows, C}, gs[4] = {C, 1, 1, 1};
    lv_tensor tx = act_tensor(ctx, 2, xs, x), tg = ts_tensor(ctx, LV_F32, 4, gs, g);
    lv_tensor tout = act_empty(ctx, 2, xs);
    cr_assert_eq(lv_op_vae_rmsnorm(ctx, &tout, &tx, &tg, silu), LV_OK, "%s", lv_last_error());
    /* in place as well */
    cr_assert_eq(lv_op_vae_rmsnorm(ctx, &tx, &tx, &tg, silu), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tout), *got_inplace = ts_read(ctx, &tx);
    float *want = malloc(n * sizeof *want);
    ref_vae_rmsnorm(want, x, rows, C, g, silu);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(isfinite(got[i]), "rmsnorm: out[%zu] = %g", i, got[i]);
        double err = fabs((double)got[i] - want[i]);
        double tol = act == LV_F32 ? (C + 32) * U * fabs((double)want[i]) + 1e-30
                                   : ((C + 32) * U + U16) * fabs((double)want[i]) + U16 / 16384;
        cr_assert(err <= tol, "rmsnorm %s %dx%d silu%d: out[%zu] = %.9g, want %.9g", lv_dtype_name(act), rows, C,
                  silu, i, got[i], want[i]);
        if (err / tol > worst) worst = err / tol;
        cr_assert_eq(got[i], got_inplace[i], "rmsnorm in place differs at %zu", i);
    }
    cr_log_info("rmsnorm %dx%d silu%d: worst err/bound %.3f, nmse %.3g", rows, C, silu, worst,
                ts_nmse(got, want, n));
    free(got), free(got_inplace), free(want), free(x), free(g);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tg), lv_tensor_free(ctx, &tout);
}

Test(vae_ops, rmsnorm_matches_reference) {
    lv_ctx *ctx = ts_ctx();
    rmsnorm_run(ctx, 37, 32, 1, 1, 500); /* a zero row: 0 / max(0, 1e-12) = 0, no NaN */
    rmsnorm_run(ctx, 5, 7, 0, 0, 510);   /* odd C: scalar path */
    rmsnorm_run(ctx, 100, 384, 1, 0, 520);
    rmsnorm_run(ctx, 11, 96, 0, 0, 530);
    ts_ctx_done(ctx);
}

/* ---- copies ------------------------------------------------------------------------------- */

Test(vae_ops, upsample_and_interleave_are_exact) {
    lv_ctx *ctx = ts_ctx();
    const int shapes[][4] = {{2, 3, 5, 4}, {1, 4, 7, 3}, {3, 1, 1, 16}};
    for (size_t s = 0; s < 3; s++) {
        int T = shapes[s][0], H = shapes[s][1], W = shapes[s][2], C = shapes[s][3];
        size_t n = (size_t)T * H * W * C;
        float *x = ts_rand_alloc(n, 600 + s, -1, 1);
        int64_t xs[4] = {T, H, W, C}, us[4] = {T, 2 * H, 2 * W, C};
        lv_tensor tx = ts_tensor(ctx, LV_F32, 4, xs, x), tu = ts_empty(ctx, 4, us);
        cr_assert_eq(lv_op_vae_upsample2x(ctx, &tu, &tx), LV_OK, "%s", lv_last_error());
        float *got = ts_read(ctx, &tu), *want = malloc(4 * n * sizeof *want);
        ref_vae_upsample2x(want, x, T, H, W, C);
        cr_assert_eq(memcmp(got, want, 4 * n * sizeof *got), 0, "upsample2x shape %zu differs", s);
        free(got), free(want);
        lv_tensor_free(ctx, &tu);
        if (C % 2 == 0) {
            int64_t is[4] = {2 * T, H, W, C / 2};
            lv_tensor ti = ts_empty(ctx, 4, is);
            cr_assert_eq(lv_op_vae_interleave_halves(ctx, &ti, &tx), LV_OK, "%s", lv_last_error());
            got = ts_read(ctx, &ti);
            want = malloc(n * sizeof *want);
            ref_vae_interleave_halves(want, x, T, H, W, C / 2);
            cr_assert_eq(memcmp(got, want, n * sizeof *got), 0, "interleave shape %zu differs", s);
            free(got), free(want);
            lv_tensor_free(ctx, &ti);
        }
        lv_tensor_free(ctx, &tx);
        free(x);
    }
    ts_ctx_done(ctx);
}

Test(vae_ops, copies_split_over_small_bindings) {
    lv_ctx *ctx = ts_ctx_with_binding(2048);
    int T = 1, H = 10, W = 9, C = 8; /* upsampled rows of 18 x 8 floats: 576 bytes */
    size_t n = (size_t)T * H * W * C;
    float *x = ts_rand_alloc(n, 650, -1, 1);
    int64_t xs[4] = {T, H, W, C}, us[4] = {T, 2 * H, 2 * W, C};
    lv_tensor tx = ts_tensor(ctx, LV_F32, 4, xs, x), tu = ts_empty(ctx, 4, us);
    cr_assert_eq(lv_op_vae_upsample2x(ctx, &tu, &tx), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tu), *want = malloc(4 * n * sizeof *want);
    ref_vae_upsample2x(want, x, T, H, W, C);
    cr_assert_eq(memcmp(got, want, 4 * n * sizeof *got), 0);
    free(got), free(want), free(x);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tu);
    ts_ctx_done(ctx);
}

/* ---- f16 activations (the decoder at f16 precision) -------------------------------------- */

/* The same kernels with x, the history, the residual and out in f16 (weights, biases and
 * gammas f32): the direct conv's vec4 and scalar paths, in place, the row bands, the
 * upsampled conv, the time_conv, the norm, the copies, the attention, and the convs as
 * columns and a product. Bounds: the f32 ones plus the output's rounding (act, above). */
static void attention_run(lv_ctx *ctx, int N, int L, int D, uint64_t seed); /* below */

Test(vae_ops, f16_activations_match_reference) {
    act = LV_F16;
    round_inputs = LV_F16;
    lv_ctx *ctx = ts_ctx();
    const conv3d_case cases[] = {
        {1, 5, 7, 8, 12, 3, 1, 1, 1, 0},   /* vec4 path, both history frames */
        {3, 4, 9, 5, 3, 3, 0, 0, 1, 0},    /* odd Ci (scalar path), odd Co */
        {2, 6, 10, 16, 20, 3, 0, 1, 1, 2}, /* residual in place */
        {4, 3, 5, 4, 9, 3, 1, 1, 0, 1},    /* separate residual */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv3d_run(ctx, &cases[i], 2100 + 10 * i);
    time_conv_run(ctx, 2, 2, 9, 7, 1, 2200);
    conv2d_run(ctx, 2, 3, 5, 8, 6, 1, 2300);
    conv2d_rows_run(ctx, 1, 4, 5, 4, 5, 1, 3, 2, 2310);
    rmsnorm_run(ctx, 37, 32, 1, 1, 2400);
    rmsnorm_run(ctx, 5, 7, 0, 0, 2410);
    attention_run(ctx, 24, 24, 32, 2500);
    attention_run(ctx, 13, 20, 40, 2510);
    /* copies of f16 values stay exact */
    int64_t xs[4] = {2, 3, 5, 4}, us[4] = {2, 6, 10, 4}, is[4] = {4, 3, 5, 2};
    size_t n = 2 * 3 * 5 * 4;
    float *x = ts_rand_alloc(n, 2600, -1, 1);
    ts_round_to(LV_F16, x, n);
    lv_tensor tx = act_tensor(ctx, 4, xs, x), tu = act_empty(ctx, 4, us), ti = act_empty(ctx, 4, is);
    cr_assert_eq(lv_op_vae_upsample2x(ctx, &tu, &tx), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_vae_interleave_halves(ctx, &ti, &tx), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &tu), *want = malloc(4 * n * sizeof *want);
    ref_vae_upsample2x(want, x, 2, 3, 5, 4);
    cr_assert_eq(memcmp(got, want, 4 * n * sizeof *got), 0, "f16 upsample2x differs");
    free(got);
    got = ts_read(ctx, &ti);
    ref_vae_interleave_halves(want, x, 2, 3, 5, 2);
    cr_assert_eq(memcmp(got, want, n * sizeof *got), 0, "f16 interleave differs");
    free(got), free(want), free(x);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tu), lv_tensor_free(ctx, &ti);
    ts_ctx_done(ctx);
    /* 8 KiB bindings: the conv's row bands */
    ctx = ts_ctx_with_binding(8192);
    conv3d_case c = {2, 12, 33, 8, 8, 3, 1, 1, 1, 1};
    conv3d_run(ctx, &c, 2700);
    ts_ctx_done(ctx);
    /* the columns and a product (f16 columns at f16 precision): a 16-bit out with a residual
     * takes the product in f32 rows, then adds the residual (ops_vae.c, conv_frame_gemm) */
    setenv("LONGVK_VAE_CONV", "gemm", 1);
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.precision = LV_PRECISION_F16;
    ctx = ts_ctx_with(opt);
    for (size_t i = 1; i < 4; i++) conv3d_run(ctx, &cases[i], 2800 + 10 * i); /* none, in place, separate */
    conv2d_run(ctx, 2, 3, 5, 8, 6, 1, 2850);
    cr_assert_not_null(ctx->scratch.alloc, "no columns were made: the direct kernel ran");
    ts_ctx_done(ctx);
    unsetenv("LONGVK_VAE_CONV");
    act = LV_F32;
    round_inputs = LV_F32;
}

/* ---- flash attention ---------------------------------------------------------------------- */

static void attention_run(lv_ctx *ctx, int N, int L, int D, uint64_t seed) {
    float *q = ts_rand_alloc((size_t)N * D, seed, -1, 1);
    float *k = ts_rand_alloc((size_t)L * D, seed + 1, -1, 1);
    float *v = ts_rand_alloc((size_t)L * D, seed + 2, -1, 1);
    if (act != LV_F32) {
        ts_round_to(act, q, (size_t)N * D);
        ts_round_to(act, k, (size_t)L * D);
        ts_round_to(act, v, (size_t)L * D);
    }
    int64_t qs[2] = {N, D}, ks[2] = {L, D};
    lv_tensor tq = act_tensor(ctx, 2, qs, q), tk = act_tensor(ctx, 2, ks, k);
    lv_tensor tv = act_tensor(ctx, 2, ks, v), to = act_empty(ctx, 2, qs);
    double scale = 1.0 / sqrt((double)D);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(lv_op_flash_attention(ctx, &to, &tq, &tk, &tv, (float)scale), LV_OK, "%s",
                 lv_last_error());
    float *got = ts_read(ctx, &to), *want = malloc((size_t)N * D * sizeof *want);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ref_vae_attention(want, q, k, v, N, L, D, (float)scale);
    double e = ts_nmse(got, want, (size_t)N * D);
    cr_log_info("flash attention N%d L%d D%d: nmse %.3g, max|err| %.3g (%.2f s on the device)", N,
                L, D, e, ts_max_abs_diff(got, want, (size_t)N * D),
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    /* f16 out: every element off by at most 2^-11 of itself more, so the error's norm grows
     * by at most 2^-11 of the output's (triangle inequality) */
    const double bound = act == LV_F32 ? 1e-9 : (sqrt(1e-9) + U16) * (sqrt(1e-9) + U16);
    cr_assert(e <= bound, "flash attention %s N%d L%d D%d: nmse %.3g > %.3g", lv_dtype_name(act), N, L, D, e, bound);
    free(got), free(want), free(q), free(k), free(v);
    lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &tk), lv_tensor_free(ctx, &tv);
    lv_tensor_free(ctx, &to);
}

Test(vae_ops, flash_attention_matches_reference) {
    lv_ctx *ctx = ts_ctx();
    attention_run(ctx, 24, 24, 32, 700);   /* the tiny decoder's middle block */
    attention_run(ctx, 50, 301, 40, 710);  /* partial last key tile, D not a multiple of 8 */
    attention_run(ctx, 13, 20, 384, 720);  /* the real decoder's width */
    attention_run(ctx, 1, 1, 3, 730);
    ts_ctx_done(ctx);
    /* 8 KiB bindings: queries of 32 floats run in bands of 63 rows */
    ctx = ts_ctx_with_binding(8192);
    attention_run(ctx, 200, 60, 32, 740);
    ts_ctx_done(ctx);
}

Test(vae_ops, attention_scores_never_stored) {
    /* 6240 tokens (a 480p latent frame) at a small width: the full score matrix would be
     * 156 MB, more than the 8 MiB bindings allowed here; the kernel needs only q, k, v, out */
    lv_ctx *ctx = ts_ctx_with_binding(8u << 20);
    uint64_t before = lv_ctx_memory_peak(ctx);
    attention_run(ctx, 6240, 6240, 8, 750);
    uint64_t peak = lv_ctx_memory_peak(ctx) - before;
    cr_assert(peak <= 4ull * 6240 * 8 * 4 + 4096, "attention used %llu bytes of device memory",
              (unsigned long long)peak);
    ts_ctx_done(ctx);
}

/* ---- errors ------------------------------------------------------------------------------- */

Test(vae_ops, bad_shapes_are_clean_errors) {
    lv_ctx *ctx = ts_ctx();
    int64_t xs[4] = {1, 2, 3, 4}, ws[5] = {5, 3, 3, 3, 6}, os[4] = {1, 2, 3, 5};
    lv_tensor tx = ts_empty(ctx, 4, xs), tw = ts_empty(ctx, 5, ws), to = ts_empty(ctx, 4, os);
    cr_assert_eq(lv_op_vae_conv3d(ctx, &to, &tx, NULL, NULL, &tw, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "w is [5, 3, 3, 3, 6]") != NULL, "%s", lv_last_error());
    cr_assert_eq(lv_op_vae_conv3d(ctx, &tx, &tx, NULL, NULL, &tw, NULL, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_op_vae_conv2d(ctx, &to, &tx, &tw, NULL, 2), LV_ERR_INVALID);
    int64_t qs[2] = {4, 600};
    lv_tensor tq = ts_empty(ctx, 2, qs), tq2 = ts_empty(ctx, 2, qs);
    cr_assert_eq(lv_op_flash_attention(ctx, &tq2, &tq, &tq, &tq, 1.0f), LV_ERR_UNSUPPORTED);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &to);
    lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &tq2);
    ts_ctx_done(ctx);
}
