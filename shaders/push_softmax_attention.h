#include "push_common.h"

/* Softmax attention of `n` queries over `l` keys, one invocation per (query, head). Row
 * width of q and out is heads * HEAD_DIM (HEAD_DIM is specialization constant 1), of k and
 * v kv_heads * HEAD_DIM (kv_heads divides heads: grouped-query attention). */
LV_PUSH_BEGIN(lv_push_softmax_attention)
    LV_PUSH_U32 out_offset;  /* element offsets of the bound tensors */
    LV_PUSH_U32 q_offset;
    LV_PUSH_U32 k_offset;
    LV_PUSH_U32 v_offset;
    LV_PUSH_U32 mask_offset;
    LV_PUSH_U32 n;           /* queries in this dispatch */
    LV_PUSH_U32 l;           /* keys */
    LV_PUSH_U32 heads;
    LV_PUSH_U32 has_mask;    /* 0: every key is valid (binding 4 is a dummy) */
    LV_PUSH_F32 scale_log2e; /* what q is multiplied by: the attention scale times log2(e)
                                (scores in base 2), or the scale alone with a soft-cap */
    LV_PUSH_U32 kv_heads;    /* heads of k and v; query head h reads h / (heads / kv_heads) */
    LV_PUSH_U32 q_pos0;      /* CAUSAL: the position of this dispatch's first query (key j is
                                at position j) */
    LV_PUSH_U32 window;      /* CAUSAL: 0, or query p sees keys j with p - window < j <= p */
    LV_PUSH_F32 softcap;     /* SOFTCAP: s = softcap tanh(s / softcap) before the softmax */
LV_PUSH_END(lv_push_softmax_attention)
