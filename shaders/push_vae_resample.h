#include "push_common.h"

/* Gather copies of the VAE (shaders/vae_resample.comp): one output frame per dispatch,
 * rows [row0, row0 + rows) of it.
 *   mode 0, nearest 2x upsample: out[y, x, c] = in[y >> 1, x >> 1, c] (out is 2H x 2W);
 *   mode 1, channel halves:      out[y, x, c] = in[y, x, half * C + c] (in has 2C channels). */
LV_PUSH_BEGIN(lv_push_vae_resample)
    LV_PUSH_U32 out_offset;
    LV_PUSH_U32 in_offset;
    LV_PUSH_U32 mode;
    LV_PUSH_U32 out_w;      /* output width */
    LV_PUSH_U32 channels;   /* output channels C */
    LV_PUSH_U32 rows;       /* output rows in this dispatch */
    LV_PUSH_U32 row0;       /* absolute output row of the first one */
    LV_PUSH_U32 in_row0;    /* absolute input row at which the input view starts */
    LV_PUSH_U32 in_w;       /* input width */
    LV_PUSH_U32 in_channels;
    LV_PUSH_U32 half_sel;   /* mode 1: which half (0 or 1) */
LV_PUSH_END(lv_push_vae_resample)
