/* Opening a model for generation: weights, the "longvk" card and the text table. */
#include <stdio.h>
#include <string.h>

#include "generate_internal.h"

lv_status lv_gen_model_open(const char *path, lv_gen_model *m) {
    memset(m, 0, sizeof *m);
    lv_status s;
    if (path) {
        snprintf(m->name, sizeof m->name, "%s", path);
        s = lv_sana_file_open(path, NULL, NULL, &m->file);
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
        int cap = lv_sana_file_config(m->file)->caption_channels;
        m->text_table = lv_weights_find(w, "text_embedding.weight");
        if (!m->text_table || m->text_table->dtype != LV_F32 || m->text_table->ndim != 2 ||
            m->text_table->shape[0] != m->card.vocab_size || m->text_table->shape[1] != cap)
            s = lv_error(LV_ERR_FORMAT, "%s: text_embedding.weight must be f32 [%d, %d] (vocabulary x "
                         "caption channels)", m->name, m->card.vocab_size, cap);
    }
    if (s != LV_OK) lv_gen_model_close(m);
    return s;
}

void lv_gen_model_close(lv_gen_model *m) {
    lv_model_card_free(&m->card);
    lv_sana_file_close(m->file);
    m->file = NULL;
}
