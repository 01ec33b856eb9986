/* The text stage's one interface (longvk/text.h, lv_text_encoder) over both encoders: what
 * it gives is, bit for bit, what each encoder's own functions give (the default model's word
 * tables: lv_text_tables_embed; Gemma-2: lv_sana_prompt_build and lv_sana_prompt_encode on
 * the tiny model of assets/testdata/gemma2), with the warnings and errors it says. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/gemma2.h"
#include "longvk/generate.h"
#include "longvk/sana.h"
#include "longvk/sana_prompt.h"
#include "longvk/text.h"
#include "test_support.h"

#define GEMMA LONGVK_ASSETS_DIR "/testdata/gemma2"

typedef struct warnings {
    int n;
    char last[2048];
} warnings;

static void on_warn(void *user, const char *message) {
    warnings *w = user;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", message);
}

Test(text_encoder, word_tables_through_the_interface) {
    lv_sana_file *model;
    cr_assert_eq(lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default model", &model),
                 LV_OK, "%s", lv_last_error());
    lv_model_card card;
    cr_assert_eq(lv_model_card_parse(lv_weights_metadata(lv_sana_file_weights(model), "longvk"), "default model", &card),
                 LV_OK, "%s", lv_last_error());
    const int cap = lv_sana_file_config(model)->caption_channels, L = card.text_len;
    lv_word_vocab vocab = lv_model_card_vocab(&card);
    lv_text_tables tables;
    cr_assert_eq(lv_text_tables_open(lv_sana_file_weights(model), &vocab, cap, &tables), LV_OK, "%s", lv_last_error());
    lv_text_encoder *e;
    cr_assert_eq(lv_text_encoder_open_words(&tables, &vocab, &e), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_text_encoder_rows(e), L);
    cr_assert(!lv_text_encoder_uses_device(e));
    float *y = calloc((size_t)2 * L * cap, sizeof *y), *mask = calloc((size_t)2 * L, sizeof *mask);
    float *want_y = calloc((size_t)2 * L * cap, sizeof *y), *want_mask = calloc((size_t)2 * L, sizeof *mask);
    cr_assert_eq(lv_text_encoder_encode(e, NULL, y, mask, NULL), LV_ERR_INVALID, "no prompt set yet");
    warnings w = {0};
    const char *prompt = "two red balls bouncing on a blue zebra", *negative = "a green square";
    cr_assert_eq(lv_text_encoder_set_prompts(e, prompt, true, negative, on_warn, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(w.n, 1, "one warning, the prompt's: the negative prompt's words are all known (%s)", w.last);
    cr_assert(strstr(w.last, "prompt: ignored (not in the vocabulary): ") == w.last && strstr(w.last, "zebra") &&
                  strstr(w.last, " (`longvk info` lists the vocabulary)"), "%s", w.last);
    uint64_t peak = 7;
    cr_assert_eq(lv_text_encoder_encode(e, NULL, y, mask, &peak), LV_OK, "%s", lv_last_error());
    cr_assert_eq(peak, 0u);
    cr_assert_eq(lv_text_tables_embed(&tables, &vocab, prompt, want_y, want_mask, NULL, 0), LV_OK);
    cr_assert_eq(lv_text_tables_embed(&tables, &vocab, negative, want_y + (size_t)L * cap, want_mask + L, NULL, 0), LV_OK);
    cr_assert(memcmp(y, want_y, (size_t)2 * L * cap * sizeof *y) == 0, "the rows are not lv_text_tables_embed's");
    cr_assert(memcmp(mask, want_mask, (size_t)2 * L * sizeof *mask) == 0, "the masks are not lv_text_tables_embed's");
    int tokens = 0;
    for (int i = 0; i < 2 * L; i++) tokens += want_mask[i] == 1.0f;
    cr_assert_eq(lv_text_encoder_tokens(e), tokens);
    /* without a negative prompt: slot 1 is left as it was */
    memset(y, 0, (size_t)2 * L * cap * sizeof *y);
    cr_assert_eq(lv_text_encoder_set_prompts(e, prompt, false, NULL, NULL, NULL), LV_OK);
    cr_assert_eq(lv_text_encoder_encode(e, NULL, y, mask, NULL), LV_OK);
    for (size_t i = (size_t)L * cap; i < (size_t)2 * L * cap; i++) cr_assert_eq(y[i], 0.0f);
    lv_text_encoder_close(e);

    /* a model without a vocabulary, NULL arguments */
    lv_word_vocab none = {.text_len = L};
    cr_assert_eq(lv_text_encoder_open_words(&tables, &none, &e), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "no vocabulary"), "%s", lv_last_error());
    lv_text_tables closed = {0};
    cr_assert_eq(lv_text_encoder_open_words(&closed, &vocab, &e), LV_ERR_INVALID);
    cr_assert_eq(lv_text_encoder_open_words(NULL, &vocab, &e), LV_ERR_INVALID);
    cr_assert_eq(lv_text_encoder_open_words(&tables, NULL, &e), LV_ERR_INVALID);
    cr_assert_eq(lv_text_encoder_open_words(&tables, &vocab, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_text_encoder_set_prompts(NULL, "x", false, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_text_encoder_encode(NULL, NULL, y, mask, NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_word_tokenize(NULL, "x", NULL, NULL, NULL, 0), LV_ERR_INVALID);
    lv_text_encoder_close(NULL);
    free(y);
    free(mask);
    free(want_y);
    free(want_mask);
    lv_model_card_free(&card);
    lv_sana_file_close(model);
}

Test(text_encoder, gemma2_through_the_interface, .timeout = 300) {
    const int H = 96, ROWS = LV_SANA_PROMPT_ROWS;
    lv_text_gemma2_options go = {.encoder = GEMMA "/tiny.weights.safetensors", .caption_channels = 97,
                                 .motion_score = LV_SANA_VIDEO_MOTION_SCORE};
    lv_text_encoder *e;
    cr_assert_eq(lv_text_encoder_open_gemma2(&go, &e), LV_ERR_INVALID, "the DiT's caption channels are not 96");
    cr_assert(strstr(lv_last_error(), "hidden size 96"), "%s", lv_last_error());
    go.caption_channels = H;
    cr_assert_eq(lv_text_encoder_open_gemma2(&go, &e), LV_OK, "%s", lv_last_error()); /* the tokenizer found beside */
    cr_assert(lv_text_encoder_uses_device(e));
    cr_assert_eq(lv_text_encoder_rows(e), ROWS);
    cr_assert_eq(lv_text_encoder_set_prompts(e, "A cat sleeping", true, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    float *y = calloc((size_t)2 * ROWS * H, sizeof *y), *mask = calloc(2 * ROWS, sizeof *mask);
    float *want_y = calloc((size_t)2 * ROWS * H, sizeof *y), *want_mask = calloc(2 * ROWS, sizeof *mask);
    cr_assert_eq(lv_text_encoder_encode(e, NULL, y, mask, NULL), LV_ERR_INVALID, "Gemma-2 needs a context");
    uint64_t peak = 0;
    cr_assert_eq(lv_text_encoder_encode(e, ctx, y, mask, &peak), LV_OK, "%s", lv_last_error());
    cr_assert_gt(peak, 0u);

    /* the same by hand: SANA-Video's template, then the encoder */
    lv_tokenizer *tok;
    cr_assert_eq(lv_tokenizer_open(GEMMA "/tokenizer.model", &tok), LV_OK, "%s", lv_last_error());
    lv_sana_prompt p, q;
    lv_sana_prompt_options po;
    lv_sana_prompt_options_default(&po);
    cr_assert_eq(lv_sana_prompt_build(tok, "A cat sleeping", &po, &p), LV_OK, "%s", lv_last_error());
    po.negative = 1;
    po.motion_score = 0;
    cr_assert_eq(lv_sana_prompt_build(tok, lv_sana_video_negative_prompt, &po, &q), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_text_encoder_tokens(e), p.n_ids + q.n_ids);
    lv_gemma2_file *f;
    cr_assert_eq(lv_gemma2_file_open(go.encoder, NULL, &f), LV_OK, "%s", lv_last_error());
    lv_gemma2 *enc;
    cr_assert_eq(lv_gemma2_create(ctx, f, NULL, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_sana_prompt_encode(enc, &p, want_y, want_mask), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_sana_prompt_encode(enc, &q, want_y + (size_t)ROWS * H, want_mask + ROWS), LV_OK, "%s",
                 lv_last_error());
    cr_assert(memcmp(y, want_y, (size_t)2 * ROWS * H * sizeof *y) == 0, "the rows are not the template's encoded");
    cr_assert(memcmp(mask, want_mask, (size_t)2 * ROWS * sizeof *mask) == 0, "the masks are not the template's");
    lv_gemma2_destroy(enc);
    lv_gemma2_file_close(f);
    lv_sana_prompt_free(&p);
    lv_sana_prompt_free(&q);
    lv_tokenizer_close(tok);
    lv_text_encoder_close(e);
    ts_ctx_done(ctx);
    free(y);
    free(mask);
    free(want_y);
    free(want_mask);
    cr_assert_eq(lv_text_encoder_open_gemma2(NULL, &e), LV_ERR_INVALID);
}
