/* safetensors files: an 8-byte little-endian header length, a JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the tensor bytes (offsets relative to the end of the header). Read with mmap;
 * written atomically. Every field is checked before a tensor is handed out. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk/files.h"
#include "weights_internal.h"

/* The reference implementation refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)
/* JSON numbers are doubles: integers above 2^53 are not exact. */
#define ST_MAX_INT 9007199254740992.0

typedef struct st_range {
    uint64_t begin, end;
    int tensor;
} st_range;

static uint64_t read_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Dtype tags of the safetensors format: the ones longvk reads, and the ones it knows but
 * cannot use (a clean "unsupported" rather than "unknown"). */
static int parse_dtype(const char *tag, lv_dtype *out) {
    static const struct { const char *tag; lv_dtype dtype; } known[] = {
        {"F32", LV_F32}, {"F16", LV_F16}, {"BF16", LV_BF16}, {"I32", LV_I32}};
    static const char *const unsupported[] = {"F64", "I64", "I16", "I8", "U8", "U16", "U32", "U64",
                                              "BOOL", "F8_E4M3", "F8_E5M2", "C64", "F4", "F6_E2M3",
                                              "F6_E3M2", "F8_E8M0", "E8M0"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(tag, known[i].tag) == 0) {
            *out = known[i].dtype;
            return 1;
        }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (strcmp(tag, unsupported[i]) == 0) return 0;
    return -1;
}

/* A JSON number that is a non-negative integer exactly representable. */
static int json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    if (!(v >= 0.0) || v > ST_MAX_INT || floor(v) != v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static lv_status parse_metadata(lv_weights *w, const cJSON *meta) {
    if (!cJSON_IsObject(meta))
        return lv_error(LV_ERR_FORMAT, "%s: __metadata__ is not a JSON object", w->path);
    for (const cJSON *kv = meta->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv) || !kv->valuestring)
            return lv_error(LV_ERR_FORMAT, "%s: __metadata__ value of '%s' is not a string", w->path,
                            kv->string ? kv->string : "?");
        LV_TRY(lv_weights_add_metadata(w, kv->string ? kv->string : "", kv->valuestring));
    }
    return LV_OK;
}

static int by_begin(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

static void describe_shape(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* One entry of the header: dtype, shape and offsets, checked against the data section. */
static lv_status parse_tensor(lv_weights *w, const cJSON *entry, const uint8_t *data, uint64_t data_start,
                              uint64_t data_size, st_range *range) {
    const char *name = entry->string ? entry->string : "";
    const char *path = w->path;
    if (!*name) return lv_error(LV_ERR_FORMAT, "%s: a tensor in the header has an empty name", path);
    if (!cJSON_IsObject(entry))
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': header entry is not a JSON object", path, name);
    const cJSON *jdtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *jshape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *joff = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(jdtype) || !jdtype->valuestring)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': no \"dtype\" string in the header", path, name);
    if (!cJSON_IsArray(jshape))
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': no \"shape\" array in the header", path, name);
    if (!cJSON_IsArray(joff) || cJSON_GetArraySize(joff) != 2)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" is not an array [begin, end]",
                        path, name);
    lv_dtype dtype = LV_F32;
    int known = parse_dtype(jdtype->valuestring, &dtype);
    if (known < 0)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name,
                        jdtype->valuestring);
    if (known == 0)
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s: tensor '%s': dtype %s is not supported (longvk reads F32, F16, BF16, I32)",
                        path, name, jdtype->valuestring);
    int ndim = cJSON_GetArraySize(jshape);
    if (ndim > LV_MAX_DIMS)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most %d supported)", path,
                        name, ndim, LV_MAX_DIMS);
    int64_t shape[LV_MAX_DIMS] = {0};
    size_t elem = lv_dtype_size(dtype);
    /* numel * elem must stay below 2^62: checked dimension by dimension. */
    uint64_t numel = 1;
    int zero = 0, d = 0;
    for (const cJSON *dim = jshape->child; dim; dim = dim->next, d++) {
        uint64_t v;
        if (!json_uint(dim, &v))
            return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': shape entry %d is not a non-negative integer",
                            path, name, d);
        shape[d] = (int64_t)v;
        if (v == 0) zero = 1;
        else if (!zero) {
            if (numel > ((uint64_t)1 << 62) / elem / v)
                return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': shape is too large", path, name);
            numel *= v;
        }
    }
    if (zero) numel = 0;
    uint64_t begin, end;
    if (!json_uint(joff->child, &begin) || !json_uint(joff->child->next, &end))
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", path,
                        name);
    if (begin > end)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                        path, name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] (file offsets %llu to %llu) run past the "
                        "end of the data section (%llu bytes, file size %llu): truncated file?",
                        path, name, (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)(data_start + begin), (unsigned long long)(data_start + end),
                        (unsigned long long)data_size, (unsigned long long)(data_start + data_size));
    if (end - begin != numel * elem) {
        char s[128];
        describe_shape(shape, ndim, s, sizeof s);
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s': shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] "
                        "(file offset %llu) hold %llu",
                        path, name, s, jdtype->valuestring, (unsigned long long)(numel * elem),
                        (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)(data_start + begin), (unsigned long long)(end - begin));
    }
    const uint8_t *p = data + data_start + begin;
    /* Consumers read elements in place: a tensor that the header puts at an address that is
     * not a multiple of its element size is copied into an aligned buffer. */
    if (((uintptr_t)p % elem) != 0 && end > begin) {
        void *copy = malloc(end - begin);
        if (!copy) return lv_error(LV_ERR_NOMEM, "%s: tensor '%s': out of memory", path, name);
        memcpy(copy, p, end - begin);
        LV_TRY(lv_weights_own(w, copy));
        p = copy;
    }
    range->begin = begin;
    range->end = end;
    range->tensor = w->count;
    return lv_weights_add(w, name, dtype, ndim, shape, p, end - begin);
}

lv_status lv_safetensors_parse(lv_weights *w, const uint8_t *data, size_t size) {
    const char *path = w->path;
    if (size < 8)
        return lv_error(LV_ERR_FORMAT,
                        "%s: truncated: %zu bytes, but a safetensors file starts with an 8-byte header length",
                        path, size);
    uint64_t header_len = read_le64(data);
    /* Neither a plausible length nor the '{' that starts every header: another kind of file. */
    if (header_len > size - 8 && size > 8 && data[8] != '{')
        return lv_error(LV_ERR_FORMAT,
                        "%s: not a safetensors file or a PyTorch zip checkpoint (header length %llu for a "
                        "%zu-byte file, byte 8 is 0x%02x, not '{')",
                        path, (unsigned long long)header_len, size, data[8]);
    if (header_len > size - 8)
        return lv_error(LV_ERR_FORMAT,
                        "%s: header length %llu (file offset 0) runs past the end of the file (%zu bytes, "
                        "at most %zu header bytes): truncated or not a safetensors file",
                        path, (unsigned long long)header_len, size, size - 8);
    if (header_len > ST_MAX_HEADER)
        return lv_error(LV_ERR_FORMAT, "%s: header length %llu exceeds the %u-byte limit", path,
                        (unsigned long long)header_len, ST_MAX_HEADER);
    if (header_len < 2)
        return lv_error(LV_ERR_FORMAT, "%s: header length %llu is too short for a JSON object", path,
                        (unsigned long long)header_len);
    const char *header = (const char *)data + 8;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(header, (size_t)header_len, &end, 0);
    if (!root) {
        size_t at = (end && end >= header && end <= header + header_len) ? (size_t)(end - header) : 0;
        return lv_error(LV_ERR_FORMAT, "%s: header JSON is malformed near byte %zu of the header (file offset %zu)",
                        path, at, at + 8);
    }
    /* Writers pad the header with spaces to align the data. */
    for (const char *p = end; p && p < header + header_len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            cJSON_Delete(root);
            return lv_error(LV_ERR_FORMAT, "%s: unexpected bytes after the header JSON at file offset %zu",
                            path, (size_t)(p - header) + 8);
        }
    lv_status s = LV_OK;
    st_range *ranges = NULL;
    if (!cJSON_IsObject(root)) {
        s = lv_error(LV_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    int n = cJSON_GetArraySize(root);
    ranges = malloc(((size_t)n + 1) * sizeof *ranges);
    if (!ranges) {
        s = lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    uint64_t data_start = 8 + header_len, data_size = size - data_start;
    int nranges = 0, seen_metadata = 0;
    for (const cJSON *entry = root->child; entry; entry = entry->next) {
        if (entry->string && strcmp(entry->string, "__metadata__") == 0) {
            if (seen_metadata++) {
                s = lv_error(LV_ERR_FORMAT, "%s: __metadata__ occurs twice", path);
                goto done;
            }
            if ((s = parse_metadata(w, entry)) != LV_OK) goto done;
            continue;
        }
        if ((s = parse_tensor(w, entry, data, data_start, data_size, &ranges[nranges])) != LV_OK) goto done;
        nranges++;
    }
    /* No two tensors may share bytes (empty tensors own none). */
    qsort(ranges, (size_t)nranges, sizeof *ranges, by_begin);
    const st_range *last = NULL;
    for (int i = 0; i < nranges; i++) {
        if (ranges[i].begin == ranges[i].end) continue;
        if (last && ranges[i].begin < last->end) {
            s = lv_error(LV_ERR_FORMAT,
                         "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap (file offset %llu)", path,
                         w->tensors[last->tensor].name, (unsigned long long)last->begin,
                         (unsigned long long)last->end, w->tensors[ranges[i].tensor].name,
                         (unsigned long long)ranges[i].begin, (unsigned long long)ranges[i].end,
                         (unsigned long long)(data_start + ranges[i].begin));
            goto done;
        }
        last = &ranges[i];
    }
    s = lv_weights_finish(w);
done:
    free(ranges);
    cJSON_Delete(root);
    return s;
}

lv_status lv_safetensors_open(const char *path, lv_weights **out) {
    return lv_weights_map_file(path, "safetensors", lv_safetensors_parse, out);
}

/* ---- writing -------------------------------------------------------------------------- */

typedef struct st_buf {
    char *data;
    size_t len, cap;
    int failed;
} st_buf;

static void buf_put(st_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_str(st_buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_printf_u64(st_buf *b, uint64_t v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    buf_put(b, tmp, (size_t)n);
}

/* A JSON string literal: quotes, backslashes and control bytes escaped; UTF-8 passes through. */
static void buf_json_string(st_buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            buf_put(b, e, 2);
        } else if (*p < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", *p);
            buf_put(b, e, 6);
        } else {
            buf_put(b, (const char *)p, 1);
        }
    }
    buf_put(b, "\"", 1);
}

static lv_status check_tensors(const char *path, const lv_weight *t, int n) {
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        if (!name || !*name) return lv_error(LV_ERR_INVALID, "%s: tensor %d has no name", path, i);
        if (strcmp(name, "__metadata__") == 0)
            return lv_error(LV_ERR_INVALID, "%s: '__metadata__' cannot name a tensor", path);
        if (lv_dtype_quantized(t[i].dtype))
            return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s': safetensors has no %s dtype (write it as GGUF, "
                            "or dequantize it to f32/f16/bf16 first)", path, name, lv_dtype_name(t[i].dtype));
        size_t elem = lv_dtype_size(t[i].dtype);
        if (!elem) return lv_error(LV_ERR_INVALID, "%s: tensor '%s': unknown dtype %d", path, name, (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > LV_MAX_DIMS)
            return lv_error(LV_ERR_INVALID, "%s: tensor '%s': %d dimensions", path, name, t[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0)
                return lv_error(LV_ERR_INVALID, "%s: tensor '%s': negative dimension", path, name);
            numel *= (uint64_t)t[i].shape[d];
        }
        if (numel * elem != t[i].nbytes)
            return lv_error(LV_ERR_INVALID, "%s: tensor '%s': %llu bytes given, its shape needs %llu", path,
                            name, (unsigned long long)t[i].nbytes, (unsigned long long)(numel * elem));
        if (t[i].nbytes && !t[i].data)
            return lv_error(LV_ERR_INVALID, "%s: tensor '%s' has no data", path, name);
        for (int j = 0; j < i; j++)
            if (strcmp(t[j].name, name) == 0)
                return lv_error(LV_ERR_INVALID, "%s: tensor name '%s' given twice", path, name);
    }
    return LV_OK;
}

lv_status lv_safetensors_write(const char *path, const lv_weight *tensors, int n,
                               const char *const *metadata_kv, int n_metadata) {
    if (!path) return lv_error(LV_ERR_INVALID, "lv_safetensors_write: no path");
    if (n < 0 || n_metadata < 0 || (n && !tensors) || (n_metadata && !metadata_kv))
        return lv_error(LV_ERR_INVALID, "%s: bad tensor or metadata list", path);
    LV_TRY(check_tensors(path, tensors, n));
    for (int i = 0; i < 2 * n_metadata; i++)
        if (!metadata_kv[i]) return lv_error(LV_ERR_INVALID, "%s: metadata entry %d is NULL", path, i / 2);

    /* Data order: element size 4 first, then 2, so that each tensor stays aligned. */
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    uint64_t *offset = malloc(((size_t)n + 1) * sizeof *offset);
    st_buf h = {0};
    lv_status s = LV_OK;
    lv_output_file out;
    int opened = 0;
    if (!order || !offset) {
        s = lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    int k = 0;
    for (size_t size = 8; size >= 1; size /= 2)
        for (int i = 0; i < n; i++)
            if (lv_dtype_size(tensors[i].dtype) == size) order[k++] = i;
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        offset[order[i]] = at;
        at += tensors[order[i]].nbytes;
    }

    buf_str(&h, "{");
    if (n_metadata) {
        buf_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_metadata; i++) {
            if (i) buf_str(&h, ",");
            buf_json_string(&h, metadata_kv[2 * i]);
            buf_str(&h, ":");
            buf_json_string(&h, metadata_kv[2 * i + 1]);
        }
        buf_str(&h, "}");
    }
    for (int i = 0; i < n; i++) {
        const lv_weight *t = &tensors[i];
        if (i || n_metadata) buf_str(&h, ",");
        buf_json_string(&h, t->name);
        buf_str(&h, ":{\"dtype\":\"");
        buf_str(&h, lv_dtype_tag(t->dtype));
        buf_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) buf_str(&h, ",");
            buf_printf_u64(&h, (uint64_t)t->shape[d]);
        }
        buf_str(&h, "],\"data_offsets\":[");
        buf_printf_u64(&h, offset[i]);
        buf_str(&h, ",");
        buf_printf_u64(&h, offset[i] + t->nbytes);
        buf_str(&h, "]}");
    }
    buf_str(&h, "}");
    while ((8 + h.len) % 8) buf_str(&h, " ");
    if (h.failed) {
        s = lv_error(LV_ERR_NOMEM, "%s: out of memory for the header", path);
        goto done;
    }

    /* a temporary file renamed into place; a device or FIFO written through (lv_output_open) */
    if ((s = lv_output_open(&out, path)) != LV_OK) goto done;
    opened = 1;
    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    if ((s = lv_output_write(&out, len_bytes, 8)) != LV_OK) goto done;
    if ((s = lv_output_write(&out, h.data, h.len)) != LV_OK) goto done;
    for (int i = 0; i < n; i++)
        if ((s = lv_output_write(&out, tensors[order[i]].data, tensors[order[i]].nbytes)) != LV_OK) goto done;
    if ((s = lv_output_sync(&out)) != LV_OK) goto done;
    opened = 0;
    s = lv_output_commit(&out);
done:
    if (opened) lv_output_discard(&out);
    free(h.data);
    free(order);
    free(offset);
    return s;
}
