/* Plain C reference for softmax attention (double accumulation, no Vulkan). */
#ifndef LONGVK_REF_ATTENTION_H
#define LONGVK_REF_ATTENTION_H

/* out[n, h*D + d] = sum_j softmax_j(scale * q[n, h] . k[j, h]) v[j, h*D + d] over the keys
 * with mask[j] != 0 (all keys when mask is NULL); zeros when no key is valid.
 * q, out: [n, heads*head_dim]; k, v: [l, heads*head_dim]; mask: [l] or NULL. */
void ref_softmax_attention(float *out, const float *q, const float *k, const float *v,
                           const float *mask, int n, int l, int heads, int head_dim,
                           float scale);

/* Causal attention (lv_op_causal_attention): query i at position l - n + i sees keys
 * j <= position, and within position - j < window if window > 0; scores scale q . k, then
 * softcap tanh(s / softcap) if softcap > 0; query head h reads kv head h / (heads / kv_heads).
 * q, out: [n, heads*head_dim]; k, v: [l, kv_heads*head_dim]; n <= l. */
void ref_causal_attention(float *out, const float *q, const float *k, const float *v, int n, int l, int heads,
                          int kv_heads, int head_dim, float scale, int window, float softcap);

#endif
