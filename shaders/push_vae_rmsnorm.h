#include "push_common.h"

/* The VAE's channel RMS norm (shaders/vae_rmsnorm.comp): rows of `cols` channels. */
LV_PUSH_BEGIN(lv_push_vae_rmsnorm)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 x_offset;
    LV_PUSH_U32 g_offset;
    LV_PUSH_U32 rows;       /* rows in this dispatch */
    LV_PUSH_U32 cols;       /* C */
    LV_PUSH_U32 silu;       /* 1: apply SiLU after the norm */
    LV_PUSH_F32 sqrt_cols;  /* sqrt(C), computed on the host as float(sqrt(double(C))) */
LV_PUSH_END(lv_push_vae_rmsnorm)
