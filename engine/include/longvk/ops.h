/* Kernels on the engine. Every op records into the context's command stream (see
 * longvk/engine.h) and returns a status; shapes and dtypes are checked first, and a
 * tensor too large for one binding is split or refused with a message naming the limit.
 * Each family's ops are declared in their own header. */
#ifndef LONGVK_OPS_H
#define LONGVK_OPS_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set every element of a float tensor to `value`. */
lv_status lv_op_fill(lv_ctx *ctx, const lv_tensor *t, float value);

/* Counts the NaN and infinite values of the f32 tensor x, on the device, into `counts` (an
 * I32 tensor of at least 3 elements, read as uint32; zero it first, lv_tensor_zero: counts
 * add up, so several tensors may share one): counts[0] += NaNs, counts[1] += infinities,
 * counts[2] = max(counts[2], ~(index_base + i)) over the non-finite elements i; so when
 * counts[2] != 0, ~counts[2] is the first non-finite index (index_base + i < 2^32 - 1). Costs
 * one read per element; no atomic unless a value is not finite. */
lv_status lv_op_count_nonfinite(lv_ctx *ctx, const lv_tensor *counts, const lv_tensor *x, uint32_t index_base);

#ifdef __cplusplus
}
#endif

#include "longvk/ops_elementwise.h"
#include "longvk/ops_matmul.h"
#include "longvk/ops_linear_attention.h"
#include "longvk/ops_attention.h"
#include "longvk/ops_conv.h"
#include "longvk/ops_vae.h"

#endif
