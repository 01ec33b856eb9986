/* Image-to-video conditioning in the chunk sampler (lv_chunk_options.cond_frames / cond)
 * against diffusers' SanaImageToVideoPipeline loop run over the PyTorch reference of the
 * transformer (tests/reference/make_i2v_vectors.py; vectors in
 * assets/testdata/sana-video/tiny-hd32-diffusers-i2v.safetensors): the tiny diffusers-layout
 * pipeline's transformer, the image latent in frame 0 of chunk 0 at timestep 0 in both CFG
 * branches, frame 0 held through every update, then a plain chunk over the carried state;
 * and the single clip (lv_sample_clip.cond_frames), the pipeline's own sampler, DPM-Solver++ 2M
 * over every frame with its scheduler stepping frames 1...
 *
 * Bound: NMSE <= 1e-8, the bound of every DiT and sampler check (tests/models/test_sana_dit.c).
 * A float32 run of the same reference lands 3e-12 from the float64 one over the whole chunk
 * (the generator's checks_nmse), CFG 3 included (the clip: 1.3e-11, CFG 6); the engine's fp32 lands 1e-11 .. 3e-10 here
 * (test_sana_dit's sampler without conditioning: 7e-11 on its output), so 1e-8 leaves a margin
 * of 30 and still catches a conditioning done otherwise by orders of magnitude: frame 0 at the
 * step's t instead of 0 (held all the same) moves chunk 0 by NMSE 0.18, and chunk 0's other
 * frames without the image are 0.20 away (measured on the reference). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dit.h"
#include "longvk/sampler.h"
#include "longvk/weights.h"
#include "test_support.h"

#define NMSE_BOUND 1e-8
#define MODEL LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers"
#define VECTORS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32-diffusers-i2v.safetensors"

typedef struct fixture {
    lv_ctx *ctx;
    lv_sana_file *model;
    lv_weights *vec;
    lv_dit *dit;
    int C, F, H, W, cf, nsteps;
} fixture;

static const float *vec(const fixture *fx, const char *name, int64_t expect_numel) {
    const lv_weight *w = lv_weights_find(fx->vec, name);
    cr_assert_not_null(w, "vector '%s' missing", name);
    cr_assert_eq(w->dtype, LV_F32);
    if (expect_numel >= 0) cr_assert_eq((int64_t)lv_weight_numel(w), expect_numel, "%s size", name);
    return w->data;
}

static void check(const char *what, const float *got, const float *want, size_t n) {
    double e = ts_nmse(got, want, n);
    cr_log_info("%-28s nmse %.3g", what, e);
    cr_assert(e <= NMSE_BOUND, "%s: nmse %.3g > %.0e", what, e, NMSE_BOUND);
}

static void open_fixture(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->ctx = ts_ctx();
    cr_assert_eq(lv_sana_file_open(MODEL, NULL, NULL, &fx->model), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_sana_file_naming(fx->model), LV_SANA_NAMES_DIFFUSERS);
    cr_assert_eq(lv_weights_open(VECTORS, &fx->vec), LV_OK, "%s", lv_last_error());
    lv_dit_options opt = {.cached_blocks = LV_CACHED_ALL};
    cr_assert_eq(lv_dit_create(fx->ctx, fx->model, &opt, &fx->dit), LV_OK, "%s", lv_last_error());
    const lv_weight *noise = lv_weights_find(fx->vec, "noise");
    cr_assert_not_null(noise);
    fx->C = (int)noise->shape[0];
    fx->F = (int)noise->shape[1];
    fx->H = (int)noise->shape[2];
    fx->W = (int)noise->shape[3];
    fx->cf = atoi(lv_weights_metadata(fx->vec, "chunk_frames"));
    cr_assert_eq(atoi(lv_weights_metadata(fx->vec, "cond_frames")), 1);
    fx->nsteps = (int)lv_weight_numel(lv_weights_find(fx->vec, "steps"));
    const lv_weight *y = lv_weights_find(fx->vec, "y");
    int L = (int)y->shape[0];
    cr_assert_eq(lv_dit_set_text(fx->ctx, fx->dit, 0, y->data, L, vec(fx, "mask", L)), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_set_text(fx->ctx, fx->dit, 1, y->data, L, vec(fx, "neg_mask", L)), LV_OK, "%s",
                 lv_last_error());
}

static void close_fixture(fixture *fx) {
    lv_dit_destroy(fx->ctx, fx->dit);
    lv_weights_close(fx->vec);
    lv_sana_file_close(fx->model);
    ts_ctx_done(fx->ctx);
}

/* frames [f0, f0 + n) of a [C, F, H, W] array */
static float *frames_of(const float *x, int C, int F, int HW, int f0, int n) {
    float *out = malloc((size_t)C * n * HW * sizeof *out);
    cr_assert_not_null(out);
    for (int c = 0; c < C; c++)
        memcpy(out + (size_t)c * n * HW, x + ((size_t)c * F + f0) * HW, (size_t)n * HW * sizeof *out);
    return out;
}

static void check_layer_states(fixture *fx, int chunk) {
    const lv_sana_config *cfg = lv_dit_config(fx->dit);
    int H = cfg->heads, D = cfg->head_dim, C = cfg->hidden;
    int64_t P = (int64_t)(fx->H / cfg->patch[1]) * (fx->W / cfg->patch[2]);
    float *S = malloc((size_t)H * D * D * 4), *z = malloc((size_t)H * D * 4), *cl = malloc((size_t)P * C * 4);
    char name[128];
    for (int b = 0; b < cfg->depth; b++) {
        cr_assert_eq(lv_dit_layer_state(fx->ctx, fx->dit, b, S, z, cl, P * C), LV_OK, "%s", lv_last_error());
        snprintf(name, sizeof name, "chunk%d_layer%d_S", chunk, b);
        check(name, S, vec(fx, name, (int64_t)H * D * D), (size_t)H * D * D);
        snprintf(name, sizeof name, "chunk%d_layer%d_z", chunk, b);
        check(name, z, vec(fx, name, (int64_t)H * D), (size_t)H * D);
        snprintf(name, sizeof name, "chunk%d_layer%d_conv_last", chunk, b);
        check(name, cl, vec(fx, name, P * C), (size_t)(P * C));
    }
    free(S);
    free(z);
    free(cl);
}

/* One chunk through lv_longsana_chunk with the reference's draws; cond NULL: none. */
static void run_chunk(fixture *fx, int chunk, int f0, int n, const float *cond, float *x0) {
    int HW = fx->H * fx->W;
    size_t total = (size_t)fx->C * fx->F * HW;
    float *draws[16];
    cr_assert_leq(fx->nsteps, 16);
    draws[0] = frames_of(vec(fx, "noise", (int64_t)total), fx->C, fx->F, HW, f0, n);
    for (int s = 1; s < fx->nsteps; s++)
        draws[s] = frames_of(vec(fx, "renoise", -1) + (size_t)(s - 1) * total, fx->C, fx->F, HW, f0, n);
    lv_chunk_options opt = {.timesteps = vec(fx, "steps", fx->nsteps), .steps = fx->nsteps,
                            .cfg_scale = atof(lv_weights_metadata(fx->vec, "guidance")),
                            .noise = (const float *const *)draws, .cond_frames = cond ? 1 : 0, .cond = cond};
    cr_assert_eq(lv_longsana_chunk(fx->ctx, fx->dit, &opt, chunk, f0, n, fx->H, fx->W, x0), LV_OK, "%s",
                 lv_last_error());
    for (int s = 0; s < fx->nsteps; s++) free(draws[s]);
}

/* Chunk 0 with the image latent in frame 0, then chunk 1 over the state it left: outputs and
 * the carried state after each against the pipeline's loop. */
Test(image_conditioning, tiny_pipeline_chunk_with_image_latent) {
    fixture fx;
    open_fixture(&fx);
    int HW = fx.H * fx.W, cf = fx.cf, rest = fx.F - cf;
    const float *image = vec(&fx, "image_latent", (int64_t)fx.C * HW);
    float *x0 = malloc((size_t)fx.C * cf * HW * 4), *x1 = malloc((size_t)fx.C * rest * HW * 4);
    run_chunk(&fx, 0, 0, cf, image, x0);
    /* frame 0 is the image latent itself, not a prediction of it */
    for (int c = 0; c < fx.C; c++)
        cr_assert_eq(memcmp(x0 + (size_t)c * cf * HW, image + (size_t)c * HW, (size_t)HW * 4), 0,
                     "channel %d of frame 0 is not the image latent", c);
    check("chunk0_out", x0, vec(&fx, "chunk0_out", (int64_t)fx.C * cf * HW), (size_t)fx.C * cf * HW);
    check_layer_states(&fx, 0);
    run_chunk(&fx, 1, cf, rest, NULL, x1);
    check("chunk1_out", x1, vec(&fx, "chunk1_out", (int64_t)fx.C * rest * HW), (size_t)fx.C * rest * HW);
    check_layer_states(&fx, 1);
    free(x0);
    free(x1);
    close_fixture(&fx);
}

/* The pipeline's first transformer call, both CFG branches: frame 0 at timestep 0, the
 * others at the first step's t (what the sampler hands the DiT). */
Test(image_conditioning, tiny_first_call_both_branches) {
    fixture fx;
    open_fixture(&fx);
    int HW = fx.H * fx.W, cf = fx.cf;
    size_t n = (size_t)fx.C * cf * HW;
    float *x = frames_of(vec(&fx, "noise", -1), fx.C, fx.F, HW, 0, cf), *out = malloc(n * 4);
    const float *image = vec(&fx, "image_latent", (int64_t)fx.C * HW);
    for (int c = 0; c < fx.C; c++) memcpy(x + (size_t)c * cf * HW, image + (size_t)c * HW, (size_t)HW * 4);
    float ts[16];
    for (int f = 0; f < cf; f++) ts[f] = f == 0 ? 0.0f : vec(&fx, "steps", -1)[0];
    const char *names[2] = {"first_pass_cond", "first_pass_uncond"};
    for (int slot = 0; slot < 2; slot++) {
        lv_dit_pass pass = {.x = x, .frames = cf, .height = fx.H, .width = fx.W, .timesteps = ts, .text_slot = slot};
        cr_assert_eq(lv_dit_forward(fx.ctx, fx.dit, &pass, out), LV_OK, "%s", lv_last_error());
        check(names[slot], out, vec(&fx, names[slot], (int64_t)n), n);
    }
    free(x);
    free(out);
    close_fixture(&fx);
}

/* The single clip (lv_sample_clip, what the pipeline itself runs): DPM-Solver++ 2M over every
 * frame at once with the image latent in frame 0, against the pipeline's loop with its
 * scheduler stepping frames 1.. */
Test(image_conditioning, tiny_single_clip_with_image_latent) {
    fixture fx;
    open_fixture(&fx);
    int HW = fx.H * fx.W;
    size_t n = (size_t)fx.C * fx.F * HW;
    const float *image = vec(&fx, "image_latent", (int64_t)fx.C * HW);
    float *x = malloc(n * 4);
    lv_clip_options opt = {.steps = atoi(lv_weights_metadata(fx.vec, "clip_steps")),
                           .shift = atof(lv_weights_metadata(fx.vec, "clip_shift")),
                           .cfg_scale = atof(lv_weights_metadata(fx.vec, "clip_guidance")),
                           .solver = LV_SOLVER_DPMPP_2M, .noise = vec(&fx, "noise", (int64_t)n), .cond_frames = 1,
                           .cond = image};
    cr_assert_eq(lv_sample_clip(fx.ctx, fx.dit, &opt, fx.F, fx.H, fx.W, x), LV_OK, "%s", lv_last_error());
    for (int c = 0; c < fx.C; c++)
        cr_assert_eq(memcmp(x + (size_t)c * fx.F * HW, image + (size_t)c * HW, (size_t)HW * 4), 0,
                     "channel %d of frame 0 is not the image latent", c);
    check("clip_out", x, vec(&fx, "clip_out", (int64_t)n), n);
    free(x);
    close_fixture(&fx);
}

/* Bad conditioning arguments are errors naming them, before any pass. */
Test(image_conditioning, bad_arguments) {
    fixture fx;
    open_fixture(&fx);
    float x0[4 * 3 * 64], cond[4 * 64] = {0};
    float steps[1] = {1000};
    lv_chunk_options opt = {.timesteps = steps, .steps = 1, .cfg_scale = 1.0, .cond_frames = 1, .cond = NULL};
    cr_assert_eq(lv_longsana_chunk(fx.ctx, fx.dit, &opt, 0, 0, 3, 8, 8, x0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "cond is NULL"), "%s", lv_last_error());
    opt.cond = cond;
    opt.cond_frames = 4;
    cr_assert_eq(lv_longsana_chunk(fx.ctx, fx.dit, &opt, 0, 0, 3, 8, 8, x0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "4 conditioning frames"), "%s", lv_last_error());
    opt.cond_frames = -1;
    cr_assert_eq(lv_longsana_chunk(fx.ctx, fx.dit, &opt, 0, 0, 3, 8, 8, x0), LV_ERR_INVALID);
    cr_assert_eq(lv_dit_chunks(fx.dit), 0, "nothing was committed");
    lv_clip_options clip = {.steps = 2, .shift = 8, .cfg_scale = 1, .cond_frames = 1, .cond = NULL};
    cr_assert_eq(lv_sample_clip(fx.ctx, fx.dit, &clip, 3, 8, 8, x0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "cond is NULL"), "%s", lv_last_error());
    clip.cond = cond;
    clip.cond_frames = 4;
    cr_assert_eq(lv_sample_clip(fx.ctx, fx.dit, &clip, 3, 8, 8, x0), LV_ERR_INVALID);
    close_fixture(&fx);
}
