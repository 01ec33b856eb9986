/* Push constants of the matrix multiply (shaders/matmul_reg.comp, shaders/matmul_tiled.comp;
 * engine/ops/ops_matmul.c). One dispatch computes a chunk: out[z, m, n] for z < gl_NumWorkGroups.z,
 * m < M, n < N of bound views that start at the chunk's first element. Offsets and strides
 * are in elements of each binding's dtype (w: elements, read as 32-bit words for 16-bit
 * dtypes); a and w rows are K-contiguous. A q8_0 or q4_K w (shaders/quant.glsl) is rows of
 * whole blocks: w_off counts bytes, w_batch still weights. */
#include "push_common.h"

LV_PUSH_BEGIN(lv_push_matmul)
    LV_PUSH_U32 M;          /* rows of this chunk */
    LV_PUSH_U32 N;          /* columns of this chunk */
    LV_PUSH_U32 K;          /* reduction length (row length of a and w) */
    LV_PUSH_U32 a_off;      /* element offsets of the bound views (lv_binding.elem_offset) */
    LV_PUSH_U32 w_off;      /* (bytes for a q8_0 / q4_K w) */
    LV_PUSH_U32 bias_off;
    LV_PUSH_U32 out_off;
    LV_PUSH_U32 ldo;        /* row stride of out (the full N) */
    LV_PUSH_U32 a_batch;    /* element strides between batches (workgroup z) */
    LV_PUSH_U32 w_batch;    /* 0 when w is shared by every batch */
    LV_PUSH_U32 out_batch;
    LV_PUSH_U32 has_bias;
    LV_PUSH_U32 act;        /* lv_activation: 0 none, 1 SiLU, applied as outputs are stored */
    LV_PUSH_U32 accumulate; /* 1: out += the result (a residual add fused into the store) */
LV_PUSH_END(lv_push_matmul)
