/* Named-tensor files (longvk/weights.h): the shared test data loads exactly as its header
 * says (checked against an independent parse of the header), safetensors round-trips, and
 * every kind of malformed file is refused with a message naming the file, the tensor and
 * the offset. No device needed. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "ts_files.h"
#include "weights_internal.h"

#define ASSETS LONGVK_ASSETS_DIR

/* Opening must fail with `status` and a message holding every fragment given. */
static void expect_error(const char *path, lv_status status, const char *const *fragments) {
    lv_weights *w = NULL;
    lv_clear_error();
    lv_status s = lv_weights_open(path, &w);
    cr_assert_null(w, "%s: opened although malformed", path);
    cr_assert_eq(s, status, "%s: status %s, expected %s (%s)", path, lv_status_name(s), lv_status_name(status),
                 lv_last_error());
    for (const char *const *f = fragments; *f; f++)
        cr_assert(strstr(lv_last_error(), *f), "%s: message '%s' lacks '%s'", path, lv_last_error(), *f);
}
#define EXPECT_ERROR(path, status, ...) expect_error(path, status, (const char *const[]){__VA_ARGS__, NULL})

/* A safetensors file from a header text and data bytes (the header is written as given). */
static const char *make_st(const char *name, const char *header, const void *data, size_t data_len) {
    const char *path = ts_tmp(name);
    size_t hlen = strlen(header);
    uint8_t *buf = malloc(8 + hlen + data_len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (data_len) memcpy(buf + 8 + hlen, data, data_len);
    ts_spit(path, buf, 8 + hlen + data_len);
    free(buf);
    return path;
}

/* Every tensor of a safetensors file checked against the header parsed here with cJSON. */
static void check_against_header(const char *path) {
    size_t len;
    uint8_t *file = ts_slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | file[i];
    cJSON *h = cJSON_ParseWithLength((const char *)file + 8, (size_t)hlen);
    cr_assert_not_null(h);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(path, &w), LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_format(w), "safetensors");
    int n = 0;
    for (cJSON *e = h->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            for (cJSON *kv = e->child; kv; kv = kv->next)
                cr_assert_str_eq(lv_weights_metadata(w, kv->string), kv->valuestring);
            cr_assert_eq(lv_weights_metadata_count(w), cJSON_GetArraySize(e));
            continue;
        }
        const lv_weight *t = lv_weights_find(w, e->string);
        cr_assert_not_null(t, "%s: tensor %s not found", path, e->string);
        cr_assert_eq(lv_weights_at(w, n), t, "file order");
        cr_assert_str_eq(lv_dtype_tag(t->dtype), cJSON_GetObjectItem(e, "dtype")->valuestring);
        cJSON *shape = cJSON_GetObjectItem(e, "shape");
        cr_assert_eq(t->ndim, cJSON_GetArraySize(shape));
        for (int d = 0; d < t->ndim; d++) cr_assert_eq(t->shape[d], (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble);
        cJSON *off = cJSON_GetObjectItem(e, "data_offsets");
        size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, en = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        cr_assert_eq(t->nbytes, en - b);
        cr_assert(memcmp(t->data, file + 8 + hlen + b, en - b) == 0, "%s: bytes of %s", path, e->string);
        cr_assert_eq((uintptr_t)t->data % lv_dtype_size(t->dtype), 0, "aligned");
        n++;
    }
    cr_assert_eq(lv_weights_count(w), n);
    cr_assert_null(lv_weights_find(w, "no.such.tensor"));
    cr_assert_null(lv_weights_at(w, n));
    lv_weights_close(w);
    cJSON_Delete(h);
    free(file);
}

Test(weights, shared_testdata_loads_as_its_header_says) {
    static const char *const files[] = {
        "testdata/sana-video/tiny-hd32.weights.safetensors", "testdata/sana-video/tiny-hd32.vectors.safetensors",
        "testdata/sana-video/hd112.weights.safetensors",     "testdata/sana-video/hd112.vectors.safetensors",
        "testdata/wan-vae/wan-vae-tiny.weights.safetensors", "testdata/wan-vae/wan-vae-tiny.vectors.safetensors",
        "fixtures/pth-basic.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", ASSETS, files[i]);
        check_against_header(path);
    }
}

Test(weights, metadata_and_counts) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(ASSETS "/testdata/sana-video/tiny-hd32.weights.safetensors", &w), LV_OK, "%s",
                 lv_last_error());
    cr_assert_eq(lv_weights_count(w), 56);
    cr_assert_str_eq(lv_weights_metadata(w, "config"),
                     "{\"hidden_size\": 64, \"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1, 2, "
                     "2], \"in_channels\": 4, \"out_channels\": 4, \"caption_channels\": 32, \"mlp_ratio\": 3.0}");
    cr_assert_null(lv_weights_metadata(w, "nope"));
    const lv_weight *x = lv_weights_find(w, "x_embedder.proj.weight");
    cr_assert_not_null(x);
    cr_assert_eq(x->ndim, 5);
    int64_t want[5] = {64, 4, 1, 2, 2};
    for (int i = 0; i < 5; i++) cr_assert_eq(x->shape[i], want[i]);
    cr_assert_eq(x->nbytes, 64 * 4 * 4 * 4);
    lv_weights_close(w);
    cr_assert_eq(lv_weights_open(ASSETS "/testdata/sana-video/tiny-hd32.vectors.safetensors", &w), LV_OK);
    cr_assert_str_eq(lv_weights_metadata(w, "chunks"), "3");
    cr_assert_str_eq(lv_weights_metadata(w, "chunk_frames"), "2");
    lv_weights_close(w);
}

/* pth-basic.safetensors was written by tests/reference/make_pth_fixture.py from formulas. */
Test(weights, fixture_values_match_their_formulas) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(ASSETS "/fixtures/pth-basic.safetensors", &w), LV_OK, "%s", lv_last_error());
    const lv_weight *m = lv_weights_find(w, "f32.matrix");
    for (int i = 0; i < 12; i++) cr_assert_eq(((const float *)m->data)[i], 0.25f * i - 1);
    const lv_weight *b = lv_weights_find(w, "bf16.matrix");
    cr_assert_eq(b->dtype, LV_BF16);
    for (int i = 0; i < 6; i++) cr_assert_eq(lv_bf16_to_float(((const uint16_t *)b->data)[i]), 0.125f * i);
    const lv_weight *s = lv_weights_find(w, "f32.scalar");
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(*(const float *)s->data, 3.5f);
    const lv_weight *e = lv_weights_find(w, "f32.empty");
    cr_assert_eq(e->nbytes, 0);
    cr_assert_eq(e->shape[0], 0);
    cr_assert_eq(e->shape[1], 3);
    cr_assert_str_eq(lv_weights_metadata(w, "source"), "tests/reference/make_pth_fixture.py");
    lv_weights_close(w);
}

Test(weights, write_then_read_round_trips) {
    float f[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 7};
    uint16_t h[3] = {lv_float_to_half(0.5f), lv_float_to_half(-3), 0x7c00};
    uint16_t bf[5] = {lv_float_to_bf16(1.25f), lv_float_to_bf16(-8), 1, 2, 3};
    int32_t i32[2] = {-7, 1 << 30};
    float scalar = 42;
    float five[2 * 1 * 1 * 1 * 1] = {9, 10};
    lv_weight t[] = {
        {"half \"quoted\" \\ name", LV_F16, 1, {3}, h, sizeof h},
        {"f32.matrix", LV_F32, 2, {2, 3}, f, sizeof f},
        {"bf16.odd", LV_BF16, 1, {5}, bf, sizeof bf},
        {"int", LV_I32, 2, {1, 2}, i32, sizeof i32},
        {"scalar", LV_F32, 0, {0}, &scalar, 4},
        {"five.dims", LV_F32, 5, {2, 1, 1, 1, 1}, five, sizeof five},
        {"empty", LV_F32, 2, {0, 7}, NULL, 0},
        {"ünïcode/名前", LV_F32, 1, {1}, &scalar, 4},
    };
    const char *meta[] = {"config", "{\"a\": [1, 2]}", "line\nbreak", "tab\tand \"quote\"", "empty", ""};
    const char *path = ts_tmp("weights-roundtrip.safetensors");
    cr_assert_eq(lv_safetensors_write(path, t, 8, meta, 3), LV_OK, "%s", lv_last_error());
    check_against_header(path); /* the file is valid as an independent parser reads it */
    lv_weights *w;
    cr_assert_eq(lv_weights_open(path, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 8);
    for (int i = 0; i < 8; i++) {
        const lv_weight *r = lv_weights_at(w, i);
        cr_assert_str_eq(r->name, t[i].name, "header keeps the given order");
        cr_assert_eq(r->dtype, t[i].dtype);
        cr_assert_eq(r->ndim, t[i].ndim);
        for (int d = 0; d < r->ndim; d++) cr_assert_eq(r->shape[d], t[i].shape[d]);
        cr_assert_eq(r->nbytes, t[i].nbytes);
        if (r->nbytes) cr_assert(memcmp(r->data, t[i].data, r->nbytes) == 0, "bytes of %s", r->name);
    }
    for (int i = 0; i < 3; i++) cr_assert_str_eq(lv_weights_metadata(w, meta[2 * i]), meta[2 * i + 1]);
    lv_weights_close(w);
    /* The data section starts 8-aligned. */
    size_t len;
    uint8_t *file = ts_slurp(path, &len);
    cr_assert_eq(file[0] % 8, 0);
    free(file);
    /* Nothing temporary is left beside it. */
    DIR *d = opendir(LONGVK_TEST_TMP);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert_null(strstr(e->d_name, "weights-roundtrip.safetensors.tmp"), "left behind: %s", e->d_name);
    closedir(d);
}

Test(weights, write_refuses_bad_input_and_leaves_no_file) {
    float f[2] = {1, 2};
    const char *path = ts_tmp("weights-bad-write.safetensors");
    remove(path);
    lv_weight dup[] = {{"a", LV_F32, 1, {2}, f, 8}, {"a", LV_F32, 1, {2}, f, 8}};
    cr_assert_eq(lv_safetensors_write(path, dup, 2, NULL, 0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "'a' given twice"), "%s", lv_last_error());
    lv_weight size[] = {{"a", LV_F32, 1, {3}, f, 8}};
    cr_assert_eq(lv_safetensors_write(path, size, 1, NULL, 0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "8 bytes given, its shape needs 12"), "%s", lv_last_error());
    lv_weight meta_name[] = {{"__metadata__", LV_F32, 1, {2}, f, 8}};
    cr_assert_eq(lv_safetensors_write(path, meta_name, 1, NULL, 0), LV_ERR_INVALID);
    lv_weight ok[] = {{"a", LV_F32, 1, {2}, f, 8}};
    cr_assert_eq(lv_safetensors_write(LONGVK_TEST_TMP "/no/such/dir/x.safetensors", ok, 1, NULL, 0), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "temporary file"), "%s", lv_last_error());
    FILE *fp = fopen(path, "rb");
    cr_assert_null(fp, "a refused write created the file");
    /* a full disk (/dev/full, written through as a device): the failed write names it */
    cr_assert_eq(lv_safetensors_write("/dev/full", ok, 1, NULL, 0), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "/dev/full: write failed: No space left on device"), "%s", lv_last_error());
    cr_assert_eq(lv_gguf_write("/dev/full", ok, 1, NULL, 0), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "/dev/full: write failed: No space left on device"), "%s", lv_last_error());
}

Test(weights, open_errors_name_the_file) {
    EXPECT_ERROR(LONGVK_TEST_TMP "/does-not-exist.safetensors", LV_ERR_IO, "does-not-exist.safetensors", "cannot open");
    EXPECT_ERROR(LONGVK_TEST_TMP, LV_ERR_IO, "not a regular file");
    ts_spit(ts_tmp("weights-empty.safetensors"), "", 0);
    EXPECT_ERROR(ts_tmp("weights-empty.safetensors"), LV_ERR_FORMAT, "weights-empty.safetensors", "empty");
    ts_spit(ts_tmp("weights-text.bin"), "hello, this is not a model file at all\n", 39);
    EXPECT_ERROR(ts_tmp("weights-text.bin"), LV_ERR_FORMAT, "weights-text.bin", "not a safetensors file");
}

/* Two valid tensors "a" [2] f32 at [0, 8] and "b" [3] f32 at [8, 20]; the malformed variants
 * change one thing each. */
static const float DATA[5] = {1, 2, 3, 4, 5};

Test(weights, truncated_files_are_refused_at_every_point) {
    const char *good = make_st("weights-good.safetensors",
                               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]}}",
                               DATA, sizeof DATA);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(good, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(((const float *)lv_weights_find(w, "b")->data)[2], 5.0f);
    lv_weights_close(w);
    size_t len;
    uint8_t *file = ts_slurp(good, &len);
    const char *cut = ts_tmp("weights-cut.safetensors");
    for (size_t n = 1; n < len; n++) {
        ts_spit(cut, file, n);
        lv_clear_error();
        cr_assert_neq(lv_weights_open(cut, &w), LV_OK, "truncated to %zu bytes but opened", n);
        cr_assert(strstr(lv_last_error(), "weights-cut.safetensors"), "at %zu: %s", n, lv_last_error());
    }
    /* Specific messages at the interesting points. */
    ts_spit(cut, file, 5);
    EXPECT_ERROR(cut, LV_ERR_FORMAT, "truncated: 5 bytes");
    ts_spit(cut, file, 8 + 30);
    EXPECT_ERROR(cut, LV_ERR_FORMAT, "header length", "runs past the end of the file");
    ts_spit(cut, file, len - 1);
    EXPECT_ERROR(cut, LV_ERR_FORMAT, "tensor 'b'", "data_offsets [8, 20]", "run past the end", "truncated");
    free(file);
}

Test(weights, header_length_past_the_end) {
    size_t len;
    uint8_t *file = ts_slurp(make_st("weights-len.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                                                 "\"data_offsets\":[0,8]}}",
                                     DATA, 8),
                             &len);
    const char *path = ts_tmp("weights-len2.safetensors");
    uint64_t lens[] = {len - 7, (uint64_t)1 << 40, ~(uint64_t)0};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 8; i++) file[i] = (uint8_t)(lens[k] >> (8 * i));
        ts_spit(path, file, len);
        EXPECT_ERROR(path, LV_ERR_FORMAT, "weights-len2.safetensors", "header length", "file offset 0",
                     "runs past the end");
    }
    free(file);
}

Test(weights, malformed_headers_give_clean_errors) {
    struct {
        const char *header;
        lv_status status;
        const char *fragment[3];
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[3],"
         "\"data_offsets\":[4,16]}}",
         LV_ERR_FORMAT, {"tensors 'a' [0, 8] and 'b' [4, 16] overlap", "file offset"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", LV_ERR_FORMAT,
         {"tensor 'a'", "data_offsets [16, 24]", "run past the end of the data section"}},
        {"{\"a\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT,
         {"tensor 'a'", "unknown dtype 'F99'"}},
        {"{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", LV_ERR_UNSUPPORTED,
         {"tensor 'a'", "dtype I64 is not supported"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", LV_ERR_FORMAT,
         {"header JSON is malformed", "file offset"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", LV_ERR_FORMAT, {"malformed"}},
        {"[1, 2, 3]", LV_ERR_FORMAT, {"header is not a JSON object"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT,
         {"tensor 'a'", "shape [3] of F32 needs 12 bytes", "hold 8"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", LV_ERR_FORMAT, {"end before they begin"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT,
         {"tensor 'a'", "shape entry 0 is not a non-negative integer"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT, {"shape entry 0"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", LV_ERR_FORMAT, {"no \"shape\" array"}},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT, {"tensor 'a'", "no \"dtype\""}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", LV_ERR_FORMAT, {"\"data_offsets\" is not an array"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", LV_ERR_FORMAT, {"data_offsets"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[8,16]}}",
         LV_ERR_FORMAT, {"tensor name 'a' occurs twice"}},
        {"{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         LV_ERR_FORMAT, {"__metadata__ value of 'k' is not a string"}},
        {"{\"__metadata__\":[],\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT,
         {"__metadata__ is not a JSON object"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,2],\"data_offsets\":[0,8]}}", LV_ERR_UNSUPPORTED,
         {"tensor 'a' has 6 dimensions"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,9007199254740992],\"data_offsets\":[0,8]}}",
         LV_ERR_FORMAT, {"shape is too large"}},
        {"{\"a\":7}", LV_ERR_FORMAT, {"tensor 'a'", "not a JSON object"}},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", LV_ERR_FORMAT, {"empty name"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} xx", LV_ERR_FORMAT,
         {"unexpected bytes after the header JSON", "file offset"}},
        {"{}", LV_OK, {NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "weights-case%zu.safetensors", i);
        const char *path = make_st(name, cases[i].header, DATA, 16);
        if (cases[i].status == LV_OK) {
            lv_weights *w;
            cr_assert_eq(lv_weights_open(path, &w), LV_OK, "case %zu: %s", i, lv_last_error());
            cr_assert_eq(lv_weights_count(w), 0);
            lv_weights_close(w);
            continue;
        }
        const char *frags[5] = {name, cases[i].fragment[0], cases[i].fragment[1], cases[i].fragment[2], NULL};
        expect_error(path, cases[i].status, frags);
    }
}

Test(weights, header_padding_and_misaligned_data) {
    /* A 7-byte header pad makes the data start at an odd offset: the reader copies it. */
    const char *path = make_st("weights-odd.safetensors",
                               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ", DATA, 8);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(path, &w), LV_OK, "%s", lv_last_error());
    const lv_weight *a = lv_weights_find(w, "a");
    cr_assert_eq((uintptr_t)a->data % 4, 0);
    cr_assert_eq(((const float *)a->data)[0], 1.0f);
    cr_assert_eq(((const float *)a->data)[1], 2.0f);
    lv_weights_close(w);
}

/* Deterministic random damage to a valid file: every result is an lv_weights or a message. */
Test(weights, random_damage_never_crashes) {
    size_t len;
    uint8_t *file = ts_slurp(ASSETS "/fixtures/pth-basic.safetensors", &len);
    uint8_t *copy = malloc(len);
    uint64_t state = 12345;
    int refused = 0, accepted = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, file, len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(state >> 33) % (iter % 2 ? 64 : len);
            copy[at] = (uint8_t)(state >> 17);
        }
        lv_weights *w = lv_weights_new("damaged.safetensors", "safetensors");
        lv_clear_error();
        if (lv_safetensors_parse(w, copy, len) == LV_OK) {
            accepted++;
            for (int i = 0; i < lv_weights_count(w); i++) {
                const lv_weight *t = lv_weights_at(w, i);
                cr_assert((const uint8_t *)t->data + t->nbytes <= copy + len || t->nbytes == 0 ||
                              (const uint8_t *)t->data < copy || (const uint8_t *)t->data >= copy + len,
                          "tensor bytes inside the file image");
            }
        } else {
            refused++;
            cr_assert(lv_last_error()[0], "a refusal without a message");
        }
        lv_weights_close(w);
    }
    cr_assert_gt(refused, 100);
    cr_assert_gt(accepted, 10);
    free(copy);
    free(file);
}
