/* SANA-Video's prompt handling around its Gemma-2 text encoder (pipelines/gemma2/README.md,
 * section 0): the instruction text prepended, the motion suffix, the truncation and
 * padding to L = n_instruction + 298 tokens, the selection of <bos> plus the last 299
 * positions, and the mask; the negative prompt without the instruction (L = 300).
 *
 *   lv_sana_prompt p;
 *   lv_sana_prompt_build(tok, "A cat plays piano", NULL, &p);   ids, selection, mask
 *   float y[300 * 2304], mask[300];
 *   lv_sana_prompt_encode(enc, &p, y, mask);                     the 300 rows SANA feeds its DiT
 *   lv_sana_prompt_free(&p);
 *
 * Only the real tokens are encoded (p.ids, at positions 0..n_ids-1): with causal attention
 * and right padding the valid rows do not depend on the pads, so the rows of the selection
 * that fall on pads are zero with mask 0 (the DiT never reads them). */
#ifndef LONGVK_SANA_PROMPT_H
#define LONGVK_SANA_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/gemma2.h"
#include "longvk/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SANA-Video's text_encoder.model_max_length: the rows handed to the DiT. */
#define LV_SANA_PROMPT_ROWS 300
/* SANA-Video's inference default (--motion_score 10): " motion score: 10." is appended. */
#define LV_SANA_VIDEO_MOTION_SCORE 10

/* The complex-human-instruction text (config text_encoder.chi_prompt, its 8 lines joined
 * by '\n'; the last line is "User Prompt: " with its trailing space). */
extern const char lv_sana_video_instruction[];
/* The inference script's default negative prompt. */
extern const char lv_sana_video_negative_prompt[];

typedef struct lv_sana_prompt_options {
    /* 0: a prompt (instruction + prompt.strip() + motion suffix); 1: a negative prompt (the
     * text as given, no instruction, no suffix, L = 300). */
    int negative;
    /* NULL: lv_sana_video_instruction; "": none (then L = 300 and every row is selected). */
    const char *instruction;
    /* > 0: " motion score: N." appended to the prompt; 0: nothing appended. */
    int motion_score;
} lv_sana_prompt_options;

/* negative 0, the SANA-Video instruction, motion score LV_SANA_VIDEO_MOTION_SCORE. */
void lv_sana_prompt_options_default(lv_sana_prompt_options *opt);

typedef struct lv_sana_prompt {
    int32_t *ids;   /* the real tokens: <bos> + instruction + prompt, truncated to length */
    int n_ids;
    int length;     /* L, the padded length SANA tokenizes to */
    int n_instruction; /* tokens of the instruction alone, <bos> included (0: none) */
    int needed;     /* tokens of the whole text before truncation (<bos> included) */
    int prompt_start; /* position in ids of the prompt's first token: after <bos> and the
                         instruction, whose trailing space joins the prompt's first word */
    int select[LV_SANA_PROMPT_ROWS]; /* row r = position select[r] of the padded sequence:
                                        0, then L-299 .. L-1 */
    float mask[LV_SANA_PROMPT_ROWS]; /* 1 where select[r] < n_ids (a real token), else 0 */
} lv_sana_prompt;

/* Assembles the text and its tokens as SANA-Video's inference script does (opt NULL: the
 * defaults). `prompt` is UTF-8, NUL-terminated. Tokenizer errors as lv_tokenizer_encode's;
 * LV_ERR_NOMEM. On success free it with lv_sana_prompt_free. */
lv_status lv_sana_prompt_build(const lv_tokenizer *tok, const char *prompt, const lv_sana_prompt_options *opt,
                               lv_sana_prompt *out);
void lv_sana_prompt_free(lv_sana_prompt *p);
/* 0 when nothing was truncated; else 1 and, in buf, what the text given lost counted in its
 * own tokens (the prompt with its motion suffix, from prompt_start: not <bos> nor the
 * instruction):
 * "N tokens, of which the model reads the first K: the last D are dropped (...)". */
int lv_sana_prompt_truncation(const lv_sana_prompt *p, char *buf, size_t size);

/* Runs the encoder on p->ids and writes the selected rows: y float [300, hidden] (rows on
 * pads zero) and, when mask is not NULL, the mask float [300]. */
lv_status lv_sana_prompt_encode(lv_gemma2 *enc, const lv_sana_prompt *p, float *y, float *mask);
/* The same from a last hidden state already computed: hidden float [p->n_ids, hidden_size]. */
void lv_sana_prompt_select(const lv_sana_prompt *p, const float *hidden, int hidden_size, float *y);

#ifdef __cplusplus
}
#endif
#endif
