/* The presets and set-up shared by `bench dit` and `bench sp` (bench_dit_setup.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_dit_model.h"
#include "bench_dit_setup.h"

const bench_dit_shape bench_dit_shapes[] = {
    /* Wan2.1 VAE: stride (4, 8, 8); patch 1x2x2 makes 30 x 52 = 1560 tokens a frame */
    {"sana-video-2b-480p", 60, 104, 480, 832, 4, "Wan2.1"},
    /* LTX-2 VAE: stride (8, 32, 32); SANA's 720p release decodes 704 x 1280; patch 1 makes
     * 22 x 40 = 880 tokens a frame */
    {"sana-video-2b-720p", 22, 40, 704, 1280, 8, "LTX-2"},
};

const cli_choice bench_dit_presets[] = {{"sana-video-2b-480p", 0}, {"sana-video-2b-720p", 1}, {0}};

const char *bench_dit_parse_latent(const char *s, void *dest) {
    bench_dit_args *a = dest;
    if (!cli_parse_dims(s, 2, 1, 4096, a->latent)) return "is not HxW with sizes in [1, 4096]";
    a->have_latent = true;
    return NULL;
}

static void rand_fill(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
}

static const char *keep(char *msg, size_t size, const char *text) {
    snprintf(msg, size, "%s", text);
    return msg;
}

/* --nmse's probe: one read pass at t = 1000 (LongSANA's first step) over latents x of the
 * chunk's shape, text y in slot 0, on a context of its own (the measured context's memory
 * peak never sees it), the dit made from `file` with `opt` but the matrices as `weights`. */
static lv_status probe_forward(const lv_ctx_options *ctx_opt, const lv_sana_file *file, const lv_dit_options *opt,
                               lv_dit_weights weights, const float *y, int L, const float *x, int frames, int h,
                               int w, float *out, uint64_t *weight_bytes) {
    lv_ctx *ctx = NULL;
    lv_dit *dit = NULL;
    lv_dit_options o = *opt;
    o.weights = weights;
    float ts[64];
    for (int f = 0; f < frames && f < 64; f++) ts[f] = 1000;
    lv_dit_pass pass = {.x = x, .frames = frames, .height = h, .width = w, .timesteps = ts};
    lv_status s = lv_ctx_create(ctx_opt, &ctx);
    uint64_t base = ctx ? lv_ctx_memory_in_use(ctx) : 0;
    if (s == LV_OK) s = lv_dit_create(ctx, file, &o, &dit);
    if (s == LV_OK) *weight_bytes = lv_ctx_memory_in_use(ctx) - base;
    if (s == LV_OK) s = lv_dit_set_text(ctx, dit, 0, y, L, NULL);
    if (s == LV_OK) s = lv_dit_forward(ctx, dit, &pass, out);
    if (dit) lv_dit_destroy(ctx, dit);
    if (ctx) lv_ctx_destroy(ctx);
    return s;
}

int bench_dit_open(const char *bench, const bench_dit_args *a, const lv_ctx_options *ctx_opt,
                   const lv_dit_options *dit_opt, bench_dit_nmse nmse, bench_dit_run *run) {
    memset(run, 0, sizeof *run);
    run->nmse = -1;
    run->shape = &bench_dit_shapes[a->preset];
    lv_sana_config *cfg = &run->cfg;
    if (lv_sana_config_preset(run->shape->preset, cfg) != LV_OK) {
        fprintf(stderr, "longvk %s: %s\n", bench, lv_last_error());
        return 1;
    }
    run->full_depth = cfg->depth;
    cfg->depth = a->depth;
    run->lh = a->have_latent ? (int)a->latent[0] : run->shape->latent_h;
    run->lw = a->have_latent ? (int)a->latent[1] : run->shape->latent_w;
    if (run->lh % cfg->patch[1] || run->lw % cfg->patch[2])
        return cli_usage_error(bench, "--latent %dx%d is not a multiple of the patch %dx%d", run->lh, run->lw,
                               cfg->patch[1], cfg->patch[2]);
    run->T = (int64_t)a->frames * (run->lh / cfg->patch[1]) * (run->lw / cfg->patch[2]);

    bench_dit_model model = {0};
    float *y = NULL;
    char msg[1024] = "";
    const char *failed = NULL; /* points to msg once something failed */
    double t0 = bench_now();
    if (bench_dit_model_make(cfg, 42, &model) != LV_OK) failed = keep(msg, sizeof msg, lv_last_error());
    run->make_s = bench_now() - t0;
    run->params = model.params;
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    if (!ctx_opt) ctx_opt = &copt;
    lv_dit_options dopt = {.cached_blocks = LV_CACHED_ALL};
    if (!dit_opt) dit_opt = &dopt;
    size_t ny = (size_t)a->text_tokens * cfg->caption_channels;
    if (!failed && !(y = malloc(ny * sizeof *y))) failed = keep(msg, sizeof msg, "out of host memory");
    if (!failed) rand_fill(y, ny, 7);
    if (!failed && nmse != BENCH_DIT_NO_NMSE) {
        /* the same weights (this model), latents and text through the file's bf16 matrices and
         * through dit_opt's, one after the other */
        size_t nx = (size_t)cfg->in_channels * a->frames * run->lh * run->lw;
        size_t no = (size_t)cfg->out_channels * a->frames * run->lh * run->lw;
        float *x = malloc(nx * sizeof *x), *ref = malloc(no * sizeof *ref), *got = malloc(no * sizeof *got);
        t0 = bench_now();
        if (!x || !ref || !got) failed = keep(msg, sizeof msg, "out of host memory");
        else {
            rand_fill(x, nx, 11);
            uint64_t bytes = 0;
            if (probe_forward(ctx_opt, model.file, dit_opt, LV_DIT_WEIGHTS_AS_STORED, y, a->text_tokens, x, a->frames,
                              run->lh, run->lw, ref, &bytes) != LV_OK ||
                probe_forward(ctx_opt, model.file, dit_opt, dit_opt->weights, y, a->text_tokens, x, a->frames,
                              run->lh, run->lw, got, &run->weight_bytes) != LV_OK)
                failed = keep(msg, sizeof msg, lv_last_error());
            else run->nmse = bench_nmse(got, ref, no);
        }
        run->nmse_s = bench_now() - t0;
        free(x);
        free(ref);
        free(got);
    }
    if (!failed && lv_ctx_create(ctx_opt, &run->ctx) != LV_OK) failed = keep(msg, sizeof msg, lv_last_error());
    const bool measured = nmse != BENCH_DIT_NMSE_ONLY; /* the dit the caller times */
    uint64_t base = run->ctx ? lv_ctx_memory_in_use(run->ctx) : 0;
    t0 = bench_now();
    if (!failed && measured && lv_dit_create(run->ctx, model.file, dit_opt, &run->dit) != LV_OK)
        failed = keep(msg, sizeof msg, lv_last_error());
    run->upload_s = bench_now() - t0;
    if (!failed && measured) run->weight_bytes = lv_ctx_memory_in_use(run->ctx) - base;
    bench_dit_model_free(&model); /* the weights are on the device now */
    if (!failed && measured && lv_dit_set_text(run->ctx, run->dit, 0, y, a->text_tokens, NULL) != LV_OK)
        failed = keep(msg, sizeof msg, lv_last_error());
    free(y);
    if (failed) {
        fprintf(stderr, "longvk %s: %s\n", bench, failed);
        bench_dit_close(run);
        return 1;
    }
    return 0;
}

void bench_dit_close(bench_dit_run *run) {
    if (run->dit) lv_dit_destroy(run->ctx, run->dit);
    if (run->ctx) lv_ctx_destroy(run->ctx);
    memset(run, 0, sizeof *run);
}
