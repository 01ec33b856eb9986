/* Softmax attention over a short, masked key set (engine/ops/ops_attention.c): the
 * cross-attention to at most 512 text tokens; and causal self-attention for text encoders.
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

/* Causal self-attention over a short sequence (a decoder used as a text encoder: Gemma-2),
 * with grouped-query heads, an optional sliding window and an optional soft-cap:
 *
 *   s_j = scale * q[n, h] . k[j, h / (heads / kv_heads)]
 *   s_j = softcap * tanh(s_j / softcap)                 (softcap > 0; 0: off)
 *   out[n, h] = sum_j softmax_j(s_j) v[j, h / (heads / kv_heads)]
 *       over the keys j <= p(n) with p(n) - j < window  (window > 0; 0: no window)
 *
 * q, out: f32 [N, heads*D]; k, v: f32 [L, kv_heads*D] with kv_heads dividing heads and
 * N <= L; query row n is at position p(n) = L - N + n (the last N positions: N = L for a
 * whole sequence). Same limits as lv_op_softmax_attention (head dim <= 256, keys bound
 * whole, lavapipe's loop limit: about 3600 keys of head dimension 256). */
lv_status lv_op_causal_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                 const lv_tensor *k, const lv_tensor *v, int heads, int kv_heads,
                                 float scale, int window, float softcap);

#ifdef __cplusplus
}
#endif
#endif
