/* RMSNorm and LayerNorm against tests/reference/ref_elementwise.c: odd shapes, the model's
 * row length (2240), long rows, with
 * and without weight / bias, inputs where eps matters, a large mean (LayerNorm must not
 * lose the variance to cancellation), in place, and split over a small binding limit.
 *
 * Both row layouts run: one subgroup per row (lavapipe's default) and one workgroup per
 * row (GPUs'; forced here with LONGVK_NORM_LAYOUT=workgroup); rows of a multiple of 4 take
 * the vec4 path, others the scalar one.
 *
 * Error bounds, per element, in u = 2^-24 (fp32 unit roundoff; 1 ULP <= 2u relative), from
 * the worst case of floating-point summation (a sum of C terms in any order is off by at
 * most (C - 1) u times the sum of their magnitudes) and Vulkan's precision rules
 * (inversesqrt 2 ULP, division 2.5 ULP, + and * correctly rounded):
 * - RMSNorm: sum of squares C u relative, the mean and eps 2 roundings, the square root
 *   halves that; inversesqrt 4u; x r w 2u; the reference's rounding u:
 *   |got - want| <= (C / 2 + 12) u |want|.
 * - LayerNorm: the mean is off by e <= (C + 3) u mean|x|, each deviation by e + u|d|; the
 *   variance relative error as for RMSNorm; so with r = 1 / sqrt(var + eps):
 *   |got - want| <= |w| r ((C / 2 + 12) u |d| + e) + 2u (|want| + |b|).
 * These are worst-case bounds: they catch any wrong index, eps or formula, whose errors are
 * relative 1e-3 or more on these inputs (eps is chosen to matter in one case). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_elementwise.h"
#include "test_support.h"

#define U (1.0 / 16777216.0)

static void rmsnorm_tol(double *tol, const float *want, int64_t n, int64_t C) {
    for (int64_t i = 0; i < n; i++) tol[i] = (C / 2.0 + 12) * U * fabs((double)want[i]) + 1e-37;
}

static void layernorm_tol(double *tol, const float *x, const float *w, const float *b,
                          const float *want, int64_t R, int64_t C, float eps) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        double s = 0, sa = 0;
        for (int64_t c = 0; c < C; c++) {
            s += xr[c];
            sa += fabs((double)xr[c]);
        }
        double mean = s / C, ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (xr[c] - mean) * (xr[c] - mean);
        double rstd = 1 / sqrt(ss / C + eps), e = (C + 3) * U * sa / C;
        for (int64_t c = 0; c < C; c++) {
            double wc = w ? fabs((double)w[c]) : 1, bc = b ? fabs((double)b[c]) : 0;
            double d = fabs(xr[c] - mean);
            tol[r * C + c] = wc * rstd * ((C / 2.0 + 12) * U * d + e) +
                             2 * U * (fabs((double)want[r * C + c]) + bc) + 1e-37;
        }
    }
}

typedef struct norm_case {
    int64_t R, C;
    float lo, hi; /* input range */
    float eps;
} norm_case;

static const norm_case cases[] = {
    {1, 1, -1, 1, 1e-5f},
    {7, 13, -1, 1, 1e-6f},
    {33, 257, -2, 2, 1e-5f},
    {5, 2240, -1, 1, 1e-6f},          /* the DiT's hidden size */
    {4, 300, -3e-3f, 3e-3f, 1e-5f},   /* mean square ~3e-6: eps changes the result by ~1 */
    {3, 9001, 2.5f, 3.5f, 1e-6f},     /* long rows, mean 3 >> std 0.3 */
    {2, 9000, 2.5f, 3.5f, 1e-6f},     /* the same on the vec4 path */
    {70, 16, -1, 1, 1e-6f},           /* more rows than one workgroup holds */
};
#define NCASES (sizeof cases / sizeof cases[0])

static void run_case(lv_ctx *ctx, const norm_case *k, int layer, int with_w, int with_b,
                     int in_place, uint64_t seed) {
    int64_t n = k->R * k->C, shape[2] = {k->R, k->C};
    float *x = ts_rand_alloc((size_t)n, seed, k->lo, k->hi);
    float *w = ts_rand_alloc((size_t)k->C, seed + 1, 0.5f, 1.5f);
    float *b = ts_rand_alloc((size_t)k->C, seed + 2, -1, 1);
    for (int64_t c = 0; c < k->C; c += 3) w[c] = -w[c]; /* signs in the weight too */
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor tx = ts_tensor(ctx, LV_F32, 2, shape, x);
    lv_tensor tw = ts_tensor(ctx, LV_F32, 1, &k->C, w), tb = ts_tensor(ctx, LV_F32, 1, &k->C, b);
    lv_tensor to = in_place ? tx : ts_empty(ctx, 2, shape);
    const lv_tensor *pw = with_w ? &tw : NULL, *pb = with_b ? &tb : NULL;
    lv_status s = layer ? lv_op_layernorm(ctx, &to, &tx, pw, pb, k->eps)
                        : lv_op_rmsnorm(ctx, &to, &tx, pw, k->eps);
    cr_assert_eq(s, LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    if (layer) {
        ref_layernorm(want, x, with_w ? w : NULL, with_b ? b : NULL, k->R, k->C, k->eps);
        layernorm_tol(tol, x, with_w ? w : NULL, with_b ? b : NULL, want, k->R, k->C, k->eps);
    } else {
        ref_rmsnorm(want, x, with_w ? w : NULL, k->R, k->C, k->eps);
        rmsnorm_tol(tol, want, n, k->C);
    }
    char what[160];
    snprintf(what, sizeof what, "%s [%lld, %lld] x in [%g, %g] eps %g%s%s%s",
             layer ? "layernorm" : "rmsnorm", (long long)k->R, (long long)k->C, k->lo, k->hi,
             k->eps, with_w ? " +weight" : "", with_b ? " +bias" : "", in_place ? " in place" : "");
    ts_expect_within(what, got, want, tol, (size_t)n);
    free(got);
    free(x);
    free(w);
    free(b);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &tb);
    if (!in_place) lv_tensor_free(ctx, &to);
}

Test(norm, rmsnorm) {
    lv_ctx *ctx = ts_ctx();
    for (size_t i = 0; i < NCASES; i++) {
        run_case(ctx, &cases[i], 0, 1, 0, 0, 10 + i * 10);
        run_case(ctx, &cases[i], 0, 0, 0, 0, 15 + i * 10);
    }
    run_case(ctx, &cases[3], 0, 1, 0, 1, 99);
    ts_ctx_done(ctx);
}

Test(norm, layernorm) {
    lv_ctx *ctx = ts_ctx();
    for (size_t i = 0; i < NCASES; i++) {
        run_case(ctx, &cases[i], 1, 0, 0, 0, 200 + i * 10); /* the DiT's: no affine */
        run_case(ctx, &cases[i], 1, 1, 1, 0, 205 + i * 10);
    }
    run_case(ctx, &cases[2], 1, 1, 0, 0, 300);
    run_case(ctx, &cases[2], 1, 0, 1, 0, 301);
    run_case(ctx, &cases[3], 1, 0, 0, 1, 302);
    run_case(ctx, &cases[5], 1, 1, 1, 1, 303);
    ts_ctx_done(ctx);
}

/* The GPU layout (a workgroup per row, partial sums through shared memory) on this device. */
Test(norm, workgroup_layout) {
    setenv("LONGVK_NORM_LAYOUT", "workgroup", 1); /* read per call; this test's process only */
    lv_ctx *ctx = ts_ctx();
    for (size_t i = 0; i < NCASES; i++) {
        run_case(ctx, &cases[i], 0, 1, 0, 0, 500 + i * 10);
        run_case(ctx, &cases[i], 1, 1, 1, 0, 505 + i * 10);
    }
    run_case(ctx, &cases[3], 1, 0, 0, 1, 600);
    ts_ctx_done(ctx);
}

/* Exact expectations without the reference: a row of zeros normalises to zero; a constant
 * row c = 0.25 (sums exact) to c / sqrt(c^2 + eps) under RMSNorm (within the RMSNorm bound)
 * and exactly to the bias under LayerNorm (every deviation is exactly 0). */
Test(norm, degenerate_rows) {
    lv_ctx *ctx = ts_ctx();
    int64_t shape[2] = {2, 40}, C = 40;
    float x[80], bias[40];
    for (int i = 0; i < 40; i++) {
        x[i] = 0.0f;
        x[40 + i] = 0.25f;
        bias[i] = (float)i * 0.25f - 3.0f;
    }
    lv_tensor tx = ts_tensor(ctx, LV_F32, 2, shape, x), tb = ts_tensor(ctx, LV_F32, 1, &C, bias);
    lv_tensor to = ts_empty(ctx, 2, shape);
    const float eps = 0.01f;
    cr_assert_eq(lv_op_rmsnorm(ctx, &to, &tx, NULL, eps), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    double want = 0.25 / sqrt(0.0625 + (double)eps);
    for (int i = 0; i < 40; i++) {
        cr_assert_eq(got[i], 0.0f);
        cr_assert(fabs(got[40 + i] - want) <= (C / 2.0 + 12) * U * want, "got %.9g want %.9g",
                  got[40 + i], want);
    }
    free(got);
    cr_assert_eq(lv_op_layernorm(ctx, &to, &tx, NULL, &tb, 1e-6f), LV_OK, "%s", lv_last_error());
    got = ts_read(ctx, &to);
    for (int i = 0; i < 80; i++) cr_assert_eq(got[i], bias[i % 40], "%d: got %.9g", i, got[i]);
    free(got);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
    ts_ctx_done(ctx);
}

/* A 1 KiB binding limit: rows of 45 floats (180 bytes) go 5 per dispatch. */
Test(norm, split_over_small_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    const norm_case k = {41, 45, -1, 1, 1e-6f};
    run_case(ctx, &k, 0, 1, 0, 0, 400);
    run_case(ctx, &k, 1, 1, 1, 0, 401);
    run_case(ctx, &k, 1, 0, 0, 1, 402);
    int64_t wide[2] = {2, 256};
    lv_tensor t = ts_empty(ctx, 2, wide);
    cr_assert_eq(lv_op_rmsnorm(ctx, &t, &t, NULL, 1e-6f), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "lv_op_rmsnorm") && strstr(lv_last_error(), "[2, 256]"), "%s",
              lv_last_error());
    lv_tensor_free(ctx, &t);
    ts_ctx_done(ctx);
}

Test(norm, bad_shapes_are_clear_errors) {
    lv_ctx *ctx = ts_ctx();
    int64_t s[2] = {4, 6}, s5[1] = {5}, s6[1] = {6}, s46[2] = {6, 4};
    lv_tensor x = ts_empty(ctx, 2, s), w5 = ts_empty(ctx, 1, s5), w6 = ts_empty(ctx, 1, s6);
    lv_tensor o = ts_empty(ctx, 2, s46);
    cr_assert_eq(lv_op_rmsnorm(ctx, &x, &x, &w5, 1e-6f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_rmsnorm") && strstr(lv_last_error(), "weight") &&
              strstr(lv_last_error(), "[5]") && strstr(lv_last_error(), "[4, 6]"), "%s", lv_last_error());
    cr_assert_eq(lv_op_layernorm(ctx, &x, &x, &w6, &w5, 1e-6f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_layernorm") && strstr(lv_last_error(), "bias"), "%s",
              lv_last_error());
    cr_assert_eq(lv_op_layernorm(ctx, &o, &x, NULL, NULL, 1e-6f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "same shape"), "%s", lv_last_error());
    cr_assert_eq(lv_op_rmsnorm(ctx, &x, &x, NULL, -1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "eps"), "%s", lv_last_error());
    /* the weight may not live inside the output */
    lv_tensor row = lv_tensor_view(&x, 6, 1, s6);
    cr_assert_eq(lv_op_rmsnorm(ctx, &x, &x, &row, 1e-6f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    lv_tensor_free(ctx, &x);
    lv_tensor_free(ctx, &w5);
    lv_tensor_free(ctx, &w6);
    lv_tensor_free(ctx, &o);
    ts_ctx_done(ctx);
}

/* adaLN in one pass (lv_op_layernorm_modulate) against the reference LayerNorm followed by
 * the reference modulation: the LayerNorm bound scaled by |1 + scale|, plus the two
 * roundings of the modulation (2u (|want| + |shift|)). Groups of rows G = 1 and G = frames,
 * and split over a small binding limit (groups straddling a split). */
static void check_adaln_to(lv_ctx *ctx, lv_dtype odt, int64_t R, int64_t C, int64_t G, uint64_t seed) {
    float *x = ts_rand_alloc((size_t)(R * C), seed, -2, 3);
    float *shift = ts_rand_alloc((size_t)(G * C), seed + 1, -1, 1);
    float *scale = ts_rand_alloc((size_t)(G * C), seed + 2, -1, 1);
    float *ln = malloc((size_t)(R * C) * 4), *want = malloc((size_t)(R * C) * 4);
    double *tol = malloc((size_t)(R * C) * 8);
    ref_layernorm(ln, x, NULL, NULL, R, C, 1e-6f);
    ref_modulate(want, ln, shift, G, scale, G, R, C);
    layernorm_tol(tol, x, NULL, NULL, ln, R, C, 1e-6f);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            int64_t g = r / (R / G), i = r * C + c;
            tol[i] = fabs(1.0 + scale[g * C + c]) * tol[i] +
                     2 * U * (fabs((double)want[i]) + fabs((double)shift[g * C + c])) + 1e-37;
            /* a 16-bit out: one more rounding (ts_half_rel), and f16's subnormal spacing */
            tol[i] += ts_half_rel(odt) * fabs((double)want[i]) + (odt == LV_F16 ? 0x1p-25 : 0.0);
        }
    int64_t shape[2] = {R, C}, pshape[2] = {G, C};
    lv_tensor tx = ts_tensor(ctx, LV_F32, 2, shape, x), to;
    cr_assert_eq(lv_tensor_create(ctx, odt, 2, shape, &to), LV_OK, "%s", lv_last_error());
    lv_tensor tsh = ts_tensor(ctx, LV_F32, 2, pshape, shift), tsc = ts_tensor(ctx, LV_F32, 2, pshape, scale);
    cr_assert_eq(lv_op_layernorm_modulate(ctx, &to, &tx, &tsh, &tsc, 1e-6f), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    char what[64];
    snprintf(what, sizeof what, "adaln %lldx%lld G=%lld out %s", (long long)R, (long long)C, (long long)G,
             lv_dtype_name(odt));
    ts_expect_within(what, got, want, tol, (size_t)(R * C));
    free(got);
    free(x);
    free(shift);
    free(scale);
    free(ln);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &to);
    lv_tensor_free(ctx, &tsh);
    lv_tensor_free(ctx, &tsc);
}

static void check_adaln(lv_ctx *ctx, int64_t R, int64_t C, int64_t G, uint64_t seed) {
    check_adaln_to(ctx, LV_F32, R, C, G, seed);
}

/* The DiT's 16-bit activations: the output stored as f16 or bf16 (vec4 and scalar paths) */
Test(norm, layernorm_modulate_half_out) {
    lv_ctx *ctx = ts_ctx();
    static const lv_dtype half[] = {LV_F16, LV_BF16};
    for (int h = 0; h < 2; h++) {
        check_adaln_to(ctx, half[h], 7, 13, 1, 21 + h);
        check_adaln_to(ctx, half[h], 6 * 16, 96, 6, 23 + h);
        check_adaln_to(ctx, half[h], 4 * 33, 224, 4, 25 + h);
    }
    /* across dtypes no memory may be shared */
    int64_t shape[2] = {2, 8}, pshape[2] = {1, 8};
    lv_tensor tx = ts_empty(ctx, 2, shape), tp = ts_empty(ctx, 2, pshape);
    lv_tensor th = lv_tensor_view(&tx, 0, 2, shape);
    th.dtype = LV_F16; /* the first half of x's bytes seen as halves */
    cr_assert_eq(lv_op_layernorm_modulate(ctx, &th, &tx, &tp, &tp, 1e-6f), LV_ERR_INVALID);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tp);
    ts_ctx_done(ctx);
}

Test(norm, layernorm_modulate) {
    lv_ctx *ctx = ts_ctx();
    check_adaln(ctx, 1, 1, 1, 11);
    check_adaln(ctx, 7, 13, 1, 12);
    check_adaln(ctx, 6 * 16, 96, 6, 13);
    check_adaln(ctx, 4 * 33, 224, 4, 14);
    ts_ctx_done(ctx);
    ctx = ts_ctx_with_binding(4 * 96 * 5); /* 5 rows per dispatch: groups of 16 rows straddle splits */
    check_adaln(ctx, 6 * 16, 96, 6, 15);
    ts_ctx_done(ctx);
    /* bad: G does not divide the rows */
    ctx = ts_ctx();
    int64_t shape[2] = {10, 8}, pshape[2] = {3, 8};
    lv_tensor tx = ts_empty(ctx, 2, shape), tp = ts_empty(ctx, 2, pshape);
    cr_assert_eq(lv_op_layernorm_modulate(ctx, &tx, &tx, &tp, &tp, 1e-6f), LV_ERR_INVALID);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tp);
    ts_ctx_done(ctx);
}
