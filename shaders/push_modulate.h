#include "push_common.h"
#include "broadcast_modes.h"

/* Kinds (specialization constant 0 of modulate.comp): out from x and two operands p, q
 * that may broadcast. */
#define LV_MOD_MODULATE 0  /* x * (1 + q) + p: p = shift, q = scale */
#define LV_MOD_ADD_GATED 1 /* x + q * p: p = y, q = gate */

LV_PUSH_BEGIN(lv_push_modulate)
    LV_PUSH_U32 out_offset; /* element offsets of the bound tensors */
    LV_PUSH_U32 x_offset;
    LV_PUSH_U32 p_offset;
    LV_PUSH_U32 q_offset;
    LV_PUSH_U32 count;      /* elements in this dispatch */
    LV_PUSH_U32 cols;       /* C, the last dimension */
    LV_PUSH_U32 cols_magic; /* fast division by cols (shaders/fastdiv.glsl) */
    LV_PUSH_U32 cols_shift;
    LV_PUSH_U32 p_mode;     /* LV_BCAST_*; phase, magic, shift as in push_elementwise.h */
    LV_PUSH_U32 p_phase;
    LV_PUSH_U32 p_magic;
    LV_PUSH_U32 p_shift;
    LV_PUSH_U32 q_mode;
    LV_PUSH_U32 q_phase;
    LV_PUSH_U32 q_magic;
    LV_PUSH_U32 q_shift;
LV_PUSH_END(lv_push_modulate)
