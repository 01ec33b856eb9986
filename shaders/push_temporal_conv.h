#include "push_common.h"

/* One tap of the temporal conv as a row-blocked matrix product over pixel rows:
 *   out[r, o] (+)= sum_i w[o, i, tap] * in[r, i]
 * where in and out are [rows, C] views already shifted by whole frames by the wrapper. */
LV_PUSH_BEGIN(lv_push_temporal_conv)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 in_offset;
    LV_PUSH_U32 w_offset;
    LV_PUSH_U32 rows;       /* pixel rows in this dispatch */
    LV_PUSH_U32 channels;   /* C */
    LV_PUSH_U32 tap;        /* 0, 1 or 2: which w[., ., t] */
    LV_PUSH_U32 accumulate; /* 0: out = result; 1: out += result */
LV_PUSH_END(lv_push_temporal_conv)
