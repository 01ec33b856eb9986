/* Shared by the linear-attention sources (ops_linear_attention.c, linattn_state.c). Not
 * installed. */
#ifndef LONGVK_LINATTN_INTERNAL_H
#define LONGVK_LINATTN_INTERNAL_H

#include "longvk/ops_linear_attention.h"
#include "lv_internal.h"

/* Kernel shapes for one device (see the comments of shaders/linattn_state.comp and
 * linattn_query.comp). CPU devices (lavapipe) need no token splitting; GPUs split the
 * token loop of the state kernel into partial states so that enough workgroups run.
 * For tests and tuning, LONGVK_LINATTN_TILES="TR,PP,TT,TQ" (state: value rows per
 * workgroup, column pairs per lane; query: tokens per lane, value rows per workgroup)
 * LONGVK_LINATTN_SPLITS=P and LONGVK_LINATTN_BCAST=0|1 override the choice. */
typedef struct lv_linattn_tiles {
    uint32_t local;              /* the most invocations per workgroup (a multiple of 8) */
    uint32_t state_tr, state_pp; /* state: the most value rows per workgroup, key column pairs per lane */
    uint32_t query_tt, query_tr; /* query: tokens per lane, the most value rows per workgroup */
    uint32_t splits;             /* token splits of the state kernel (1: none) */
    uint32_t bcast;              /* 1: share loads through subgroupBroadcast (subgroups of 8) */
} lv_linattn_tiles;

void lv_linattn_tiles_choose(const lv_ctx *ctx, lv_linattn_tiles *t);

/* The contribution of tokens k, v (each [N, H*D]) written to (or added to) `splits`
 * partial states: split p sums its share of the tokens into S at element p * s_slot of
 * the S binding and z at p * z_slot of the z binding. splits == 1 is lv_op_linattn_state.
 * Splits over tokens when k, v or rope exceed the device's binding range. */
lv_status lv_linattn_contribution(lv_ctx *ctx, int heads, int dim, const lv_tensor *S,
                                  const lv_tensor *z, uint32_t splits, uint32_t s_slot,
                                  uint32_t z_slot, const lv_tensor *k, const lv_tensor *v,
                                  const lv_tensor *rope, lv_feature_map phi, bool accumulate);

/* out = alpha * sum_{s < na} a[s] + beta * b, where a holds na consecutive slots the size
 * of out and b (same size as out, may be out itself, or NULL for none). */
lv_status lv_linattn_combine(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, int na,
                             float alpha, const lv_tensor *b, float beta);

/* Token count of a [N, H*D] (or [N, H, D]) f32 tensor, checked; `what` names it. */
lv_status lv_linattn_tokens(const char *what, const lv_tensor *t, int heads, int dim, int64_t *n);
/* Check a rope table [N, D] f32 with D even. */
lv_status lv_linattn_check_rope(const lv_tensor *rope, int64_t n, int dim);

#endif
