/* The DiT's device-memory plan (lv_dit_memory_plan_of) against the engine's own accounting:
 * the peak lv_ctx_memory_peak measures over lv_dit_create, lv_dit_set_text of two slots and
 * two chunks' passes (the second chunk's first read pass meets new timesteps with the
 * conditioning cache full and every conv cache committed: the steady state the plan
 * describes) equals the plan's peak within 2 % (issue 56). Four configurations: the tiny
 * model at f32; the head-dim-112 model with q8_0 weights, f16 activations and the GPUs'
 * tap-major temporal conv and split state pass (forced through LONGVK_TCONV and
 * LONGVK_LINATTN_SPLITS); the tiny model with f16 weights and a window of 2 chunks; the
 * head-dim-112 model at f16 with the Mix-FFN made one frame at a time (LONGVK_FFN_SLICE). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dit.h"
#include "test_support.h"

typedef struct plan_case {
    const char *model;
    lv_dit_weights weights;
    lv_precision precision;
    int cached_blocks;
    int frames, height, width, text_tokens;
} plan_case;

static void run_passes(lv_ctx *ctx, lv_dit *dit, const lv_sana_config *cfg, const plan_case *pc, float *x,
                       float *out, int chunk, const float *steps, int nsteps) {
    float ts[64];
    for (int s = 0; s <= nsteps; s++) {
        bool write = s == nsteps;
        for (int f = 0; f < pc->frames; f++) ts[f] = write ? 0.0f : steps[s];
        lv_dit_pass pass = {.x = x, .frames = pc->frames, .height = pc->height, .width = pc->width,
                            .timesteps = ts, .frame_offset = chunk * pc->frames, .text_slot = s % 2,
                            .commit = write};
        cr_assert_eq(lv_dit_forward(ctx, dit, &pass, write ? NULL : out), LV_OK, "%s", lv_last_error());
    }
    (void)cfg;
}

static void check_plan(const plan_case *pc) {
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.precision = (int)pc->precision;
    lv_ctx *ctx = ts_ctx_with(copt);
    char path[1024];
    snprintf(path, sizeof path, "%s/testdata/sana-video/%s.weights.safetensors", LONGVK_ASSETS_DIR, pc->model);
    lv_sana_file *model = NULL;
    cr_assert_eq(lv_sana_file_open(path, NULL, NULL, &model), LV_OK, "%s", lv_last_error());
    const lv_sana_config *cfg = lv_sana_file_config(model);

    lv_dit_plan_input in = {.weights = pc->weights, .stored = lv_sana_file_tensor(model, "blocks.0.attn.qkv.weight")->dtype,
                            .precision = lv_ctx_precision(ctx), .frames = pc->frames, .height = pc->height,
                            .width = pc->width, .text_tokens = pc->text_tokens, .text_slots = 2,
                            .cached_blocks = pc->cached_blocks};
    lv_dit_plan_device(ctx, &in);
    lv_dit_memory_plan plan;
    cr_assert_eq(lv_dit_memory_plan_of(cfg, &in, &plan), LV_OK, "%s", lv_last_error());

    const uint64_t base = lv_ctx_memory_in_use(ctx);
    lv_ctx_memory_reset_peak(ctx);
    lv_dit_options opt = {.cached_blocks = pc->cached_blocks, .weights = pc->weights};
    lv_dit *dit = NULL;
    cr_assert_eq(lv_dit_create(ctx, model, &opt, &dit), LV_OK, "%s", lv_last_error());
    /* what create holds: the weights, the state's slots (no conv cache before a commit) and
     * the small tensor of non-finite counts */
    const uint64_t created = lv_ctx_memory_in_use(ctx) - base - lv_dit_state_bytes(dit);
    size_t ny = (size_t)pc->text_tokens * cfg->caption_channels;
    float *y = ts_rand_alloc(ny, 11, -1.0f, 1.0f);
    for (int slot = 0; slot < 2; slot++)
        cr_assert_eq(lv_dit_set_text(ctx, dit, slot, y, pc->text_tokens, NULL), LV_OK, "%s", lv_last_error());
    size_t nx = (size_t)cfg->in_channels * pc->frames * pc->height * pc->width;
    float *x = ts_rand_alloc(nx, 12, -1.0f, 1.0f), *out = malloc(nx * sizeof *out);
    cr_assert_not_null(out);
    /* chunk 0: four steps and the write pass (5 cache entries); chunk 1: two new steps */
    const float first[4] = {900, 700, 500, 300}, second[2] = {800, 600};
    run_passes(ctx, dit, cfg, pc, x, out, 0, first, 4);
    run_passes(ctx, dit, cfg, pc, x, out, 1, second, 2);
    const uint64_t measured = lv_ctx_memory_peak(ctx) - base;

    cr_log_info("%s: plan %llu bytes (weights %llu, state %llu, text %llu, conditioning %llu, pass %llu, block %llu, "
                "final %llu, set_text %llu), measured %llu (%+.3f %%); weights measured %llu",
                pc->model, (unsigned long long)plan.peak, (unsigned long long)plan.weights,
                (unsigned long long)plan.state, (unsigned long long)plan.text, (unsigned long long)plan.conditioning,
                (unsigned long long)plan.pass, (unsigned long long)plan.block, (unsigned long long)plan.final_layer,
                (unsigned long long)plan.set_text, (unsigned long long)measured,
                100.0 * ((double)plan.peak - (double)measured) / (double)measured,
                (unsigned long long)created);
    /* the parts held between passes are exact: the weights (the checks tensor beside them) and
     * the state once committed */
    cr_assert(created >= plan.weights && created - plan.weights <= 1024,
              "weights: plan %llu, created %llu", (unsigned long long)plan.weights, (unsigned long long)created);
    cr_assert_eq(lv_dit_state_bytes(dit), plan.state, "state: plan %llu, dit %llu",
                 (unsigned long long)plan.state, (unsigned long long)lv_dit_state_bytes(dit));
    double rel = ((double)plan.peak - (double)measured) / (double)measured;
    cr_assert(rel <= 0.02 && rel >= -0.02, "%s: plan %llu bytes, measured peak %llu (%+.2f %%)", pc->model,
              (unsigned long long)plan.peak, (unsigned long long)measured, 100.0 * rel);
    free(x), free(out), free(y);
    lv_dit_destroy(ctx, dit);
    lv_sana_file_close(model);
    ts_ctx_done(ctx);
}

Test(dit_memory_plan, tiny_f32) {
    plan_case pc = {"tiny-hd32", LV_DIT_WEIGHTS_AS_STORED, LV_PRECISION_F32, LV_CACHED_ALL, 3, 8, 12, 7};
    check_plan(&pc);
}

Test(dit_memory_plan, hd112_q8_0_f16_gpu_paths) {
    setenv("LONGVK_TCONV", "gemm", 1);
    setenv("LONGVK_LINATTN_SPLITS", "4", 1);
    plan_case pc = {"hd112", LV_DIT_WEIGHTS_Q8_0, LV_PRECISION_F16, LV_CACHED_ALL, 2, 16, 16, 9};
    check_plan(&pc);
}

Test(dit_memory_plan, tiny_f16_weights_window) {
    plan_case pc = {"tiny-hd32", LV_DIT_WEIGHTS_F16, LV_PRECISION_F32, 2, 4, 16, 8, 5};
    check_plan(&pc);
}

/* The Mix-FFN over slices of one frame (LONGVK_FFN_SLICE below a frame's 64 tokens), three
 * frames: the plan's block holds 4 x [64, Fh] instead of 4 x [192, Fh], and the measured
 * peak agrees. */
Test(dit_memory_plan, hd112_ffn_slices) {
    setenv("LONGVK_FFN_SLICE", "64", 1);
    plan_case pc = {"hd112", LV_DIT_WEIGHTS_AS_STORED, LV_PRECISION_F16, LV_CACHED_ALL, 3, 16, 16, 9};
    check_plan(&pc);
    lv_sana_config cfg;
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-480p", &cfg), LV_OK);
    lv_dit_plan_input in = {.stored = LV_BF16, .precision = LV_PRECISION_F16, .frames = 10, .height = 60,
                            .width = 104, .text_tokens = 300, .text_slots = 1, .cached_blocks = 2,
                            .ffn_slice_tokens = 1 << 30};
    lv_dit_memory_plan whole, sliced;
    cr_assert_eq(lv_dit_memory_plan_of(&cfg, &in, &whole), LV_OK, "%s", lv_last_error());
    in.ffn_slice_tokens = 4096; /* 2 frames of 30 x 52 tokens a slice: 3120 of 15600 tokens */
    cr_assert_eq(lv_dit_memory_plan_of(&cfg, &in, &sliced), LV_OK, "%s", lv_last_error());
    const uint64_t saved = 4ull * (15600 - 3120) * (uint64_t)cfg.ffn_hidden * 2; /* f16 */
    cr_log_info("480p block temporaries: whole frames %llu bytes, slices of 2 frames %llu", (unsigned long long)whole.block,
                (unsigned long long)sliced.block);
    cr_assert(whole.block - sliced.block >= saved - 4096 && whole.block - sliced.block <= saved + 4096,
              "saved %llu bytes, expected %llu", (unsigned long long)(whole.block - sliced.block),
              (unsigned long long)saved);
    unsetenv("LONGVK_FFN_SLICE");
}

Test(dit_memory_plan, refuses_bad_input) {
    lv_sana_config cfg;
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-480p", &cfg), LV_OK);
    lv_dit_plan_input in = {.stored = LV_BF16, .precision = LV_PRECISION_F32, .frames = 10, .height = 61,
                            .width = 104, .text_tokens = 300, .text_slots = 2, .cached_blocks = LV_CACHED_ALL};
    lv_dit_memory_plan plan;
    cr_assert_eq(lv_dit_memory_plan_of(&cfg, &in, &plan), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "61") != NULL, "%s", lv_last_error());
    in.height = 60;
    in.text_slots = 3;
    cr_assert_eq(lv_dit_memory_plan_of(&cfg, &in, &plan), LV_ERR_INVALID);
    in.text_slots = 2;
    cr_assert_eq(lv_dit_memory_plan_of(&cfg, &in, &plan), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_memory_plan_of(NULL, &in, &plan), LV_ERR_INVALID);
}
