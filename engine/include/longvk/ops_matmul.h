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

/* The matrix product's kernels. lv_op_matmul and the others pick one per device and
 * precision (LV_MATMUL_AUTO); lv_op_matmul_variant runs the one asked for whatever the
 * device, to measure or check each (`longvk bench gemm --variant`; on lavapipe both the
 * register and the tiled kernel run). */
typedef enum lv_matmul_variant {
    LV_MATMUL_AUTO = 0,  /* by device type and precision; LONGVK_MATMUL_VARIANT=register|tiled|
                            coopmat overrides */
    LV_MATMUL_REGISTER,  /* register-blocked, no shared memory (CPU devices) */
    LV_MATMUL_TILED,     /* shared-memory tiles (GPUs) */
    LV_MATMUL_COOPMAT    /* the tensor cores, inputs rounded to fp16, fp32 accumulation: on a
                            context at 16-bit precision that enabled them (lv_ctx_coopmat),
                            else LV_ERR_UNSUPPORTED */
} lv_matmul_variant;

/* lv_op_matmul with the given kernel (LV_MATMUL_AUTO: lv_op_matmul's). */
lv_status lv_op_matmul_variant(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                               const lv_tensor *w, const lv_tensor *bias,
                               lv_matmul_variant variant);

/* The variant lv_op_matmul picks on this context: COOPMAT at fp16 precision on a GPU whose
 * context enabled the tensor cores with a shape the kernel can use (any vendor), else
 * REGISTER on CPU devices (lavapipe: faster than its emulated cooperative matrices) and
 * TILED elsewhere. LONGVK_MATMUL_VARIANT=register|tiled|coopmat forces one; coopmat only at
 * 16-bit precision (at f32 it is as if unset: the kernel rounds its inputs to fp16). */
lv_matmul_variant lv_matmul_auto_variant(const lv_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
