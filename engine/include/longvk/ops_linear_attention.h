/* Linear attention with a carried state (engine/ops/ops_linear_attention.c, linattn_state.c),
 * exactly as engine/linear-attention.md defines it. Layout: q, k, v are [N, H*D]
 * (or [N, H, D]; N tokens, H heads of D dims; head h is channels h*D .. h*D+D-1), as the
 * DiT produces them. A state is S [H, D, D] (row = value dim, column = key dim) and
 * z [H, D]. All tensors f32.
 *
 *   contribution:  S += sum_n v_n rot_n(phi(k_n))^T      z += sum_n phi(k_n)
 *   query:         o_n = S rot_n(phi(q_n)) [ / (z . phi(q_n) + eps) ]
 *
 * phi is applied inside the kernels. rot_n is the rotary embedding with the rope table
 * row n ([N, D] of (cos, sin) per adjacent pair, D even; the convention of lv_op_rope:
 * out[2i] = x[2i] c - x[2i+1] s, out[2i+1] = x[2i] s + x[2i+1] c), or nothing when the
 * table is NULL. z and the denominator always use the unrotated phi. Never materialises
 * an N x N matrix; tensors larger than one binding (lv_ctx_max_binding) are processed in
 * runs of tokens; the state itself must fit in one binding (LV_ERR_LIMIT otherwise). */
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

/* Write (or, with accumulate, add) the contribution of tokens k, v to S and z.
 * k and v have the same token count; rope is [N, D] or NULL. */
lv_status lv_op_linattn_state(lv_ctx *ctx, const lv_tensor *S, const lv_tensor *z,
                              const lv_tensor *k, const lv_tensor *v, const lv_tensor *rope,
                              lv_feature_map phi, bool accumulate);
/* Read the state S, z for queries q into out [N, H*D]; z is unused (may be NULL) when
 * !normalize. rope is [N, D] or NULL. out must not overlap q. */
lv_status lv_op_linattn_query(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                              const lv_tensor *S, const lv_tensor *z, const lv_tensor *rope,
                              lv_feature_map phi, bool normalize, float eps);

/* ---- the carried state across blocks ---------------------------------------------- */

typedef enum lv_state_rule { LV_RULE_ADDITIVE = 0, LV_RULE_WINDOW, LV_RULE_DECAY } lv_state_rule;

/* The state one layer carries from block to block. C_b is block b's contribution
 * (sum over its tokens, as lv_op_linattn_state computes it) and the carried state after
 * committing block b is, by rule:
 *
 *   additive   S_b = S_{b-1} + C_b                 (SANA-Video / LongSANA default)
 *   window K   S_b = C_{b-K+1} + ... + C_b         (LongSANA num_cached_blocks = K: a ring
 *                                                   of the last K committed contributions,
 *                                                   re-summed every block, never subtracted)
 *   decay      S_b = lambda S_{b-1} + C_b          (RetNet-style forgetting)
 *
 * z follows the same rule. The queries of block b read the carried state combined with
 * the block's own contribution: S_{b-1} + C_b for additive and window K (so a block sees
 * itself and the K blocks before it), lambda S_{b-1} + C_b for decay. All device memory is
 * allocated at creation; its size never grows with the number of blocks
 * (lv_linattn_state_bytes). */
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
/* Device bytes held by the state, scratch included (constant for its lifetime). */
uint64_t lv_linattn_state_bytes(const lv_linattn_state *st);
/* Token splits of the state pass on this context (LONGVK_LINATTN_SPLITS or the device's
 * default): a state holds one more slot per split when there are more than one. */
uint32_t lv_linattn_splits(const lv_ctx *ctx);
/* Blocks committed so far. */
int64_t lv_linattn_state_blocks(const lv_linattn_state *st);
/* Read pass: out = attention of block (q, k, v) over carried state + the block's own
 * contribution, without changing the carried state (diffusion denoising passes). q, k, v
 * and out are [n, H*D] with the same n (any n, blocks may differ in size; out must not
 * overlap q); rope is [n, D] or NULL. Recorded in the stream like any op. */
lv_status lv_linattn_block_read(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                const lv_tensor *rope);
/* Write pass: the same output, and the block's contribution is committed to the state
 * by the state's rule. out may be NULL when only the state is wanted (q is then unused). */
lv_status lv_linattn_block_write(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                 const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                 const lv_tensor *rope);
/* A block whose contribution was summed elsewhere: sequence parallelism splits a block's
 * tokens into bands (pipelines/parallel/README.md), each band computes its part of the
 * contribution with lv_op_linattn_state, and the parts are summed in a fixed order. Then:
 *
 *   lv_linattn_block_begin(own)     the block's queries read carried (+) own from now on
 *   lv_linattn_block_query(...)     once per band: out = its queries over that state
 *   lv_linattn_block_commit()       write pass only: own committed by the state's rule
 *
 * begin + query is exactly lv_linattn_block_read, begin + query + commit exactly
 * lv_linattn_block_write, with `own` in place of the contribution of the block's k, v.
 * own is one state slot: lv_linattn_state_slot_floats floats, S [H, D, D] then z [H, D]
 * (e.g. [1, M] or [M]), f32. Queries after a commit (or before a begin) are an error. */
int64_t lv_linattn_state_slot_floats(const lv_linattn_state *st);
const lv_linattn_config *lv_linattn_state_config(const lv_linattn_state *st);
lv_status lv_linattn_block_begin(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *own);
/* q and out [n, H*D] (any n: a band of the block), rope [n, D] or NULL. */
lv_status lv_linattn_block_query(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                 const lv_tensor *q, const lv_tensor *rope);
lv_status lv_linattn_block_commit(lv_ctx *ctx, lv_linattn_state *st);
/* The carried (S, z) after the last committed block (S_b above: for the window rule the
 * sum of the ring, for decay before the next block's lambda), into host arrays of H*D*D
 * and H*D floats (either may be NULL). Flushes the stream. */
lv_status lv_linattn_state_read(lv_ctx *ctx, lv_linattn_state *st, float *S, float *z);

/* Saving and restoring a state exactly (resume files): the floats that carry it (the
 * carried slot, or the window's ring of K slots), and the blocks committed. */
int64_t lv_linattn_state_saved_floats(const lv_linattn_state *st);
/* The tensor those floats are in (valid until the state is destroyed), for checks on the
 * device such as lv_op_count_nonfinite. */
const lv_tensor *lv_linattn_state_tensor(const lv_linattn_state *st);
lv_status lv_linattn_state_save(lv_ctx *ctx, lv_linattn_state *st, float *data);
lv_status lv_linattn_state_load(lv_ctx *ctx, lv_linattn_state *st, const float *data, int64_t blocks);

#ifdef __cplusplus
}
#endif
#endif
