/* The "longvk" metadata of a model file and its tokenizer (see longvk/generate.h). */
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

/* ---- the tokenizer ------------------------------------------------------------------- */

/* What a code point is to the tokenizer. */
typedef enum { CH_SEPARATOR, CH_LETTER, CH_DIGIT, CH_SYMBOL, CH_MODIFIER } char_class;

/* One UTF-8 character at p: its code point, and its length in bytes (1 for a byte that
 * does not start a valid sequence: that byte alone, code point 0xFFFD). */
static uint32_t next_char(const unsigned char *p, int *len) {
    unsigned c = p[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) n = 0; /* also stops at the terminating NUL */
        if (!n) break;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    /* overlong forms, surrogates and values past U+10FFFF are not characters */
    if (n == 0 || (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
        *len = 1;
        return 0xFFFD;
    }
    *len = n;
    return cp;
}

/* ASCII: letters, digits, and everything else separates. Beyond: punctuation and spaces
 * separate; symbols (arrows, dingbats, emoji, ...) are words of one character, with the
 * modifiers that follow them (variation selectors, skin tones, the zero-width joiner and
 * the character it joins, keycaps, tags); everything else (Latin with accents, Greek,
 * Cyrillic, CJK, combining marks, ...) is a letter. */
static char_class classify(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CH_LETTER;
        if (cp >= '0' && cp <= '9') return CH_DIGIT;
        return CH_SEPARATOR;
    }
    if (cp == 0x200D || (cp >= 0xFE00 && cp <= 0xFE0F) || (cp >= 0x1F3FB && cp <= 0x1F3FF) || cp == 0x20E3 ||
        (cp >= 0xE0020 && cp <= 0xE007F) || (cp >= 0xE0100 && cp <= 0xE01EF))
        return CH_MODIFIER;
    if ((cp >= 0x80 && cp <= 0xBF && cp != 0xAA && cp != 0xB5 && cp != 0xBA) || cp == 0xD7 || cp == 0xF7 ||
        (cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x2E00 && cp <= 0x2E7F) || (cp >= 0x3000 && cp <= 0x303F) ||
        (cp >= 0xFE10 && cp <= 0xFE1F) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF0F) ||
        (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65) ||
        cp == 0xFEFF || cp == 0x1680 || cp == 0x0E3F || cp == 0x00A0)
        return CH_SEPARATOR;
    if ((cp >= 0x2100 && cp <= 0x2BFF) || (cp >= 0x1F000 && cp <= 0x1FAFF) || (cp >= 0xE000 && cp <= 0xF8FF) ||
        cp == 0xFFFD || cp == 0xA9 || cp == 0xAE)
        return CH_SYMBOL;
    return CH_LETTER;
}

static int tolower_ascii(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static int lookup(const lv_model_card *card, const char *word) {
    for (int i = 0; i < card->vocab_size; i++)
        if (strcmp(card->vocab[i], word) == 0) return i;
    return -1;
}

/* The words the tokenizer ignores, each once, as the prompt spells them. */
typedef struct word_list {
    const char **at;
    size_t *len;
    int n, cap;
} word_list;

static lv_status list_add(word_list *l, const char *at, size_t len) {
    for (int i = 0; i < l->n; i++)
        if (l->len[i] == len && memcmp(l->at[i], at, len) == 0) return LV_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        const char **a = realloc(l->at, (size_t)cap * sizeof *a);
        if (a) l->at = a;
        size_t *b = a ? realloc(l->len, (size_t)cap * sizeof *b) : NULL;
        if (b) l->len = b;
        if (!a || !b) return lv_error(LV_ERR_NOMEM, "out of host memory");
        l->cap = cap;
    }
    l->at[l->n] = at;
    l->len[l->n++] = len;
    return LV_OK;
}

/* Appends s (n bytes) to out, keeping room for "..." and the NUL; a character that does not
 * fit is not cut: *full is set instead. */
static void append(char *out, size_t size, size_t *used, const char *s, size_t n, bool *full) {
    if (*full) return;
    if (*used + n + 4 > size) {
        *full = true;
        snprintf(out + *used, size - *used, "...");
        *used += strlen(out + *used);
        return;
    }
    memcpy(out + *used, s, n);
    *used += n;
    out[*used] = '\0';
}

/* A word as the prompt spells it, bytes that are not UTF-8 as U+FFFD. */
static void append_word(char *out, size_t size, size_t *used, const char *w, size_t len, bool *full) {
    for (size_t i = 0; i < len && !*full;) {
        int n;
        uint32_t cp = next_char((const unsigned char *)w + i, &n);
        if (cp == 0xFFFD && n == 1) append(out, size, used, "\xEF\xBF\xBD", 3, full); /* not UTF-8 */
        else append(out, size, used, w + i, (size_t)n, full);
        i += (size_t)n;
    }
}

static void append_list(char *out, size_t size, size_t *used, const char *title, const word_list *l, bool *full) {
    if (!l->n) return;
    if (*used) append(out, size, used, "; ", 2, full);
    append(out, size, used, title, strlen(title), full);
    for (int i = 0; i < l->n; i++) {
        if (i) append(out, size, used, ", ", 2, full);
        append_word(out, size, used, l->at[i], l->len[i], full);
    }
}

lv_status lv_model_card_tokenize(const lv_model_card *card, const char *prompt, int *ids,
                                 float *mask, char *unknown, size_t unknown_size) {
    if (!card || !ids || !mask)
        return lv_error(LV_ERR_INVALID, "lv_model_card_tokenize: %s is NULL", !card ? "the card" : !ids ? "ids" : "mask");
    if (unknown && unknown_size) unknown[0] = '\0';
    if (!card->vocab_size) return lv_error(LV_ERR_UNSUPPORTED, "this model has no vocabulary: give prompt embeddings");
    if (card->text_len < 1) return lv_error(LV_ERR_INVALID, "lv_model_card_tokenize: the card's text_len is %d",
                                            card->text_len);
    word_list missing = {0}, past = {0};
    lv_status s = LV_OK;
    const char *p = prompt ? prompt : "";
    char *key = malloc(strlen(p) + 1); /* a word with its ASCII letters lowercased */
    if (!key) return lv_error(LV_ERR_NOMEM, "out of host memory");
    int n = 0;
    while (*p && s == LV_OK) {
        int len;
        char_class k = classify(next_char((const unsigned char *)p, &len));
        if (k == CH_SEPARATOR || k == CH_MODIFIER) { /* a modifier alone modifies nothing */
            p += len;
            continue;
        }
        /* the word: letters run on (any script), digits too; a symbol takes its modifiers */
        const char *start = p;
        p += len;
        while (*p) {
            int l2;
            char_class k2 = classify(next_char((const unsigned char *)p, &l2));
            if (k2 == CH_MODIFIER) {
                bool joiner = (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 && (unsigned char)p[2] == 0x8D;
                p += l2;
                if (joiner && *p) { /* the joined character belongs to the word too */
                    (void)next_char((const unsigned char *)p, &l2);
                    p += l2;
                }
                continue;
            }
            if (k == CH_SYMBOL || k2 != k) break;
            p += l2;
        }
        size_t wlen = (size_t)(p - start);
        for (size_t i = 0; i < wlen; i++) key[i] = (char)tolower_ascii((unsigned char)start[i]);
        key[wlen] = '\0';
        int id = lookup(card, key);
        if (id < 0) s = list_add(&missing, start, wlen);
        else if (n < card->text_len) ids[n++] = id;
        else s = list_add(&past, start, wlen);
    }
    free(key);
    for (int i = 0; i < card->text_len; i++) {
        mask[i] = i < n ? 1.0f : 0.0f;
        if (i >= n) ids[i] = 0;
    }
    if (s == LV_OK && unknown && unknown_size) {
        size_t used = 0;
        bool full = unknown_size < 4;
        char title[96];
        append_list(unknown, unknown_size, &used, "ignored (not in the vocabulary): ", &missing, &full);
        snprintf(title, sizeof title, "ignored (past the model's %d words): ", card->text_len);
        append_list(unknown, unknown_size, &used, title, &past, &full);
    }
    free(missing.at);
    free(missing.len);
    free(past.at);
    free(past.len);
    return s;
}
