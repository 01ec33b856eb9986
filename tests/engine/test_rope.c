/* Rotary embedding: the host tables (lv_rope_table_3d / _1d) against the formula of
 * sana-video.md computed independently here, and lv_op_rope against
 * tests/reference/ref_elementwise.c.
 *
 * lv_op_rope_half (rotate-half pairs (i, i + D/2), Gemma's) against ref_rope_half, with
 * the same bound as lv_op_rope for its pairs.
 *
 * Bounds (u = 2^-24, fp32 unit roundoff):
 * - table entries: cos / sin of an angle computed in double (relative error ~1e-16 of
 *   angles up to ~1e3: 1e-12 absolute at most), rounded once to float (<= u for values in
 *   [-1, 1]): |table - cos(angle)| <= u + 1e-12, against a long-double evaluation here.
 * - the op: x0 c - x1 s from float c, s: two products and a difference, possibly fused,
 *   at most 2u (|x0 c| + |x1 s|), and u|result| for the reference's rounding:
 *   3u (|x0 c| + |x1 s|), likewise for x0 s + x1 c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_elementwise.h"
#include "test_support.h"

#define U (1.0 / 16777216.0)
#define TABLE_TOL (U + 1e-12)

/* theta^(-2j/d) by another route than the library's pow: exp(-(2j/d) ln theta), long double */
static long double freq(int j, int d, double theta) {
    return expl(-(2.0L * j / d) * logl((long double)theta));
}

static void expect_pair(const float *row, int pair, long double angle, const char *what) {
    double c = (double)cosl(angle), s = (double)sinl(angle);
    cr_assert(fabs(row[2 * pair] - c) <= TABLE_TOL && fabs(row[2 * pair + 1] - s) <= TABLE_TOL,
              "%s: pair %d: table (%.9g, %.9g), want cos/sin of %.12Lg = (%.9g, %.9g)", what, pair,
              row[2 * pair], row[2 * pair + 1], angle, c, s);
}

/* The SANA-Video split: h = w = 2 (D / 6), t = D - h - w. */
static void sana_split(int D, int *dt, int *dh, int *dw) {
    *dh = *dw = 2 * (D / 6);
    *dt = D - *dh - *dw;
}

static void check_table_3d(int F, int H, int W, int f0, int D) {
    int dt, dh, dw;
    sana_split(D, &dt, &dh, &dw);
    size_t n = (size_t)F * H * W * D;
    float *t = malloc(n * sizeof *t);
    lv_rope_table_3d(t, F, H, W, f0, D, dt, dh, dw, 10000.0);
    char what[96];
    for (int f = 0; f < F; f++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                const float *row = t + (((size_t)f * H + h) * W + w) * D;
                snprintf(what, sizeof what, "D=%d token (f=%d, h=%d, w=%d), f0=%d", D, f, h, w, f0);
                for (int p = 0; p < D / 2; p++) {
                    long double angle;
                    if (p < dt / 2) angle = (long double)(f0 + f) * freq(p, dt, 10000.0);
                    else if (p < (dt + dh) / 2) angle = (long double)h * freq(p - dt / 2, dh, 10000.0);
                    else angle = (long double)w * freq(p - (dt + dh) / 2, dw, 10000.0);
                    expect_pair(row, p, angle, what);
                }
            }
    free(t);
}

Test(rope, sana_split_rule) {
    int dt, dh, dw;
    sana_split(112, &dt, &dh, &dw);
    cr_assert(dt == 40 && dh == 36 && dw == 36);
    sana_split(32, &dt, &dh, &dw);
    cr_assert(dt == 12 && dh == 10 && dw == 10);
}

Test(rope, table_3d_matches_formula) {
    check_table_3d(3, 4, 5, 0, 112);
    check_table_3d(2, 3, 4, 37, 112); /* a later chunk: absolute frame positions */
    check_table_3d(4, 2, 3, 1000, 32);
    check_table_3d(1, 1, 1, 0, 32);
}

/* A few entries worked out by hand for D = 112 (time 40, height 36, width 36):
 * token (f, h, w) = (2, 3, 4) with f0 = 7 is token (2 * 5 + 3) * 6 + 4 = 82 of a 3 x 5 x 6
 * grid; pair 0 is the time axis at frequency 1 (angle f0 + f = 9), pair 20 the height axis
 * at frequency 1 (angle 3), pair 38 the width axis (angle 4); pair 19 is the slowest time
 * pair, 9 * 10000^(-38/40); pair 55 the slowest width pair, 4 * 10000^(-34/36). */
Test(rope, table_3d_hand_values) {
    float *t = malloc(3 * 5 * 6 * 112 * sizeof *t);
    lv_rope_table_3d(t, 3, 5, 6, 7, 112, 40, 36, 36, 10000.0);
    const float *row = t + 82 * 112;
    expect_pair(row, 0, 9.0L, "time pair 0");
    expect_pair(row, 20, 3.0L, "height pair 0");
    expect_pair(row, 38, 4.0L, "width pair 0");
    expect_pair(row, 19, 9.0L * powl(10000.0L, -38.0L / 40.0L), "time pair 19");
    expect_pair(row, 55, 4.0L * powl(10000.0L, -34.0L / 36.0L), "width pair 17");
    /* token 0 of the first frame of chunk 0: every angle 0 */
    lv_rope_table_3d(t, 1, 1, 1, 0, 112, 40, 36, 36, 10000.0);
    for (int p = 0; p < 56; p++) cr_assert(t[2 * p] == 1.0f && t[2 * p + 1] == 0.0f, "pair %d", p);
    /* a bad split fills NaN rather than plausible numbers */
    lv_rope_table_3d(t, 1, 1, 1, 0, 112, 40, 36, 35, 10000.0);
    cr_assert(isnan(t[0]) && isnan(t[111]));
    free(t);
}

Test(rope, table_1d_matches_formula) {
    const float pos[5] = {0.0f, 1.0f, 5.5f, 77.0f, 1023.0f};
    const int D = 16;
    float t[5 * 16];
    lv_rope_table_1d(t, pos, 5, D, 10000.0);
    for (int n = 0; n < 5; n++)
        for (int p = 0; p < D / 2; p++) expect_pair(t + n * D, p, (long double)pos[n] * freq(p, D, 10000.0), "1d");
    /* another theta */
    lv_rope_table_1d(t, pos, 5, D, 500.0);
    for (int n = 0; n < 5; n++)
        for (int p = 0; p < D / 2; p++) expect_pair(t + n * D, p, (long double)pos[n] * freq(p, D, 500.0), "1d theta 500");
}

static void rope_tol(double *tol, const float *x, const float *table, int64_t N, int64_t H, int64_t D) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D / 2; i++) {
                double c = fabs((double)table[n * D + 2 * i]), s = fabs((double)table[n * D + 2 * i + 1]);
                int64_t e = (n * H + h) * D + 2 * i;
                double x0 = fabs((double)x[e]), x1 = fabs((double)x[e + 1]);
                tol[e] = 3 * U * (x0 * c + x1 * s);
                tol[e + 1] = 3 * U * (x0 * s + x1 * c);
            }
}

/* table: NULL for random angles, else a 3-D grid F x Hg x Wg = N tokens */
static void run_rope(lv_ctx *ctx, int64_t N, int64_t H, int64_t D, const int *grid, int in_place,
                     uint64_t seed) {
    int64_t n = N * H * D, xshape[2] = {N, H * D}, tshape[2] = {N, D};
    float *x = ts_rand_alloc((size_t)n, seed, -2, 2);
    float *table = malloc((size_t)(N * D) * 4);
    if (grid) {
        int dt, dh, dw;
        sana_split((int)D, &dt, &dh, &dw);
        lv_rope_table_3d(table, grid[0], grid[1], grid[2], grid[3], (int)D, dt, dh, dw, 10000.0);
    } else {
        float *ang = ts_rand_alloc((size_t)(N * D / 2), seed + 1, -100, 100);
        for (int64_t i = 0; i < N * D / 2; i++) {
            table[2 * i] = (float)cos(ang[i]);
            table[2 * i + 1] = (float)sin(ang[i]);
        }
        free(ang);
    }
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor tx = ts_tensor(ctx, LV_F32, 2, xshape, x), tt = ts_tensor(ctx, LV_F32, 2, tshape, table);
    lv_tensor to = in_place ? tx : ts_empty(ctx, 2, xshape);
    cr_assert_eq(lv_op_rope(ctx, &to, &tx, &tt), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    ref_rope(want, x, table, N, H, D);
    rope_tol(tol, x, table, N, H, D);
    char what[96];
    snprintf(what, sizeof what, "rope N=%lld H=%lld D=%lld%s%s", (long long)N, (long long)H, (long long)D,
             grid ? " 3d table" : " random table", in_place ? " in place" : "");
    ts_expect_within(what, got, want, tol, (size_t)n);
    free(got);
    free(x);
    free(table);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tt);
    if (!in_place) lv_tensor_free(ctx, &to);
}

Test(rope, op_matches_reference) {
    lv_ctx *ctx = ts_ctx();
    run_rope(ctx, 1, 1, 2, NULL, 0, 1);
    run_rope(ctx, 7, 3, 32, NULL, 0, 2);
    run_rope(ctx, 33, 2, 112, NULL, 0, 3);
    run_rope(ctx, 37, 1, 6, NULL, 0, 4);
    const int g32[4] = {2, 3, 5, 4}, g112[4] = {3, 4, 6, 10};
    run_rope(ctx, 30, 2, 32, g32, 0, 5);
    run_rope(ctx, 72, 20, 112, g112, 0, 6); /* SANA-Video's 20 heads x 112 */
    run_rope(ctx, 30, 2, 32, g32, 1, 7);
    run_rope(ctx, 33, 2, 112, NULL, 1, 8);
    ts_ctx_done(ctx);
}

static void rope_half_tol(double *tol, const float *x, const float *table, int64_t N, int64_t H, int64_t D) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D / 2; i++) {
                double c = fabs((double)table[n * D + 2 * i]), s = fabs((double)table[n * D + 2 * i + 1]);
                int64_t e = (n * H + h) * D + i, f = e + D / 2;
                double x0 = fabs((double)x[e]), x1 = fabs((double)x[f]);
                tol[e] = 3 * U * (x0 * c + x1 * s);
                tol[f] = 3 * U * (x1 * c + x0 * s);
            }
}

/* Rotate-half on random angles; x at element offset `xoff` of its allocation (odd offsets
 * and a small binding limit exercise the views and the split). */
static void run_rope_half(lv_ctx *ctx, int64_t N, int64_t H, int64_t D, int in_place, int64_t xoff, uint64_t seed) {
    int64_t n = N * H * D, big = n + xoff, xshape[2] = {N, H * D}, tshape[2] = {N, D};
    float *x = ts_rand_alloc((size_t)big, seed, -2, 2);
    float *table = malloc((size_t)(N * D) * 4);
    float *ang = ts_rand_alloc((size_t)(N * D / 2), seed + 1, -100, 100);
    for (int64_t i = 0; i < N * D / 2; i++) {
        table[2 * i] = (float)cos(ang[i]);
        table[2 * i + 1] = (float)sin(ang[i]);
    }
    free(ang);
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor bx = ts_tensor(ctx, LV_F32, 1, &big, x), tt = ts_tensor(ctx, LV_F32, 2, tshape, table);
    lv_tensor tx = lv_tensor_view(&bx, xoff, 2, xshape);
    lv_tensor bo = {0}, to = tx;
    if (!in_place) {
        bo = ts_empty(ctx, 1, &big);
        to = lv_tensor_view(&bo, xoff, 2, xshape);
    }
    cr_assert_eq(lv_op_rope_half(ctx, &to, &tx, &tt), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    ref_rope_half(want, x + xoff, table, N, H, D);
    rope_half_tol(tol, x + xoff, table, N, H, D);
    char what[96];
    snprintf(what, sizeof what, "rope_half N=%lld H=%lld D=%lld offset %lld%s", (long long)N, (long long)H,
             (long long)D, (long long)xoff, in_place ? " in place" : "");
    ts_expect_within(what, got, want, tol, (size_t)n);
    /* not the adjacent-pair rotation: the two differ on these inputs */
    if (D >= 4) {
        float *adj = malloc((size_t)n * 4);
        ref_rope(adj, x + xoff, table, N, H, D);
        cr_assert(ts_max_abs_diff(got, adj, (size_t)n) > 1e-3, "%s: equals the adjacent-pair rotation", what);
        free(adj);
    }
    free(got);
    free(x);
    free(table);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &bx);
    lv_tensor_free(ctx, &tt);
    if (!in_place) lv_tensor_free(ctx, &bo);
}

Test(rope, half_matches_reference) {
    lv_ctx *ctx = ts_ctx();
    run_rope_half(ctx, 1, 1, 2, 0, 0, 41);
    run_rope_half(ctx, 11, 4, 32, 0, 0, 42);  /* the tiny Gemma-2's q: 4 heads x 32 */
    run_rope_half(ctx, 11, 2, 32, 1, 0, 43);  /* its k, in place */
    run_rope_half(ctx, 5, 8, 256, 0, 3, 44);  /* Gemma-2-2B's 8 heads x 256, unaligned view */
    run_rope_half(ctx, 7, 3, 6, 1, 1, 45);
    ts_ctx_done(ctx);
}

Test(rope, half_split_over_small_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(1024); /* rows of 2 x 32 floats: 3 per dispatch */
    run_rope_half(ctx, 30, 2, 32, 0, 1, 46);
    run_rope_half(ctx, 30, 2, 32, 1, 4, 47);
    ts_ctx_done(ctx);
}

/* A 1 KiB binding limit: rows of 2 x 32 floats (256 bytes) go 3 per dispatch; views at
 * element offsets (1, 3) take the scalar path, (4, 8) the vec4 one. */
static void split_case(lv_ctx *ctx, int64_t xoff, int64_t toff) {
    const int64_t N = 30, H = 2, D = 32, n = N * H * D;
    int64_t big = n + xoff, tbig = N * D + toff, xshape[2] = {N, H * D}, tshape[2] = {N, D};
    float *x = ts_rand_alloc((size_t)big, 800 + xoff, -2, 2);
    float *table = malloc((size_t)tbig * 4);
    lv_rope_table_3d(table + toff, 2, 3, 5, 11, (int)D, 12, 10, 10, 10000.0);
    lv_tensor bx = ts_tensor(ctx, LV_F32, 1, &big, x), bt = ts_tensor(ctx, LV_F32, 1, &tbig, table);
    lv_tensor bo = ts_empty(ctx, 1, &big);
    lv_tensor vx = lv_tensor_view(&bx, xoff, 2, xshape), vt = lv_tensor_view(&bt, toff, 2, tshape);
    lv_tensor vo = lv_tensor_view(&bo, xoff, 2, xshape);
    cr_assert_eq(lv_op_rope(ctx, &vo, &vx, &vt), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &vo), *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    ref_rope(want, x + xoff, table + toff, N, H, D);
    rope_tol(tol, x + xoff, table + toff, N, H, D);
    char what[64];
    snprintf(what, sizeof what, "rope split, offsets %lld, %lld", (long long)xoff, (long long)toff);
    ts_expect_within(what, got, want, tol, (size_t)n);
    free(got);
    free(want);
    free(tol);
    free(x);
    free(table);
    lv_tensor_free(ctx, &bx);
    lv_tensor_free(ctx, &bt);
    lv_tensor_free(ctx, &bo);
}

Test(rope, split_over_small_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    split_case(ctx, 1, 3);
    split_case(ctx, 4, 8);
    ts_ctx_done(ctx);
}

Test(rope, bad_shapes_are_clear_errors) {
    lv_ctx *ctx = ts_ctx();
    int64_t xs[2] = {6, 64}, t_odd[2] = {6, 5}, t_rows[2] = {5, 32}, t_nodiv[2] = {6, 24}, t_ok[2] = {6, 32};
    lv_tensor x = ts_empty(ctx, 2, xs), a = ts_empty(ctx, 2, t_odd), b = ts_empty(ctx, 2, t_rows);
    lv_tensor c = ts_empty(ctx, 2, t_nodiv), ok = ts_empty(ctx, 2, t_ok);
    const lv_tensor *bad[3] = {&a, &b, &c};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(lv_op_rope(ctx, &x, &x, bad[i]), LV_ERR_INVALID);
        cr_assert(strstr(lv_last_error(), "lv_op_rope") && strstr(lv_last_error(), "[6, 64]"), "%s",
                  lv_last_error());
    }
    cr_assert_eq(lv_op_rope(ctx, &ok, &x, &ok), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "same shape"), "%s", lv_last_error());
    lv_tensor_free(ctx, &x);
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &b);
    lv_tensor_free(ctx, &c);
    lv_tensor_free(ctx, &ok);
    ts_ctx_done(ctx);
}
