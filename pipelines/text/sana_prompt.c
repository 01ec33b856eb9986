/* SANA-Video's prompt assembly around the Gemma-2 encoder (longvk/sana_prompt.h;
 * pipelines/gemma2/README.md, section 0).
 *
 * Sources (the meefs/Sana mirror of NVlabs/Sana, snapshot 5498e5b2070e):
 * - the instruction: configs/sana_video_config/Sana_2000M_480px_AdamW_fsdp.yaml,
 *   text_encoder.chi_prompt (lines 84-92; file last changed in commit 92c74596eb82,
 *   2025-10-30; the longsana and 720px configs hold the same 8 lines), joined with "\n" as
 *   inference_video_scripts/inference_sana_video.py does (line 173);
 * - the rest: inference_video_scripts/inference_sana_video.py (last changed in 95c9e7c4a9f4,
 *   2025-12-10): the prompt is prompt.strip() + " motion score: {int(score)}." (lines 134,
 *   437-438; --motion_score defaults to 10, line 381), L = len(tokenizer.encode(chi)) + 300
 *   - 2 (lines 175-178), tokenizer(chi + prompt, max_length=L, padding="max_length",
 *   truncation=True) (line 188), rows [0] + range(-299, 0) and the mask at the same rows
 *   (lines 190-196); the negative prompt: tokenizer(neg, max_length=300, ...) with all 300
 *   rows (lines 479-488), its default text at line 383. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sana_prompt.h"

const char lv_sana_video_instruction[] =
    "Given a user prompt, generate an \"Enhanced prompt\" that provides detailed visual descriptions suitable for image generation. Evaluate the level of detail in the user prompt:\n"
    "- If the prompt is simple, focus on adding specifics about colors, shapes, sizes, textures, and spatial relationships to create vivid and concrete scenes.\n"
    "- If the prompt is already detailed, refine and enhance the existing details slightly without overcomplicating.\n"
    "Here are examples of how to transform or refine prompts:\n"
    "- User Prompt: A cat sleeping -> Enhanced: A small, fluffy white cat curled up in a round shape, sleeping peacefully on a warm sunny windowsill, surrounded by pots of blooming red flowers.\n"
    "- User Prompt: A busy city street -> Enhanced: A bustling city street scene at dusk, featuring glowing street lamps, a diverse crowd of people in colorful clothing, and a double-decker bus passing by towering glass skyscrapers.\n"
    "Please generate only the enhanced description for the prompt below and avoid including any additional commentary or evaluations:\n"
    "User Prompt: ";

const char lv_sana_video_negative_prompt[] =
    "A chaotic sequence with misshapen, deformed limbs in heavy motion blur, sudden disappearance, jump cuts, "
    "jerky movements, rapid shot changes, frames out of sync, inconsistent character shapes, temporal artifacts, "
    "jitter, and ghosting effects, creating a disorienting visual experience.";

void lv_sana_prompt_options_default(lv_sana_prompt_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->instruction = NULL;
    opt->motion_score = LV_SANA_VIDEO_MOTION_SCORE;
}

/* Python's str.strip() for the whitespace a prompt holds: ASCII space, \t \n \v \f \r and
 * the separators \x1c-\x1f (other Unicode spaces are kept). */
static int py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

lv_status lv_sana_prompt_build(const lv_tokenizer *tok, const char *prompt, const lv_sana_prompt_options *opt,
                               lv_sana_prompt *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "sana prompt: no output");
    memset(out, 0, sizeof *out);
    if (!tok || !prompt) return lv_error(LV_ERR_INVALID, "sana prompt: no tokenizer or no prompt");
    lv_sana_prompt_options def;
    if (!opt) {
        lv_sana_prompt_options_default(&def);
        opt = &def;
    }
    if (opt->motion_score < 0) return lv_error(LV_ERR_INVALID, "sana prompt: motion score %d is negative", opt->motion_score);
    const char *instr = opt->negative ? "" : opt->instruction ? opt->instruction : lv_sana_video_instruction;
    const int rows = LV_SANA_PROMPT_ROWS;

    /* the text: instruction + prompt.strip() + suffix (a negative prompt as given) */
    size_t plen = strlen(prompt);
    const char *p = prompt;
    if (!opt->negative) {
        while (plen && py_space((unsigned char)*p)) p++, plen--;
        while (plen && py_space((unsigned char)p[plen - 1])) plen--;
    }
    char suffix[48] = "";
    if (!opt->negative && opt->motion_score > 0) snprintf(suffix, sizeof suffix, " motion score: %d.", opt->motion_score);
    size_t ilen = strlen(instr), slen = strlen(suffix);
    if (plen > LV_TOKENIZER_MAX_TEXT)
        return lv_error(LV_ERR_LIMIT, "sana prompt: the prompt is %zu bytes, at most %u are taken", plen,
                        LV_TOKENIZER_MAX_TEXT);
    char *text = malloc(ilen + plen + slen + 1);
    if (!text) return lv_error(LV_ERR_NOMEM, "sana prompt: out of memory");
    memcpy(text, instr, ilen);
    memcpy(text + ilen, p, plen);
    memcpy(text + ilen + plen, suffix, slen + 1);

    /* L: n_chi + 300 - 2 with an instruction ("magic number 2: [bos], [_]"), else 300 */
    lv_status s = LV_OK;
    int n_chi = 0, L = rows;
    if (ilen) {
        s = lv_tokenizer_encode(tok, instr, ilen, LV_TOKENIZE_GEMMA, NULL, 0, &(int){0}, &n_chi);
        if (s != LV_OK) goto fail;
        L = n_chi + rows - 2;
    }
    out->ids = malloc((size_t)L * sizeof *out->ids);
    if (!out->ids) {
        s = lv_error(LV_ERR_NOMEM, "sana prompt: out of memory");
        goto fail;
    }
    s = lv_tokenizer_encode(tok, text, ilen + plen + slen, LV_TOKENIZE_GEMMA, out->ids, L, &out->n_ids, &out->needed);
    if (s != LV_OK) goto fail;
    out->length = L;
    out->n_instruction = n_chi;
    /* where the prompt starts: after the ids the instruction alone shares with the whole text
     * (its last, the trailing space "_", becomes part of the prompt's first word) */
    out->prompt_start = out->n_ids > 0 ? 1 : 0;
    if (n_chi > 0) {
        int32_t *alone = malloc((size_t)n_chi * sizeof *alone);
        int n_alone = 0;
        if (!alone) {
            s = lv_error(LV_ERR_NOMEM, "sana prompt: out of memory");
            goto fail;
        }
        s = lv_tokenizer_encode(tok, instr, ilen, LV_TOKENIZE_GEMMA, alone, n_chi, &n_alone, &(int){0});
        int same = 0;
        while (s == LV_OK && same < n_alone && same < out->n_ids && alone[same] == out->ids[same]) same++;
        free(alone);
        if (s != LV_OK) goto fail;
        out->prompt_start = same;
    }
    out->select[0] = 0;
    for (int r = 1; r < rows; r++) out->select[r] = L - rows + r;
    for (int r = 0; r < rows; r++) out->mask[r] = out->select[r] < out->n_ids ? 1.0f : 0.0f;
    free(text);
    return LV_OK;
fail:
    free(text);
    lv_sana_prompt_free(out);
    return s;
}

void lv_sana_prompt_free(lv_sana_prompt *p) {
    if (!p) return;
    free(p->ids);
    memset(p, 0, sizeof *p);
}

void lv_sana_prompt_select(const lv_sana_prompt *p, const float *hidden, int hidden_size, float *y) {
    size_t H = (size_t)hidden_size;
    for (int r = 0; r < LV_SANA_PROMPT_ROWS; r++) {
        int at = p->select[r];
        if (at >= 0 && at < p->n_ids) memcpy(y + r * H, hidden + (size_t)at * H, H * sizeof *y);
        else memset(y + r * H, 0, H * sizeof *y);
    }
}

lv_status lv_sana_prompt_encode(lv_gemma2 *enc, const lv_sana_prompt *p, float *y, float *mask) {
    if (!enc || !p || !p->ids || p->n_ids < 1 || !y)
        return lv_error(LV_ERR_INVALID, "sana prompt: encode needs an encoder, a built prompt and an output");
    int H = lv_gemma2_config_of(enc)->hidden_size;
    float *hidden = malloc((size_t)p->n_ids * (size_t)H * sizeof *hidden);
    if (!hidden) return lv_error(LV_ERR_NOMEM, "sana prompt: out of memory for %d x %d rows", p->n_ids, H);
    lv_status s = lv_gemma2_encode(enc, p->ids, p->n_ids, hidden);
    if (s == LV_OK) {
        lv_sana_prompt_select(p, hidden, H, y);
        if (mask) memcpy(mask, p->mask, sizeof p->mask);
    }
    free(hidden);
    return s;
}

int lv_sana_prompt_truncation(const lv_sana_prompt *p, char *buf, size_t size) {
    if (!p || p->needed <= p->n_ids) return 0;
    /* the tokens before the text given: <bos> and the instruction */
    int own = p->needed - p->prompt_start, kept = p->n_ids - p->prompt_start;
    if (kept < 0) kept = 0;
    if (buf && size) {
        if (p->n_instruction > 0)
            snprintf(buf, size, "%d tokens, truncated: the model reads its first %d, the last %d are dropped "
                     "(SANA-Video keeps %d tokens, %d of them <bos> and its instruction)", own, kept,
                     p->needed - p->n_ids, p->length, p->prompt_start);
        else
            snprintf(buf, size, "%d tokens, truncated: the model reads its first %d, the last %d are dropped "
                     "(SANA-Video keeps %d tokens, <bos> included)", own, kept, p->needed - p->n_ids, p->length);
    }
    return 1;
}
