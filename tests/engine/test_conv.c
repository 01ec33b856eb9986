/* lv_op_dwconv3x3, lv_op_temporal_conv and lv_op_temporal_conv_gemm against the double-precision C references
 * (ref_conv.c).
 *
 * Error bound (asserted per output, worst case): each output is a sum of n products
 * (dwconv: 9 taps + bias, n <= 10; temporal conv: 3 taps x C input channels, n <= 3C).
 * Computed in fp32 in any order, with u = 2^-24, such a sum is off by at most
 * gamma_{n+1} sum |terms| (gamma_k = k u / (1 - k u): one rounding per product, n - 1 per
 * addition, plus the accumulate into out for the temporal conv's later taps), and the
 * reference's own rounding to float adds u |want|. The reference returns sum |terms|
 * (`mag`); we assert |got - want| <= (n + 3) u mag. A wrong tap, channel, frame or
 * padding changes an output by a whole term, about mag / n, far above this. The measured
 * max error relative to the bound is logged. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_conv.h"
#include "test_support.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

/* Asserts every output within (terms + 3) u mag; returns the worst err / bound ratio. */
static double check_bound(const char *what, const float *got, const float *want,
                          const double *mag, size_t n, int terms) {
    return ts_check_bound(what, got, want, mag, n, (terms + 3) * U);
}

/* ---- depthwise 3x3 -------------------------------------------------------------------- */

/* `shift` > 0 places x at that element offset inside a larger tensor (an unaligned
 * binding offset: the scalar path even when C % 4 == 0). */
static void dw_case_typed(lv_ctx *ctx, lv_dtype xdt, lv_dtype odt, int f, int h, int w, int c, int with_bias,
                          int shift, uint64_t seed) {
    size_t n = (size_t)f * h * w * c;
    float *x = ts_rand_alloc(n, seed, -1, 1);
    ts_round_to(xdt, x, n); /* the reference takes the same 16-bit x */
    float *wt = ts_rand_alloc((size_t)c * 9, seed + 1, -1, 1);
    float *bias = ts_rand_alloc((size_t)c, seed + 2, -1, 1);
    int64_t xs[4] = {f, h, w, c}, ws[4] = {c, 1, 3, 3}, bs[1] = {c};
    int64_t store_shape[1] = {(int64_t)n + shift};
    float *store = calloc(n + (size_t)shift, sizeof *store);
    memcpy(store + shift, x, n * sizeof *x);
    lv_tensor tstore = ts_tensor(ctx, xdt, 1, store_shape, store);
    lv_tensor tx = lv_tensor_view(&tstore, shift, 4, xs), tw = ts_tensor(ctx, LV_F32, 4, ws, wt);
    lv_tensor tb = ts_tensor(ctx, LV_F32, 1, bs, bias), to;
    cr_assert_eq(lv_tensor_create(ctx, odt, 4, xs, &to), LV_OK, "%s", lv_last_error());
    if (odt == LV_F32) cr_assert_eq(lv_op_fill(ctx, &to, NAN), LV_OK);
    cr_assert_eq(lv_op_dwconv3x3(ctx, &to, &tx, &tw, with_bias ? &tb : NULL), LV_OK, "%s",
                 lv_last_error());
    float *got = ts_read(ctx, &to), *want = malloc(n * sizeof *want);
    double *mag = malloc(n * sizeof *mag);
    ref_dwconv3x3(want, mag, x, wt, with_bias ? bias : NULL, f, h, w, c);
    char what[96];
    snprintf(what, sizeof what, "dwconv3x3 F=%d H=%d W=%d C=%d bias=%d x %s out %s shift %d", f, h, w, c,
             with_bias, lv_dtype_name(xdt), lv_dtype_name(odt), shift);
    /* a 16-bit out adds its rounding: ts_half_rel of |want| <= mag, and f16's subnormal spacing */
    ts_check_bound_abs(what, got, want, mag, n, 13 * U + ts_half_rel(odt), odt == LV_F16 ? 0x1p-25 : 0.0);
    free(x), free(wt), free(bias), free(got), free(want), free(mag), free(store);
    lv_tensor_free(ctx, &tstore), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
}

static void dw_case_at(lv_ctx *ctx, int f, int h, int w, int c, int with_bias, int shift, uint64_t seed) {
    dw_case_typed(ctx, LV_F32, LV_F32, f, h, w, c, with_bias, shift, seed);
}

static void dw_case(lv_ctx *ctx, int f, int h, int w, int c, int with_bias, uint64_t seed) {
    dw_case_at(ctx, f, h, w, c, with_bias, 0, seed);
}

Test(dwconv3x3, shapes) {
    lv_ctx *ctx = ts_ctx();
    dw_case(ctx, 1, 5, 7, 3, 1, 101);
    dw_case(ctx, 2, 5, 7, 70, 0, 102);
    dw_case(ctx, 3, 1, 1, 5, 1, 103);  /* 1x1 frames: only the centre tap */
    dw_case(ctx, 2, 4, 9, 13, 1, 104); /* W not a multiple of the 4-column strip */
    dw_case(ctx, 1, 2, 3, 64, 0, 105);
    dw_case(ctx, 3, 6, 4, 8, 1, 106);
    dw_case_at(ctx, 2, 5, 7, 8, 1, 1, 107); /* unaligned x: scalar path with C % 4 == 0 */
    ts_ctx_done(ctx);
}

/* x and out as 16-bit activations (the Mix-FFN's at precision f16 / bf16): the f32 bound
 * plus the rounding of a 16-bit out, the reference taking the same rounded x (arithmetic
 * stays fp32). 16-bit x with f32 out, f32 x with 16-bit out, and both. */
Test(dwconv3x3, half_x_and_out) {
    lv_ctx *ctx = ts_ctx();
    static const lv_dtype half[] = {LV_F16, LV_BF16};
    for (int i = 0; i < 2; i++)
        for (int pair = 0; pair < 3; pair++) {
            lv_dtype xdt = pair == 1 ? LV_F32 : half[i], odt = pair == 0 ? LV_F32 : half[i];
            uint64_t seed = 201 + 10 * (uint64_t)(3 * i + pair);
            dw_case_typed(ctx, xdt, odt, 2, 5, 7, 70, 1, 0, seed);     /* scalar path (C % 4 != 0) */
            dw_case_typed(ctx, xdt, odt, 1, 5, 7, 64, 1, 0, seed + 1); /* vec4 path */
            dw_case_typed(ctx, xdt, odt, 3, 6, 4, 8, 0, 4, seed + 2);  /* offset of 4 halves: vec4 */
            dw_case_typed(ctx, xdt, odt, 2, 5, 7, 8, 1, 1, seed + 3);  /* odd x offset: scalar */
        }
    ts_ctx_done(ctx);
}

Test(dwconv3x3, splits_rows_over_binding_limit) {
    /* a row of W*C = 7*6 floats is 168 bytes: 1 KiB bindings take 4 rows plus the halo,
     * 520 bytes only 1; chunks straddle the frame boundaries (H = 5) */
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    dw_case(ctx, 3, 5, 7, 6, 1, 111);
    ts_ctx_done(ctx);
    ctx = ts_ctx_with_binding(3 * 168 + 16);
    dw_case(ctx, 3, 5, 7, 6, 0, 112);
    ts_ctx_done(ctx);
}

Test(dwconv3x3, rejects_bad_arguments) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    int64_t xs[4] = {2, 3, 4, 5}, ws[4] = {5, 1, 3, 3}, wbad[4] = {5, 3, 3, 1}, bs[1] = {4};
    int64_t big[4] = {1, 3, 40, 5};
    lv_tensor x, o, w, wb, b, xbig, obig;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, xs, &x), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, xs, &o), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, ws, &w), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, wbad, &wb), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, bs, &b), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, big, &xbig), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 4, big, &obig), LV_OK);
    cr_assert_eq(lv_op_dwconv3x3(ctx, &o, &x, &wb, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "w "), "%s", lv_last_error());
    cr_assert_eq(lv_op_dwconv3x3(ctx, &o, &x, &w, &b), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "bias"), "%s", lv_last_error());
    cr_assert_eq(lv_op_dwconv3x3(ctx, &x, &x, &w, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    cr_assert_eq(lv_op_dwconv3x3(ctx, &obig, &x, &w, NULL), LV_ERR_INVALID);
    /* three rows of 40 * 5 floats (2400 bytes) exceed a 1 KiB binding */
    cr_assert_eq(lv_op_dwconv3x3(ctx, &obig, &xbig, &w, NULL), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "binding limit"), "%s", lv_last_error());
    lv_tensor *all[] = {&x, &o, &w, &wb, &b, &xbig, &obig};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}

/* ---- temporal conv -------------------------------------------------------------------- */

/* `shift` > 0 places x at that element offset inside a larger tensor (scalar path). */
static void tc_case_at(lv_ctx *ctx, int f, int p, int c, int with_prev, int w_ndim, int shift,
                       uint64_t seed) {
    size_t n = (size_t)f * p * c;
    float *x = ts_rand_alloc(n, seed, -1, 1);
    float *prev = ts_rand_alloc((size_t)p * c, seed + 1, -1, 1);
    float *wt = ts_rand_alloc((size_t)c * c * 3, seed + 2, -1, 1);
    int64_t xs[3] = {f, p, c}, ps[2] = {p, c}, ws[5] = {c, c, 3, 1, 1};
    int64_t store_shape[1] = {(int64_t)n + shift};
    float *store = calloc(n + (size_t)shift, sizeof *store);
    memcpy(store + shift, x, n * sizeof *x);
    lv_tensor tstore = ts_tensor(ctx, LV_F32, 1, store_shape, store);
    lv_tensor tx = lv_tensor_view(&tstore, shift, 3, xs), tp = ts_tensor(ctx, LV_F32, 2, ps, prev);
    lv_tensor tw = ts_tensor(ctx, LV_F32, w_ndim, ws, wt), to = ts_empty(ctx, 3, xs);
    cr_assert_eq(lv_op_fill(ctx, &to, NAN), LV_OK);
    cr_assert_eq(lv_op_temporal_conv(ctx, &to, &tx, with_prev ? &tp : NULL, &tw), LV_OK, "%s",
                 lv_last_error());
    float *got = ts_read(ctx, &to), *want = malloc(n * sizeof *want);
    double *mag = malloc(n * sizeof *mag);
    ref_temporal_conv(want, mag, x, with_prev ? prev : NULL, wt, f, p, c);
    char what[96];
    snprintf(what, sizeof what, "temporal_conv F=%d P=%d C=%d prev=%d", f, p, c, with_prev);
    check_bound(what, got, want, mag, n, 3 * c);
    free(x), free(prev), free(wt), free(got), free(want), free(mag), free(store);
    lv_tensor_free(ctx, &tstore), lv_tensor_free(ctx, &tp), lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &to);
}

static void tc_case(lv_ctx *ctx, int f, int p, int c, int with_prev, int w_ndim, uint64_t seed) {
    tc_case_at(ctx, f, p, c, with_prev, w_ndim, 0, seed);
}

Test(temporal_conv, shapes) {
    lv_ctx *ctx = ts_ctx();
    tc_case(ctx, 1, 5, 3, 0, 3, 201); /* one frame, no neighbours: the centre tap only */
    tc_case(ctx, 1, 5, 3, 1, 3, 202); /* one frame after a cached one */
    tc_case(ctx, 2, 7, 8, 1, 5, 203); /* PyTorch's [C, C, 3, 1, 1] weight */
    tc_case(ctx, 3, 35, 70, 1, 3, 204);
    tc_case(ctx, 3, 35, 70, 0, 4, 205);
    tc_case(ctx, 3, 6, 33, 1, 3, 206); /* C not a multiple of the channel tile */
    tc_case(ctx, 2, 13, 129, 0, 3, 207); /* more channels than one workgroup covers */
    tc_case(ctx, 4, 13, 72, 1, 3, 208);  /* the vec4 path over a partial channel tile */
    tc_case_at(ctx, 3, 7, 12, 1, 3, 2, 209); /* unaligned x: scalar path with C % 4 == 0 */
    ts_ctx_done(ctx);
}

Test(temporal_conv, splits_rows_over_binding_limit) {
    /* rows of C = 8 floats: 1 KiB bindings take 31 rows. With 35-pixel frames the two
     * frames of halo of the 3-tap pass do not fit: one pass per tap, chunks cut frames.
     * With 5-pixel frames 21 rows plus the halo fit: 3-tap passes over chunks. */
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    tc_case(ctx, 3, 35, 8, 1, 3, 211);
    tc_case(ctx, 3, 35, 8, 0, 3, 212);
    tc_case(ctx, 9, 5, 8, 1, 3, 213);
    ts_ctx_done(ctx);
}

/* lv_op_temporal_conv_gemm (the GPUs' path: three products with whole frames) against the
 * same reference and bound: each output is still a sum of 3C products, now added in three
 * products' order (and the accumulate of the later taps), which the bound does not depend
 * on. wdt LV_BF16: the weights are rounded to bf16 first and the reference takes the
 * rounded ones, so the bound is the same. */
static void tc_gemm_case(lv_ctx *ctx, int f, int p, int c, int with_prev, lv_dtype wdt, uint64_t seed) {
    size_t n = (size_t)f * p * c;
    float *x = ts_rand_alloc(n, seed, -1, 1);
    float *prev = ts_rand_alloc((size_t)p * c, seed + 1, -1, 1);
    float *wt = ts_rand_alloc((size_t)c * c * 3, seed + 2, -1, 1);
    ts_round_to(wdt, wt, (size_t)c * c * 3);
    float *taps = malloc((size_t)c * c * 3 * sizeof *taps);
    lv_weight w = {.name = "w", .dtype = LV_F32, .ndim = 3, .shape = {c, c, 3}, .data = wt,
                   .nbytes = (uint64_t)c * c * 3 * sizeof *wt};
    lv_temporal_conv_taps(&w, c, taps);
    /* the layout itself: taps[t, o, i] = w[o, i, t] */
    for (int t = 0; t < 3; t++)
        cr_assert_eq(taps[((size_t)t * c + (size_t)(c - 1)) * c + 1], wt[((size_t)(c - 1) * c + 1) * 3 + t]);
    int64_t xs[3] = {f, p, c}, ps[2] = {p, c}, ws[3] = {3, c, c};
    lv_weight host = {.name = "taps", .dtype = LV_F32, .ndim = 3, .shape = {3, c, c}, .data = taps,
                      .nbytes = (uint64_t)c * c * 3 * sizeof *taps};
    lv_tensor tw;
    cr_assert_eq(lv_tensor_from_weight(ctx, &host, wdt, 3, ws, &tw), LV_OK, "%s", lv_last_error());
    lv_tensor tx = ts_tensor(ctx, LV_F32, 3, xs, x), tp = ts_tensor(ctx, LV_F32, 2, ps, prev);
    lv_tensor to = ts_empty(ctx, 3, xs);
    cr_assert_eq(lv_op_fill(ctx, &to, NAN), LV_OK);
    cr_assert_eq(lv_op_temporal_conv_gemm(ctx, &to, &tx, with_prev ? &tp : NULL, &tw), LV_OK, "%s",
                 lv_last_error());
    float *got = ts_read(ctx, &to), *want = malloc(n * sizeof *want);
    double *mag = malloc(n * sizeof *mag);
    ref_temporal_conv(want, mag, x, with_prev ? prev : NULL, wt, f, p, c);
    char what[112];
    snprintf(what, sizeof what, "temporal_conv_gemm F=%d P=%d C=%d prev=%d w %s", f, p, c, with_prev,
             lv_dtype_name(wdt));
    check_bound(what, got, want, mag, n, 3 * c);
    free(x), free(prev), free(wt), free(taps), free(got), free(want), free(mag);
    lv_tensor_free(ctx, &tx), lv_tensor_free(ctx, &tp), lv_tensor_free(ctx, &tw), lv_tensor_free(ctx, &to);
}

Test(temporal_conv, as_matrix_products) {
    lv_ctx *ctx = ts_ctx();
    tc_gemm_case(ctx, 1, 5, 3, 0, LV_F32, 301); /* one frame: the centre tap only */
    tc_gemm_case(ctx, 1, 5, 3, 1, LV_F32, 302); /* one frame after a cached one */
    tc_gemm_case(ctx, 3, 35, 70, 1, LV_F32, 303);
    tc_gemm_case(ctx, 3, 35, 70, 0, LV_F32, 304);
    tc_gemm_case(ctx, 4, 13, 33, 1, LV_F32, 305); /* C not a multiple of 4 */
    tc_gemm_case(ctx, 2, 24, 64, 1, LV_BF16, 306); /* 16-bit weights, as the DiT's */
    tc_gemm_case(ctx, 3, 7, 40, 1, LV_F16, 307);
    ts_ctx_done(ctx);
}

Test(temporal_conv, as_matrix_products_rejects_bad_arguments) {
    lv_ctx *ctx = ts_ctx();
    int64_t xs[3] = {2, 4, 6}, ps[2] = {3, 6}, ws[3] = {3, 6, 6}, wpt[3] = {6, 6, 3};
    lv_tensor x, o, p, w, wpy;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xs, &x), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xs, &o), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, ps, &p), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, ws, &w), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, wpt, &wpy), LV_OK);
    /* PyTorch's [C, C, 3] layout is the direct kernel's, not this one's */
    cr_assert_eq(lv_op_temporal_conv_gemm(ctx, &o, &x, NULL, &wpy), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "tap-major"), "%s", lv_last_error());
    cr_assert_eq(lv_op_temporal_conv_gemm(ctx, &o, &x, &p, &w), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "prev"), "%s", lv_last_error());
    cr_assert_eq(lv_op_temporal_conv_gemm(ctx, &x, &x, NULL, &w), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    lv_tensor *all[] = {&x, &o, &p, &w, &wpy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}

Test(temporal_conv, rejects_bad_arguments) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    int64_t xs[3] = {2, 4, 6}, ps[2] = {3, 6}, ws[3] = {6, 6, 3}, wbad[3] = {6, 6, 1};
    int64_t xbs[3] = {2, 4, 12}, wbs[3] = {12, 12, 3};
    lv_tensor x, o, p, w, wb, xb, ob, wbig;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xs, &x), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xs, &o), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, ps, &p), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, ws, &w), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, wbad, &wb), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xbs, &xb), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, xbs, &ob), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 3, wbs, &wbig), LV_OK);
    cr_assert_eq(lv_op_temporal_conv(ctx, &o, &x, NULL, &wb), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "w "), "%s", lv_last_error());
    cr_assert_eq(lv_op_temporal_conv(ctx, &o, &x, &p, &w), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "prev"), "%s", lv_last_error());
    cr_assert_eq(lv_op_temporal_conv(ctx, &x, &x, NULL, &w), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    cr_assert_eq(lv_op_temporal_conv(ctx, &ob, &x, NULL, &w), LV_ERR_INVALID);
    /* a 12 x 12 x 3 weight (1728 bytes) exceeds a 1 KiB binding */
    cr_assert_eq(lv_op_temporal_conv(ctx, &ob, &xb, NULL, &wbig), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "binding limit"), "%s", lv_last_error());
    lv_tensor *all[] = {&x, &o, &p, &w, &wb, &xb, &ob, &wbig};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}
