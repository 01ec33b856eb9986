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

/* The dtype a matmul weight of rows of `k` stored as `stored` has on the device when
 * lv_gemma2_options.weight_dtype is `requested` (-1: as stored). Quantized weights in the
 * file stay as they are (f32 only when asked: dequantised); q8_0 / q4_k asked of a float file
 * fall back where rows are not whole blocks: q4_k to q8_0, q8_0 to the stored dtype, as the
 * DiT's --weights-dtype does. One rule for the upload and the memory plan. */
lv_dtype g2_matmul_dtype(int requested, int64_t k, lv_dtype stored);
/* The dtype norms and embedding rows are rounded to: the stored one, or a float
 * weight_dtype asked for (a quantized one leaves them as stored). */
lv_dtype g2_param_dtype(int requested, lv_dtype stored);

/* The checked tensors of a layer (pointers into the mapped files). */
const lv_weight *const *g2_file_layer(const lv_gemma2_file *f, int layer);
const lv_weight *g2_file_embed(const lv_gemma2_file *f);
const lv_weight *g2_file_norm(const lv_gemma2_file *f);
/* 1 when the file stores Gemma's norm weights as the scale 1 + w (llama.cpp's GGUF files:
 * its converter adds the 1), 0 when as the offset w (Hugging Face's checkpoints). */
int g2_file_norms_hold_one(const lv_gemma2_file *f);

/* ---- llama.cpp's GGUF files (gemma2_gguf.c) ---------------------------------------------- */

/* 1 when `set` is one GGUF file under llama.cpp's names (it holds token_embd.weight). */
int g2_gguf_has_llama_names(const lv_weight_set *set);
/* llama.cpp's name of the tensor Hugging Face names `name` (without "model."): "blk.3.attn_q.weight"
 * for "layers.3.self_attn.q_proj.weight"; `name` itself when it has none. */
const char *g2_gguf_name(const char *name, char *buf, size_t size);
/* The config from the file's gemma2.* metadata (general.architecture must be "gemma2"). */
lv_status g2_gguf_config(const lv_weights *w, const char *path, lv_gemma2_config *c);

#endif
