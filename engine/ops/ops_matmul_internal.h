/* Matrix multiply internals (engine/ops/ops_matmul.c) for tests and benchmarks: run one kernel
 * variant regardless of the device, so that both are exercised on lavapipe. Not installed. */
#ifndef LONGVK_OPS_MATMUL_INTERNAL_H
#define LONGVK_OPS_MATMUL_INTERNAL_H

#include "longvk/ops_matmul.h"

typedef enum lv_matmul_variant {
    LV_MATMUL_AUTO = 0,  /* by device type and precision; LONGVK_MATMUL_VARIANT=register|tiled|
                            coopmat overrides */
    LV_MATMUL_REGISTER,  /* register-blocked, no shared memory (CPU devices) */
    LV_MATMUL_TILED,     /* shared-memory tiles (GPUs) */
    LV_MATMUL_COOPMAT    /* the tensor cores, inputs rounded to fp16, fp32 accumulation: on a
                            context that enabled them (lv_ctx_coopmat), else LV_ERR_UNSUPPORTED */
} lv_matmul_variant;

lv_status lv_op_matmul_variant(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                               const lv_tensor *w, const lv_tensor *bias,
                               lv_matmul_variant variant);

/* out = act(a w^T + bias) (+ out when accumulate) with one kernel variant. */
lv_status lv_op_matmul_ex(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                          const lv_tensor *bias, lv_activation act, bool accumulate, lv_matmul_variant variant);

/* The variant lv_op_matmul picks on this context: COOPMAT at fp16 precision on a context
 * with the tensor cores (NVIDIA's, for now: the kernel assumes a fixed subgroup size),
 * else REGISTER on CPU devices and TILED elsewhere. */
lv_matmul_variant lv_matmul_auto_variant(const lv_ctx *ctx);

#endif
