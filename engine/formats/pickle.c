/* The restricted pickle reader (see pickle.h). A small stack machine over the opcodes that
 * torch.save writes for a state dict; it builds values and never executes anything. Every
 * read is bounds-checked; memory is bounded by a small multiple of the input size. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dtype.h"
#include "pickle.h"

static const pk_storage_type storage_types[] = {
    {"FloatStorage", LV_F32, 4},  {"HalfStorage", LV_F16, 2},  {"BFloat16Storage", LV_BF16, 2},
    {"IntStorage", LV_I32, 4},    {"DoubleStorage", -1, 8},    {"LongStorage", -1, 8},
    {"ShortStorage", -1, 2},      {"CharStorage", -1, 1},      {"ByteStorage", -1, 1},
    {"BoolStorage", -1, 1},
};

/* Names of every pickle opcode, for messages about the ones we refuse. */
static const char *opcode_name(uint8_t op) {
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    }
    return NULL;
}

typedef struct parser {
    const char *name;
    const uint8_t *data;
    size_t size, pos;
    size_t op_at; /* offset of the opcode being run */
    uint8_t op;
    pk_value **stack;
    size_t sp, stack_cap;
    size_t *marks; /* stack heights at each MARK: items below the top mark are out of reach */
    size_t n_marks, marks_cap;
    pk_value **memo;
    size_t memo_cap, memo_count;
    pk_value *objects;
} parser;

static lv_status fail(parser *p, lv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static lv_status fail(parser *p, lv_status status, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = opcode_name(p->op);
    if (name)
        return lv_error(status, "%s: pickle opcode %s (0x%02x) at offset %zu: %s", p->name, name, p->op,
                        p->op_at, what);
    return lv_error(status, "%s: pickle byte 0x%02x at offset %zu: %s", p->name, p->op, p->op_at, what);
}

static pk_value *new_value(parser *p, pk_kind kind) {
    pk_value *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    v->next_object = p->objects;
    p->objects = v;
    return v;
}

static void free_objects(pk_value *v) {
    while (v) {
        pk_value *next = v->next_object;
        if (v->kind == PK_STR) free(v->u.str.s);
        if (v->kind == PK_TUPLE || v->kind == PK_LIST || v->kind == PK_DICT) free(v->u.seq.items);
        free(v);
        v = next;
    }
}

void pk_free(pk_result *r) {
    if (!r) return;
    free_objects(r->objects);
    r->objects = NULL;
    r->root = NULL;
}

static lv_status nomem(parser *p) { return fail(p, LV_ERR_NOMEM, "out of memory"); }

static lv_status seq_append(parser *p, pk_value *seq, pk_value *item) {
    if (seq->u.seq.n == seq->u.seq.cap) {
        size_t cap = seq->u.seq.cap ? seq->u.seq.cap * 2 : 4;
        pk_value **items = realloc(seq->u.seq.items, cap * sizeof *items);
        if (!items) return nomem(p);
        seq->u.seq.items = items;
        seq->u.seq.cap = cap;
    }
    seq->u.seq.items[seq->u.seq.n++] = item;
    return LV_OK;
}

static lv_status push(parser *p, pk_value *v) {
    if (!v) return nomem(p);
    if (p->sp == p->stack_cap) {
        size_t cap = p->stack_cap ? p->stack_cap * 2 : 64;
        pk_value **s = realloc(p->stack, cap * sizeof *s);
        if (!s) return nomem(p);
        p->stack = s;
        p->stack_cap = cap;
    }
    p->stack[p->sp++] = v;
    return LV_OK;
}

static size_t floor_of_stack(const parser *p) { return p->n_marks ? p->marks[p->n_marks - 1] : 0; }

static lv_status pop(parser *p, pk_value **out) {
    if (p->sp <= floor_of_stack(p)) return fail(p, LV_ERR_FORMAT, "the stack is empty");
    *out = p->stack[--p->sp];
    return LV_OK;
}

static lv_status top(parser *p, pk_value **out) {
    if (p->sp <= floor_of_stack(p)) return fail(p, LV_ERR_FORMAT, "the stack is empty");
    *out = p->stack[p->sp - 1];
    return LV_OK;
}

/* Items pushed since the last MARK: *first is their index in the stack. The mark is removed. */
static lv_status pop_mark(parser *p, size_t *first) {
    if (!p->n_marks) return fail(p, LV_ERR_FORMAT, "no MARK before it");
    *first = p->marks[--p->n_marks];
    return LV_OK;
}

static lv_status need(parser *p, size_t n) {
    if (p->size - p->pos < n)
        return fail(p, LV_ERR_FORMAT, "needs %zu more bytes but the pickle ends at offset %zu (truncated)", n,
                    p->size);
    return LV_OK;
}

static uint64_t read_le(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static lv_status push_string(parser *p, size_t len_bytes) {
    LV_TRY(need(p, len_bytes));
    uint64_t len = read_le(p->data + p->pos, (int)len_bytes);
    p->pos += len_bytes;
    if (len > p->size - p->pos)
        return fail(p, LV_ERR_FORMAT, "a string of %llu bytes runs past the end of the pickle (%zu bytes)",
                    (unsigned long long)len, p->size);
    pk_value *v = new_value(p, PK_STR);
    if (!v) return nomem(p);
    v->u.str.s = malloc((size_t)len + 1);
    if (!v->u.str.s) return nomem(p);
    memcpy(v->u.str.s, p->data + p->pos, (size_t)len);
    v->u.str.s[len] = '\0';
    v->u.str.len = (size_t)len;
    p->pos += (size_t)len;
    return push(p, v);
}

static lv_status push_int(parser *p, int64_t i) {
    pk_value *v = new_value(p, PK_INT);
    if (!v) return nomem(p);
    v->u.i = i;
    return push(p, v);
}

static lv_status memo_put(parser *p, uint64_t index) {
    pk_value *v = NULL;
    LV_TRY(top(p, &v));
    /* Picklers number memo entries 0, 1, 2, ...: an index beyond the input size cannot come
     * from one, and refusing it bounds the memo's memory. */
    if (index > p->size)
        return fail(p, LV_ERR_FORMAT, "memo index %llu is out of range", (unsigned long long)index);
    if (index >= p->memo_cap) {
        size_t cap = p->memo_cap ? p->memo_cap : 64;
        while (cap <= index) cap *= 2;
        pk_value **m = realloc(p->memo, cap * sizeof *m);
        if (!m) return nomem(p);
        memset(m + p->memo_cap, 0, (cap - p->memo_cap) * sizeof *m);
        p->memo = m;
        p->memo_cap = cap;
    }
    if (!p->memo[index]) p->memo_count++;
    p->memo[index] = v;
    return LV_OK;
}

static lv_status memo_get(parser *p, uint64_t index) {
    if (index >= p->memo_cap || !p->memo[index])
        return fail(p, LV_ERR_FORMAT, "memo entry %llu was never stored", (unsigned long long)index);
    return push(p, p->memo[index]);
}

static lv_status make_tuple(parser *p, size_t first) {
    pk_value *t = new_value(p, PK_TUPLE);
    if (!t) return nomem(p);
    for (size_t i = first; i < p->sp; i++) LV_TRY(seq_append(p, t, p->stack[i]));
    p->sp = first;
    return push(p, t);
}

/* The only globals a state dict needs. Anything else is refused by name. */
static lv_status push_global(parser *p, const char *module, size_t mlen, const char *name, size_t nlen) {
    pk_value *g = new_value(p, PK_GLOBAL);
    if (!g) return nomem(p);
#define IS(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), (n)) == 0)
    if (IS(module, mlen, "collections") && IS(name, nlen, "OrderedDict")) {
        g->u.global.callable = PK_ORDERED_DICT;
        return push(p, g);
    }
    if (IS(module, mlen, "torch._utils") && IS(name, nlen, "_rebuild_tensor_v2")) {
        g->u.global.callable = PK_REBUILD_TENSOR_V2;
        return push(p, g);
    }
    if (IS(module, mlen, "torch._utils") && IS(name, nlen, "_rebuild_parameter")) {
        g->u.global.callable = PK_REBUILD_PARAMETER;
        return push(p, g);
    }
    if (IS(module, mlen, "torch"))
        for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
            if (nlen == strlen(storage_types[i].name) && memcmp(name, storage_types[i].name, nlen) == 0) {
                g->u.global.callable = PK_STORAGE_TYPE;
                g->u.global.storage = &storage_types[i];
                return push(p, g);
            }
#undef IS
    char shown[200];
    snprintf(shown, sizeof shown, "%.*s.%.*s", (int)(mlen > 80 ? 80 : mlen), module,
             (int)(nlen > 80 ? 80 : nlen), name);
    for (char *c = shown; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    return fail(p, LV_ERR_FORMAT,
                "global '%s' is not allowed (a state dict only needs collections.OrderedDict, "
                "torch._utils._rebuild_tensor_v2 and torch.*Storage); nothing was executed",
                shown);
}

static lv_status op_global(parser *p) {
    const char *line[2];
    size_t len[2];
    for (int k = 0; k < 2; k++) {
        const uint8_t *start = p->data + p->pos;
        size_t avail = p->size - p->pos;
        const uint8_t *nl = memchr(start, '\n', avail > 256 ? 256 : avail);
        if (!nl) return fail(p, LV_ERR_FORMAT, "module or name is not a line of at most 255 bytes");
        line[k] = (const char *)start;
        len[k] = (size_t)(nl - start);
        p->pos += len[k] + 1;
    }
    return push_global(p, line[0], len[0], line[1], len[1]);
}

static int is_int(const pk_value *v) { return v->kind == PK_INT || v->kind == PK_BOOL; }

static lv_status int_tuple(parser *p, const pk_value *t, const char *what, int64_t *out, int *n) {
    if (t->kind != PK_TUPLE) return fail(p, LV_ERR_FORMAT, "tensor %s is not a tuple", what);
    if (t->u.seq.n > PK_MAX_DIMS)
        return fail(p, LV_ERR_UNSUPPORTED, "tensor has %zu dimensions (at most %d)", t->u.seq.n, PK_MAX_DIMS);
    for (size_t i = 0; i < t->u.seq.n; i++) {
        const pk_value *e = t->u.seq.items[i];
        if (e->kind != PK_INT || e->u.i < 0)
            return fail(p, LV_ERR_FORMAT, "tensor %s entry %zu is not a non-negative integer", what, i);
        out[i] = e->u.i;
    }
    *n = (int)t->u.seq.n;
    return LV_OK;
}

static lv_status op_reduce(parser *p) {
    pk_value *args = NULL, *callable = NULL;
    LV_TRY(pop(p, &args));
    LV_TRY(pop(p, &callable));
    if (callable->kind != PK_GLOBAL) return fail(p, LV_ERR_FORMAT, "calls something that is not a global");
    if (args->kind != PK_TUPLE) return fail(p, LV_ERR_FORMAT, "arguments are not a tuple");
    size_t n = args->u.seq.n;
    pk_value **a = args->u.seq.items;
    switch (callable->u.global.callable) {
    case PK_ORDERED_DICT:
        if (n != 0) return fail(p, LV_ERR_FORMAT, "collections.OrderedDict called with %zu arguments", n);
        return push(p, new_value(p, PK_DICT));
    case PK_REBUILD_PARAMETER:
        /* _rebuild_parameter(data, requires_grad, backward_hooks): the tensor itself. */
        if (n < 1 || a[0]->kind != PK_TENSOR)
            return fail(p, LV_ERR_FORMAT, "_rebuild_parameter needs a tensor as its first argument");
        return push(p, a[0]);
    case PK_REBUILD_TENSOR_V2: {
        /* (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
        if (n != 6 && n != 7)
            return fail(p, LV_ERR_FORMAT, "_rebuild_tensor_v2 called with %zu arguments (6 or 7 expected)", n);
        if (a[0]->kind != PK_STORAGE)
            return fail(p, LV_ERR_FORMAT, "_rebuild_tensor_v2: first argument is not a storage");
        if (a[1]->kind != PK_INT || a[1]->u.i < 0)
            return fail(p, LV_ERR_FORMAT, "_rebuild_tensor_v2: storage offset is not a non-negative integer");
        if (!is_int(a[4])) return fail(p, LV_ERR_FORMAT, "_rebuild_tensor_v2: requires_grad is not a bool");
        if (a[5]->kind != PK_DICT && a[5]->kind != PK_NONE)
            return fail(p, LV_ERR_FORMAT, "_rebuild_tensor_v2: backward hooks are not a dict");
        pk_value *t = new_value(p, PK_TENSOR);
        if (!t) return nomem(p);
        t->u.tensor.storage = a[0];
        t->u.tensor.offset = a[1]->u.i;
        int nsize = 0, nstride = 0;
        LV_TRY(int_tuple(p, a[2], "size", t->u.tensor.size, &nsize));
        LV_TRY(int_tuple(p, a[3], "stride", t->u.tensor.stride, &nstride));
        if (nsize != nstride)
            return fail(p, LV_ERR_FORMAT, "tensor size has %d entries but stride has %d", nsize, nstride);
        t->u.tensor.ndim = nsize;
        return push(p, t);
    }
    case PK_STORAGE_TYPE:
        return fail(p, LV_ERR_FORMAT, "torch.%s cannot be called (nothing is executed)",
                    callable->u.global.storage->name);
    }
    return fail(p, LV_ERR_FORMAT, "unknown callable");
}

/* BINPERSID: ('storage', torch.XStorage, key, location, numel) names a storage record. */
static lv_status op_persid(parser *p) {
    pk_value *pid = NULL;
    LV_TRY(pop(p, &pid));
    if (pid->kind != PK_TUPLE || pid->u.seq.n != 5)
        return fail(p, LV_ERR_FORMAT, "persistent id is not a 5-tuple ('storage', type, key, location, numel)");
    pk_value **a = pid->u.seq.items;
    if (a[0]->kind != PK_STR || strcmp(a[0]->u.str.s, "storage") != 0)
        return fail(p, LV_ERR_FORMAT, "persistent id does not start with 'storage'");
    if (a[1]->kind != PK_GLOBAL || a[1]->u.global.callable != PK_STORAGE_TYPE)
        return fail(p, LV_ERR_FORMAT, "persistent id: storage type is not a torch.*Storage");
    if (a[2]->kind != PK_STR || a[2]->u.str.len == 0 || a[2]->u.str.len != strlen(a[2]->u.str.s))
        return fail(p, LV_ERR_FORMAT, "persistent id: storage key is not a string");
    if (a[3]->kind != PK_STR) return fail(p, LV_ERR_FORMAT, "persistent id: location is not a string");
    if (a[4]->kind != PK_INT || a[4]->u.i < 0)
        return fail(p, LV_ERR_FORMAT, "persistent id: element count is not a non-negative integer");
    pk_value *s = new_value(p, PK_STORAGE);
    if (!s) return nomem(p);
    s->u.storage.type = a[1]->u.global.storage;
    s->u.storage.key = a[2]->u.str.s;
    s->u.storage.numel = a[4]->u.i;
    return push(p, s);
}

static lv_status run(parser *p, pk_value **root) {
    while (p->pos < p->size) {
        p->op_at = p->pos;
        p->op = p->data[p->pos++];
        pk_value *v = NULL, *k = NULL, *target = NULL;
        size_t first = 0;
        switch (p->op) {
        case 0x80: /* PROTO */
            LV_TRY(need(p, 1));
            if (p->data[p->pos] > 5) return fail(p, LV_ERR_UNSUPPORTED, "protocol %d", p->data[p->pos]);
            p->pos++;
            break;
        case 0x95: /* FRAME: a length prefix we do not need */
            LV_TRY(need(p, 8));
            if (read_le(p->data + p->pos, 8) > p->size - p->pos - 8)
                return fail(p, LV_ERR_FORMAT, "frame runs past the end of the pickle (truncated)");
            p->pos += 8;
            break;
        case '.': /* STOP */
            LV_TRY(pop(p, root));
            return LV_OK;
        case '(': /* MARK */
            if (p->n_marks == p->marks_cap) {
                size_t cap = p->marks_cap ? p->marks_cap * 2 : 16;
                size_t *m = realloc(p->marks, cap * sizeof *m);
                if (!m) return nomem(p);
                p->marks = m;
                p->marks_cap = cap;
            }
            p->marks[p->n_marks++] = p->sp;
            break;
        case '}': LV_TRY(push(p, new_value(p, PK_DICT))); break;
        case ']': LV_TRY(push(p, new_value(p, PK_LIST))); break;
        case ')': LV_TRY(push(p, new_value(p, PK_TUPLE))); break;
        case 't': /* TUPLE */
            LV_TRY(pop_mark(p, &first));
            LV_TRY(make_tuple(p, first));
            break;
        case 0x85: case 0x86: case 0x87: { /* TUPLE1, TUPLE2, TUPLE3 */
            size_t n = (size_t)(p->op - 0x84);
            if (p->sp < floor_of_stack(p) + n) return fail(p, LV_ERR_FORMAT, "needs %zu stack items", n);
            LV_TRY(make_tuple(p, p->sp - n));
            break;
        }
        case 's': /* SETITEM */
            LV_TRY(pop(p, &v));
            LV_TRY(pop(p, &k));
            LV_TRY(top(p, &target));
            if (target->kind != PK_DICT) return fail(p, LV_ERR_FORMAT, "target is not a dict");
            LV_TRY(seq_append(p, target, k));
            LV_TRY(seq_append(p, target, v));
            break;
        case 'u': /* SETITEMS */
            LV_TRY(pop_mark(p, &first));
            if ((p->sp - first) % 2) return fail(p, LV_ERR_FORMAT, "odd number of items for key/value pairs");
            if (first <= floor_of_stack(p)) return fail(p, LV_ERR_FORMAT, "no dict below the MARK");
            target = p->stack[first - 1];
            if (target->kind != PK_DICT) return fail(p, LV_ERR_FORMAT, "target is not a dict");
            for (size_t i = first; i < p->sp; i++) LV_TRY(seq_append(p, target, p->stack[i]));
            p->sp = first;
            break;
        case 'a': /* APPEND */
            LV_TRY(pop(p, &v));
            LV_TRY(top(p, &target));
            if (target->kind != PK_LIST) return fail(p, LV_ERR_FORMAT, "target is not a list");
            LV_TRY(seq_append(p, target, v));
            break;
        case 'e': /* APPENDS */
            LV_TRY(pop_mark(p, &first));
            if (first <= floor_of_stack(p)) return fail(p, LV_ERR_FORMAT, "no list below the MARK");
            target = p->stack[first - 1];
            if (target->kind != PK_LIST) return fail(p, LV_ERR_FORMAT, "target is not a list");
            for (size_t i = first; i < p->sp; i++) LV_TRY(seq_append(p, target, p->stack[i]));
            p->sp = first;
            break;
        case 'X': LV_TRY(push_string(p, 4)); break;    /* BINUNICODE */
        case 0x8c: LV_TRY(push_string(p, 1)); break;   /* SHORT_BINUNICODE */
        case 0x8d: LV_TRY(push_string(p, 8)); break;   /* BINUNICODE8 */
        case 'J': /* BININT */
            LV_TRY(need(p, 4));
            LV_TRY(push_int(p, (int32_t)(uint32_t)read_le(p->data + p->pos, 4)));
            p->pos += 4;
            break;
        case 'K': /* BININT1 */
            LV_TRY(need(p, 1));
            LV_TRY(push_int(p, p->data[p->pos++]));
            break;
        case 'M': /* BININT2 */
            LV_TRY(need(p, 2));
            LV_TRY(push_int(p, (int64_t)read_le(p->data + p->pos, 2)));
            p->pos += 2;
            break;
        case 0x8a: { /* LONG1: n bytes of little-endian two's complement */
            LV_TRY(need(p, 1));
            int n = p->data[p->pos++];
            if (n > 8) return fail(p, LV_ERR_UNSUPPORTED, "integer of %d bytes (at most 8)", n);
            LV_TRY(need(p, (size_t)n));
            uint64_t u = n ? read_le(p->data + p->pos, n) : 0;
            if (n && n < 8 && (p->data[p->pos + n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
            p->pos += (size_t)n;
            LV_TRY(push_int(p, (int64_t)u));
            break;
        }
        case 'G': { /* BINFLOAT: big-endian IEEE double */
            LV_TRY(need(p, 8));
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | p->data[p->pos + i];
            p->pos += 8;
            v = new_value(p, PK_FLOAT);
            if (!v) return nomem(p);
            memcpy(&v->u.f, &u, sizeof u);
            LV_TRY(push(p, v));
            break;
        }
        case 'N': LV_TRY(push(p, new_value(p, PK_NONE))); break;
        case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
            v = new_value(p, PK_BOOL);
            if (!v) return nomem(p);
            v->u.i = p->op == 0x88;
            LV_TRY(push(p, v));
            break;
        case 'q': /* BINPUT */
            LV_TRY(need(p, 1));
            LV_TRY(memo_put(p, p->data[p->pos++]));
            break;
        case 'r': /* LONG_BINPUT */
            LV_TRY(need(p, 4));
            LV_TRY(memo_put(p, read_le(p->data + p->pos, 4)));
            p->pos += 4;
            break;
        case 0x94: /* MEMOIZE */
            LV_TRY(memo_put(p, p->memo_count));
            break;
        case 'h': /* BINGET */
            LV_TRY(need(p, 1));
            LV_TRY(memo_get(p, p->data[p->pos++]));
            break;
        case 'j': /* LONG_BINGET */
            LV_TRY(need(p, 4));
            LV_TRY(memo_get(p, read_le(p->data + p->pos, 4)));
            p->pos += 4;
            break;
        case 'c': LV_TRY(op_global(p)); break; /* GLOBAL */
        case 0x93: /* STACK_GLOBAL */
            LV_TRY(pop(p, &v));
            LV_TRY(pop(p, &k));
            if (k->kind != PK_STR || v->kind != PK_STR)
                return fail(p, LV_ERR_FORMAT, "module and name are not strings");
            LV_TRY(push_global(p, k->u.str.s, k->u.str.len, v->u.str.s, v->u.str.len));
            break;
        case 'R': LV_TRY(op_reduce(p)); break; /* REDUCE */
        case 'b': /* BUILD: only an OrderedDict's attribute dict (torch's _metadata), ignored */
            LV_TRY(pop(p, &v));
            LV_TRY(top(p, &target));
            if (target->kind != PK_DICT)
                return fail(p, LV_ERR_FORMAT, "BUILD is only allowed on an OrderedDict");
            if (v->kind != PK_DICT && v->kind != PK_NONE)
                return fail(p, LV_ERR_FORMAT, "OrderedDict state is not a dict");
            break;
        case 'Q': LV_TRY(op_persid(p)); break; /* BINPERSID */
        default:
            if (opcode_name(p->op))
                return fail(p, LV_ERR_FORMAT, "not allowed: a state dict never needs it, and longvk never "
                                              "executes pickled code");
            return fail(p, LV_ERR_FORMAT, "not a pickle opcode");
        }
    }
    return lv_error(LV_ERR_FORMAT, "%s: the pickle ends at offset %zu without STOP (truncated)", p->name,
                    p->size);
}

lv_status pk_parse(const char *name, const uint8_t *data, size_t size, pk_result *out) {
    parser p;
    memset(&p, 0, sizeof p);
    p.name = name ? name : "pickle";
    p.data = data;
    p.size = data ? size : 0;
    out->root = NULL;
    out->objects = NULL;
    pk_value *root = NULL;
    lv_status s = run(&p, &root);
    free(p.stack);
    free(p.marks);
    free(p.memo);
    if (s != LV_OK) {
        free_objects(p.objects);
        return s;
    }
    out->root = root;
    out->objects = p.objects;
    return LV_OK;
}

const pk_value *pk_dict_get(const pk_value *dict, const char *key) {
    if (!dict || dict->kind != PK_DICT) return NULL;
    const pk_value *found = NULL;
    for (size_t i = 0; i + 1 < dict->u.seq.n; i += 2) {
        const pk_value *k = dict->u.seq.items[i];
        if (k->kind == PK_STR && strcmp(k->u.str.s, key) == 0) found = dict->u.seq.items[i + 1];
    }
    return found;
}
