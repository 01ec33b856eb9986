/* Linear attention: the state and query kernels against the C reference, the block-wise
 * carried state against the one-shot masked double sum (engine/linear-attention.md),
 * the worked example exactly, the window and decay rules, read passes, the fixed size of
 * the state, and tensors larger than one binding.
 *
 * Error bound used throughout (check_close): every output is a sum whose terms pass
 * through at most m float roundings (the token sum of the state, the dim sum of the query,
 * the rotation, the feature map, the rule's combine and the division), so the float result
 * lies within m * 2^-24 * mag of the exact value, where mag is the same sum taken over
 * absolute values (the reference computes it; see ref_linear_attention.h). We take
 * m = 2 * tokens + dim + 16: tokens for the token sum, one more per block for the
 * carried combines (blocks <= tokens), dim for the query's dot products, and 16 for the
 * rotation, exp (elu1: Vulkan allows 3 + 2|x| ulp) and the normalising division. This is
 * a worst-case bound; the measured errors are printed with LONGVK_TEST_VERBOSE=1. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linattn_internal.h"
#include "ref_linear_attention.h"
#include "test_support.h"

static double gamma_for(int tokens, int dim) { return (2.0 * tokens + dim + 16) * ldexp(1.0, -24); }

/* |got - want| <= gamma * mag for every element (exact agreement where mag is 0). */
static void check_close(const float *got, const double *want, const double *mag, size_t n,
                        double gamma, const char *what) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        double tol = gamma * mag[i] + 1e-30;
        cr_assert(err <= tol, "%s: element %zu is %.9g, reference %.9g (error %.3g > bound %.3g)",
                  what, i, (double)got[i], want[i], err, tol);
        if (mag[i] > 0 && err / (mag[i] * ldexp(1.0, -24)) > worst) worst = err / (mag[i] * ldexp(1.0, -24));
    }
    if (getenv("LONGVK_TEST_VERBOSE"))
        fprintf(stderr, "%s: worst error %.2f x 2^-24 x mag (bound %.0f)\n", what, worst,
                gamma / ldexp(1.0, -24));
}

/* A rope table from random positions in [0, 1024). */
static float *rand_rope(int n, int dim, uint64_t seed) {
    float *pos = ts_rand_alloc((size_t)n, seed, 0.0f, 1024.0f);
    float *table = malloc((size_t)n * dim * sizeof *table);
    cr_assert_not_null(table);
    ref_rope_table_1d(table, pos, n, dim, 10000.0);
    free(pos);
    return table;
}

/* Random q or k for a feature map: identity with normalisation needs positive values so
 * that the denominator stays positive (linear-attention.md: "no positivity"). */
static float *rand_qk(size_t n, uint64_t seed, int phi, int normalize) {
    return ts_rand_alloc(n, seed, (phi == LV_PHI_IDENTITY && normalize) ? 0.0f : -1.0f, 1.0f);
}

/* ---- the kernels against the reference ------------------------------------------------ */

typedef struct shape_case {
    int heads, dim, tokens;
} shape_case;

static const shape_case kernel_shapes[] = {
    {1, 2, 1}, {2, 6, 37}, {3, 16, 129}, {2, 5, 20}, {1, 112, 24}, {2, 10, 9},
};

/* At SANA-Video's head size (112) the kernels' register tiles are large and each pipeline
 * variant takes about a second to build on lavapipe: test the variant SANA uses there
 * (relu with RoPE); the small shapes cover every feature map and RoPE on or off. */
static int sana_only(shape_case sc, int phi, int rope) {
    return sc.dim != 112 || (phi == LV_PHI_RELU && rope);
}

static void state_kernel_case(lv_ctx *ctx, shape_case sc, int phi, int use_rope, int accumulate,
                              uint64_t seed) {
    const int H = sc.heads, D = sc.dim, N = sc.tokens;
    if (use_rope && D % 2) return;
    const size_t row = (size_t)H * D;
    float *k = ts_rand_alloc(N * row, seed, -1, 1), *v = ts_rand_alloc(N * row, seed + 1, -1, 1);
    float *S0 = ts_rand_alloc(row * D, seed + 2, -1, 1), *z0 = ts_rand_alloc(row, seed + 3, 0, 1);
    float *rope = use_rope ? rand_rope(N, D, seed + 4) : NULL;
    int64_t sh_tok[2] = {N, (int64_t)row}, sh_S[3] = {H, D, D}, sh_z[2] = {H, D}, sh_r[2] = {N, D};
    lv_tensor tk = ts_tensor(ctx, LV_F32, 2, sh_tok, k), tv = ts_tensor(ctx, LV_F32, 2, sh_tok, v);
    lv_tensor tS = ts_tensor(ctx, LV_F32, 3, sh_S, S0), tz = ts_tensor(ctx, LV_F32, 2, sh_z, z0);
    lv_tensor tr = {0};
    if (rope) tr = ts_tensor(ctx, LV_F32, 2, sh_r, rope);
    cr_assert_eq(lv_op_linattn_state(ctx, &tS, &tz, &tk, &tv, rope ? &tr : NULL, (lv_feature_map)phi,
                                     accumulate), LV_OK, "%s", lv_last_error());
    float *gS = ts_read(ctx, &tS), *gz = ts_read(ctx, &tz);
    double *S = malloc(row * D * sizeof *S), *Sm = malloc(row * D * sizeof *Sm);
    double *z = malloc(row * sizeof *z), *zm = malloc(row * sizeof *zm);
    ref_linattn_state(S, z, Sm, zm, accumulate ? S0 : NULL, accumulate ? z0 : NULL, k, v, rope,
                      N, H, D, phi);
    char what[128];
    snprintf(what, sizeof what, "state H=%d D=%d N=%d %s%s%s", H, D, N,
             lv_feature_map_name((lv_feature_map)phi), rope ? " rope" : "", accumulate ? " acc" : "");
    check_close(gS, S, Sm, row * D, gamma_for(N, D), what);
    check_close(gz, z, zm, row, gamma_for(N, D), what);
    free(gS), free(gz), free(S), free(Sm), free(z), free(zm);
    free(k), free(v), free(S0), free(z0), free(rope);
    lv_tensor_free(ctx, &tk), lv_tensor_free(ctx, &tv), lv_tensor_free(ctx, &tS), lv_tensor_free(ctx, &tz);
    if (use_rope) lv_tensor_free(ctx, &tr);
}

Test(linear_attention, state_kernel_vs_reference) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 100;
    for (size_t s = 0; s < sizeof kernel_shapes / sizeof *kernel_shapes; s++)
        for (int phi = 0; phi < 3; phi++)
            for (int rope = 0; rope < 2; rope++)
                if (sana_only(kernel_shapes[s], phi, rope))
                    state_kernel_case(ctx, kernel_shapes[s], phi, rope, (int)((s + phi + rope) % 2), seed += 10);
    ts_ctx_done(ctx);
}

static void query_kernel_case(lv_ctx *ctx, shape_case sc, int phi, int use_rope, int normalize,
                              uint64_t seed) {
    const int H = sc.heads, D = sc.dim, N = sc.tokens;
    if (use_rope && D % 2) return;
    const size_t row = (size_t)H * D;
    const float eps = 1e-6f;
    float *q = rand_qk(N * row, seed, phi, normalize);
    float *S = ts_rand_alloc(row * D, seed + 1, -1, 1), *z = ts_rand_alloc(row, seed + 2, 0.1f, 1);
    float *rope = use_rope ? rand_rope(N, D, seed + 3) : NULL;
    int64_t sh_tok[2] = {N, (int64_t)row}, sh_S[3] = {H, D, D}, sh_z[2] = {H, D}, sh_r[2] = {N, D};
    lv_tensor tq = ts_tensor(ctx, LV_F32, 2, sh_tok, q), to = ts_empty(ctx, 2, sh_tok);
    lv_tensor tS = ts_tensor(ctx, LV_F32, 3, sh_S, S), tz = ts_tensor(ctx, LV_F32, 2, sh_z, z);
    lv_tensor tr = {0};
    if (rope) tr = ts_tensor(ctx, LV_F32, 2, sh_r, rope);
    cr_assert_eq(lv_op_linattn_query(ctx, &to, &tq, &tS, normalize ? &tz : NULL, rope ? &tr : NULL,
                                     (lv_feature_map)phi, normalize, eps), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &to);
    double *want = malloc(N * row * sizeof *want), *mag = malloc(N * row * sizeof *mag);
    ref_linattn_query(want, mag, q, S, z, rope, N, H, D, phi, normalize, eps);
    char what[128];
    snprintf(what, sizeof what, "query H=%d D=%d N=%d %s%s%s", H, D, N,
             lv_feature_map_name((lv_feature_map)phi), rope ? " rope" : "", normalize ? " norm" : "");
    check_close(got, want, mag, N * row, gamma_for(N, D), what);
    free(got), free(want), free(mag), free(q), free(S), free(z), free(rope);
    lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &to), lv_tensor_free(ctx, &tS), lv_tensor_free(ctx, &tz);
    if (use_rope) lv_tensor_free(ctx, &tr);
}

Test(linear_attention, query_kernel_vs_reference) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 500;
    for (size_t s = 0; s < sizeof kernel_shapes / sizeof *kernel_shapes; s++)
        for (int phi = 0; phi < 3; phi++)
            for (int rope = 0; rope < 2; rope++)
                for (int norm = 0; norm < 2; norm++)
                    if (sana_only(kernel_shapes[s], phi, rope))
                        query_kernel_case(ctx, kernel_shapes[s], phi, rope, norm, seed += 10);
    ts_ctx_done(ctx);
}

/* ---- block-wise with a carried state ------------------------------------------------- */

typedef struct run_opts {
    int heads, dim, tokens, block;
    int phi, normalize;
    float eps;
    int rule, window;
    float decay;
} run_opts;

/* Block-wise through lv_linattn_state: blocks of o->block tokens (the last may be
 * shorter), each committed with a write pass after `read_passes` read passes on other
 * inputs. Returns the outputs [tokens, H*D]. */
static float *run_blocks(lv_ctx *ctx, const run_opts *o, const float *q, const float *k,
                         const float *v, const float *rope, int read_passes) {
    const int N = o->tokens, D = o->dim;
    const size_t row = (size_t)o->heads * D;
    int64_t sh_tok[2] = {N, (int64_t)row}, sh_r[2] = {N, D};
    lv_tensor tq = ts_tensor(ctx, LV_F32, 2, sh_tok, q), tk = ts_tensor(ctx, LV_F32, 2, sh_tok, k);
    lv_tensor tv = ts_tensor(ctx, LV_F32, 2, sh_tok, v), to = ts_empty(ctx, 2, sh_tok);
    /* what read passes see: other tokens altogether */
    float *noise = ts_rand_alloc(N * row, 4242, -1, 1);
    lv_tensor tn = ts_tensor(ctx, LV_F32, 2, sh_tok, noise), tscratch = ts_empty(ctx, 2, sh_tok);
    lv_tensor tr = {0};
    if (rope) tr = ts_tensor(ctx, LV_F32, 2, sh_r, rope);
    lv_linattn_config cfg = {.heads = o->heads, .head_dim = D, .phi = (lv_feature_map)o->phi,
                             .normalize = o->normalize, .eps = o->eps, .rule = (lv_state_rule)o->rule,
                             .window = o->window, .decay = o->decay};
    lv_linattn_state *st;
    cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &st), LV_OK, "%s", lv_last_error());
    for (int n0 = 0; n0 < N; n0 += o->block) {
        int n = N - n0 < o->block ? N - n0 : o->block;
        lv_tensor bq = lv_tensor_rows(&tq, n0, n), bk = lv_tensor_rows(&tk, n0, n);
        lv_tensor bv = lv_tensor_rows(&tv, n0, n), bo = lv_tensor_rows(&to, n0, n);
        lv_tensor bn = lv_tensor_rows(&tn, n0, n), bs = lv_tensor_rows(&tscratch, n0, n);
        lv_tensor br = rope ? lv_tensor_rows(&tr, n0, n) : tr;
        for (int r = 0; r < read_passes; r++)
            cr_assert_eq(lv_linattn_block_read(ctx, st, &bs, &bn, &bn, &bn, rope ? &br : NULL), LV_OK,
                         "%s", lv_last_error());
        cr_assert_eq(lv_linattn_block_write(ctx, st, &bo, &bq, &bk, &bv, rope ? &br : NULL), LV_OK,
                     "%s", lv_last_error());
    }
    cr_assert_eq(lv_linattn_state_blocks(st), (N + o->block - 1) / o->block);
    float *got = ts_read(ctx, &to);
    lv_linattn_state_destroy(ctx, st);
    lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &tk), lv_tensor_free(ctx, &tv), lv_tensor_free(ctx, &to);
    lv_tensor_free(ctx, &tn), lv_tensor_free(ctx, &tscratch);
    if (rope) lv_tensor_free(ctx, &tr);
    free(noise);
    return got;
}

static void blockwise_vs_masked(lv_ctx *ctx, const run_opts *o, int use_rope, int read_passes,
                                uint64_t seed) {
    const int N = o->tokens, D = o->dim;
    const size_t total = (size_t)N * o->heads * D;
    float *q = rand_qk(total, seed, o->phi, o->normalize), *k = rand_qk(total, seed + 1, o->phi, o->normalize);
    float *v = ts_rand_alloc(total, seed + 2, -1, 1);
    float *rope = use_rope ? rand_rope(N, D, seed + 3) : NULL;
    float *got = run_blocks(ctx, o, q, k, v, rope, read_passes);
    double *want = malloc(total * sizeof *want), *mag = malloc(total * sizeof *mag);
    ref_linattn_masked(want, mag, q, k, v, rope, N, o->heads, D, o->block, o->phi, o->normalize,
                       o->eps, o->rule, o->window, o->decay);
    char what[160];
    snprintf(what, sizeof what, "blocks of %d, N=%d H=%d D=%d %s%s%s rule %d (K=%d, lambda=%g)",
             o->block, N, o->heads, D, lv_feature_map_name((lv_feature_map)o->phi),
             o->normalize ? " norm" : "", rope ? " rope" : "", o->rule, o->window, (double)o->decay);
    check_close(got, want, mag, total, gamma_for(N, D), what);
    free(q), free(k), free(v), free(rope), free(got), free(want), free(mag);
}

/* Block sizes 1 (causal), 5 (odd, does not divide 23) and 23 (full), every feature map,
 * with and without normalisation and RoPE, all equal to the one-shot masked sum. */
Test(linear_attention, blockwise_equals_masked_sum) {
    lv_ctx *ctx = ts_ctx();
    const int blocks[3] = {1, 5, 23};
    uint64_t seed = 2000;
    for (int b = 0; b < 3; b++)
        for (int phi = 0; phi < 3; phi++)
            for (int norm = 0; norm < 2; norm++)
                for (int rope = 0; rope < 2; rope++) {
                    run_opts o = {.heads = 2, .dim = 8, .tokens = 23, .block = blocks[b], .phi = phi,
                                  .normalize = norm, .eps = 1e-6f, .rule = LV_RULE_ADDITIVE};
                    blockwise_vs_masked(ctx, &o, rope, 0, seed += 10);
                }
    ts_ctx_done(ctx);
}

/* The SANA-Video configuration (relu, normalised, RoPE) at its head size, a few blocks,
 * with diffusion read passes before every commit. */
Test(linear_attention, sana_head_size_with_read_passes) {
    lv_ctx *ctx = ts_ctx();
    run_opts o = {.heads = 2, .dim = 112, .tokens = 40, .block = 13, .phi = LV_PHI_RELU,
                  .normalize = 1, .eps = 1e-8f, .rule = LV_RULE_ADDITIVE};
    blockwise_vs_masked(ctx, &o, 1, 2, 77);
    ts_ctx_done(ctx);
}

Test(linear_attention, window_and_decay_rules_vs_reference) {
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 3000;
    const int windows[3] = {1, 2, 3};
    const float decays[2] = {0.9f, 0.5f};
    for (int cfg = 0; cfg < 2; cfg++) {
        /* relu normalised with RoPE (SANA), and identity unnormalised */
        int phi = cfg == 0 ? LV_PHI_RELU : LV_PHI_IDENTITY;
        for (int w = 0; w < 3; w++) {
            run_opts o = {.heads = 2, .dim = 6, .tokens = 29, .block = 4, .phi = phi, .normalize = cfg == 0,
                          .eps = 1e-6f, .rule = LV_RULE_WINDOW, .window = windows[w]};
            blockwise_vs_masked(ctx, &o, cfg == 0, 1, seed += 10);
        }
        for (int d = 0; d < 2; d++) {
            run_opts o = {.heads = 2, .dim = 6, .tokens = 29, .block = 4, .phi = phi, .normalize = cfg == 0,
                          .eps = 1e-6f, .rule = LV_RULE_DECAY, .decay = decays[d]};
            blockwise_vs_masked(ctx, &o, cfg == 0, 1, seed += 10);
        }
    }
    /* block-causal with window: causal mode (blocks of 1) */
    run_opts o = {.heads = 1, .dim = 4, .tokens = 17, .block = 1, .phi = LV_PHI_ELU1, .normalize = 1,
                  .eps = 1e-6f, .rule = LV_RULE_WINDOW, .window = 4};
    blockwise_vs_masked(ctx, &o, 1, 0, seed += 10);
    ts_ctx_done(ctx);
}

/* ---- the worked example of linear-attention.md, exactly --------------------------------- */

static const float wk[6] = {1, 0, 0, 2, 1, 1}, wv[6] = {1, 2, 3, 0, 0, 1}, wq[6] = {2, 0, 0, 1, 1, 1};

static void worked_example(int block, const float want[6]) {
    lv_ctx *ctx = ts_ctx();
    run_opts o = {.heads = 1, .dim = 2, .tokens = 3, .block = block, .phi = LV_PHI_IDENTITY,
                  .normalize = 0, .rule = LV_RULE_ADDITIVE};
    float *got = run_blocks(ctx, &o, wq, wk, wv, NULL, 0);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(got[i], want[i], "block size %d: o[%d][%d] = %g, the note says %g", block, i / 2,
                     i % 2, (double)got[i], (double)want[i]);
    /* the reference agrees with the note too */
    double ref[6];
    ref_linattn_masked(ref, NULL, wq, wk, wv, NULL, 3, 1, 2, block, 0, 0, 0, REF_RULE_ADDITIVE, 0, 1);
    for (int i = 0; i < 6; i++) cr_assert_eq(ref[i], (double)want[i]);
    free(got);
    ts_ctx_done(ctx);
}

Test(linear_attention, worked_example_causal) {
    const float want[6] = {2, 4, 6, 0, 7, 4};
    worked_example(1, want);
}

Test(linear_attention, worked_example_full) {
    const float want[6] = {2, 6, 6, 1, 7, 4};
    worked_example(3, want);
}

Test(linear_attention, worked_example_block_causal) {
    const float want[6] = {2, 4, 6, 0, 7, 4};
    worked_example(2, want);
}

Test(linear_attention, worked_example_states) {
    /* S_1, S_2, S_3 of the note, read from the carried state after each block */
    lv_ctx *ctx = ts_ctx();
    const float S_want[3][4] = {{1, 0, 2, 0}, {1, 6, 2, 0}, {1, 6, 3, 1}};
    int64_t sh[2] = {1, 2};
    lv_linattn_config cfg = {.heads = 1, .head_dim = 2, .phi = LV_PHI_IDENTITY, .rule = LV_RULE_ADDITIVE};
    lv_linattn_state *st;
    cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &st), LV_OK, "%s", lv_last_error());
    for (int t = 0; t < 3; t++) {
        lv_tensor k = ts_tensor(ctx, LV_F32, 2, sh, wk + 2 * t), v = ts_tensor(ctx, LV_F32, 2, sh, wv + 2 * t);
        cr_assert_eq(lv_linattn_block_write(ctx, st, NULL, NULL, &k, &v, NULL), LV_OK, "%s", lv_last_error());
        float S[4], z[2];
        cr_assert_eq(lv_linattn_state_read(ctx, st, S, z), LV_OK, "%s", lv_last_error());
        for (int i = 0; i < 4; i++) cr_assert_eq(S[i], S_want[t][i], "S_%d[%d] = %g", t + 1, i, (double)S[i]);
        lv_tensor_free(ctx, &k), lv_tensor_free(ctx, &v);
    }
    lv_linattn_state_destroy(ctx, st);
    ts_ctx_done(ctx);
}

/* ---- read passes, fixed size ---------------------------------------------------------- */

Test(linear_attention, read_pass_leaves_state_unchanged) {
    lv_ctx *ctx = ts_ctx();
    const int H = 2, D = 8, n = 7;
    const size_t row = (size_t)H * D;
    int64_t sh[2] = {n, (int64_t)row}, shr[2] = {n, D};
    float *rope = rand_rope(n, D, 5);
    lv_tensor tr = ts_tensor(ctx, LV_F32, 2, shr, rope);
    lv_tensor out = ts_empty(ctx, 2, sh), out2 = ts_empty(ctx, 2, sh);
    for (int rule = 0; rule < 3; rule++) {
        lv_linattn_config cfg = {.heads = H, .head_dim = D, .phi = LV_PHI_RELU, .normalize = true,
                                 .eps = 1e-6f, .rule = (lv_state_rule)rule, .window = 2, .decay = 0.8f};
        lv_linattn_state *st;
        cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &st), LV_OK, "%s", lv_last_error());
        float *S0 = malloc(row * D * 4), *z0 = malloc(row * 4), *S1 = malloc(row * D * 4), *z1 = malloc(row * 4);
        for (int b = 0; b < 4; b++) {
            float *x = ts_rand_alloc(n * row, 60 + b + 10 * rule, -1, 1);
            lv_tensor t = ts_tensor(ctx, LV_F32, 2, sh, x);
            cr_assert_eq(lv_linattn_block_write(ctx, st, &out, &t, &t, &t, &tr), LV_OK, "%s", lv_last_error());
            lv_tensor_free(ctx, &t);
            free(x);
        }
        cr_assert_eq(lv_linattn_state_read(ctx, st, S0, z0), LV_OK, "%s", lv_last_error());
        float *q = ts_rand_alloc(n * row, 70, -1, 1), *k = ts_rand_alloc(n * row, 71, -1, 1);
        float *v = ts_rand_alloc(n * row, 72, -1, 1);
        lv_tensor tq = ts_tensor(ctx, LV_F32, 2, sh, q), tk = ts_tensor(ctx, LV_F32, 2, sh, k);
        lv_tensor tv = ts_tensor(ctx, LV_F32, 2, sh, v);
        for (int pass = 0; pass < 3; pass++)
            cr_assert_eq(lv_linattn_block_read(ctx, st, &out, &tq, &tk, &tv, &tr), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_linattn_state_read(ctx, st, S1, z1), LV_OK, "%s", lv_last_error());
        cr_assert_eq(memcmp(S0, S1, row * D * 4), 0, "rule %d: a read pass changed S", rule);
        cr_assert_eq(memcmp(z0, z1, row * 4), 0, "rule %d: a read pass changed z", rule);
        cr_assert_eq(lv_linattn_state_blocks(st), 4);
        /* the write pass on the same block gives the read pass's output */
        cr_assert_eq(lv_linattn_block_write(ctx, st, &out2, &tq, &tk, &tv, &tr), LV_OK, "%s", lv_last_error());
        float *o1 = ts_read(ctx, &out), *o2 = ts_read(ctx, &out2);
        cr_assert_eq(memcmp(o1, o2, n * row * 4), 0, "rule %d: read and write passes differ", rule);
        cr_assert_eq(lv_linattn_state_blocks(st), 5);
        free(o1), free(o2), free(q), free(k), free(v), free(S0), free(z0), free(S1), free(z1);
        lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &tk), lv_tensor_free(ctx, &tv);
        lv_linattn_state_destroy(ctx, st);
    }
    lv_tensor_free(ctx, &tr), lv_tensor_free(ctx, &out), lv_tensor_free(ctx, &out2);
    free(rope);
    ts_ctx_done(ctx);
}

/* The state's device memory: the slots its layout names, the same after 1 and 300 blocks. */
static void state_size_case(void) {
    lv_ctx *ctx = ts_ctx();
    const int H = 3, D = 16, n = 5, blocks = 300;
    const size_t row = (size_t)H * D;
    int64_t sh[2] = {n, (int64_t)row};
    float *x = ts_rand_alloc(n * row, 8, -1, 1);
    lv_tensor t = ts_tensor(ctx, LV_F32, 2, sh, x), out = ts_empty(ctx, 2, sh);
    const uint64_t slot = (uint64_t)H * D * (D + 1) * 4;
    for (int rule = 0; rule < 3; rule++) {
        lv_linattn_config cfg = {.heads = H, .head_dim = D, .phi = LV_PHI_RELU, .normalize = true,
                                 .eps = 1e-6f, .rule = (lv_state_rule)rule, .window = 4, .decay = 0.9f};
        uint64_t before = lv_ctx_memory_in_use(ctx);
        lv_linattn_state *st;
        cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &st), LV_OK, "%s", lv_last_error());
        uint64_t bytes = lv_linattn_state_bytes(st), in_use = lv_ctx_memory_in_use(ctx);
        /* own + eff + (carried, or a ring of K slots) + the partial sums of a state pass split
         * over token ranges (GPUs: lv_linattn_tiles_choose), each rounded to the allocator's
         * alignment */
        lv_linattn_tiles tiles;
        lv_linattn_tiles_choose(ctx, &tiles);
        uint64_t slots = (rule == LV_RULE_WINDOW ? 2 + 4 : 3) + (tiles.splits > 1 ? tiles.splits : 0);
        cr_assert_geq(bytes, slots * slot);
        cr_assert_leq(bytes, slots * (slot + 256));
        cr_assert_eq(in_use - before, bytes, "the state holds %llu bytes but reports %llu",
                     (unsigned long long)(in_use - before), (unsigned long long)bytes);
        for (int b = 0; b < blocks; b++) {
            if (b % 3 == 0) cr_assert_eq(lv_linattn_block_read(ctx, st, &out, &t, &t, &t, NULL), LV_OK);
            cr_assert_eq(lv_linattn_block_write(ctx, st, &out, &t, &t, &t, NULL), LV_OK, "%s", lv_last_error());
            if (b == 0 || b == 9 || b == 99 || b == blocks - 1) {
                cr_assert_eq(lv_linattn_state_bytes(st), bytes);
                cr_assert_eq(lv_ctx_memory_in_use(ctx), in_use, "block %d: device memory grew", b);
            }
        }
        cr_assert_eq(lv_flush(ctx), LV_OK);
        cr_assert_eq(lv_ctx_memory_in_use(ctx), in_use);
        cr_assert_eq(lv_linattn_state_blocks(st), blocks);
        lv_linattn_state_destroy(ctx, st);
        cr_assert_eq(lv_ctx_memory_in_use(ctx), before);
    }
    lv_tensor_free(ctx, &t), lv_tensor_free(ctx, &out);
    free(x);
    ts_ctx_done(ctx);
}

Test(linear_attention, state_size_independent_of_blocks) { state_size_case(); }

/* GPUs split the state pass over token ranges, with a partial-sum slot per split (lavapipe does
 * not split): the same check with the GPUs' setting, which an H100 found missing. */
Test(linear_attention, state_size_with_gpu_token_splits) {
    setenv("LONGVK_LINATTN_SPLITS", "4", 1);
    state_size_case();
    unsetenv("LONGVK_LINATTN_SPLITS");
}

/* ---- tensors above the binding limit --------------------------------------------------- */

Test(linear_attention, tensors_above_binding_limit_are_split) {
    /* 4 KiB bindings: q, k, v of 200 tokens x 16 floats (12.8 KiB) need 4 runs of tokens;
     * the window ring of 8 slots (4.6 KiB) is summed in two groups */
    lv_ctx *ctx = ts_ctx_with_binding(4096);
    run_opts o = {.heads = 2, .dim = 8, .tokens = 200, .block = 200, .phi = LV_PHI_RELU,
                  .normalize = 1, .eps = 1e-6f, .rule = LV_RULE_ADDITIVE};
    blockwise_vs_masked(ctx, &o, 1, 0, 11);
    run_opts w = {.heads = 2, .dim = 8, .tokens = 60, .block = 3, .phi = LV_PHI_ELU1,
                  .normalize = 1, .eps = 1e-6f, .rule = LV_RULE_WINDOW, .window = 8};
    blockwise_vs_masked(ctx, &w, 1, 0, 12);
    state_kernel_case(ctx, (shape_case){2, 8, 300}, LV_PHI_IDENTITY, 1, 1, 13);
    query_kernel_case(ctx, (shape_case){2, 8, 300}, LV_PHI_RELU, 1, 1, 14);
    ts_ctx_done(ctx);
}

Test(linear_attention, too_large_for_one_binding_is_a_clean_error) {
    lv_ctx *ctx = ts_ctx_with_binding(4096);
    /* a state of 16 x 64 x 65 floats cannot be bound at all */
    lv_linattn_config cfg = {.heads = 16, .head_dim = 64, .phi = LV_PHI_RELU, .rule = LV_RULE_ADDITIVE};
    lv_linattn_state *st = NULL;
    cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &st), LV_ERR_LIMIT);
    cr_assert_null(st);
    cr_assert(strstr(lv_last_error(), "maxStorageBufferRange"), "message: %s", lv_last_error());
    /* the same through the op: S [16, 64, 64] is 256 KiB */
    int64_t shS[3] = {16, 64, 64}, shz[2] = {16, 64}, shk[2] = {2, 1024};
    lv_tensor S = ts_empty(ctx, 3, shS), z = ts_empty(ctx, 2, shz), k = ts_empty(ctx, 2, shk);
    lv_clear_error();
    cr_assert_eq(lv_op_linattn_state(ctx, &S, &z, &k, &k, NULL, LV_PHI_RELU, false), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "maxStorageBufferRange"), "message: %s", lv_last_error());
    cr_assert_eq(lv_op_linattn_query(ctx, &k, &k, &S, &z, NULL, LV_PHI_RELU, true, 1e-6f), LV_ERR_LIMIT);
    lv_tensor_free(ctx, &S), lv_tensor_free(ctx, &z), lv_tensor_free(ctx, &k);
    ts_ctx_done(ctx);
}

Test(linear_attention, bad_shapes_are_errors) {
    lv_ctx *ctx = ts_ctx();
    int64_t shS[3] = {2, 4, 4}, shz[2] = {2, 4}, shk[2] = {5, 8}, shv[2] = {6, 8}, shr[2] = {5, 3};
    lv_tensor S = ts_empty(ctx, 3, shS), z = ts_empty(ctx, 2, shz), k = ts_empty(ctx, 2, shk);
    lv_tensor v = ts_empty(ctx, 2, shv), r = ts_empty(ctx, 2, shr);
    cr_assert_eq(lv_op_linattn_state(ctx, &S, &z, &k, &v, NULL, LV_PHI_RELU, false), LV_ERR_INVALID);
    cr_assert_eq(lv_op_linattn_state(ctx, &S, &z, &k, &k, &r, LV_PHI_RELU, false), LV_ERR_INVALID);
    cr_assert_eq(lv_op_linattn_query(ctx, &k, &v, &S, &z, NULL, LV_PHI_RELU, true, 1e-6f), LV_ERR_INVALID);
    cr_assert_eq(lv_op_linattn_state(ctx, &S, &z, &k, &k, NULL, (lv_feature_map)7, false), LV_ERR_INVALID);
    lv_linattn_config bad = {.heads = 2, .head_dim = 4, .rule = LV_RULE_WINDOW, .window = 0};
    lv_linattn_state *st = NULL;
    cr_assert_eq(lv_linattn_state_create(ctx, &bad, &st), LV_ERR_INVALID);
    cr_assert_eq(lv_feature_map_parse("relu"), LV_PHI_RELU);
    cr_assert_eq(lv_feature_map_parse("elu1"), LV_PHI_ELU1);
    cr_assert_eq(lv_feature_map_parse("identity"), LV_PHI_IDENTITY);
    cr_assert_eq(lv_feature_map_parse("softmax"), -1);
    lv_tensor_free(ctx, &S), lv_tensor_free(ctx, &z), lv_tensor_free(ctx, &k), lv_tensor_free(ctx, &v);
    lv_tensor_free(ctx, &r);
    ts_ctx_done(ctx);
}

/* The tile shapes and token splitting chosen for GPUs, exercised here on lavapipe. */
Test(linear_attention, gpu_tiles_and_token_splits_vs_reference) {
    setenv("LONGVK_LINATTN_TILES", "16,1,1,16", 1);
    setenv("LONGVK_LINATTN_SPLITS", "3", 1);
    setenv("LONGVK_LINATTN_BCAST", "0", 1);
    lv_ctx *ctx = ts_ctx();
    uint64_t seed = 900;
    for (size_t s = 0; s < sizeof kernel_shapes / sizeof *kernel_shapes; s++) {
        state_kernel_case(ctx, kernel_shapes[s], LV_PHI_RELU, 1, 0, seed += 10);
        query_kernel_case(ctx, kernel_shapes[s], LV_PHI_ELU1, 1, 1, seed += 10);
    }
    /* the carried state sums 3 token-split partial contributions per block */
    run_opts o = {.heads = 2, .dim = 8, .tokens = 23, .block = 5, .phi = LV_PHI_RELU, .normalize = 1,
                  .eps = 1e-6f, .rule = LV_RULE_ADDITIVE};
    blockwise_vs_masked(ctx, &o, 1, 1, seed += 10);
    o.rule = LV_RULE_WINDOW;
    o.window = 2;
    blockwise_vs_masked(ctx, &o, 1, 1, seed += 10);
    ts_ctx_done(ctx);
    /* and with runs of tokens over a 4 KiB binding limit */
    ctx = ts_ctx_with_binding(4096);
    run_opts big = {.heads = 2, .dim = 8, .tokens = 150, .block = 150, .phi = LV_PHI_ELU1, .normalize = 1,
                    .eps = 1e-6f, .rule = LV_RULE_ADDITIVE};
    blockwise_vs_masked(ctx, &big, 1, 0, seed += 10);
    ts_ctx_done(ctx);
    unsetenv("LONGVK_LINATTN_TILES");
    unsetenv("LONGVK_LINATTN_SPLITS");
    unsetenv("LONGVK_LINATTN_BCAST");
}
