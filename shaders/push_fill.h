#include "push_common.h"

LV_PUSH_BEGIN(lv_push_fill)
    LV_PUSH_U32 offset; /* element offset of the bound tensor */
    LV_PUSH_U32 count;  /* elements to write */
    LV_PUSH_F32 value;
LV_PUSH_END(lv_push_fill)
