/* Matrix multiply (engine/ops/ops_matmul.c), PyTorch Linear layout:
 *
 *   out[b, m, n] = sum_k a[b, m, k] * w[b, n, k] + bias[n]
 *
 * a: f32, f16 or bf16 [..., M, K] (leading dims are the batch, or flattened into M when w is
 * 2-D); w: f32, f16 or bf16, [N, K] shared by every batch or [B, N, K]; bias: f32 [N] or
 * NULL; out: f32, f16 or bf16 [..., M, N] (f32 for lv_op_matmul_add). Accumulates in fp32. Tile shapes are specialization constants
 * chosen per device (register blocking on CPU devices, shared-memory tiles on GPUs).
 * Work whose tensors exceed one binding is split over M (and N). */
#ifndef LONGVK_OPS_MATMUL_H
#define LONGVK_OPS_MATMUL_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

lv_status lv_op_matmul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                       const lv_tensor *w, const lv_tensor *bias);

/* An activation applied to every output as it is stored: one dispatch instead of two. */
typedef enum lv_activation {
    LV_ACT_NONE = 0,
    LV_ACT_SILU,         /* x * sigmoid(x) */
} lv_activation;

lv_status lv_op_matmul_act(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                           const lv_tensor *w, const lv_tensor *bias, lv_activation act);

/* out += a w^T + bias: a residual add fused into the store. */
lv_status lv_op_matmul_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                           const lv_tensor *w, const lv_tensor *bias);

#ifdef __cplusplus
}
#endif
#endif
