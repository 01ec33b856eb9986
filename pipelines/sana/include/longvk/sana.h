/* SANA-Video / LongSANA model files: the architecture config and a checked set of weights.
 *
 *   lv_sana_file *m;
 *   if (lv_sana_file_open("SANA_Video_2B_480p.pth", NULL, "sana-video-2b-480p", &m) != LV_OK)
 *       fprintf(stderr, "%s\n", lv_last_error());
 *   const lv_sana_config *cfg = lv_sana_file_config(m);
 *   const lv_weight *qkv = lv_sana_file_tensor(m, "blocks.0.attn.qkv.weight");
 *
 * Opening checks everything before any device work: every tensor the config needs is present
 * with its shape and a float dtype, whichever naming the file uses (the original SANA-Video
 * names or the diffusers ones, whose split q/k/v are merged). Tensors are looked up by their
 * original names. */
#ifndef LONGVK_SANA_H
#define LONGVK_SANA_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/status.h"
#include "longvk/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lv_sana_config {
    int in_channels, out_channels;  /* latent channels in and out */
    int hidden;                     /* C = heads * head_dim */
    int depth;                      /* number of blocks */
    int heads, head_dim;
    int caption_channels;           /* text embedding width (Gemma-2: 2304) */
    int patch[3];                   /* t, h, w */
    double mlp_ratio;
    int ffn_hidden;                 /* (int)(hidden * mlp_ratio): Mix-FFN width */
    int rope_dims[3];               /* RoPE dims per head (t, h, w): h = w = 2 (head_dim / 6),
                                       t = head_dim - h - w */
    float rope_theta;               /* 10000 */
    float qk_norm_eps;              /* self-attention q/k RMSNorm: 1e-5 */
    float cross_norm_eps;           /* cross-attention q/k RMSNorm: 1e-6 */
    float caption_norm_eps;         /* caption RMSNorm: 1e-5 */
    float ln_eps;                   /* LayerNorm without affine: 1e-6 */
    float attn_eps;                 /* linear-attention denominator: 1e-8 */
} lv_sana_config;

/* Released models: "sana-video-2b-480p" (Wan2.1 VAE latents, 16 channels, patch 1x2x2) and
 * "sana-video-2b-720p" (LTX-2 VAE latents, 128 channels, patch 1x1x1). */
lv_status lv_sana_config_preset(const char *name, lv_sana_config *out);
/* The i-th preset name, NULL past the end. */
const char *lv_sana_preset_name(int i);
/* A JSON object with hidden_size (optional), depth, num_heads, head_dim, patch_size [t,h,w],
 * in_channels, out_channels (optional), caption_channels, mlp_ratio; the diffusers names
 * (num_layers, num_attention_heads, attention_head_dim, cross_attention_dim) are accepted.
 * `source` names the text in messages. */
lv_status lv_sana_config_parse(const char *json, size_t len, const char *source, lv_sana_config *out);
/* Reads and parses a JSON file. */
lv_status lv_sana_config_load(const char *path, lv_sana_config *out);
/* The config as JSON in the keys above (for a safetensors __metadata__.config). */
lv_status lv_sana_config_to_json(const lv_sana_config *cfg, char *buf, size_t size);
/* "hidden 2240, depth 20, 20 heads x 112, ..." */
const char *lv_sana_config_describe(const lv_sana_config *cfg, char *buf, size_t size);

/* A tensor a model uses: its original name and its shape for a given config. */
#define LV_SANA_NAME_MAX 128
typedef struct lv_sana_tensor_spec {
    char name[LV_SANA_NAME_MAX]; /* original name: x_embedder.proj.weight, blocks.N.attn.qkv.weight, ... */
    int ndim;
    int64_t shape[LV_MAX_DIMS];
} lv_sana_tensor_spec;
/* Every tensor a model of `cfg` uses, in model order, with its shape: what a weights file of
 * that config must hold under the original names (lv_sana_file_open checks a file against
 * it; `longvk bench dit` writes a random model from it). *out: a malloc'd array of *count
 * entries (free() it). */
lv_status lv_sana_expected_tensors(const lv_sana_config *cfg, lv_sana_tensor_spec **out, int *count);

typedef struct lv_sana_file lv_sana_file;

typedef enum lv_sana_naming { LV_SANA_NAMES_ORIGINAL = 0, LV_SANA_NAMES_DIFFUSERS } lv_sana_naming;

/* `path`: a safetensors file, a PyTorch checkpoint, a diffusers model directory (with
 * diffusion_pytorch_model.safetensors and config.json) or a sharded model's
 * *.safetensors.index.json. The config comes from `config_path`, else `preset`, else the
 * file's __metadata__.config, else a diffusers config.json beside the weights, else the
 * preset whose shapes the tensors match. */
lv_status lv_sana_file_open(const char *path, const char *config_path, const char *preset,
                            lv_sana_file **out);
/* The same from a safetensors image in memory (an embedded model: `data` must outlive the
 * lv_sana_file); the config comes from its __metadata__.config or the matching preset. */
lv_status lv_sana_file_open_memory(const void *data, size_t size, const char *name, lv_sana_file **out);
void lv_sana_file_close(lv_sana_file *f);

const lv_sana_config *lv_sana_file_config(const lv_sana_file *f);
/* Where the config came from ("preset sana-video-2b-480p", "__metadata__.config", ...). */
const char *lv_sana_file_config_source(const lv_sana_file *f);
lv_sana_naming lv_sana_file_naming(const lv_sana_file *f);
/* The weights file (the first shard for a sharded model). */
const lv_weights *lv_sana_file_weights(const lv_sana_file *f);

/* A tensor by its ORIGINAL name (blocks.N.attn.qkv.weight, ...), whatever the file's naming;
 * the returned lv_weight carries the original name. NULL for names the model does not use. */
const lv_weight *lv_sana_file_tensor(const lv_sana_file *f, const char *original_name);
/* Every tensor the model uses, in model order. */
int lv_sana_file_tensor_count(const lv_sana_file *f);
const lv_weight *lv_sana_file_tensor_at(const lv_sana_file *f, int i);

/* Tensors in the file that the model does not use (file names). */
int lv_sana_file_extra_count(const lv_sana_file *f);
const lv_weight *lv_sana_file_extra(const lv_sana_file *f, int i);
const char *lv_sana_file_extra_name(const lv_sana_file *f, int i);
/* 1 when the extra is one SANA-Video checkpoints carry but never use at inference
 * (y_embedder.y_embedding, pos_embed, logvar_linear.*). */
int lv_sana_file_extra_known(const lv_sana_file *f, int i);

/* Elements in the tensors the model uses. */
uint64_t lv_sana_file_param_count(const lv_sana_file *f);

/* 1 when some tensor of `w` has a SANA-Video name (original or diffusers naming): the file
 * is meant as a SANA-Video model, not any set of tensors. */
int lv_sana_weights_recognised(const lv_weights *w);

#ifdef __cplusplus
}
#endif
#endif
