/* The SentencePiece tokenizer (longvk/tokenizer.h) on the tiny Gemma-style model of
 * assets/testdata/gemma2/: every id of tokenizer-cases.json (Python sentencepiece 0.1.97's
 * encode) exactly, with and without <bos>; decoding back; special-token text; truncation
 * of a 100 KB prompt; files that are not SentencePiece models. No device. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk.h"
#include "ts_files.h"

#define DIR LONGVK_ASSETS_DIR "/testdata/gemma2"
#define MODEL DIR "/tokenizer.model"

static lv_tokenizer *open_tok(void) {
    lv_tokenizer *t = NULL;
    cr_assert_eq(lv_tokenizer_open(MODEL, &t), LV_OK, "%s", lv_last_error());
    return t;
}

/* ids of `text`; returns the count (asserts it fits) */
static int encode(const lv_tokenizer *t, const char *text, unsigned flags, int32_t *ids, int max) {
    int n = -1, needed = -1;
    cr_assert_eq(lv_tokenizer_encode(t, text, strlen(text), flags, ids, max, &n, &needed), LV_OK, "%s",
                 lv_last_error());
    cr_assert_eq(n, needed, "'%s': %d of %d ids", text, n, needed);
    return n;
}

Test(tokenizer, special_ids_and_pieces) {
    lv_tokenizer *t = open_tok();
    cr_assert_eq(lv_tokenizer_vocab_size(t), 512);
    cr_assert_eq(lv_tokenizer_pad_id(t), 0);
    cr_assert_eq(lv_tokenizer_eos_id(t), 1);
    cr_assert_eq(lv_tokenizer_bos_id(t), 2);
    cr_assert_eq(lv_tokenizer_unk_id(t), 3);
    cr_assert_str_eq(lv_tokenizer_piece(t, 2), "<bos>");
    cr_assert_str_eq(lv_tokenizer_piece(t, 4), "<start_of_turn>");
    cr_assert_str_eq(lv_tokenizer_piece(t, 6), "<0x00>");
    cr_assert_null(lv_tokenizer_piece(t, 512));
    cr_assert_null(lv_tokenizer_piece(t, -1));
    cr_assert(strstr(lv_tokenizer_path(t), "tokenizer.model"));
    lv_tokenizer_close(t);
    /* a directory holding tokenizer.model */
    cr_assert_eq(lv_tokenizer_open(DIR, &t), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tokenizer_vocab_size(t), 512);
    lv_tokenizer_close(t);
    /* a diffusers pipeline folder: tokenizer/tokenizer.model */
    char *root = strdup(ts_tmp("tokenizer-pipeline"));
    mkdir(root, 0755);
    mkdir(ts_tmp("tokenizer-pipeline/tokenizer"), 0755);
    size_t len;
    uint8_t *model = ts_slurp(MODEL, &len);
    ts_spit(ts_tmp("tokenizer-pipeline/tokenizer/tokenizer.model"), model, len);
    cr_assert_eq(lv_tokenizer_open(root, &t), LV_OK, "%s", lv_last_error());
    cr_assert(strstr(lv_tokenizer_path(t), "tokenizer/tokenizer.model"), "%s", lv_tokenizer_path(t));
    lv_tokenizer_close(t);
    free(model);
    free(root);
}

Test(tokenizer, every_case_of_the_reference) {
    size_t len;
    char *json = (char *)ts_slurp(DIR "/tokenizer-cases.json", &len);
    cJSON *root = cJSON_ParseWithLength(json, len);
    cr_assert_not_null(root);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    cr_assert(cJSON_IsArray(cases));
    lv_tokenizer *t = open_tok();
    int n_cases = 0, n_ids = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n_cases++) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        int nw = cJSON_GetArraySize(want);
        int32_t ids[256];
        /* plain SentencePiece, then <bos> first (no <eos>), then Gemma's flags */
        for (int mode = 0; mode < 3; mode++) {
            unsigned flags = mode == 0 ? 0u : mode == 1 ? LV_TOKENIZE_BOS : LV_TOKENIZE_GEMMA;
            int bos = mode > 0;
            int n = encode(t, text, flags, ids, 256);
            cr_assert_eq(n, nw + bos, "'%s' (flags %u): %d ids, want %d", text, flags, n, nw + bos);
            if (bos) cr_assert_eq(ids[0], 2, "'%s': first id %d, want <bos> 2", text, ids[0]);
            int i = 0;
            for (const cJSON *e = want->child; e; e = e->next, i++)
                cr_assert_eq(ids[i + bos], e->valueint, "'%s' (flags %u): id %d is %d, want %d", text, flags, i,
                             ids[i + bos], e->valueint);
        }
        n_ids += nw;
        /* decoding gives the text back (identity normaliser, no dummy prefix, byte fallback) */
        int n = encode(t, text, LV_TOKENIZE_BOS, ids, 256);
        char back[1024];
        size_t blen = 0;
        cr_assert_eq(lv_tokenizer_decode(t, ids, n, back, sizeof back, &blen), LV_OK, "%s", lv_last_error());
        cr_assert_str_eq(back, text);
        cr_assert_eq(blen, strlen(text));
    }
    cr_assert_eq(n_cases, 17);
    cr_log_info("tokenizer: %d cases, %d ids, all equal", n_cases, n_ids);
    lv_tokenizer_close(t);
    cJSON_Delete(root);
    free(json);
}

/* Hugging Face tokenizers turn the text of a control piece into its id; SentencePiece alone
 * spells it out. Segments between are encoded on their own. */
Test(tokenizer, special_token_text) {
    lv_tokenizer *t = open_tok();
    int32_t a[64], b[64], c[64];
    int n = encode(t, "Hey<eos>. a<bos><pad>", LV_TOKENIZE_GEMMA, a, 64);
    int nh = encode(t, "Hey", 0, b, 64), nd = encode(t, ". a", 0, c, 64);
    cr_assert_eq(n, 1 + nh + 1 + nd + 2);
    cr_assert_eq(a[0], 2);
    for (int i = 0; i < nh; i++) cr_assert_eq(a[1 + i], b[i]);
    cr_assert_eq(a[1 + nh], 1);
    for (int i = 0; i < nd; i++) cr_assert_eq(a[2 + nh + i], c[i]);
    cr_assert_eq(a[2 + nh + nd], 2);
    cr_assert_eq(a[3 + nh + nd], 0);
    /* without LV_TOKENIZE_SPECIAL no control id appears */
    n = encode(t, "Hey<eos>. a<bos><pad>", LV_TOKENIZE_BOS, a, 64);
    for (int i = 1; i < n; i++) cr_assert(a[i] > 3, "id %d at %d", a[i], i);
    /* user-defined pieces are matched either way */
    n = encode(t, "<start_of_turn>", 0, a, 64);
    cr_assert(n == 1 && a[0] == 4);
    lv_tokenizer_close(t);
}

/* A 100 KB prompt: truncated on the right to the ids asked for, the full count reported. */
Test(tokenizer, long_prompt_is_truncated) {
    lv_tokenizer *t = open_tok();
    size_t len = 100 * 1024;
    char *text = malloc(len + 1);
    const char *words = "A red ball rolls slowly across the floor, 1234 frames at 60 fps. ";
    for (size_t i = 0; i < len; i++) text[i] = words[i % strlen(words)];
    text[len] = 0;
    int32_t *all = malloc(sizeof *all * 200000), head[300];
    int n_all = 0, needed = 0, n = 0;
    cr_assert_eq(lv_tokenizer_encode(t, text, len, LV_TOKENIZE_GEMMA, all, 200000, &n_all, &needed), LV_OK, "%s",
                 lv_last_error());
    cr_assert_eq(n_all, needed);
    cr_assert_gt(needed, 10000);
    cr_assert_eq(lv_tokenizer_encode(t, text, len, LV_TOKENIZE_GEMMA, head, 300, &n, &needed), LV_OK, "%s",
                 lv_last_error());
    cr_assert_eq(n, 300);
    cr_assert_eq(needed, n_all);
    cr_assert_eq(memcmp(head, all, sizeof head), 0);
    /* counting only */
    cr_assert_eq(lv_tokenizer_encode(t, text, len, LV_TOKENIZE_GEMMA, NULL, 0, &n, &needed), LV_OK);
    cr_assert(n == 0 && needed == n_all);
    cr_log_info("tokenizer: 100 KB prompt: %d tokens, truncated to 300 on request", n_all);
    free(all);
    free(text);
    /* beyond LV_TOKENIZER_MAX_TEXT: refused before any work */
    size_t big = LV_TOKENIZER_MAX_TEXT + 1;
    char *huge = calloc(big, 1);
    cr_assert_eq(lv_tokenizer_encode(t, huge, big, 0, NULL, 0, &n, &needed), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "longer than"), "%s", lv_last_error());
    free(huge);
    lv_tokenizer_close(t);
}

Test(tokenizer, bad_files_and_arguments) {
    lv_tokenizer *t = NULL;
    cr_assert_eq(lv_tokenizer_open(DIR "/no-such.model", &t), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "no-such.model") && strstr(lv_last_error(), "No such file"), "%s",
              lv_last_error());
    cr_assert_null(t);
    /* a safetensors file, a text file, an empty file: not SentencePiece models */
    const char *not_models[] = {DIR "/tiny.weights.safetensors", DIR "/tokenizer-corpus.txt"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(lv_tokenizer_open(not_models[i], &t), LV_ERR_FORMAT, "%s", not_models[i]);
        cr_assert(strstr(lv_last_error(), not_models[i]) && strstr(lv_last_error(), "not a SentencePiece model"),
                  "%s", lv_last_error());
    }
    const char *empty = ts_tmp("tokenizer-empty.model");
    ts_spit(empty, "", 0);
    cr_assert_eq(lv_tokenizer_open(empty, &t), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "not a SentencePiece model"), "%s", lv_last_error());
    /* a directory without tokenizer.model */
    cr_assert_eq(lv_tokenizer_open(LONGVK_ASSETS_DIR, &t), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "tokenizer.model"), "%s", lv_last_error());

    t = open_tok();
    int32_t ids[4];
    int n;
    cr_assert_eq(lv_tokenizer_encode(t, "a", 1, 0, NULL, 4, &n, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_tokenizer_encode(t, "a", 1, 0x80, ids, 4, &n, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_tokenizer_encode(t, NULL, 3, 0, ids, 4, &n, NULL), LV_ERR_INVALID);
    int32_t bad[2] = {2, 512};
    char buf[16];
    cr_assert_eq(lv_tokenizer_decode(t, bad, 2, buf, sizeof buf, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "512"), "%s", lv_last_error());
    lv_tokenizer_close(t);
}
