/* The text stage (pipelines/text/): a prompt to the rows [L, caption_channels] and the mask
 * [L] a DiT's cross-attention reads, through either text encoder behind one interface
 * (lv_text_encoder):
 *   - a model's word tables (the default model): the word tokenizer over its card's
 *     vocabulary, then tables stored in the model file (lv_text_tables);
 *   - Gemma-2 with SANA-Video's prompt handling (longvk/sana_prompt.h) on the device.
 *
 *   lv_text_encoder *te;
 *   lv_text_encoder_open_gemma2(&gopt, &te);               files checked, nothing on the device
 *   lv_text_encoder_set_prompts(te, "a red fox", NULL, warn, user);   tokenized, warnings said
 *   float *y = malloc(2 * L * cap * 4), *mask = malloc(2 * L * 4);   L = lv_text_encoder_rows(te)
 *   lv_text_encoder_encode(te, ctx, y, mask);              slot 0 the prompt, 1 the negative
 *   lv_text_encoder_close(te); */
#ifndef LONGVK_TEXT_H
#define LONGVK_TEXT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "longvk/engine.h"
#include "longvk/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the word tokenizer (pipelines/text/word_tokenizer.c) ---------------------------- */

/* A vocabulary of words (a model card's "vocab") and the tokens a prompt is padded to
 * ("text_len"). Borrowed: the words must outlive it. */
typedef struct lv_word_vocab {
    char *const *words;
    int size;
    int text_len;
} lv_word_vocab;

/* Words are runs of letters (ASCII or any other script: "ünïcödé" is one word), runs of
 * digits, and single symbols (an emoji with its modifiers); spaces and punctuation separate
 * them. A word is looked up with its ASCII letters lowercased, so an ASCII prompt gives the
 * ids it always did (runs of a-z/A-Z). Known words take the ids in order; the first
 * text_len get mask 1, the rest are padded with id 0, mask 0. `unknown` (may be NULL)
 * receives what is ignored and why, in the prompt's own characters (UTF-8 kept; a byte that
 * is not UTF-8 shows as U+FFFD), each word once:
 *   "ignored (not in the vocabulary): ünïcödé, 42, 🎈; ignored (past the model's 20 words): red"
 * or "" when every word is used; a list longer than unknown_size ends with "..." (never
 * inside a character). ids [text_len], mask [text_len]. Errors: a NULL vocabulary, ids or
 * mask, a vocabulary without words or with text_len < 1. */
lv_status lv_word_tokenize(const lv_word_vocab *vocab, const char *prompt, int *ids, float *mask, char *unknown,
                           size_t unknown_size);

/* ---- the word tables (pipelines/text/text_tables.c) ------------------------------------ */

/* The text encoder of a model with a vocabulary, in place of Gemma: tables
 * [vocab, caption_channels] in the model file, text_embedding.weight (the word) and, when
 * present, text_prev_embedding.weight / text_next_embedding.weight (the words before and
 * after it). For the n valid tokens of the prompt
 *   y[i] = word[id_i] + prev[id_{i-1}] (i > 0) + next[id_{i+1}] (i < n - 1),
 * and y[i] = 0 for the padding. The tables point into the weights, which must outlive them. */
typedef struct lv_text_tables {
    const lv_weight *word, *prev, *next; /* prev / next: NULL when absent */
    int caption_channels;
} lv_text_tables;

lv_status lv_text_tables_open(const lv_weights *w, const lv_word_vocab *vocab, int caption_channels,
                              lv_text_tables *out);
/* y [text_len, caption_channels] and mask [text_len] of a prompt; ignored words as in
 * lv_word_tokenize. */
lv_status lv_text_tables_embed(const lv_text_tables *t, const lv_word_vocab *vocab, const char *prompt, float *y,
                               float *mask, char *unknown, size_t unknown_size);

/* ---- one interface for both encoders (pipelines/text/text_encoder.c) ------------------ */

typedef struct lv_text_encoder lv_text_encoder;

/* The word tables of a model with a vocabulary (both borrowed: they must outlive the
 * encoder). Runs on the host; lv_text_encoder_encode takes no context. */
lv_status lv_text_encoder_open_words(const lv_text_tables *tables, const lv_word_vocab *vocab, lv_text_encoder **out);

/* Gemma-2's matmul weights on the device (lv_gemma2_options.weight_dtype): the codes of
 * lv_generate_options.weights_dtype (lv_dit_weights), so that one option spelling serves both. */
typedef enum lv_text_weights {
    LV_TEXT_WEIGHTS_AS_STORED = 0,
    LV_TEXT_WEIGHTS_F32,
    LV_TEXT_WEIGHTS_F16,
    LV_TEXT_WEIGHTS_BF16,
    LV_TEXT_WEIGHTS_Q8_0, /* quantized on load (rows not whole blocks fall back, as the DiT's) */
    LV_TEXT_WEIGHTS_Q4_K
} lv_text_weights;

typedef struct lv_text_gemma2_options {
    const char *encoder;          /* a folder or weights file, as lv_gemma2_file_open takes */
    const char *tokenizer;        /* NULL: lv_tokenizer_find beside the encoder */
    int caption_channels;         /* the DiT's: the encoder's hidden size must match */
    int motion_score;             /* " motion score: N." appended to the prompt; 0: nothing */
    int softcap;                  /* the encoder's attention soft-cap: 0 off, 1 the config's */
    lv_text_weights weights;      /* its matmul weights on the device: as stored by default */
} lv_text_gemma2_options;
/* Gemma-2 with SANA-Video's prompt handling: the encoder's files opened and every tensor
 * checked (nothing on the device yet), its tokenizer opened. Errors name the file. */
lv_status lv_text_encoder_open_gemma2(const lv_text_gemma2_options *opt, lv_text_encoder **out);

/* The prompt (slot 0) and, when with_negative, the negative prompt (slot 1; NULL: the
 * encoder's default, "" for word tables and SANA-Video's negative prompt for Gemma-2),
 * tokenized now, before any device work, so that a bad text fails at once. `warn` (may be
 * NULL) is told what the model will not read: words not in the vocabulary or past its
 * length, tokens past Gemma-2's rows. */
lv_status lv_text_encoder_set_prompts(lv_text_encoder *e, const char *prompt, bool with_negative,
                                      const char *negative, void (*warn)(void *user, const char *message),
                                      void *user);
/* Rows per prompt (L): the card's text_len, or SANA-Video's 300. */
int lv_text_encoder_rows(const lv_text_encoder *e);
/* Real tokens of the prompts set (<bos> included for Gemma-2): what is encoded. */
int lv_text_encoder_tokens(const lv_text_encoder *e);
/* The device bytes lv_text_encoder_encode will hold at most for the prompts set (Gemma-2's
 * weights and the work buffers of its longest prompt, lv_gemma2_memory_plan, each tensor
 * rounded up to `alignment`); 0 for the word tables. */
uint64_t lv_text_encoder_memory_plan(const lv_text_encoder *e, uint64_t alignment);
/* The same with Gemma-2's matmul weights as `weights` instead of the encoder's setting (what a
 * run that would not fit could use instead). */
uint64_t lv_text_encoder_memory_plan_as(const lv_text_encoder *e, uint64_t alignment, lv_text_weights weights);
/* True when encoding needs a device (Gemma-2), false for the word tables. */
bool lv_text_encoder_uses_device(const lv_text_encoder *e);
/* The prompts set, encoded: y [slots, L, caption_channels] and mask [slots, L] (slot 1 only
 * with a negative prompt). Gemma-2 is uploaded to ctx, run and freed again in this call;
 * *peak (may be NULL) receives the device bytes it held at most (0 for the word tables,
 * which take ctx NULL). */
lv_status lv_text_encoder_encode(lv_text_encoder *e, lv_ctx *ctx, float *y, float *mask, uint64_t *peak);
/* Several prompts through one upload (a prompt schedule): after lv_text_encoder_hold,
 * Gemma-2 stays on the device from the first lv_text_encoder_encode (on the same ctx each
 * time) to lv_text_encoder_release or close, and *peak is the most it held so far. The word
 * tables: nothing to hold. */
void lv_text_encoder_hold(lv_text_encoder *e);
void lv_text_encoder_release(lv_text_encoder *e);
/* A flag lv_text_encoder_encode polls between Gemma-2's layers (NULL: none): once set the
 * encode stops within a layer, LV_ERR_INTERRUPTED. The word tables take no time: unused. */
void lv_text_encoder_set_stop(lv_text_encoder *e, volatile sig_atomic_t *stop);
/* Frees the encoder (its files, tokenizer and tokenized prompts); NULL is fine. */
void lv_text_encoder_close(lv_text_encoder *e);

#ifdef __cplusplus
}
#endif
#endif
