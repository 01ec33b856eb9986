/* Plain C references for the element-wise, normalisation and rope kernels
 * (longvk/ops_elementwise.h). Arithmetic in double, results rounded once to float.
 * Rows: every tensor is [R, C]; a broadcast operand is [G, C] and row r reads its row
 * r / (R / G) (G = R: same shape, G = 1: one row for all). */
#ifndef LONGVK_REF_ELEMENTWISE_H
#define LONGVK_REF_ELEMENTWISE_H

#include <stdint.h>

void ref_add(float *out, const float *a, const float *b, int64_t R, int64_t C, int64_t Gb);
void ref_mul(float *out, const float *a, const float *b, int64_t R, int64_t C, int64_t Gb);
void ref_scale_add(float *out, const float *a, float alpha, const float *b, float beta,
                   int64_t R, int64_t C, int64_t Gb);
/* out = x + gate * y */
void ref_add_gated(float *out, const float *x, const float *y, int64_t Gy, const float *gate,
                   int64_t Gg, int64_t R, int64_t C);
/* out = x * (1 + scale) + shift */
void ref_modulate(float *out, const float *x, const float *shift, int64_t Gshift,
                  const float *scale, int64_t Gscale, int64_t R, int64_t C);

void ref_silu(float *out, const float *x, int64_t n);
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void ref_gelu_tanh(float *out, const float *x, int64_t n);
void ref_relu(float *out, const float *x, int64_t n);

/* Over each row of C: x / sqrt(mean(x^2) + eps) * w (w may be NULL). */
void ref_rmsnorm(float *out, const float *x, const float *w, int64_t R, int64_t C, float eps);
/* Over each row of C: (x - mean) / sqrt(var + eps) * w + b (biased var; w, b may be NULL). */
void ref_layernorm(float *out, const float *x, const float *w, const float *b, int64_t R,
                   int64_t C, float eps);

/* x [N, H * D], table [N, D] of (cos, sin) per adjacent pair:
 * out[2i] = x[2i] c - x[2i+1] s, out[2i+1] = x[2i] s + x[2i+1] c, in every head. */
void ref_rope(float *out, const float *x, const float *table, int64_t N, int64_t H, int64_t D);
/* The same with rotate-half pairs (i, i + D/2) and table entries (2i, 2i+1):
 * out[i] = x[i] c - x[i+D/2] s, out[i+D/2] = x[i+D/2] c + x[i] s. */
void ref_rope_half(float *out, const float *x, const float *table, int64_t N, int64_t H, int64_t D);

#endif
