/* SANA-Video's prompt assembly (longvk/sana_prompt.h) on the tiny tokenizer and model of
 * assets/testdata/gemma2/. The expected ids, selection and mask are computed here step by
 * step from the inference script's Python (pipelines/gemma2/README.md, section 0):
 *   chi = "\n".join(chi_prompt); text = chi + prompt.strip() + " motion score: 10."
 *   n_chi = len(tok.encode(chi)); L = n_chi + 300 - 2
 *   ids = tok(text, max_length=L, truncation=True)  (then right padding to L with 0)
 *   select = [0] + list(range(-299, 0)) over the padded length L; mask = ids[select] != pad
 * and for the negative prompt: tok(neg, max_length=300), all 300 rows. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "test_support.h"

#define DIR LONGVK_ASSETS_DIR "/testdata/gemma2"
#define ROWS 300

static lv_tokenizer *open_tok(void) {
    lv_tokenizer *t = NULL;
    cr_assert_eq(lv_tokenizer_open(DIR "/tokenizer.model", &t), LV_OK, "%s", lv_last_error());
    return t;
}

/* All the ids of `text` with <bos>, untruncated (malloc'd, count in *n). */
static int32_t *all_ids(const lv_tokenizer *t, const char *text, int *n) {
    int needed = 0, got = 0;
    cr_assert_eq(lv_tokenizer_encode(t, text, strlen(text), LV_TOKENIZE_GEMMA, NULL, 0, &got, &needed), LV_OK);
    int32_t *ids = malloc((size_t)needed * sizeof *ids);
    cr_assert_eq(lv_tokenizer_encode(t, text, strlen(text), LV_TOKENIZE_GEMMA, ids, needed, &got, NULL), LV_OK);
    cr_assert_eq(got, needed);
    *n = needed;
    return ids;
}

/* The padded sequence of length L (pad 0 after the text's first L ids), the Python way,
 * and the 300 rows picked by Python indices [0] + range(-299, 0). */
static void expect(const lv_sana_prompt *p, const int32_t *full, int n_full, int L) {
    int32_t *padded = calloc((size_t)L, sizeof *padded);
    float *attn = calloc((size_t)L, sizeof *attn);
    int valid = n_full < L ? n_full : L;
    for (int i = 0; i < valid; i++) padded[i] = full[i], attn[i] = 1;
    cr_assert_eq(p->length, L);
    cr_assert_eq(p->n_ids, valid);
    cr_assert_eq(p->needed, n_full);
    for (int i = 0; i < valid; i++) cr_assert_eq(p->ids[i], padded[i], "id %d: %d, want %d", i, p->ids[i], padded[i]);
    int py_index[ROWS];
    py_index[0] = 0;
    for (int k = -299, r = 1; k < 0; k++, r++) py_index[r] = L + k; /* a negative Python index */
    for (int r = 0; r < ROWS; r++) {
        cr_assert_eq(p->select[r], py_index[r], "row %d", r);
        cr_assert_eq(p->mask[r], attn[py_index[r]], "mask of row %d", r);
    }
    free(padded);
    free(attn);
}

static char *concat3(const char *a, const char *b, const char *c) {
    char *s = malloc(strlen(a) + strlen(b) + strlen(c) + 1);
    strcpy(s, a);
    strcat(s, b);
    strcat(s, c);
    return s;
}

Test(sana_prompt, the_instruction_text) {
    /* spot checks of the text copied from the SANA-Video config (8 lines, '\n' between) */
    const char *s = lv_sana_video_instruction;
    cr_assert_eq(strncmp(s, "Given a user prompt, generate an \"Enhanced prompt\" that provides", 64), 0);
    int lines = 1;
    for (const char *c = s; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 8);
    size_t n = strlen(s);
    cr_assert_eq(n, 1057); /* len("\n".join(chi_prompt)) in Python */
    cr_assert_str_eq(s + n - 14, "\nUser Prompt: ");
}

Test(sana_prompt, short_prompt_is_padded_and_selected) {
    lv_tokenizer *t = open_tok();
    int n_chi, n_full;
    int32_t *chi = all_ids(t, lv_sana_video_instruction, &n_chi);
    /* the prompt is stripped and the motion suffix appended */
    char *text = concat3(lv_sana_video_instruction, "A red ball rolls slowly across the floor.", " motion score: 10.");
    int32_t *full = all_ids(t, text, &n_full);
    lv_sana_prompt p;
    cr_assert_eq(lv_sana_prompt_build(t, "  A red ball rolls slowly across the floor.\n", NULL, &p), LV_OK, "%s",
                 lv_last_error());
    cr_assert_eq(p.n_instruction, n_chi);
    cr_log_info("n_chi %d, L %d, tokens %d", n_chi, p.length, p.n_ids);
    cr_assert_gt(n_chi, 100);
    expect(&p, full, n_full, n_chi + 298);
    /* the instruction's tokens start the sequence (bar the last, which may merge with the
     * prompt's first word: "magic number 2: [bos], [_]") */
    for (int i = 0; i < n_chi - 1; i++) cr_assert_eq(p.ids[i], chi[i]);
    /* short: the selection holds <bos>, then the end of the instruction, the prompt, pads */
    int first_pad_row = 1 + (p.n_ids - (p.length - 299));
    cr_assert_lt(first_pad_row, ROWS);
    cr_assert_eq(p.mask[first_pad_row - 1], 1.0f);
    cr_assert_eq(p.mask[first_pad_row], 0.0f);
    cr_assert_eq(p.mask[ROWS - 1], 0.0f);
    lv_sana_prompt_free(&p);
    free(text);
    free(full);
    free(chi);
    lv_tokenizer_close(t);
}

Test(sana_prompt, long_prompt_is_truncated_to_L) {
    lv_tokenizer *t = open_tok();
    size_t len = 100 * 1024;
    char *prompt = malloc(len + 1);
    const char *word = "slowly across the floor ";
    for (size_t i = 0; i < len; i++) prompt[i] = word[i % strlen(word)];
    prompt[len] = '\0';
    lv_sana_prompt_options opt;
    lv_sana_prompt_options_default(&opt);
    opt.motion_score = 3;
    /* strip() removes the trailing space */
    char *stripped = strdup(prompt);
    stripped[len - 1] = '\0';
    char *text = concat3(lv_sana_video_instruction, stripped, " motion score: 3.");
    int n_chi, n_full;
    free(all_ids(t, lv_sana_video_instruction, &n_chi));
    int32_t *full = all_ids(t, text, &n_full);
    lv_sana_prompt p;
    cr_assert_eq(lv_sana_prompt_build(t, prompt, &opt, &p), LV_OK, "%s", lv_last_error());
    cr_assert_gt(n_full, n_chi + 298);
    expect(&p, full, n_full, n_chi + 298);
    for (int r = 0; r < ROWS; r++) cr_assert_eq(p.mask[r], 1.0f);
    lv_sana_prompt_free(&p);
    free(full);
    free(text);
    free(stripped);
    free(prompt);
    lv_tokenizer_close(t);
}

Test(sana_prompt, negative_prompt_has_no_instruction) {
    lv_tokenizer *t = open_tok();
    lv_sana_prompt_options opt;
    lv_sana_prompt_options_default(&opt);
    opt.negative = 1;
    int n_full;
    int32_t *full = all_ids(t, lv_sana_video_negative_prompt, &n_full);
    lv_sana_prompt p;
    cr_assert_eq(lv_sana_prompt_build(t, lv_sana_video_negative_prompt, &opt, &p), LV_OK, "%s", lv_last_error());
    cr_assert_eq(p.n_instruction, 0);
    expect(&p, full, n_full, 300);
    for (int r = 0; r < ROWS; r++) cr_assert_eq(p.select[r], r);
    lv_sana_prompt_free(&p);
    free(full);
    /* a negative prompt is not stripped: a leading space is a token of its own here */
    int n_sp;
    int32_t *sp = all_ids(t, " leading space", &n_sp);
    cr_assert_eq(lv_sana_prompt_build(t, " leading space", &opt, &p), LV_OK);
    expect(&p, sp, n_sp, 300);
    lv_sana_prompt_free(&p);
    free(sp);
    /* no instruction and no suffix for a prompt: L = 300 */
    opt.negative = 0;
    opt.instruction = "";
    opt.motion_score = 0;
    int32_t *plain = all_ids(t, "leading space", &n_sp);
    cr_assert_eq(lv_sana_prompt_build(t, " leading space ", &opt, &p), LV_OK);
    expect(&p, plain, n_sp, 300);
    lv_sana_prompt_free(&p);
    free(plain);
    opt.motion_score = -1;
    cr_assert_eq(lv_sana_prompt_build(t, "x", &opt, &p), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "motion score"), "%s", lv_last_error());
    lv_tokenizer_close(t);
}

Test(sana_prompt, encoded_rows_are_the_encoders_at_the_selection, .timeout = 300) {
    lv_tokenizer *t = open_tok();
    lv_gemma2_file *f;
    cr_assert_eq(lv_gemma2_file_open(DIR "/tiny.weights.safetensors", NULL, &f), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    lv_gemma2 *enc;
    cr_assert_eq(lv_gemma2_create(ctx, f, NULL, &enc), LV_OK, "%s", lv_last_error());
    lv_sana_prompt p;
    cr_assert_eq(lv_sana_prompt_build(t, "A cat sleeping", NULL, &p), LV_OK, "%s", lv_last_error());
    const int H = 96;
    float *hidden = malloc((size_t)p.n_ids * H * sizeof *hidden), *y = malloc((size_t)ROWS * H * sizeof *y);
    float mask[ROWS];
    cr_assert_eq(lv_gemma2_encode(enc, p.ids, p.n_ids, hidden), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_sana_prompt_encode(enc, &p, y, mask), LV_OK, "%s", lv_last_error());
    int valid = 0;
    for (int r = 0; r < ROWS; r++) {
        cr_assert_eq(mask[r], p.mask[r]);
        int at = r == 0 ? 0 : p.length - ROWS + r;
        for (int j = 0; j < H; j++) {
            float want = at < p.n_ids ? hidden[(size_t)at * H + j] : 0.0f;
            cr_assert_eq(y[(size_t)r * H + j], want, "row %d (position %d), column %d", r, at, j);
        }
        valid += mask[r] == 1.0f;
    }
    cr_assert_eq(valid, 1 + p.n_ids - (p.length - 299));
    lv_sana_prompt_free(&p);
    free(hidden);
    free(y);
    lv_gemma2_destroy(enc);
    ts_ctx_done(ctx);
    lv_gemma2_file_close(f);
    lv_tokenizer_close(t);
}
