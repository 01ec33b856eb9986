/* Matrix multiply internals (engine/ops/ops_matmul.c) for the engine and its tests: one kernel
 * variant with an activation and accumulation. Not installed. (Choosing the variant alone,
 * lv_op_matmul_variant, is public: longvk/ops_matmul.h.) */
#ifndef LONGVK_OPS_MATMUL_INTERNAL_H
#define LONGVK_OPS_MATMUL_INTERNAL_H

#include "longvk/ops_matmul.h"

/* out = act(a w^T + bias) (+ out when accumulate) with one kernel variant. */
lv_status lv_op_matmul_ex(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                          const lv_tensor *bias, lv_activation act, bool accumulate, lv_matmul_variant variant);

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
