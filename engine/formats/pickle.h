/* A restricted reader for the pickles inside PyTorch checkpoints (data.pkl). It builds plain
 * values (dicts, lists, tuples, numbers, strings) and tensor descriptions; it knows a handful
 * of globals by name (collections.OrderedDict, torch._utils._rebuild_tensor_v2,
 * torch._utils._rebuild_parameter, torch.*Storage) and never imports or calls anything:
 * any other opcode or global is an error naming it and its offset. */
#ifndef LONGVK_PICKLE_H
#define LONGVK_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/status.h"

#define PK_MAX_DIMS 8

typedef enum pk_kind {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,     /* items[2i] = key, items[2i+1] = value, in insertion order */
    PK_GLOBAL,   /* one of the allowed globals */
    PK_STORAGE,  /* a persistent id ('storage', type, key, location, numel) */
    PK_TENSOR    /* _rebuild_tensor_v2(storage, offset, size, stride, ...) */
} pk_kind;

typedef enum pk_callable {
    PK_ORDERED_DICT,
    PK_REBUILD_TENSOR_V2,
    PK_REBUILD_PARAMETER,
    PK_STORAGE_TYPE
} pk_callable;

/* A torch.*Storage type: its name and element size; dtype is an lv_dtype, or -1 for the
 * types longvk cannot use (double, integer and bool storages). */
typedef struct pk_storage_type {
    const char *name;
    int dtype;
    int elem_size;
} pk_storage_type;

typedef struct pk_value pk_value;
struct pk_value {
    pk_kind kind;
    pk_value *next_object; /* every value of a parse, for freeing */
    union {
        int64_t i;   /* PK_BOOL, PK_INT */
        double f;
        struct {
            char *s; /* NUL-terminated copy */
            size_t len;
        } str;
        struct {
            pk_value **items;
            size_t n, cap;
        } seq; /* PK_TUPLE, PK_LIST, PK_DICT (2n items for n pairs: n counts items) */
        struct {
            pk_callable callable;
            const pk_storage_type *storage;
        } global;
        struct {
            const pk_storage_type *type;
            const char *key;
            int64_t numel;
        } storage;
        struct {
            const pk_value *storage;
            int64_t offset;
            int ndim;
            int64_t size[PK_MAX_DIMS];
            int64_t stride[PK_MAX_DIMS];
        } tensor;
    } u;
};

typedef struct pk_result {
    pk_value *root;
    pk_value *objects; /* owned: free with pk_free */
} pk_result;

/* Parse `size` bytes; `name` prefixes error messages. On failure nothing is left to free. */
lv_status pk_parse(const char *name, const uint8_t *data, size_t size, pk_result *out);
void pk_free(pk_result *r);

/* The value for string key `key` in a PK_DICT (the last one if repeated), or NULL. */
const pk_value *pk_dict_get(const pk_value *dict, const char *key);

#endif
