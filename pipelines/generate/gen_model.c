/* Opening a model for generation: weights, the "longvk" card and the text tables. */
#include <stdio.h>
#include <string.h>

#include "generate_internal.h"

lv_status lv_gen_model_open(const char *path, lv_gen_model *m) {
    memset(m, 0, sizeof *m);
    lv_status s;
    if (path) {
        snprintf(m->name, sizeof m->name, "%s", path);
        const char *dit = path;
        if (lv_is_pipeline_dir(path)) { /* a diffusers pipeline folder: its transformer/ */
            LV_TRY(lv_pipeline_dir_open(path, &m->parts));
            m->pipeline = true;
            dit = m->parts.transformer;
        }
        s = lv_sana_file_open(dit, NULL, NULL, &m->file);
    } else {
        snprintf(m->name, sizeof m->name, "the default model");
        s = lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(),
                                     "default model", &m->file);
    }
    if (s != LV_OK) return s;
    const lv_weights *w = lv_sana_file_weights(m->file);
    const char *card = lv_weights_metadata(w, "longvk");
    if (card) s = lv_model_card_parse(card, m->name, &m->card);
    else lv_model_card_longsana(&m->card); /* a released latent-space model */
    if (s == LV_OK && m->card.vocab_size) {
        lv_word_vocab vocab = lv_model_card_vocab(&m->card);
        s = lv_text_tables_open(w, &vocab, lv_sana_file_config(m->file)->caption_channels, &m->text);
        if (s != LV_OK) s = lv_error_prefix(s, "%s", m->name);
    }
    if (s != LV_OK) lv_gen_model_close(m);
    return s;
}

void lv_gen_model_close(lv_gen_model *m) {
    lv_model_card_free(&m->card);
    lv_sana_file_close(m->file);
    m->file = NULL;
}

lv_status lv_model_card_of(const char *path, lv_model_card *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_model_card_of: out is NULL");
    lv_gen_model m;
    lv_status s = lv_gen_model_open(path, &m);
    if (s != LV_OK) {
        memset(out, 0, sizeof *out);
        return s;
    }
    *out = m.card; /* the card owns its vocabulary: hand it over */
    memset(&m.card, 0, sizeof m.card);
    lv_gen_model_close(&m);
    return LV_OK;
}
