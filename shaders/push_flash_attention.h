#include "push_common.h"

/* Single-head flash attention (shaders/flash_attention.comp): queries [nq, d] of this
 * dispatch against all keys and values [nk, d]. */
LV_PUSH_BEGIN(lv_push_flash_attention)
    LV_PUSH_U32 out_offset;
    LV_PUSH_U32 q_offset;
    LV_PUSH_U32 k_offset;
    LV_PUSH_U32 v_offset;
    LV_PUSH_U32 nq;
    LV_PUSH_U32 nk;
    LV_PUSH_U32 d;
    LV_PUSH_F32 scale;
LV_PUSH_END(lv_push_flash_attention)
