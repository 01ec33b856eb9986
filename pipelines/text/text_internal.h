/* The two encoders behind lv_text_encoder (longvk/text.h): the word tables
 * (text_encoder.c) and Gemma-2 with SANA-Video's prompt handling (gemma2_encoder.c). */
#ifndef LONGVK_TEXT_INTERNAL_H
#define LONGVK_TEXT_INTERNAL_H

#include "longvk/gemma2.h"
#include "longvk/sana_prompt.h"
#include "longvk/text.h"
#include "longvk/tokenizer.h"

typedef struct lv_text_gemma2 {
    lv_gemma2_file *file;
    lv_tokenizer *tok;
    lv_sana_prompt prompt, negative; /* ids, selection and mask of each */
    bool with_negative;              /* CFG: the negative prompt is encoded too */
    int motion_score, softcap;
    int weight_dtype;                /* lv_gemma2_options.weight_dtype (-1: as stored) */
    char encoder[4096];              /* the encoder's path, for messages */
    volatile sig_atomic_t *stop;     /* polled between layers (lv_text_encoder_set_stop), or NULL */
    bool hold;                       /* keep the encoder uploaded between encodes (lv_text_encoder_hold) */
    lv_gemma2 *held;                 /* the one kept, or NULL */
    uint64_t held_peak;              /* its device bytes at most, over the encodes it made */
} lv_text_gemma2;

/* lv_gemma2_options.weight_dtype of an lv_text_weights (-1: as stored), or -2 for a value
 * outside the enum. */
int lv_text_gemma2_weight_dtype(lv_text_weights w);
/* Opens the encoder's files (every tensor checked, nothing on the device yet) and the
 * tokenizer; the encoder's hidden size must be the DiT's caption_channels. */
lv_status lv_text_gemma2_open(lv_text_gemma2 *t, const lv_text_gemma2_options *opt);
/* Tokenizes the prompt (and the negative prompt) as SANA-Video does; a prompt longer than
 * the model reads is truncated, and `warn` says so. */
lv_status lv_text_gemma2_set_prompts(lv_text_gemma2 *t, const char *prompt, bool with_negative, const char *negative,
                                     void (*warn)(void *, const char *), void *user);
/* Uploads the encoder, encodes into y [2, 300, hidden] and mask [2, 300] (slot 1: the
 * negative prompt), and frees it again; with t->hold it stays uploaded (t->held) until
 * lv_text_gemma2_release, and *peak is the most it held over those encodes. */
lv_status lv_text_gemma2_encode(lv_text_gemma2 *t, lv_ctx *ctx, float *y, float *mask, uint64_t *peak);
void lv_text_gemma2_release(lv_text_gemma2 *t);
void lv_text_gemma2_close(lv_text_gemma2 *t);

#endif
