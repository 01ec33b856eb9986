/* The lv_dit structure, shared by pipelines/sana_dit.c (forward pass) and
 * pipelines/sana_dit_weights.c (creation, weights, state). */
#ifndef LONGVK_SANA_DIT_INTERNAL_H
#define LONGVK_SANA_DIT_INTERNAL_H

#include "longvk/dit.h"
#include "longvk/ops_linear_attention.h"

#define LV_DIT_MAX_TEXT 4096
#define LV_DIT_TEXT_SLOTS 2

typedef struct lv_dit_block {
    lv_tensor sst;                       /* scale_shift_table [6, C] */
    lv_tensor qkv_w, q_norm, k_norm, proj_w, proj_b;
    lv_tensor cq_w, cq_b, ckv_w, ckv_b, cproj_w, cproj_b, cq_norm, ck_norm;
    lv_tensor inv_w, inv_b, dw_w, dw_b, point_w, tconv_w;
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
};

void lv_dit_text_free(lv_ctx *ctx, lv_dit *dit, int slot);

#endif
