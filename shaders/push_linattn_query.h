/* Push constants of shaders/linattn_query.comp (engine/ops/ops_linear_attention.c). */
#include "push_common.h"

LV_PUSH_BEGIN(lv_push_linattn_query)
    LV_PUSH_U32 o_off;        /* element offsets of the bound tensors (lv_binding.elem_offset) */
    LV_PUSH_U32 q_off;
    LV_PUSH_U32 s_off;
    LV_PUSH_U32 z_off;
    LV_PUSH_U32 rope_off;
    LV_PUSH_U32 tokens;       /* tokens in this dispatch */
    LV_PUSH_U32 heads;
    LV_PUSH_U32 dim;          /* D */
    LV_PUSH_U32 row_stride;   /* elements from one token to the next in q and out (H * D) */
    LV_PUSH_U32 token_tiles;  /* ceil(tokens / (L * TT)) */
    LV_PUSH_U32 row_tiles;    /* ceil(D / TR) */
    LV_PUSH_F32 eps;          /* added to the denominator when normalising */
LV_PUSH_END(lv_push_linattn_query)
