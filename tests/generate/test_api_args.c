/* Issue 44: the public entry points of longvk/generate.h, sampler.h and dit.h that take
 * pointers from users check them: a NULL (or a value out of range) is LV_ERR_INVALID with a
 * message, never a crash; the functions without a status take NULL as "none". And the
 * device-side non-finite checks of the DiT and of LongSANA's chunks name their stage: a
 * written chunk with a NaN poisons the carried state ("after the write pass"), a NaN in
 * the noise the first prediction ("step 1 of 2"). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "test_support.h"

#define EXPECT_INVALID(call)                                                                                       \
    do {                                                                                                           \
        lv_clear_error();                                                                                          \
        lv_status st_ = (call);                                                                                    \
        cr_assert_eq(st_, LV_ERR_INVALID, "%s: %d (%s)", #call, (int)st_, lv_last_error());                       \
        cr_assert(lv_last_error()[0] != '\0', "%s: no message", #call);                                           \
    } while (0)

Test(api_args, generate_h) {
    lv_generate_options_default(NULL);
    lv_model_card_longsana(NULL);
    lv_model_card_free(NULL);
    EXPECT_INVALID(lv_generate(NULL, NULL, NULL, NULL, NULL));
    EXPECT_INVALID(lv_model_card_of(NULL, NULL));
    lv_model_card card;
    EXPECT_INVALID(lv_model_card_parse("{}", "x", NULL));
    cr_assert_eq(lv_model_card_parse(NULL, NULL, &card), LV_ERR_FORMAT, "no JSON: a format error");
    cr_assert(strstr(lv_last_error(), "model card") != NULL, "%s", lv_last_error());
    cr_assert_eq(lv_model_card_of(NULL, &card), LV_OK);
    int ids[64];
    float mask[64];
    EXPECT_INVALID(lv_model_card_tokenize(NULL, "red", ids, mask, NULL, 0));
    EXPECT_INVALID(lv_model_card_tokenize(&card, "red", NULL, mask, NULL, 0));
    EXPECT_INVALID(lv_model_card_tokenize(&card, "red", ids, NULL, NULL, 0));
    cr_assert_eq(lv_model_card_tokenize(&card, NULL, ids, mask, NULL, 0), LV_OK, "a NULL prompt is empty");
    cr_assert_eq(mask[0], 0.0f);
    lv_weights *w;
    cr_assert_eq(lv_weights_open_memory(lv_default_model_data(), lv_default_model_size(), "default", &w), LV_OK);
    lv_text_tables t;
    lv_word_vocab vocab = lv_model_card_vocab(&card);
    EXPECT_INVALID(lv_text_tables_open(NULL, &vocab, 32, &t));
    EXPECT_INVALID(lv_text_tables_open(w, NULL, 32, &t));
    EXPECT_INVALID(lv_text_tables_open(w, &vocab, 32, NULL));
    EXPECT_INVALID(lv_text_tables_open(w, &vocab, 0, &t));
    cr_assert_eq(lv_text_tables_open(w, &vocab, 32, &t), LV_OK, "%s", lv_last_error());
    float *y = malloc((size_t)vocab.text_len * 32 * sizeof *y);
    EXPECT_INVALID(lv_text_tables_embed(NULL, &vocab, "red", y, mask, NULL, 0));
    EXPECT_INVALID(lv_text_tables_embed(&t, NULL, "red", y, mask, NULL, 0));
    EXPECT_INVALID(lv_text_tables_embed(&t, &vocab, "red", NULL, mask, NULL, 0));
    EXPECT_INVALID(lv_text_tables_embed(&t, &vocab, "red", y, NULL, NULL, 0));
    lv_text_tables closed = {0};
    EXPECT_INVALID(lv_text_tables_embed(&closed, &vocab, "red", y, mask, NULL, 0));
    cr_assert_eq(lv_text_tables_embed(&t, &vocab, "red", y, mask, NULL, 0), LV_OK);
    free(y);
    lv_weights_close(w);
    lv_model_card_free(&card);
}

typedef struct model {
    lv_ctx *ctx;
    lv_sana_file *file;
    lv_dit *dit;
    int L, cap, H, W, C;
} model;

static void open_model(model *m) {
    memset(m, 0, sizeof *m);
    m->ctx = ts_ctx();
    cr_assert_eq(lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default", &m->file), LV_OK);
    lv_dit_options opt = {.cached_blocks = 2};
    cr_assert_eq(lv_dit_create(m->ctx, m->file, &opt, &m->dit), LV_OK, "%s", lv_last_error());
    const lv_sana_config *cfg = lv_dit_config(m->dit);
    m->L = 20;
    m->cap = cfg->caption_channels;
    m->H = m->W = 32;
    m->C = cfg->in_channels;
    float *y = ts_rand_alloc((size_t)m->L * m->cap, 1, -1, 1);
    cr_assert_eq(lv_dit_set_text(m->ctx, m->dit, 0, y, m->L, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_set_text(m->ctx, m->dit, 1, y, m->L, NULL), LV_OK, "%s", lv_last_error());
    free(y);
}

static void close_model(model *m) {
    lv_dit_destroy(m->ctx, m->dit);
    lv_sana_file_close(m->file);
    ts_ctx_done(m->ctx);
}

Test(api_args, dit_h) {
    model m;
    open_model(&m);
    lv_ctx *ctx = m.ctx;
    lv_dit *dit = m.dit, *d2;
    EXPECT_INVALID(lv_dit_create(NULL, m.file, NULL, &d2));
    cr_assert_null(d2);
    EXPECT_INVALID(lv_dit_create(ctx, NULL, NULL, &d2));
    EXPECT_INVALID(lv_dit_create(ctx, m.file, NULL, NULL));
    lv_dit_destroy(ctx, NULL);
    lv_dit_destroy(NULL, NULL);
    cr_assert_null(lv_dit_config(NULL));
    cr_assert(!lv_dit_carries_state(NULL));
    cr_assert_eq(lv_dit_state_bytes(NULL), 0);
    cr_assert_eq(lv_dit_chunks(NULL), 0);
    lv_dit_set_tap(NULL, NULL, NULL);
    float y[64 * 32] = {0};
    EXPECT_INVALID(lv_dit_set_text(NULL, dit, 0, y, 4, NULL));
    EXPECT_INVALID(lv_dit_set_text(ctx, NULL, 0, y, 4, NULL));
    EXPECT_INVALID(lv_dit_set_text(ctx, dit, 0, NULL, 4, NULL));
    EXPECT_INVALID(lv_dit_set_text(ctx, dit, 2, y, 4, NULL));
    EXPECT_INVALID(lv_dit_set_text(ctx, dit, 0, y, 0, NULL));
    size_t n = (size_t)m.C * 4 * m.H * m.W;
    float *x = ts_rand_alloc(n, 2, -1, 1), *out = malloc(n * sizeof *out);
    float ts[4] = {500, 500, 500, 500};
    lv_dit_pass pass = {.x = x, .frames = 4, .height = m.H, .width = m.W, .timesteps = ts};
    EXPECT_INVALID(lv_dit_forward(NULL, dit, &pass, out));
    EXPECT_INVALID(lv_dit_forward(ctx, NULL, &pass, out));
    EXPECT_INVALID(lv_dit_forward(ctx, dit, NULL, out));
    lv_dit_pass bad = pass;
    bad.x = NULL;
    EXPECT_INVALID(lv_dit_forward(ctx, dit, &bad, out));
    float nan_ts[4] = {500, NAN, 500, 500};
    bad = pass;
    bad.timesteps = nan_ts;
    EXPECT_INVALID(lv_dit_forward(ctx, dit, &bad, out));
    EXPECT_INVALID(lv_dit_reset(NULL, dit));
    EXPECT_INVALID(lv_dit_reset(ctx, NULL));
    EXPECT_INVALID(lv_dit_layer_state(NULL, dit, 0, NULL, NULL, NULL, 0));
    EXPECT_INVALID(lv_dit_layer_state(ctx, NULL, 0, NULL, NULL, NULL, 0));
    EXPECT_INVALID(lv_dit_layer_state(ctx, dit, 99, NULL, NULL, NULL, 0));
    float *data = NULL;
    int64_t count = 0;
    EXPECT_INVALID(lv_dit_state_save(NULL, dit, &data, &count));
    EXPECT_INVALID(lv_dit_state_save(ctx, NULL, &data, &count));
    EXPECT_INVALID(lv_dit_state_save(ctx, dit, NULL, &count));
    EXPECT_INVALID(lv_dit_state_save(ctx, dit, &data, NULL));
    EXPECT_INVALID(lv_dit_state_load(NULL, dit, x, 4, 1, 64));
    EXPECT_INVALID(lv_dit_state_load(ctx, NULL, x, 4, 1, 64));
    EXPECT_INVALID(lv_dit_state_load(ctx, dit, NULL, 4, 1, 64));
    EXPECT_INVALID(lv_dit_state_load(ctx, dit, x, 4, -1, 64));
    EXPECT_INVALID(lv_dit_state_load(ctx, dit, x, 4, 1, 0));

    /* a finite pass is fine; a written chunk holding a NaN poisons the carried state: the
     * write pass names it (it has no prediction to check) */
    cr_assert_eq(lv_dit_forward(ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
    for (size_t i = 0; i < n; i++) cr_assert(isfinite(out[i]));
    float zero[4] = {0, 0, 0, 0};
    lv_dit_pass write = pass;
    write.timesteps = zero;
    write.commit = true;
    cr_assert_eq(lv_dit_forward(ctx, dit, &write, NULL), LV_OK, "%s", lv_last_error());
    x[7] = NAN;
    write.frame_offset = 4;
    cr_assert_eq(lv_dit_forward(ctx, dit, &write, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "the carried state of layer 0 has non-finite values after the write pass") !=
                  NULL, "%s", lv_last_error());
    /* a read pass over the poisoned state: its prediction */
    x[7] = 0.25f;
    pass.frame_offset = 8;
    cr_assert_eq(lv_dit_forward(ctx, dit, &pass, out), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "the DiT's output has non-finite values (") != NULL, "%s", lv_last_error());
    free(x);
    free(out);
    close_model(&m);
}

Test(api_args, sampler_h) {
    lv_noise_fill(1, 2, NULL, 10);
    lv_flow_sigmas(4, 8.0, NULL);
    lv_flow_sigmas_euler(0, 8.0, NULL);
    cr_assert_null(lv_dit_twin_ctx(NULL));
    cr_assert_null(lv_dit_twin_dit(NULL));
    lv_dit_twin_destroy(NULL);
    lv_dit_twin_start(NULL, NULL, NULL);
    EXPECT_INVALID(lv_dit_twin_wait(NULL));
    model m;
    open_model(&m);
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    lv_dit_twin *twin;
    EXPECT_INVALID(lv_dit_twin_create(NULL, m.file, NULL, &twin));
    EXPECT_INVALID(lv_dit_twin_create(&copt, NULL, NULL, &twin));
    EXPECT_INVALID(lv_dit_twin_create(&copt, m.file, NULL, NULL));
    cr_assert_eq(lv_dit_twin_create(&copt, m.file, NULL, &twin), LV_OK, "%s", lv_last_error());
    EXPECT_INVALID(lv_dit_twin_wait(twin)); /* nothing started: no endless wait */
    lv_dit_twin_start(twin, NULL, NULL);
    EXPECT_INVALID(lv_dit_twin_wait(twin));
    lv_dit_twin_destroy(twin);

    size_t n = (size_t)m.C * 4 * m.H * m.W;
    float *x0 = malloc(n * sizeof *x0);
    const float steps[2] = {600, 400};
    lv_chunk_options o = {.timesteps = steps, .steps = 2, .seed = 3, .cfg_scale = 1.0};
    EXPECT_INVALID(lv_longsana_chunk(NULL, m.dit, &o, 0, 0, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, NULL, &o, 0, 0, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, NULL, 0, 0, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &o, 0, 0, 4, m.H, m.W, NULL));
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &o, 0, 0, 0, m.H, m.W, x0));
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &o, -1, 0, 4, m.H, m.W, x0));
    lv_chunk_options bad = o;
    bad.cfg_scale = NAN;
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &bad, 0, 0, 4, m.H, m.W, x0));
    bad = o;
    bad.timesteps = NULL;
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &bad, 0, 0, 4, m.H, m.W, x0));
    const float nan_steps[2] = {600, NAN};
    bad.timesteps = nan_steps;
    lv_chunk_stage stage = LV_CHUNK_STAGE_WRITE_PASS;
    bad.failed_stage = &stage;
    EXPECT_INVALID(lv_longsana_chunk(m.ctx, m.dit, &bad, 0, 0, 4, m.H, m.W, x0));
    cr_assert_eq(stage, LV_CHUNK_STAGE_NONE, "bad arguments are no stage's");
    lv_clip_options clip = {.steps = 2, .shift = 8, .cfg_scale = 1};
    EXPECT_INVALID(lv_sample_clip(NULL, m.dit, &clip, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_sample_clip(m.ctx, NULL, &clip, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_sample_clip(m.ctx, m.dit, NULL, 4, m.H, m.W, x0));
    EXPECT_INVALID(lv_sample_clip(m.ctx, m.dit, &clip, 4, m.H, m.W, NULL));
    clip.shift = NAN;
    EXPECT_INVALID(lv_sample_clip(m.ctx, m.dit, &clip, 4, m.H, m.W, x0));

    /* user noise with a NaN: the first step's prediction, named */
    float *noise = ts_rand_alloc(n, 9, -1, 1);
    noise[100] = NAN;
    const float *draws[2] = {noise, noise};
    lv_chunk_options with_noise = o;
    with_noise.noise = draws;
    with_noise.failed_stage = &stage;
    cr_assert_eq(lv_longsana_chunk(m.ctx, m.dit, &with_noise, 0, 0, 4, m.H, m.W, x0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "step 1 of 2: the DiT's output has non-finite values") == lv_last_error(), "%s",
              lv_last_error());
    cr_assert_eq(stage, LV_CHUNK_STAGE_STEP, "the stage is set with the message that names it");
    /* a sound chunk after it: nothing was committed by the failed one */
    cr_assert_eq(lv_dit_chunks(m.dit), 0);
    o.failed_stage = &stage;
    cr_assert_eq(lv_longsana_chunk(m.ctx, m.dit, &o, 0, 0, 4, m.H, m.W, x0), LV_OK, "%s", lv_last_error());
    cr_assert_eq(stage, LV_CHUNK_STAGE_NONE, "a sound chunk leaves no stage");
    cr_assert_eq(lv_dit_chunks(m.dit), 1);
    free(noise);
    free(x0);
    close_model(&m);
}
