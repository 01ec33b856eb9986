/* The embedded default model on the engine against its PyTorch model
 * (assets/default-model/training/model.py, float64; vectors from training/make_vectors.py):
 * the tokenizer, a one-shot forward, and a LongSANA generation of several blocks with the
 * reference's noise, each block made as the model's card prescribes (the first block's own
 * recipe, then the others'), over the model's window of cached blocks, including the carried
 * state at the end.
 * Bound: normalised MSE <= 1e-8, as for the SANA-Video vectors. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "test_support.h"

#define VECTORS LONGVK_ASSETS_DIR "/default-model/vectors.safetensors"
#define NMSE_BOUND 1e-8

typedef struct fixture {
    lv_ctx *ctx;
    lv_sana_file *model;
    lv_model_card card;
    lv_weights *vec;
} fixture;

static const float *vec(const fixture *fx, const char *name, int64_t numel) {
    const lv_weight *w = lv_weights_find(fx->vec, name);
    cr_assert_not_null(w, "vector '%s' missing", name);
    cr_assert_eq((int64_t)lv_weight_numel(w), numel, "%s: %lld values", name, (long long)lv_weight_numel(w));
    return w->data;
}

static void check(const char *what, const float *got, const float *want, size_t n) {
    double e = ts_nmse(got, want, n);
    cr_log_info("%-24s nmse %.3g", what, e);
    cr_assert(e <= NMSE_BOUND, "%s: nmse %.3g > %.0e", what, e, NMSE_BOUND);
}

static void open_fixture(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    cr_assert_eq(lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default model",
                                          &fx->model), LV_OK, "%s", lv_last_error());
    const char *card = lv_weights_metadata(lv_sana_file_weights(fx->model), "longvk");
    cr_assert_eq(lv_model_card_parse(card, "default model", &fx->card), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &fx->vec), LV_OK, "%s", lv_last_error());
}

static void close_fixture(fixture *fx) {
    lv_weights_close(fx->vec);
    lv_model_card_free(&fx->card);
    lv_sana_file_close(fx->model);
}

Test(default_model, tokenizer_matches_reference) {
    fixture fx;
    open_fixture(&fx);
    cJSON *cases = cJSON_Parse(lv_weights_metadata(fx.vec, "tokenizer_cases"));
    cr_assert_not_null(cases);
    int L = fx.card.text_len, ids[4096];
    float mask[4096];
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        char unknown[256];
        cr_assert_eq(lv_model_card_tokenize(&fx.card, text, ids, mask, unknown, sizeof unknown), LV_OK);
        int n = cJSON_GetArraySize(want);
        for (int i = 0; i < L; i++) {
            cr_assert_eq(mask[i], i < n ? 1.0f : 0.0f, "'%s': mask[%d]", text, i);
            cr_assert_eq(ids[i], i < n ? cJSON_GetArrayItem(want, i)->valueint : 0, "'%s': id %d", text, i);
        }
        const cJSON *unk = cJSON_GetObjectItem(c, "unknown");
        if (cJSON_GetArraySize(unk) > 0)
            cr_assert(strstr(unknown, cJSON_GetArrayItem(unk, 0)->valuestring) != NULL, "'%s': %s", text, unknown);
    }
    cJSON_Delete(cases);
    close_fixture(&fx);
}

/* The tokenizer before issue 44, kept as the reference for ASCII prompts: lowercase ASCII,
 * split on every byte outside a-z, known words in order up to text_len. */
static int old_tokenize(const lv_model_card *card, const char *prompt, int *ids) {
    int n = 0;
    char word[64];
    size_t len = 0;
    for (const char *p = prompt;; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c >= 'a' && c <= 'z') {
            if (len + 1 < sizeof word) word[len++] = c;
            continue;
        }
        if (len) {
            word[len] = '\0';
            for (int i = 0; i < card->vocab_size; i++)
                if (!strcmp(card->vocab[i], word)) {
                    if (n < card->text_len) ids[n++] = i;
                    break;
                }
            len = 0;
        }
        if (!*p) break;
    }
    return n;
}

static bool valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (!n) return false;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80) return false;
        p += n;
    }
    return true;
}

/* Issue 44: what the tokenizer ignores is said, and why, in the prompt's own characters
 * (it dropped words past the text length, digits and emoji silently, and reported
 * "ünïcödé" as "n c d"); ASCII prompts keep the ids they always had. */
Test(default_model, tokenizer_says_what_it_ignores) {
    fixture fx;
    open_fixture(&fx);
    const lv_model_card *card = &fx.card;
    int ids[4096], want[4096];
    float mask[4096];
    char msg[512];
    struct {
        const char *prompt, *ascii_twin, *said;
    } cases[] = {
        {"Two ünïcödé red 42 🎈 balls, ball2", "two red balls ball",
         "ignored (not in the vocabulary): ünïcödé, 42, 🎈, 2"},
        {"ZEBRAS and zebras", "and", "ignored (not in the vocabulary): ZEBRAS, zebras"},
        {"one one one one one one one one one one one one one one one one one one one one one one red ball", NULL,
         "ignored (past the model's 20 words): one, red, ball"},
        {"red \xff\xfe blue", "red blue", "ignored (not in the vocabulary): \xEF\xBF\xBD, \xEF\xBF\xBD"},
        {"👍🏽 red 👨‍👩‍👧 ball", "red ball", "ignored (not in the vocabulary): 👍🏽, 👨‍👩‍👧"},
        {"café — “red” · ball…", "red ball", "ignored (not in the vocabulary): café"},
        {"two red balls", NULL, ""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cr_assert_eq(lv_model_card_tokenize(card, cases[c].prompt, ids, mask, msg, sizeof msg), LV_OK);
        cr_assert_str_eq(msg, cases[c].said, "'%s'", cases[c].prompt);
        int n = old_tokenize(card, cases[c].ascii_twin ? cases[c].ascii_twin : cases[c].prompt, want);
        for (int i = 0; i < card->text_len; i++) {
            cr_assert_eq(mask[i], i < n ? 1.0f : 0.0f, "'%s': mask[%d]", cases[c].prompt, i);
            cr_assert_eq(ids[i], i < n ? want[i] : 0, "'%s': id %d", cases[c].prompt, i);
        }
    }
    /* 'past' lists known words only, and both lists can come together */
    cr_assert_eq(lv_model_card_tokenize(card, "a a a a a a a a a a a a a a a a a a a a 42 red", ids, mask, msg, sizeof msg),
                 LV_OK);
    cr_assert_str_eq(msg, "ignored (not in the vocabulary): 42; ignored (past the model's 20 words): red");
    /* a list longer than the buffer ends with "..." and never inside a character */
    for (size_t size = 4; size < 64; size++) {
        char small[64];
        memset(small, 'X', sizeof small);
        cr_assert_eq(lv_model_card_tokenize(card, "ünïcödé ünïcödéa ünïcödéb 🎈 ünïcödéc", ids, mask, small, size), LV_OK);
        cr_assert_lt(strlen(small), size);
        cr_assert(valid_utf8(small), "size %zu: '%s'", size, small);
        cr_assert(strlen(small) == 0 || strstr(small, "...") != NULL, "size %zu: '%s'", size, small);
    }
    /* ASCII prompts: the same ids as before, on random mixes of known and unknown words,
     * digits, punctuation and case */
    const char *bits[] = {"red", "Balls", "TWO", "on", "a", "zebra", "42", "x9y", "dark-blue", "it's", ",", "!", "  ",
                          "bouncing.", "GrAdIeNt", "ball2", "_", "\t", "three3three"};
    uint64_t r = 12345;
    for (int t = 0; t < 300; t++) {
        char prompt[1024] = "";
        int words = (int)(r % 40);
        for (int k = 0; k < words; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            strcat(prompt, bits[(r >> 33) % (sizeof bits / sizeof bits[0])]);
            if ((r >> 20) & 1) strcat(prompt, " ");
        }
        cr_assert_eq(lv_model_card_tokenize(card, prompt, ids, mask, msg, sizeof msg), LV_OK);
        int n = old_tokenize(card, prompt, want);
        for (int i = 0; i < card->text_len; i++) {
            cr_assert_eq(mask[i], i < n ? 1.0f : 0.0f, "'%s': mask[%d]", prompt, i);
            cr_assert_eq(ids[i], i < n ? want[i] : 0, "'%s': id %d", prompt, i);
        }
        r = r * 6364136223846793005ull + 1442695040888963407ull;
    }
    close_fixture(&fx);
}

/* The text encoder (word, previous-word and next-word tables) against model.py's text_encode. */
Test(default_model, text_encoder_matches_reference) {
    fixture fx;
    open_fixture(&fx);
    int L = fx.card.text_len, cap = lv_sana_file_config(fx.model)->caption_channels;
    lv_text_tables tables;
    lv_word_vocab vocab = lv_model_card_vocab(&fx.card);
    cr_assert_eq(lv_text_tables_open(lv_sana_file_weights(fx.model), &vocab, cap, &tables), LV_OK, "%s",
                 lv_last_error());
    cr_assert_not_null(tables.prev, "the default model has a previous-word table");
    cr_assert_not_null(tables.next, "the default model has a next-word table");
    float *y = malloc((size_t)L * cap * sizeof *y), *mask = malloc((size_t)L * sizeof *mask);
    cr_assert_eq(lv_text_tables_embed(&tables, &vocab, lv_weights_metadata(fx.vec, "prompt"), y, mask, NULL, 0),
                 LV_OK, "%s", lv_last_error());
    const float *want_y = vec(&fx, "y", (int64_t)L * cap), *want_mask = vec(&fx, "mask", L);
    for (int i = 0; i < L; i++) cr_assert_eq(mask[i], want_mask[i], "mask[%d]", i);
    /* sums of at most three float32 table rows: the reference adds them in float32 too,
     * possibly in another order (one rounding per addition) */
    for (int64_t e = 0; e < (int64_t)L * cap; e++)
        cr_assert(fabsf(y[e] - want_y[e]) <= 4e-7f * (1.0f + fabsf(want_y[e])), "y[%lld] = %.9g, reference %.9g",
                  (long long)e, (double)y[e], (double)want_y[e]);
    free(y);
    free(mask);
    close_fixture(&fx);
}

Test(default_model, longsana_generation_matches_reference, .timeout = 300) {
    fixture fx;
    open_fixture(&fx);
    const lv_sana_config *cfg = lv_sana_file_config(fx.model);
    lv_ctx *ctx = ts_ctx();
    lv_dit_options opt = {.cached_blocks = fx.card.cached_blocks};
    lv_dit *dit;
    cr_assert_eq(lv_dit_create(ctx, fx.model, &opt, &dit), LV_OK, "%s", lv_last_error());
    int L = fx.card.text_len, cap = cfg->caption_channels;
    cr_assert_eq(lv_dit_set_text(ctx, dit, 0, vec(&fx, "y", (int64_t)L * cap), L, vec(&fx, "mask", L)), LV_OK,
                 "%s", lv_last_error());
    int bf = fx.card.block_frames, H = fx.card.height, W = fx.card.width;
    int chunks = atoi(lv_weights_metadata(fx.vec, "chunks"));
    size_t n = (size_t)3 * bf * H * W;
    float *out = malloc(n * 4), ts[64];
    char name[64];
    /* one-shot forward of chunk 0's noise at t = 1000 over an empty state */
    for (int f = 0; f < bf; f++) ts[f] = 1000.0f;
    lv_dit_pass pass = {.x = vec(&fx, "chunk0_noise", (int64_t)n), .frames = bf, .height = H, .width = W,
                        .timesteps = ts};
    cr_assert_eq(lv_dit_forward(ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
    check("first_chunk_v_t1000", out, vec(&fx, "first_chunk_v_t1000", (int64_t)n), n);
    /* CFG's unconditional input: the empty prompt (every mask entry 0) */
    float *empty_y = calloc((size_t)L * cap, sizeof *empty_y), *empty_mask = calloc((size_t)L, sizeof *empty_mask);
    cr_assert_eq(lv_dit_set_text(ctx, dit, 1, empty_y, L, empty_mask), LV_OK, "%s", lv_last_error());
    /* the generation, with the reference's noise draws; a warm-started block starts from the
     * engine's own previous block's last frame, as `longvk generate` does */
    size_t plane = (size_t)H * W;
    float *last = malloc(3 * plane * 4);
    for (int c = 0; c < chunks; c++) {
        const lv_block_recipe *rec = c == 0 ? &fx.card.first_block : &fx.card.later_blocks;
        lv_chunk_options copt = {.timesteps = rec->timesteps, .steps = rec->steps, .cfg_scale = rec->cfg_scale,
                                 .sampler = rec->sampler, .cfg_last_steps = rec->cfg_last_steps,
                                 .warm = rec->warm_start ? last : NULL};
        const float *draws[LV_CARD_MAX_STEPS];
        snprintf(name, sizeof name, "chunk%d_noise", c);
        draws[0] = vec(&fx, name, (int64_t)n);
        if (rec->sampler == LV_CHUNK_RENOISE) {
            snprintf(name, sizeof name, "chunk%d_renoise", c);
            const float *ren = vec(&fx, name, (int64_t)n * (rec->steps - 1));
            for (int k = 1; k < rec->steps; k++) draws[k] = ren + (size_t)(k - 1) * n;
        }
        copt.noise = draws;
        cr_assert_eq(lv_longsana_chunk(ctx, dit, &copt, c, c * bf, bf, H, W, out), LV_OK, "%s", lv_last_error());
        snprintf(name, sizeof name, "chunk%d_out", c);
        check(name, out, vec(&fx, name, (int64_t)n), n);
        for (int ch = 0; ch < 3; ch++)
            memcpy(last + ch * plane, out + ((size_t)ch * bf + bf - 1) * plane, plane * 4);
    }
    free(last);
    /* the carried state after the last chunk: S, z over the window, the cached frame */
    int heads = cfg->heads, D = cfg->head_dim, C = cfg->hidden;
    int64_t P = (int64_t)(H / cfg->patch[1]) * (W / cfg->patch[2]);
    float *Sg = malloc((size_t)heads * D * D * 4), *zg = malloc((size_t)heads * D * 4);
    float *cl = malloc((size_t)P * C * 4), *clt = malloc((size_t)P * C * 4);
    for (int b = 0; b < cfg->depth; b++) {
        cr_assert_eq(lv_dit_layer_state(ctx, dit, b, Sg, zg, cl, P * C), LV_OK, "%s", lv_last_error());
        snprintf(name, sizeof name, "final_layer%d_S", b);
        check(name, Sg, vec(&fx, name, (int64_t)heads * D * D), (size_t)heads * D * D);
        snprintf(name, sizeof name, "final_layer%d_z", b);
        check(name, zg, vec(&fx, name, (int64_t)heads * D), (size_t)heads * D);
        snprintf(name, sizeof name, "final_layer%d_conv_last", b); /* [C, P] there, [P, C] here */
        const float *want = vec(&fx, name, P * C);
        for (int64_t p = 0; p < P; p++)
            for (int ch = 0; ch < C; ch++) clt[p * C + ch] = want[(int64_t)ch * P + p];
        check(name, cl, clt, (size_t)(P * C));
    }
    free(Sg);
    free(zg);
    free(cl);
    free(clt);
    free(out);
    free(empty_y);
    free(empty_mask);
    lv_dit_destroy(ctx, dit);
    ts_ctx_done(ctx);
    close_fixture(&fx);
}

/* The card's block recipes: defaults, a first block of its own, and clear errors. */
Test(default_model, card_block_recipes) {
    const char *base = "\"resolution\": [32, 32], \"block_frames\": 2, \"cached_blocks\": 6, \"text_len\": 8, "
                       "\"sample_timesteps\": [1000, 750, 500, 250]";
    char json[1024];
    lv_model_card card;
    snprintf(json, sizeof json, "{%s}", base);
    cr_assert_eq(lv_model_card_parse(json, "card", &card), LV_OK, "%s", lv_last_error());
    cr_assert_eq(card.later_blocks.sampler, LV_CHUNK_RENOISE);
    cr_assert_eq(card.first_block.steps, 4); /* as the others */
    cr_assert_eq(card.first_block.timesteps[3], 250.0f);
    cr_assert_eq(card.first_block.cfg_scale, 1.0);
    cr_assert_eq(card.later_blocks.cfg_last_steps, 0); /* CFG (if any) at every step */
    cr_assert(!card.later_blocks.warm_start);
    cr_assert_eq(card.burn_in_blocks, 0); /* every block made is written */
    lv_model_card_free(&card);

    snprintf(json, sizeof json, "{%s, \"burn_in_blocks\": 40}", base);
    cr_assert_eq(lv_model_card_parse(json, "card", &card), LV_OK, "%s", lv_last_error());
    cr_assert_eq(card.burn_in_blocks, 40);
    lv_model_card_free(&card);

    snprintf(json, sizeof json, "{%s, \"sampler\": \"renoise\", \"first_block\": {\"timesteps\": [1000, 900, 800, "
             "700, 600, 500, 400, 300, 200, 100], \"sampler\": \"euler\", \"cfg_scale\": 3.5}}", base);
    cr_assert_eq(lv_model_card_parse(json, "card", &card), LV_OK, "%s", lv_last_error());
    cr_assert_eq(card.later_blocks.steps, 4);
    cr_assert_eq(card.first_block.steps, 10);
    cr_assert_eq(card.first_block.timesteps[9], 100.0f);
    cr_assert_eq(card.first_block.sampler, LV_CHUNK_EULER);
    cr_assert_eq(card.first_block.cfg_scale, 3.5);
    lv_model_card_free(&card);

    /* later blocks guided at their last step only and warm-started; the first block keeps
     * CFG at every step and cannot be warm-started */
    snprintf(json, sizeof json, "{%s, \"cfg_scale\": 2, \"cfg_last_steps\": 1, \"warm_start\": true, "
             "\"first_block\": {\"timesteps\": [1000, 500], \"cfg_scale\": 3}}", base);
    cr_assert_eq(lv_model_card_parse(json, "card", &card), LV_OK, "%s", lv_last_error());
    cr_assert_eq(card.later_blocks.cfg_scale, 2.0);
    cr_assert_eq(card.later_blocks.cfg_last_steps, 1);
    cr_assert(card.later_blocks.warm_start);
    cr_assert_eq(card.first_block.cfg_last_steps, 0);
    cr_assert(!card.first_block.warm_start);
    lv_model_card_free(&card);

    const char *bad[][2] = {
        {"\"sampler\": \"ddim\"", "\"sampler\" must be \"renoise\" or \"euler\""},
        {"\"first_block\": 3", "\"first_block\" must be an object"},
        {"\"first_block\": {\"timesteps\": [1000, 1200]}", "\"timesteps\"[1] is not a timestep"},
        {"\"first_block\": {\"timesteps\": []}", "\"timesteps\" must list 1 to"},
        {"\"first_block\": {\"cfg_scale\": \"high\"}", "\"cfg_scale\" must be a number"},
        {"\"cfg_last_steps\": 5", "\"cfg_last_steps\" must be an integer in [0, 4]"},
        {"\"burn_in_blocks\": -2", "\"burn_in_blocks\" must be an integer in [0, 4096]"},
        {"\"burn_in_blocks\": 1.5", "\"burn_in_blocks\" must be an integer in [0, 4096]"},
        {"\"cfg_last_steps\": 1.5", "\"cfg_last_steps\" must be an integer"},
        {"\"warm_start\": 1", "\"warm_start\" must be true or false"},
        {"\"first_block\": {\"warm_start\": true}", "cannot have \"warm_start\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{%s, %s}", base, bad[i][0]);
        cr_assert_eq(lv_model_card_parse(json, "card", &card), LV_ERR_FORMAT, "%s accepted", bad[i][0]);
        cr_assert(strstr(lv_last_error(), bad[i][1]) != NULL, "%s: %s", bad[i][0], lv_last_error());
    }
}
