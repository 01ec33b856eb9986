/* Linear attention with a carried state (engine/ops_linear_attention.c), exactly as
 * shared/design/linear-attention.md defines it. Layout: q, k, v are [N, H*D] (N tokens,
 * H heads of D dims; head h is channels h*D .. h*D+D-1), as the DiT produces them.
 * A state is S [H, D, D] (row = value dim, column = key dim) and z [H, D].
 *
 *   contribution:  S += sum_n v_n rot_n(phi(k_n))^T      z += sum_n phi(k_n)
 *   query:         o_n = S rot_n(phi(q_n)) [ / (z . phi(q_n) + eps) ]
 *
 * rot_n is the rotary embedding with the rope table row n ([N, D], see lv_op_rope), or
 * nothing when the table is NULL. Never materialises an N x N matrix. */
#ifndef LONGVK_OPS_LINEAR_ATTENTION_H
#define LONGVK_OPS_LINEAR_ATTENTION_H

#include <stdbool.h>

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lv_feature_map { LV_PHI_IDENTITY = 0, LV_PHI_RELU, LV_PHI_ELU1 } lv_feature_map;

/* Parse "identity" / "relu" / "elu1"; returns -1 for anything else. */
int lv_feature_map_parse(const char *name);
const char *lv_feature_map_name(lv_feature_map phi);

/* Write (or, with accumulate, add) the contribution of tokens k, v to S and z. */
lv_status lv_op_linattn_state(lv_ctx *ctx, const lv_tensor *S, const lv_tensor *z,
                              const lv_tensor *k, const lv_tensor *v, const lv_tensor *rope,
                              lv_feature_map phi, bool accumulate);
/* Read the state S, z for queries q into out [N, H*D]; z is unused when !normalize. */
lv_status lv_op_linattn_query(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                              const lv_tensor *S, const lv_tensor *z, const lv_tensor *rope,
                              lv_feature_map phi, bool normalize, float eps);

/* ---- the carried state across blocks ---------------------------------------------- */

typedef enum lv_state_rule { LV_RULE_ADDITIVE = 0, LV_RULE_WINDOW, LV_RULE_DECAY } lv_state_rule;

/* The state one layer carries from block to block. Its size is fixed at creation
 * (window K keeps a ring of K contributions) and never grows with the number of blocks. */
typedef struct lv_linattn_state lv_linattn_state;

typedef struct lv_linattn_config {
    int heads, head_dim;
    lv_feature_map phi;
    bool normalize;
    float eps;
    lv_state_rule rule;
    int window;     /* K for LV_RULE_WINDOW */
    float decay;    /* lambda for LV_RULE_DECAY */
} lv_linattn_config;

lv_status lv_linattn_state_create(lv_ctx *ctx, const lv_linattn_config *cfg, lv_linattn_state **out);
void lv_linattn_state_destroy(lv_ctx *ctx, lv_linattn_state *st);
/* Device bytes held by the state (constant for its lifetime). */
uint64_t lv_linattn_state_bytes(const lv_linattn_state *st);
/* Blocks committed so far. */
int64_t lv_linattn_state_blocks(const lv_linattn_state *st);
/* Read pass: out = attention of block (q, k, v) over carried state + the block's own
 * contribution, without changing the carried state (diffusion denoising passes). */
lv_status lv_linattn_block_read(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                const lv_tensor *rope);
/* Write pass: the same output, and the block's contribution is committed to the state
 * by the state's rule. out may be NULL when only the state is wanted. */
lv_status lv_linattn_block_write(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                 const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                 const lv_tensor *rope);
/* The carried (S, z) as the next block reads them (for tests and resume files). */
lv_status lv_linattn_state_read(lv_ctx *ctx, lv_linattn_state *st, float *S, float *z);

#ifdef __cplusplus
}
#endif
#endif
