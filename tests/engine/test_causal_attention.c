/* lv_op_causal_attention against the double-precision C reference (ref_attention.c): causal
 * masks, grouped-query heads, sliding windows, soft-caps, queries that are the last N of L
 * positions, and query chunks split by the binding limit.
 *
 * Error bound (asserted on every output, worst case): the one of lv_op_softmax_attention
 * (tests/engine/test_softmax_attention.c), 4 vmax u ((D + 4) S + 5L + 8) with u = 2^-24, vmax =
 * max |v| and S = max over queries, heads and visible keys of |scale| sum_d |q_d k_d|. With
 * a soft-cap c the kernel computes x = (scale q . k) / c, tanh(x) (shaders/softmax_attention.comp:
 * a Pade approximant for |x| <= 1, relative error 2.2e-12 before rounding, positive terms
 * only: at most ~10u per polynomial and 5u for the division; (1 - t) / (1 + t) with
 * t = e^-2|x| <= e^-2 beyond: at most ~12u), then c log2(e) tanh(x):
 *  - the dot product's error (D + 1) u S passes through tanh with a derivative <= 1;
 *  - the division by c, tanh's 25u relative and the two roundings of c log2(e) and of the
 *    product add at most 29u |capped score| <= 29u S.
 * So a score is off by at most (D + 30) u S instead of (D + 4) u S: with a soft-cap the
 * bound is 4 vmax u ((D + 32) S + 5L + 8). Every case logs its max error and NMSE. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_attention.h"
#include "test_support.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

typedef struct causal_case {
    int n, l, heads, kv_heads, head_dim;
    float scale;
    int window;
    float softcap;
    float range; /* q, k, v uniform in [-range, range) */
    uint64_t seed;
} causal_case;

static void run_case(lv_ctx *ctx, const causal_case *c) {
    int width = c->heads * c->head_dim, kv_width = c->kv_heads * c->head_dim;
    size_t nq = (size_t)c->n * width, nk = (size_t)c->l * kv_width;
    float *q = ts_rand_alloc(nq, c->seed, -c->range, c->range);
    float *k = ts_rand_alloc(nk, c->seed + 1, -c->range, c->range);
    float *v = ts_rand_alloc(nk, c->seed + 2, -c->range, c->range);
    int64_t qshape[2] = {c->n, width}, kshape[2] = {c->l, kv_width};
    lv_tensor tq = ts_tensor(ctx, LV_F32, 2, qshape, q);
    lv_tensor tk = ts_tensor(ctx, LV_F32, 2, kshape, k);
    lv_tensor tv = ts_tensor(ctx, LV_F32, 2, kshape, v);
    lv_tensor to = ts_empty(ctx, 2, qshape);
    cr_assert_eq(lv_op_fill(ctx, &to, NAN), LV_OK); /* every output must be written */
    cr_assert_eq(lv_op_causal_attention(ctx, &to, &tq, &tk, &tv, c->heads, c->kv_heads, c->scale, c->window,
                                        c->softcap),
                 LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    float *want = malloc(nq * sizeof *want);
    ref_causal_attention(want, q, k, v, c->n, c->l, c->heads, c->kv_heads, c->head_dim, c->scale, c->window,
                         c->softcap);

    double S = 0, vmax = 0;
    int group = c->heads / c->kv_heads;
    for (int i = 0; i < c->n; i++) {
        int pos = c->l - c->n + i;
        for (int j = 0; j <= pos; j++) {
            if (c->window > 0 && pos - j >= c->window) continue;
            for (int e = 0; e < kv_width; e++) vmax = fmax(vmax, fabs(v[(size_t)j * kv_width + e]));
            for (int h = 0; h < c->heads; h++) {
                double sum = 0;
                for (int d = 0; d < c->head_dim; d++)
                    sum += fabs((double)q[(size_t)i * width + h * c->head_dim + d] *
                                k[(size_t)j * kv_width + (h / group) * c->head_dim + d]);
                S = fmax(S, fabs(c->scale) * sum);
            }
        }
    }
    double terms = c->softcap > 0 ? c->head_dim + 32 : c->head_dim + 4;
    double tol = 4.0 * vmax * U * (terms * S + 5.0 * c->l + 8.0);
    double err = ts_max_abs_diff(got, want, nq);
    cr_log_info("causal_attention N=%d L=%d H=%d/%d D=%d window %d softcap %g: max|err| %.3g (bound %.3g), nmse %.3g",
                c->n, c->l, c->heads, c->kv_heads, c->head_dim, c->window, (double)c->softcap, err, tol,
                ts_nmse(got, want, nq));
    for (size_t i = 0; i < nq; i++)
        cr_assert(fabs((double)got[i] - want[i]) <= tol,
                  "N=%d L=%d H=%d/%d D=%d window %d softcap %g: out[%zu] = %.9g, want %.9g (bound %.3g)", c->n,
                  c->l, c->heads, c->kv_heads, c->head_dim, c->window, (double)c->softcap, i, got[i], want[i], tol);
    free(got);
    free(want);
    free(q);
    free(k);
    free(v);
    lv_tensor_free(ctx, &tq);
    lv_tensor_free(ctx, &tk);
    lv_tensor_free(ctx, &tv);
    lv_tensor_free(ctx, &to);
}

Test(causal_attention, gemma2_tiny_shapes) {
    lv_ctx *ctx = ts_ctx();
    const float s32 = 1.0f / sqrtf(32.0f);
    causal_case cases[] = {
        /* the tiny Gemma-2: 4 query heads on 2 kv heads of 32, window 4 on even layers */
        {11, 11, 4, 2, 32, s32, 4, 0.0f, 1.0f, 101},
        {11, 11, 4, 2, 32, s32, 0, 0.0f, 1.0f, 102},
        {11, 11, 4, 2, 32, s32, 4, 50.0f, 1.0f, 103},
        {7, 7, 4, 2, 32, s32, 0, 5.0f, 1.0f, 104},
        {1, 1, 4, 2, 32, s32, 4, 0.0f, 1.0f, 105},   /* one token: out = v */
        {11, 11, 4, 2, 32, s32, 11, 0.0f, 1.0f, 106}, /* window >= L: no window */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i]);
    ts_ctx_done(ctx);
}

Test(causal_attention, softcap_saturates) {
    lv_ctx *ctx = ts_ctx();
    /* scores of +-hundreds: |s / c| far beyond 1 (tanh's exp branch) and near it */
    causal_case cases[] = {
        {20, 20, 2, 1, 32, 1.0f, 0, 5.0f, 4.0f, 111},
        {20, 20, 2, 2, 32, 0.05f, 0, 1.0f, 2.0f, 112},
        {20, 20, 2, 2, 32, 1.0f, 0, 0.0f, 4.0f, 113}, /* no cap: needs the running max */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i]);
    ts_ctx_done(ctx);
}

Test(causal_attention, longer_sequences_and_groups) {
    lv_ctx *ctx = ts_ctx();
    causal_case cases[] = {
        /* Gemma-2-2B's head dim 256 and 2 query heads per kv head; over one workgroup of
         * queries (64 on CPU devices) */
        {70, 70, 4, 2, 256, 1.0f / 16.0f, 0, 50.0f, 1.0f, 121},
        {130, 130, 2, 2, 32, 0.2f, 16, 0.0f, 1.0f, 122}, /* the window skips whole key blocks */
        {5, 20, 8, 1, 16, 0.25f, 6, 0.0f, 1.0f, 123},    /* the last 5 of 20 positions, 8 heads on 1 */
        {9, 13, 3, 3, 7, 0.4f, 5, 2.0f, 1.0f, 124},      /* odd head dim */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i]);
    ts_ctx_done(ctx);
}

Test(causal_attention, splits_queries_over_binding_limit) {
    /* q rows are 512 bytes: with 8 KiB bindings the 37 queries go in chunks of at most 15,
     * each with its own first position (k and v, 4.6 KiB, are bound whole) */
    lv_ctx *ctx = ts_ctx_with_binding(8192);
    causal_case a = {37, 37, 4, 1, 32, 1.0f / sqrtf(32.0f), 5, 0.0f, 1.0f, 131};
    causal_case b = {30, 37, 4, 1, 32, 1.0f / sqrtf(32.0f), 0, 50.0f, 1.0f, 132};
    run_case(ctx, &a);
    run_case(ctx, &b);
    ts_ctx_done(ctx);
}

Test(causal_attention, rejects_bad_arguments) {
    lv_ctx *ctx = ts_ctx();
    int64_t q_shape[2] = {4, 64}, k_shape[2] = {5, 32}, kq_shape[2] = {3, 32}, kw_shape[2] = {5, 48};
    lv_tensor q = ts_empty(ctx, 2, q_shape), o = ts_empty(ctx, 2, q_shape);
    lv_tensor k = ts_empty(ctx, 2, k_shape), v = ts_empty(ctx, 2, k_shape);
    lv_tensor kshort = ts_empty(ctx, 2, kq_shape), kwide = ts_empty(ctx, 2, kw_shape);
    /* 2 heads of 32 on 1 kv head: fine */
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &k, &v, 2, 1, 1.0f, 0, 0.0f), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &k, &v, 2, 3, 1.0f, 0, 0.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "kv heads"), "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &kwide, &kwide, 2, 1, 1.0f, 0, 0.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "[5, 48]") && strstr(lv_last_error(), "[L, 32]"), "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &kshort, &kshort, 2, 1, 1.0f, 0, 0.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "N <= L"), "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &k, &v, 2, 1, 1.0f, -1, 0.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "window"), "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &k, &v, 2, 1, 1.0f, 0, -5.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "soft-cap"), "%s", lv_last_error());
    cr_assert_eq(lv_op_causal_attention(ctx, &o, &q, &k, &v, 2, 1, 1.0f, 0, NAN), LV_ERR_INVALID);
    cr_assert_eq(lv_op_causal_attention(ctx, &q, &q, &k, &v, 2, 1, 1.0f, 0, 0.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    lv_tensor ts[] = {q, o, k, v, kshort, kwide};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lv_tensor_free(ctx, &ts[i]);
    ts_ctx_done(ctx);
}
