/* Push constants of shaders/linattn_combine.comp (engine/ops/ops_linear_attention.c). */
#include "push_common.h"

LV_PUSH_BEGIN(lv_push_linattn_combine)
    LV_PUSH_U32 out_off;      /* element offsets of the bound tensors */
    LV_PUSH_U32 a_off;
    LV_PUSH_U32 b_off;
    LV_PUSH_U32 count;        /* elements of out */
    LV_PUSH_U32 na;           /* slots of a summed */
    LV_PUSH_U32 a_stride;     /* elements between consecutive slots of a */
    LV_PUSH_F32 alpha;
    LV_PUSH_F32 beta;         /* 0: b is not read at all (it may hold anything) */
LV_PUSH_END(lv_push_linattn_combine)
