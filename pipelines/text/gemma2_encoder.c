/* The prompt of a latent-space model through its Gemma-2 text encoder, as SANA-Video's
 * inference script prepares it (longvk/sana_prompt.h), behind lv_text_encoder. Tokenizing
 * happens when the prompts are set, before any device work, so that a bad tokenizer or
 * encoder fails at once; the encoder is uploaded, run and freed in one call (or, held, kept
 * for the next prompts of a schedule and freed by the release), before the DiT's weights go
 * to the device, so that a run's peak memory is the larger of the two models, not their sum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

static lv_status build(lv_text_gemma2 *t, const char *what, const char *text, int negative, int motion_score,
                       lv_sana_prompt *out, void (*warn)(void *, const char *), void *user) {
    lv_sana_prompt_options po;
    lv_sana_prompt_options_default(&po);
    po.negative = negative;
    po.motion_score = motion_score;
    lv_status s = lv_sana_prompt_build(t->tok, text, &po, out);
    if (s != LV_OK) return lv_error_prefix(s, "%s", what);
    char lost[256], msg[320];
    if (warn && lv_sana_prompt_truncation(out, lost, sizeof lost)) { /* in the prompt's own tokens */
        snprintf(msg, sizeof msg, "%s: %s", what, lost);
        warn(user, msg);
    }
    return LV_OK;
}

int lv_text_gemma2_weight_dtype(lv_text_weights w) {
    static const int dtypes[] = {-1, LV_F32, LV_F16, LV_BF16, LV_Q8_0, LV_Q4_K};
    return (unsigned)w <= LV_TEXT_WEIGHTS_Q4_K ? dtypes[w] : -2;
}

lv_status lv_text_gemma2_open(lv_text_gemma2 *t, const lv_text_gemma2_options *opt) {
    memset(t, 0, sizeof *t);
    const char *encoder = opt->encoder, *tokenizer = opt->tokenizer;
    snprintf(t->encoder, sizeof t->encoder, "%s", encoder);
    t->motion_score = opt->motion_score;
    t->softcap = opt->softcap;
    t->weight_dtype = lv_text_gemma2_weight_dtype(opt->weights);
    if (t->weight_dtype == -2)
        return lv_error(LV_ERR_INVALID, "lv_text_encoder_open_gemma2: weights %d (lv_text_weights)", (int)opt->weights);
    LV_TRY(lv_gemma2_file_open(encoder, NULL, &t->file));
    const lv_gemma2_config *cfg = lv_gemma2_file_config(t->file);
    if (cfg->hidden_size != opt->caption_channels)
        return lv_error(LV_ERR_INVALID, "the text encoder %s has hidden size %d, the DiT reads captions of %d "
                        "channels (caption_channels): not the model's text encoder", encoder, cfg->hidden_size,
                        opt->caption_channels);
    char found[4096];
    if (!tokenizer) {
        if (!lv_tokenizer_find(encoder, found, sizeof found))
            return lv_error(LV_ERR_IO, "no tokenizer.model in or beside the text encoder %s (in it, its tokenizer/ "
                            "or ../tokenizer/; a GGUF's own tokenizer.ggml.* metadata serves when it is a "
                            ".gguf): give the tokenizer (--tokenizer FILE); longvk reads SentencePiece's "
                            "tokenizer.model, not tokenizer.json", encoder);
        tokenizer = found;
    }
    LV_TRY(lv_tokenizer_open(tokenizer, &t->tok));
    if (lv_tokenizer_vocab_size(t->tok) > cfg->vocab_size)
        return lv_error(LV_ERR_INVALID, "the tokenizer %s has %d pieces, the text encoder %s embeds %d: they do not "
                        "belong together", lv_tokenizer_path(t->tok), lv_tokenizer_vocab_size(t->tok), encoder,
                        cfg->vocab_size);
    return LV_OK;
}

lv_status lv_text_gemma2_set_prompts(lv_text_gemma2 *t, const char *prompt, bool with_negative, const char *negative,
                                     void (*warn)(void *, const char *), void *user) {
    lv_sana_prompt_free(&t->prompt);
    lv_sana_prompt_free(&t->negative);
    t->with_negative = false;
    LV_TRY(build(t, "prompt", prompt, 0, t->motion_score, &t->prompt, warn, user));
    if (with_negative) {
        LV_TRY(build(t, "negative prompt", negative ? negative : lv_sana_video_negative_prompt, 1, 0, &t->negative,
                     warn, user));
        t->with_negative = true;
    }
    return LV_OK;
}

lv_status lv_text_gemma2_encode(lv_text_gemma2 *t, lv_ctx *ctx, float *y, float *mask, uint64_t *peak) {
    lv_status s = LV_OK;
    lv_gemma2 *enc = t->held;
    if (!enc) {
        lv_gemma2_options opt;
        lv_gemma2_options_default(&opt);
        opt.attn_softcap = t->softcap ? LV_GEMMA2_SOFTCAP_CONFIG : 0.0f;
        opt.stop = t->stop;
        opt.weight_dtype = t->weight_dtype;
        s = lv_gemma2_create(ctx, t->file, &opt, &enc);
        if (s != LV_OK) return lv_error_prefix(s, "the text encoder %s", t->encoder);
        if (t->stop && *t->stop) s = lv_error(LV_ERR_INTERRUPTED, "stopped on request after the upload of its weights");
        if (t->hold) t->held = enc; /* kept for the next prompts (lv_text_gemma2_release) */
    }
    int H = lv_gemma2_config_of(enc)->hidden_size;
    if (s == LV_OK) s = lv_sana_prompt_encode(enc, &t->prompt, y, mask);
    if (s == LV_OK && t->with_negative)
        s = lv_sana_prompt_encode(enc, &t->negative, y + (size_t)LV_SANA_PROMPT_ROWS * H,
                                  mask + LV_SANA_PROMPT_ROWS);
    lv_gemma2_memory mem;
    lv_gemma2_memory_usage(enc, &mem);
    if (mem.weights + mem.work > t->held_peak) t->held_peak = mem.weights + mem.work;
    if (peak) *peak = t->held ? t->held_peak : mem.weights + mem.work;
    if (!t->held) lv_gemma2_destroy(enc);
    if (s != LV_OK) return lv_error_prefix(s, "the text encoder %s", t->encoder);
    return LV_OK;
}

void lv_text_gemma2_release(lv_text_gemma2 *t) {
    lv_gemma2_destroy(t->held);
    t->held = NULL;
    t->hold = false;
    t->held_peak = 0;
}

void lv_text_gemma2_close(lv_text_gemma2 *t) {
    lv_text_gemma2_release(t);
    lv_sana_prompt_free(&t->prompt);
    lv_sana_prompt_free(&t->negative);
    lv_tokenizer_close(t->tok);
    lv_gemma2_file_close(t->file);
    memset(t, 0, sizeof *t);
}
