/* Element-wise, normalisation and rotary kernels (engine/ops/ops_elementwise.c, ops_norm.c,
 * ops_rope.c, rope_table.c).
 *
 * Broadcasting: for binary ops, `b` (or shift/scale/gate, and y of add_gated) is either the
 * same shape as `a`, or a [G, C] tensor where C is a's last dimension and G divides a's row
 * count R (all leading dims flattened): row r of a uses row r / (R / G) of b. G = 1 is the
 * usual per-channel broadcast; G = frames gives per-frame modulation, since tokens are
 * frame-major. Only b's last dimension and element count matter ([C], [1, C], [F, 1, C]
 * all work).
 *
 * `out` must have exactly the shape of the first input (a or x) and may be that very tensor
 * (in place), or any same-shape input; it must not otherwise overlap an input in memory.
 * All f32, except 16-bit activations (lv_ctx_options.precision): the element-wise ops other
 * than modulate and add_gated take f16 or bf16 for out, a and b, and the LayerNorms' out may
 * be f16 or bf16 (read and written as 32-bit words, computed in fp32; in place only between
 * equal dtypes). Bad shapes, dtypes or overlaps fail with LV_ERR_INVALID and a message naming
 * the op and the shapes. Tensors larger than one kernel binding (lv_ctx_max_binding) are
 * split over rows; a single row too wide for one binding fails with LV_ERR_LIMIT. */
#ifndef LONGVK_OPS_ELEMENTWISE_H
#define LONGVK_OPS_ELEMENTWISE_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

lv_status lv_op_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b);
lv_status lv_op_mul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b);
/* out = alpha * a + beta * b (decay rules, re-noising; b may broadcast as above) */
lv_status lv_op_scale_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, float alpha,
                          const lv_tensor *b, float beta);
/* out = x + gate * y (gate, and y too, broadcast as above): adaLN gated residual */
lv_status lv_op_add_gated(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *y, const lv_tensor *gate);
lv_status lv_op_silu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
/* out = a * silu(b) (b broadcast as above): a gated linear unit in one pass. */
lv_status lv_op_mul_silu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b);
lv_status lv_op_gelu_tanh(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
/* out = a * gelu_tanh(b) (b broadcast as above): Gemma's gated MLP in one pass. */
lv_status lv_op_mul_gelu_tanh(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                              const lv_tensor *b);
lv_status lv_op_relu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);
/* out = x * (1 + scale) + shift (shift, scale broadcast as above) */
lv_status lv_op_modulate(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                         const lv_tensor *shift, const lv_tensor *scale);
/* Over the last dimension C: out = x / sqrt(mean(x^2) + eps) * weight (weight: C elements,
 * or NULL). eps >= 0. Accumulates in fp32. */
lv_status lv_op_rmsnorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                        const lv_tensor *weight, float eps);
/* Over the last dimension C: (x - mean) / sqrt(var + eps) * weight + bias (C elements each,
 * either NULL; var is the biased variance, computed from the deviations in a second pass). */
lv_status lv_op_layernorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *weight, const lv_tensor *bias, float eps);
/* adaLN in one pass: LayerNorm without affine, then * (1 + scale) + shift, with shift and
 * scale [G, C] broadcast by groups of rows as above (G = frames: per-frame modulation). */
lv_status lv_op_layernorm_modulate(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                   const lv_tensor *shift, const lv_tensor *scale, float eps);

/* Rotary embedding on adjacent pairs. x is [N, H * D] (N tokens, H heads of D dims;
 * leading dims flattened into N); table is [N, D] (D even, dividing x's last dimension)
 * holding (cos, sin) of each pair's angle: table[n][2i] = cos a, table[n][2i+1] = sin a;
 * then out[2i] = x[2i] cos a - x[2i+1] sin a, out[2i+1] = x[2i] sin a + x[2i+1] cos a, for
 * every head. out may be x (in place). */
lv_status lv_op_rope(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x, const lv_tensor *table);
/* The same with rotate-half pairs (GPT-NeoX, Llama and Gemma in Hugging Face): pair j of a
 * head is dims (j, j + D/2), with the angle of table[n][2j], table[n][2j+1]:
 * out[j] = x[j] cos a - x[j+D/2] sin a, out[j+D/2] = x[j+D/2] cos a + x[j] sin a. */
lv_status lv_op_rope_half(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *table);

/* Host: fill a rope table [N = F * H * W, D] for tokens on an F x H x W grid in
 * frame-major order, frame positions starting at f0, with the head's D dims split into
 * (dt, dh, dw) axis parts (each even, dt + dh + dw = D); an axis of d dims uses frequencies
 * theta^(-2j/d), j < d/2, and token (f, h, w) has angles (f0 + f) freq_t, h freq_h,
 * w freq_w, in that order (SANA-Video: theta 10000, dh = dw = 2 (D / 6), dt the rest: 40 /
 * 36 / 36 for D = 112). Angles in double, rounded once to float. Invalid arguments fill the
 * table with NaN (there is no status to return). */
void lv_rope_table_3d(float *table, int F, int H, int W, int f0, int D, int dt, int dh, int dw,
                      double theta);
/* Host: 1-D positions (one per token) over all D dims: table[n] pair j has angle
 * positions[n] * theta^(-2j/D). */
void lv_rope_table_1d(float *table, const float *positions, int N, int D, double theta);

#ifdef __cplusplus
}
#endif
#endif
