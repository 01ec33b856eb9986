/* GGUF files (ggml's container, versions 2 and 3), read with mmap: "GGUF", a u32 version, a
 * u64 tensor count and a u64 metadata count; the metadata pairs (a string key, a u32 value
 * type, the value: a number, a bool, a string (u64 length + bytes) or an array (u32 item
 * type, u64 count, the items)); the tensor infos (a name, a u32 n_dims, n_dims u64 dims in
 * ggml order (ne[0] varies fastest), a u32 ggml type, a u64 offset into the data section);
 * then the data section, at the next multiple of general.alignment (a u32, default 32).
 * Every length, count and offset is checked against the bytes that remain before anything is
 * allocated for it; a tensor's shape is handed out row-major (the dims reversed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/files.h"
#include "weights_internal.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

enum {
    GT_U8 = 0, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STRING, GT_ARRAY,
    GT_U64, GT_I64, GT_F64, GT_COUNT
};

static const char *const value_type_names[GT_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                       "bool", "string", "array", "u64", "i64", "f64"};
static const uint8_t value_type_size[GT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* ggml's tensor types by number, for messages about the ones longvk does not read. */
static const char *ggml_type_name(uint32_t t) {
    static const char *const names[] = {
        "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
        "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",
        "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0",
        NULL, NULL, NULL, "MXFP4"};
    if (t < sizeof names / sizeof names[0] && names[t]) return names[t];
    return "unknown";
}

static int ggml_type_to_dtype(uint32_t t, lv_dtype *out) {
    switch (t) {
    case 0: *out = LV_F32; return 1;
    case 1: *out = LV_F16; return 1;
    case 8: *out = LV_Q8_0; return 1;
    case 12: *out = LV_Q4_K; return 1;
    case 26: *out = LV_I32; return 1;
    case 30: *out = LV_BF16; return 1;
    }
    return 0;
}

/* ---- typed metadata -------------------------------------------------------------------- */

typedef struct gguf_kv {
    char *key;
    size_t at;           /* file offset of the pair, for messages */
    int type;            /* GT_* */
    int item_type;       /* arrays: the items' GT_* */
    uint64_t count;      /* arrays */
    int64_t i;           /* integers and bools (u64 over INT64_MAX: is_int 0) */
    int is_int;
    double f;            /* every number */
    int is_number;
    void *items;         /* arrays of numbers: the items; of strings: char *[count], then the text */
} gguf_kv;

struct lv_gguf_meta {
    gguf_kv *kv;
    int n, cap;
};

void lv_gguf_meta_free(struct lv_gguf_meta *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        free(m->kv[i].key);
        free(m->kv[i].items);
    }
    free(m->kv);
    free(m);
}

static const gguf_kv *find_kv(const lv_weights *w, const char *key) {
    if (!w || !w->gguf || !key) return NULL;
    for (int i = 0; i < w->gguf->n; i++)
        if (strcmp(w->gguf->kv[i].key, key) == 0) return &w->gguf->kv[i];
    return NULL;
}

int lv_weights_metadata_int(const lv_weights *w, const char *key, int64_t *out) {
    const gguf_kv *kv = find_kv(w, key);
    if (!kv || !kv->is_int) return 0;
    if (out) *out = kv->i;
    return 1;
}

int lv_weights_metadata_float(const lv_weights *w, const char *key, double *out) {
    const gguf_kv *kv = find_kv(w, key);
    if (!kv || !kv->is_number) return 0;
    if (out) *out = kv->f;
    return 1;
}

const char *const *lv_weights_metadata_strings(const lv_weights *w, const char *key, uint64_t *count) {
    const gguf_kv *kv = find_kv(w, key);
    if (!kv || kv->type != GT_ARRAY || kv->item_type != GT_STRING) return NULL;
    if (count) *count = kv->count;
    static const char *const none[1] = {NULL};
    return kv->items ? (const char *const *)kv->items : none;
}

const void *lv_weights_metadata_array(const lv_weights *w, const char *key, int *gguf_type, uint64_t *count) {
    const gguf_kv *kv = find_kv(w, key);
    if (!kv || kv->type != GT_ARRAY || kv->item_type == GT_STRING) return NULL;
    if (gguf_type) *gguf_type = kv->item_type;
    if (count) *count = kv->count;
    static const uint64_t none = 0;
    return kv->items ? kv->items : &none;
}

/* ---- reading --------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *data;
    size_t size, at;
    const char *path;
} reader;

/* `n` more bytes for `what`, or an error naming it and the offset. */
static lv_status need(reader *r, uint64_t n, const char *what, const char *of) {
    if (n <= r->size - r->at) return LV_OK;
    return lv_error(LV_ERR_FORMAT,
                    "%s: truncated: %s%s%s at offset %zu needs %" PRIu64 " bytes but %zu remain (file size %zu)",
                    r->path, what, of ? " of " : "", of ? of : "", r->at, n, r->size - r->at, r->size);
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static lv_status read_u32(reader *r, uint32_t *v, const char *what, const char *of) {
    LV_TRY(need(r, 4, what, of));
    *v = (uint32_t)le(r->data + r->at, 4);
    r->at += 4;
    return LV_OK;
}

static lv_status read_u64(reader *r, uint64_t *v, const char *what, const char *of) {
    LV_TRY(need(r, 8, what, of));
    *v = le(r->data + r->at, 8);
    r->at += 8;
    return LV_OK;
}

/* A string: its bytes stay in the image (*s, *len). */
static lv_status read_string(reader *r, const uint8_t **s, uint64_t *len, const char *what, const char *of) {
    size_t start = r->at;
    LV_TRY(read_u64(r, len, what, of));
    if (*len > r->size - r->at)
        return lv_error(LV_ERR_FORMAT,
                        "%s: %s%s%s at offset %zu: string length %" PRIu64 " runs past the end of the file "
                        "(%zu bytes remain, file size %zu)",
                        r->path, what, of ? " of " : "", of ? of : "", start, *len, r->size - r->at, r->size);
    *s = r->data + r->at;
    r->at += (size_t)*len;
    return LV_OK;
}

/* A key or a name as a C string; one holding a NUL byte is refused. */
static lv_status copy_name(reader *r, const uint8_t *s, uint64_t len, size_t at, const char *what, char **out) {
    if (memchr(s, 0, (size_t)len))
        return lv_error(LV_ERR_FORMAT, "%s: %s at offset %zu holds a NUL byte", r->path, what, at);
    char *c = malloc((size_t)len + 1);
    if (!c) return lv_error(LV_ERR_NOMEM, "%s: out of memory for a %s of %" PRIu64 " bytes", r->path, what, len);
    memcpy(c, s, (size_t)len);
    c[len] = '\0';
    *out = c;
    return LV_OK;
}

/* A number of type `t` at p into kv (i, f, is_int) and into text for lv_weights_metadata. */
static void scalar_value(int t, const uint8_t *p, gguf_kv *kv, char *text, size_t size) {
    uint64_t u = le(p, value_type_size[t]);
    kv->is_number = 1;
    kv->is_int = t != GT_F32 && t != GT_F64;
    switch (t) {
    case GT_U8: case GT_U16: case GT_U32: case GT_U64:
        kv->is_int = u <= (uint64_t)INT64_MAX;
        kv->i = (int64_t)u;
        kv->f = (double)u;
        snprintf(text, size, "%" PRIu64, u);
        break;
    case GT_BOOL:
        kv->i = u != 0;
        kv->f = (double)kv->i;
        snprintf(text, size, "%s", u ? "true" : "false");
        break;
    case GT_I8: kv->i = (int8_t)u; goto sint;
    case GT_I16: kv->i = (int16_t)u; goto sint;
    case GT_I32: kv->i = (int32_t)u; goto sint;
    case GT_I64:
        kv->i = (int64_t)u;
    sint:
        kv->f = (double)kv->i;
        snprintf(text, size, "%" PRId64, kv->i);
        break;
    case GT_F32: {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, 4);
        kv->f = f;
        snprintf(text, size, "%.9g", (double)f);
        break;
    }
    case GT_F64:
        memcpy(&kv->f, &u, 8);
        snprintf(text, size, "%.17g", kv->f);
        break;
    }
}

/* The value of `kv` (type already read) at r->at. */
static lv_status read_value(lv_weights *w, reader *r, gguf_kv *kv) {
    const char *key = kv->key;
    char text[64];
    size_t at = r->at;
    if (kv->type < 0 || kv->type >= GT_COUNT)
        return lv_error(LV_ERR_FORMAT, "%s: metadata '%s': unknown value type %d (offset %zu)", w->path, key, kv->type,
                        at - 4);
    if (kv->type == GT_STRING) {
        const uint8_t *s;
        uint64_t len;
        LV_TRY(read_string(r, &s, &len, "the string value", key));
        char *v = malloc((size_t)len + 1);
        if (!v) return lv_error(LV_ERR_NOMEM, "%s: metadata '%s': out of memory", w->path, key);
        memcpy(v, s, (size_t)len);
        v[len] = '\0';
        lv_status st = lv_weights_add_metadata(w, key, v);
        free(v);
        return st;
    }
    if (kv->type != GT_ARRAY) {
        LV_TRY(need(r, value_type_size[kv->type], "the value", key));
        scalar_value(kv->type, r->data + r->at, kv, text, sizeof text);
        r->at += value_type_size[kv->type];
        return lv_weights_add_metadata(w, key, text);
    }
    uint32_t it;
    LV_TRY(read_u32(r, &it, "the item type", key));
    if (it >= GT_COUNT)
        return lv_error(LV_ERR_FORMAT, "%s: metadata '%s': array of unknown value type %u (offset %zu)", w->path,
                        key, it, at);
    if (it == GT_ARRAY)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: metadata '%s': an array of arrays (offset %zu) is not supported",
                        w->path, key, at);
    kv->item_type = (int)it;
    LV_TRY(read_u64(r, &kv->count, "the item count", key));
    uint64_t min_item = it == GT_STRING ? 8 : value_type_size[it];
    if (kv->count > (r->size - r->at) / min_item)
        return lv_error(LV_ERR_FORMAT,
                        "%s: metadata '%s' at offset %zu: %" PRIu64 " items of %s need at least %" PRIu64
                        " bytes per item but %zu bytes remain (file size %zu)",
                        w->path, key, at, kv->count, value_type_names[it], min_item, r->size - r->at, r->size);
    if (it != GT_STRING) {
        size_t n = (size_t)(kv->count * min_item);
        kv->items = malloc(n ? n : 1);
        if (!kv->items) return lv_error(LV_ERR_NOMEM, "%s: metadata '%s': out of memory", w->path, key);
        memcpy(kv->items, r->data + r->at, n); /* little-endian files, little-endian hosts */
        r->at += n;
    } else {
        /* first pass: lengths, so that the pointers and the text are one allocation */
        size_t start = r->at;
        uint64_t text_bytes = 0;
        for (uint64_t i = 0; i < kv->count; i++) {
            const uint8_t *s;
            uint64_t len;
            LV_TRY(read_string(r, &s, &len, "an array string", key));
            text_bytes += len + 1; /* below the file size: no overflow */
        }
        uint64_t ptr_bytes = (kv->count + 1) * sizeof(char *);
        char **v = malloc((size_t)(ptr_bytes + text_bytes));
        if (!v) return lv_error(LV_ERR_NOMEM, "%s: metadata '%s': out of memory for %" PRIu64 " strings", w->path,
                                key, kv->count);
        kv->items = v;
        char *t = (char *)v + ptr_bytes;
        r->at = start;
        for (uint64_t i = 0; i < kv->count; i++) {
            const uint8_t *s;
            uint64_t len;
            LV_TRY(read_string(r, &s, &len, "an array string", key));
            memcpy(t, s, (size_t)len);
            t[len] = '\0';
            v[i] = t;
            t += len + 1;
        }
        v[kv->count] = NULL;
    }
    snprintf(text, sizeof text, "[array of %" PRIu64 " %s]", kv->count, value_type_names[it]);
    return lv_weights_add_metadata(w, key, text);
}

static int by_key(const void *a, const void *b) {
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* No key twice (sorted: a file may hold millions of pairs). */
static lv_status check_unique_keys(lv_weights *w) {
    struct lv_gguf_meta *m = w->gguf;
    if (m->n < 2) return LV_OK;
    const gguf_kv **sorted = malloc((size_t)m->n * sizeof *sorted);
    if (!sorted) return lv_error(LV_ERR_NOMEM, "%s: out of memory", w->path);
    for (int i = 0; i < m->n; i++) sorted[i] = &m->kv[i];
    qsort(sorted, (size_t)m->n, sizeof *sorted, by_key);
    lv_status s = LV_OK;
    for (int i = 1; i < m->n && s == LV_OK; i++)
        if (strcmp(sorted[i]->key, sorted[i - 1]->key) == 0)
            s = lv_error(LV_ERR_FORMAT, "%s: metadata key '%s' occurs twice (offsets %zu and %zu)", w->path,
                         sorted[i]->key, sorted[i - 1]->at, sorted[i]->at);
    free(sorted);
    return s;
}

typedef struct tensor_info {
    char *name;
    lv_dtype dtype;
    int ndim;
    int64_t shape[GGUF_MAX_DIMS];
    uint64_t offset, nbytes;
    size_t info_at; /* file offset of the tensor's info, for messages */
} tensor_info;

static int by_offset(const void *a, const void *b) {
    const tensor_info *x = *(tensor_info *const *)a, *y = *(tensor_info *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : (x->nbytes > y->nbytes);
}

static lv_status read_tensor_info(lv_weights *w, reader *r, uint32_t alignment, tensor_info *ti) {
    ti->info_at = r->at;
    const uint8_t *s;
    uint64_t len;
    LV_TRY(read_string(r, &s, &len, "a tensor name", NULL));
    LV_TRY(copy_name(r, s, len, ti->info_at, "tensor name", &ti->name));
    const char *name = ti->name;
    if (!*name) return lv_error(LV_ERR_FORMAT, "%s: a tensor at offset %zu has an empty name", w->path, ti->info_at);
    uint32_t n_dims;
    LV_TRY(read_u32(r, &n_dims, "n_dims", name));
    if (n_dims > GGUF_MAX_DIMS)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s' (offset %zu): n_dims %u (GGUF has at most %d)", w->path,
                        name, ti->info_at, n_dims, GGUF_MAX_DIMS);
    ti->ndim = (int)n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    for (uint32_t d = 0; d < n_dims; d++) LV_TRY(read_u64(r, &ne[d], "a dimension", name));
    uint32_t type;
    size_t type_at = r->at;
    LV_TRY(read_u32(r, &type, "the type", name));
    LV_TRY(read_u64(r, &ti->offset, "the data offset", name));
    if (!ggml_type_to_dtype(type, &ti->dtype))
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s: tensor '%s': ggml type %u (%s, offset %zu) is not supported (longvk reads F32, F16, "
                        "BF16, I32, Q8_0, Q4_K)",
                        w->path, name, type, ggml_type_name(type), type_at);
    /* numel at most 2^60 (so that its bytes fit in 2^62), dimension by dimension; a zero
     * dimension makes it 0 */
    uint64_t numel = 1;
    int zero = 0;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] > ((uint64_t)1 << 62))
            return lv_error(LV_ERR_FORMAT, "%s: tensor '%s' (offset %zu): dimension %u is %" PRIu64 ", too large",
                            w->path, name, ti->info_at, d, ne[d]);
        ti->shape[n_dims - 1 - d] = (int64_t)ne[d];
        if (ne[d] == 0) zero = 1;
        else if (!zero) {
            if (numel > ((uint64_t)1 << 60) / ne[d])
                return lv_error(LV_ERR_FORMAT, "%s: tensor '%s' (offset %zu): the product of its dimensions overflows",
                                w->path, name, ti->info_at);
            numel *= ne[d];
        }
    }
    if (zero) numel = 0;
    size_t block_bytes;
    int64_t block = lv_dtype_block(ti->dtype, &block_bytes);
    if (n_dims > 0 && ne[0] % (uint64_t)block)
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s' (offset %zu): rows of %" PRIu64 " %s elements are not whole blocks of %lld",
                        w->path, name, ti->info_at, ne[0], lv_dtype_name(ti->dtype), (long long)block);
    if (numel % (uint64_t)block)
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s' (offset %zu): %" PRIu64 " %s elements are not whole blocks of %lld",
                        w->path, name, ti->info_at, numel, lv_dtype_name(ti->dtype), (long long)block);
    ti->nbytes = numel / (uint64_t)block * block_bytes; /* <= 2^60 * 4 */
    if (ti->offset % alignment)
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s': data offset %" PRIu64
                        " (read at offset %zu) is not a multiple of the alignment %u",
                        w->path, name, ti->offset, r->at - 8, alignment);
    return LV_OK;
}

lv_status lv_gguf_parse(lv_weights *w, const uint8_t *data, size_t size) {
    reader r = {data, size, 0, w->path};
    const char *path = w->path;
    w->format = "gguf";
    if (size < 4 || memcmp(data, "GGUF", 4) != 0)
        return lv_error(LV_ERR_FORMAT, "%s: not a GGUF file (no \"GGUF\" magic at offset 0)", path);
    r.at = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    LV_TRY(read_u32(&r, &version, "the version", NULL));
    if (version != 2 && version != 3)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: GGUF version %u (offset 4) is not supported (versions 2 and 3 are%s)",
                        path, version, (version & 0xffff) == 0 ? "; a big-endian file?" : "");
    LV_TRY(read_u64(&r, &n_tensors, "the tensor count", NULL));
    LV_TRY(read_u64(&r, &n_kv, "the metadata count", NULL));
    /* a metadata pair takes at least 13 bytes, a tensor info 24 */
    if (n_kv > (size - r.at) / 13 || n_kv > (1u << 24))
        return lv_error(LV_ERR_FORMAT,
                        "%s: %" PRIu64 " metadata pairs (offset 16) cannot fit in the %zu bytes that remain",
                        path, n_kv, size - r.at);
    if (n_tensors > (size - r.at) / 24 || n_tensors > (1u << 24))
        return lv_error(LV_ERR_FORMAT, "%s: %" PRIu64 " tensors (offset 8) cannot fit in the %zu bytes that remain",
                        path, n_tensors, size - r.at);
    w->gguf = calloc(1, sizeof *w->gguf);
    if (!w->gguf) return lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
    struct lv_gguf_meta *m = w->gguf;
    uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = r.at;
        const uint8_t *s;
        uint64_t len;
        LV_TRY(read_string(&r, &s, &len, "a metadata key", NULL));
        if (m->n == m->cap) { /* grown as pairs are read: a count is only a claim */
            int cap = m->cap ? 2 * m->cap : 64;
            gguf_kv *grown = realloc(m->kv, (size_t)cap * sizeof *grown);
            if (!grown) return lv_error(LV_ERR_NOMEM, "%s: out of memory for %d metadata pairs", path, cap);
            m->kv = grown;
            m->cap = cap;
        }
        gguf_kv *kv = &m->kv[m->n];
        memset(kv, 0, sizeof *kv);
        LV_TRY(copy_name(&r, s, len, at, "metadata key", &kv->key));
        kv->at = at;
        m->n++;
        uint32_t type;
        LV_TRY(read_u32(&r, &type, "the value type", kv->key));
        kv->type = type < GT_COUNT ? (int)type : -1;
        if (kv->type < 0)
            return lv_error(LV_ERR_FORMAT, "%s: metadata '%s': unknown value type %u (offset %zu)", path, kv->key,
                            type, r.at - 4);
        LV_TRY(read_value(w, &r, kv));
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (kv->type != GT_U32 || kv->i == 0 || (kv->i & (kv->i - 1)))
                return lv_error(LV_ERR_FORMAT, "%s: general.alignment (offset %zu) is not a u32 power of two", path,
                                at);
            alignment = (uint32_t)kv->i;
        }
    }
    LV_TRY(check_unique_keys(w));
    tensor_info *ti = calloc((size_t)n_tensors + 1, sizeof *ti);
    tensor_info **order = calloc((size_t)n_tensors + 1, sizeof *order);
    lv_status st = LV_OK;
    if (!ti || !order) {
        st = lv_error(LV_ERR_NOMEM, "%s: out of memory for %" PRIu64 " tensors", path, n_tensors);
        goto done;
    }
    for (uint64_t i = 0; i < n_tensors && st == LV_OK; i++) st = read_tensor_info(w, &r, alignment, &ti[i]);
    if (st != LV_OK) goto done;
    /* the data section: at the next multiple of the alignment (absent when there are no tensors) */
    uint64_t data_start = (r.at + (alignment - 1)) / alignment * alignment;
    if (data_start > size) {
        if (n_tensors) {
            st = lv_error(LV_ERR_FORMAT, "%s: truncated: the data section would start at offset %" PRIu64
                          " (alignment %u) past the end of the file (%zu bytes)", path, data_start, alignment, size);
            goto done;
        }
        data_start = size;
    }
    uint64_t data_size = size - data_start;
    for (uint64_t i = 0; i < n_tensors; i++) {
        tensor_info *t = &ti[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            st = lv_error(LV_ERR_FORMAT,
                          "%s: tensor '%s': its %" PRIu64 " bytes at data offset %" PRIu64 " (file offset %" PRIu64
                          ") run past the end of the file (%zu bytes): truncated file?",
                          path, t->name, t->nbytes, t->offset, data_start + t->offset, size);
            goto done;
        }
        order[i] = t;
    }
    qsort(order, (size_t)n_tensors, sizeof *order, by_offset);
    const tensor_info *last = NULL;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (!order[i]->nbytes) continue;
        if (last && order[i]->offset < last->offset + last->nbytes) {
            st = lv_error(LV_ERR_FORMAT,
                          "%s: tensors '%s' (data offset %" PRIu64 ", %" PRIu64 " bytes) and '%s' (data offset %" PRIu64
                          ", file offset %" PRIu64 ") overlap",
                          path, last->name, last->offset, last->nbytes, order[i]->name, order[i]->offset,
                          data_start + order[i]->offset);
            goto done;
        }
        last = order[i];
    }
    for (uint64_t i = 0; i < n_tensors && st == LV_OK; i++) {
        tensor_info *t = &ti[i];
        const uint8_t *p = data + data_start + t->offset;
        size_t elem = lv_dtype_quantized(t->dtype) ? 2 : lv_dtype_size(t->dtype);
        if ((uintptr_t)p % elem && t->nbytes) { /* an image in memory at an odd address: copied */
            void *copy = malloc((size_t)t->nbytes);
            if (!copy) {
                st = lv_error(LV_ERR_NOMEM, "%s: tensor '%s': out of memory", path, t->name);
                break;
            }
            memcpy(copy, p, (size_t)t->nbytes);
            if ((st = lv_weights_own(w, copy)) != LV_OK) break;
            p = copy;
        }
        st = lv_weights_add(w, t->name, t->dtype, t->ndim, t->shape, p, t->nbytes);
    }
    if (st == LV_OK) st = lv_weights_finish(w);
done:
    for (uint64_t i = 0; ti && i < n_tensors; i++) free(ti[i].name);
    free(ti);
    free(order);
    return st;
}

lv_status lv_gguf_open(const char *path, lv_weights **out) {
    return lv_weights_map_file(path, "gguf", lv_gguf_parse, out);
}
