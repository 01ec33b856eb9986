/* How an operand of a row-wise op follows the output's element (row, col): shared by C
 * (engine/ops/ops_elementwise.c) and GLSL (shaders/broadcast.glsl). */
#ifndef LONGVK_BROADCAST_MODES_H
#define LONGVK_BROADCAST_MODES_H

#define LV_BCAST_FULL 0    /* same shape: the same index */
#define LV_BCAST_GROUPS 1  /* [G, C]: operand row (row + phase) / rows_per_group, col */
#define LV_BCAST_CHANNEL 2 /* [1, C]: col */

#endif
