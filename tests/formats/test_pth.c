/* PyTorch zip checkpoints without Python: the checkpoints written by
 * tests/reference/make_pth_fixture.py load to exactly the tensors of their safetensors twin
 * (and of the formulas that made them); the restricted pickle reader refuses every opcode and
 * global a state dict does not need, naming it and its offset, and never executes anything;
 * damaged archives and pickles give clean errors. No device needed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "longvk.h"
#include "ts_files.h"
#include "weights_internal.h"

#define FIX LONGVK_ASSETS_DIR "/fixtures/"

/* ---- helpers ------------------------------------------------------------------------------ */

static void expect_same_tensors(const char *path, const char *twin_path) {
    lv_weights *a, *b;
    cr_assert_eq(lv_weights_open(path, &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(twin_path, &b), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(a), lv_weights_count(b), "%s has %d tensors, %s %d", path, lv_weights_count(a),
                 twin_path, lv_weights_count(b));
    for (int i = 0; i < lv_weights_count(a); i++) {
        const lv_weight *x = lv_weights_at(a, i), *y = lv_weights_find(b, x->name);
        cr_assert_not_null(y, "%s: '%s' is not in the twin", path, x->name);
        cr_assert_eq(x->dtype, y->dtype, "%s dtype", x->name);
        cr_assert_eq(x->ndim, y->ndim, "%s ndim", x->name);
        for (int d = 0; d < x->ndim; d++) cr_assert_eq(x->shape[d], y->shape[d], "%s shape[%d]", x->name, d);
        cr_assert_eq(x->nbytes, y->nbytes, "%s bytes", x->name);
        if (x->nbytes) cr_assert(memcmp(x->data, y->data, x->nbytes) == 0, "%s: bytes differ", x->name);
    }
    lv_weights_close(a);
    lv_weights_close(b);
}

typedef struct zentry {
    const char *name;
    const void *data;
    size_t len;
} zentry;

/* A stored (uncompressed) zip, as torch.save writes them. */
static const char *write_zip(const char *name, const zentry *e, int n) {
    const char *path = ts_tmp(name);
    int err = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    cr_assert_not_null(z, "zip_open %s: %d", path, err);
    for (int i = 0; i < n; i++) {
        zip_source_t *s = zip_source_buffer(z, e[i].data, e[i].len, 0);
        zip_int64_t idx = zip_file_add(z, e[i].name, s, ZIP_FL_OVERWRITE);
        cr_assert_geq(idx, 0, "%s", zip_strerror(z));
        zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    }
    cr_assert_eq(zip_close(z), 0);
    return path;
}

static uint8_t *read_entry(const char *zip_path, const char *entry, size_t *len) {
    int err = 0;
    zip_t *z = zip_open(zip_path, ZIP_RDONLY, &err);
    cr_assert_not_null(z);
    zip_stat_t st;
    cr_assert_eq(zip_stat(z, entry, 0, &st), 0, "%s: no %s", zip_path, entry);
    uint8_t *buf = malloc(st.size + 1);
    zip_file_t *f = zip_fopen(z, entry, 0);
    cr_assert_eq(zip_fread(f, buf, st.size), (zip_int64_t)st.size);
    zip_fclose(f);
    zip_discard(z);
    *len = st.size;
    return buf;
}

static lv_status zero_storage(void *user, lv_weights *w, const char *tensor, const char *key, uint64_t nbytes,
                              const void **out) {
    (void)user;
    (void)tensor;
    if (nbytes > (1u << 20)) return lv_error(LV_ERR_FORMAT, "storage '%s' over the test's 1 MiB cap", key);
    void *b = calloc(1, nbytes ? nbytes : 1);
    LV_TRY(lv_weights_own(w, b));
    *out = b;
    return LV_OK;
}

/* Runs the pickle through the state-dict reader; returns the status, message in lv_last_error. */
static lv_status load_pickle(const void *pkl, size_t len, lv_weights **out) {
    lv_weights *w = lv_weights_new("test.pth", "pytorch");
    lv_clear_error();
    lv_status s = lv_pth_from_pickle(w, pkl, len, zero_storage, NULL);
    if (s != LV_OK || !out) lv_weights_close(w);
    else *out = w;
    return s;
}

static void expect_pickle_error(const void *pkl, size_t len, lv_status status, const char *const *frags) {
    lv_status s = load_pickle(pkl, len, NULL);
    cr_assert_eq(s, status, "status %s, expected %s: %s", lv_status_name(s), lv_status_name(status), lv_last_error());
    for (const char *const *f = frags; *f; f++)
        cr_assert(strstr(lv_last_error(), *f), "message '%s' lacks '%s'", lv_last_error(), *f);
}
#define PICKLE(lit) lit, sizeof(lit) - 1
#define EXPECT_PICKLE(lit, status, ...) \
    expect_pickle_error(PICKLE(lit), status, (const char *const[]){__VA_ARGS__, NULL})

/* A small pickle writer for hand-made state dicts. */
typedef struct pbuf {
    uint8_t b[4096];
    size_t n;
} pbuf;
static void put(pbuf *p, const void *d, size_t n) {
    cr_assert_lt(p->n + n, sizeof p->b);
    memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void op(pbuf *p, uint8_t o) { put(p, &o, 1); }
static void str(pbuf *p, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    put(p, h, 5);
    put(p, s, n);
}
static void int1(pbuf *p, int v) {
    uint8_t h[2] = {'K', (uint8_t)v};
    put(p, h, 2);
}
static void glob(pbuf *p, const char *module, const char *name) {
    op(p, 'c');
    put(p, module, strlen(module));
    op(p, '\n');
    put(p, name, strlen(name));
    op(p, '\n');
}
static void int_tuple(pbuf *p, const int *v, int n) {
    op(p, '(');
    for (int i = 0; i < n; i++) int1(p, v[i]);
    op(p, 't');
}
/* key: _rebuild_tensor_v2((storage, type, skey, 'cpu', numel), offset, size, stride, False, {}) */
static void tensor_item(pbuf *p, const char *key, const char *type, const char *skey, int numel, int offset,
                        const int *size, const int *stride, int ndim) {
    str(p, key);
    glob(p, "torch._utils", "_rebuild_tensor_v2");
    op(p, '(');
    op(p, '(');
    str(p, "storage");
    glob(p, "torch", type);
    str(p, skey);
    str(p, "cpu");
    int1(p, numel);
    op(p, 't');
    op(p, 'Q');
    int1(p, offset);
    int_tuple(p, size, ndim);
    int_tuple(p, stride, ndim);
    op(p, 0x89);
    op(p, '}');
    op(p, 't');
    op(p, 'R');
}
static void begin_dict(pbuf *p) {
    p->n = 0;
    put(p, "\x80\x02}(", 4);
}
static void end_dict(pbuf *p) { put(p, "u.", 2); }

/* ---- the fixtures --------------------------------------------------------------------------- */

Test(pth, checkpoints_equal_their_safetensors_twin) {
    expect_same_tensors(FIX "pth-basic.pth", FIX "pth-basic.safetensors");
    expect_same_tensors(FIX "pth-generator.pth", FIX "pth-basic.safetensors");
    expect_same_tensors(FIX "pth-state-dict.pth", FIX "pth-basic.safetensors");
}

Test(pth, values_match_the_formulas_of_the_fixture_script) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(FIX "pth-basic.pth", &w), LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_format(w), "pytorch");
    cr_assert_str_eq(lv_weights_note(w), "top-level state dict");
    cr_assert_eq(lv_weights_count(w), 11);
    cr_assert_str_eq(lv_weights_at(w, 0)->name, "f32.matrix", "state dict order");
    const float *m = lv_weights_find(w, "f32.matrix")->data;
    for (int i = 0; i < 12; i++) cr_assert_eq(m[i], 0.25f * i - 1);
    const uint16_t *h = lv_weights_find(w, "f16.vector")->data;
    for (int i = 0; i < 5; i++) cr_assert_eq(lv_half_to_float(h[i]), 0.5f * i - 1);
    const uint16_t *b = lv_weights_find(w, "bf16.matrix")->data;
    for (int i = 0; i < 6; i++) cr_assert_eq(lv_bf16_to_float(b[i]), 0.125f * i);
    /* Views: storage offset honoured, one storage shared by two tensors. */
    const lv_weight *view = lv_weights_find(w, "f32.view_offset"), *head = lv_weights_find(w, "f32.shares_storage");
    for (int i = 0; i < 8; i++) cr_assert_eq(((const float *)view->data)[i], 4.0f + i);
    for (int i = 0; i < 4; i++) cr_assert_eq(((const float *)head->data)[i], (float)i);
    cr_assert_eq((const uint8_t *)view->data - (const uint8_t *)head->data, 16, "one buffer per storage");
    const lv_weight *row = lv_weights_find(w, "f32.row_of_matrix");
    for (int j = 0; j < 4; j++) cr_assert_eq(((const float *)row->data)[j], 4.0f + j);
    const lv_weight *s = lv_weights_find(w, "f32.scalar");
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(*(const float *)s->data, 3.5f);
    const lv_weight *c5 = lv_weights_find(w, "f32.conv5d");
    cr_assert_eq(c5->ndim, 5);
    for (int i = 0; i < 24; i++) cr_assert_eq(((const float *)c5->data)[i], i / 8.0f);
    const lv_weight *col = lv_weights_find(w, "f16.column");
    cr_assert_eq(col->shape[0], 3);
    cr_assert_eq(col->shape[1], 1);
    for (int i = 0; i < 3; i++) cr_assert_eq(lv_half_to_float(((const uint16_t *)col->data)[i]), (float)i);
    const lv_weight *idx = lv_weights_find(w, "i32.index");
    cr_assert_eq(idx->dtype, LV_I32);
    for (int i = 0; i < 4; i++) cr_assert_eq(((const int32_t *)idx->data)[i], 7 * i - 3);
    cr_assert_eq(lv_weights_find(w, "f32.empty")->nbytes, 0);
    cr_assert_eq(lv_weights_metadata_count(w), 0);
    lv_weights_close(w);

    cr_assert_eq(lv_weights_open(FIX "pth-generator.pth", &w), LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_note(w), "state dict under 'generator', prefix 'model.' removed");
    cr_assert_not_null(lv_weights_find(w, "f32.matrix"));
    cr_assert_null(lv_weights_find(w, "model.f32.matrix"));
    lv_weights_close(w);
    cr_assert_eq(lv_weights_open(FIX "pth-state-dict.pth", &w), LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_note(w), "state dict under 'state_dict'");
    lv_weights_close(w);
}

Test(pth, non_contiguous_and_int64_tensors_are_refused) {
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open(FIX "pth-noncontig.pth", &w), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "pth-noncontig.pth") && strstr(lv_last_error(), "tensor 'weight'") &&
                  strstr(lv_last_error(), "not contiguous (size [3, 2], stride [1, 3])"),
              "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(FIX "pth-int64.pth", &w), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "tensor 'steps'") && strstr(lv_last_error(), "torch.LongStorage"), "%s",
              lv_last_error());
    cr_assert_null(w);
}

Test(pth, protocol_4_pickles_and_parameters_load) {
    /* torch.save(..., pickle_protocol=4) of an OrderedDict with an nn.Parameter (FRAME, MEMOIZE,
     * SHORT_BINUNICODE, STACK_GLOBAL, _rebuild_parameter): the fuzz seed of that name. */
    size_t len;
    uint8_t *pkl = ts_slurp(LONGVK_ASSETS_DIR "/../tests/fuzz/seeds/pickle/protocol4.pkl", &len);
    lv_weights *w = NULL;
    cr_assert_eq(load_pickle(pkl, len, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 2);
    cr_assert_eq(lv_weights_find(w, "p")->shape[0], 2);
    cr_assert_eq(lv_weights_find(w, "a")->nbytes, 12);
    lv_weights_close(w);
    free(pkl);
}

/* ---- the pickle reader refuses what a state dict does not need -------------------------------- */

Test(pth, forbidden_globals_are_refused_and_nothing_runs) {
    const char *marker = ts_tmp("pth-pwned");
    unlink(marker);
    pbuf p = {.n = 0};
    put(&p, "\x80\x02", 2);
    glob(&p, "os", "system");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    str(&p, cmd);
    put(&p, "\x85R.", 3);
    expect_pickle_error(p.b, p.n, LV_ERR_FORMAT,
                        (const char *const[]){"GLOBAL", "offset 2", "'os.system' is not allowed", "nothing was executed",
                                              NULL});
    /* The same inside a real checkpoint. */
    zentry e[] = {{"evil/data.pkl", p.b, p.n}, {"evil/version", "3\n", 2}};
    const char *path = write_zip("pth-evil.pth", e, 2);
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open(path, &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "pth-evil.pth (data.pkl): pickle opcode GLOBAL (0x63) at offset 2"), "%s",
              lv_last_error());
    cr_assert_neq(access(marker, F_OK), 0, "the pickle ran a command");

    EXPECT_PICKLE("\x80\x02" "cbuiltins\neval\n(X\x01\x00\x00\x00" "1tR.", LV_ERR_FORMAT, "'builtins.eval' is not allowed");
    EXPECT_PICKLE("\x80\x02" "ctorch.nn.modules.linear\nLinear\n)\x81.", LV_ERR_FORMAT,
                  "'torch.nn.modules.linear.Linear' is not allowed");
    EXPECT_PICKLE("\x80\x04\x8c\x02os\x8c\x06system\x93.", LV_ERR_FORMAT, "STACK_GLOBAL", "offset 14", "'os.system'");
    EXPECT_PICKLE("\x80\x02" "cos\nsystem", LV_ERR_FORMAT, "GLOBAL", "not a line");
}

Test(pth, reduce_only_calls_the_allowed_rebuild_functions) {
    EXPECT_PICKLE("\x80\x02" "ctorch\nFloatStorage\n)R.", LV_ERR_FORMAT, "REDUCE", "offset 23",
                  "torch.FloatStorage cannot be called");
    EXPECT_PICKLE("\x80\x02X\x01\x00\x00\x00" "a)R.", LV_ERR_FORMAT, "REDUCE", "not a global");
    EXPECT_PICKLE("\x80\x02" "ccollections\nOrderedDict\nK\x01\x85R.", LV_ERR_FORMAT,
                  "OrderedDict called with 1 arguments");
    EXPECT_PICKLE("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n)R.", LV_ERR_FORMAT,
                  "_rebuild_tensor_v2 called with 0 arguments");
    EXPECT_PICKLE("\x80\x02" "ccollections\nOrderedDict\nX\x01\x00\x00\x00" "aR.", LV_ERR_FORMAT, "not a tuple");
}

Test(pth, opcodes_a_state_dict_never_needs_are_refused) {
    EXPECT_PICKLE("\x80\x02(ios\nsystem\n.", LV_ERR_FORMAT, "INST (0x69) at offset 3", "not allowed");
    EXPECT_PICKLE("\x80\x02(o.", LV_ERR_FORMAT, "OBJ (0x6f) at offset 3");
    EXPECT_PICKLE("\x80\x02})\x81.", LV_ERR_FORMAT, "NEWOBJ (0x81) at offset 4");
    EXPECT_PICKLE("\x80\x02P0\n.", LV_ERR_FORMAT, "PERSID (0x50) at offset 2");
    EXPECT_PICKLE("\x80\x02\x82\x01.", LV_ERR_FORMAT, "EXT1 (0x82) at offset 2");
    EXPECT_PICKLE("\x80\x02S'x'\n.", LV_ERR_FORMAT, "STRING (0x53)");
    EXPECT_PICKLE("\x80\x02" "B\x01\x00\x00\x00x.", LV_ERR_FORMAT, "BINBYTES (0x42)");
    EXPECT_PICKLE("\x80\x02}0.", LV_ERR_FORMAT, "POP (0x30) at offset 3");
    EXPECT_PICKLE("\x80\x02}\x8f.", LV_ERR_FORMAT, "EMPTY_SET");
    EXPECT_PICKLE("\x80\x02\xff.", LV_ERR_FORMAT, "byte 0xff at offset 2", "not a pickle opcode");
    EXPECT_PICKLE("\x80\x09}.", LV_ERR_UNSUPPORTED, "PROTO", "protocol 9");
}

Test(pth, broken_pickles_give_clean_errors) {
    EXPECT_PICKLE("\x80\x02}", LV_ERR_FORMAT, "ends at offset 3 without STOP");
    EXPECT_PICKLE("", LV_ERR_FORMAT, "without STOP");
    EXPECT_PICKLE("\x80\x02s.", LV_ERR_FORMAT, "SETITEM", "stack is empty");
    EXPECT_PICKLE("\x80\x02" "K\x01K\x02s.", LV_ERR_FORMAT, "SETITEM", "stack is empty");
    EXPECT_PICKLE("\x80\x02]K\x01s.", LV_ERR_FORMAT, "stack is empty");
    EXPECT_PICKLE("\x80\x02]K\x01K\x02s.", LV_ERR_FORMAT, "SETITEM", "not a dict");
    EXPECT_PICKLE("\x80\x02}(K\x01u.", LV_ERR_FORMAT, "SETITEMS", "odd number");
    EXPECT_PICKLE("\x80\x02t.", LV_ERR_FORMAT, "TUPLE", "no MARK");
    EXPECT_PICKLE("\x80\x02(\x85.", LV_ERR_FORMAT, "TUPLE1", "needs 1 stack items");
    EXPECT_PICKLE("\x80\x02h\x05.", LV_ERR_FORMAT, "BINGET", "memo entry 5 was never stored");
    EXPECT_PICKLE("\x80\x02}r\xff\xff\xff\x7f.", LV_ERR_FORMAT, "LONG_BINPUT", "memo index 2147483647 is out of range");
    EXPECT_PICKLE("\x80\x02X\xff\xff\xff\x7f" "abc.", LV_ERR_FORMAT, "BINUNICODE", "runs past the end");
    EXPECT_PICKLE("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.", LV_ERR_UNSUPPORTED, "integer of 9 bytes");
    EXPECT_PICKLE("\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00}.", LV_ERR_FORMAT, "FRAME", "truncated");
    EXPECT_PICKLE("\x80\x02K\x05.", LV_ERR_FORMAT, "holds a int, not a dict of tensors");
    EXPECT_PICKLE("\x80\x02}X\x01\x00\x00\x00" "aK\x01s.", LV_ERR_FORMAT, "no tensors in the state dict (keys: 'a')");
    EXPECT_PICKLE("\x80\x02(X\x03\x00\x00\x00" "fooK\x01K\x02K\x03K\x04tQ.", LV_ERR_FORMAT,
                  "persistent id does not start with 'storage'");
    EXPECT_PICKLE("\x80\x02K\x01Q.", LV_ERR_FORMAT, "BINPERSID", "not a 5-tuple");
    EXPECT_PICKLE("\x80\x02]}b.", LV_ERR_FORMAT, "BUILD is only allowed on an OrderedDict");
}

Test(pth, every_truncation_of_a_real_pickle_is_refused) {
    size_t len;
    uint8_t *pkl = read_entry(FIX "pth-basic.pth", "pth-basic/data.pkl", &len);
    lv_weights *w = NULL;
    cr_assert_eq(load_pickle(pkl, len, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 11);
    lv_weights_close(w);
    for (size_t n = 0; n < len; n++) {
        lv_status s = load_pickle(pkl, n, NULL);
        cr_assert_eq(s, LV_ERR_FORMAT, "truncated to %zu bytes: %s (%s)", n, lv_status_name(s), lv_last_error());
        cr_assert(strstr(lv_last_error(), "test.pth"), "%s", lv_last_error());
    }
    /* Single-byte damage anywhere: loads or fails cleanly. */
    uint8_t *copy = malloc(len);
    int refused = 0;
    for (size_t at = 0; at < len; at++)
        for (int v = 0; v < 256; v += 51) {
            memcpy(copy, pkl, len);
            copy[at] = (uint8_t)(copy[at] ^ (v | 1));
            w = NULL;
            if (load_pickle(copy, len, &w) == LV_OK) lv_weights_close(w);
            else {
                refused++;
                cr_assert(lv_last_error()[0], "refused without a message");
            }
        }
    cr_assert_gt(refused, (int)len);
    free(copy);
    free(pkl);
}

/* ---- hand-made state dicts: views, strides, storages, names --------------------------------- */

Test(pth, tensor_checks_on_hand_made_state_dicts) {
    pbuf p;
    int s3[] = {3}, st1[] = {1}, s23[] = {2, 3}, st12[] = {1, 2}, st31[] = {3, 1};
    begin_dict(&p);
    tensor_item(&p, "t", "FloatStorage", "0", 4, 2, s3, st1, 1); /* 2 + 3 > 4 */
    end_dict(&p);
    expect_pickle_error(p.b, p.n, LV_ERR_FORMAT,
                        (const char *const[]){"tensor 't'", "3 elements at storage offset 2 run past the end of storage '0' (4 elements)", NULL});
    begin_dict(&p);
    tensor_item(&p, "t", "FloatStorage", "0", 6, 0, s23, st12, 2);
    end_dict(&p);
    expect_pickle_error(p.b, p.n, LV_ERR_UNSUPPORTED,
                        (const char *const[]){"tensor 't' is not contiguous (size [2, 3], stride [1, 2])", NULL});
    begin_dict(&p);
    tensor_item(&p, "a", "FloatStorage", "0", 6, 0, s23, st31, 2);
    tensor_item(&p, "b", "HalfStorage", "0", 6, 0, s23, st31, 2);
    end_dict(&p);
    expect_pickle_error(p.b, p.n, LV_ERR_FORMAT,
                        (const char *const[]){"tensor 'b'", "storage '0' is described twice differently", NULL});
    begin_dict(&p);
    tensor_item(&p, "a", "FloatStorage", "0", 6, 0, s23, st31, 2);
    tensor_item(&p, "a", "FloatStorage", "1", 6, 0, s23, st31, 2);
    end_dict(&p);
    expect_pickle_error(p.b, p.n, LV_ERR_FORMAT, (const char *const[]){"tensor name 'a' occurs twice", NULL});
    begin_dict(&p);
    tensor_item(&p, "a", "DoubleStorage", "0", 3, 0, s3, st1, 1);
    end_dict(&p);
    expect_pickle_error(p.b, p.n, LV_ERR_UNSUPPORTED, (const char *const[]){"torch.DoubleStorage", NULL});

    /* Views of one storage at several offsets; a 'model.' prefix on only some names stays. */
    begin_dict(&p);
    tensor_item(&p, "model.x", "BFloat16Storage", "7", 12, 0, s23, st31, 2);
    tensor_item(&p, "y", "BFloat16Storage", "7", 12, 6, s23, st31, 2);
    end_dict(&p);
    lv_weights *w = NULL;
    cr_assert_eq(load_pickle(p.b, p.n, &w), LV_OK, "%s", lv_last_error());
    const lv_weight *x = lv_weights_find(w, "model.x"), *y = lv_weights_find(w, "y");
    cr_assert_not_null(x);
    cr_assert_not_null(y);
    cr_assert_eq(x->dtype, LV_BF16);
    cr_assert_eq((const uint8_t *)y->data - (const uint8_t *)x->data, 12);
    lv_weights_close(w);

    /* Under 'ema' with a 'module.' prefix on every name. */
    p.n = 0;
    put(&p, "\x80\x02}(", 4);
    str(&p, "ema");
    put(&p, "}(", 2);
    tensor_item(&p, "module.w", "FloatStorage", "0", 3, 0, s3, st1, 1);
    put(&p, "u", 1);
    str(&p, "epoch");
    int1(&p, 4);
    end_dict(&p);
    cr_assert_eq(load_pickle(p.b, p.n, &w), LV_OK, "%s", lv_last_error());
    cr_assert_not_null(lv_weights_find(w, "w"));
    cr_assert_str_eq(lv_weights_note(w), "state dict under 'ema', prefix 'module.' removed");
    lv_weights_close(w);
}

/* ---- damaged archives ---------------------------------------------------------------------- */

Test(pth, damaged_archives_give_clean_errors) {
    size_t len;
    uint8_t *file = ts_slurp(FIX "pth-basic.pth", &len);
    const char *cut = ts_tmp("pth-cut.pth");
    size_t points[] = {4, 30, len / 4, len / 2, len - 200, len - 22, len - 1};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        ts_spit(cut, file, points[i]);
        lv_weights *w = NULL;
        lv_clear_error();
        lv_status s = lv_weights_open(cut, &w);
        cr_assert_eq(s, LV_ERR_FORMAT, "cut at %zu: %s (%s)", points[i], lv_status_name(s), lv_last_error());
        cr_assert(strstr(lv_last_error(), "pth-cut.pth"), "%s", lv_last_error());
    }
    free(file);

    size_t pkl_len;
    uint8_t *pkl = read_entry(FIX "pth-basic.pth", "pth-basic/data.pkl", &pkl_len);
    static float zeros[64];
    /* Every storage record present except data/3 (the 20-element storage behind two views). */
    zentry e[12];
    char names[10][32];
    int n = 0;
    e[n++] = (zentry){"arc/data.pkl", pkl, pkl_len};
    size_t sizes[10] = {48, 10, 12, 80, 4, 96, 48, 6, 16, 0};
    for (int i = 0; i < 10; i++) {
        if (i == 3) continue;
        snprintf(names[i], sizeof names[i], "arc/data/%d", i);
        e[n++] = (zentry){names[i], zeros, sizes[i]};
    }
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open(write_zip("pth-missing.pth", e, n), &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "tensor 'f32.view_offset'") &&
                  strstr(lv_last_error(), "storage record 'arc/data/3' is missing"),
              "%s", lv_last_error());
    /* data/3 one element short. */
    e[n] = (zentry){"arc/data/3", zeros, 76};
    cr_assert_eq(lv_weights_open(write_zip("pth-short.pth", e, n + 1), &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "'arc/data/3' holds 76 bytes, the pickle says 80"), "%s", lv_last_error());
    /* Complete: loads (all zeros). */
    e[n] = (zentry){"arc/data/3", zeros, 80};
    cr_assert_eq(lv_weights_open(write_zip("pth-zeros.pth", e, n + 1), &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 11);
    lv_weights_close(w);
    /* Big-endian storages. */
    e[n + 1] = (zentry){"arc/byteorder", "big", 3};
    cr_assert_eq(lv_weights_open(write_zip("pth-big.pth", e, n + 2), &w), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "big-endian"), "%s", lv_last_error());
    e[n + 1] = (zentry){"arc/byteorder", "little", 6};
    cr_assert_eq(lv_weights_open(write_zip("pth-little.pth", e, n + 2), &w), LV_OK, "%s", lv_last_error());
    lv_weights_close(w);
    /* No data.pkl, or two. */
    cr_assert_eq(lv_weights_open(write_zip("pth-nopkl.pth", e + 1, n - 1), &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "without data.pkl"), "%s", lv_last_error());
    e[n + 1] = (zentry){"other/data.pkl", pkl, pkl_len};
    cr_assert_eq(lv_weights_open(write_zip("pth-twopkl.pth", e, n + 2), &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "two data.pkl"), "%s", lv_last_error());
    /* An empty archive (libzip would not write one: the 22-byte end record by hand). */
    uint8_t eocd[22] = {'P', 'K', 5, 6};
    ts_spit(ts_tmp("pth-empty.pth"), eocd, sizeof eocd);
    cr_assert_eq(lv_weights_open(ts_tmp("pth-empty.pth"), &w), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "without data.pkl"), "%s", lv_last_error());
    free(pkl);
}

Test(pth, corrupted_storage_bytes_fail_the_crc) {
    size_t len;
    uint8_t *file = ts_slurp(FIX "pth-basic.pth", &len);
    /* f32.matrix starts with -1.0f, -0.75f: find its record and damage one byte. */
    const float head[2] = {-1.0f, -0.75f};
    uint8_t *at = NULL;
    for (size_t i = 0; i + 8 <= len && !at; i++)
        if (memcmp(file + i, head, 8) == 0) at = file + i;
    cr_assert_not_null(at);
    at[5] ^= 0x40;
    const char *path = ts_tmp("pth-crc.pth");
    ts_spit(path, file, len);
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open(path, &w), LV_ERR_FORMAT, "damaged bytes loaded");
    cr_assert(strstr(lv_last_error(), "data/0") && strstr(lv_last_error(), "CRC"), "%s", lv_last_error());
    free(file);
}

/* ---- longvk convert ------------------------------------------------------------------------ */

Test(pth, convert_writes_an_equal_safetensors_file) {
    char cmd[2048], *out;
    const char *dst = ts_tmp("pth-converted.safetensors");
    remove(dst);
    snprintf(cmd, sizeof cmd, "%s convert %s %s", LONGVK_CLI, FIX "pth-generator.pth", dst);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "11 tensors"), "%s", out);
    free(out);
    expect_same_tensors(dst, FIX "pth-basic.safetensors");
    /* With a preset the config is stored for later loads. */
    snprintf(cmd, sizeof cmd, "%s convert %s %s --preset sana-video-2b-480p", LONGVK_CLI, FIX "pth-basic.pth", dst);
    rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(dst, &w), LV_OK, "%s", lv_last_error());
    lv_sana_config cfg;
    const char *json = lv_weights_metadata(w, "config");
    cr_assert_not_null(json);
    cr_assert_eq(lv_sana_config_parse(json, strlen(json), "stored", &cfg), LV_OK, "%s", lv_last_error());
    cr_assert_eq(cfg.hidden, 2240);
    lv_weights_close(w);
    /* Errors: a refused input leaves no output. */
    const char *bad = ts_tmp("pth-bad-out.safetensors");
    remove(bad);
    snprintf(cmd, sizeof cmd, "%s convert %s %s", LONGVK_CLI, FIX "pth-noncontig.pth", bad);
    rc = ts_run(cmd, &out);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(out, "not contiguous"), "%s", out);
    free(out);
    cr_assert_neq(access(bad, F_OK), 0);
    snprintf(cmd, sizeof cmd, "%s convert %s", LONGVK_CLI, FIX "pth-basic.pth");
    rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 2, "%s", out);
    free(out);
}
