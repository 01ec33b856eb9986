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
                            context at 16-bit precision that enabled them (lv_ctx_coopmat),
                            else LV_ERR_UNSUPPORTED */
} lv_matmul_variant;

lv_status lv_op_matmul_variant(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a,
                               const lv_tensor *w, const lv_tensor *bias,
                               lv_matmul_variant variant);

/* out = act(a w^T + bias) (+ out when accumulate) with one kernel variant. */
lv_status lv_op_matmul_ex(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                          const lv_tensor *bias, lv_activation act, bool accumulate, lv_matmul_variant variant);

/* The variant lv_op_matmul picks on this context: COOPMAT at fp16 precision on a GPU whose
 * context enabled the tensor cores with a shape the kernel can use (any vendor), else
 * REGISTER on CPU devices (lavapipe: faster than its emulated cooperative matrices) and
 * TILED elsewhere. LONGVK_MATMUL_VARIANT=register|tiled|coopmat forces one; coopmat only at
 * 16-bit precision (at f32 it is as if unset: the kernel rounds its inputs to fp16). */
lv_matmul_variant lv_matmul_auto_variant(const lv_ctx *ctx);

/* The rule lv_matmul_auto_variant applies without LONGVK_MATMUL_VARIANT, from what the device
 * reports: coopmat_usable when its context enabled the tensor cores with a shape the kernel
 * can use and the build has the kernel. */
lv_matmul_variant lv_matmul_pick(const lv_device_info *device, lv_precision precision, bool coopmat_usable);

/* Why the tensor-core kernel cannot use a cooperative-matrix shape, NULL when it can
 * (f16 x f16 + f32 at subgroup scope, sides dividing 32). */
const char *lv_matmul_coopmat_unusable(const lv_coopmat_shape *shape);

/* The shape the tensor-core kernel tiles with on this context (the largest usable one, or
 * LONGVK_COOPMAT_SHAPE=i's), NULL if none. */
const lv_coopmat_shape *lv_matmul_coopmat_shape(const lv_ctx *ctx);

#endif
