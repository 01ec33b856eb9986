/* Inside the Gemma-2 encoder (pipelines/gemma2): the tensors of a layer, and helpers shared
 * by the config, file and device code. */
#ifndef LONGVK_GEMMA2_INTERNAL_H
#define LONGVK_GEMMA2_INTERNAL_H

#include <stddef.h>

#include "longvk/gemma2.h"

/* The tensors of one decoder layer, in this order, under "layers.N." (names without the
 * checkpoint's prefix). */
enum {
    G2_IN_NORM = 0,
    G2_Q,
    G2_K,
    G2_V,
    G2_O,
    G2_POST_ATTN_NORM,
    G2_PRE_FF_NORM,
    G2_GATE,
    G2_UP,
    G2_DOWN,
    G2_POST_FF_NORM,
    G2_LAYER_TENSORS
};

/* "self_attn.q_proj.weight", ... */
extern const char *const g2_layer_names[G2_LAYER_TENSORS];
/* 1 for the matmul weights (kept in their dtype on the device), 0 for norm weights */
extern const int g2_layer_is_matmul[G2_LAYER_TENSORS];
/* The shape tensor t of a layer must have under config c. */
void g2_layer_shape(const lv_gemma2_config *c, int t, int64_t shape[2], int *ndim);

/* The checked tensors of a layer (pointers into the mapped files). */
const lv_weight *const *g2_file_layer(const lv_gemma2_file *f, int layer);
const lv_weight *g2_file_embed(const lv_gemma2_file *f);
const lv_weight *g2_file_norm(const lv_gemma2_file *f);


#endif
