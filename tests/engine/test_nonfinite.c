/* lv_op_count_nonfinite (shaders/count_nonfinite.comp) against the plain C reference
 * tests/reference/ref_check.c on random inputs with NaN (quiet, signalling, negative, any
 * payload) and infinities at chosen and random positions, next to the largest finite
 * values, subnormals and -0, which must not count. The counts are integers and the first
 * index an integer: the bound is exact equality. Odd sizes, views at unaligned offsets, a
 * small binding limit (the split path), and several tensors counted into one. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_check.h"
#include "test_support.h"

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* n random values in [-3, 3] with the awkward finite ones sprinkled in, then `bad`
 * non-finite values: at 0, at n - 1, in the middle and at random places. */
static float *make_input(size_t n, uint64_t seed, int bad) {
    float *x = ts_rand_alloc(n, seed, -3.0f, 3.0f);
    const float finite[] = {FLT_MAX, -FLT_MAX, FLT_MIN, from_bits(1), from_bits(0x80000001u), -0.0f, 0.0f,
                            from_bits(0x7f7fffffu)};
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t k = 0; k < n / 7; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[(r >> 33) % n] = finite[(r >> 20) % (sizeof finite / sizeof finite[0])];
    }
    const float nonfinite[] = {NAN, -NAN, INFINITY, -INFINITY, from_bits(0x7f800001u) /* signalling */,
                               from_bits(0xffc12345u), from_bits(0x7fffffffu)};
    for (int k = 0; k < bad; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = k == 0 ? n - 1 : k == 1 ? 0 : k == 2 ? n / 2 : (r >> 33) % n;
        x[at] = nonfinite[(r >> 20) % (sizeof nonfinite / sizeof nonfinite[0])];
    }
    return x;
}

/* Counts x[view_offset ..] (n elements) on the device, after counting `pre` into the same
 * counts, and compares with the reference. */
static void check_case(lv_ctx *ctx, size_t n, size_t view_offset, int bad, uint64_t seed) {
    size_t total = n + view_offset;
    float *x = make_input(total, seed, bad);
    int64_t shape = (int64_t)total, cshape = 5;
    lv_tensor t = ts_tensor(ctx, LV_F32, 1, &shape, x);
    int64_t vn = (int64_t)n;
    lv_tensor view = lv_tensor_view(&t, (int64_t)view_offset, 1, &vn);
    lv_tensor counts;
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 1, &cshape, &counts), LV_OK);
    /* counts[1..3] are the ones counted into (a view at an odd offset); 0 and 4 must stay 0 */
    cr_assert_eq(lv_tensor_zero(ctx, &counts), LV_OK);
    int64_t three = 3;
    lv_tensor c = lv_tensor_view(&counts, 1, 1, &three);
    const uint32_t base = 1000;
    cr_assert_eq(lv_op_count_nonfinite(ctx, &c, &view, base), LV_OK, "%s", lv_last_error());
    uint32_t got[5];
    cr_assert_eq(lv_tensor_read(ctx, &counts, got, sizeof got), LV_OK);
    uint32_t want[3] = {0, 0, 0};
    ref_count_nonfinite(x + view_offset, n, base, want);
    cr_assert_eq(got[0], 0u);
    cr_assert_eq(got[4], 0u);
    cr_assert_eq(got[1], want[0], "n %zu offset %zu: %u NaN counted, the reference %u", n, view_offset, got[1], want[0]);
    cr_assert_eq(got[2], want[1], "n %zu offset %zu: %u infinities counted, the reference %u", n, view_offset, got[2],
                 want[1]);
    cr_assert_eq(got[3], want[2], "n %zu offset %zu: first non-finite ~%u, the reference ~%u", n, view_offset, ~got[3],
                 ~want[2]);
    if (bad == 0) cr_assert_eq(want[0] + want[1] + want[2], 0u, "finite input counted by the reference");
    else cr_assert_gt(want[0] + want[1], 0u);
    lv_tensor_free(ctx, &counts);
    lv_tensor_free(ctx, &t);
    free(x);
}

Test(count_nonfinite, matches_reference) {
    lv_ctx *ctx = ts_ctx();
    const size_t sizes[] = {1, 3, 7, 256, 257, 1000, 12288, 65537};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int bad = 0; bad <= 9; bad += 3)
            for (size_t off = 0; off <= 5; off += 5) {
                if (sizes[i] == 1 && bad > 1) continue;
                check_case(ctx, sizes[i], off, bad, 17 + i * 31 + (uint64_t)bad * 7 + off);
            }
    ts_ctx_done(ctx);
}

/* A binding limit of 1 KiB: x is counted in pieces of fewer than 256 elements, each with
 * its own base; the counts and the first index are those of the whole. */
Test(count_nonfinite, split_over_small_bindings) {
    lv_ctx *ctx = ts_ctx_with_binding(1024);
    check_case(ctx, 3001, 3, 6, 99);
    check_case(ctx, 1500, 0, 0, 5);
    ts_ctx_done(ctx);
}

/* Two tensors into one counts: the totals add, the first index is the smaller. */
Test(count_nonfinite, accumulates_over_tensors) {
    lv_ctx *ctx = ts_ctx();
    const size_t na = 500, nb = 300;
    float *a = make_input(na, 3, 0), *b = make_input(nb, 4, 4);
    a[421] = INFINITY;
    int64_t sa = (int64_t)na, sb = (int64_t)nb, sc = 3;
    lv_tensor ta = ts_tensor(ctx, LV_F32, 1, &sa, a), tb = ts_tensor(ctx, LV_F32, 1, &sb, b), c;
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 1, &sc, &c), LV_OK);
    cr_assert_eq(lv_tensor_zero(ctx, &c), LV_OK);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &c, &ta, 0), LV_OK);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &c, &tb, (uint32_t)na), LV_OK);
    uint32_t got[3], want[3] = {0, 0, 0};
    cr_assert_eq(lv_tensor_read(ctx, &c, got, sizeof got), LV_OK);
    ref_count_nonfinite(a, na, 0, want);
    ref_count_nonfinite(b, nb, (uint32_t)na, want);
    cr_assert_eq(got[0], want[0]);
    cr_assert_eq(got[1], want[1]);
    cr_assert_eq(got[2], want[2]);
    cr_assert_eq(~got[2], 421u, "the first non-finite value is a[421]");
    lv_tensor_free(ctx, &c);
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tb);
    free(a);
    free(b);
    ts_ctx_done(ctx);
}

Test(count_nonfinite, bad_arguments) {
    lv_ctx *ctx = ts_ctx();
    int64_t s4 = 4, s2 = 2;
    lv_tensor x, c2, cf;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, &s4, &x), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 1, &s2, &c2), LV_OK);
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, &s4, &cf), LV_OK);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &c2, &x, 0), LV_ERR_INVALID, "two counts are too few");
    cr_assert_eq(lv_op_count_nonfinite(ctx, &cf, &x, 0), LV_ERR_INVALID, "f32 counts");
    cr_assert_eq(lv_op_count_nonfinite(ctx, &x, &c2, 0), LV_ERR_INVALID, "i32 x");
    cr_assert_eq(lv_op_count_nonfinite(ctx, NULL, &x, 0), LV_ERR_INVALID);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &x, NULL, 0), LV_ERR_INVALID);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &cf, &x, UINT32_MAX - 2), LV_ERR_INVALID, "f32 counts first");
    int64_t s3 = 3;
    lv_tensor c3;
    cr_assert_eq(lv_tensor_create(ctx, LV_I32, 1, &s3, &c3), LV_OK);
    cr_assert_eq(lv_op_count_nonfinite(ctx, &c3, &x, UINT32_MAX - 2), LV_ERR_LIMIT, "indices past 2^32 - 1");
    cr_assert(strstr(lv_last_error(), "count_nonfinite") != NULL, "%s", lv_last_error());
    lv_tensor_free(ctx, &c3);
    lv_tensor_free(ctx, &x);
    lv_tensor_free(ctx, &c2);
    lv_tensor_free(ctx, &cf);
    ts_ctx_done(ctx);
}
