#include "test_support.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

lv_ctx *ts_ctx_with(lv_ctx_options opt) {
    opt.validation = 1;
    lv_ctx *ctx = NULL;
    lv_status s = lv_ctx_create(&opt, &ctx);
    cr_assert_eq(s, LV_OK, "lv_ctx_create: %s", lv_last_error());
    return ctx;
}

lv_ctx *ts_ctx(void) {
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    return ts_ctx_with(opt);
}

lv_ctx *ts_ctx_with_binding(uint64_t max_binding_bytes) {
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.max_binding_bytes = max_binding_bytes;
    return ts_ctx_with(opt);
}

void ts_ctx_done(lv_ctx *ctx) {
    cr_assert_eq(lv_flush(ctx), LV_OK, "flush: %s", lv_last_error());
    uint64_t n = lv_ctx_validation_messages(ctx);
    lv_ctx_destroy(ctx);
    cr_assert_eq(n, 0, "the validation layer reported %llu message(s)", (unsigned long long)n);
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ts_rand_fill(float *x, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = lo + (hi - lo) * (float)u;
    }
}

float *ts_rand_alloc(size_t n, uint64_t seed, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    ts_rand_fill(x, n, seed, lo, hi);
    return x;
}

double ts_q8_0_weight_nmse(const float *w, int64_t n) {
    double err2 = 0, sum2 = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) {
            amax = fmax(amax, fabs(w[32 * b + j]));
            sum2 += (double)w[32 * b + j] * w[32 * b + j];
        }
        double d = amax / 127 * (1 + 0x1p-10);
        err2 += 32 * (d / 2) * (d / 2);
    }
    return err2 / sum2;
}

void ts_write_tiny_embeds(const char *path) {
    static float y[8 * 32], mask[8];
    for (int i = 0; i < 8 * 32; i++) y[i] = 0.5f * sinf(0.37f * (float)i);
    for (int i = 0; i < 8; i++) mask[i] = i < 5 ? 1.0f : 0.0f;
    lv_weight t[2] = {{.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {8, 32}, .data = y, .nbytes = sizeof y},
                      {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {8}, .data = mask, .nbytes = sizeof mask}};
    cr_assert_eq(lv_safetensors_write(path, t, 2, NULL, 0), LV_OK, "%s", lv_last_error());
}

double ts_nmse(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        num += d * d;
        den += (double)want[i] * (double)want[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return num / den;
}

double ts_max_abs_diff(const float *got, const float *want, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

void ts_expect_within(const char *what, const float *got, const float *want, const double *tol, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        cr_assert(d <= tol[i], "%s: element %zu: got %.9g want %.9g (|diff| %.3g > bound %.3g)", what, i,
                  got[i], want[i], d, tol[i]);
        if (tol[i] > 0 && d / tol[i] > worst) worst = d / tol[i];
    }
    cr_log_info("%s: worst error / bound = %.3f", what, worst);
}

double ts_check_bound(const char *what, const float *got, const float *want, const double *mag,
                      size_t n, double factor) {
    return ts_check_bound_abs(what, got, want, mag, n, factor, 0.0);
}

double ts_check_bound_abs(const char *what, const float *got, const float *want, const double *mag,
                          size_t n, double factor, double abs_term) {
    double worst = 0, max_err = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        double tol = factor * mag[i] + abs_term;
        cr_assert(err <= tol, "%s: out[%zu] = %.9g, want %.9g (|err| %.3g > bound %.3g)", what,
                  i, got[i], want[i], err, tol);
        if (tol > 0 && err / tol > worst) worst = err / tol;
        if (err > max_err) max_err = err;
    }
    cr_log_info("%s: max|err| %.3g, worst err/bound %.3f, nmse %.3g", what, max_err, worst,
                ts_nmse(got, want, n));
    return worst;
}

void ts_round_to(lv_dtype dtype, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dtype == LV_F16) x[i] = lv_half_to_float(lv_float_to_half(x[i]));
        else if (dtype == LV_BF16) x[i] = lv_bf16_to_float(lv_float_to_bf16(x[i]));
    }
}

lv_tensor ts_tensor(lv_ctx *ctx, lv_dtype dtype, int ndim, const int64_t *shape, const float *data) {
    lv_tensor t;
    cr_assert_eq(lv_tensor_create(ctx, dtype, ndim, shape, &t), LV_OK, "%s", lv_last_error());
    size_t n = (size_t)lv_tensor_numel(&t);
    if (dtype == LV_F32) {
        cr_assert_eq(lv_tensor_write(ctx, &t, data, n * 4), LV_OK, "%s", lv_last_error());
    } else {
        uint16_t *h = malloc(n * 2);
        cr_assert_not_null(h);
        for (size_t i = 0; i < n; i++)
            h[i] = dtype == LV_F16 ? lv_float_to_half(data[i]) : lv_float_to_bf16(data[i]);
        cr_assert_eq(lv_tensor_write(ctx, &t, h, n * 2), LV_OK, "%s", lv_last_error());
        free(h);
    }
    return t;
}

lv_tensor ts_empty(lv_ctx *ctx, int ndim, const int64_t *shape) {
    lv_tensor t;
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, ndim, shape, &t), LV_OK, "%s", lv_last_error());
    return t;
}

float *ts_read(lv_ctx *ctx, const lv_tensor *t) {
    size_t n = (size_t)lv_tensor_numel(t);
    float *x = malloc(n * 4 + 4);
    cr_assert_not_null(x);
    if (t->dtype == LV_F32) {
        cr_assert_eq(lv_tensor_read(ctx, t, x, n * 4), LV_OK, "%s", lv_last_error());
        return x;
    }
    cr_assert(t->dtype == LV_F16 || t->dtype == LV_BF16, "ts_read: dtype %d", (int)t->dtype);
    uint16_t *h = malloc(n * 2 + 2);
    cr_assert_not_null(h);
    cr_assert_eq(lv_tensor_read(ctx, t, h, n * 2), LV_OK, "%s", lv_last_error());
    for (size_t i = 0; i < n; i++) x[i] = t->dtype == LV_F16 ? lv_half_to_float(h[i]) : lv_bf16_to_float(h[i]);
    free(h);
    return x;
}

double ts_half_rel(lv_dtype dtype) {
    return dtype == LV_F16 ? 0x1p-10 : dtype == LV_BF16 ? 0x1p-7 : 0.0;
}

void ts_forward_inputs(const lv_weights *v, const char *x_path, const char *text_path) {
    const lv_weight *x = lv_weights_find(v, "x"), *y = lv_weights_find(v, "y"), *mask = lv_weights_find(v, "mask");
    cr_assert(x && y && mask, "the vectors lack x, y or mask");
    cr_assert_eq(lv_npy_write(x_path, 4, x->shape, x->data), LV_OK, "%s", lv_last_error());
    lv_weight text[2] = {*y, *mask};
    text[0].name = "y";
    text[1].name = "mask";
    cr_assert_eq(lv_safetensors_write(text_path, text, 2, NULL, 0), LV_OK, "%s", lv_last_error());
}
