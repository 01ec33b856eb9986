/* Plain C references for the element-wise, norm and rope kernels: see ref_elementwise.h. */
#include "ref_elementwise.h"

#include <math.h>
#include <stddef.h>

/* index of the element of a [G, C] operand that element (r, c) of an [R, C] tensor reads */
static int64_t bcast(int64_t r, int64_t c, int64_t R, int64_t C, int64_t G) {
    return (r / (R / G)) * C + c;
}

void ref_add(float *out, const float *a, const float *b, int64_t R, int64_t C, int64_t Gb) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((double)a[r * C + c] + (double)b[bcast(r, c, R, C, Gb)]);
}

void ref_mul(float *out, const float *a, const float *b, int64_t R, int64_t C, int64_t Gb) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((double)a[r * C + c] * (double)b[bcast(r, c, R, C, Gb)]);
}

void ref_scale_add(float *out, const float *a, float alpha, const float *b, float beta,
                   int64_t R, int64_t C, int64_t Gb) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((double)alpha * a[r * C + c] +
                                     (double)beta * b[bcast(r, c, R, C, Gb)]);
}

void ref_add_gated(float *out, const float *x, const float *y, int64_t Gy, const float *gate,
                   int64_t Gg, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((double)x[r * C + c] + (double)gate[bcast(r, c, R, C, Gg)] *
                                                                (double)y[bcast(r, c, R, C, Gy)]);
}

void ref_modulate(float *out, const float *x, const float *shift, int64_t Gshift,
                  const float *scale, int64_t Gscale, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((double)x[r * C + c] * (1.0 + scale[bcast(r, c, R, C, Gscale)]) +
                                     (double)shift[bcast(r, c, R, C, Gshift)]);
}

void ref_silu(float *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)(x[i] / (1.0 + exp(-(double)x[i])));
}

void ref_gelu_tanh(float *out, const float *x, int64_t n) {
    const double k = sqrt(2.0 / M_PI);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        out[i] = (float)(0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
    }
}

void ref_relu(float *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] : 0.0f;
}

void ref_rmsnorm(float *out, const float *x, const float *w, int64_t R, int64_t C, float eps) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        double inv = 1.0 / sqrt(ss / (double)C + (double)eps);
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)(xr[c] * inv * (w ? (double)w[c] : 1.0));
    }
}

void ref_layernorm(float *out, const float *x, const float *w, const float *b, int64_t R,
                   int64_t C, float eps) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        double s = 0;
        for (int64_t c = 0; c < C; c++) s += xr[c];
        double mean = s / (double)C, ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (xr[c] - mean) * (xr[c] - mean);
        double inv = 1.0 / sqrt(ss / (double)C + (double)eps);
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (float)((xr[c] - mean) * inv * (w ? (double)w[c] : 1.0) +
                                     (b ? (double)b[c] : 0.0));
    }
}

void ref_rope(float *out, const float *x, const float *table, int64_t N, int64_t H, int64_t D) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D / 2; i++) {
                double c = table[n * D + 2 * i], s = table[n * D + 2 * i + 1];
                const float *p = x + (n * H + h) * D + 2 * i;
                float *o = out + (n * H + h) * D + 2 * i;
                double x0 = p[0], x1 = p[1];
                o[0] = (float)(x0 * c - x1 * s);
                o[1] = (float)(x0 * s + x1 * c);
            }
}

void ref_rope_half(float *out, const float *x, const float *table, int64_t N, int64_t H, int64_t D) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D / 2; i++) {
                double c = table[n * D + 2 * i], s = table[n * D + 2 * i + 1];
                const float *p = x + (n * H + h) * D;
                float *o = out + (n * H + h) * D;
                double x0 = p[i], x1 = p[i + D / 2];
                o[i] = (float)(x0 * c - x1 * s);
                o[i + D / 2] = (float)(x1 * c + x0 * s);
            }
}
