/* lv_op_matmul against the C reference (tests/reference/ref_matmul.c).
 *
 * Error bound. The device accumulates in fp32: every product a*w is rounded once, the K
 * products and the bias are summed in some order with one rounding per addition, and the
 * reference (double accumulation) is rounded once to float. With u = 2^-24 the classic
 * bound for a recursive sum gives, per output,
 *     |got - want| <= (K + 2) u  sum_k |a w| + |bias|     (to first order in u),
 * whatever the summation order, so it holds for both kernel variants and every tile shape.
 * We assert it with a 1% margin for the second-order terms. f16 / bf16 weights are widened
 * exactly, so the reference runs on the same rounded weights (ts_round_to) and the same
 * bound applies. On top, the normalised error must stay below 1e-10: the typical fp32 error
 * is ~ u |out| per element (NMSE ~ 1e-14), while any indexing mistake gives NMSE ~ 1. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_matmul_internal.h"
#include "ref_matmul.h"
#include "test_support.h"
#include "vk_coopmat.h"

typedef struct mm_case {
    int64_t batch, M, N, K;
    lv_dtype wdtype;
    int bias;
    int batched_w; /* w [batch, N, K]; else w [N, K] and a [batch, M, K] */
} mm_case;

/* NaN everywhere, so that an output the kernel skips cannot pass (written from the host:
 * lv_op_fill would be one more kernel under test) */
static void fill_nan(lv_ctx *ctx, const lv_tensor *t) {
    size_t n = (size_t)lv_tensor_numel(t);
    float *x = malloc(n * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    cr_assert_eq(lv_tensor_write(ctx, t, x, n * sizeof *x), LV_OK, "%s", lv_last_error());
    free(x);
}

static const char *variant_name(lv_matmul_variant v) {
    return v == LV_MATMUL_TILED ? "tiled" : v == LV_MATMUL_REGISTER ? "register" : "auto";
}

/* Compare out with the reference under the bound above; returns the largest err / bound. */
static double check_against_ref(const float *got, const float *a, const float *w, const float *bias,
                                const mm_case *c, const char *what) {
    size_t no = (size_t)(c->batch * c->M * c->N);
    float *want = malloc(no * sizeof *want);
    double *mag = malloc(no * sizeof *mag);
    cr_assert(want && mag);
    ref_matmul(want, mag, a, w, bias, c->batch, c->M, c->N, c->K, c->batched_w);
    const double u = ldexp(1.0, -24);
    double worst = 0;
    for (size_t i = 0; i < no; i++) {
        double bound = 1.01 * (double)(c->K + 2) * u * mag[i] + 1e-30;
        double err = fabs((double)got[i] - (double)want[i]);
        cr_assert(err <= bound, "%s: out[%zu] = %.9g, reference %.9g, |err| %.3g > bound %.3g", what, i,
                  (double)got[i], (double)want[i], err, bound);
        if (err / bound > worst) worst = err / bound;
    }
    double nmse = ts_nmse(got, want, no);
    cr_assert(nmse <= 1e-10, "%s: NMSE %.3g > 1e-10", what, nmse);
    cr_log_info("%s: max |err| / bound %.3f, NMSE %.2g", what, worst, nmse);
    free(want);
    free(mag);
    return worst;
}

/* Random a, w (rounded to the weight dtype), bias; run one variant; check. */
static void run_case(lv_ctx *ctx, lv_matmul_variant variant, const mm_case *c, uint64_t seed) {
    char what[160];
    snprintf(what, sizeof what, "%s %s batch %lld M %lld N %lld K %lld%s%s", variant_name(variant),
             lv_dtype_name(c->wdtype), (long long)c->batch, (long long)c->M, (long long)c->N,
             (long long)c->K, c->bias ? " bias" : "", c->batched_w ? " batched w" : "");
    int64_t wb = c->batched_w ? c->batch : 1;
    size_t na = (size_t)(c->batch * c->M * c->K), nw = (size_t)(wb * c->N * c->K);
    float *a = ts_rand_alloc(na, seed, -1, 1);
    float *w = ts_rand_alloc(nw, seed + 1, -1, 1);
    float *bias = c->bias ? ts_rand_alloc((size_t)c->N, seed + 2, -1, 1) : NULL;
    ts_round_to(c->wdtype, w, nw);

    lv_tensor ta = ts_tensor(ctx, LV_F32, 3, (int64_t[]){c->batch, c->M, c->K}, a);
    lv_tensor tw = c->batched_w ? ts_tensor(ctx, c->wdtype, 3, (int64_t[]){c->batch, c->N, c->K}, w)
                                : ts_tensor(ctx, c->wdtype, 2, (int64_t[]){c->N, c->K}, w);
    lv_tensor tb = {0};
    if (bias) tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){c->N}, bias);
    lv_tensor to = ts_empty(ctx, 3, (int64_t[]){c->batch, c->M, c->N});
    fill_nan(ctx, &to);
    cr_assert_eq(lv_op_matmul_variant(ctx, &to, &ta, &tw, bias ? &tb : NULL, variant), LV_OK, "%s: %s",
                 what, lv_last_error());
    float *got = ts_read(ctx, &to);
    check_against_ref(got, a, w, bias, c, what);
    free(got);
    free(a);
    free(w);
    free(bias);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
}

static const lv_matmul_variant variants[] = {LV_MATMUL_REGISTER, LV_MATMUL_TILED};
static const lv_dtype dtypes[] = {LV_F32, LV_F16, LV_BF16};

/* The shapes of the brief (none meets the register kernel's fast path except 64^3) plus
 * shapes on the fast path: K % 8 == 0 and N % 4 == 0, with rows past the tile edge and a
 * column remainder that the general path finishes. */
static void shapes_for(lv_dtype dt) {
    static const int64_t shapes[][3] = {{1, 1, 1},    {7, 13, 5},   {33, 65, 129}, {100, 3, 257},
                                        {64, 64, 64}, {40, 200, 136}, {5, 68, 16}};
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 100 * (uint64_t)dt;
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int bias = 0; bias < 2; bias++) {
                mm_case c = {1, shapes[i][0], shapes[i][1], shapes[i][2], dt, bias, 0};
                run_case(ctx, variants[v], &c, seed++);
            }
    ts_ctx_done(ctx);
}

Test(matmul, shapes_f32) { shapes_for(LV_F32); }
Test(matmul, shapes_f16) { shapes_for(LV_F16); }
Test(matmul, shapes_bf16) { shapes_for(LV_BF16); }

/* a [B, M, K] with w [N, K] shared (rows fold into M) and with w [B, N, K] */
/* The fused epilogues, against the double reference x = a w^T + bias:
 *  - SiLU: out = silu(x). Bound: the product's bound above times max |silu'| = 1.1, plus the
 *    shader's exp and division: Vulkan allows exp an error of (3 + 2|x|) ulp, which reaches
 *    silu(x) scaled by at most 1, so (8 + 2|x|) u |x| covers them with the division.
 *  - residual add: out = r + x where out held r. Bound: the product's bound plus the final
 *    addition's rounding, 2 u (|r + x| + |r|). */
static void fused_case(lv_ctx *ctx, lv_matmul_variant variant, const int64_t mnk[3], lv_activation act,
                       bool accumulate, uint64_t seed) {
    int64_t M = mnk[0], N = mnk[1], K = mnk[2];
    float *a = ts_rand_alloc((size_t)(M * K), seed, -1, 1);
    float *w = ts_rand_alloc((size_t)(N * K), seed + 1, -1, 1);
    float *bias = ts_rand_alloc((size_t)N, seed + 2, -1, 1);
    float *r = ts_rand_alloc((size_t)(M * N), seed + 3, -4, 4);
    lv_tensor ta = ts_tensor(ctx, LV_F32, 2, (int64_t[]){M, K}, a);
    lv_tensor tw = ts_tensor(ctx, LV_F32, 2, (int64_t[]){N, K}, w);
    lv_tensor tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){N}, bias);
    lv_tensor to = ts_tensor(ctx, LV_F32, 2, (int64_t[]){M, N}, r);
    if (!accumulate) fill_nan(ctx, &to);
    cr_assert_eq(lv_op_matmul_ex(ctx, &to, &ta, &tw, &tb, act, accumulate, variant), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    float *want = malloc((size_t)(M * N) * sizeof *want);
    double *mag = malloc((size_t)(M * N) * sizeof *mag);
    cr_assert(want && mag);
    ref_matmul(want, mag, a, w, bias, 1, M, N, K, 0);
    const double u = ldexp(1.0, -24);
    for (int64_t e = 0; e < M * N; e++) {
        double x = want[e], y, bound = 1.01 * (double)(K + 2) * u * mag[e] + 1e-30;
        if (act == LV_ACT_SILU) {
            y = x / (1.0 + exp(-x));
            bound = 1.1 * bound + (8.0 + 2.0 * fabs(x)) * u * fabs(x);
        } else {
            y = x;
        }
        if (accumulate) {
            y += r[e];
            bound += 2 * u * (fabs(y) + fabs(r[e]));
        }
        cr_assert(fabs(got[e] - y) <= bound, "%s %lldx%lldx%lld act %d acc %d: out[%lld] = %.9g, want %.9g, bound %.3g",
                  variant_name(variant), (long long)M, (long long)N, (long long)K, (int)act, (int)accumulate,
                  (long long)e, (double)got[e], y, bound);
    }
    free(got);
    free(want);
    free(mag);
    free(a);
    free(w);
    free(bias);
    free(r);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
}

static const int64_t fused_shapes[][3] = {{7, 13, 5}, {64, 96, 96}, {33, 68, 136}};

Test(matmul, fused_silu) {
    lv_ctx *ctx = ts_ctx();
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < 3; i++) fused_case(ctx, variants[v], fused_shapes[i], LV_ACT_SILU, false, 700 + 10 * i);
    ts_ctx_done(ctx);
}

Test(matmul, fused_residual_add) {
    lv_ctx *ctx = ts_ctx();
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < 3; i++) fused_case(ctx, variants[v], fused_shapes[i], LV_ACT_NONE, true, 800 + 10 * i);
    ts_ctx_done(ctx);
}

Test(matmul, batched_both_ways) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 1000;
    for (size_t v = 0; v < 2; v++)
        for (size_t d = 0; d < 3; d++)
            for (int batched_w = 0; batched_w < 2; batched_w++) {
                mm_case odd = {3, 7, 13, 21, dtypes[d], 1, batched_w};
                run_case(ctx, variants[v], &odd, seed++);
                mm_case fast = {2, 20, 72, 48, dtypes[d], batched_w, batched_w};
                run_case(ctx, variants[v], &fast, seed++);
            }
    ts_ctx_done(ctx);
}

/* a with two batch dims [2, 3, M, K] against w [6, N, K]; out keeps a's leading dims */
Test(matmul, batch_dims_flatten) {
    lv_ctx *ctx = ts_ctx();
    int64_t M = 5, N = 12, K = 16;
    mm_case c = {6, M, N, K, LV_F32, 0, 1};
    float *a = ts_rand_alloc(6 * M * K, 7, -1, 1), *w = ts_rand_alloc(6 * N * K, 8, -1, 1);
    lv_tensor ta = ts_tensor(ctx, LV_F32, 4, (int64_t[]){2, 3, M, K}, a);
    lv_tensor tw = ts_tensor(ctx, LV_F32, 3, (int64_t[]){6, N, K}, w);
    lv_tensor to = ts_empty(ctx, 4, (int64_t[]){2, 3, M, N});
    for (size_t v = 0; v < 2; v++) {
        fill_nan(ctx, &to);
        cr_assert_eq(lv_op_matmul_variant(ctx, &to, &ta, &tw, NULL, variants[v]), LV_OK, "%s", lv_last_error());
        float *got = ts_read(ctx, &to);
        check_against_ref(got, a, w, NULL, &c, variant_name(variants[v]));
        free(got);
    }
    free(a);
    free(w);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &to);
    ts_ctx_done(ctx);
}

/* Long reductions: the bound grows with K, the kernels must not lose more than that. */
Test(matmul, long_k) {
    lv_ctx *ctx = ts_ctx();
    for (size_t v = 0; v < 2; v++) {
        mm_case c = {1, 9, 64, 4096, LV_F32, 1, 0};
        run_case(ctx, variants[v], &c, 77 + v);
        mm_case h = {1, 9, 64, 4096, LV_BF16, 1, 0};
        run_case(ctx, variants[v], &h, 79 + v);
    }
    ts_ctx_done(ctx);
}

/* Views that start at odd element offsets (rows of a bigger tensor, shifted by one element):
 * 16-bit weights whose rows start in the middle of a 32-bit word, unaligned a and out. */
Test(matmul, unaligned_views) {
    lv_ctx *ctx = ts_ctx();
    int64_t M = 9, N = 20, K = 24;
    for (size_t v = 0; v < 2; v++)
        for (size_t d = 0; d < 3; d++) {
            float *a = ts_rand_alloc(M * K + 1, 11, -1, 1), *w = ts_rand_alloc(N * K + 1, 12, -1, 1);
            float *bias = ts_rand_alloc(N + 1, 13, -1, 1);
            ts_round_to(dtypes[d], w, (size_t)(N * K + 1));
            lv_tensor ta = ts_tensor(ctx, LV_F32, 1, (int64_t[]){M * K + 1}, a);
            lv_tensor tw = ts_tensor(ctx, dtypes[d], 1, (int64_t[]){N * K + 1}, w);
            lv_tensor tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){N + 1}, bias);
            lv_tensor to = ts_empty(ctx, 1, (int64_t[]){M * N + 1});
            fill_nan(ctx, &to);
            lv_tensor va = lv_tensor_view(&ta, 1, 2, (int64_t[]){M, K});
            lv_tensor vw = lv_tensor_view(&tw, 1, 2, (int64_t[]){N, K});
            lv_tensor vb = lv_tensor_view(&tb, 1, 1, (int64_t[]){N});
            lv_tensor vo = lv_tensor_view(&to, 1, 2, (int64_t[]){M, N});
            cr_assert_eq(lv_op_matmul_variant(ctx, &vo, &va, &vw, &vb, variants[v]), LV_OK, "%s", lv_last_error());
            float *got = ts_read(ctx, &to);
            cr_assert(isnan(got[0]), "the element before the view was written");
            mm_case c = {1, M, N, K, dtypes[d], 1, 0};
            check_against_ref(got + 1, a + 1, w + 1, bias + 1, &c, "unaligned views");
            free(got);
            free(a);
            free(w);
            free(bias);
            lv_tensor_free(ctx, &ta);
            lv_tensor_free(ctx, &tw);
            lv_tensor_free(ctx, &tb);
            lv_tensor_free(ctx, &to);
        }
    ts_ctx_done(ctx);
}

/* With a small binding limit every tensor is split: over M for a / out, over N for w / out,
 * and batches one at a time. */
Test(matmul, splits_over_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(32768);
    uint64_t seed = 500;
    for (size_t v = 0; v < 2; v++) {
        mm_case fast = {1, 200, 320, 64, LV_F32, 1, 0};     /* a 51 KB, w 80 KB, out 256 KB */
        run_case(ctx, variants[v], &fast, seed++);
        mm_case half = {1, 150, 600, 40, LV_BF16, 1, 0};    /* w 48 KB, out 360 KB */
        run_case(ctx, variants[v], &half, seed++);
        mm_case odd = {1, 131, 77, 99, LV_F16, 0, 0};
        run_case(ctx, variants[v], &odd, seed++);
        mm_case batched = {3, 60, 50, 72, LV_F32, 1, 1};   /* one batch: a 17 KB, w 14 KB */
        run_case(ctx, variants[v], &batched, seed++);
        mm_case folded = {4, 90, 40, 16, LV_BF16, 0, 0};    /* a [4, 90, 16] folds into M = 360 */
        run_case(ctx, variants[v], &folded, seed++);
    }
    ts_ctx_done(ctx);
}

Test(matmul, row_over_binding_limit_is_a_clear_error) {
    lv_ctx *ctx = ts_ctx_with_binding(256);
    lv_tensor a = ts_empty(ctx, 2, (int64_t[]){4, 100});
    lv_tensor w = ts_empty(ctx, 2, (int64_t[]){8, 100});
    lv_tensor o = ts_empty(ctx, 2, (int64_t[]){4, 8});
    cr_assert_eq(lv_op_matmul(ctx, &o, &a, &w, NULL), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "[4, 100] f32") && strstr(lv_last_error(), "binding limit"), "%s",
              lv_last_error());
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &w);
    lv_tensor_free(ctx, &o);
    ts_ctx_done(ctx);
}

static void expect_invalid(lv_ctx *ctx, const lv_tensor *o, const lv_tensor *a, const lv_tensor *w,
                           const lv_tensor *b, const char *s1, const char *s2) {
    cr_assert_eq(lv_op_matmul(ctx, o, a, w, b), LV_ERR_INVALID, "expected an error naming %s and %s", s1, s2);
    const char *msg = lv_last_error();
    cr_assert(strstr(msg, s1) && strstr(msg, s2), "message does not name %s and %s: %s", s1, s2, msg);
}

Test(matmul, bad_shapes_name_both_shapes) {
    lv_ctx *ctx = ts_ctx();
    lv_tensor a = ts_empty(ctx, 2, (int64_t[]){4, 6});
    lv_tensor a3 = ts_empty(ctx, 3, (int64_t[]){2, 4, 6});
    lv_tensor w = ts_empty(ctx, 2, (int64_t[]){5, 6});
    lv_tensor w_badk = ts_empty(ctx, 2, (int64_t[]){5, 7});
    lv_tensor wb = ts_empty(ctx, 3, (int64_t[]){3, 5, 6});
    lv_tensor o = ts_empty(ctx, 2, (int64_t[]){4, 5});
    lv_tensor o_bad = ts_empty(ctx, 2, (int64_t[]){4, 4});
    lv_tensor b_bad = ts_empty(ctx, 1, (int64_t[]){4});
    lv_tensor ai32;
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 2, (int64_t[]){4, 6}, &ai32), LV_OK);
    expect_invalid(ctx, &o, &a, &w_badk, NULL, "[4, 6] f32", "[5, 7] f32");
    expect_invalid(ctx, &o_bad, &a, &w, NULL, "[4, 4] f32", "[5, 6] f32");
    expect_invalid(ctx, &o, &a, &w, &b_bad, "[4] f32", "[5, 6] f32");
    expect_invalid(ctx, &o, &a, &wb, NULL, "[4, 6] f32", "[3, 5, 6] f32");       /* 2-D a, batched w */
    expect_invalid(ctx, &o, &a3, &wb, NULL, "[2, 4, 6] f32", "[3, 5, 6] f32");    /* batch 2 vs 3 */
    expect_invalid(ctx, &o, &ai32, &w, NULL, "[4, 6] i32", "f16");                /* a must be f32 or 16-bit */
    lv_tensor alias = lv_tensor_view(&a, 0, 2, (int64_t[]){4, 5});
    expect_invalid(ctx, &alias, &a, &w, NULL, "[4, 5] f32", "[4, 6] f32");        /* out overlaps a */
    lv_tensor *all[] = {&a, &a3, &w, &w_badk, &wb, &o, &o_bad, &b_bad, &ai32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}

Test(matmul, variant_choice) {
    lv_ctx *ctx = ts_ctx();
    lv_matmul_variant want = lv_ctx_device(ctx)->type == LV_DEVICE_CPU ? LV_MATMUL_REGISTER : LV_MATMUL_TILED;
    unsetenv("LONGVK_MATMUL_VARIANT");
    cr_assert_eq(lv_matmul_auto_variant(ctx), want);
    setenv("LONGVK_MATMUL_VARIANT", "tiled", 1);
    cr_assert_eq(lv_matmul_auto_variant(ctx), LV_MATMUL_TILED);
    setenv("LONGVK_MATMUL_VARIANT", "register", 1);
    cr_assert_eq(lv_matmul_auto_variant(ctx), LV_MATMUL_REGISTER);
    /* the tensor-core kernel rounds its inputs to fp16: at f32 precision it is never taken,
     * forced or not (issue 57: the VAE's f32 columns through it missed their f32 bound) */
    cr_assert_eq(lv_ctx_precision(ctx), LV_PRECISION_F32);
    setenv("LONGVK_MATMUL_VARIANT", "coopmat", 1);
    cr_assert_eq(lv_matmul_auto_variant(ctx), want, "LONGVK_MATMUL_VARIANT=coopmat at f32 precision");
    /* and through the public entry point */
    mm_case c = {1, 7, 13, 5, LV_F32, 1, 0};
    run_case(ctx, LV_MATMUL_AUTO, &c, 3);
    unsetenv("LONGVK_MATMUL_VARIANT");
    ts_ctx_done(ctx);
}

/* The automatic choice from what the device reports (issue 57: it took the tensor cores on
 * NVIDIA's vendor id only, so AMD's RDNA3 and Intel's Arc, which offer the same extension,
 * kept them idle). The tensor-core kernel at f16 precision on any GPU whose context enabled
 * a usable shape; never at f32 or bf16 (bf16 activations would lose their range as fp16);
 * on CPU devices the register kernel (lavapipe's cooperative matrices are slower: measured
 * in engine/README.md). */
Test(matmul, variant_rule_from_the_device) {
    static const struct {
        const char *name;
        uint32_t vendor;
        lv_device_type type;
    } devices[] = {
        {"NVIDIA GeForce RTX 4090", 0x10de, LV_DEVICE_DISCRETE},
        {"AMD Radeon RX 7900 XTX (RADV NAVI31)", 0x1002, LV_DEVICE_DISCRETE},
        {"Intel(R) Arc(tm) A770 Graphics (DG2)", 0x8086, LV_DEVICE_DISCRETE},
        {"AMD Radeon 780M (RADV GFX1103_R1)", 0x1002, LV_DEVICE_INTEGRATED},
        {"llvmpipe (LLVM 19.1.7, 256 bits)", 0x10005, LV_DEVICE_CPU},
    };
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        lv_device_info d;
        memset(&d, 0, sizeof d);
        snprintf(d.name, sizeof d.name, "%s", devices[i].name);
        d.vendor_id = devices[i].vendor;
        d.type = devices[i].type;
        const bool cpu = d.type == LV_DEVICE_CPU;
        const lv_matmul_variant fp32 = cpu ? LV_MATMUL_REGISTER : LV_MATMUL_TILED;
        cr_assert_eq(lv_matmul_pick(&d, LV_PRECISION_F16, true), cpu ? LV_MATMUL_REGISTER : LV_MATMUL_COOPMAT,
                     "%s at f16 with usable cooperative matrices", d.name);
        cr_assert_eq(lv_matmul_pick(&d, LV_PRECISION_F16, false), fp32, "%s at f16 without", d.name);
        cr_assert_eq(lv_matmul_pick(&d, LV_PRECISION_F32, true), fp32, "%s at f32", d.name);
        cr_assert_eq(lv_matmul_pick(&d, LV_PRECISION_BF16, true), fp32, "%s at bf16", d.name);
    }
}

/* ---- the tensor-core kernel --------------------------------------------------------------
 *
 * LV_MATMUL_COOPMAT rounds a and w to fp16 inside the kernel and accumulates in fp32. GLSL
 * leaves the rounding of a float-to-half conversion to the device (to nearest or toward
 * zero), so each input may move by up to 2^-10 of itself, and each product by
 * (2 * 2^-10 + 2^-20) |a w|. Against the double reference on the unrounded inputs, per output:
 *     |got - want| <= (2^-9 + 2^-20 + (K + 2) u) sum_k |a w| + |bias| u   (1% margin)
 * and the NMSE stays below 1e-5 (typically ~1e-7 from the input rounding; an indexing
 * mistake gives ~1). It runs only where a context enables the tensor cores: with the
 * validation layer when the layer knows VK_KHR_cooperative_matrix, else without it (said
 * in the log: Debian 12's layer, 1.3.239, predates the extension). Elsewhere (lavapipe)
 * the test is skipped with the reason. */
static lv_ctx *coopmat_ctx(void) {
    lv_ctx_options o;
    lv_ctx_options_default(&o);
    o.precision = LV_PRECISION_F16;
    lv_ctx *ctx = ts_ctx_with(o);
    if (lv_ctx_device(ctx)->coopmat == LV_COOPMAT_OLD_LAYER) {
        ts_ctx_done(ctx);
        o.validation = 0;
        cr_assert_eq(lv_ctx_create(&o, &ctx), LV_OK, "%s", lv_last_error());
        cr_log_warn("the validation layer predates VK_KHR_cooperative_matrix: the tensor-core kernel runs without it");
    }
    if (!lv_ctx_coopmat(ctx)) {
        int state = (int)lv_ctx_device(ctx)->coopmat;
        lv_ctx_destroy(ctx);
        cr_skip_test("NOT RUN: no tensor cores on this device or build (coopmat state %d; `longvk devices` says why)",
                     state);
    }
    return ctx;
}

/* Every shape the device lists that the kernel can use, in the device's order (indices for
 * LONGVK_COOPMAT_SHAPE), into `usable`; the others are logged with the reason, and so is the
 * absence of bf16 inputs. Returns how many are usable (at least one on a coopmat context). */
static int usable_shapes(lv_ctx *ctx, int usable[LV_COOPMAT_MAX_SHAPES]) {
    const lv_device_info *d = lv_ctx_device(ctx);
    int n = d->coopmat_count < LV_COOPMAT_MAX_SHAPES ? d->coopmat_count : LV_COOPMAT_MAX_SHAPES, count = 0;
    bool bf16 = false;
    for (int i = 0; i < n; i++) {
        const lv_coopmat_shape *c = &d->coopmat_shapes[i];
        const char *why = lv_matmul_coopmat_unusable(c);
        bf16 = bf16 || c->a_type == LV_VK_COMPONENT_TYPE_BFLOAT16;
        cr_log_info("%s: shape %d: %ux%ux%u %s x %s + %s -> %s, %s scope: %s%s", d->name, i, c->m, c->n, c->k,
                    lv_coopmat_type_name(c->a_type), lv_coopmat_type_name(c->b_type),
                    lv_coopmat_type_name(c->c_type), lv_coopmat_type_name(c->result_type),
                    lv_coopmat_scope_name(c->scope), why ? "not used: " : "tested", why ? why : "");
        if (!why) usable[count++] = i;
    }
    if (!bf16) cr_log_info("%s lists no bf16 cooperative matrix: no bf16 shape to test", d->name);
    cr_assert_gt(count, 0, "the context enabled the tensor cores but the kernel can use none of %d shapes", n);
    return count;
}

/* LONGVK_COOPMAT_SHAPE=index: the kernel tiles with that shape */
static void use_shape(lv_ctx *ctx, int index) {
    char v[16];
    snprintf(v, sizeof v, "%d", index);
    cr_assert_eq(setenv("LONGVK_COOPMAT_SHAPE", v, 1), 0);
    const lv_coopmat_shape *c = lv_matmul_coopmat_shape(ctx);
    cr_assert(c == &lv_ctx_device(ctx)->coopmat_shapes[index], "LONGVK_COOPMAT_SHAPE=%d not taken", index);
}

/* The tensor-core kernel's bound on one output of magnitude sum |a w| (ref_matmul's mag): the
 * fp16 rounding of a and w (2^-9 + 2^-20 relative) and fp32 accumulation over K + 2 terms. */
static double coopmat_bound(double mag, int64_t K) {
    const double u = ldexp(1.0, -24), rel = ldexp(1.0, -9) + ldexp(1.0, -20);
    return 1.01 * (rel + (double)(K + 2) * u) * mag + 1e-30;
}

static void coopmat_case(lv_ctx *ctx, const mm_case *c, lv_activation act, bool accumulate, uint64_t seed) {
    int64_t wb = c->batched_w ? c->batch : 1;
    size_t na = (size_t)(c->batch * c->M * c->K), nw = (size_t)(wb * c->N * c->K), no = (size_t)(c->batch * c->M * c->N);
    float *a = ts_rand_alloc(na, seed, -1, 1);
    float *w = ts_rand_alloc(nw, seed + 1, -1, 1);
    float *bias = c->bias ? ts_rand_alloc((size_t)c->N, seed + 2, -1, 1) : NULL;
    float *r = ts_rand_alloc(no, seed + 3, -4, 4);
    ts_round_to(c->wdtype, w, nw);
    lv_tensor ta = ts_tensor(ctx, LV_F32, 3, (int64_t[]){c->batch, c->M, c->K}, a);
    lv_tensor tw = c->batched_w ? ts_tensor(ctx, c->wdtype, 3, (int64_t[]){c->batch, c->N, c->K}, w)
                                : ts_tensor(ctx, c->wdtype, 2, (int64_t[]){c->N, c->K}, w);
    lv_tensor tb = {0};
    if (bias) tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){c->N}, bias);
    lv_tensor to = ts_tensor(ctx, LV_F32, 3, (int64_t[]){c->batch, c->M, c->N}, r);
    if (!accumulate) fill_nan(ctx, &to);
    cr_assert_eq(lv_op_matmul_ex(ctx, &to, &ta, &tw, bias ? &tb : NULL, act, accumulate, LV_MATMUL_COOPMAT), LV_OK,
                 "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    float *want = malloc(no * sizeof *want), *full = malloc(no * sizeof *full);
    double *mag = malloc(no * sizeof *mag);
    cr_assert(want && mag && full);
    ref_matmul(want, mag, a, w, bias, c->batch, c->M, c->N, c->K, c->batched_w);
    const double u = ldexp(1.0, -24);
    for (size_t e = 0; e < no; e++) {
        double x = want[e], y = x, bound = coopmat_bound(mag[e], c->K);
        if (act == LV_ACT_SILU) { /* as fused_case: |silu'| <= 1.1, and exp's error */
            y = x / (1.0 + exp(-x));
            bound = 1.1 * bound + (8.0 + 2.0 * fabs(x)) * u * fabs(x);
        }
        if (accumulate) {
            y += r[e];
            bound += 2 * u * (fabs(y) + fabs(r[e]));
        }
        full[e] = (float)y;
        cr_assert(fabs(got[e] - y) <= bound,
                  "coopmat %s batch %lld %lldx%lldx%lld act %d acc %d: out[%zu] = %.9g, want %.9g, bound %.3g",
                  lv_dtype_name(c->wdtype), (long long)c->batch, (long long)c->M, (long long)c->N, (long long)c->K,
                  (int)act, (int)accumulate, e, (double)got[e], y, bound);
    }
    double nmse = ts_nmse(got, full, no);
    cr_assert(nmse <= 1e-5, "coopmat %lldx%lldx%lld: NMSE %.3g > 1e-5", (long long)c->M, (long long)c->N,
              (long long)c->K, nmse);
    cr_log_info("coopmat %s %lldx%lldx%lld: NMSE %.2g", lv_dtype_name(c->wdtype), (long long)c->M, (long long)c->N,
                (long long)c->K, nmse);
    free(got);
    free(want);
    free(full);
    free(mag);
    free(a);
    free(w);
    free(bias);
    free(r);
    lv_tensor *all[] = {&ta, &tw, &tb, &to};
    for (size_t i = 0; i < 4; i++) lv_tensor_free(ctx, all[i]);
}

Test(matmul, coopmat_fp16) {
    lv_ctx *ctx = coopmat_ctx();
    static const int64_t shapes[][3] = {{1, 1, 1},     {7, 13, 5},    {33, 65, 129}, {100, 3, 257},
                                        {64, 64, 64},  {130, 200, 96}, {5, 68, 16},   {256, 192, 320}};
    int usable[LV_COOPMAT_MAX_SHAPES];
    const int nusable = usable_shapes(ctx, usable);
    for (int s = 0; s < nusable; s++) { /* every shape the device lists that the kernel can use */
        use_shape(ctx, usable[s]);
        uint64_t seed = 900;
        for (size_t d = 0; d < 3; d++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int bias = 0; bias < 2; bias++) {
                    mm_case c = {1, shapes[i][0], shapes[i][1], shapes[i][2], dtypes[d], bias, 0};
                    coopmat_case(ctx, &c, LV_ACT_NONE, false, seed++);
                }
        mm_case batched = {3, 40, 70, 48, LV_BF16, 1, 1}, folded = {3, 40, 70, 48, LV_F16, 1, 0};
        coopmat_case(ctx, &batched, LV_ACT_NONE, false, seed++);
        coopmat_case(ctx, &folded, LV_ACT_NONE, false, seed++);
        for (size_t i = 0; i < 3; i++) {
            mm_case f = {1, fused_shapes[i][0], fused_shapes[i][1], fused_shapes[i][2], LV_F32, 1, 0};
            coopmat_case(ctx, &f, LV_ACT_SILU, false, seed++);
            coopmat_case(ctx, &f, LV_ACT_NONE, true, seed++);
        }
        const lv_coopmat_shape *c = lv_matmul_coopmat_shape(ctx);
        cr_log_info("coopmat_fp16: shape %d (%ux%ux%u) passed every case", usable[s], c->m, c->n, c->k);
    }
    unsetenv("LONGVK_COOPMAT_SHAPE");
    /* at fp16 precision lv_op_matmul takes this kernel on every GPU with a usable shape (the
     * rule: variant_rule_from_the_device), the register kernel on CPU devices */
    unsetenv("LONGVK_MATMUL_VARIANT");
    cr_assert_eq(lv_matmul_auto_variant(ctx),
                 lv_ctx_device(ctx)->type == LV_DEVICE_CPU ? LV_MATMUL_REGISTER : LV_MATMUL_COOPMAT);
    uint64_t n = lv_ctx_validation_messages(ctx);
    lv_ctx_destroy(ctx);
    cr_assert_eq(n, 0, "the validation layer reported %llu message(s)", (unsigned long long)n);
}

/* Where the tensor cores are not enabled, asking for their kernel is a clear error. */
/* The tensor-core kernel loads four k at a time where K and the view's start in its binding
 * are multiples of 4, else element by element: views of a, w and out starting at element 1
 * (element by element) and at element 4 (four at a time, from an offset), with K = 24; every
 * element of out written, none before it, each within coopmat_case's bound. */
Test(matmul, coopmat_unaligned_views) {
    lv_ctx *ctx = coopmat_ctx();
    const int64_t M = 9, N = 20, K = 24, starts[] = {1, 4};
    for (size_t s = 0; s < 2; s++)
        for (size_t d = 0; d < 3; d++) {
            const int64_t o0 = starts[s], na = M * K + o0, nw = N * K + o0, no = M * N + o0;
            float *a = ts_rand_alloc((size_t)na, 31 + s, -1, 1), *w = ts_rand_alloc((size_t)nw, 33 + d, -1, 1);
            ts_round_to(dtypes[d], w, (size_t)nw);
            lv_tensor ta = ts_tensor(ctx, LV_F32, 1, &na, a), tw = ts_tensor(ctx, dtypes[d], 1, &nw, w);
            lv_tensor to = ts_empty(ctx, 1, &no);
            fill_nan(ctx, &to);
            lv_tensor va = lv_tensor_view(&ta, o0, 2, (int64_t[]){M, K});
            lv_tensor vw = lv_tensor_view(&tw, o0, 2, (int64_t[]){N, K});
            lv_tensor vo = lv_tensor_view(&to, o0, 2, (int64_t[]){M, N});
            cr_assert_eq(lv_op_matmul_variant(ctx, &vo, &va, &vw, NULL, LV_MATMUL_COOPMAT), LV_OK, "%s",
                         lv_last_error());
            float *got = ts_read(ctx, &to), *want = malloc((size_t)(M * N) * sizeof *want);
            double *mag = malloc((size_t)(M * N) * sizeof *mag);
            cr_assert(want && mag);
            for (int64_t e = 0; e < o0; e++)
                cr_assert(isnan(got[e]), "element %lld before the view was written", (long long)e);
            ref_matmul(want, mag, a + o0, w + o0, NULL, 1, M, N, K, 0);
            for (int64_t e = 0; e < M * N; e++) {
                cr_assert(fabs(got[o0 + e] - want[e]) <= coopmat_bound(mag[e], K),
                          "view at %lld, w %s: out[%lld] = %.9g, want %.9g", (long long)o0,
                          lv_dtype_name(dtypes[d]), (long long)e, got[o0 + e], (double)want[e]);
            }
            free(got);
            free(want);
            free(mag);
            free(a);
            free(w);
            lv_tensor_free(ctx, &ta);
            lv_tensor_free(ctx, &tw);
            lv_tensor_free(ctx, &to);
        }
    uint64_t n = lv_ctx_validation_messages(ctx);
    lv_ctx_destroy(ctx);
    cr_assert_eq(n, 0, "the validation layer reported %llu message(s)", (unsigned long long)n);
}

Test(matmul, coopmat_unavailable_is_an_error) {
    lv_ctx *ctx = ts_ctx();
    if (lv_ctx_coopmat(ctx)) {
        ts_ctx_done(ctx);
        cr_skip_test("this context has the tensor cores");
    }
    cr_assert_eq(lv_ctx_precision(ctx), LV_PRECISION_F32);
    lv_tensor a = ts_empty(ctx, 2, (int64_t[]){4, 8}), w = ts_empty(ctx, 2, (int64_t[]){5, 8}),
              o = ts_empty(ctx, 2, (int64_t[]){4, 5});
    cr_assert_eq(lv_op_matmul_variant(ctx, &o, &a, &w, NULL, LV_MATMUL_COOPMAT), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "longvk devices"), "%s", lv_last_error());
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &w);
    lv_tensor_free(ctx, &o);
    ts_ctx_done(ctx);
}

/* 16-bit activations (lv_ctx_options.precision f16 / bf16): a read and out written as f16 or
 * bf16 by the register kernel (fast and general paths) and the tiled one, with and without
 * bias and SiLU. The reference takes the same rounded a and w. Bound: the f32 product's
 * bound above (times 1.1 plus exp's error for SiLU, as fused_case), plus the rounding of the
 * stored result: ts_half_rel(out) |want|, and 2^-25 for f16's subnormals. in_rel: the
 * kernel's own rounding of its inputs (the tensor-core kernel's fp16, as coopmat_case), 0
 * for the fp32 kernels. */
static void half_case(lv_ctx *ctx, lv_matmul_variant variant, const int64_t mnk[3], lv_dtype adt, lv_dtype odt,
                      lv_dtype wdt, lv_activation act, double in_rel, uint64_t seed) {
    int64_t M = mnk[0], N = mnk[1], K = mnk[2];
    size_t na = (size_t)(M * K), nw = (size_t)(N * K), no = (size_t)(M * N);
    float *a = ts_rand_alloc(na, seed, -1, 1), *w = ts_rand_alloc(nw, seed + 1, -1, 1);
    float *bias = ts_rand_alloc((size_t)N, seed + 2, -1, 1);
    ts_round_to(adt, a, na);
    ts_round_to(wdt, w, nw);
    lv_tensor ta = ts_tensor(ctx, adt, 2, (int64_t[]){M, K}, a), tw = ts_tensor(ctx, wdt, 2, (int64_t[]){N, K}, w);
    lv_tensor tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){N}, bias);
    lv_tensor to;
    cr_assert_eq(lv_tensor_create(ctx, odt, 2, (int64_t[]){M, N}, &to), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_matmul_ex(ctx, &to, &ta, &tw, &tb, act, false, variant), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to), *want = malloc(no * sizeof *want);
    double *mag = malloc(no * sizeof *mag);
    cr_assert(want && mag);
    ref_matmul(want, mag, a, w, bias, 1, M, N, K, 0);
    const double u = ldexp(1.0, -24), rel = ts_half_rel(odt), sub = odt == LV_F16 ? 0x1p-25 : 0.0;
    double worst = 0;
    for (size_t e = 0; e < no; e++) {
        double x = want[e], y = x, bound = 1.01 * (in_rel + (double)(K + 2) * u) * mag[e];
        if (act == LV_ACT_SILU) {
            y = x / (1.0 + exp(-x));
            bound = 1.1 * bound + (8.0 + 2.0 * fabs(x)) * u * fabs(x);
        }
        bound += rel * fabs(y) + sub + 1e-30;
        double err = fabs(got[e] - y);
        cr_assert(err <= bound, "%s a %s out %s w %s %lldx%lldx%lld act %d: out[%zu] = %.9g, want %.9g, bound %.3g",
                  variant_name(variant), lv_dtype_name(adt), lv_dtype_name(odt), lv_dtype_name(wdt), (long long)M,
                  (long long)N, (long long)K, (int)act, e, (double)got[e], y, bound);
        if (err / bound > worst) worst = err / bound;
    }
    cr_log_info("%s a %s out %s w %s %lldx%lldx%lld act %d: max |err| / bound %.3f", variant_name(variant),
                lv_dtype_name(adt), lv_dtype_name(odt), lv_dtype_name(wdt), (long long)M, (long long)N, (long long)K,
                (int)act, worst);
    free(got);
    free(want);
    free(mag);
    free(a);
    free(w);
    free(bias);
    lv_tensor *all[] = {&ta, &tw, &tb, &to};
    for (size_t i = 0; i < 4; i++) lv_tensor_free(ctx, all[i]);
}

Test(matmul, half_activations) {
    lv_ctx *ctx = ts_ctx();
    /* fast path with a general-path column remainder, general path only, odd shapes */
    static const int64_t shapes[][3] = {{33, 68, 136}, {40, 200, 136}, {7, 13, 5}, {5, 66, 16}, {64, 96, 96}};
    static const lv_dtype half[] = {LV_F16, LV_BF16};
    /* (a, out) pairs: 16-bit input only, 16-bit output only, both */
    uint64_t seed = 7000;
    for (size_t v = 0; v < 2; v++)
        for (size_t h = 0; h < 2; h++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int pair = 0; pair < 3; pair++) {
                    lv_dtype adt = pair == 1 ? LV_F32 : half[h], odt = pair == 0 ? LV_F32 : half[h];
                    lv_dtype wdt = i % 2 ? LV_BF16 : LV_F16;
                    half_case(ctx, variants[v], shapes[i], adt, odt, wdt, pair == 2 ? LV_ACT_SILU : LV_ACT_NONE, 0.0,
                              seed++);
                }
    /* a 16-bit out cannot take a residual add; the tensor-core kernel is never used at f32
     * precision (it rounds its inputs to fp16), whether or not the device has cooperative
     * matrices (Mesa 26's lavapipe has) */
    cr_assert_eq(lv_ctx_precision(ctx), LV_PRECISION_F32);
    lv_tensor a, w = ts_empty(ctx, 2, (int64_t[]){4, 8}), o = ts_empty(ctx, 2, (int64_t[]){4, 4}), oh;
    cr_assert_eq(lv_tensor_create(ctx, LV_F16, 2, (int64_t[]){4, 8}, &a), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F16, 2, (int64_t[]){4, 4}, &oh), LV_OK);
    cr_assert_eq(lv_op_matmul_add(ctx, &oh, &a, &w, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "f32 out"), "%s", lv_last_error());
    cr_assert_eq(lv_op_matmul_variant(ctx, &o, &a, &w, NULL, LV_MATMUL_COOPMAT), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "longvk devices"), "%s", lv_last_error());
    lv_tensor *all[] = {&a, &w, &o, &oh};
    for (size_t i = 0; i < 4; i++) lv_tensor_free(ctx, all[i]);
    ts_ctx_done(ctx);
}

/* The tensor-core kernel with 16-bit activations, as --precision f16 runs the DiT on a GPU
 * (skipped where the tensor cores are not enabled, e.g. lavapipe): the same cases as
 * half_activations, bound widened by the kernel's fp16 rounding of a and w (coopmat_case). */
Test(matmul, coopmat_half_activations) {
    lv_ctx *ctx = coopmat_ctx();
    static const int64_t shapes[][3] = {{33, 68, 136}, {40, 200, 136}, {7, 13, 5}, {5, 66, 16}, {64, 96, 96}};
    static const lv_dtype half[] = {LV_F16, LV_BF16};
    const double in_rel = ldexp(1.0, -9) + ldexp(1.0, -20);
    int usable[LV_COOPMAT_MAX_SHAPES];
    const int nusable = usable_shapes(ctx, usable);
    for (int s = 0; s < nusable; s++) {
        use_shape(ctx, usable[s]);
        uint64_t seed = 7500;
        for (size_t h = 0; h < 2; h++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int pair = 0; pair < 3; pair++) {
                    lv_dtype adt = pair == 1 ? LV_F32 : half[h], odt = pair == 0 ? LV_F32 : half[h];
                    half_case(ctx, LV_MATMUL_COOPMAT, shapes[i], adt, odt, i % 2 ? LV_BF16 : LV_F16,
                              pair == 2 ? LV_ACT_SILU : LV_ACT_NONE, in_rel, seed++);
                }
        cr_log_info("coopmat_half_activations: shape %d passed every case", usable[s]);
    }
    unsetenv("LONGVK_COOPMAT_SHAPE");
    uint64_t n = lv_ctx_validation_messages(ctx);
    lv_ctx_destroy(ctx);
    cr_assert_eq(n, 0, "the validation layer reported %llu message(s)", (unsigned long long)n);
}
