/* Named-tensor files: the format-independent part (see longvk/weights.h). Each format's
 * reader fills an lv_weights through lv_weights_add; lookups go through a sorted index. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "longvk/files.h"
#include "weights_internal.h"

uint64_t lv_weight_numel(const lv_weight *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}

lv_weights *lv_weights_new(const char *path, const char *format) {
    lv_weights *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->path = strdup(path ? path : "(memory)");
    if (!w->path) {
        free(w);
        return NULL;
    }
    w->format = format;
    return w;
}

static lv_status grow(void **array, int *capacity, int needed, size_t elem, const char *path) {
    if (needed <= *capacity) return LV_OK;
    int cap = *capacity ? *capacity : 16;
    while (cap < needed) {
        if (cap > (1 << 28)) return lv_error(LV_ERR_NOMEM, "%s: too many entries", path);
        cap *= 2;
    }
    void *p = realloc(*array, (size_t)cap * elem);
    if (!p) return lv_error(LV_ERR_NOMEM, "%s: out of memory for %d entries", path, cap);
    *array = p;
    *capacity = cap;
    return LV_OK;
}

lv_status lv_weights_add(lv_weights *w, const char *name, lv_dtype dtype, int ndim,
                         const int64_t *shape, const void *data, uint64_t nbytes) {
    if (ndim < 0 || ndim > LV_MAX_DIMS)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most %d supported)",
                        w->path, name, ndim, LV_MAX_DIMS);
    LV_TRY(grow((void **)&w->tensors, &w->capacity, w->count + 1, sizeof *w->tensors, w->path));
    char *copy = strdup(name);
    if (!copy) return lv_error(LV_ERR_NOMEM, "%s: out of memory", w->path);
    lv_weight *t = &w->tensors[w->count++];
    memset(t, 0, sizeof *t);
    t->name = copy;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = nbytes;
    return LV_OK;
}

lv_status lv_weights_add_metadata(lv_weights *w, const char *key, const char *value) {
    LV_TRY(grow((void **)&w->metadata, &w->metadata_capacity, 2 * w->n_metadata + 2, sizeof(char *),
                w->path));
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return lv_error(LV_ERR_NOMEM, "%s: out of memory", w->path);
    }
    w->metadata[2 * w->n_metadata] = k;
    w->metadata[2 * w->n_metadata + 1] = v;
    w->n_metadata++;
    return LV_OK;
}

lv_status lv_weights_own(lv_weights *w, void *buffer) {
    lv_status s = grow((void **)&w->owned, &w->owned_capacity, w->n_owned + 1, sizeof(void *), w->path);
    if (s != LV_OK) {
        free(buffer);
        return s;
    }
    w->owned[w->n_owned++] = buffer;
    return LV_OK;
}

/* qsort has no context argument: the comparison reads the tensors through this. */
static _Thread_local const lv_weight *sort_tensors;

static int by_name(const void *a, const void *b) {
    return strcmp(sort_tensors[*(const int *)a].name, sort_tensors[*(const int *)b].name);
}

lv_status lv_weights_finish(lv_weights *w) {
    free(w->by_name);
    w->by_name = malloc(((size_t)w->count + 1) * sizeof *w->by_name);
    if (!w->by_name) return lv_error(LV_ERR_NOMEM, "%s: out of memory", w->path);
    for (int i = 0; i < w->count; i++) w->by_name[i] = i;
    sort_tensors = w->tensors;
    qsort(w->by_name, (size_t)w->count, sizeof *w->by_name, by_name);
    for (int i = 1; i < w->count; i++)
        if (strcmp(w->tensors[w->by_name[i]].name, w->tensors[w->by_name[i - 1]].name) == 0)
            return lv_error(LV_ERR_FORMAT, "%s: tensor name '%s' occurs twice", w->path,
                            w->tensors[w->by_name[i]].name);
    return LV_OK;
}

void lv_weights_close(lv_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->count; i++) free((char *)w->tensors[i].name);
    free(w->tensors);
    free(w->by_name);
    for (int i = 0; i < 2 * w->n_metadata; i++) free(w->metadata[i]);
    free(w->metadata);
    for (int i = 0; i < w->n_owned; i++) free(w->owned[i]);
    free(w->owned);
    if (w->map) munmap(w->map, w->map_size);
    lv_gguf_meta_free(w->gguf);
    free(w->path);
    free(w);
}

int lv_weights_count(const lv_weights *w) { return w ? w->count : 0; }

const lv_weight *lv_weights_at(const lv_weights *w, int i) {
    if (!w || i < 0 || i >= w->count) return NULL;
    return &w->tensors[i];
}

const lv_weight *lv_weights_find(const lv_weights *w, const char *name) {
    if (!w || !name || !w->by_name) return NULL;
    int lo = 0, hi = w->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const lv_weight *t = &w->tensors[w->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *lv_weights_metadata(const lv_weights *w, const char *key) {
    if (!w || !key) return NULL;
    for (int i = 0; i < w->n_metadata; i++)
        if (strcmp(w->metadata[2 * i], key) == 0) return w->metadata[2 * i + 1];
    return NULL;
}

int lv_weights_metadata_count(const lv_weights *w) { return w ? w->n_metadata : 0; }

const char *lv_weights_metadata_key(const lv_weights *w, int i) {
    return (w && i >= 0 && i < w->n_metadata) ? w->metadata[2 * i] : NULL;
}

const char *lv_weights_metadata_value(const lv_weights *w, int i) {
    return (w && i >= 0 && i < w->n_metadata) ? w->metadata[2 * i + 1] : NULL;
}

const char *lv_weights_path(const lv_weights *w) { return w ? w->path : ""; }
const char *lv_weights_format(const lv_weights *w) { return w ? w->format : ""; }
const char *lv_weights_note(const lv_weights *w) { return w ? w->note : ""; }

lv_status lv_weights_open(const char *path, lv_weights **out) {
    *out = NULL;
    if (!path) return lv_error(LV_ERR_INVALID, "lv_weights_open: no path");
    int fd;
    LV_TRY(lv_open_regular_file(path, &fd, NULL)); /* a FIFO or a device is refused before any read */
    unsigned char head[8] = {0};
    ssize_t got = pread(fd, head, sizeof head, 0);
    close(fd);
    if (got < 0) return lv_error(LV_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (got >= 4 && memcmp(head, "GGUF", 4) == 0) return lv_gguf_open(path, out);
    /* A zip archive (local file header or, for an empty archive, end of central directory). */
    if (got >= 4 && head[0] == 'P' && head[1] == 'K' &&
        ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6)))
        return lv_pth_open(path, out);
    /* torch.save before PyTorch 1.6 wrote a bare pickle starting with a magic number. */
    if (got >= 3 && head[0] == 0x80 && head[1] <= 5 && head[2] == 0x8a)
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s: legacy PyTorch checkpoint (saved before PyTorch 1.6, not a zip archive): "
                        "re-save it with torch.save(obj, path) in a recent PyTorch, or as safetensors",
                        path);
    return lv_safetensors_open(path, out);
}

lv_status lv_weights_open_memory(const void *data, size_t size, const char *name, lv_weights **out) {
    *out = NULL;
    if (!name) name = "(memory)";
    if (!data && size) return lv_error(LV_ERR_INVALID, "%s: no data", name);
    const uint8_t *b = data;
    if (size >= 4 && b[0] == 'P' && b[1] == 'K')
        return lv_error(LV_ERR_UNSUPPORTED, "%s: a PyTorch checkpoint in memory: only files are read; "
                        "convert it with `longvk convert`", name);
    int gguf = size >= 4 && memcmp(b, "GGUF", 4) == 0;
    lv_weights *w = lv_weights_new(name, gguf ? "gguf" : "safetensors");
    if (!w) return lv_error(LV_ERR_NOMEM, "%s: out of memory", name);
    lv_status s = gguf ? lv_gguf_parse(w, b, size) : lv_safetensors_parse(w, b, size);
    if (s != LV_OK) {
        lv_weights_close(w);
        return s;
    }
    *out = w;
    return LV_OK;
}

lv_status lv_weights_map_file(const char *path, const char *format,
                              lv_status (*parse)(lv_weights *w, const uint8_t *data, size_t size), lv_weights **out) {
    *out = NULL;
    int fd;
    int64_t file_size;
    LV_TRY(lv_open_regular_file(path, &fd, &file_size));
    if (file_size == 0) {
        close(fd);
        return lv_error(LV_ERR_FORMAT, "%s: the file is empty", path);
    }
    size_t size = (size_t)file_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return lv_error(LV_ERR_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(errno));
    lv_weights *w = lv_weights_new(path, format);
    if (!w) {
        munmap(map, size);
        return lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
    }
    w->map = map;
    w->map_size = size;
    lv_status s = parse(w, map, size);
    if (s != LV_OK) {
        lv_weights_close(w);
        return s;
    }
    *out = w;
    return LV_OK;
}

/* ---- models saved in shards ------------------------------------------------------------- */

#define LV_MAX_SHARDS 256

lv_status lv_weight_set_add(lv_weight_set *set, const char *path, const void *data, size_t size) {
    if (set->count >= LV_MAX_SHARDS)
        return lv_error(LV_ERR_INVALID, "%s: more than %d shards", path, LV_MAX_SHARDS);
    lv_weights **grown = realloc(set->files, ((size_t)set->count + 1) * sizeof *grown);
    if (!grown) return lv_error(LV_ERR_NOMEM, "out of memory");
    set->files = grown;
    LV_TRY(data ? lv_weights_open_memory(data, size, path, &set->files[set->count])
                : lv_weights_open(path, &set->files[set->count]));
    set->count++;
    return LV_OK;
}

lv_status lv_weight_set_add_index(lv_weight_set *set, const char *index, const char *dir) {
    size_t len = 0;
    char *text = lv_read_text_file(index, &len);
    if (!text) return LV_ERR_IO;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return lv_error(LV_ERR_FORMAT, "%s: not a safetensors index (no \"weight_map\" object)", index);
    }
    int before = set->count;
    lv_status s = LV_OK;
    const char **seen = NULL;
    int n_seen = 0;
    for (const cJSON *e = map->child; e && s == LV_OK; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring || !*e->valuestring || strstr(e->valuestring, "..") ||
            e->valuestring[0] == '/') {
            s = lv_error(LV_ERR_FORMAT, "%s: weight_map entry '%s' does not name a shard file beside the index",
                         index, e->string ? e->string : "?");
            break;
        }
        int known = 0;
        for (int i = 0; i < n_seen && !known; i++) known = strcmp(seen[i], e->valuestring) == 0;
        if (known) continue;
        const char **g = realloc(seen, ((size_t)n_seen + 1) * sizeof *g);
        if (!g) {
            s = lv_error(LV_ERR_NOMEM, "out of memory");
            break;
        }
        seen = g;
        seen[n_seen++] = e->valuestring;
        char shard[4200];
        snprintf(shard, sizeof shard, "%.4000s/%s", dir, e->valuestring);
        s = lv_weight_set_add(set, shard, NULL, 0);
    }
    free(seen);
    cJSON_Delete(root);
    if (s == LV_OK && set->count == before) s = lv_error(LV_ERR_FORMAT, "%s: the index names no shards", index);
    return s;
}

const lv_weight *lv_weight_set_find(const lv_weight_set *set, const char *name, int *which) {
    for (int i = 0; set && i < set->count; i++) {
        const lv_weight *t = lv_weights_find(set->files[i], name);
        if (t) {
            if (which) *which = i;
            return t;
        }
    }
    return NULL;
}

void lv_weight_set_close(lv_weight_set *set) {
    if (!set) return;
    for (int i = 0; i < set->count; i++) lv_weights_close(set->files[i]);
    free(set->files);
    set->files = NULL;
    set->count = 0;
}
