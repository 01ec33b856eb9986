/* Convolutions of the Mix-FFN (engine/ops/ops_conv.c). Activations are channels-last in
 * token order: x is [F, H, W, C] (frame-major, then row, then column), like the DiT's
 * token sequence. */
#ifndef LONGVK_OPS_CONV_H
#define LONGVK_OPS_CONV_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per frame depthwise 3x3 with zero padding 1:
 * out[f, y, x, c] = bias[c] + sum_{i,j} w[c, 0, i, j] * x[f, y+i-1, x+j-1, c].
 * x, out: f32, f16 or bf16 (16-bit activations, computed in fp32); w: f32 [C, 1, 3, 3]
 * (PyTorch layout); bias f32 [C] or NULL. */
lv_status lv_op_dwconv3x3(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *w, const lv_tensor *bias);

/* Temporal conv over frames, kernel 3, full channel mix, no bias:
 * out[f, p, o] = sum_{t=0..2} sum_i w[o, i, t] * x[f + t - 1, p, i]
 * with x[-1] = prev (the cached last frame of the previous block, [P, C]) or zero when
 * prev is NULL, and x[F] = 0. x: f32 [F, P, C] (P = H*W pixels per frame);
 * w: f32 [C, C, 3] (PyTorch's [C, C, 3, 1, 1] flattened). */
lv_status lv_op_temporal_conv(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *prev, const lv_tensor *w);

/* The same convolution as matrix products, for GPUs, where the direct kernel above (tuned
 * for lavapipe's register blocking) runs far below the matmul (on an H200 it took 54 % of a
 * 480p DiT forward). Each tap is a product with whole frames of x, which are contiguous
 * rows: out = x W1^T, then out[frames 1..] += x[frames ..F-2] W0^T, out[frame 0] += prev
 * W0^T, out[frames ..F-2] += x[frames 1..] W2^T (lv_op_matmul, lv_op_matmul_add: the
 * tensor cores at 16-bit precision). w_taps: [3, C, C] of f32, f16 or bf16, tap-major,
 * w_taps[t, o, i] = w[o, i, t] (lv_temporal_conv_taps lays a file's weight out so);
 * x, prev, out as for lv_op_temporal_conv. */
lv_status lv_op_temporal_conv_gemm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                   const lv_tensor *prev, const lv_tensor *w_taps);

/* Whether this context runs the temporal conv as matrix products (lv_op_temporal_conv_gemm):
 * where the matmul is not the register-blocked kernel of CPU devices (lv_matmul_auto_variant),
 * i.e. on GPUs. LONGVK_TCONV=gemm|direct forces one. */
bool lv_temporal_conv_uses_gemm(const lv_ctx *ctx);

/* w [C, C, 3] (PyTorch's layout, f32 / f16 / bf16 on the host, read with lv_weight_float)
 * to the tap-major [3, C, C] floats lv_op_temporal_conv_gemm wants, into dst (3 C^2). */
void lv_temporal_conv_taps(const lv_weight *w, int64_t C, float *dst);

#ifdef __cplusplus
}
#endif
#endif
