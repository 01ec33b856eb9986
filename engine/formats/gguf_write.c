/* Writing GGUF files (longvk/weights.h, lv_gguf_write): version 3, little-endian, as ggml's
 * docs/gguf.md lays it out and gguf.c reads it. The header ("GGUF", u32 version, u64 tensor
 * count, u64 metadata count), the metadata pairs (string keys; general.alignment as a u32,
 * the caller's pairs as strings), the tensor infos (name, u32 n_dims, the dims in ggml order
 * (ne[0], the row, first; dims of 1 dropped from a tensor of more than 4), u32 ggml type, u64 offset into the data), zero padding to the
 * alignment, then each tensor's bytes at its offset (every one a multiple of 32 bytes in). */
#include <stdlib.h>
#include <string.h>

#include "longvk/files.h"
#include "longvk/weights.h"

#define GGUF_ALIGNMENT 32
#define GGUF_TYPE_U32 4
#define GGUF_TYPE_STRING 8

/* ggml's type number of a dtype (ggml.h's enum ggml_type) */
static int ggml_type(lv_dtype d) {
    switch (d) {
    case LV_F32: return 0;
    case LV_F16: return 1;
    case LV_Q8_0: return 8;
    case LV_Q4_K: return 12;
    case LV_I32: return 26;
    case LV_BF16: return 30;
    }
    return -1;
}

typedef struct gbuf {
    uint8_t *data;
    size_t len, cap;
    int failed;
} gbuf;

static void put(gbuf *b, const void *p, size_t n) {
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d, b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_u32(gbuf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}

static void put_u64(gbuf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}

static void put_str(gbuf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static uint64_t align_up(uint64_t x) { return (x + GGUF_ALIGNMENT - 1) / GGUF_ALIGNMENT * GGUF_ALIGNMENT; }

/* The dims GGUF gets, row-major: t's, less dims of 1 where t has more than 4 (the same
 * layout; GGUF has at most 4). Returns their count. */
static int gguf_dims(const lv_weight *t, int64_t *dims) {
    int n = 0;
    for (int d = 0; d < t->ndim && d < LV_MAX_DIMS; d++) /* an lv_weight has at most LV_MAX_DIMS */
        if (t->ndim <= 4 || t->shape[d] != 1 || (n == 0 && d == t->ndim - 1)) dims[n++] = t->shape[d];
    return n;
}

/* Checks what the file cannot hold before anything is written. */
static lv_status check(const char *path, const lv_weight *t, int n, const char *const *kv, int n_kv) {
    for (int i = 0; i < n; i++) {
        if (!t[i].name || (!t[i].data && t[i].nbytes))
            return lv_error(LV_ERR_INVALID, "%s: tensor %d has no name or no data", path, i);
        if (ggml_type(t[i].dtype) < 0)
            return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s': no GGUF type for dtype %d", path, t[i].name,
                            (int)t[i].dtype);
        int64_t dims[LV_MAX_DIMS];
        if (t[i].ndim < 1 || gguf_dims(&t[i], dims) > 4)
            return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions over 1 (GGUF: 1 to 4)", path,
                            t[i].name, gguf_dims(&t[i], dims));
        uint64_t numel = lv_weight_numel(&t[i]);
        if (lv_dtype_bytes(t[i].dtype, (int64_t)numel) != t[i].nbytes ||
            t[i].shape[t[i].ndim - 1] % lv_dtype_block(t[i].dtype, NULL))
            return lv_error(LV_ERR_INVALID, "%s: tensor '%s': %llu bytes for %llu %s elements (rows of whole blocks)",
                            path, t[i].name, (unsigned long long)t[i].nbytes, (unsigned long long)numel,
                            lv_dtype_name(t[i].dtype));
    }
    for (int i = 0; i < 2 * n_kv; i++)
        if (!kv[i]) return lv_error(LV_ERR_INVALID, "%s: metadata entry %d is NULL", path, i / 2);
    return LV_OK;
}

lv_status lv_gguf_write(const char *path, const lv_weight *tensors, int n, const char *const *metadata_kv,
                        int n_metadata) {
    if (!path) return lv_error(LV_ERR_INVALID, "lv_gguf_write: no path");
    if (n < 0 || n_metadata < 0 || (n && !tensors) || (n_metadata && !metadata_kv))
        return lv_error(LV_ERR_INVALID, "%s: bad tensor or metadata list", path);
    LV_TRY(check(path, tensors, n, metadata_kv, n_metadata));

    gbuf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)n);
    put_u64(&h, (uint64_t)n_metadata + 1);
    put_str(&h, "general.alignment");
    put_u32(&h, GGUF_TYPE_U32);
    put_u32(&h, GGUF_ALIGNMENT);
    for (int i = 0; i < n_metadata; i++) {
        put_str(&h, metadata_kv[2 * i]);
        put_u32(&h, GGUF_TYPE_STRING);
        put_str(&h, metadata_kv[2 * i + 1]);
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const lv_weight *t = &tensors[i];
        int64_t dims[LV_MAX_DIMS];
        int nd = gguf_dims(t, dims);
        put_str(&h, t->name);
        put_u32(&h, (uint32_t)nd);
        for (int d = nd - 1; d >= 0; d--) put_u64(&h, (uint64_t)dims[d]); /* ggml order */
        put_u32(&h, (uint32_t)ggml_type(t->dtype));
        put_u64(&h, at);
        at = align_up(at + t->nbytes);
    }
    static const uint8_t zeros[GGUF_ALIGNMENT];
    put(&h, zeros, align_up(h.len) - h.len);
    if (h.failed) {
        free(h.data);
        return lv_error(LV_ERR_NOMEM, "%s: out of memory for the header", path);
    }

    /* a temporary file renamed into place; a device or FIFO written through (lv_output_open) */
    lv_output_file out;
    lv_status s = lv_output_open(&out, path);
    if (s != LV_OK) {
        free(h.data);
        return s;
    }
    s = lv_output_write(&out, h.data, h.len);
    for (int i = 0; s == LV_OK && i < n; i++) {
        s = lv_output_write(&out, tensors[i].data, tensors[i].nbytes);
        uint64_t pad = align_up(tensors[i].nbytes) - tensors[i].nbytes;
        if (s == LV_OK && i + 1 < n) s = lv_output_write(&out, zeros, pad);
    }
    if (s == LV_OK) s = lv_output_sync(&out);
    free(h.data);
    if (s != LV_OK) {
        lv_output_discard(&out);
        return s;
    }
    return lv_output_commit(&out);
}
