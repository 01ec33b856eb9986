/* Matrix multiply internals (engine/ops/ops_matmul.c) for the engine and its tests: one kernel
 * variant with an activation and accumulation. Not installed. (Choosing the variant alone,
 * lv_op_matmul_variant, is public: longvk/ops_matmul.h.) */
#ifndef LONGVK_OPS_MATMUL_INTERNAL_H
#define LONGVK_OPS_MATMUL_INTERNAL_H

#include "longvk/ops_matmul.h"

/* out = act(a w^T + bias) (+ out when accumulate) with one kernel variant. */
lv_status lv_op_matmul_ex(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *w,
                          const lv_tensor *bias, lv_activation act, bool accumulate, lv_matmul_variant variant);

#endif
