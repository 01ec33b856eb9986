/* Gemma-2 (Gemma2Model, no LM head) on the engine: SANA-Video's text encoder. The
 * specification it follows: pipelines/gemma2/README.md.
 *
 *   lv_gemma2_file *f;                    host side: config, checked tensors, no device work
 *   lv_gemma2_file_open("gemma-2-2b-it/", NULL, &f);
 *   lv_gemma2 *enc;                       the weights on the device
 *   lv_gemma2_create(ctx, f, NULL, &enc);
 *   lv_gemma2_encode(enc, ids, n, hidden);   float [n, hidden_size], the last hidden state
 *   lv_gemma2_destroy(enc); lv_gemma2_file_close(f);
 *
 * Tokens come from longvk/tokenizer.h (LV_TOKENIZE_GEMMA: <bos> first, no <eos>). Inputs
 * are one unpadded sequence at positions 0..n-1: with causal attention and right padding,
 * the valid rows of a padded batch do not depend on the pads (README, section 0). */
#ifndef LONGVK_GEMMA2_H
#define LONGVK_GEMMA2_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "longvk/engine.h"
#include "longvk/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LV_GEMMA2_MAX_LAYERS 256

typedef struct lv_gemma2_config {
    int vocab_size;
    int hidden_size;
    int intermediate_size;
    int num_layers;
    int num_heads;
    int num_kv_heads;               /* divides num_heads: query head h reads kv head
                                       h / (num_heads / num_kv_heads) */
    int head_dim;
    double query_pre_attn_scalar;   /* attention scale = query_pre_attn_scalar^-0.5 */
    double rms_norm_eps;
    double rope_theta;
    double attn_logit_softcapping;  /* 0: none in the config */
    double final_logit_softcapping; /* the LM head's; unused here (no head) */
    int sliding_window;             /* 0: none */
    int max_position_embeddings;
    int pad_token_id, eos_token_id, bos_token_id;
    unsigned char sliding[LV_GEMMA2_MAX_LAYERS]; /* 1: layer i attends within the window
                                       (config layer_types; default: even layers) */
} lv_gemma2_config;

/* google/gemma-2-2b-it (transformers' Gemma2Config defaults). */
void lv_gemma2_config_default(lv_gemma2_config *cfg);
/* A Hugging Face config.json object (model_type "gemma2"; a "text_config" object inside is
 * used when present). Keys absent take the 2B defaults; values out of range are
 * LV_ERR_INVALID naming `source` and the key. */
lv_status lv_gemma2_config_parse(const char *json, size_t len, const char *source, lv_gemma2_config *out);
lv_status lv_gemma2_config_load(const char *path, lv_gemma2_config *out);
/* "hidden 2304, 26 layers, 8 heads (4 kv) x 256, MLP 9216, vocab 256000, window 4096" */
const char *lv_gemma2_config_describe(const lv_gemma2_config *cfg, char *buf, size_t size);

/* ---- the model files ------------------------------------------------------------------ */

typedef struct lv_gemma2_file lv_gemma2_file;

/* `path`: a safetensors file; a *.safetensors.index.json (shards beside it); a directory
 * holding model.safetensors or model.safetensors.index.json (a Hugging Face model folder, or
 * diffusers' text_encoder/); or a GGUF file as llama.cpp writes it (gemma-2-2b-it-Q8_0.gguf:
 * its names token_embd, blk.N.attn_q, ..., its config from the gemma2.* metadata, its norms
 * stored as 1 + w, f32 / f16 / bf16 / q8_0 / q4_K tensors; quantized ones stay quantized).
 * The config comes from `config_path` when given, else (a GGUF) its metadata, else the first
 * shard's __metadata__.config, else config.json beside the weights. Tensor names are
 * Hugging Face's with or without the "model." prefix (Gemma2ForCausalLM or Gemma2Model);
 * lm_head.weight and other unused tensors are ignored. Every tensor the config needs is
 * checked (present, float dtype, shape) before anything else: one message names the first
 * problem in full (tensor, expected and actual shape) and lists the others. */
lv_status lv_gemma2_file_open(const char *path, const char *config_path, lv_gemma2_file **out);
void lv_gemma2_file_close(lv_gemma2_file *f);
const lv_gemma2_config *lv_gemma2_file_config(const lv_gemma2_file *f);
/* Where the config came from ("__metadata__.config of x.safetensors", "config.json ..."). */
const char *lv_gemma2_file_config_source(const lv_gemma2_file *f);
/* A tensor by its name without the "model." prefix ("layers.0.mlp.up_proj.weight",
 * "embed_tokens.weight", "norm.weight"); NULL if the model does not use it. */
const lv_weight *lv_gemma2_file_tensor(const lv_gemma2_file *f, const char *name);
/* Elements and bytes (as stored) of the tensors the model uses. */
uint64_t lv_gemma2_file_param_count(const lv_gemma2_file *f);
uint64_t lv_gemma2_file_param_bytes(const lv_gemma2_file *f);
/* The dtype of the matmul weights as stored (bf16 for the released model). */
lv_dtype lv_gemma2_file_dtype(const lv_gemma2_file *f);

/* ---- the encoder on the device --------------------------------------------------------- */

/* The attention soft-cap setting: 0 turns it off, a positive value is the cap. */
#define LV_GEMMA2_SOFTCAP_CONFIG (-1.0f) /* the config's attn_logit_softcapping (50 for 2B) */

typedef struct lv_gemma2_options {
    /* 0 (the default, and SANA-Video's: transformers' default sdpa attention ignores the
     * soft-cap), LV_GEMMA2_SOFTCAP_CONFIG (eager attention), or a cap > 0. */
    float attn_softcap;
    /* -1 (default): every parameter as stored. LV_F32, LV_F16 or LV_BF16: every parameter
     * rounded to that dtype first (torch_dtype=...), matmul weights then kept in it.
     * LV_Q8_0 or LV_Q4_K: the matmul weights (q, k, v, o, gate, up, down) quantized on the
     * host as they are uploaded (ggml's blocks, read as such by the matmul), the embedding
     * and the norms as stored; a matrix whose rows are not whole blocks (32 for q8_0, 256
     * for q4_K) falls back, q4_K to q8_0, q8_0 to the stored dtype. A file that stores its
     * matrices quantized (a GGUF) keeps them as they are, unless LV_F32 (dequantised). */
    int weight_dtype;
    /* The longest input accepted; 0: the config's max_position_embeddings. */
    int max_tokens;
    /* NULL, or polled after every layer (each then runs to its end on the device, one
     * submission a layer): once set, an encode returns LV_ERR_INTERRUPTED. A Ctrl-C stops
     * the encoder within a layer instead of after all of them (26 for Gemma-2-2B). */
    volatile sig_atomic_t *stop;
} lv_gemma2_options;

void lv_gemma2_options_default(lv_gemma2_options *opt);

typedef struct lv_gemma2 lv_gemma2;

/* Uploads the decoder layers and the final norm: matmul weights in their dtype (bf16 stays
 * bf16), norm weights as f32 (1 + w). The embedding table stays in `file` (memory-mapped)
 * and its rows are looked up on the host per call, so `file` must stay open as long as the
 * encoder is used. Compute is f32. opt NULL: the defaults. */
lv_status lv_gemma2_create(lv_ctx *ctx, const lv_gemma2_file *file, const lv_gemma2_options *opt,
                           lv_gemma2 **out);
/* Frees every device tensor (weights and work buffers). */
void lv_gemma2_destroy(lv_gemma2 *enc);
const lv_gemma2_config *lv_gemma2_config_of(const lv_gemma2 *enc);
/* The soft-cap in use (0: off). */
float lv_gemma2_softcap(const lv_gemma2 *enc);

/* The last hidden state (after the final norm) of tokens ids[0..n) at positions 0..n-1, as
 * float [n, hidden_size] into `out` (host). n must be 1..max_tokens (LV_ERR_LIMIT beyond);
 * an id outside the vocabulary is LV_ERR_INVALID naming it and its position. */
lv_status lv_gemma2_encode(lv_gemma2 *enc, const int32_t *ids, int n, float *out);
/* The same into a device tensor f32 [n, hidden_size] (left recorded, not flushed). */
lv_status lv_gemma2_forward(lv_gemma2 *enc, const int32_t *ids, int n, const lv_tensor *out);
/* Intermediate states: the hidden state after the embedding (times sqrt(hidden_size)) and
 * the first `layers` decoder layers (0..num_layers), then the final norm if `final_norm`.
 * Hugging Face's output_hidden_states[i] is (i, 0) for i < num_layers; (num_layers, 1) is
 * the last hidden state. */
lv_status lv_gemma2_encode_layers(lv_gemma2 *enc, const int32_t *ids, int n, int layers, int final_norm,
                                  float *out);

/* Device memory held by the encoder, in bytes: the uploaded weights, and the work buffers
 * (sized for the longest input so far; freed by lv_gemma2_release_work or destroy). The
 * embedding table, on the host, is `host_embedding` bytes of mapped file. */
typedef struct lv_gemma2_memory {
    uint64_t weights;
    uint64_t work;
    uint64_t host_embedding;
} lv_gemma2_memory;
void lv_gemma2_memory_usage(const lv_gemma2 *enc, lv_gemma2_memory *out);
/* The same from the config alone, before anything is uploaded: the weights of matmul
 * matrices stored as `stored` (lv_gemma2_file_dtype) under the option `weight_dtype` (as
 * lv_gemma2_options: -1 as stored, a float dtype, q8_0 or q4_K with the same fall-backs),
 * and the work buffers of a pass over `tokens` tokens, each tensor rounded up to `alignment`
 * (lv_ctx_alloc_alignment) as the engine counts it; host_embedding is left 0. Equals what
 * lv_ctx_memory_peak measures over create and encode (tests/models/test_gemma2.c) when every
 * matrix of the file has the q_proj's dtype (a file mixing them is planned at that one). */
lv_status lv_gemma2_memory_plan(const lv_gemma2_config *cfg, lv_dtype stored, int weight_dtype, int tokens,
                                uint64_t alignment, lv_gemma2_memory *out);
/* Frees the work buffers (the next call makes them again). */
void lv_gemma2_release_work(lv_gemma2 *enc);

#ifdef __cplusplus
}
#endif
#endif
