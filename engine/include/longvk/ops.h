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
