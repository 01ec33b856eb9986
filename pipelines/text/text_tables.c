/* The text encoder of pixel-space models with a vocabulary (the default model): the word
 * tokenizer, then word tables stored in the model file (see longvk/text.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/text.h"

static lv_status find_table(const lv_weights *w, const char *name, int vocab, int cap, bool required,
                            const lv_weight **out) {
    const lv_weight *t = lv_weights_find(w, name);
    *out = NULL;
    if (!t && !required) return LV_OK;
    if (!t || t->dtype != LV_F32 || t->ndim != 2 || t->shape[0] != vocab || t->shape[1] != cap)
        return lv_error(LV_ERR_FORMAT, "%s must be f32 [%d, %d] (vocabulary x caption channels)", name, vocab, cap);
    *out = t;
    return LV_OK;
}

lv_status lv_text_tables_open(const lv_weights *w, const lv_word_vocab *vocab, int caption_channels,
                              lv_text_tables *out) {
    if (!w || !vocab || !out)
        return lv_error(LV_ERR_INVALID, "lv_text_tables_open: %s is NULL",
                        !w ? "the weights" : !vocab ? "the vocabulary" : "out");
    memset(out, 0, sizeof *out);
    if (caption_channels < 1) return lv_error(LV_ERR_INVALID, "lv_text_tables_open: %d caption channels", caption_channels);
    out->caption_channels = caption_channels;
    LV_TRY(find_table(w, "text_embedding.weight", vocab->size, caption_channels, true, &out->word));
    LV_TRY(find_table(w, "text_prev_embedding.weight", vocab->size, caption_channels, false, &out->prev));
    LV_TRY(find_table(w, "text_next_embedding.weight", vocab->size, caption_channels, false, &out->next));
    return LV_OK;
}

static void add_row(float *y, const lv_weight *table, int id, int cap) {
    const float *row = (const float *)table->data + (size_t)id * cap;
    for (int c = 0; c < cap; c++) y[c] += row[c];
}

lv_status lv_text_tables_embed(const lv_text_tables *t, const lv_word_vocab *vocab, const char *prompt, float *y,
                               float *mask, char *unknown, size_t unknown_size) {
    if (!t || !vocab || !y || !mask)
        return lv_error(LV_ERR_INVALID, "lv_text_tables_embed: %s is NULL",
                        !t ? "the tables" : !vocab ? "the vocabulary" : !y ? "y" : "mask");
    if (!t->word) return lv_error(LV_ERR_INVALID, "lv_text_tables_embed: the tables are not open (lv_text_tables_open)");
    int L = vocab->text_len, cap = t->caption_channels;
    int *ids = malloc((size_t)L * sizeof *ids);
    if (!ids) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status s = lv_word_tokenize(vocab, prompt, ids, mask, unknown, unknown_size);
    if (s == LV_OK) {
        int n = 0; /* the valid tokens come first */
        while (n < L && mask[n] > 0.5f) n++;
        memset(y, 0, (size_t)L * cap * sizeof *y);
        for (int i = 0; i < n; i++) {
            float *yi = y + (size_t)i * cap;
            add_row(yi, t->word, ids[i], cap);
            if (t->prev && i > 0) add_row(yi, t->prev, ids[i - 1], cap);
            if (t->next && i < n - 1) add_row(yi, t->next, ids[i + 1], cap);
        }
    }
    free(ids);
    return s;
}
