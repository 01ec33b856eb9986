/* Row layouts of the norm shaders (specialization constant 1, see shaders/row_reduce.glsl),
 * shared by C (engine/ops/ops_norm.c) and GLSL. */
#ifndef LONGVK_NORM_MODES_H
#define LONGVK_NORM_MODES_H

#define LV_ROWS_PER_WORKGROUP 0
#define LV_ROWS_PER_SUBGROUP 1

#endif
