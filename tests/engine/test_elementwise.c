/* Element-wise kernels (lv_op_add, mul, scale_add, add_gated, modulate, silu, gelu_tanh,
 * relu, mul_silu, mul_gelu_tanh) against tests/reference/ref_elementwise.c on random inputs: odd shapes, the [G, C]
 * broadcasts (G = 1, G = frames, G = rows), in place, and split over a small binding limit.
 * Rows of a multiple of 4 (or no broadcast) on aligned tensors take the shaders' vec4 path
 * (with a scalar tail when the element count is not a multiple of 4), others the scalar
 * path; both are covered.
 *
 * Error bounds, per element, from the Vulkan precision rules (u = 2^-24, the unit roundoff
 * of fp32; 1 ULP is at most 2u relative):
 * - add, mul, relu: one correctly rounded operation (Vulkan requires it for + and *), the
 *   same rounding as the double reference rounded once: bit-exact.
 * - scale_add alpha a + beta b, add_gated x + g y: two products and a sum, possibly fused:
 *   at most 2u (|first term| + |second term|), plus u|result| for the reference's rounding:
 *   3u (|t1| + |t2|).
 * - modulate x (1 + s) + shift: one more rounding (1 + s): 4u (|x (1 + s)| + |shift|).
 * - silu x / (1 + e^-x), gelu x / (1 + e^-2t): Vulkan's exp has 3 + 2|arg| ULP, the
 *   division 2.5 ULP, the sum 1 rounding, the argument 2t (gelu) 4 roundings whose relative
 *   error |2t| 4u moves exp by that much; the result's relative error is at most that of
 *   (1 + e). So |got - want| <= |want| (2 (3 + 2|arg|) + 5 + 2 + 4|arg| + 1) u. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_helpers.h" /* lv_fastdiv_make, checked directly below */
#include "ref_elementwise.h"
#include "test_support.h"

#define U (1.0 / 16777216.0)

typedef enum { ADD, MUL, SCALE_ADD } binary_kind;
static const char *binary_names[] = {"add", "mul", "scale_add"};

static void expect_equal(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        cr_assert(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                  "%s: element %zu: got %.9g want %.9g", what, i, got[i], want[i]);
}

static int64_t numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* Run one binary op on a `shape` tensor a and a [G, C] operand b; compare. */
static void check_binary(lv_ctx *ctx, binary_kind kind, int ndim, const int64_t *shape, int64_t G,
                         uint64_t seed) {
    int64_t n = numel(ndim, shape), C = shape[ndim - 1], R = n / C;
    int64_t bshape[2] = {G, C};
    float *a = ts_rand_alloc((size_t)n, seed, -2, 2), *b = ts_rand_alloc((size_t)(G * C), seed + 1, -2, 2);
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor ta = ts_tensor(ctx, LV_F32, ndim, shape, a), tb = ts_tensor(ctx, LV_F32, 2, bshape, b);
    lv_tensor to = ts_empty(ctx, ndim, shape);
    const float alpha = 0.75f, beta = -1.3f;
    lv_status s = kind == ADD ? lv_op_add(ctx, &to, &ta, &tb)
                : kind == MUL ? lv_op_mul(ctx, &to, &ta, &tb)
                              : lv_op_scale_add(ctx, &to, &ta, alpha, &tb, beta);
    cr_assert_eq(s, LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    char what[128];
    snprintf(what, sizeof what, "%s R=%lld C=%lld G=%lld", binary_names[kind], (long long)R,
             (long long)C, (long long)G);
    if (kind == ADD) {
        ref_add(want, a, b, R, C, G);
        expect_equal(what, got, want, (size_t)n);
    } else if (kind == MUL) {
        ref_mul(want, a, b, R, C, G);
        expect_equal(what, got, want, (size_t)n);
    } else {
        ref_scale_add(want, a, alpha, b, beta, R, C, G);
        for (int64_t i = 0; i < n; i++) {
            double bi = b[(i / C) / (R / G) * C + i % C];
            tol[i] = 3 * U * (fabs(alpha * (double)a[i]) + fabs(beta * bi));
        }
        ts_expect_within(what, got, want, tol, (size_t)n);
    }
    free(got);
    free(a);
    free(b);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
}

/* modulate (mode 0) or add_gated (mode 1) with operand groups Gp, Gq */
static void check_adaln(lv_ctx *ctx, int mode, int ndim, const int64_t *shape, int64_t Gp,
                        int64_t Gq, uint64_t seed) {
    int64_t n = numel(ndim, shape), C = shape[ndim - 1], R = n / C;
    int64_t pshape[2] = {Gp, C}, qshape[2] = {Gq, C};
    float *x = ts_rand_alloc((size_t)n, seed, -2, 2);
    float *p = ts_rand_alloc((size_t)(Gp * C), seed + 1, -2, 2);
    float *q = ts_rand_alloc((size_t)(Gq * C), seed + 2, -1.5f, 1.5f);
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor tx = ts_tensor(ctx, LV_F32, ndim, shape, x);
    lv_tensor tp = ts_tensor(ctx, LV_F32, 2, pshape, p), tq = ts_tensor(ctx, LV_F32, 2, qshape, q);
    lv_tensor to = ts_empty(ctx, ndim, shape);
    lv_status s = mode == 0 ? lv_op_modulate(ctx, &to, &tx, &tp, &tq) : lv_op_add_gated(ctx, &to, &tx, &tp, &tq);
    cr_assert_eq(s, LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i / C, c = i % C;
        double pv = p[r / (R / Gp) * C + c], qv = q[r / (R / Gq) * C + c];
        tol[i] = mode == 0 ? 4 * U * (fabs(x[i] * (1 + qv)) + fabs(pv))
                           : 3 * U * (fabs((double)x[i]) + fabs(qv * pv));
    }
    if (mode == 0) ref_modulate(want, x, p, Gp, q, Gq, R, C);
    else ref_add_gated(want, x, p, Gp, q, Gq, R, C);
    char what[128];
    snprintf(what, sizeof what, "%s R=%lld C=%lld Gp=%lld Gq=%lld", mode == 0 ? "modulate" : "add_gated",
             (long long)R, (long long)C, (long long)Gp, (long long)Gq);
    ts_expect_within(what, got, want, tol, (size_t)n);
    free(got);
    free(x);
    free(p);
    free(q);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &tx);
    lv_tensor_free(ctx, &tp);
    lv_tensor_free(ctx, &tq);
    lv_tensor_free(ctx, &to);
}

/* The shapes every test walks: odd sizes, 3-D with frames first. */
static const struct {
    int ndim;
    int64_t shape[3];
    int64_t groups[3]; /* G values to try for broadcast operands (besides R) */
} shapes[] = {
    {2, {1, 1}, {1, 1, 1}},
    {2, {7, 13}, {1, 7, 7}},
    {2, {33, 257}, {1, 3, 11}},
    {3, {4, 15, 19}, {1, 4, 20}}, /* 4 frames of 15 tokens: G = 4 is per-frame */
    {2, {1, 2241}, {1, 1, 1}},
    /* C a multiple of 4: the vec4 path, broadcasting too */
    {2, {12, 64}, {1, 3, 4}},
    {3, {4, 5, 2240}, {1, 4, 10}},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

Test(elementwise, binary_ops_broadcast) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 100;
    for (size_t s = 0; s < NSHAPES; s++) {
        int64_t R = numel(shapes[s].ndim, shapes[s].shape) / shapes[s].shape[shapes[s].ndim - 1];
        int64_t Gs[4] = {R, shapes[s].groups[0], shapes[s].groups[1], shapes[s].groups[2]};
        for (int g = 0; g < 4; g++)
            for (int k = ADD; k <= SCALE_ADD; k++)
                check_binary(ctx, (binary_kind)k, shapes[s].ndim, shapes[s].shape, Gs[g], seed += 7);
    }
    ts_ctx_done(ctx);
}

Test(elementwise, modulate_and_gated_residual) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 300;
    for (size_t s = 0; s < NSHAPES; s++) {
        int64_t R = numel(shapes[s].ndim, shapes[s].shape) / shapes[s].shape[shapes[s].ndim - 1];
        int64_t Gs[4] = {R, shapes[s].groups[0], shapes[s].groups[1], shapes[s].groups[2]};
        for (int g = 0; g < 4; g++)
            for (int mode = 0; mode < 2; mode++) {
                /* modulate: shift and scale broadcast alike, or differently;
                 * add_gated: y full, gate broadcast (the adaLN case), and both broadcast */
                int64_t Gp = mode == 0 ? Gs[g] : R, Gq = Gs[g];
                check_adaln(ctx, mode, shapes[s].ndim, shapes[s].shape, Gp, Gq, seed += 7);
                check_adaln(ctx, mode, shapes[s].ndim, shapes[s].shape, Gs[(g + 1) % 4], Gq, seed += 7);
            }
    }
    ts_ctx_done(ctx);
}

/* bound for silu (gelu = 0) or gelu (1): see the top comment */
static double activation_tol(int gelu, float xf, float want) {
    double x = xf;
    double arg = gelu ? 2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x) : x;
    double ulps = 2 * (3 + 2 * fabs(arg)) + 5 + 2 + 4 * fabs(arg) + 1;
    return fabs((double)want) * ulps * U + (gelu ? fabs(x) * 0x1p-53 : 0) + 1e-37;
}

Test(elementwise, activations) {
    lv_ctx *ctx = ts_ctx();
    const int64_t sizes[] = {1, 13, 257 * 33, 70001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        /* [-12, 12] covers both saturated ends; a few extremes where exp overflows */
        float *x = ts_rand_alloc((size_t)n, 500 + s, -12, 12);
        if (n > 4) {
            x[0] = -100.0f;
            x[1] = 100.0f;
            x[2] = 0.0f;
            x[3] = -0.0f;
        }
        float *want = malloc((size_t)n * 4);
        double *tol = malloc((size_t)n * 8);
        lv_tensor tx = ts_tensor(ctx, LV_F32, 1, &n, x), to = ts_empty(ctx, 1, &n);
        for (int k = 0; k < 3; k++) {
            lv_status st = k == 0 ? lv_op_silu(ctx, &to, &tx) : k == 1 ? lv_op_gelu_tanh(ctx, &to, &tx)
                                                                   : lv_op_relu(ctx, &to, &tx);
            cr_assert_eq(st, LV_OK, "%s", lv_last_error());
            float *got = ts_read(ctx, &to);
            char what[64];
            snprintf(what, sizeof what, "%s n=%lld", k == 0 ? "silu" : k == 1 ? "gelu_tanh" : "relu",
                     (long long)n);
            if (k == 2) {
                ref_relu(want, x, n);
                expect_equal(what, got, want, (size_t)n);
            } else {
                if (k == 0) ref_silu(want, x, n);
                else ref_gelu_tanh(want, x, n);
                for (int64_t i = 0; i < n; i++) tol[i] = activation_tol(k, x[i], want[i]);
                ts_expect_within(what, got, want, tol, (size_t)n);
            }
            free(got);
        }
        free(x);
        free(want);
        free(tol);
        lv_tensor_free(ctx, &tx);
        lv_tensor_free(ctx, &to);
    }
    ts_ctx_done(ctx);
}

typedef lv_status (*gated_op)(lv_ctx *, const lv_tensor *, const lv_tensor *, const lv_tensor *);

/* a * act(b) against the C reference of act: the activation's bound (activation_tol, above)
 * scaled by |a|, plus one rounding of the product; also with b broadcast per channel. */
static void check_gated_to(lv_dtype idt, lv_dtype odt, const char *name, gated_op op,
                           void (*ref)(float *, const float *, int64_t), int gelu, uint64_t seed) {
    lv_ctx *ctx = ts_ctx();
    const int64_t shapes[][2] = {{1, 1}, {7, 13}, {33, 257}, {64, 288}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int bcast = 0; bcast < 2; bcast++) {
            int64_t R = shapes[s][0], C = shapes[s][1], n = R * C, nb = bcast ? C : n;
            float *a = ts_rand_alloc((size_t)n, seed + s, -3, 3), *b = ts_rand_alloc((size_t)nb, seed + 50 + s, -12, 12);
            float *sb = malloc((size_t)nb * 4), *want = malloc((size_t)n * 4);
            double *tol = malloc((size_t)n * 8);
            ts_round_to(idt, a, (size_t)n); /* the reference takes the same 16-bit inputs */
            ts_round_to(idt, b, (size_t)nb);
            ref(sb, b, nb);
            for (int64_t i = 0; i < n; i++) {
                int64_t j = bcast ? i % C : i;
                want[i] = (float)((double)a[i] * (double)sb[j]);
                tol[i] = fabs((double)a[i]) * activation_tol(gelu, b[j], sb[j]) + fabs((double)want[i]) * U;
                /* a 16-bit out: one more rounding (ts_half_rel), and f16's subnormal spacing */
                tol[i] += ts_half_rel(odt) * fabs((double)want[i]) + (odt == LV_F16 ? 0x1p-25 : 0.0);
            }
            int64_t shape[2] = {R, C}, bshape[2] = {bcast ? 1 : R, C};
            lv_tensor ta = ts_tensor(ctx, idt, 2, shape, a), tb = ts_tensor(ctx, idt, 2, bshape, b);
            lv_tensor to;
            /* equal 16-bit dtypes: in place, out = a (the Mix-FFN's gate) */
            bool in_place = idt == odt && idt != LV_F32;
            if (in_place) to = ta;
            else cr_assert_eq(lv_tensor_create(ctx, odt, 2, shape, &to), LV_OK, "%s", lv_last_error());
            cr_assert_eq(op(ctx, &to, &ta, &tb), LV_OK, "%s", lv_last_error());
            float *got = ts_read(ctx, &to);
            char what[64];
            snprintf(what, sizeof what, "%s %lldx%lld%s in %s out %s%s", name, (long long)R, (long long)C,
                     bcast ? " bcast" : "", lv_dtype_name(idt), lv_dtype_name(odt), in_place ? " in place" : "");
            ts_expect_within(what, got, want, tol, (size_t)n);
            free(got);
            free(a);
            free(b);
            free(sb);
            free(want);
            free(tol);
            lv_tensor_free(ctx, &ta);
            lv_tensor_free(ctx, &tb);
            if (!in_place) lv_tensor_free(ctx, &to);
        }
    }
    ts_ctx_done(ctx);
}

static void check_gated(const char *name, gated_op op, void (*ref)(float *, const float *, int64_t), int gelu,
                        uint64_t seed) {
    check_gated_to(LV_F32, LV_F32, name, op, ref, gelu, seed);
}

/* The Mix-FFN gate. */
Test(elementwise, mul_silu) { check_gated("mul_silu", lv_op_mul_silu, ref_silu, 0, 900); }

/* The Mix-FFN gate on 16-bit activations (the DiT at precision f16 / bf16): 16-bit out,
 * 16-bit inputs, and both in place */
Test(elementwise, mul_silu_half) {
    static const lv_dtype half[] = {LV_F16, LV_BF16};
    for (int i = 0; i < 2; i++) {
        check_gated_to(LV_F32, half[i], "mul_silu", lv_op_mul_silu, ref_silu, 0, 950 + 10 * (uint64_t)i);
        check_gated_to(half[i], LV_F32, "mul_silu", lv_op_mul_silu, ref_silu, 0, 960 + 10 * (uint64_t)i);
        check_gated_to(half[i], half[i], "mul_silu", lv_op_mul_silu, ref_silu, 0, 980 + 10 * (uint64_t)i);
    }
}

/* Gemma's MLP gate. */
Test(elementwise, mul_gelu_tanh) { check_gated("mul_gelu_tanh", lv_op_mul_gelu_tanh, ref_gelu_tanh, 1, 1900); }

/* out aliasing an input: every op in place. */
Test(elementwise, in_place) {
    lv_ctx *ctx = ts_ctx();
    int64_t shape[2] = {33, 257}, n = 33 * 257, C = 257, R = 33, g3[2] = {3, 257};
    float *a = ts_rand_alloc((size_t)n, 600, -2, 2), *b = ts_rand_alloc((size_t)n, 601, -2, 2);
    float *s3 = ts_rand_alloc(3 * 257, 602, -1, 1);
    float *want = malloc((size_t)n * 4), *tmp = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    lv_tensor ta = ts_tensor(ctx, LV_F32, 2, shape, a), tb = ts_tensor(ctx, LV_F32, 2, shape, b);
    lv_tensor t3 = ts_tensor(ctx, LV_F32, 2, g3, s3);

    /* a += b; then b = a * b (out aliasing the second operand); then a = relu(a) */
    cr_assert_eq(lv_op_add(ctx, &ta, &ta, &tb), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_mul(ctx, &tb, &ta, &tb), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_relu(ctx, &ta, &ta), LV_OK, "%s", lv_last_error());
    ref_add(tmp, a, b, R, C, R);
    ref_mul(want, tmp, b, R, C, R);
    float *got = ts_read(ctx, &tb);
    expect_equal("b = (a + b) * b in place", got, want, (size_t)n);
    free(got);
    ref_relu(want, tmp, n);
    got = ts_read(ctx, &ta);
    expect_equal("a = relu(a + b) in place", got, want, (size_t)n);
    free(got);
    memcpy(a, want, (size_t)n * 4); /* a's device contents now */
    ref_mul(b, tmp, b, R, C, R);    /* b's device contents now */

    /* a = modulate(a, shift = b, scale = per-3-groups), in place */
    cr_assert_eq(lv_op_modulate(ctx, &ta, &ta, &tb, &t3), LV_OK, "%s", lv_last_error());
    ref_modulate(want, a, b, R, s3, 3, R, C);
    for (int64_t i = 0; i < n; i++)
        tol[i] = 4 * U * (fabs(a[i] * (1 + (double)s3[(i / C) / 11 * C + i % C])) + fabs((double)b[i]));
    got = ts_read(ctx, &ta);
    ts_expect_within("modulate in place", got, want, tol, (size_t)n);
    memcpy(a, got, (size_t)n * 4);
    free(got);

    /* b = b + gate * a with out = the first operand; then silu, gelu in place */
    cr_assert_eq(lv_op_add_gated(ctx, &tb, &tb, &ta, &t3), LV_OK, "%s", lv_last_error());
    ref_add_gated(want, b, a, R, s3, 3, R, C);
    for (int64_t i = 0; i < n; i++)
        tol[i] = 3 * U * (fabs((double)b[i]) + fabs((double)s3[(i / C) / 11 * C + i % C] * a[i]));
    got = ts_read(ctx, &tb);
    ts_expect_within("add_gated in place", got, want, tol, (size_t)n);
    free(got);
    cr_assert_eq(lv_op_gelu_tanh(ctx, &ta, &ta), LV_OK, "%s", lv_last_error());
    ref_gelu_tanh(want, a, n);
    for (int64_t i = 0; i < n; i++) tol[i] = activation_tol(1, a[i], want[i]);
    got = ts_read(ctx, &ta);
    ts_expect_within("gelu_tanh in place", got, want, tol, (size_t)n);
    free(got);

    free(a);
    free(b);
    free(s3);
    free(want);
    free(tmp);
    free(tol);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &t3);
    ts_ctx_done(ctx);
}

/* A 1 KiB binding limit: [50, 37] rows of 148 bytes go 6 rows per dispatch, so dispatches
 * start in the middle of a broadcast group (10 rows per group for G = 5). The tensors are
 * views at element offset 3 (scalar path) or, with rows of 36, offset 4 (vec4 path). */
static void split_case(lv_ctx *ctx, int64_t C, int64_t off, uint64_t seed) {
    const int64_t R = 50, n = R * C;
    int64_t big = n + off, shape[2] = {R, C};
    float *a = ts_rand_alloc((size_t)big, seed, -2, 2), *b = ts_rand_alloc((size_t)big, seed + 1, -2, 2);
    lv_tensor ba = ts_tensor(ctx, LV_F32, 1, &big, a), bb = ts_tensor(ctx, LV_F32, 1, &big, b);
    lv_tensor bo = ts_empty(ctx, 1, &big);
    lv_tensor va = lv_tensor_view(&ba, off, 2, shape), vo = lv_tensor_view(&bo, off, 2, shape);
    float *want = malloc((size_t)n * 4);
    double *tol = malloc((size_t)n * 8);
    const int64_t groups[] = {R, 5, 1};
    char what[64];
    for (int g = 0; g < 3; g++) {
        int64_t G = groups[g], gshape[2] = {G, C};
        lv_tensor vb = lv_tensor_view(&bb, off, 2, gshape);
        cr_assert_eq(lv_op_add(ctx, &vo, &va, &vb), LV_OK, "%s", lv_last_error());
        float *got = ts_read(ctx, &vo);
        ref_add(want, a + off, b + off, R, C, G);
        snprintf(what, sizeof what, "add split, C=%lld G=%lld", (long long)C, (long long)G);
        expect_equal(what, got, want, (size_t)n);
        free(got);

        cr_assert_eq(lv_op_modulate(ctx, &vo, &va, &vb, &vb), LV_OK, "%s", lv_last_error());
        got = ts_read(ctx, &vo);
        ref_modulate(want, a + off, b + off, G, b + off, G, R, C);
        for (int64_t i = 0; i < n; i++) {
            double bv = b[off + (i / C) / (R / G) * C + i % C];
            tol[i] = 4 * U * (fabs(a[off + i] * (1 + bv)) + fabs(bv));
        }
        snprintf(what, sizeof what, "modulate split, C=%lld G=%lld", (long long)C, (long long)G);
        ts_expect_within(what, got, want, tol, (size_t)n);
        free(got);
    }
    cr_assert_eq(lv_op_silu(ctx, &vo, &va), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &vo);
    ref_silu(want, a + off, n);
    for (int64_t i = 0; i < n; i++) tol[i] = activation_tol(0, a[off + i], want[i]);
    snprintf(what, sizeof what, "silu split, C=%lld", (long long)C);
    ts_expect_within(what, got, want, tol, (size_t)n);
    free(got);
    free(a);
    free(b);
    free(want);
    free(tol);
    lv_tensor_free(ctx, &ba);
    lv_tensor_free(ctx, &bb);
    lv_tensor_free(ctx, &bo);
}

Test(elementwise, split_over_small_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    split_case(ctx, 37, 3, 700);
    split_case(ctx, 36, 4, 710);

    /* one row wider than the limit cannot be split: a clean error naming the op */
    int64_t wide[2] = {2, 300};
    lv_tensor w1 = ts_empty(ctx, 2, wide), w2 = ts_empty(ctx, 2, wide);
    cr_assert_eq(lv_op_add(ctx, &w1, &w1, &w2), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "lv_op_add") && strstr(lv_last_error(), "[2, 300]"), "%s",
              lv_last_error());
    lv_tensor_free(ctx, &w1);
    lv_tensor_free(ctx, &w2);
    ts_ctx_done(ctx);
}

Test(elementwise, bad_shapes_are_clear_errors) {
    lv_ctx *ctx = ts_ctx();
    int64_t s65[2] = {6, 5}, s45[2] = {4, 5}, s56[2] = {5, 6}, s6[1] = {6}, s30[1] = {30};
    lv_tensor a = ts_empty(ctx, 2, s65), b = ts_empty(ctx, 2, s45), c = ts_empty(ctx, 2, s56);
    lv_tensor v6 = ts_empty(ctx, 1, s6), flat = ts_empty(ctx, 1, s30);
    lv_tensor h, i32;
    cr_assert_eq(lv_tensor_create(ctx, LV_F16, 2, s65, &h), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 2, s65, &i32), LV_OK);

    /* G = 4 does not divide 6 rows */
    cr_assert_eq(lv_op_add(ctx, &a, &a, &b), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_add") && strstr(lv_last_error(), "[4, 5]") &&
              strstr(lv_last_error(), "[6, 5]"), "%s", lv_last_error());
    /* same element count, other last dimension */
    cr_assert_eq(lv_op_mul(ctx, &a, &a, &c), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_mul") && strstr(lv_last_error(), "[5, 6]"), "%s", lv_last_error());
    /* out of another shape */
    cr_assert_eq(lv_op_silu(ctx, &c, &a), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_silu") && strstr(lv_last_error(), "same shape"), "%s",
              lv_last_error());
    cr_assert_eq(lv_op_relu(ctx, &flat, &a), LV_ERR_INVALID);
    cr_assert_eq(lv_op_modulate(ctx, &a, &a, &v6, &b), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_op_modulate") && strstr(lv_last_error(), "shift"), "%s",
              lv_last_error());
    cr_assert_eq(lv_op_add_gated(ctx, &a, &a, &a, &b), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "gate"), "%s", lv_last_error());
    /* dtype: f32 or a 16-bit activation; the residual ops (modulate, gated add) f32 only */
    cr_assert_eq(lv_op_scale_add(ctx, &a, &a, 1.0f, &i32, 1.0f), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "f32"), "%s", lv_last_error());
    cr_assert_eq(lv_op_add_gated(ctx, &a, &a, &h, &v6), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "y") && strstr(lv_last_error(), "f16"), "%s", lv_last_error());
    cr_assert_eq(lv_op_add(ctx, &a, &a, NULL), LV_ERR_INVALID);
    /* out overlapping a broadcast operand, or an input shifted by one row */
    int64_t s15[2] = {1, 5};
    lv_tensor row0 = lv_tensor_view(&a, 0, 2, s15);
    cr_assert_eq(lv_op_add(ctx, &a, &a, &row0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());
    int64_t s55[2] = {5, 5};
    lv_tensor top = lv_tensor_view(&a, 0, 2, s55), bottom = lv_tensor_view(&a, 5, 2, s55);
    cr_assert_eq(lv_op_relu(ctx, &top, &bottom), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "overlaps"), "%s", lv_last_error());

    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &b);
    lv_tensor_free(ctx, &c);
    lv_tensor_free(ctx, &v6);
    lv_tensor_free(ctx, &flat);
    lv_tensor_free(ctx, &h);
    lv_tensor_free(ctx, &i32);
    ts_ctx_done(ctx);
}

/* The shaders divide by a per-dispatch constant with a multiply-high and a shift
 * (shaders/fastdiv.glsl); the same arithmetic here must equal integer division for every
 * dividend below 2^30 (the ops keep their indices there). Divisors: small ones densely,
 * the model's sizes, and extremes; dividends: a dense start, the multiples of d and their
 * neighbours near 2^30, and a sweep. */
static uint32_t fastdiv(uint32_t n, lv_fastdiv f) {
    if (f.magic == 0) return n;
    return (uint32_t)(((uint64_t)n * f.magic) >> 32) >> f.shift;
}

Test(elementwise, fastdiv_magic_is_exact) {
    const uint32_t top = 1u << 30;
    const uint32_t special[] = {56, 112, 2240, 6720, 13440, 15600, 32760, 65535, 65537,
                                1000003, (1u << 29) + 1, top - 1, top, 0xffffffffu};
    for (uint32_t k = 0; k < 3000 + sizeof special / sizeof special[0]; k++) {
        uint32_t d = k < 3000 ? k + 1 : special[k - 3000];
        lv_fastdiv f = lv_fastdiv_make(d);
        for (uint32_t n = 0; n < 4096; n++) cr_assert_eq(fastdiv(n, f), n / d, "%u / %u", n, d);
        for (uint32_t j = 0; j < 16; j++) {
            uint32_t m = (top - j) / d * d; /* a multiple of d near the top */
            cr_assert_eq(fastdiv(m, f), m / d, "%u / %u", m, d);
            if (m) cr_assert_eq(fastdiv(m - 1, f), (m - 1) / d, "%u / %u", m - 1, d);
            cr_assert_eq(fastdiv(top - j, f), (top - j) / d, "%u / %u", top - j, d);
        }
        for (uint32_t n = 0; n < top; n += 1048573u) cr_assert_eq(fastdiv(n, f), n / d, "%u / %u", n, d);
    }
}
