/* Inside the named-tensor file readers (weights.c, safetensors.c, pth.c): the lv_weights
 * object that each format fills, and the entry points the fuzz harnesses call directly.
 * No Vulkan here: these files build on their own for the fuzzers. */
#ifndef LONGVK_WEIGHTS_INTERNAL_H
#define LONGVK_WEIGHTS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/weights.h"

struct lv_weights {
    char *path;
    const char *format;  /* "safetensors", "pytorch" or "gguf" */
    char note[256];
    lv_weight *tensors;
    int count, capacity;
    int *by_name;        /* indices sorted by name, for lv_weights_find */
    char **metadata;     /* key, value, key, value, ... */
    int n_metadata, metadata_capacity;
    void *map;           /* the mmap of a safetensors file */
    size_t map_size;
    void **owned;        /* buffers freed by lv_weights_close */
    int n_owned, owned_capacity;
    struct lv_gguf_meta *gguf; /* a GGUF file's typed metadata (gguf.c); NULL otherwise */
};

/* An empty set of tensors for `path` (copied). NULL when out of memory. */
lv_weights *lv_weights_new(const char *path, const char *format);
/* Map the regular file `path` read-only and parse it with `parse` into a set of tensors of
 * that format whose data point into the mapping (unmapped at close); an empty file is refused.
 * The safetensors and GGUF readers open files this way. */
lv_status lv_weights_map_file(const char *path, const char *format,
                              lv_status (*parse)(lv_weights *w, const uint8_t *data, size_t size), lv_weights **out);
/* Append a tensor; the name is copied, the data is referenced. */
lv_status lv_weights_add(lv_weights *w, const char *name, lv_dtype dtype, int ndim,
                         const int64_t *shape, const void *data, uint64_t nbytes);
lv_status lv_weights_add_metadata(lv_weights *w, const char *key, const char *value);
/* Hand a malloc'd buffer to `w` (freed at close). On failure the buffer is freed. */
lv_status lv_weights_own(lv_weights *w, void *buffer);
/* Build the name index; a name that occurs twice is an error. */
lv_status lv_weights_finish(lv_weights *w);

/* Parse a safetensors image held in memory (it must outlive `w`). Misaligned tensors are
 * copied into buffers `w` owns. */
lv_status lv_safetensors_parse(lv_weights *w, const uint8_t *data, size_t size);
lv_status lv_safetensors_open(const char *path, lv_weights **out);

/* PyTorch zip checkpoints (pth.c). */
lv_status lv_pth_open(const char *path, lv_weights **out);

/* Supplies the bytes of storage record `key` (exactly `nbytes`) for the first tensor that uses
 * it (`tensor`, for messages); the pointer must stay valid while `w` lives (hand buffers to
 * lv_weights_own). */
typedef lv_status (*lv_pth_storage_fn)(void *user, lv_weights *w, const char *tensor, const char *key,
                                       uint64_t nbytes, const void **data);
/* Runs the restricted pickle reader on data.pkl, finds the state dict and adds its tensors
 * to `w`, loading each storage it references once through `load`. */
lv_status lv_pth_from_pickle(lv_weights *w, const uint8_t *pickle, size_t size, lv_pth_storage_fn load,
                             void *user);

/* GGUF files (gguf.c): parse an image held in memory (it must outlive `w`), or map a file. */
lv_status lv_gguf_parse(lv_weights *w, const uint8_t *data, size_t size);
lv_status lv_gguf_open(const char *path, lv_weights **out);
void lv_gguf_meta_free(struct lv_gguf_meta *meta);

#endif
