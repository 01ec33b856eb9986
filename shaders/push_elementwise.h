#include "push_common.h"
#include "broadcast_modes.h"

/* Element kinds (specialization constant 0 of elementwise.comp). */
#define LV_ELT_ADD 0       /* a + b */
#define LV_ELT_MUL 1       /* a * b */
#define LV_ELT_SCALE_ADD 2 /* alpha a + beta b */
#define LV_ELT_SILU 3      /* a / (1 + exp(-a)) */
#define LV_ELT_GELU_TANH 4 /* 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) */
#define LV_ELT_RELU 5      /* max(a, 0) */
#define LV_ELT_MUL_SILU 6  /* a * silu(b): the Mix-FFN's gate */
#define LV_ELT_MUL_GELU_TANH 7 /* a * gelu_tanh(b): the Gemma MLP's gate */

LV_PUSH_BEGIN(lv_push_elementwise)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 a_offset;
    LV_PUSH_U32 b_offset;
    LV_PUSH_U32 count;      /* elements in this dispatch */
    LV_PUSH_U32 cols;       /* C, the last dimension */
    LV_PUSH_U32 cols_magic; /* fast division by cols (shaders/fastdiv.glsl) */
    LV_PUSH_U32 cols_shift;
    LV_PUSH_U32 b_mode;     /* LV_BCAST_* */
    LV_PUSH_U32 b_phase;    /* rows of b's first group before this dispatch's first row */
    LV_PUSH_U32 b_magic;    /* fast division by b's rows per group */
    LV_PUSH_U32 b_shift;
    LV_PUSH_F32 alpha;
    LV_PUSH_F32 beta;
LV_PUSH_END(lv_push_elementwise)
