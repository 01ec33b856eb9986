#include "push_common.h"

/* Depthwise 3x3 over a chunk of image rows. Rows are counted globally over [F, H] (row
 * index f * H + y); a row is W * C floats. The input binding holds rows
 * [in_row0, in_row0 + in_rows), which covers the output rows plus their halo. */
LV_PUSH_BEGIN(lv_push_dwconv3x3)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 x_offset;
    LV_PUSH_U32 w_offset;
    LV_PUSH_U32 bias_offset;
    LV_PUSH_U32 has_bias;   /* 0: no bias (binding 3 is a dummy) */
    LV_PUSH_U32 row0;       /* global row of the first output row of this chunk */
    LV_PUSH_U32 rows;       /* output rows in this chunk */
    LV_PUSH_U32 in_row0;    /* global row of the first bound input row */
    LV_PUSH_U32 height;     /* H: rows per frame (zero padding at frame edges) */
    LV_PUSH_U32 width;      /* W */
    LV_PUSH_U32 channels;   /* C */
    LV_PUSH_U32 strips;     /* ceil(W / X_BLOCK): column strips per row */
LV_PUSH_END(lv_push_dwconv3x3)
