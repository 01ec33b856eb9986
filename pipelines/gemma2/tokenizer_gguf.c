/* Gemma's SentencePiece tokenizer from a GGUF's metadata, when there is no tokenizer.model:
 * llama.cpp's converter (_set_vocab_sentencepiece) stores every piece of the model as
 * tokenizer.ggml.tokens, its score as tokenizer.ggml.scores and its SentencePiece type as
 * tokenizer.ggml.token_type (the same numbers: 1 normal, 2 unknown, 3 control, 4 user
 * defined, 5 unused, 6 byte), under tokenizer.ggml.model = "llama". Those are what encoding
 * reads; what the GGUF does not record is set as Gemma's tokenizer.model has it (the only
 * model read from llama.cpp's GGUF files here): BPE, byte fallback when there are byte pieces,
 * whitespace-only pieces allowed, digits split, the identity normalizer with
 * tokenizer.ggml.add_space_prefix (Gemma: false) and remove_extra_whitespaces (absent: false).
 * The result is serialized as a ModelProto (sentencepiece_model.proto) by hand: its wire
 * format is a few fields. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/weights.h"
#include "tokenizer_gguf.h"

int lv_tokenizer_is_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4];
    int yes = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    fclose(f);
    return yes;
}

/* ---- protobuf's wire format --------------------------------------------------------------- */

typedef struct pb {
    char *p;
    size_t n, cap;
    int failed;
} pb;

static void pb_put(pb *b, const void *d, size_t n) {
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2 + 256;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    uint8_t x[10];
    int n = 0;
    do {
        x[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_put(b, x, (size_t)n);
}

static void pb_int(pb *b, int field, int64_t v) { /* int32 / enum / bool: negative as 10 bytes */
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}

static void pb_bytes(pb *b, int field, const void *d, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_put(b, d, n);
}

static void pb_float(pb *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t x[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    pb_varint(b, (uint64_t)field << 3 | 5);
    pb_put(b, x, 4);
}

/* ---- the metadata -------------------------------------------------------------------------- */

/* item i of a GGUF number array of value type `type` */
static double number_at(const void *a, int type, uint64_t i) {
    switch (type) {
    case 0: return ((const uint8_t *)a)[i];
    case 1: return ((const int8_t *)a)[i];
    case 2: return ((const uint16_t *)a)[i];
    case 3: return ((const int16_t *)a)[i];
    case 4: return ((const uint32_t *)a)[i];
    case 5: return ((const int32_t *)a)[i];
    case 6: return ((const float *)a)[i];
    case 7: return ((const uint8_t *)a)[i];
    case 10: return (double)((const uint64_t *)a)[i];
    case 11: return (double)((const int64_t *)a)[i];
    case 12: return ((const double *)a)[i];
    default: return 0;
    }
}

static int flag(const lv_weights *w, const char *key, int otherwise) {
    int64_t v;
    return lv_weights_metadata_int(w, key, &v) ? v != 0 : otherwise;
}

static lv_status build(const lv_weights *w, const char *path, pb *out) {
    const char *model = lv_weights_metadata(w, "tokenizer.ggml.model");
    if (!model)
        return lv_error(LV_ERR_FORMAT, "%s: a GGUF without a tokenizer (no tokenizer.ggml.model): give the model's "
                        "tokenizer.model (--tokenizer FILE)", path);
    if (strcmp(model, "llama") != 0)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model is \"%s\", not \"llama\" (SentencePiece): give "
                        "the model's tokenizer.model (--tokenizer FILE)", path, model);
    uint64_t n = 0, ns = 0, nt = 0;
    int st = -1, tt = -1;
    const char *const *tokens = lv_weights_metadata_strings(w, "tokenizer.ggml.tokens", &n);
    const void *scores = lv_weights_metadata_array(w, "tokenizer.ggml.scores", &st, &ns);
    const void *types = lv_weights_metadata_array(w, "tokenizer.ggml.token_type", &tt, &nt);
    if (!tokens || !scores || !types || !n || ns != n || nt != n)
        return lv_error(LV_ERR_FORMAT, "%s: tokenizer.ggml.tokens, .scores and .token_type must be arrays of one "
                        "length (%llu, %llu, %llu%s)", path, (unsigned long long)n, (unsigned long long)ns,
                        (unsigned long long)nt, !tokens ? "; no tokens" : !scores ? "; no scores" : !types ? "; no "
                        "token types" : "");
    if (n > (1u << 24)) return lv_error(LV_ERR_LIMIT, "%s: %llu tokens", path, (unsigned long long)n);
    int special[4] = {-1, -1, -1, -1}; /* unk, bos, eos, pad */
    static const char *const id_keys[4] = {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id",
                                           "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"};
    for (int k = 0; k < 4; k++) {
        int64_t v;
        if (lv_weights_metadata_int(w, id_keys[k], &v) && v >= 0 && (uint64_t)v < n) special[k] = (int)v;
    }
    int bytes = 0;
    pb piece = {0};
    for (uint64_t i = 0; i < n && !out->failed; i++) {
        int type = (int)number_at(types, tt, i);
        if (type < 1 || type > 6)
            return lv_error(LV_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%llu] = %d is not a SentencePiece type "
                            "(1..6)", path, (unsigned long long)i, type);
        if (type == 2 && special[0] < 0) special[0] = (int)i;
        bytes |= type == 6;
        piece.n = 0;
        pb_bytes(&piece, 1, tokens[i], strlen(tokens[i]));
        pb_float(&piece, 2, (float)number_at(scores, st, i));
        if (type != 1) pb_int(&piece, 3, type);
        if (piece.failed) {
            out->failed = 1;
            break;
        }
        pb_bytes(out, 1, piece.p, piece.n);
    }
    free(piece.p);
    if (special[0] < 0)
        return lv_error(LV_ERR_FORMAT, "%s: no unknown piece (token_type 2, or tokenizer.ggml.unknown_token_id): "
                        "SentencePiece needs one", path);
    pb trainer = {0};
    pb_int(&trainer, 3, 2); /* model_type BPE */
    pb_int(&trainer, 4, (int64_t)n);
    pb_int(&trainer, 22, 1); /* split_by_whitespace */
    pb_int(&trainer, 25, 1); /* split_digits */
    pb_int(&trainer, 26, 1); /* allow_whitespace_only_pieces */
    pb_int(&trainer, 35, bytes); /* byte_fallback */
    for (int k = 0; k < 4; k++) pb_int(&trainer, 40 + k, special[k]); /* unk_id, bos_id, eos_id, pad_id */
    for (int k = 0; k < 4; k++)
        if (special[k] >= 0) pb_bytes(&trainer, 45 + k, tokens[special[k]], strlen(tokens[special[k]]));
    pb norm = {0};
    pb_bytes(&norm, 1, "identity", 8);
    pb_int(&norm, 3, flag(w, "tokenizer.ggml.add_space_prefix", 1));
    pb_int(&norm, 4, flag(w, "tokenizer.ggml.remove_extra_whitespaces", 0));
    pb_int(&norm, 5, 1); /* escape_whitespaces */
    if (!trainer.failed && !norm.failed) {
        pb_bytes(out, 2, trainer.p, trainer.n);
        pb_bytes(out, 3, norm.p, norm.n);
    }
    int failed = trainer.failed || norm.failed;
    free(trainer.p);
    free(norm.p);
    if (failed || out->failed) return lv_error(LV_ERR_NOMEM, "%s: out of memory building the tokenizer", path);
    return LV_OK;
}

lv_status lv_tokenizer_gguf_proto(const char *path, char **proto, size_t *len) {
    *proto = NULL;
    *len = 0;
    lv_weights *w = NULL;
    LV_TRY(lv_weights_open(path, &w));
    pb out = {0};
    lv_status s = build(w, path, &out);
    lv_weights_close(w);
    if (s != LV_OK) {
        free(out.p);
        return s;
    }
    *proto = out.p;
    *len = out.n;
    return LV_OK;
}
