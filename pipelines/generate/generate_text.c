/* The text a run conditions on: the prompt through the model's word tables, prompt
 * embeddings from a file, or the prompt tokenized for a Gemma-2 encoder that runs once the
 * device is up; kept in the file --text-embeds reads, and handed to the other processes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"

/* Text: the prompt through the card's tokenizer and the model's word tables. What the
 * tokenizer ignores (words not in the vocabulary, digits, emoji, words past the model's
 * text length) is said, in the prompt's own characters. */
static lv_status embed_prompt(const lv_gen_model *m, const char *what, const char *prompt, float *y, float *mask,
                              void (*warn)(void *, const char *), void *user) {
    char ignored[1024];
    LV_TRY(lv_text_tables_embed(&m->text, &m->card, prompt, y, mask, ignored, sizeof ignored));
    if (ignored[0] && warn) {
        char msg[1400];
        snprintf(msg, sizeof msg, "%s: %s%s", what, ignored,
                 strstr(ignored, "not in the vocabulary") ? " (`longvk info` lists the vocabulary)" : "");
        warn(user, msg);
    }
    return LV_OK;
}

/* Prompt embeddings from a file: y [L, caption] (or [1, L, caption]) and mask [L]; with
 * CFG also negative_y / negative_mask. */
static lv_status load_text_embeds(gen_run *r, const char *path, int cap) {
    lv_weights *w;
    LV_TRY(lv_weights_open(path, &w));
    lv_status s = LV_OK;
    const char *names[2][2] = {{"y", "mask"}, {"negative_y", "negative_mask"}};
    int slots = r->uncond ? 2 : 1;
    for (int slot = 0; s == LV_OK && slot < slots; slot++) {
        const lv_weight *y = lv_weights_find(w, names[slot][0]), *m = lv_weights_find(w, names[slot][1]);
        if (!y || y->dtype != LV_F32 || y->ndim < 2 || y->shape[y->ndim - 1] != cap) {
            s = lv_error(LV_ERR_FORMAT, "%s: needs float32 '%s' [L, %d]%s", path, names[slot][0], cap,
                         slot ? " for --cfg-scale" : "");
            break;
        }
        int L = (int)y->shape[y->ndim - 2];
        if (slot == 0) {
            r->text_len = L;
            r->y = calloc((size_t)2 * L * cap, sizeof *r->y);
            r->mask = calloc((size_t)2 * L, sizeof *r->mask);
            if (!r->y || !r->mask) {
                s = lv_error(LV_ERR_NOMEM, "out of host memory");
                break;
            }
        } else if (L != r->text_len) {
            s = lv_error(LV_ERR_FORMAT, "%s: 'negative_y' has %d tokens, 'y' %d", path, L, r->text_len);
            break;
        }
        memcpy(r->y + (size_t)slot * L * cap, y->data, (size_t)L * cap * sizeof(float));
        for (int i = 0; i < L; i++) r->mask[slot * L + i] = 1.0f;
        if (m) {
            if (m->dtype != LV_F32 || (int64_t)lv_weight_numel(m) != L)
                s = lv_error(LV_ERR_FORMAT, "%s: '%s' must be float32 with %d values", path, names[slot][1], L);
            else
                memcpy(r->mask + (size_t)slot * L, m->data, (size_t)L * sizeof(float));
        }
    }
    lv_weights_close(w);
    return s;
}

lv_status lv_gen_prepare_text(gen_run *r, void (*warn)(void *, const char *), void *user) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels;
    /* tokenized now; encoded once the device is up (encode_text); with processes of a
     * sequence-parallel run, by rank 0 alone, which hands the rows on (share_text) */
    if (r->use_encoder) {
        const lv_generate_options *o = &r->o;
        const char *negative = !r->uncond ? NULL : o->negative_prompt ? o->negative_prompt
                                                                      : lv_sana_video_negative_prompt;
        int motion = o->motion_score == LV_GEN_MODEL_DEFAULT ? LV_SANA_VIDEO_MOTION_SCORE : o->motion_score;
        if (r->root)
            LV_TRY(lv_gen_text_open(&r->text, o->text_encoder_path, o->tokenizer_path, o->prompt, negative, motion,
                                    cap, warn, user));
        r->text_len = LV_SANA_PROMPT_ROWS;
        r->y = calloc((size_t)2 * r->text_len * cap, sizeof *r->y);
        r->mask = calloc((size_t)2 * r->text_len, sizeof *r->mask);
        return r->y && r->mask ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (!r->m.card.pixel || r->o.text_embeds_path) return load_text_embeds(r, r->o.text_embeds_path, cap);
    r->text_len = r->m.card.text_len;
    r->y = malloc((size_t)2 * r->text_len * cap * sizeof *r->y);
    r->mask = malloc((size_t)2 * r->text_len * sizeof *r->mask);
    if (!r->y || !r->mask) return lv_error(LV_ERR_NOMEM, "out of host memory");
    LV_TRY(embed_prompt(&r->m, "prompt", r->o.prompt, r->y, r->mask, warn, user));
    if (r->uncond)
        LV_TRY(embed_prompt(&r->m, "negative prompt", r->o.negative_prompt ? r->o.negative_prompt : "",
                            r->y + (size_t)r->text_len * cap, r->mask + r->text_len, warn, user));
    return LV_OK;
}

/* The rows fed to the DiT, in the file format --text-embeds reads (text_embeds_out). */
lv_status lv_gen_save_text_embeds(const gen_run *r, const char *path) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    lv_weight t[4] = {
        {.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {L, cap}, .data = r->y,
         .nbytes = (uint64_t)L * cap * sizeof(float)},
        {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {L}, .data = r->mask, .nbytes = (uint64_t)L * sizeof(float)},
        {.name = "negative_y", .dtype = LV_F32, .ndim = 2, .shape = {L, cap}, .data = r->y + (size_t)L * cap,
         .nbytes = (uint64_t)L * cap * sizeof(float)},
        {.name = "negative_mask", .dtype = LV_F32, .ndim = 1, .shape = {L}, .data = r->mask + L,
         .nbytes = (uint64_t)L * sizeof(float)}};
    return lv_safetensors_write(path, t, r->uncond ? 4 : 2, NULL, 0);
}

/* Sequence parallelism over processes: the Gemma-2 encoder runs on rank 0 alone (the others
 * need neither its files nor its memory), which hands the rows and masks on. */
lv_status lv_gen_share_text(gen_run *r) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels;
    LV_TRY(lv_gen_share(r, r->y, (uint64_t)2 * r->text_len * cap * sizeof *r->y));
    return lv_gen_share(r, r->mask, (uint64_t)2 * r->text_len * sizeof *r->mask);
}

/* The text encoder's pass: uploaded, run on the prompts and freed before the DiT is
 * created (see gen_text.c); progress says when it starts and what it took. */
lv_status lv_gen_encode_text(gen_run *r, lv_generate_callback progress, void *user) {
    lv_generate_progress p = {.phase = LV_GEN_PHASE_TEXT_START, .device = lv_ctx_device(r->ctx)->name,
                              .text_tokens = r->text.prompt.n_ids + r->text.negative.n_ids};
    if (progress) progress(user, &p);
    double t0 = lv_gen_now();
    LV_TRY(lv_gen_text_encode(&r->text, r->ctx, r->o.text_softcap, r->y, r->mask, &r->text_memory));
    r->text_seconds = lv_gen_now() - t0;
    lv_gen_text_close(&r->text); /* the tokenizer and the mapped weights too */
    lv_ctx_memory_reset_peak(r->ctx); /* from here the peak is the DiT's */
    p.phase = LV_GEN_PHASE_TEXT_DONE;
    p.text_seconds = r->text_seconds;
    p.text_encoder_memory = r->text_memory;
    if (progress) progress(user, &p);
    return LV_OK;
}
