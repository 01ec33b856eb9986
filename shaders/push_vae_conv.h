#include "push_common.h"

/* One dispatch of the VAE convolution (shaders/vae_conv.comp, engine/ops/ops_vae.c): output
 * rows [out_row0, out_row0 + rows) of one output frame. The three input-frame bindings
 * are views that start at source row in_row0 of their frame; the output and residual
 * views start at output row out_row0. Offsets are the bindings' element offsets. */
LV_PUSH_BEGIN(lv_push_vae_conv)
    LV_PUSH_U32 out_off;
    LV_PUSH_U32 in_off0;   /* input frame read by weight frame 0 (t - 2 for a 3-D conv) */
    LV_PUSH_U32 in_off1;   /* weight frame 1 (t - 1) */
    LV_PUSH_U32 in_off2;   /* weight frame 2 (t) */
    LV_PUSH_U32 w_off;
    LV_PUSH_U32 bias_off;
    LV_PUSH_U32 res_off;
    LV_PUSH_U32 flags;     /* bits 0-2: input frame f is read (else it is zeros);
                              bit 3: add bias; bit 4: add residual */
    LV_PUSH_U32 ci;        /* input channels */
    LV_PUSH_U32 co;        /* output channels (of this dispatch's weight rows) */
    LV_PUSH_U32 kt;        /* weight frames in the packed layout (3 or 1) */
    LV_PUSH_U32 src_h;     /* source frame height and width (before the optional 2x) */
    LV_PUSH_U32 src_w;
    LV_PUSH_U32 out_row0;  /* absolute output row of the first row of this dispatch */
    LV_PUSH_U32 rows;      /* output rows in this dispatch */
    LV_PUSH_U32 in_row0;   /* absolute source row at which the input views start */
LV_PUSH_END(lv_push_vae_conv)
