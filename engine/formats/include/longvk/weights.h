/* Named-tensor files: safetensors (memory-mapped), PyTorch zip checkpoints (.pth / .pt,
 * read without Python) and GGUF (ggml's container, memory-mapped; tensors may be
 * block-quantized: LV_Q8_0, LV_Q4_K, see longvk/quant.h). Tensors live in host memory and stay valid until lv_weights_close.
 *
 *   lv_weights *w;
 *   if (lv_weights_open("model.safetensors", &w) != LV_OK) fprintf(stderr, "%s\n", lv_last_error());
 *   const lv_weight *t = lv_weights_find(w, "blocks.0.attn.qkv.weight");
 *   ... t->data, t->nbytes, t->shape ...
 *   lv_weights_close(w);
 *
 * Everything in a file is checked when it is opened: a malformed or truncated file is an
 * error naming the file, the tensor and the byte offset, never a crash. */
#ifndef LONGVK_WEIGHTS_H
#define LONGVK_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/dtype.h"
#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lv_weight {
    const char *name;
    lv_dtype dtype;            /* LV_F32, LV_F16, LV_BF16 (LV_I32 for int32 tensors); from
                                  GGUF also LV_Q8_0, LV_Q4_K (rows of whole blocks) */
    int ndim;                  /* 0 for a scalar */
    int64_t shape[LV_MAX_DIMS]; /* row-major (PyTorch order; GGUF's ggml order reversed) */
    const void *data;          /* row-major, little-endian, aligned to the element size (2
                                  for the quantized dtypes) */
    uint64_t nbytes;
} lv_weight;

typedef struct lv_weights lv_weights;

/* Opens a safetensors file, a PyTorch zip checkpoint or a GGUF file, told apart by content. For a
 * checkpoint, the state dict is the top-level dict, or the dict under 'state_dict',
 * 'generator', 'model' or 'ema' (in that order); a 'model.' or 'module.' prefix that every
 * tensor name carries is removed. */
lv_status lv_weights_open(const char *path, lv_weights **out);
/* A safetensors or GGUF image held in memory (an embedded model): `data` must stay valid until
 * lv_weights_close; `name` stands for the file in messages. Same checks as a file. */
lv_status lv_weights_open_memory(const void *data, size_t size, const char *name, lv_weights **out);
void lv_weights_close(lv_weights *w);

int lv_weights_count(const lv_weights *w);
/* Tensors in file order (safetensors: header order; checkpoints: state dict order). */
const lv_weight *lv_weights_at(const lv_weights *w, int i);
/* NULL when there is no tensor of that name. */
const lv_weight *lv_weights_find(const lv_weights *w, const char *name);
/* A value of the safetensors __metadata__ (NULL when absent; checkpoints have none). For
 * GGUF, every key: strings as they are, numbers and booleans in decimal ("32", "1e-06",
 * "true"), arrays summarised ("[array of 256000 string]": read them with the typed getters
 * below). */
const char *lv_weights_metadata(const lv_weights *w, const char *key);
int lv_weights_metadata_count(const lv_weights *w);
/* The i-th metadata key and value, in file order. */
const char *lv_weights_metadata_key(const lv_weights *w, int i);
const char *lv_weights_metadata_value(const lv_weights *w, int i);
/* Typed GGUF metadata (for other formats these find nothing). An integer or boolean value
 * that fits int64: 1 and *out set, else 0. */
int lv_weights_metadata_int(const lv_weights *w, const char *key, int64_t *out);
/* A float32/float64 (or integer) value: 1 and *out set, else 0. */
int lv_weights_metadata_float(const lv_weights *w, const char *key, double *out);
/* An array of strings (tokenizer.ggml.tokens): `*count` NUL-terminated strings, valid until
 * lv_weights_close; NULL when the key is absent or not an array of strings. A string holding
 * a NUL byte is cut there. */
const char *const *lv_weights_metadata_strings(const lv_weights *w, const char *key, uint64_t *count);
/* An array of numbers (tokenizer.ggml.scores): `*count` items of GGUF value type *gguf_type
 * (0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 10 u64, 11 i64, 12 f64), native
 * and aligned; NULL when absent or not an array of numbers. */
const void *lv_weights_metadata_array(const lv_weights *w, const char *key, int *gguf_type, uint64_t *count);
/* The path given to lv_weights_open. */
const char *lv_weights_path(const lv_weights *w);
/* "safetensors", "pytorch" or "gguf". */
const char *lv_weights_format(const lv_weights *w);
/* For checkpoints, how the state dict was found ("state dict under 'generator', prefix
 * 'model.' removed"); "" otherwise. */
const char *lv_weights_note(const lv_weights *w);

uint64_t lv_weight_numel(const lv_weight *t);

/* ---- models saved in shards ------------------------------------------------------------- */

/* The files of one model: one file, or the shards a safetensors index names. */
typedef struct lv_weight_set {
    lv_weights **files;
    int count;
} lv_weight_set;

/* Opens one more file (data NULL: read `path`; else the image `data` of `size` bytes, named
 * `path` in messages). At most 256 files. */
lv_status lv_weight_set_add(lv_weight_set *set, const char *path, const void *data, size_t size);
/* Opens every shard a *.safetensors.index.json names ({"weight_map": {tensor: shard}}), each
 * once, from `dir`: a shard name with "..", or an absolute one, is an error. */
lv_status lv_weight_set_add_index(lv_weight_set *set, const char *index, const char *dir);
/* The tensor `name` in any file; *which (if not NULL) gets the file's index. */
const lv_weight *lv_weight_set_find(const lv_weight_set *set, const char *name, int *which);
void lv_weight_set_close(lv_weight_set *set);

/* Writes `n` tensors and the metadata pairs metadata_kv[2i] = key, metadata_kv[2i+1] = value
 * as a safetensors file, atomically (a temporary file beside `path`, renamed when complete).
 * Tensor data is laid out largest element size first so that every tensor is aligned. */
lv_status lv_safetensors_write(const char *path, const lv_weight *tensors, int n,
                               const char *const *metadata_kv, int n_metadata);

/* The same as a GGUF file (version 3, engine/formats/gguf_write.c), atomically: the metadata
 * pairs as string values beside general.alignment (32), each tensor at a multiple of 32 bytes
 * in its ggml type (f32, f16, bf16, i32, q8_0, q4_k: rows of whole blocks), its dims in ggml
 * order; lv_weights_open reads it back with the same names, dtypes, shapes and bytes. */
lv_status lv_gguf_write(const char *path, const lv_weight *tensors, int n, const char *const *metadata_kv,
                        int n_metadata);

#ifdef __cplusplus
}
#endif
#endif
