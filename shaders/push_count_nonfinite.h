#include "push_common.h"

LV_PUSH_BEGIN(lv_push_count_nonfinite)
    LV_PUSH_U32 counts_offset; /* element offset of the counts (3 uint32: NaN, inf, ~first) */
    LV_PUSH_U32 x_offset;      /* element offset of x in its texel binding */
    LV_PUSH_U32 count;         /* elements of x in this dispatch */
    LV_PUSH_U32 base;          /* index of this dispatch's first element in the counted whole */
LV_PUSH_END(lv_push_count_nonfinite)
