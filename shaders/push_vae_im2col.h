#include "push_common.h"

/* One dispatch of the VAE convolution's column gather (shaders/vae_im2col.comp,
 * engine/ops/ops_vae.c, the tensor-core path): output rows [out_row0, out_row0 + rows) of one
 * output frame as the rows of a matrix col [rows * out_w, K], K = kt * KS * KS * ci, whose
 * column (f, dy, dx, i) is input channel i of frame f at tap (dy, dx): the packed weight
 * [co, kt, KS, KS, ci] seen as [co, K] times col^T is the convolution. Input views start at
 * source row in_row0 of their frame, as the convolution's own (push_vae_conv.h). */
LV_PUSH_BEGIN(lv_push_vae_im2col)
    LV_PUSH_U32 col_off;   /* element offsets of the bindings */
    LV_PUSH_U32 in_off0;   /* input frame read by weight frame 0 (t - 2 for a 3-D conv) */
    LV_PUSH_U32 in_off1;
    LV_PUSH_U32 in_off2;
    LV_PUSH_U32 flags;     /* bits 0-2: input frame f is read (else its columns are zeros) */
    LV_PUSH_U32 ci;        /* input channels */
    LV_PUSH_U32 kt;        /* weight frames (3 or 1): K = kt * KS * KS * ci */
    LV_PUSH_U32 src_h;     /* source frame height and width (before the optional 2x) */
    LV_PUSH_U32 src_w;
    LV_PUSH_U32 out_row0;  /* absolute output row of the first row of this dispatch */
    LV_PUSH_U32 rows;      /* output rows in this dispatch */
    LV_PUSH_U32 in_row0;   /* absolute source row at which the input views start */
    LV_PUSH_U32 groups;    /* col elements / (VEC ? 4 : 1): the invocations that write */
LV_PUSH_END(lv_push_vae_im2col)
