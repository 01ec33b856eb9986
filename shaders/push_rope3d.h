#include "push_common.h"

LV_PUSH_BEGIN(lv_push_rope3d)
    LV_PUSH_U32 out_offset;  /* element offsets of the bound tensors */
    LV_PUSH_U32 x_offset;
    LV_PUSH_U32 t_offset;
    LV_PUSH_U32 units;       /* tokens in this dispatch x units per head */
    LV_PUSH_U32 head_units;  /* units per head: D/2 pairs, or D/4 pairs of pairs (VEC4) */
    LV_PUSH_U32 unit_magic;  /* fast division by head_units (shaders/fastdiv.glsl) */
    LV_PUSH_U32 unit_shift;
    LV_PUSH_U32 half_dim;    /* D/2 */
    LV_PUSH_U32 heads;       /* H: x rows are H * D wide */
LV_PUSH_END(lv_push_rope3d)
