/* lv_op_softmax_attention against the double-precision C reference (ref_attention.c).
 *
 * Error bound (asserted on every output, worst case, not statistical): with u = 2^-24
 * the fp32 unit roundoff, vmax = max |v| and S = max over queries, heads and valid keys of
 * |scale| * sum_d |q_d k_d| (the magnitude of the terms of one score):
 *  - a score's dot product of D terms plus the scale multiply and the max subtraction is
 *    off by at most (D + 4) u S, which is the relative error it gives the weight e^s;
 *  - exp2 of x <= 0 is accurate to 3 + 2|x| ulp (Vulkan's precision rule); weighted by
 *    p_j / sum p <= 2^x this adds at most (3 + 2L) u;
 *  - rescaling by the running maximum, the two sums over at most L keys and the final
 *    division add at most (3L + 5) u;
 *  - relative errors e_j of the weights move out = sum p_j v_j / sum p_j by
 *    sum w_j e_j (v_j - out), at most 2 vmax max|e_j|.
 * So |got - want| <= 2 vmax u ((D + 4) S + 5L + 8); we assert twice that (second-order
 * terms and slack). For unit-range inputs this is ~1e-4, while any indexing, masking or
 * stability bug moves outputs by 1e-2 or more. The measured max error and NMSE of each
 * case are logged. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_attention.h"
#include "test_support.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

typedef struct attn_case {
    int n, l, heads, head_dim;
    float scale;
    float range;       /* q, k, v uniform in [-range, range) */
    const char *mask;  /* one char per key, '1' valid, '0' masked; NULL: no mask tensor */
    uint64_t seed;
} attn_case;

/* Runs one case; `q_shift` > 0 places q at that element offset inside a larger tensor (an
 * unaligned binding offset). */
static void run_case(lv_ctx *ctx, const attn_case *c, int q_shift) {
    int width = c->heads * c->head_dim;
    size_t nq = (size_t)c->n * width, nk = (size_t)c->l * width;
    float *q = ts_rand_alloc(nq, c->seed, -c->range, c->range);
    float *k = ts_rand_alloc(nk, c->seed + 1, -c->range, c->range);
    float *v = ts_rand_alloc(nk, c->seed + 2, -c->range, c->range);
    float *mask = NULL;
    if (c->mask) {
        cr_assert_eq((int)strlen(c->mask), c->l);
        mask = malloc((size_t)c->l * sizeof *mask);
        for (int j = 0; j < c->l; j++) mask[j] = c->mask[j] == '1' ? 1.0f : 0.0f;
    }

    int64_t qstore_shape[1] = {(int64_t)nq + q_shift};
    float *qstore = calloc(nq + (size_t)q_shift, sizeof *qstore);
    memcpy(qstore + q_shift, q, nq * sizeof *q);
    lv_tensor tq_store = ts_tensor(ctx, LV_F32, 1, qstore_shape, qstore);
    int64_t qshape[2] = {c->n, width}, kshape[2] = {c->l, width}, mshape[1] = {c->l};
    lv_tensor tq = lv_tensor_view(&tq_store, q_shift, 2, qshape);
    lv_tensor tk = ts_tensor(ctx, LV_F32, 2, kshape, k);
    lv_tensor tv = ts_tensor(ctx, LV_F32, 2, kshape, v);
    lv_tensor tm = {0};
    if (mask) tm = ts_tensor(ctx, LV_F32, 1, mshape, mask);
    lv_tensor to = ts_empty(ctx, 2, qshape);
    cr_assert_eq(lv_op_fill(ctx, &to, NAN), LV_OK); /* every output must be written */

    cr_assert_eq(lv_op_softmax_attention(ctx, &to, &tq, &tk, &tv, mask ? &tm : NULL, c->heads,
                                         c->scale),
                 LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    float *want = malloc(nq * sizeof *want);
    ref_softmax_attention(want, q, k, v, mask, c->n, c->l, c->heads, c->head_dim, c->scale);

    double S = 0, vmax = 0;
    int any_valid = 0;
    for (int j = 0; j < c->l; j++) {
        if (mask && mask[j] == 0.0f) continue;
        any_valid = 1;
        for (int e = 0; e < width; e++) vmax = fmax(vmax, fabs(v[(size_t)j * width + e]));
        for (int i = 0; i < c->n; i++)
            for (int h = 0; h < c->heads; h++) {
                double sum = 0;
                for (int d = 0; d < c->head_dim; d++)
                    sum += fabs((double)q[(size_t)i * width + h * c->head_dim + d] *
                                k[(size_t)j * width + h * c->head_dim + d]);
                S = fmax(S, fabs(c->scale) * sum);
            }
    }
    double tol = 4.0 * vmax * U * ((c->head_dim + 4) * S + 5.0 * c->l + 8.0);
    double err = ts_max_abs_diff(got, want, nq);
    cr_log_info("softmax_attention N=%d L=%d H=%d D=%d mask=%s: max|err| %.3g (bound %.3g), "
                "nmse %.3g", c->n, c->l, c->heads, c->head_dim, c->mask ? c->mask : "none", err,
                tol, ts_nmse(got, want, nq));
    if (!any_valid) {
        for (size_t i = 0; i < nq; i++)
            cr_assert_eq(got[i], 0.0f, "all keys masked: output %zu is %g, want 0", i, got[i]);
    } else {
        for (size_t i = 0; i < nq; i++)
            cr_assert(fabs((double)got[i] - want[i]) <= tol,
                      "N=%d L=%d H=%d D=%d: out[%zu] = %.9g, want %.9g (bound %.3g)", c->n,
                      c->l, c->heads, c->head_dim, i, got[i], want[i], tol);
    }

    free(got);
    free(want);
    free(q);
    free(k);
    free(v);
    free(mask);
    free(qstore);
    lv_tensor_free(ctx, &tq_store);
    lv_tensor_free(ctx, &tk);
    lv_tensor_free(ctx, &tv);
    if (tm.alloc) lv_tensor_free(ctx, &tm);
    lv_tensor_free(ctx, &to);
}

/* A mask string of l keys with the first `valid` valid (text padded at the end). */
static char *prefix_mask(int l, int valid) {
    char *m = malloc((size_t)l + 1);
    for (int j = 0; j < l; j++) m[j] = j < valid ? '1' : '0';
    m[l] = 0;
    return m;
}

Test(softmax_attention, small_shapes_and_masks) {
    lv_ctx *ctx = ts_ctx();
    const float s32 = 1.0f / sqrtf(32.0f), s112 = 1.0f / sqrtf(112.0f);
    attn_case cases[] = {
        {1, 1, 1, 112, s112, 1.0f, NULL, 11},          /* one key: out = v */
        {37, 7, 2, 32, s32, 1.0f, "1011001", 12},      /* partial mask */
        {37, 7, 2, 32, s32, 1.0f, "0000001", 13},      /* only the last key */
        {37, 7, 2, 32, s32, 1.0f, "0000000", 14},      /* all masked: zeros */
        {1, 7, 1, 112, s112, 1.0f, "1111111", 15},
        {9, 13, 3, 7, 0.4f, 1.0f, "1101110111011", 16}, /* odd head dim */
        {20, 40, 2, 32, 1.0f, 4.0f, NULL, 17},         /* scores of +-hundreds: needs the max */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i], 0);
    ts_ctx_done(ctx);
}

Test(softmax_attention, text_lengths) {
    lv_ctx *ctx = ts_ctx();
    char *m300 = prefix_mask(300, 123);
    attn_case cases[] = {
        {37, 300, 2, 112, 1.0f / sqrtf(112.0f), 1.0f, m300, 21}, /* SANA: 300 padded tokens */
        {16, 512, 1, 128, 1.0f / sqrtf(128.0f), 1.0f, NULL, 22}, /* the longest text */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i], 0);
    free(m300);
    ts_ctx_done(ctx);
}

Test(softmax_attention, splits_queries_over_binding_limit) {
    /* q rows are 256 bytes: with 2 KiB bindings the 37 queries go in chunks of 7 */
    lv_ctx *ctx = ts_ctx_with_binding(2048);
    attn_case c = {37, 7, 2, 32, 1.0f / sqrtf(32.0f), 1.0f, "1101101", 31};
    run_case(ctx, &c, 0);
    run_case(ctx, &c, 3); /* q starts 3 elements into its allocation */
    ts_ctx_done(ctx);
}

Test(softmax_attention, rejects_bad_arguments) {
    lv_ctx *ctx = ts_ctx_with_binding(4096);
    int64_t q_shape[2] = {4, 64}, k_shape[2] = {5, 64}, kbig_shape[2] = {20, 64};
    int64_t m5[1] = {5}, m4[1] = {4}, q3[2] = {4, 63};
    lv_tensor q, k, v, o, m, mbad, kbig, q_odd, kh;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, q_shape, &q), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, q_shape, &o), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, k_shape, &k), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, k_shape, &v), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, m5, &m), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, m4, &mbad), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, kbig_shape, &kbig), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, q3, &q_odd), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F16, 2, k_shape, &kh), LV_OK);

    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &k, &v, &m, 3, 1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "heads"), "%s", lv_last_error());
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &k, &v, &mbad, 2, 1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "mask"), "%s", lv_last_error());
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q_odd, &k, &v, &m, 1, 1.0f), LV_ERR_INVALID);
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &kh, &v, &m, 2, 1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "f32"), "%s", lv_last_error());
    cr_assert_eq(lv_op_softmax_attention(ctx, &q, &q, &k, &v, &m, 2, 1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &k, &v, &m, 2, NAN), LV_ERR_INVALID);
    /* 20 keys of 256 bytes do not fit a 4 KiB binding */
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &kbig, &kbig, NULL, 2, 1.0f), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "binding"), "%s", lv_last_error());
    /* a head dimension above the register budget */
    int64_t wide_shape[2] = {1, 300};
    lv_tensor qw, ow;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, wide_shape, &qw), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, wide_shape, &ow), LV_OK);
    cr_assert_eq(lv_op_softmax_attention(ctx, &ow, &qw, &qw, &qw, NULL, 1, 1.0f), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "head dimension"), "%s", lv_last_error());
    /* more keys than lavapipe's loop limit allows (CPU devices); elsewhere the binding */
    int64_t long_shape[2] = {20000, 64};
    lv_tensor klong;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, long_shape, &klong), LV_OK);
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &klong, &klong, NULL, 1, 1.0f), LV_ERR_LIMIT);
    if (lv_ctx_device(ctx)->type == LV_DEVICE_CPU)
        cr_assert(strstr(lv_last_error(), "loop"), "%s", lv_last_error());
    lv_tensor_free(ctx, &klong);
    /* the valid call works */
    lv_tensor *inputs[] = {&q, &k, &v, &m};
    for (size_t i = 0; i < 4; i++) cr_assert_eq(lv_op_fill(ctx, inputs[i], 0.5f), LV_OK);
    cr_assert_eq(lv_op_softmax_attention(ctx, &o, &q, &k, &v, &m, 2, 1.0f), LV_OK, "%s", lv_last_error());
    lv_tensor_free(ctx, &qw);
    lv_tensor_free(ctx, &ow);
    lv_tensor *all[] = {&q, &k, &v, &o, &m, &mbad, &kbig, &q_odd, &kh};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}
