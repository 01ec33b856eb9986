/* PyTorch zip checkpoints (.pth / .pt as torch.save writes them since 1.6): a zip archive
 * with <prefix>/data.pkl (the pickled object) and one record <prefix>/data/<key> of raw
 * little-endian bytes per storage. The pickle goes through the restricted reader of
 * pickle.c; the state dict's tensors must be contiguous and are copied out of the archive
 * once per storage (views of one storage share its buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "longvk/files.h"
#include "pickle.h"
#include "weights_internal.h"

#define PTH_MAX_PICKLE ((uint64_t)1 << 30)

typedef struct pth_storage {
    const char *key;
    const pk_storage_type *type;
    int64_t numel;
    const uint8_t *data;
} pth_storage;

static const char *kind_name(pk_kind k) {
    static const char *const names[] = {"None", "bool", "int", "float", "str", "tuple",
                                        "list", "dict", "global", "storage", "tensor"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static void describe_dims(const int64_t *v, int n, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)v[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The dict that holds the tensors: the top level, or a known wrapper key. */
static const pk_value *find_state_dict(const pk_value *root, const char **under) {
    static const char *const wrappers[] = {"state_dict", "generator", "model", "ema"};
    *under = NULL;
    for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++) {
        const pk_value *v = pk_dict_get(root, wrappers[i]);
        if (v && v->kind == PK_DICT) {
            *under = wrappers[i];
            return v;
        }
    }
    return root;
}

static lv_status get_storage(lv_weights *w, const char *tensor, const pk_value *sv, pth_storage **cache,
                             int *n_cache, lv_pth_storage_fn load, void *user, pth_storage **out) {
    const char *key = sv->u.storage.key;
    for (int i = 0; i < *n_cache; i++) {
        pth_storage *c = &(*cache)[i];
        if (strcmp(c->key, key) != 0) continue;
        if (c->type != sv->u.storage.type || c->numel != sv->u.storage.numel)
            return lv_error(LV_ERR_FORMAT,
                            "%s: tensor '%s': storage '%s' is described twice differently (torch.%s of %lld "
                            "and torch.%s of %lld elements)",
                            w->path, tensor, key, c->type->name, (long long)c->numel,
                            sv->u.storage.type->name, (long long)sv->u.storage.numel);
        *out = c;
        return LV_OK;
    }
    const pk_storage_type *type = sv->u.storage.type;
    int64_t numel = sv->u.storage.numel;
    if ((uint64_t)numel > ((uint64_t)1 << 62) / (uint64_t)type->elem_size)
        return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': storage '%s' of %lld elements is too large", w->path,
                        tensor, key, (long long)numel);
    const void *data = NULL;
    LV_TRY(load(user, w, tensor, key, (uint64_t)numel * (uint64_t)type->elem_size, &data));
    pth_storage *grown = realloc(*cache, ((size_t)*n_cache + 1) * sizeof **cache);
    if (!grown) return lv_error(LV_ERR_NOMEM, "%s: out of memory", w->path);
    *cache = grown;
    pth_storage *c = &grown[(*n_cache)++];
    c->key = key;
    c->type = type;
    c->numel = numel;
    c->data = data;
    *out = c;
    return LV_OK;
}

/* One state dict entry: dtype, contiguity and extent checked, then added to `w`. */
static lv_status add_tensor(lv_weights *w, const char *name, const pk_value *t, pth_storage **cache,
                            int *n_cache, lv_pth_storage_fn load, void *user) {
    const pk_value *sv = t->u.tensor.storage;
    const pk_storage_type *type = sv->u.storage.type;
    if (type->dtype < 0)
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s: tensor '%s' is stored as torch.%s: longvk reads float32, float16, bfloat16 "
                        "and int32 tensors only",
                        w->path, name, type->name);
    int ndim = t->u.tensor.ndim;
    const int64_t *size = t->u.tensor.size, *stride = t->u.tensor.stride;
    char ssize[160], sstride[160];
    describe_dims(size, ndim, ssize, sizeof ssize);
    describe_dims(stride, ndim, sstride, sizeof sstride);
    if (ndim > LV_MAX_DIMS)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions %s (at most %d supported)",
                        w->path, name, ndim, ssize, LV_MAX_DIMS);
    uint64_t numel = 1;
    int empty = 0;
    for (int d = 0; d < ndim; d++) {
        if (size[d] == 0) empty = 1;
        else if (!empty) {
            if (numel > ((uint64_t)1 << 62) / (uint64_t)size[d])
                return lv_error(LV_ERR_FORMAT, "%s: tensor '%s': size %s is too large", w->path, name, ssize);
            numel *= (uint64_t)size[d];
        }
    }
    if (empty) numel = 0;
    /* Row-major contiguity; the stride of a dimension of size 1 does not matter. */
    uint64_t expect = 1;
    for (int d = ndim - 1; d >= 0 && numel; d--) {
        if (size[d] != 1 && (uint64_t)stride[d] != expect)
            return lv_error(LV_ERR_UNSUPPORTED,
                            "%s: tensor '%s' is not contiguous (size %s, stride %s): save it with "
                            "tensor.contiguous()",
                            w->path, name, ssize, sstride);
        expect *= (uint64_t)size[d];
    }
    uint64_t offset = (uint64_t)t->u.tensor.offset;
    if (numel && (offset > (uint64_t)sv->u.storage.numel || numel > (uint64_t)sv->u.storage.numel - offset))
        return lv_error(LV_ERR_FORMAT,
                        "%s: tensor '%s': %llu elements at storage offset %llu run past the end of storage '%s' "
                        "(%lld elements)",
                        w->path, name, (unsigned long long)numel, (unsigned long long)offset, sv->u.storage.key,
                        (long long)sv->u.storage.numel);
    pth_storage *st = NULL;
    LV_TRY(get_storage(w, name, sv, cache, n_cache, load, user, &st));
    size_t elem = (size_t)type->elem_size;
    const void *data = numel ? st->data + offset * elem : st->data;
    return lv_weights_add(w, name, (lv_dtype)type->dtype, ndim, size, data, numel * elem);
}

lv_status lv_pth_from_pickle(lv_weights *w, const uint8_t *pickle, size_t size, lv_pth_storage_fn load,
                             void *user) {
    char where[600];
    snprintf(where, sizeof where, "%s (data.pkl)", w->path);
    pk_result r;
    LV_TRY(pk_parse(where, pickle, size, &r));
    lv_status s = LV_OK;
    pth_storage *cache = NULL;
    int n_cache = 0;
    if (r.root->kind != PK_DICT) {
        s = lv_error(LV_ERR_FORMAT, "%s: the checkpoint holds a %s, not a dict of tensors", w->path,
                     kind_name(r.root->kind));
        goto done;
    }
    const char *under;
    const pk_value *sd = find_state_dict(r.root, &under);
    size_t n_pairs = sd->u.seq.n / 2, n_tensors = 0, skipped = 0;
    for (size_t i = 0; i < n_pairs; i++) {
        const pk_value *k = sd->u.seq.items[2 * i], *v = sd->u.seq.items[2 * i + 1];
        if (v->kind != PK_TENSOR) continue;
        if (k->kind != PK_STR || strlen(k->u.str.s) != k->u.str.len || k->u.str.len == 0) {
            s = lv_error(LV_ERR_FORMAT, "%s: a tensor in the state dict has a key that is not a plain string",
                         w->path);
            goto done;
        }
        n_tensors++;
    }
    if (n_tensors == 0) {
        char keys[256] = "";
        size_t at = 0;
        for (size_t i = 0; i < n_pairs && at < sizeof keys - 1; i++) {
            const pk_value *k = sd->u.seq.items[2 * i];
            if (k->kind == PK_STR)
                at += (size_t)snprintf(keys + at, sizeof keys - at, "%s'%.40s'", i ? ", " : "", k->u.str.s);
        }
        s = lv_error(LV_ERR_FORMAT, "%s: no tensors in the state dict%s%s%s (keys: %s)", w->path,
                     under ? " under '" : "", under ? under : "", under ? "'" : "", *keys ? keys : "none");
        goto done;
    }
    /* LongSANA saves its generator with 'model.' before every name (DDP uses 'module.'). */
    const char *strip = "";
    static const char *const prefixes[] = {"model.", "module."};
    for (size_t c = 0; c < sizeof prefixes / sizeof prefixes[0] && !*strip; c++) {
        int all = 1;
        for (size_t i = 0; i < n_pairs && all; i++) {
            const pk_value *k = sd->u.seq.items[2 * i], *v = sd->u.seq.items[2 * i + 1];
            if (v->kind == PK_TENSOR && (!starts_with(k->u.str.s, prefixes[c]) ||
                                         k->u.str.len == strlen(prefixes[c])))
                all = 0;
        }
        if (all) strip = prefixes[c];
    }
    for (size_t i = 0; i < n_pairs; i++) {
        const pk_value *k = sd->u.seq.items[2 * i], *v = sd->u.seq.items[2 * i + 1];
        if (v->kind != PK_TENSOR) {
            skipped++;
            continue;
        }
        if ((s = add_tensor(w, k->u.str.s + strlen(strip), v, &cache, &n_cache, load, user)) != LV_OK) goto done;
    }
    size_t at = 0;
    if (under) at += (size_t)snprintf(w->note + at, sizeof w->note - at, "state dict under '%s'", under);
    else at += (size_t)snprintf(w->note + at, sizeof w->note - at, "top-level state dict");
    if (*strip && at < sizeof w->note)
        at += (size_t)snprintf(w->note + at, sizeof w->note - at, ", prefix '%s' removed", strip);
    if (skipped && at < sizeof w->note)
        snprintf(w->note + at, sizeof w->note - at, ", %zu non-tensor entr%s skipped", skipped,
                 skipped == 1 ? "y" : "ies");
    s = lv_weights_finish(w);
done:
    free(cache);
    pk_free(&r);
    return s;
}

/* ---- the zip container ----------------------------------------------------------------- */

typedef struct pth_zip {
    zip_t *zip;
    const char *path;
    char prefix[512]; /* "archive/" */
} pth_zip;

static lv_status zip_fail(const char *path, const char *what, zip_error_t *err) {
    return lv_error(LV_ERR_FORMAT, "%s: %s: %s", path, what, zip_error_strerror(err));
}

/* Read record `index` completely; it must hold exactly `expect` bytes. */
static lv_status read_record(pth_zip *z, zip_int64_t index, const char *name, uint64_t expect, uint8_t **out) {
    /* `name` may say "record (tensor 'x')": messages below start with it. */
    *out = NULL;
    zip_file_t *f = zip_fopen_index(z->zip, (zip_uint64_t)index, 0);
    if (!f) return zip_fail(z->path, name, zip_get_error(z->zip));
    uint8_t *buf = malloc(expect ? (size_t)expect : 1);
    if (!buf) {
        zip_fclose(f);
        return lv_error(LV_ERR_NOMEM, "%s: %s: out of memory for %llu bytes", z->path, name,
                        (unsigned long long)expect);
    }
    uint64_t got = 0;
    while (got < expect) {
        zip_int64_t k = zip_fread(f, buf + got, expect - got);
        if (k < 0) {
            lv_status s = zip_fail(z->path, name, zip_file_get_error(f));
            zip_fclose(f);
            free(buf);
            return s;
        }
        if (k == 0) break;
        got += (uint64_t)k;
    }
    /* Reading one more byte must hit the end (and lets libzip check the CRC). */
    uint8_t extra;
    zip_int64_t more = got == expect ? zip_fread(f, &extra, 1) : 0;
    int close_err = zip_fclose(f);
    if (more < 0 || close_err != 0) {
        free(buf);
        return lv_error(LV_ERR_FORMAT, "%s: %s: read failed (corrupt record or CRC mismatch)", z->path, name);
    }
    if (got != expect || more != 0) {
        free(buf);
        return lv_error(LV_ERR_FORMAT, "%s: %s holds %s bytes than its %llu-byte size", z->path, name,
                        got < expect ? "fewer" : "more", (unsigned long long)expect);
    }
    *out = buf;
    return LV_OK;
}

static lv_status load_storage(void *user, lv_weights *w, const char *tensor, const char *key, uint64_t nbytes,
                              const void **data) {
    pth_zip *z = user;
    char name[1100], what[1400];
    snprintf(name, sizeof name, "%sdata/%s", z->prefix, key);
    snprintf(what, sizeof what, "tensor '%.200s': storage record '%s'", tensor, name);
    zip_int64_t index = zip_name_locate(z->zip, name, 0);
    if (index < 0) return lv_error(LV_ERR_FORMAT, "%s: %s is missing from the archive", z->path, what);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z->zip, (zip_uint64_t)index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return zip_fail(z->path, what, zip_get_error(z->zip));
    if (st.size != nbytes)
        return lv_error(LV_ERR_FORMAT, "%s: %s holds %llu bytes, the pickle says %llu", z->path, what,
                        (unsigned long long)st.size, (unsigned long long)nbytes);
    uint8_t *buf;
    LV_TRY(read_record(z, index, what, nbytes, &buf));
    LV_TRY(lv_weights_own(w, buf));
    *data = buf;
    return LV_OK;
}

static lv_status open_zip(const char *path, lv_weights *w) {
    int code = 0;
    pth_zip z = {0};
    z.path = path;
    z.zip = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (!z.zip) {
        zip_error_t err;
        zip_error_init_with_code(&err, code);
        lv_status s = lv_error(LV_ERR_FORMAT, "%s: not a readable zip archive (PyTorch checkpoint): %s", path,
                               zip_error_strerror(&err));
        zip_error_fini(&err);
        return s;
    }
    lv_status s = LV_OK;
    uint8_t *pickle = NULL;
    zip_int64_t n = zip_get_num_entries(z.zip, 0), pkl = -1;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(z.zip, (zip_uint64_t)i, 0);
        if (!name) continue;
        size_t len = strlen(name);
        if (len < 8 || strcmp(name + len - 8, "data.pkl") != 0) continue;
        /* "data.pkl" or "<prefix>/data.pkl" with a prefix of one component. */
        const char *slash = strchr(name, '/');
        if (len > 8 && (!slash || slash != name + len - 9)) continue;
        if (pkl >= 0) {
            s = lv_error(LV_ERR_FORMAT, "%s: the archive holds two data.pkl records ('%s' and '%s')", path,
                         zip_get_name(z.zip, (zip_uint64_t)pkl, 0), name);
            goto done;
        }
        if (len - 8 >= sizeof z.prefix) continue;
        pkl = i;
        memcpy(z.prefix, name, len - 8);
        z.prefix[len - 8] = '\0';
    }
    if (pkl < 0) {
        s = lv_error(LV_ERR_FORMAT, "%s: a zip archive without data.pkl: not a PyTorch checkpoint", path);
        goto done;
    }
    char name[600];
    snprintf(name, sizeof name, "%sbyteorder", z.prefix);
    zip_int64_t bo = zip_name_locate(z.zip, name, 0);
    if (bo >= 0) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(z.zip, (zip_uint64_t)bo, 0, &st) != 0 || st.size > 16) {
            s = lv_error(LV_ERR_FORMAT, "%s: malformed record '%s'", path, name);
            goto done;
        }
        uint8_t *order;
        if ((s = read_record(&z, bo, name, st.size, &order)) != LV_OK) goto done;
        int little = st.size == 6 && memcmp(order, "little", 6) == 0;
        free(order);
        if (!little) {
            s = lv_error(LV_ERR_UNSUPPORTED, "%s: tensors are stored big-endian ('%s'): not supported", path, name);
            goto done;
        }
    }
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z.zip, (zip_uint64_t)pkl, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
        s = zip_fail(path, "data.pkl", zip_get_error(z.zip));
        goto done;
    }
    if (st.size > PTH_MAX_PICKLE) {
        s = lv_error(LV_ERR_FORMAT, "%s: data.pkl of %llu bytes is implausibly large", path,
                     (unsigned long long)st.size);
        goto done;
    }
    if ((s = read_record(&z, pkl, zip_get_name(z.zip, (zip_uint64_t)pkl, 0), st.size, &pickle)) != LV_OK) goto done;
    s = lv_pth_from_pickle(w, pickle, (size_t)st.size, load_storage, &z);
done:
    free(pickle);
    zip_discard(z.zip);
    return s;
}

lv_status lv_pth_open(const char *path, lv_weights **out) {
    *out = NULL;
    LV_TRY(lv_check_regular_file(path)); /* libzip would wait on a FIFO */
    lv_weights *w = lv_weights_new(path, "pytorch");
    if (!w) return lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
    lv_status s = open_zip(path, w);
    if (s != LV_OK) {
        lv_weights_close(w);
        return s;
    }
    *out = w;
    return LV_OK;
}
