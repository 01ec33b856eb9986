#include "push_common.h"

LV_PUSH_BEGIN(lv_push_layernorm)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 x_offset;
    LV_PUSH_U32 w_offset;
    LV_PUSH_U32 b_offset;
    LV_PUSH_U32 rows;       /* rows in this dispatch */
    LV_PUSH_U32 cols;       /* C: the normalised (last) dimension */
    LV_PUSH_F32 eps;
    LV_PUSH_U32 group_rows;  /* MODULATE: rows per row of scale / shift */
    LV_PUSH_U32 group_phase; /* MODULATE: rows before this dispatch's first row in its group */
LV_PUSH_END(lv_push_layernorm)
