/* Element-wise, normalisation and rotary kernels (engine/ops_elementwise.c).
 *
 * Broadcasting: for binary ops, `b` (or shift/scale/gate) is either the same shape as
 * `a`, or a [G, C] tensor where C is a's last dimension and G divides a's row count R
 * (all leading dims flattened): row r of a uses row r / (R / G) of b. G = 1 is the usual
 * per-channel broadcast; G = frames gives per-frame modulation, since tokens are
 * frame-major. `out` may alias `a` (in place). All f32. */
#ifndef LONGVK_OPS_ELEMENTWISE_H
#define LONGVK_OPS_ELEMENTWISE_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

lv_status lv_op_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b);
lv_status lv_op_mul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b);
/* out = alpha * a + beta * b (same shapes; decay rules, re-noising) */
lv_status lv_op_scale_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, float alpha,
                          const lv_tensor *b, float beta);
/* out = x + gate * y (gate broadcast as above): adaLN gated residual */
lv_status lv_op_add_gated(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *y, const lv_tensor *gate);
lv_status lv_op_silu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
lv_status lv_op_gelu_tanh(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
lv_status lv_op_relu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
/* out = x * (1 + scale) + shift (shift, scale broadcast as above) */
lv_status lv_op_modulate(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                         const lv_tensor *shift, const lv_tensor *scale);
/* Over the last dimension: out = x / sqrt(mean(x^2) + eps) * weight (weight may be NULL). */
lv_status lv_op_rmsnorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                        const lv_tensor *weight, float eps);
/* Over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias (either NULL). */
lv_status lv_op_layernorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *weight, const lv_tensor *bias, float eps);

/* Rotary embedding on adjacent pairs. x is [N, H * D] (N tokens, H heads of D dims);
 * table is [N, D] holding (cos, sin) of each pair's angle: table[n][2i] = cos a,
 * table[n][2i+1] = sin a; then out[2i] = x[2i] cos a - x[2i+1] sin a,
 * out[2i+1] = x[2i] sin a + x[2i+1] cos a, for every head. */
lv_status lv_op_rope(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x, const lv_tensor *table);

/* Host: fill a rope table [N, D] for tokens on an F x H x W grid in frame-major order,
 * frame positions starting at f0, with the head's D dims split into (dt, dh, dw) axis
 * parts (each even, dt + dh + dw = D); an axis of d dims uses frequencies
 * theta^(-2j/d), j < d/2 (SANA-Video: theta 10000). */
void lv_rope_table_3d(float *table, int F, int H, int W, int f0, int D, int dt, int dh, int dw,
                      double theta);
/* Host: 1-D positions (one per token) over all D dims. */
void lv_rope_table_1d(float *table, const float *positions, int N, int D, double theta);

#ifdef __cplusplus
}
#endif
#endif
