/* The lv_dit structure, shared by pipelines/sana/sana_dit.c (forward pass) and
 * pipelines/sana/sana_dit_weights.c (creation, weights, state). */
#ifndef LONGVK_SANA_DIT_INTERNAL_H
#define LONGVK_SANA_DIT_INTERNAL_H

#include "longvk/dit.h"
#include "longvk/ops_linear_attention.h"
#include "longvk/sp_comm.h"

#define LV_DIT_MAX_TEXT 4096

/* sana_dit_weights.c, shared with the memory plan (sana_dit_plan.c): the dtype of matmul
 * weights under a rule (-1: as stored), and a quantized dtype where rows of `k` are whole
 * blocks of it, else q4_k falls back to q8_0, q8_0 to `stored` (the DiT's K = 2240 is not
 * whole q4_k blocks of 256). */
int lv_dit_matmul_dtype(lv_dit_weights rule);
lv_dtype lv_dit_rows_fit(lv_dtype dtype, int64_t k, lv_dtype stored);
#define LV_DIT_TEXT_SLOTS 2

/* The timestep conditioning of a pass: it depends only on the pass's per-frame timesteps,
 * and a sampler uses a handful of them over and over, so each is computed once and kept
 * (pipelines/sana/sana_dit.c). 6 entries: LongSANA's 4 steps and the write pass fit. */
#define LV_DIT_COND_CACHE 6
#define LV_DIT_COND_MAX_FRAMES 64

typedef struct lv_dit_cond {
    int frames;          /* 0: empty; -1: computed for a pass too long to be reused */
    float t[LV_DIT_COND_MAX_FRAMES];
    uint64_t used;       /* for least-recently-used eviction */
    lv_tensor temb;      /* [F, C] */
    lv_tensor *mod;      /* per block [6F, C]: scale_shift_table[j] + t_block(temb)[j] at row j*F + f */
    lv_tensor shift, scale; /* final layer [F, C] */
} lv_dit_cond;

typedef struct lv_dit_block {
    lv_tensor sst;                       /* scale_shift_table [6, C] */
    lv_tensor qkv_w, q_norm, k_norm, proj_w, proj_b;
    lv_tensor cq_w, cq_b, ckv_w, ckv_b, cproj_w, cproj_b, cq_norm, ck_norm;
    lv_tensor inv_w, inv_b, dw_w, dw_b, point_w;
    /* the temporal conv's weight: [C, C, 3] f32 for the direct kernel, or tap-major
     * [3, C, C] in the matmul weights' dtype where it runs as products (tconv_taps:
     * lv_temporal_conv_uses_gemm, GPUs) */
    lv_tensor tconv_w;
    bool tconv_taps;
    lv_tensor text_k[LV_DIT_TEXT_SLOTS], text_v[LV_DIT_TEXT_SLOTS]; /* [L, C] per text slot */
    lv_linattn_state *state;             /* carried (S, z) */
    lv_tensor conv_cache;                /* [P, C] last frame before the temporal conv */
    bool conv_valid;
} lv_dit_block;

struct lv_dit {
    lv_sana_config cfg;
    lv_dit_options opt;
    lv_tensor x_embed_w, x_embed_b;
    lv_tensor t_mlp0_w, t_mlp0_b, t_mlp2_w, t_mlp2_b, t_block_w, t_block_b;
    lv_tensor y_fc1_w, y_fc1_b, y_fc2_w, y_fc2_b, y_norm_w;
    lv_tensor final_w, final_b, final_sst;
    lv_dit_block *blocks;
    lv_tensor text_mask[LV_DIT_TEXT_SLOTS];
    int text_tokens[LV_DIT_TEXT_SLOTS];
    int64_t chunks;
    uint64_t state_bytes;
    lv_dit_tap tap;
    void *tap_user;
    lv_dit_cond cond[LV_DIT_COND_CACHE];
    uint64_t cond_clock;
    lv_sp_comm *sp;      /* the bands' communicator (pipelines/sana/sana_dit_bands.c): made for
                            sp_bands, or the caller's sp_comm (sp_borrowed: not freed here) */
    bool sp_borrowed;
    int conv_rows;       /* token rows of the conv caches' frame when the bands last wrote
                            them: with bands on other processes each holds only its rows,
                            which lv_dit_state_save gathers; 0 when they are whole (loaded) */
    int ffn_slice_tokens; /* lv_dit_ffn_slice_tokens at creation */
    lv_tensor checks;    /* I32 [(1 + depth) x 4]: non-finite counts of a pass (lv_op_count_nonfinite):
                            slot 0 the prediction, slot 1 + b layer b's carried state */
};

/* Scratch tensors of one pass, freed at its end. */
#define LV_DIT_SCRATCH_MAX 48
typedef struct lv_dit_scratch {
    lv_ctx *ctx;
    lv_tensor t[LV_DIT_SCRATCH_MAX];
    int n;
} lv_dit_scratch;

void lv_dit_text_free(lv_ctx *ctx, lv_dit *dit, int slot);

/* Pieces of the forward (sana_dit.c) shared by the band-split forward (sana_dit_bands.c). */
lv_status lv_dit_timestep_conditioning(lv_ctx *ctx, lv_dit *dit, lv_dit_scratch *s, const float *ts, int F,
                                       const lv_dit_cond **out);
/* The same for a pass: its timesteps taken per token frame (one of every patch[0] frames). */
lv_status lv_dit_pass_conditioning(lv_ctx *ctx, lv_dit *dit, lv_dit_scratch *s, const lv_dit_pass *pass,
                                   const lv_dit_cond **out);
/* x [C_in, F, H, W] -> patches [T, C_in * pt * ph * pw]; final tokens -> out [C_out, F, H, W] */
void lv_dit_gather_patches(const lv_sana_config *cfg, const float *x, int F, int H, int W, float *patches);
void lv_dit_unpatchify(const lv_sana_config *cfg, const float *tokens, int F, int H, int W, float *out);
/* The linear attention's inputs: h = adaLN(x) (modulations t0[0], t0[1]), then q, k, v of h
 * with the q and k RMS norms; h, q, k, v: [T, C] scratch */
lv_status lv_dit_block_qkv(lv_ctx *ctx, const lv_dit *dit, const lv_dit_block *blk, const lv_tensor *x,
                           lv_tensor *const t0[6], const lv_tensor *h, const lv_tensor *q, const lv_tensor *k,
                           const lv_tensor *v);
/* x += cross-attention of x's tokens over the text of `slot`; q, o: [T, C] scratch */
lv_status lv_dit_block_cross_attention(lv_ctx *ctx, lv_dit *dit, lv_dit_block *blk, const lv_tensor *q,
                                       const lv_tensor *o, const lv_tensor *x, int slot);
/* The non-finite checks: slot 0 the prediction, 1 + b layer b's carried state. */
lv_tensor lv_dit_check_slot(lv_dit *dit, int slot);
lv_status lv_dit_count_state(lv_ctx *ctx, lv_dit *dit);
lv_status lv_dit_state_verdict(lv_ctx *ctx, lv_dit *dit);
/* LV_OK when nan + inf == 0, else the error naming the first bad value (token-major index). */
lv_status lv_dit_prediction_status(uint32_t nan, uint32_t inf, int64_t first, int64_t tokens, int64_t channels);
/* The pass split into the bands of dit->sp (sana_dit_bands.c); pass already checked. */
lv_status lv_dit_forward_bands(lv_ctx *ctx, lv_dit *dit, const lv_dit_pass *pass, lv_dit_scratch *s, float *out);
void lv_dit_cond_free(lv_ctx *ctx, lv_dit *dit, lv_dit_cond *c);

#endif
