/* The "longvk" metadata of a model file (see longvk/generate.h); its vocabulary goes to the
 * word tokenizer of pipelines/text (lv_model_card_tokenize). */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dit.h"
#include "longvk/generate.h"
#include "longvk/json.h"

void lv_model_card_free(lv_model_card *card) {
    if (!card) return;
    for (int i = 0; i < card->vocab_size; i++) free(card->vocab[i]);
    memset(card, 0, sizeof *card);
}

/* The card's keys in messages: SOURCE: "key" (`where` "\"first_block\".": a key of that object) */
static lv_json_obj card_obj(const cJSON *o, const char *source, const char *where) {
    return (lv_json_obj){.obj = o, .source = source,
                         .key_format = *where ? "\"first_block\".\"%s\"" : "\"%s\"", .status = LV_ERR_FORMAT};
}

/* required: absent is an error too */
static lv_status get_int(const cJSON *o, const char *key, const char *source, int lo, int hi, int *out) {
    lv_json_obj card = card_obj(o, source, "");
    return lv_json_int(&card, key, lo, hi, true, out, NULL);
}

/* A list of 1 to LV_CARD_MAX_STEPS timesteps in [0, 1000]. */
static lv_status get_timesteps(const cJSON *o, const char *key, const char *source, float *out, int *steps) {
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) < 1 || cJSON_GetArraySize(ts) > LV_CARD_MAX_STEPS)
        return lv_error(LV_ERR_FORMAT, "%s: \"%s\" must list 1 to %d timesteps", source, key, LV_CARD_MAX_STEPS);
    *steps = cJSON_GetArraySize(ts);
    for (int i = 0; i < *steps; i++) {
        const cJSON *t = cJSON_GetArrayItem(ts, i);
        if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 1000)
            return lv_error(LV_ERR_FORMAT, "%s: \"%s\"[%d] is not a timestep in [0, 1000]", source, key, i);
        out[i] = (float)t->valuedouble;
    }
    return LV_OK;
}

/* "sampler": "renoise" or "euler"; absent: *out is left as it is. */
static lv_status get_sampler(const cJSON *o, const char *source, lv_chunk_sampler *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "sampler");
    if (!v) return LV_OK;
    if (cJSON_IsString(v) && strcmp(v->valuestring, "renoise") == 0) *out = LV_CHUNK_RENOISE;
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "euler") == 0) *out = LV_CHUNK_EULER;
    else return lv_error(LV_ERR_FORMAT, "%s: \"sampler\" must be \"renoise\" or \"euler\"", source);
    return LV_OK;
}

/* "cfg_last_steps": an integer in [0, steps] (0: CFG at every step); absent: 0. `where`
 * names the object in messages. */
static lv_status get_cfg_last_steps(const cJSON *o, const char *source, const char *where, lv_block_recipe *r) {
    lv_json_obj card = card_obj(o, source, where);
    r->cfg_last_steps = 0;
    if (lv_json_int(&card, "cfg_last_steps", 0, r->steps, false, &r->cfg_last_steps, NULL) != LV_OK)
        return lv_json_error(&card, "cfg_last_steps", "must be an integer in [0, %d] (the steps)", r->steps);
    return LV_OK;
}

static lv_status parse(const cJSON *root, const char *source, lv_model_card *card) {
    if (!cJSON_IsObject(root)) return lv_error(LV_ERR_FORMAT, "%s: not a JSON object", source);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    card->pixel = cJSON_IsString(kind) && strcmp(kind->valuestring, "pixel") == 0;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "resolution");
    if (!cJSON_IsArray(res) || cJSON_GetArraySize(res) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(res, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(res, 1)))
        return lv_error(LV_ERR_FORMAT, "%s: \"resolution\" must be [height, width]", source);
    card->height = cJSON_GetArrayItem(res, 0)->valueint;
    card->width = cJSON_GetArrayItem(res, 1)->valueint;
    if (card->height <= 0 || card->width <= 0 || card->height > 8192 || card->width > 8192)
        return lv_error(LV_ERR_FORMAT, "%s: resolution %dx%d", source, card->height, card->width);
    const cJSON *fps = cJSON_GetObjectItemCaseSensitive(root, "fps");
    card->fps = cJSON_IsNumber(fps) && fps->valuedouble > 0 ? fps->valuedouble : 16.0;
    LV_TRY(get_int(root, "block_frames", source, 1, 1024, &card->block_frames));
    LV_TRY(get_int(root, "cached_blocks", source, -1, 1024, &card->cached_blocks));
    LV_TRY(get_int(root, "text_len", source, 1, 4096, &card->text_len));
    if (cJSON_GetObjectItemCaseSensitive(root, "burn_in_blocks"))
        LV_TRY(get_int(root, "burn_in_blocks", source, 0, LV_CARD_MAX_BURN_IN, &card->burn_in_blocks));
    lv_block_recipe *later = &card->later_blocks, *first = &card->first_block;
    LV_TRY(get_timesteps(root, "sample_timesteps", source, later->timesteps, &later->steps));
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "cfg_scale");
    later->cfg_scale = cJSON_IsNumber(cfg) ? cfg->valuedouble : 1.0;
    LV_TRY(get_sampler(root, source, &later->sampler));
    LV_TRY(get_cfg_last_steps(root, source, "", later));
    const cJSON *warm = cJSON_GetObjectItemCaseSensitive(root, "warm_start");
    if (warm && !cJSON_IsBool(warm)) return lv_error(LV_ERR_FORMAT, "%s: \"warm_start\" must be true or false", source);
    later->warm_start = cJSON_IsTrue(warm);
    *first = *later;
    first->warm_start = false; /* a block made from the text alone has no previous frame */
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(root, "first_block");
    if (fb) {
        if (!cJSON_IsObject(fb)) return lv_error(LV_ERR_FORMAT, "%s: \"first_block\" must be an object", source);
        if (cJSON_GetObjectItemCaseSensitive(fb, "timesteps"))
            LV_TRY(get_timesteps(fb, "timesteps", source, first->timesteps, &first->steps));
        LV_TRY(get_sampler(fb, source, &first->sampler));
        const cJSON *fcfg = cJSON_GetObjectItemCaseSensitive(fb, "cfg_scale");
        if (fcfg && (!cJSON_IsNumber(fcfg) || fcfg->valuedouble < 0))
            return lv_error(LV_ERR_FORMAT, "%s: \"first_block\".\"cfg_scale\" must be a number >= 0", source);
        if (fcfg) first->cfg_scale = fcfg->valuedouble;
        LV_TRY(get_cfg_last_steps(fb, source, "\"first_block\".", first));
        if (cJSON_GetObjectItemCaseSensitive(fb, "warm_start"))
            return lv_error(LV_ERR_FORMAT, "%s: \"first_block\" cannot have \"warm_start\" (it has no previous block)",
                            source);
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab");
    if (vocab) {
        if (!cJSON_IsArray(vocab) || cJSON_GetArraySize(vocab) > LV_CARD_MAX_VOCAB)
            return lv_error(LV_ERR_FORMAT, "%s: \"vocab\" must be a list of at most %d words", source,
                            LV_CARD_MAX_VOCAB);
        const cJSON *w;
        cJSON_ArrayForEach(w, vocab) {
            if (!cJSON_IsString(w)) return lv_error(LV_ERR_FORMAT, "%s: a vocab entry is not a string", source);
            card->vocab[card->vocab_size] = strdup(w->valuestring);
            if (!card->vocab[card->vocab_size]) return lv_error(LV_ERR_NOMEM, "out of host memory");
            card->vocab_size++;
        }
    }
    return LV_OK;
}

lv_status lv_model_card_parse(const char *json, const char *source, lv_model_card *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_model_card_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!source) source = "the model card";
    if (!json) return lv_error(LV_ERR_FORMAT, "%s: no \"longvk\" metadata", source);
    cJSON *root = cJSON_Parse(json);
    if (!root) return lv_error(LV_ERR_FORMAT, "%s: the \"longvk\" metadata is not valid JSON", source);
    lv_status s = parse(root, source, out);
    cJSON_Delete(root);
    if (s != LV_OK) lv_model_card_free(out);
    return s;
}

void lv_model_card_longsana(lv_model_card *card) {
    if (!card) return;
    static const float steps[4] = {1000, 960, 889, 727};
    memset(card, 0, sizeof *card);
    card->pixel = false;
    card->height = 480;
    card->width = 832;
    card->fps = 16;
    card->block_frames = 10;
    card->cached_blocks = LV_CACHED_ALL;
    card->later_blocks.steps = 4;
    memcpy(card->later_blocks.timesteps, steps, sizeof steps);
    card->later_blocks.cfg_scale = 1.0;
    card->later_blocks.sampler = LV_CHUNK_RENOISE;
    card->first_block = card->later_blocks;
}

/* ---- the card's vocabulary to the word tokenizer (longvk/text.h) ---- */

lv_word_vocab lv_model_card_vocab(const lv_model_card *card) {
    lv_word_vocab v = {0};
    if (card) v = (lv_word_vocab){.words = card->vocab, .size = card->vocab_size, .text_len = card->text_len};
    return v;
}

lv_status lv_model_card_tokenize(const lv_model_card *card, const char *prompt, int *ids,
                                 float *mask, char *unknown, size_t unknown_size) {
    if (!card || !ids || !mask)
        return lv_error(LV_ERR_INVALID, "lv_model_card_tokenize: %s is NULL", !card ? "the card" : !ids ? "ids" : "mask");
    if (unknown && unknown_size) unknown[0] = '\0';
    if (!card->vocab_size) return lv_error(LV_ERR_UNSUPPORTED, "this model has no vocabulary: give prompt embeddings");
    if (card->text_len < 1) return lv_error(LV_ERR_INVALID, "lv_model_card_tokenize: the card's text_len is %d",
                                            card->text_len);
    lv_word_vocab v = lv_model_card_vocab(card);
    return lv_word_tokenize(&v, prompt, ids, mask, unknown, unknown_size);
}
