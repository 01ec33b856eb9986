#include "push_common.h"

/* Temporal conv (kernel 3 over frames) of a chunk of output pixel rows; rows are counted
 * globally over [F, P] (row = f * P + p) and are C floats each:
 *   out[R, o] (+)= sum_{t in taps} sum_i w[o, i, t] * src(R, t)[i]
 * where output row R = f * P + p reads, for tap t, source frame s = f + t - 1 + frame_shift:
 * source row s * P + p if 0 <= s < src_frames, else zeros. The source binding holds
 * source rows from in_row0 on (the wrapper binds the halo the chunk needs); the output
 * binding holds exactly rows [row0, row0 + rows). */
LV_PUSH_BEGIN(lv_push_temporal_conv)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 in_offset;
    LV_PUSH_U32 w_offset;
    LV_PUSH_U32 row0;       /* global row of the first output row of this dispatch */
    LV_PUSH_U32 rows;       /* output rows in this dispatch */
    LV_PUSH_U32 in_row0;    /* global source row at the start of the source binding */
    LV_PUSH_U32 pixels;     /* P: rows per frame */
    LV_PUSH_U32 src_frames; /* frames of the source */
    LV_PUSH_I32 frame_shift;
    LV_PUSH_U32 channels;   /* C */
    LV_PUSH_U32 tap_mask;   /* bit t set: tap t is summed */
    LV_PUSH_U32 accumulate; /* 0: out = result; 1: out += result */
LV_PUSH_END(lv_push_temporal_conv)
