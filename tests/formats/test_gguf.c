/* GGUF files (engine/formats/gguf.c) through lv_weights: files written byte by byte here by
 * the test's own little writer, from the format's description (ggml's docs/gguf.md), with
 * F32, F16, BF16, I32, Q8_0 and Q4_K tensors; read back: names, shapes (ggml's dims
 * reversed), dtypes, values (Q8_0 and Q4_K against references computed here from the numbers
 * the test packed, exactly), metadata; alignments other than 32; malformed files refused with
 * a message naming what is wrong; Q8_0 quantization's error bound. No device needed. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "longvk/quant.h"
#include "ts_bytes.h"
#include "ts_files.h"
#include "weights_internal.h"

/* ---- the test's writer (bytes through ts_bytes.h) ----------------------------------------- */

/* value types (docs/gguf.md) */
enum { V_U8 = 0, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STRING, V_ARRAY, V_U64, V_I64, V_F64 };
/* ggml types */
enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_Q4_K = 12, T_Q6_K = 14, T_I32 = 26, T_BF16 = 30 };

#define AUTO UINT64_MAX

typedef struct tspec {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[6];
    uint32_t type;
    uint64_t offset; /* AUTO: the next aligned offset */
    const void *data;
    size_t nbytes;
} tspec;

/* A file: header (version), the metadata pairs already written to kv (n_kv of them), the
 * tensor infos and the data section at `alignment` (the caller writes general.alignment
 * into kv when it is not 32). */
static ts_bytes build(uint32_t version, const ts_bytes *kv, uint64_t n_kv, uint32_t alignment, tspec *t, int n) {
    ts_bytes b = {0};
    ts_put(&b, "GGUF", 4);
    ts_put_u32(&b, version);
    ts_put_u64(&b, (uint64_t)n);
    ts_put_u64(&b, n_kv);
    if (kv) ts_put(&b, kv->p, kv->n);
    uint64_t next = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].offset == AUTO) {
            t[i].offset = next;
        }
        uint64_t end = t[i].offset + t[i].nbytes;
        next = (end + alignment - 1) / alignment * alignment;
        ts_put_str(&b, t[i].name);
        ts_put_u32(&b, t[i].n_dims);
        for (uint32_t d = 0; d < t[i].n_dims; d++) ts_put_u64(&b, t[i].ne[d]);
        ts_put_u32(&b, t[i].type);
        ts_put_u64(&b, t[i].offset);
    }
    if (n) {
        while (b.n % alignment) ts_put_u8(&b, 0);
        size_t start = b.n, size = 0;
        for (int i = 0; i < n; i++)
            if (t[i].nbytes && t[i].offset + t[i].nbytes > size) size = t[i].offset + t[i].nbytes;
        ts_bytes z = {0};
        for (size_t i = 0; i < size; i++) ts_put_u8(&z, 0);
        ts_put(&b, z.p, z.n);
        free(z.p);
        for (int i = 0; i < n; i++)
            if (t[i].nbytes) memcpy(b.p + start + t[i].offset, t[i].data, t[i].nbytes);
    }
    return b;
}

static uint8_t zeros[4096];

/* ---- references ------------------------------------------------------------------------- */

/* IEEE half to float, from its definition. */
static float half(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf(1.0f + (float)m / 1024.0f, e - 15) : ldexpf((float)m, -24);
    return s ? -v : v;
}

/* A Q8_0 block: scale bits and 32 int8. */
static void q8_block(ts_bytes *b, uint16_t d, const int8_t *q) {
    ts_put_u16(b, d);
    ts_put(b, q, 32);
}

/* A Q4_K block from its numbers: d, dmin (f16 bits), 8 six-bit scales and mins, 256 four-bit
 * quants; packed as docs/ggml's block_q4_K lays them out. */
static void q4k_block(ts_bytes *b, uint16_t d, uint16_t dmin, const uint8_t *sc, const uint8_t *m, const uint8_t *q) {
    ts_put_u16(b, d);
    ts_put_u16(b, dmin);
    uint8_t s[12];
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    ts_put(b, s, 12);
    uint8_t qs[128];
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) qs[32 * g + l] = (uint8_t)(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
    ts_put(b, qs, 128);
}

static uint32_t rng = 12345;
static uint32_t next_rand(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* ---- the sample file -------------------------------------------------------------------- */

typedef struct sample {
    ts_bytes file;
    float f32[6];
    uint16_t f16[4], bf16[8];
    int32_t i32[3];
    float q8_ref[2 * 64], q4k_ref[2 * 256];
} sample;

static sample make_sample(uint32_t alignment) {
    sample s;
    memset(&s, 0, sizeof s);
    ts_bytes kv = {0};
    uint64_t n_kv = 0;
    ts_put_str(&kv, "general.architecture"), ts_put_u32(&kv, V_STRING), ts_put_str(&kv, "gemma2"), n_kv++;
    if (alignment != 32) ts_put_str(&kv, "general.alignment"), ts_put_u32(&kv, V_U32), ts_put_u32(&kv, alignment), n_kv++;
    ts_put_str(&kv, "gemma2.block_count"), ts_put_u32(&kv, V_U32), ts_put_u32(&kv, 26), n_kv++;
    ts_put_str(&kv, "test.i8"), ts_put_u32(&kv, V_I8), ts_put_u8(&kv, (uint8_t)-5), n_kv++;
    ts_put_str(&kv, "test.i64"), ts_put_u32(&kv, V_I64), ts_put_u64(&kv, (uint64_t)-1234567890123LL), n_kv++;
    ts_put_str(&kv, "test.f32"), ts_put_u32(&kv, V_F32), ts_put_f32(&kv, 1e-6f), n_kv++;
    ts_put_str(&kv, "test.bool"), ts_put_u32(&kv, V_BOOL), ts_put_u8(&kv, 1), n_kv++;
    ts_put_str(&kv, "tokenizer.ggml.tokens"), ts_put_u32(&kv, V_ARRAY), ts_put_u32(&kv, V_STRING), ts_put_u64(&kv, 3);
    ts_put_str(&kv, "<pad>"), ts_put_str(&kv, "hello"), ts_put_str(&kv, "w\xc3\xb6rld"), n_kv++;
    ts_put_str(&kv, "tokenizer.ggml.scores"), ts_put_u32(&kv, V_ARRAY), ts_put_u32(&kv, V_F32), ts_put_u64(&kv, 2);
    ts_put_f32(&kv, -1.5f), ts_put_f32(&kv, 2.25f), n_kv++;

    for (int i = 0; i < 6; i++) s.f32[i] = (float)i * 0.5f - 1.0f;
    uint16_t f16[4] = {0x3c00, 0xc000, 0x0001, 0x7bff}; /* 1, -2, 2^-24, 65504 */
    memcpy(s.f16, f16, sizeof f16);
    for (int i = 0; i < 8; i++) s.bf16[i] = (uint16_t)(0x3f80 + 0x10 * i) ^ (i & 1 ? 0x8000 : 0);
    int32_t i32[3] = {7, -8, 1 << 30};
    memcpy(s.i32, i32, sizeof i32);

    /* Q8_0: 2 rows of 64 = 4 blocks */
    ts_bytes q8 = {0};
    const uint16_t q8_d[4] = {0x3800, 0x2e66, 0x0200, 0xbc00}; /* 0.5, ~0.1, a subnormal, -1 */
    for (int blk = 0; blk < 4; blk++) {
        int8_t q[32];
        for (int i = 0; i < 32; i++) q[i] = (int8_t)(next_rand() % 255 - 127);
        q[0] = -128; /* the full int8 range */
        q8_block(&q8, q8_d[blk], q);
        for (int i = 0; i < 32; i++) s.q8_ref[32 * blk + i] = half(q8_d[blk]) * (float)q[i];
    }
    /* Q4_K: 2 rows of 256 = 2 super-blocks */
    ts_bytes q4 = {0};
    const uint16_t q4_d[2][2] = {{0x3400, 0x2c00}, {0x2e66, 0x3266}}; /* d, dmin */
    for (int blk = 0; blk < 2; blk++) {
        uint8_t sc[8], m[8], q[256];
        for (int j = 0; j < 8; j++) sc[j] = (uint8_t)(next_rand() % 64), m[j] = (uint8_t)(next_rand() % 64);
        sc[7] = 63, m[6] = 63; /* the top bits of the upper sub-blocks set */
        for (int i = 0; i < 256; i++) q[i] = (uint8_t)(next_rand() % 16);
        q4k_block(&q4, q4_d[blk][0], q4_d[blk][1], sc, m, q);
        float d = half(q4_d[blk][0]), dmin = half(q4_d[blk][1]);
        for (int i = 0; i < 256; i++) {
            int j = i / 32;
            float dj = d * (float)sc[j], mj = dmin * (float)m[j];
            s.q4k_ref[256 * blk + i] = dj * (float)q[i] - mj;
        }
    }
    tspec t[] = {
        {"w.f32", 2, {3, 2}, T_F32, AUTO, s.f32, sizeof s.f32},
        {"w.f16", 1, {4}, T_F16, AUTO, s.f16, sizeof s.f16},
        {"blk.0.w.bf16", 3, {2, 2, 2}, T_BF16, AUTO, s.bf16, sizeof s.bf16},
        {"w.q8", 2, {64, 2}, T_Q8_0, AUTO, q8.p, q8.n},
        {"w.q4k", 4, {256, 1, 2, 1}, T_Q4_K, AUTO, q4.p, q4.n},
        {"w.i32", 1, {3}, T_I32, AUTO, s.i32, sizeof s.i32},
    };
    s.file = build(3, &kv, n_kv, alignment, t, (int)(sizeof t / sizeof t[0]));
    free(kv.p);
    free(q8.p);
    free(q4.p);
    return s;
}

static void check_sample(const lv_weights *w, const sample *s) {
    cr_assert_str_eq(lv_weights_format(w), "gguf");
    cr_assert_eq(lv_weights_count(w), 6);
    cr_assert_str_eq(lv_weights_at(w, 0)->name, "w.f32", "file order");
    const lv_weight *t = lv_weights_find(w, "w.f32");
    cr_assert_not_null(t);
    cr_assert_eq(t->dtype, LV_F32);
    cr_assert_eq(t->ndim, 2);
    cr_assert(t->shape[0] == 2 && t->shape[1] == 3, "ggml ne [3, 2] is shape [2, 3]");
    cr_assert_eq(t->nbytes, 24);
    cr_assert_eq(memcmp(t->data, s->f32, 24), 0);

    float out[512];
    t = lv_weights_find(w, "w.f16");
    cr_assert(t && t->dtype == LV_F16 && t->ndim == 1 && t->shape[0] == 4 && t->nbytes == 8);
    cr_assert_eq(lv_dequantize_row(t->dtype, t->data, 4, out), LV_OK, "%s", lv_last_error());
    cr_assert(out[0] == 1.0f && out[1] == -2.0f && out[2] == ldexpf(1.0f, -24) && out[3] == 65504.0f);

    t = lv_weights_find(w, "blk.0.w.bf16");
    cr_assert(t && t->dtype == LV_BF16 && t->ndim == 3 && t->nbytes == 16);
    cr_assert_eq(lv_dequantize_row(t->dtype, t->data, 8, out), LV_OK);
    for (int i = 0; i < 8; i++) {
        uint32_t bits = (uint32_t)s->bf16[i] << 16;
        float v;
        memcpy(&v, &bits, 4);
        cr_assert_eq(out[i], v, "bf16 %d", i);
    }

    t = lv_weights_find(w, "w.q8");
    cr_assert(t && t->dtype == LV_Q8_0 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 64);
    cr_assert_eq(t->nbytes, 4 * 34);
    cr_assert_eq(t->nbytes, lv_dtype_bytes(LV_Q8_0, (int64_t)lv_weight_numel(t)));
    cr_assert_eq(lv_dequantize_row(t->dtype, t->data, 128, out), LV_OK, "%s", lv_last_error());
    for (int i = 0; i < 128; i++)
        cr_assert_eq(out[i], s->q8_ref[i], "q8_0 element %d: %g, expected %g", i, out[i], s->q8_ref[i]);

    t = lv_weights_find(w, "w.q4k");
    cr_assert(t && t->dtype == LV_Q4_K && t->ndim == 4);
    cr_assert(t->shape[0] == 1 && t->shape[1] == 2 && t->shape[2] == 1 && t->shape[3] == 256, "reversed ne");
    cr_assert_eq(t->nbytes, 2 * 144);
    cr_assert_eq(lv_dequantize_row(t->dtype, t->data, 512, out), LV_OK, "%s", lv_last_error());
    for (int i = 0; i < 512; i++)
        cr_assert_eq(out[i], s->q4k_ref[i], "q4_k element %d: %g, expected %g", i, out[i], s->q4k_ref[i]);

    t = lv_weights_find(w, "w.i32");
    cr_assert(t && t->dtype == LV_I32 && t->nbytes == 12 && memcmp(t->data, s->i32, 12) == 0);

    for (int i = 0; i < lv_weights_count(w); i++) {
        const lv_weight *x = lv_weights_at(w, i);
        size_t a = lv_dtype_quantized(x->dtype) ? 2 : lv_dtype_size(x->dtype);
        cr_assert_eq((uintptr_t)x->data % a, 0, "'%s' aligned", x->name);
    }

    /* metadata */
    cr_assert_str_eq(lv_weights_metadata(w, "general.architecture"), "gemma2");
    cr_assert_str_eq(lv_weights_metadata(w, "gemma2.block_count"), "26");
    cr_assert_str_eq(lv_weights_metadata(w, "test.bool"), "true");
    cr_assert_str_eq(lv_weights_metadata(w, "tokenizer.ggml.tokens"), "[array of 3 string]");
    int64_t iv;
    double fv;
    cr_assert(lv_weights_metadata_int(w, "gemma2.block_count", &iv) && iv == 26);
    cr_assert(lv_weights_metadata_int(w, "test.i8", &iv) && iv == -5);
    cr_assert(lv_weights_metadata_int(w, "test.i64", &iv) && iv == -1234567890123LL);
    cr_assert(lv_weights_metadata_int(w, "test.bool", &iv) && iv == 1);
    cr_assert(!lv_weights_metadata_int(w, "test.f32", &iv));
    cr_assert(!lv_weights_metadata_int(w, "general.architecture", &iv));
    cr_assert(lv_weights_metadata_float(w, "test.f32", &fv) && fv == (double)1e-6f);
    uint64_t n = 0;
    const char *const *tok = lv_weights_metadata_strings(w, "tokenizer.ggml.tokens", &n);
    cr_assert(tok && n == 3);
    cr_assert_str_eq(tok[0], "<pad>");
    cr_assert_str_eq(tok[1], "hello");
    cr_assert_str_eq(tok[2], "w\xc3\xb6rld");
    cr_assert_null(lv_weights_metadata_strings(w, "tokenizer.ggml.scores", &n));
    int type = -1;
    const float *scores = lv_weights_metadata_array(w, "tokenizer.ggml.scores", &type, &n);
    cr_assert(scores && type == V_F32 && n == 2 && scores[0] == -1.5f && scores[1] == 2.25f);
    cr_assert_null(lv_weights_metadata_array(w, "tokenizer.ggml.tokens", &type, &n));
    cr_assert_null(lv_weights_metadata_strings(w, "nope", &n));
}

Test(gguf, reads_every_type_from_memory_and_file) {
    uint32_t aligns[] = {32, 1, 8, 64, 4096};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        sample s = make_sample(aligns[a]);
        /* an aligned copy in memory: odd alignments put tensors at odd addresses (copied) */
        lv_weights *w = NULL;
        cr_assert_eq(lv_weights_open_memory(s.file.p, s.file.n, "sample.gguf", &w), LV_OK, "alignment %u: %s",
                     aligns[a], lv_last_error());
        check_sample(w, &s);
        lv_weights_close(w);
        /* a file (mmap), told apart by content */
        char name[64];
        snprintf(name, sizeof name, "sample-%u.gguf", aligns[a]);
        const char *path = ts_tmp(name);
        ts_spit(path, s.file.p, s.file.n);
        cr_assert_eq(lv_weights_open(path, &w), LV_OK, "%s", lv_last_error());
        check_sample(w, &s);
        lv_weights_close(w);
        free(s.file.p);
    }
}

Test(gguf, version_2_and_no_tensors) {
    ts_bytes kv = {0};
    ts_put_str(&kv, "general.architecture"), ts_put_u32(&kv, V_STRING), ts_put_str(&kv, "sana");
    ts_bytes f = build(2, &kv, 1, 32, NULL, 0);
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open_memory(f.p, f.n, "empty.gguf", &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 0);
    cr_assert_str_eq(lv_weights_metadata(w, "general.architecture"), "sana");
    lv_weights_close(w);
    free(f.p);
    free(kv.p);
}

/* ---- malformed files -------------------------------------------------------------------- */

/* Parsing must fail with a message holding `fragment` (and the file's name). */
static void expect_refused(const ts_bytes *f, const char *fragment) {
    lv_weights *w = lv_weights_new("bad.gguf", "gguf");
    lv_clear_error();
    lv_status s = lv_gguf_parse(w, f->p, f->n);
    cr_assert_neq(s, LV_OK, "accepted a file that should hold: %s", fragment);
    cr_assert(strstr(lv_last_error(), "bad.gguf"), "message '%s' lacks the file", lv_last_error());
    cr_assert(strstr(lv_last_error(), fragment), "message '%s' lacks '%s'", lv_last_error(), fragment);
    lv_weights_close(w);
}

static ts_bytes one_tensor(tspec t) {
    tspec ts[1] = {t};
    return build(3, NULL, 0, 32, ts, 1);
}

Test(gguf, truncated_at_every_byte) {
    sample s = make_sample(32);
    for (size_t len = 0; len < s.file.n; len++) {
        lv_weights *w = lv_weights_new("cut.gguf", "gguf");
        lv_clear_error();
        cr_assert_neq(lv_gguf_parse(w, s.file.p, len), LV_OK, "accepted %zu of %zu bytes", len, s.file.n);
        cr_assert(strstr(lv_last_error(), "cut.gguf"), "%zu bytes: message '%s'", len, lv_last_error());
        lv_weights_close(w);
    }
    free(s.file.p);
}

Test(gguf, header_errors) {
    sample s = make_sample(32);
    ts_bytes f = {0};
    ts_put(&f, s.file.p, s.file.n);
    f.p[3] = 'X';
    expect_refused(&f, "magic");
    f.p[3] = 'F';
    f.p[4] = 1;
    expect_refused(&f, "version 1");
    f.p[4] = 4;
    expect_refused(&f, "version 4");
    f.p[4] = 0, f.p[7] = 3; /* version 3 written big-endian */
    expect_refused(&f, "big-endian");
    free(f.p);
    free(s.file.p);

    /* counts that cannot fit */
    ts_bytes h = {0};
    ts_put(&h, "GGUF", 4), ts_put_u32(&h, 3), ts_put_u64(&h, (uint64_t)1 << 40), ts_put_u64(&h, 0);
    expect_refused(&h, "tensors");
    h.n = 8, ts_put_u64(&h, 0), ts_put_u64(&h, UINT64_MAX);
    expect_refused(&h, "metadata pairs");
    free(h.p);
}

Test(gguf, metadata_errors) {
    /* a key whose length runs past the end */
    ts_bytes kv = {0};
    ts_put_u64(&kv, 1000), ts_put(&kv, "abc", 3), ts_put(&kv, zeros, 16);
    ts_bytes f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "string length 1000");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    /* a string value whose length runs past the end */
    ts_put_str(&kv, "k"), ts_put_u32(&kv, V_STRING), ts_put_u64(&kv, UINT64_MAX);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "string length");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    /* an array count far beyond the file */
    ts_put_str(&kv, "tokenizer.ggml.tokens"), ts_put_u32(&kv, V_ARRAY), ts_put_u32(&kv, V_STRING);
    ts_put_u64(&kv, (uint64_t)1 << 60);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "tokenizer.ggml.tokens");
    expect_refused(&f, "items");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    ts_put_str(&kv, "a"), ts_put_u32(&kv, V_ARRAY), ts_put_u32(&kv, V_U64), ts_put_u64(&kv, UINT64_MAX / 4);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "items");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    /* unknown value types, nested arrays */
    ts_put_str(&kv, "k"), ts_put_u32(&kv, 13), ts_put_u64(&kv, 0);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "unknown value type 13");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    ts_put_str(&kv, "k"), ts_put_u32(&kv, V_ARRAY), ts_put_u32(&kv, V_ARRAY), ts_put_u64(&kv, 0);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "array of arrays");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    /* a key twice, a key with a NUL byte */
    ts_put_str(&kv, "k"), ts_put_u32(&kv, V_U8), ts_put_u8(&kv, 1);
    ts_put_str(&kv, "k"), ts_put_u32(&kv, V_U8), ts_put_u8(&kv, 2);
    f = build(3, &kv, 2, 32, NULL, 0);
    expect_refused(&f, "'k' occurs twice");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    ts_put_u64(&kv, 3), ts_put(&kv, "a\0b", 3), ts_put_u32(&kv, V_U8), ts_put_u8(&kv, 1);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "NUL byte");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    /* general.alignment: a power of two, as a u32 */
    ts_put_str(&kv, "general.alignment"), ts_put_u32(&kv, V_U32), ts_put_u32(&kv, 24);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "general.alignment");
    free(f.p), free(kv.p), kv = (ts_bytes){0};
    ts_put_str(&kv, "general.alignment"), ts_put_u32(&kv, V_U64), ts_put_u64(&kv, 32);
    f = build(3, &kv, 1, 32, NULL, 0);
    expect_refused(&f, "general.alignment");
    free(f.p), free(kv.p);
}

Test(gguf, tensor_errors) {
    ts_bytes f;
    /* offset past the end */
    f = one_tensor((tspec){"t", 1, {8}, T_F32, 0, zeros, 32});
    f.n -= 4;
    expect_refused(&f, "'t'");
    expect_refused(&f, "past the end");
    free(f.p);
    f = one_tensor((tspec){"t", 1, {8}, T_F32, (uint64_t)1 << 62, zeros, 0});
    expect_refused(&f, "past the end");
    free(f.p);
    /* an offset not a multiple of the alignment */
    f = one_tensor((tspec){"t", 1, {8}, T_F32, 4, zeros, 32});
    expect_refused(&f, "not a multiple of the alignment 32");
    free(f.p);
    /* two tensors over the same bytes */
    tspec two[2] = {{"a", 1, {16}, T_F32, 0, zeros, 64}, {"b", 1, {8}, T_F32, 32, zeros, 32}};
    f = build(3, NULL, 0, 32, two, 2);
    expect_refused(&f, "overlap");
    free(f.p);
    /* a name twice */
    tspec dup[2] = {{"a", 1, {8}, T_F32, AUTO, zeros, 32}, {"a", 1, {8}, T_F32, AUTO, zeros, 32}};
    f = build(3, NULL, 0, 32, dup, 2);
    expect_refused(&f, "occurs twice");
    free(f.p);
    /* types longvk does not read: named, with the number */
    f = one_tensor((tspec){"blk.3.ffn", 1, {256}, T_Q6_K, 0, zeros, 210});
    expect_refused(&f, "tensor 'blk.3.ffn': ggml type 14 (Q6_K");
    free(f.p);
    f = one_tensor((tspec){"t", 1, {8}, 99, 0, zeros, 32});
    expect_refused(&f, "ggml type 99 (unknown");
    free(f.p);
    /* dims whose product overflows, n_dims > 4, a row of Q8_0 not whole blocks */
    f = one_tensor((tspec){"big", 3, {(uint64_t)1 << 32, (uint64_t)1 << 32, (uint64_t)1 << 32}, T_F32, 0, zeros, 0});
    expect_refused(&f, "overflows");
    free(f.p);
    f = one_tensor((tspec){"big", 2, {UINT64_MAX, 1}, T_F32, 0, zeros, 0});
    expect_refused(&f, "too large");
    free(f.p);
    f = one_tensor((tspec){"five", 5, {1, 1, 1, 1, 1}, T_F32, 0, zeros, 4});
    expect_refused(&f, "n_dims 5");
    free(f.p);
    f = one_tensor((tspec){"q", 2, {48, 2}, T_Q8_0, 0, zeros, 102});
    expect_refused(&f, "not whole blocks of 32");
    free(f.p);
    f = one_tensor((tspec){"", 1, {8}, T_F32, 0, zeros, 32});
    expect_refused(&f, "empty name");
    free(f.p);
}

/* ---- dtypes and conversions ------------------------------------------------------------- */

Test(gguf, dtype_table) {
    size_t bb;
    cr_assert(lv_dtype_block(LV_Q8_0, &bb) == 32 && bb == 34);
    cr_assert(lv_dtype_block(LV_Q4_K, &bb) == 256 && bb == 144);
    cr_assert(lv_dtype_block(LV_F16, &bb) == 1 && bb == 2);
    cr_assert_eq(lv_dtype_size(LV_Q8_0), 0, "no per-element size");
    cr_assert_eq(lv_dtype_bytes(LV_Q4_K, 512), 288);
    cr_assert_eq(lv_dtype_bytes(LV_Q4_K, 100), 0, "not whole blocks");
    cr_assert_eq(lv_dtype_bytes(LV_F32, -1), 0);
    cr_assert_eq(lv_dtype_bytes(LV_F32, INT64_MAX), 0, "overflow");
    cr_assert_str_eq(lv_dtype_name(LV_Q4_K), "q4_k");
    cr_assert_eq(lv_dequantize_row(LV_Q8_0, zeros, 33, (float[64]){0}), LV_ERR_INVALID);
    cr_assert_eq(lv_dequantize_row(LV_I32, zeros, 1, (float[1]){0}), LV_ERR_INVALID);
    /* safetensors has no quantized dtype: the writer says so */
    lv_weight q = {"q", LV_Q8_0, 1, {32}, zeros, 34};
    cr_assert_eq(lv_safetensors_write(ts_tmp("q.safetensors"), &q, 1, NULL, 0), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "q8_0"), "%s", lv_last_error());
}

/* Quantize then dequantize: |x - x'| <= d / 2 for every element, d the block's stored scale
 * (max|x| / 127 rounded up to f16, so d <= max|x| / 127 * (1 + 2^-10) + 2^-24, the last term
 * for scales in f16's subnormal range; and nothing clips). */
Test(gguf, q8_0_round_trip_error_bound) {
    enum { N = 32 * 64 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(N / 32 * 34);
    for (int i = 0; i < N; i++) {
        float scale = ldexpf(1.0f, (int)(i / 32 % 24) - 12); /* blocks from 2^-12 to 2^11 */
        x[i] = ((float)(next_rand() % 20001) / 10000.0f - 1.0f) * scale;
    }
    for (int i = 0; i < 32; i++) x[32 * 5 + i] = 0.0f; /* an all-zero block */
    for (int i = 0; i < 32; i++) x[32 * 7 + i] = 0.0f;
    x[32 * 7] = 1e-30f; /* a scale below f16's range */
    cr_assert_eq(lv_quantize_row_q8_0(x, N, q), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dequantize_row(LV_Q8_0, q, N, y), LV_OK);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float d = half((uint16_t)(q[34 * b] | (q[34 * b + 1] << 8)));
        cr_assert(d * 127.0f >= amax, "block %d: scale %g clips %g", b, d, amax);
        cr_assert(d <= amax / 127.0f * (1.0f + 1.0f / 1024.0f) + ldexpf(1.0f, -24), "block %d: scale %g", b, d);
        for (int i = 0; i < 32; i++) {
            float err = fabsf(x[32 * b + i] - y[32 * b + i]);
            cr_assert(err <= d / 2 * (1.0f + 1e-6f), "block %d element %d: %g -> %g, error %g > d/2 = %g", b, i,
                      x[32 * b + i], y[32 * b + i], err, d / 2);
        }
    }
    x[3] = INFINITY;
    cr_assert_eq(lv_quantize_row_q8_0(x, N, q), LV_ERR_INVALID);
    x[3] = 1e9f;
    cr_assert_eq(lv_quantize_row_q8_0(x, N, q), LV_ERR_INVALID, "a scale past f16's range");
    cr_assert_eq(lv_quantize_row_q8_0(x, 31, q), LV_ERR_INVALID);
    free(x), free(y), free(q);
}

/* q4_k: quantize then dequantize. Per sub-block j of 32 the value is d * sc_j * q - dmin * m_j,
 * q in 0..15; the quantizer rounds d, dmin, sc_j and m_j up, so the grid covers the sub-block
 * with at most one dmin to spare above: |x - x'| <= d * sc_j / 2 where q does not clip and
 * <= dmin where it clips at 15, so <= d * sc_j / 2 + dmin always (each term as stored). The
 * 6-bit scales and mins are unpacked here from ggml's layout (block_q4_K), independently of
 * engine/formats/quant.c. */
static void q4k_unpack(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63, *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

Test(gguf, q4_k_round_trip_error_bound) {
    enum { N = 256 * 24 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(N / 256 * 144);
    for (int i = 0; i < N; i++) {
        float scale = ldexpf(1.0f, (int)(i / 256 % 12) - 6); /* blocks from 2^-6 to 2^5 */
        float shift = (i / 256) % 3 == 1 ? 0.5f : 0.0f;      /* some sub-blocks all positive */
        x[i] = (((float)(next_rand() % 20001) / 10000.0f - 1.0f) * 0.5f + shift) * scale;
    }
    for (int i = 0; i < 256; i++) x[256 * 4 + i] = 0.0f; /* an all-zero block */
    cr_assert_eq(lv_quantize_row_q4_k(x, N, q), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dequantize_row(LV_Q4_K, q, N, y), LV_OK);
    double worst = 0;
    for (int b = 0; b < N / 256; b++) {
        const uint8_t *p = q + 144 * b;
        float d = half((uint16_t)(p[0] | (p[1] << 8))), dmin = half((uint16_t)(p[2] | (p[3] << 8)));
        for (int j = 0; j < 8; j++) {
            int sc, m;
            q4k_unpack(p + 4, j, &sc, &m);
            float bound = d * (float)sc / 2 + dmin;
            for (int i = 0; i < 32; i++) {
                int e = 256 * b + 32 * j + i;
                float err = fabsf(x[e] - y[e]);
                cr_assert(err <= bound * (1.0f + 1e-5f) + 1e-30f, "block %d sub-block %d element %d: %g -> %g, error %g > %g",
                          b, j, i, x[e], y[e], err, bound);
                if (bound > 0 && err / bound > worst) worst = err / bound;
            }
        }
    }
    cr_log_info("q4_k round trip: worst error / (d sc / 2 + dmin) %.3f", worst);
    for (int i = 0; i < 256; i++) cr_assert_eq(y[256 * 4 + i], 0.0f);
    x[3] = NAN;
    cr_assert_eq(lv_quantize_row_q4_k(x, N, q), LV_ERR_INVALID);
    cr_assert_eq(lv_quantize_row_q4_k(x, 255, q), LV_ERR_INVALID);
    free(x), free(y), free(q);
}

/* lv_gguf_write read back by lv_weights_open: names, dtypes, shapes (a 5-D tensor loses its
 * dims of 1: GGUF has at most 4), bytes and string metadata; a tensor GGUF cannot hold (a
 * q8_0 row not whole blocks) is refused before anything is written. */
Test(gguf, writer_round_trip) {
    float f[15];
    uint16_t h[6];
    uint8_t q8[2 * 2 * 34], q4[144];
    for (int i = 0; i < 15; i++) f[i] = (float)i - 7.5f;
    for (int i = 0; i < 6; i++) h[i] = (uint16_t)(0x3c00 + i);
    for (size_t i = 0; i < sizeof q8; i++) q8[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < sizeof q4; i++) q4[i] = (uint8_t)(i * 13);
    lv_weight t[5] = {
        {"a.f32", LV_F32, 2, {3, 5}, f, sizeof f},
        {"b.f16", LV_F16, 1, {6}, h, sizeof h},
        {"c.q8", LV_Q8_0, 2, {2, 64}, q8, sizeof q8},
        {"d.q4k", LV_Q4_K, 2, {1, 256}, q4, sizeof q4},
        {"e.5d", LV_F32, 5, {3, 1, 1, 5, 1}, f, sizeof f},
    };
    const char *meta[] = {"config", "{\"hidden\": 64}", "general.name", "tiny"};
    const char *path = ts_tmp("written.gguf");
    cr_assert_eq(lv_gguf_write(path, t, 5, meta, 2), LV_OK, "%s", lv_last_error());
    lv_weights *w;
    cr_assert_eq(lv_weights_open(path, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_count(w), 5);
    cr_assert_str_eq(lv_weights_metadata(w, "config"), "{\"hidden\": 64}");
    cr_assert_str_eq(lv_weights_metadata(w, "general.name"), "tiny");
    const int64_t want_shape[5][3] = {{3, 5}, {6}, {2, 64}, {1, 256}, {3, 5}};
    const int want_ndim[5] = {2, 1, 2, 2, 2};
    for (int i = 0; i < 5; i++) {
        const lv_weight *g = lv_weights_find(w, t[i].name);
        cr_assert_not_null(g, "%s", t[i].name);
        cr_assert_eq(g->dtype, t[i].dtype, "%s", t[i].name);
        cr_assert_eq(g->ndim, want_ndim[i], "%s: %d dims", t[i].name, g->ndim);
        for (int d = 0; d < g->ndim; d++) cr_assert_eq(g->shape[d], want_shape[i][d], "%s dim %d", t[i].name, d);
        cr_assert_eq(g->nbytes, t[i].nbytes);
        cr_assert(memcmp(g->data, t[i].data, t[i].nbytes) == 0, "%s: bytes differ", t[i].name);
        cr_assert_eq(((const uint8_t *)g->data - (const uint8_t *)lv_weights_at(w, 0)->data) % 32, 0);
    }
    lv_weights_close(w);
    lv_weight bad = {"short.q8", LV_Q8_0, 2, {4, 16}, q8, 68};
    const char *bad_path = ts_tmp("bad.gguf");
    cr_assert_eq(lv_gguf_write(bad_path, &bad, 1, NULL, 0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "short.q8"), "%s", lv_last_error());
    FILE *fp = fopen(bad_path, "rb");
    cr_assert_null(fp, "a refused file was written");
}
