#include "push_common.h"

/* Softmax attention of `n` queries over `l` keys, one invocation per (query, head). Row
 * width of q, k, v and out is heads * HEAD_DIM (HEAD_DIM is specialization constant 1). */
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
    LV_PUSH_F32 scale_log2e; /* the attention scale times log2(e): scores in base 2 */
LV_PUSH_END(lv_push_softmax_attention)
