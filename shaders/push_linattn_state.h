/* Push constants of shaders/linattn_state.comp (engine/ops/ops_linear_attention.c). */
#include "push_common.h"

LV_PUSH_BEGIN(lv_push_linattn_state)
    LV_PUSH_U32 s_off;        /* element offsets of the bound tensors (lv_binding.elem_offset) */
    LV_PUSH_U32 z_off;
    LV_PUSH_U32 k_off;
    LV_PUSH_U32 v_off;
    LV_PUSH_U32 rope_off;
    LV_PUSH_U32 tokens;       /* tokens in this dispatch */
    LV_PUSH_U32 heads;
    LV_PUSH_U32 dim;          /* D: key dims = value dims per head */
    LV_PUSH_U32 row_stride;   /* elements from one token to the next in k and v (H * D) */
    LV_PUSH_U32 splits;       /* token splits: split p sums tokens [p * split_tokens, ...) */
    LV_PUSH_U32 split_tokens;
    LV_PUSH_U32 s_slot;       /* elements between the S outputs of consecutive splits */
    LV_PUSH_U32 z_slot;       /* elements between the z outputs of consecutive splits */
    LV_PUSH_U32 accumulate;   /* 1: add to S and z; 0: overwrite them */
    LV_PUSH_U32 row_tiles;    /* ceil(D / TR); row tile row_tiles of each head computes z */
    LV_PUSH_U32 col_tiles;    /* column groups: ceil(ceil(D / 2) / (L * PP)) */
LV_PUSH_END(lv_push_linattn_state)
