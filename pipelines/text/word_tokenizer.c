/* The word tokenizer of models with a vocabulary (the default model): a prompt to the ids of
 * its words, and what it ignores, said in the prompt's own characters (longvk/text.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/text.h"

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

static int lookup(const lv_word_vocab *vocab, const char *word) {
    for (int i = 0; i < vocab->size; i++)
        if (strcmp(vocab->words[i], word) == 0) return i;
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

lv_status lv_word_tokenize(const lv_word_vocab *vocab, const char *prompt, int *ids, float *mask, char *unknown,
                           size_t unknown_size) {
    if (!vocab || !ids || !mask)
        return lv_error(LV_ERR_INVALID, "lv_word_tokenize: %s is NULL", !vocab ? "the vocabulary" : !ids ? "ids" : "mask");
    if (unknown && unknown_size) unknown[0] = '\0';
    if (vocab->size < 1 || !vocab->words)
        return lv_error(LV_ERR_UNSUPPORTED, "this model has no vocabulary: give prompt embeddings");
    if (vocab->text_len < 1) return lv_error(LV_ERR_INVALID, "lv_word_tokenize: the vocabulary's text_len is %d",
                                             vocab->text_len);
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
        int id = lookup(vocab, key);
        if (id < 0) s = list_add(&missing, start, wlen);
        else if (n < vocab->text_len) ids[n++] = id;
        else s = list_add(&past, start, wlen);
    }
    free(key);
    for (int i = 0; i < vocab->text_len; i++) {
        mask[i] = i < n ? 1.0f : 0.0f;
        if (i >= n) ids[i] = 0;
    }
    if (s == LV_OK && unknown && unknown_size) {
        size_t used = 0;
        bool full = unknown_size < 4;
        char title[96];
        append_list(unknown, unknown_size, &used, "ignored (not in the vocabulary): ", &missing, &full);
        snprintf(title, sizeof title, "ignored (past the model's %d words): ", vocab->text_len);
        append_list(unknown, unknown_size, &used, title, &past, &full);
    }
    free(missing.at);
    free(missing.len);
    free(past.at);
    free(past.len);
    return s;
}
