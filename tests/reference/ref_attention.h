/* Plain C reference for softmax attention (double accumulation, no Vulkan). */
#ifndef LONGVK_REF_ATTENTION_H
#define LONGVK_REF_ATTENTION_H

/* out[n, h*D + d] = sum_j softmax_j(scale * q[n, h] . k[j, h]) v[j, h*D + d] over the keys
 * with mask[j] != 0 (all keys when mask is NULL); zeros when no key is valid.
 * q, out: [n, heads*head_dim]; k, v: [l, heads*head_dim]; mask: [l] or NULL. */
void ref_softmax_attention(float *out, const float *q, const float *k, const float *v,
                           const float *mask, int n, int l, int heads, int head_dim,
                           float scale);

#endif
