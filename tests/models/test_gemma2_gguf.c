/* Gemma-2 GGUF files as llama.cpp writes them (issue 56): the tiny model of
 * assets/testdata/gemma2/ written here, byte by byte from ggml's docs/gguf.md, under llama.cpp's
 * names (src/llama-arch.cpp, LLM_ARCH_GEMMA2) with its gemma2.* metadata and its norms stored
 * as w + 1 (convert_hf_to_gguf.py, Gemma2Model.modify_tensors), as typed values (u32, f32,
 * strings): the test's own writer, not longvk's (lv_gguf_write writes strings only).
 *
 * - f32: the same config and the same hidden states as the safetensors file, bit for bit;
 * - q8_0 / q4_K matrices (quantized here with lv_quantize_rows, q4_K where K is whole blocks of
 *   256): bit for bit the safetensors model quantized on load (weight_dtype LV_Q4_K), so within
 *   test_gemma2's q8_0 bound; a q8_0 embedding table: its rows read as the f32 table of the
 *   same values;
 * - a GGUF of another architecture, or without block_count: refused, naming the key. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/quant.h"
#include "longvk/text.h"
#include "longvk/tokenizer.h"
#include "test_support.h"
#include "ts_bytes.h"
#include "ts_files.h"

#define DIR LONGVK_ASSETS_DIR "/testdata/gemma2"
#define WEIGHTS DIR "/tiny.weights.safetensors"

/* ---- the writer (bytes through ts_bytes.h) ----------------------------------------------- */

/* metadata: value types of docs/gguf.md */
enum { V_U32 = 4, V_I32 = 5, V_F32 = 6, V_BOOL = 7, V_STRING = 8, V_ARRAY = 9 };

typedef struct kv {
    ts_bytes b;
    uint64_t n;
} kv;

static void kv_u32(kv *k, const char *key, uint32_t v) {
    ts_put_str(&k->b, key);
    ts_put_u32(&k->b, V_U32);
    ts_put_u32(&k->b, v);
    k->n++;
}
static void kv_f32(kv *k, const char *key, float v) {
    ts_put_str(&k->b, key);
    ts_put_u32(&k->b, V_F32);
    ts_put_f32(&k->b, v);
    k->n++;
}
static void kv_str(kv *k, const char *key, const char *v) {
    ts_put_str(&k->b, key);
    ts_put_u32(&k->b, V_STRING);
    ts_put_str(&k->b, v);
    k->n++;
}

static void kv_bool(kv *k, const char *key, int v) {
    ts_put_str(&k->b, key);
    ts_put_u32(&k->b, V_BOOL);
    uint8_t x = (uint8_t)v;
    ts_put(&k->b, &x, 1);
    k->n++;
}

/* ---- the tokenizer.model's pieces, read here from its protobuf wire format ------------------ */

typedef struct pieces {
    int n;
    char *text[1024];
    float score[1024];
    int32_t type[1024];
} pieces;

static uint64_t varint(const uint8_t *p, size_t *i, size_t end) {
    uint64_t v = 0;
    for (int s = 0; *i < end && s < 64; s += 7) {
        uint8_t c = p[(*i)++];
        v |= (uint64_t)(c & 0x7f) << s;
        if (c < 0x80) break;
    }
    return v;
}

/* skips a field of wire type w */
static void skip(const uint8_t *p, size_t *i, size_t end, int w) {
    if (w == 0) varint(p, i, end);
    else if (w == 1) *i += 8;
    else if (w == 5) *i += 4;
    else if (w == 2) *i += (size_t)varint(p, i, end);
    else cr_assert_fail("wire type %d", w);
}

/* ModelProto field 1: SentencePiece {1 piece, 2 score, 3 type (default 1)} */
static void read_pieces(pieces *ps) {
    size_t len;
    uint8_t *p = ts_slurp(DIR "/tokenizer.model", &len);
    ps->n = 0;
    for (size_t i = 0; i < len;) {
        uint64_t key = varint(p, &i, len);
        if (key != (1 << 3 | 2)) {
            skip(p, &i, len, (int)(key & 7));
            continue;
        }
        size_t end = i + (size_t)varint(p, &i, len);
        cr_assert(ps->n < 1024);
        int k = ps->n++;
        ps->type[k] = 1;
        ps->score[k] = 0;
        while (i < end) {
            uint64_t f = varint(p, &i, end);
            if (f == (1 << 3 | 2)) {
                size_t n = (size_t)varint(p, &i, end);
                ps->text[k] = calloc(1, n + 1);
                memcpy(ps->text[k], p + i, n);
                i += n;
            } else if (f == (2 << 3 | 5)) {
                memcpy(&ps->score[k], p + i, 4);
                i += 4;
            } else if (f == (3 << 3 | 0)) {
                ps->type[k] = (int32_t)varint(p, &i, end);
            } else {
                skip(p, &i, end, (int)(f & 7));
            }
        }
    }
    free(p);
}

/* tokenizer.ggml.* as llama.cpp's _set_vocab_sentencepiece writes them for Gemma-2 */
static void kv_tokenizer(kv *k, const pieces *ps) {
    kv_str(k, "tokenizer.ggml.model", "llama");
    ts_put_str(&k->b, "tokenizer.ggml.tokens");
    ts_put_u32(&k->b, V_ARRAY);
    ts_put_u32(&k->b, V_STRING);
    ts_put_u64(&k->b, (uint64_t)ps->n);
    for (int i = 0; i < ps->n; i++) ts_put_str(&k->b, ps->text[i]);
    k->n++;
    ts_put_str(&k->b, "tokenizer.ggml.scores");
    ts_put_u32(&k->b, V_ARRAY);
    ts_put_u32(&k->b, V_F32);
    ts_put_u64(&k->b, (uint64_t)ps->n);
    for (int i = 0; i < ps->n; i++) {
        uint32_t u;
        memcpy(&u, &ps->score[i], 4);
        ts_put_u32(&k->b, u);
    }
    k->n++;
    ts_put_str(&k->b, "tokenizer.ggml.token_type");
    ts_put_u32(&k->b, V_ARRAY);
    ts_put_u32(&k->b, V_I32);
    ts_put_u64(&k->b, (uint64_t)ps->n);
    for (int i = 0; i < ps->n; i++) ts_put_u32(&k->b, (uint32_t)ps->type[i]);
    k->n++;
    kv_u32(k, "tokenizer.ggml.unknown_token_id", 3);
    kv_bool(k, "tokenizer.ggml.add_bos_token", 1);
    kv_bool(k, "tokenizer.ggml.add_eos_token", 0);
    kv_bool(k, "tokenizer.ggml.add_space_prefix", 0);
}

/* a tensor: row-major shape (written as ggml's reversed ne), ggml type, bytes */
enum { T_F32 = 0, T_Q8_0 = 8, T_Q4_K = 12 };

typedef struct tensor {
    char name[64];
    int ndim;
    int64_t shape[2];
    uint32_t type;
    void *data; /* owned */
    size_t nbytes;
} tensor;

static void write_gguf(const char *path, const kv *k, const tensor *t, int n) {
    ts_bytes b = {0};
    ts_put(&b, "GGUF", 4);
    ts_put_u32(&b, 3);
    ts_put_u64(&b, (uint64_t)n);
    ts_put_u64(&b, k->n);
    ts_put(&b, k->b.p, k->b.n);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        ts_put_str(&b, t[i].name);
        ts_put_u32(&b, (uint32_t)t[i].ndim);
        for (int d = t[i].ndim - 1; d >= 0; d--) ts_put_u64(&b, (uint64_t)t[i].shape[d]);
        ts_put_u32(&b, t[i].type);
        ts_put_u64(&b, offset);
        offset = (offset + t[i].nbytes + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    ts_put(&b, zeros, (32 - b.n % 32) % 32);
    for (int i = 0; i < n; i++) {
        ts_put(&b, t[i].data, t[i].nbytes);
        ts_put(&b, zeros, (32 - t[i].nbytes % 32) % 32);
    }
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(b.p, 1, b.n, f), b.n);
    cr_assert_eq(fclose(f), 0);
    free(b.p);
}

/* ---- the tiny model under llama.cpp's names ---------------------------------------------- */

/* Hugging Face's name after "model.layers.N." -> llama.cpp's after "blk.N." */
static const char *const names[][2] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

enum { MATRICES_F32 = 0, MATRICES_QUANTIZED = 1 };
enum { EMBED_F32 = 0, EMBED_Q8_0 = 1, EMBED_Q8_0_VALUES = 2 /* f32 holding q8_0's values */ };

/* tensor `src` (f32) as `type` */
static tensor convert(const lv_weight *src, const char *name, uint32_t type) {
    tensor t = {.ndim = src->ndim, .type = type};
    snprintf(t.name, sizeof t.name, "%s", name);
    for (int d = 0; d < src->ndim; d++) t.shape[d] = src->shape[d];
    int64_t n = (int64_t)lv_weight_numel(src), k = src->shape[src->ndim - 1];
    if (type == T_F32) {
        t.nbytes = (size_t)n * 4;
        t.data = malloc(t.nbytes);
        memcpy(t.data, src->data, t.nbytes);
        return t;
    }
    lv_dtype d = type == T_Q8_0 ? LV_Q8_0 : LV_Q4_K;
    t.nbytes = (size_t)lv_dtype_bytes(d, n);
    t.data = malloc(t.nbytes);
    cr_assert_eq(lv_quantize_rows(d, src->data, LV_F32, n / k, k, t.data), LV_OK, "%s", lv_last_error());
    return t;
}

/* Writes the tiny model as llama.cpp would (norms + 1 in f32, as torch adds them); `arch`
 * and `block_count` (0: absent) for the refusals. */
static void write_tiny(const char *path, int matrices, int embed, const char *arch, uint32_t block_count,
                       const pieces *ps) {
    lv_weights *w = NULL;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    kv k = {0};
    kv_str(&k, "general.architecture", arch);
    kv_str(&k, "general.name", "tiny gemma2");
    kv_u32(&k, "gemma2.context_length", 8192);
    kv_u32(&k, "gemma2.embedding_length", 96);
    if (block_count) kv_u32(&k, "gemma2.block_count", block_count);
    kv_u32(&k, "gemma2.feed_forward_length", 256);
    kv_u32(&k, "gemma2.attention.head_count", 4);
    kv_u32(&k, "gemma2.attention.head_count_kv", 2);
    kv_f32(&k, "gemma2.attention.layer_norm_rms_epsilon", 1e-6f);
    kv_u32(&k, "gemma2.attention.key_length", 32);
    kv_u32(&k, "gemma2.attention.value_length", 32);
    kv_u32(&k, "general.file_type", matrices == MATRICES_F32 ? 0 : 7);
    kv_f32(&k, "gemma2.attn_logit_softcapping", 50.0f);
    kv_f32(&k, "gemma2.final_logit_softcapping", 30.0f);
    kv_u32(&k, "gemma2.attention.sliding_window", 4);
    kv_u32(&k, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&k, "tokenizer.ggml.eos_token_id", 1);
    kv_u32(&k, "tokenizer.ggml.padding_token_id", 0);
    if (ps) kv_tokenizer(&k, ps);
    tensor t[2 + 3 * 11];
    int n = 0;
    const lv_weight *e = lv_weights_find(w, "model.embed_tokens.weight");
    t[n++] = convert(e, "token_embd.weight", embed == EMBED_Q8_0 ? T_Q8_0 : T_F32);
    if (embed == EMBED_Q8_0_VALUES) {
        tensor q = convert(e, "q", T_Q8_0);
        cr_assert_eq(lv_dequantize_row(LV_Q8_0, q.data, (int64_t)lv_weight_numel(e), t[0].data), LV_OK);
        free(q.data);
    }
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 11; i++) {
            char hf[128], ll[64];
            snprintf(hf, sizeof hf, "model.layers.%d.%s", l, names[i][0]);
            snprintf(ll, sizeof ll, "blk.%d.%s", l, names[i][1]);
            const lv_weight *src = lv_weights_find(w, hf);
            cr_assert_not_null(src, "%s", hf);
            uint32_t type = T_F32;
            if (src->ndim == 2 && matrices == MATRICES_QUANTIZED) type = src->shape[1] % 256 ? T_Q8_0 : T_Q4_K;
            t[n] = convert(src, ll, type);
            if (src->ndim == 1)
                for (int64_t j = 0; j < src->shape[0]; j++) ((float *)t[n].data)[j] += 1.0f;
            n++;
        }
    t[n] = convert(lv_weights_find(w, "model.norm.weight"), "output_norm.weight", T_F32);
    for (int64_t j = 0; j < 96; j++) ((float *)t[n].data)[j] += 1.0f;
    n++;
    write_gguf(path, &k, t, n);
    for (int i = 0; i < n; i++) free(t[i].data);
    free(k.b.p);
    lv_weights_close(w);
}

/* ---- running both ------------------------------------------------------------------------ */

/* two inputs of the vectors (tokens of the tiny vocabulary, <bos> first) */
static const int32_t ids0[11] = {2, 17, 301, 45, 88, 9, 411, 230, 5, 77, 150};
static const int32_t ids1[7] = {2, 500, 3, 64, 128, 256, 1};

static void encode(lv_ctx *ctx, const lv_gemma2_file *f, int dtype, float *out0, float *out1) {
    lv_gemma2_options opt;
    lv_gemma2_options_default(&opt);
    opt.weight_dtype = dtype;
    lv_gemma2 *enc = NULL;
    cr_assert_eq(lv_gemma2_create(ctx, f, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_gemma2_encode(enc, ids0, 11, out0), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_gemma2_encode(enc, ids1, 7, out1), LV_OK, "%s", lv_last_error());
    lv_gemma2_destroy(enc);
}

static lv_gemma2_file *open_file(const char *path) {
    lv_gemma2_file *f = NULL;
    cr_assert_eq(lv_gemma2_file_open(path, NULL, &f), LV_OK, "%s", lv_last_error());
    return f;
}

Test(gemma2_gguf, llama_cpp_names_config_and_hidden_states) {
    lv_ctx *ctx = ts_ctx();
    lv_gemma2_file *st = open_file(WEIGHTS);
    static float a0[11 * 96], a1[7 * 96], b0[11 * 96], b1[7 * 96];

    /* f32: the safetensors model's config and bits */
    const char *path = ts_tmp("gemma2-tiny-f32.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "gemma2", 3, NULL);
    lv_gemma2_file *g = open_file(path);
    const lv_gemma2_config *c = lv_gemma2_file_config(g), *s = lv_gemma2_file_config(st);
    cr_assert(c->vocab_size == 512 && c->hidden_size == 96 && c->intermediate_size == 256 && c->num_layers == 3 &&
              c->num_heads == 4 && c->num_kv_heads == 2 && c->head_dim == 32 && c->sliding_window == 4 &&
              c->max_position_embeddings == 8192 && c->bos_token_id == 2);
    cr_assert(c->query_pre_attn_scalar == s->query_pre_attn_scalar && c->rope_theta == s->rope_theta &&
              (float)c->rms_norm_eps == (float)s->rms_norm_eps && c->attn_logit_softcapping == 50 &&
              c->final_logit_softcapping == 30);
    cr_assert(memcmp(c->sliding, s->sliding, sizeof c->sliding) == 0, "sliding layers: the even ones");
    cr_assert(strstr(lv_gemma2_file_config_source(g), "GGUF metadata"), "%s", lv_gemma2_file_config_source(g));
    cr_assert_eq(lv_gemma2_file_param_count(g), lv_gemma2_file_param_count(st));
    const lv_weight *q = lv_gemma2_file_tensor(g, "layers.1.self_attn.q_proj.weight");
    cr_assert(q && !strcmp(q->name, "blk.1.attn_q.weight"), "%s", q ? q->name : "none");
    const lv_weight *n = lv_gemma2_file_tensor(g, "layers.2.pre_feedforward_layernorm.weight");
    cr_assert(n && !strcmp(n->name, "blk.2.ffn_norm.weight"), "%s", n ? n->name : "none");
    encode(ctx, st, -1, a0, a1);
    encode(ctx, g, -1, b0, b1);
    cr_assert_eq(memcmp(a0, b0, sizeof a0), 0, "f32 GGUF: not the safetensors model's hidden states");
    cr_assert_eq(memcmp(a1, b1, sizeof a1), 0, "f32 GGUF: not the safetensors model's hidden states (row 1)");
    lv_gemma2_file_close(g);

    /* q8_0 / q4_K matrices stay as they are: the safetensors model quantized on load */
    path = ts_tmp("gemma2-tiny-q.gguf");
    write_tiny(path, MATRICES_QUANTIZED, EMBED_F32, "gemma2", 3, NULL);
    g = open_file(path);
    cr_assert_eq(lv_gemma2_file_dtype(g), LV_Q8_0);
    cr_assert_eq(lv_gemma2_file_tensor(g, "layers.0.mlp.down_proj.weight")->dtype, LV_Q4_K);
    encode(ctx, st, LV_Q4_K, a0, a1);
    encode(ctx, g, -1, b0, b1);
    cr_assert_eq(memcmp(a0, b0, sizeof a0), 0, "quantized GGUF: not the model quantized on load");
    cr_assert_eq(memcmp(a1, b1, sizeof a1), 0, "quantized GGUF: not the model quantized on load (row 1)");
    /* asking for q8_0 leaves a GGUF's blocks as they are; f32 dequantises them */
    encode(ctx, g, LV_Q8_0, a0, a1);
    cr_assert_eq(memcmp(a0, b0, sizeof a0), 0);
    encode(ctx, g, LV_F32, a0, a1);
    cr_assert(ts_nmse(a0, b0, 11 * 96) < 1e-10, "dequantised to f32: NMSE %.3g", ts_nmse(a0, b0, 11 * 96));
    lv_gemma2_file_close(g);

    /* longvk info describes it as Gemma-2 */
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, path);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    const char *want[] = {"Gemma-2 text encoder", "hidden 96, 3 layers, 4 heads (2 kv) x 32", "matmul weights q8_0",
                          "the GGUF metadata of"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(out, want[i]), "want '%s' in:\n%s", want[i], out);
    free(out);

    /* a q8_0 embedding table: its rows are those of the f32 table of the same values */
    path = ts_tmp("gemma2-tiny-qe.gguf");
    write_tiny(path, MATRICES_QUANTIZED, EMBED_Q8_0, "gemma2", 3, NULL);
    g = open_file(path);
    cr_assert_eq(lv_gemma2_file_tensor(g, "embed_tokens.weight")->dtype, LV_Q8_0);
    encode(ctx, g, -1, a0, a1);
    lv_gemma2_file_close(g);
    path = ts_tmp("gemma2-tiny-qev.gguf");
    write_tiny(path, MATRICES_QUANTIZED, EMBED_Q8_0_VALUES, "gemma2", 3, NULL);
    g = open_file(path);
    encode(ctx, g, -1, b0, b1);
    cr_assert_eq(memcmp(a0, b0, sizeof a0), 0, "a q8_0 table's rows differ from its values in f32");
    cr_assert_eq(memcmp(a1, b1, sizeof a1), 0);
    cr_assert(ts_nmse(a0, b0, 11 * 96) == 0);
    lv_gemma2_file_close(g);

    lv_gemma2_file_close(st);
    ts_ctx_done(ctx);
}

Test(gemma2_gguf, other_architectures_and_missing_keys_are_refused) {
    lv_gemma2_file *g = NULL;
    const char *path = ts_tmp("gemma2-tiny-llama.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "llama", 3, NULL);
    cr_assert_eq(lv_gemma2_file_open(path, NULL, &g), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "\"llama\"") && strstr(lv_last_error(), path), "%s", lv_last_error());
    path = ts_tmp("gemma2-tiny-nolayers.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "gemma2", 0, NULL);
    cr_assert_eq(lv_gemma2_file_open(path, NULL, &g), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "gemma2.block_count") && strstr(lv_last_error(), "missing"), "%s",
              lv_last_error());
    /* a config that disagrees with the tensors: named as for safetensors */
    path = ts_tmp("gemma2-tiny-2layers.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "gemma2", 2, NULL);
    cr_assert_eq(lv_gemma2_file_open(path, NULL, &g), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "blk.2.") && strstr(lv_last_error(), "GGUF metadata"), "%s", lv_last_error());
    cr_assert_null(g);
}

/* The tokenizer from the GGUF's metadata (no tokenizer.model beside it): every case of
 * tokenizer-cases.json gives the ids of the tokenizer.model the pieces were read from, with and
 * without <bos>; the special ids and the pieces are the same; lv_tokenizer_find names the GGUF;
 * the text stage (lv_text_encoder, what generate runs) on the GGUF alone gives the rows of the
 * safetensors file and its tokenizer.model. */
Test(gemma2_gguf, tokenizer_from_metadata) {
    static pieces ps;
    read_pieces(&ps);
    cr_assert_eq(ps.n, 512);
    const char *path = ts_tmp("gemma2-tiny-tok.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "gemma2", 3, &ps);
    char found[4096];
    cr_assert(lv_tokenizer_find(path, found, sizeof found), "no tokenizer found for %s", path);
    cr_assert_str_eq(found, path);
    lv_tokenizer *a = NULL, *b = NULL;
    cr_assert_eq(lv_tokenizer_open(DIR "/tokenizer.model", &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tokenizer_open(found, &b), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tokenizer_vocab_size(b), 512);
    cr_assert(lv_tokenizer_bos_id(b) == 2 && lv_tokenizer_eos_id(b) == 1 && lv_tokenizer_pad_id(b) == 0 &&
              lv_tokenizer_unk_id(b) == 3);
    for (int i = 0; i < 512; i++) cr_assert_str_eq(lv_tokenizer_piece(a, i), lv_tokenizer_piece(b, i));
    size_t len;
    char *json = (char *)ts_slurp(DIR "/tokenizer-cases.json", &len);
    cJSON *root = cJSON_ParseWithLength(json, len);
    cr_assert_not_null(root);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int count = 0;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        cr_assert(cJSON_IsString(text));
        for (unsigned flags = 0; flags <= LV_TOKENIZE_GEMMA; flags += LV_TOKENIZE_GEMMA) {
            int32_t x[512], y[512];
            int nx, ny;
            const char *t = text->valuestring;
            cr_assert_eq(lv_tokenizer_encode(a, t, strlen(t), flags, x, 512, &nx, NULL), LV_OK);
            cr_assert_eq(lv_tokenizer_encode(b, t, strlen(t), flags, y, 512, &ny, NULL), LV_OK, "%s", lv_last_error());
            cr_assert(nx == ny && !memcmp(x, y, (size_t)nx * 4), "'%s': %d ids from the GGUF, %d from the model", t,
                      ny, nx);
        }
        count++;
    }
    cr_assert_eq(count, 17);
    cJSON_Delete(root);
    free(json);
    lv_tokenizer_close(a);
    lv_tokenizer_close(b);
    /* generate's text stage on the GGUF alone (its tokenizer found in it) gives the rows and
     * masks of the safetensors file and its tokenizer.model, bit for bit, CFG's slot too */
    enum { ROWS = 300, CAP = 96 };
    static float y[2][2 * ROWS * CAP], mask[2][2 * ROWS];
    const char *encoders[2] = {WEIGHTS, path};
    lv_ctx *ctx = ts_ctx();
    for (int i = 0; i < 2; i++) {
        lv_text_gemma2_options go = {.encoder = encoders[i], .caption_channels = CAP, .motion_score = 10};
        lv_text_encoder *te = NULL;
        cr_assert_eq(lv_text_encoder_open_gemma2(&go, &te), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_text_encoder_set_prompts(te, "a red fox <eos> in the snow", true, NULL, NULL, NULL), LV_OK, "%s",
                     lv_last_error());
        cr_assert_eq(lv_text_encoder_encode(te, ctx, y[i], mask[i], NULL), LV_OK, "%s", lv_last_error());
        lv_text_encoder_close(te);
    }
    cr_assert_eq(memcmp(mask[0], mask[1], sizeof mask[0]), 0, "the masks differ");
    cr_assert_eq(memcmp(y[0], y[1], sizeof y[0]), 0, "the rows differ");
    ts_ctx_done(ctx);
    /* a GGUF without a tokenizer says what to give */
    path = ts_tmp("gemma2-tiny-f32.gguf");
    write_tiny(path, MATRICES_F32, EMBED_F32, "gemma2", 3, NULL);
    cr_assert_eq(lv_tokenizer_open(path, &b), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "tokenizer.ggml.model") && strstr(lv_last_error(), "tokenizer.model"), "%s",
              lv_last_error());
    for (int i = 0; i < ps.n; i++) free(ps.text[i]);
}
