/* lv_op_matmul with block-quantized weights (q8_0, q4_k, shaders/quant.glsl) against the C
 * reference (tests/reference/ref_matmul.c) on the same weights dequantised on the host.
 *
 * Error bound. Random w is quantized on the host (lv_quantize_row_q8_0 / _q4_k), uploaded as
 * its raw blocks and dequantised inside the kernel; the reference gets lv_dequantize_row's
 * f32 values. Both compute each weight with the same f32 operations, all exact: q8_0's d * q
 * is an f16 (11 significant bits) times an int8 (8), 19 bits; q4_k's d * sc (11 + 6 bits),
 * times q (4 more, 21 bits) and dmin * m (17 bits) are exact, and the one subtraction rounds
 * the same way on both sides (a fused multiply-add of an exact product rounds as the plain
 * one). So the kernel multiplies exactly the reference's weights, and test_matmul.c's bound
 * for fp32 accumulation holds unchanged: |got - want| <= (K + 2) u sum_k |a w| + |bias|,
 * u = 2^-24, asserted with a 1% margin, and NMSE <= 1e-10 (an indexing mistake gives ~1). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_matmul_internal.h"
#include "ref_matmul.h"
#include "test_support.h"

/* Random rows quantized to `dt` on the host: the blocks in *blocks, their f32 values returned. */
static float *quantized_weights(lv_dtype dt, int64_t rows, int64_t K, uint64_t seed, void **blocks,
                                uint64_t *nbytes) {
    size_t n = (size_t)(rows * K);
    float *w = ts_rand_alloc(n, seed, -1, 1);
    *nbytes = lv_dtype_bytes(dt, (int64_t)n);
    cr_assert_gt(*nbytes, 0);
    *blocks = malloc(*nbytes);
    cr_assert_not_null(*blocks);
    lv_status s = dt == LV_Q8_0 ? lv_quantize_row_q8_0(w, (int64_t)n, *blocks)
                                : lv_quantize_row_q4_k(w, (int64_t)n, *blocks);
    cr_assert_eq(s, LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dequantize_row(dt, *blocks, (int64_t)n, w), LV_OK, "%s", lv_last_error());
    return w;
}

typedef struct q_case {
    int64_t batch, M, N, K;
    int bias, batched_w;
    int64_t skip_rows; /* w's view starts this many rows into its tensor (a block start off the word) */
} q_case;

/* The tensor-core kernel rounds a and the dequantised w to fp16 before its fp32 products:
 * per output 2^-9 + 2^-20 relative of sum |a w| for the two roundings (as test_matmul.c's
 * coopmat_bound) on top of the fp32 bound. */
static double bound_factor(lv_matmul_variant variant, int64_t K) {
    double fp32 = (double)(K + 2) * ldexp(1.0, -24);
    return 1.01 * (variant == LV_MATMUL_COOPMAT ? fp32 + ldexp(1.0, -9) + ldexp(1.0, -20) : fp32);
}

static void run_case(lv_ctx *ctx, lv_matmul_variant variant, lv_dtype dt, const q_case *c, uint64_t seed) {
    char what[200];
    snprintf(what, sizeof what, "%s %s batch %lld M %lld N %lld K %lld%s%s skip %lld",
             variant == LV_MATMUL_TILED ? "tiled" : variant == LV_MATMUL_COOPMAT ? "coopmat" : "register",
             lv_dtype_name(dt), (long long)c->batch,
             (long long)c->M, (long long)c->N, (long long)c->K, c->bias ? " bias" : "",
             c->batched_w ? " batched w" : "", (long long)c->skip_rows);
    int64_t wb = c->batched_w ? c->batch : 1, wrows = wb * c->N + c->skip_rows;
    size_t na = (size_t)(c->batch * c->M * c->K), no = (size_t)(c->batch * c->M * c->N);
    float *a = ts_rand_alloc(na, seed, -1, 1);
    void *blocks;
    uint64_t nbytes;
    float *w = quantized_weights(dt, wrows, c->K, seed + 1, &blocks, &nbytes);
    float *bias = c->bias ? ts_rand_alloc((size_t)c->N, seed + 2, -1, 1) : NULL;

    lv_tensor ta = ts_tensor(ctx, LV_F32, 3, (int64_t[]){c->batch, c->M, c->K}, a);
    lv_tensor tw_all;
    cr_assert_eq(lv_tensor_create(ctx, dt, 2, (int64_t[]){wrows, c->K}, &tw_all), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tensor_nbytes(&tw_all), nbytes);
    cr_assert_eq(lv_tensor_write(ctx, &tw_all, blocks, nbytes), LV_OK, "%s", lv_last_error());
    lv_tensor tw = c->batched_w ? lv_tensor_view(&tw_all, c->skip_rows * c->K, 3, (int64_t[]){c->batch, c->N, c->K})
                                : lv_tensor_view(&tw_all, c->skip_rows * c->K, 2, (int64_t[]){c->N, c->K});
    lv_tensor tb = {0};
    if (bias) tb = ts_tensor(ctx, LV_F32, 1, (int64_t[]){c->N}, bias);
    lv_tensor to = ts_empty(ctx, 3, (int64_t[]){c->batch, c->M, c->N});
    float *nan = malloc(no * sizeof *nan); /* an output the kernel skips cannot pass */
    cr_assert_not_null(nan);
    for (size_t i = 0; i < no; i++) nan[i] = NAN;
    cr_assert_eq(lv_tensor_write(ctx, &to, nan, no * sizeof *nan), LV_OK);
    cr_assert_eq(lv_op_matmul_variant(ctx, &to, &ta, &tw, bias ? &tb : NULL, variant), LV_OK, "%s: %s", what,
                 lv_last_error());
    float *got = ts_read(ctx, &to);

    float *want = malloc(no * sizeof *want);
    double *mag = malloc(no * sizeof *mag);
    cr_assert(want && mag);
    ref_matmul(want, mag, a, w + c->skip_rows * c->K, bias, c->batch, c->M, c->N, c->K, c->batched_w);
    ts_check_bound(what, got, want, mag, no, bound_factor(variant, c->K));
    double nmse = ts_nmse(got, want, no), nmse_max = variant == LV_MATMUL_COOPMAT ? 1e-5 : 1e-10;
    cr_assert(nmse <= nmse_max, "%s: NMSE %.3g > %.0e", what, nmse, nmse_max);

    free(got), free(want), free(mag), free(nan), free(a), free(w), free(bias), free(blocks);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tw_all);
    lv_tensor_free(ctx, &tb);
    lv_tensor_free(ctx, &to);
}

static const lv_matmul_variant variants[] = {LV_MATMUL_REGISTER, LV_MATMUL_TILED};

/* Shapes with K one block and several, M and N off every tile (general path and column
 * remainders), the register kernel's fast path (N % 4 == 0), a batched w, and w views that
 * start one row in (q8_0: 34 bytes per block, so a block start two bytes into a word). */
static void shapes_for(lv_dtype dt) {
    const int64_t b = lv_dtype_block(dt, NULL);
    const q_case cases[] = {
        {1, 1, 1, b, 0, 0, 0},         {1, 7, 13, b, 1, 0, 0},     {1, 33, 65, 3 * b, 1, 0, 0},
        {1, 100, 3, 2 * b, 0, 0, 1},   {1, 64, 64, 2 * b, 1, 0, 0}, {1, 40, 200, 3 * b, 1, 0, 1},
        {1, 5, 68, b, 0, 0, 3},        {3, 9, 36, 2 * b, 1, 1, 0},  {2, 17, 24, b, 0, 0, 0},
    };
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 1000 + 100 * (uint64_t)dt;
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, variants[v], dt, &cases[i], seed++);
    ts_ctx_done(ctx);
}

Test(matmul_quant, shapes_q8_0) { shapes_for(LV_Q8_0); }
Test(matmul_quant, shapes_q4_k) { shapes_for(LV_Q4_K); }

/* The tensor-core kernel with quantized w, asked for explicitly (the automatic choice keeps
 * the fp32 kernel for them): only where a context at f16 precision enables cooperative
 * matrices (not lavapipe on Debian 12: skipped, saying so), without the validation layer
 * where the layer predates the extension. */
Test(matmul_quant, coopmat_q8_0_and_q4_k) {
    lv_ctx_options o;
    lv_ctx_options_default(&o);
    o.precision = LV_PRECISION_F16;
    lv_ctx *ctx = ts_ctx_with(o);
    if (lv_ctx_device(ctx)->coopmat == LV_COOPMAT_OLD_LAYER) {
        ts_ctx_done(ctx);
        o.validation = 0;
        cr_assert_eq(lv_ctx_create(&o, &ctx), LV_OK, "%s", lv_last_error());
    }
    if (!lv_ctx_coopmat(ctx)) {
        int state = (int)lv_ctx_device(ctx)->coopmat;
        lv_ctx_destroy(ctx);
        cr_skip_test("NOT RUN: no tensor cores on this device or build (coopmat state %d)", state);
    }
    for (int d = 0; d < 2; d++) {
        lv_dtype dt = d ? LV_Q4_K : LV_Q8_0;
        const int64_t b = lv_dtype_block(dt, NULL);
        const q_case cases[] = {{1, 7, 13, b, 1, 0, 0}, {1, 70, 130, 3 * b, 1, 0, 1}, {2, 33, 64, 2 * b, 0, 1, 0}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(ctx, LV_MATMUL_COOPMAT, dt, &cases[i], 50 + 10 * (uint64_t)d + i);
    }
    lv_ctx_destroy(ctx);
}

/* A binding limit of 4 KiB splits w into chunks of about 117 q8_0 rows of 34 bytes: chunk
 * starts off the word (and a at a few rows per chunk), both kernels. */
Test(matmul_quant, splits_over_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(4096);
    const q_case q8 = {1, 10, 300, 32, 1, 0, 0}, q4 = {1, 6, 40, 256, 1, 0, 0};
    for (size_t v = 0; v < 2; v++) {
        run_case(ctx, variants[v], LV_Q8_0, &q8, 7 + v);
        run_case(ctx, variants[v], LV_Q4_K, &q4, 9 + v);
    }
    ts_ctx_done(ctx);
}

/* K not whole blocks: no such quantized tensor, and a view that would make one is refused
 * by the matmul, each with a message naming the dtype and the block. */
Test(matmul_quant, k_not_whole_blocks_is_refused) {
    lv_ctx *ctx = ts_ctx();
    lv_tensor t;
    cr_assert_eq(lv_tensor_create(ctx, LV_Q8_0, 2, (int64_t[]){4, 48}, &t), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "q8_0") && strstr(lv_last_error(), "32"), "%s", lv_last_error());
    cr_assert_eq(lv_tensor_create(ctx, LV_Q4_K, 2, (int64_t[]){4, 128}, &t), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "q4_k") && strstr(lv_last_error(), "256"), "%s", lv_last_error());

    cr_assert_eq(lv_tensor_create(ctx, LV_Q8_0, 1, (int64_t[]){64}, &t), LV_OK, "%s", lv_last_error());
    lv_tensor w = lv_tensor_view(&t, 0, 2, (int64_t[]){4, 16});
    lv_tensor a = ts_empty(ctx, 2, (int64_t[]){2, 16}), out = ts_empty(ctx, 2, (int64_t[]){2, 4});
    cr_assert_eq(lv_op_matmul(ctx, &out, &a, &w, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "q8_0 w needs K a multiple of 32, not 16"), "%s", lv_last_error());
    lv_tensor_free(ctx, &t);
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &out);
    ts_ctx_done(ctx);
}
