/* The text a run conditions on: prompt embeddings from a file, or the prompt through a text
 * encoder (longvk/text.h): the model's word tables, or Gemma-2, which runs once the device
 * is up; kept in the file --text-embeds reads, and handed to the other processes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"
#include "longvk/npy.h"

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
        if ((s = lv_check_finite(path, names[slot][0], y->data, y->ndim, y->shape)) != LV_OK) break;
        memcpy(r->y + (size_t)slot * L * cap, y->data, (size_t)L * cap * sizeof(float));
        for (int i = 0; i < L; i++) r->mask[slot * L + i] = 1.0f;
        if (m) {
            if (m->dtype != LV_F32 || (int64_t)lv_weight_numel(m) != L)
                s = lv_error(LV_ERR_FORMAT, "%s: '%s' must be float32 with %d values", path, names[slot][1], L);
            else if ((s = lv_check_finite(path, names[slot][1], m->data, m->ndim, m->shape)) == LV_OK)
                memcpy(r->mask + (size_t)slot * L, m->data, (size_t)L * sizeof(float));
        }
    }
    lv_weights_close(w);
    return s;
}

/* text_weights_dtype is passed on as it is */
_Static_assert(LV_TEXT_WEIGHTS_BF16 == (int)LV_DIT_WEIGHTS_BF16 && LV_TEXT_WEIGHTS_Q8_0 == (int)LV_DIT_WEIGHTS_Q8_0 &&
                   LV_TEXT_WEIGHTS_Q4_K == (int)LV_DIT_WEIGHTS_Q4_K,
               "lv_text_weights and lv_dit_weights share their codes");

lv_status lv_gen_prepare_text(gen_run *r, void (*warn)(void *, const char *), void *user) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels;
    if (!r->use_encoder && r->o.text_weights_dtype != LV_DIT_WEIGHTS_AS_STORED && warn) {
        char msg[256];
        snprintf(msg, sizeof msg, "--text-weights-dtype %s changes nothing here: %s",
                 lv_dit_weights_name((lv_dit_weights)r->o.text_weights_dtype),
                 r->o.text_embeds_path ? "the prompt's rows come from --text-embeds, no text encoder runs"
                                       : "this model reads its prompt through word tables, not Gemma-2");
        warn(user, msg);
    }
    if (!r->use_encoder && (!r->m.card.pixel || r->o.text_embeds_path))
        return load_text_embeds(r, r->o.text_embeds_path, cap);
    /* a text encoder (longvk/text.h): the model's word tables, or Gemma-2, which runs on rank
     * 0 alone (lv_gen_encode_text once the device is up) and hands the rows on (share_text) */
    const lv_generate_options *o = &r->o;
    if (r->use_encoder) {
        lv_text_gemma2_options g = {
            .encoder = o->text_encoder_path, .tokenizer = o->tokenizer_path, .caption_channels = cap,
            .motion_score = o->motion_score == LV_GEN_MODEL_DEFAULT ? LV_SANA_VIDEO_MOTION_SCORE : o->motion_score,
            .softcap = o->text_softcap, .weights = (lv_text_weights)o->text_weights_dtype};
        if (r->root) LV_TRY(lv_text_encoder_open_gemma2(&g, &r->text));
        r->text_len = LV_SANA_PROMPT_ROWS;
    } else {
        lv_word_vocab vocab = lv_model_card_vocab(&r->m.card);
        LV_TRY(lv_text_encoder_open_words(&r->m.text, &vocab, &r->text));
        r->text_len = r->m.card.text_len;
    }
    /* tokenized now, before any device work: a bad text fails at once, and what the model
     * will not read is said */
    if (r->text && !r->nsw)
        LV_TRY(lv_text_encoder_set_prompts(r->text, o->prompt, r->uncond, o->negative_prompt, warn, user));
    r->y = calloc((size_t)2 * r->text_len * cap, sizeof *r->y);
    r->mask = calloc((size_t)2 * r->text_len, sizeof *r->mask);
    if (!r->y || !r->mask) return lv_error(LV_ERR_NOMEM, "out of host memory");
    if (r->nsw) { /* a schedule: every distinct text once (the word tables' now, Gemma-2's once the device is
                   * up), entry 0's rows in y / mask */
        if (!r->use_encoder) {
            lv_text_encoder_close(r->text);
            r->text = NULL;
        }
        return lv_gen_schedule_texts(r, warn, user);
    }
    if (r->use_encoder) return LV_OK;
    LV_TRY(lv_text_encoder_encode(r->text, NULL, r->y, r->mask, NULL)); /* the word tables: on the host, now */
    lv_text_encoder_close(r->text);
    r->text = NULL;
    return LV_OK;
}

/* The rows fed to the DiT, in the file format --text-embeds reads (text_embeds_out): y, mask
 * (and negative_y, negative_mask with CFG) of the prompt, a schedule's entry 0. With a
 * schedule every other distinct text t (1, 2, ...) follows as textT.y, textT.mask (and
 * textT.negative_y, textT.negative_mask), and the metadata "schedule_texts" lists each
 * entry's text, in entry order ("0 1 0"). */
lv_status lv_gen_save_text_embeds(const gen_run *r, const char *path) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    int texts = r->nsw ? r->ntexts : 1, per = r->uncond ? 4 : 2;
    lv_weight *t = calloc((size_t)texts * per, sizeof *t);
    char (*names)[48] = calloc((size_t)texts * per, sizeof *names);
    char *list = calloc((size_t)r->nsw * 8 + 1, 1);
    if (!t || !names || !list) {
        free(t);
        free(names);
        free(list);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    static const char *const base[4] = {"y", "mask", "negative_y", "negative_mask"};
    for (int k = 0; k < texts; k++) {
        const float *y = k ? r->texts_y + (size_t)k * 2 * L * cap : r->y;
        const float *m = k ? r->texts_mask + (size_t)k * 2 * L : r->mask;
        for (int j = 0; j < per; j++) {
            lv_weight *w = &t[k * per + j];
            if (k) snprintf(names[k * per + j], sizeof names[0], "text%d.%s", k, base[j]);
            else snprintf(names[j], sizeof names[0], "%s", base[j]);
            w->name = names[k * per + j];
            w->dtype = LV_F32;
            bool rows = j % 2 == 0, negative = j >= 2;
            w->ndim = rows ? 2 : 1;
            w->shape[0] = L;
            w->shape[1] = rows ? cap : 0;
            w->data = rows ? (const void *)(y + (negative ? (size_t)L * cap : 0)) : (const void *)(m + (negative ? L : 0));
            w->nbytes = (uint64_t)L * (rows ? cap : 1) * sizeof(float);
        }
    }
    for (int i = 0; i < r->nsw; i++) sprintf(list + strlen(list), i ? " %d" : "%d", r->sw[i].text);
    const char *meta[] = {"schedule_texts", list};
    lv_status s = lv_safetensors_write(path, t, texts * per, r->nsw ? meta : NULL, r->nsw ? 1 : 0);
    free(t);
    free(names);
    free(list);
    return s;
}

/* Sequence parallelism over processes: the Gemma-2 encoder runs on rank 0 alone (the others
 * need neither its files nor its memory), which hands the rows and masks on (with a schedule
 * every distinct text's: the others index them alike, the texts following from the options). */
lv_status lv_gen_share_text(gen_run *r) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels;
    if (r->nsw) { /* a schedule: every distinct text's rows */
        LV_TRY(lv_gen_share(r, r->texts_y, (uint64_t)r->ntexts * 2 * r->text_len * cap * sizeof *r->texts_y));
        LV_TRY(lv_gen_share(r, r->texts_mask, (uint64_t)r->ntexts * 2 * r->text_len * sizeof *r->texts_mask));
    }
    LV_TRY(lv_gen_share(r, r->y, (uint64_t)2 * r->text_len * cap * sizeof *r->y));
    return lv_gen_share(r, r->mask, (uint64_t)2 * r->text_len * sizeof *r->mask);
}

/* The Gemma-2 text encoder's pass: uploaded, run on the prompts and freed before the DiT is
 * created (lv_text_encoder_encode); progress says when it starts and what it took. `stop`
 * (may be NULL) is polled between its layers: a stop there ends the run before any block,
 * nothing written. Over several processes the others wait for the rows, so there the stop
 * is left to the agreement after the first block. */
lv_status lv_gen_encode_text(gen_run *r, lv_generate_callback progress, void *user, volatile sig_atomic_t *stop) {
    lv_generate_progress p = {.phase = LV_GEN_PHASE_TEXT_START, .device = lv_ctx_device(r->ctx)->name,
                              .text_tokens = lv_text_encoder_tokens(r->text), .text_prompts = r->nsw ? r->ntexts : 1};
    if (progress) progress(user, &p);
    double t0 = lv_gen_now();
    if (!lv_gen_several(r)) lv_text_encoder_set_stop(r->text, stop);
    /* a schedule: every distinct prompt through one upload */
    lv_status s = r->nsw ? lv_gen_schedule_encode(r, r->ctx, &r->text_memory)
                         : lv_text_encoder_encode(r->text, r->ctx, r->y, r->mask, &r->text_memory);
    if (s == LV_ERR_INTERRUPTED) {
        char why[1024]; /* lv_last_error's buffer is the one lv_error writes */
        snprintf(why, sizeof why, "%s", lv_last_error());
        return lv_error(LV_ERR_INTERRUPTED, "interrupted while encoding the prompt (%.1f s in; %s): nothing is made "
                        "yet and nothing was written", lv_gen_now() - t0, why);
    }
    LV_TRY(s);
    r->text_seconds = lv_gen_now() - t0;
    lv_text_encoder_close(r->text); /* the tokenizer and the mapped weights too */
    r->text = NULL;
    lv_ctx_memory_reset_peak(r->ctx); /* from here the peak is the DiT's */
    p.phase = LV_GEN_PHASE_TEXT_DONE;
    p.text_seconds = r->text_seconds;
    p.text_encoder_memory = r->text_memory;
    if (r->nsw) p.text_rows_bytes = lv_gen_schedule_rows_bytes(r);
    if (progress) progress(user, &p);
    return LV_OK;
}
