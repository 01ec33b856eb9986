/* One interface for both text encoders (longvk/text.h): the word tables of a model with a
 * vocabulary, run here on the host, and Gemma-2 with SANA-Video's prompt handling
 * (gemma2_encoder.c), run on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

struct lv_text_encoder {
    bool gemma;
    lv_text_gemma2 g;            /* Gemma-2 */
    const lv_text_tables *tables; /* the word tables, and their vocabulary */
    lv_word_vocab vocab;
    float *y, *mask;             /* word tables: the prompts' rows, made when they are set */
    int slots;
};

lv_status lv_text_encoder_open_words(const lv_text_tables *tables, const lv_word_vocab *vocab, lv_text_encoder **out) {
    if (!tables || !vocab || !out)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_open_words: %s is NULL",
                        !tables ? "the tables" : !vocab ? "the vocabulary" : "out");
    *out = NULL;
    if (vocab->size < 1) return lv_error(LV_ERR_UNSUPPORTED, "this model has no vocabulary: give prompt embeddings");
    if (!tables->word)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_open_words: the tables are not open (lv_text_tables_open)");
    if (vocab->text_len < 1)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_open_words: the vocabulary's text_len is %d", vocab->text_len);
    lv_text_encoder *e = calloc(1, sizeof *e);
    if (!e) return lv_error(LV_ERR_NOMEM, "out of host memory");
    e->tables = tables;
    e->vocab = *vocab;
    const size_t L = (size_t)vocab->text_len, cap = (size_t)tables->caption_channels;
    e->y = malloc(2 * L * cap * sizeof *e->y);
    e->mask = malloc(2 * L * sizeof *e->mask);
    if (!e->y || !e->mask) {
        lv_text_encoder_close(e);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    *out = e;
    return LV_OK;
}

lv_status lv_text_encoder_open_gemma2(const lv_text_gemma2_options *opt, lv_text_encoder **out) {
    if (!opt || !opt->encoder || !out)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_open_gemma2: %s is NULL",
                        !opt ? "the options" : !opt->encoder ? "the encoder" : "out");
    *out = NULL;
    lv_text_encoder *e = calloc(1, sizeof *e);
    if (!e) return lv_error(LV_ERR_NOMEM, "out of host memory");
    e->gemma = true;
    lv_status s = lv_text_gemma2_open(&e->g, opt);
    if (s != LV_OK) {
        lv_text_encoder_close(e);
        return s;
    }
    *out = e;
    return LV_OK;
}

/* A prompt through the word tables into slot `slot`. What the tokenizer ignores (words not
 * in the vocabulary, digits, emoji, words past the model's text length) is said, in the
 * prompt's own characters. */
static lv_status embed_words(lv_text_encoder *e, int slot, const char *what, const char *prompt,
                             void (*warn)(void *, const char *), void *user) {
    const size_t L = (size_t)e->vocab.text_len, cap = (size_t)e->tables->caption_channels;
    char ignored[1024];
    LV_TRY(lv_text_tables_embed(e->tables, &e->vocab, prompt, e->y + slot * L * cap, e->mask + slot * L, ignored,
                                sizeof ignored));
    if (ignored[0] && warn) {
        char msg[1400];
        snprintf(msg, sizeof msg, "%s: %s%s", what, ignored,
                 strstr(ignored, "not in the vocabulary") ? " (`longvk info` lists the vocabulary)" : "");
        warn(user, msg);
    }
    return LV_OK;
}

lv_status lv_text_encoder_set_prompts(lv_text_encoder *e, const char *prompt, bool with_negative,
                                      const char *negative, void (*warn)(void *user, const char *message),
                                      void *user) {
    if (!e) return lv_error(LV_ERR_INVALID, "lv_text_encoder_set_prompts: the encoder is NULL");
    e->slots = 0;
    if (e->gemma) LV_TRY(lv_text_gemma2_set_prompts(&e->g, prompt, with_negative, negative, warn, user));
    else {
        LV_TRY(embed_words(e, 0, "prompt", prompt, warn, user));
        if (with_negative) LV_TRY(embed_words(e, 1, "negative prompt", negative ? negative : "", warn, user));
    }
    e->slots = with_negative ? 2 : 1;
    return LV_OK;
}

int lv_text_encoder_rows(const lv_text_encoder *e) {
    return !e ? 0 : e->gemma ? LV_SANA_PROMPT_ROWS : e->vocab.text_len;
}

static uint64_t gemma2_plan(const lv_text_encoder *e, uint64_t alignment, int weight_dtype) {
    if (!e || !e->gemma || weight_dtype == -2) return 0;
    int n = e->g.prompt.n_ids > e->g.negative.n_ids ? e->g.prompt.n_ids : e->g.negative.n_ids;
    lv_gemma2_memory m;
    if (n < 1 || lv_gemma2_memory_plan(lv_gemma2_file_config(e->g.file), lv_gemma2_file_dtype(e->g.file),
                                       weight_dtype, n, alignment, &m) != LV_OK)
        return 0;
    return m.weights + m.work;
}

uint64_t lv_text_encoder_memory_plan(const lv_text_encoder *e, uint64_t alignment) {
    return e ? gemma2_plan(e, alignment, e->g.weight_dtype) : 0;
}

uint64_t lv_text_encoder_memory_plan_as(const lv_text_encoder *e, uint64_t alignment, lv_text_weights weights) {
    return gemma2_plan(e, alignment, lv_text_gemma2_weight_dtype(weights));
}

int lv_text_encoder_tokens(const lv_text_encoder *e) {
    if (!e) return 0;
    if (e->gemma) return e->g.prompt.n_ids + e->g.negative.n_ids;
    int n = 0;
    for (int i = 0; i < e->slots * e->vocab.text_len; i++) n += e->mask[i] > 0.5f;
    return n;
}

bool lv_text_encoder_uses_device(const lv_text_encoder *e) { return e && e->gemma; }

lv_status lv_text_encoder_encode(lv_text_encoder *e, lv_ctx *ctx, float *y, float *mask, uint64_t *peak) {
    if (!e || !y || !mask)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_encode: %s is NULL", !e ? "the encoder" : !y ? "y" : "mask");
    if (!e->slots) return lv_error(LV_ERR_INVALID, "lv_text_encoder_encode: no prompt is set (lv_text_encoder_set_prompts)");
    if (peak) *peak = 0;
    if (e->gemma) {
        if (!ctx) return lv_error(LV_ERR_INVALID, "lv_text_encoder_encode: Gemma-2 needs a context");
        return lv_text_gemma2_encode(&e->g, ctx, y, mask, peak);
    }
    const size_t L = (size_t)e->vocab.text_len, cap = (size_t)e->tables->caption_channels;
    memcpy(y, e->y, (size_t)e->slots * L * cap * sizeof *y);
    memcpy(mask, e->mask, (size_t)e->slots * L * sizeof *mask);
    return LV_OK;
}

void lv_text_encoder_hold(lv_text_encoder *e) {
    if (e && e->gemma) e->g.hold = true;
}

void lv_text_encoder_release(lv_text_encoder *e) {
    if (e && e->gemma) lv_text_gemma2_release(&e->g);
}

void lv_text_encoder_set_stop(lv_text_encoder *e, volatile sig_atomic_t *stop) {
    if (e && e->gemma) e->g.stop = stop;
}

void lv_text_encoder_close(lv_text_encoder *e) {
    if (!e) return;
    if (e->gemma) lv_text_gemma2_close(&e->g);
    free(e->y);
    free(e->mask);
    free(e);
}
