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

#ifdef __cplusplus
}
#endif
#endif
