/* Softmax attention over a short, masked key set (engine/ops/ops_attention.c): the
 * cross-attention to at most 512 text tokens.
 *
 *   out[n, h*D + d] = sum_j softmax_j(scale * q[n, h] . k[j, h] + mask_j) v[j, h*D + d]
 *
 * q: f32 [N, H*D]; k, v: f32 [L, H*D]; mask: f32 [L] with 1 = valid, 0 = masked out, or
 * NULL (all valid). A query whose keys are all masked gets zeros. */
#ifndef LONGVK_OPS_ATTENTION_H
#define LONGVK_OPS_ATTENTION_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

lv_status lv_op_softmax_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                  const lv_tensor *k, const lv_tensor *v,
                                  const lv_tensor *mask, int heads, float scale);

#ifdef __cplusplus
}
#endif
#endif
