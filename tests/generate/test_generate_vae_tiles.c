/* The VAE in spatial tiles inside generate (--vae-tiles auto|off|HxW): a latent model (the tiny
 * diffusers pipeline of test_generate_pipeline.c, ts_tiny_pipeline.h: tiny Gemma-2, tiny
 * SANA-Video DiT, tiny Wan2.1 VAE) makes 9 frames in 3 blocks (1 + 4 + 4 pixel frames) at 96 x 64 (latent 12 x 8), and
 * the frames reach the test through the frame sink as floats.
 *
 * Bounds. Tiles do not see their neighbours (every conv pads the tile edge with zeros, the middle
 * attention sees the tile only), so no tiled pixel equals the untiled one and no tight bound
 * follows from the arithmetic; what is exact is checked exactly, the rest as test_vae.c's tiling
 * test does:
 *  - the tiled run's frames are lv_vae_decode_tiled's over the generated latents (the same run
 *    without a VAE, its .npy) bit for bit: each tile kept its own causal history across the
 *    blocks, and the blend is the decoder's;
 *  - against the untiled run, NMSE < 0.1: a sanity bound (a misplaced, missing or unblended tile,
 *    or a tile's history lost between blocks, gives NMSE near 1 or more; test_vae.c measures
 *    0.027 for these tiles on random latents), the figure logged;
 *  - auto with the budget forced below the untiled decode's memory (LONGVK_VAE_BUDGET) tiles,
 *    with one tile's memory within the budget, and says so; auto without it does not tile, and
 *    its frames are the untiled run's bit for bit. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk.h"
#include "longvk/frame_writer.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_tiny_pipeline.h"

#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define PROMPT "a red fox running through snow"
#define FRAMES 9
#define LATENT_FRAMES 3
#define WIDTH 96
#define HEIGHT 64

#define PLANE ((size_t)WIDTH * HEIGHT)
#define VIDEO ((size_t)3 * FRAMES * PLANE)

/* What a run reports and makes: its frames [3, FRAMES, H, W] and the VAE's report. */
typedef struct run_out {
    float frames[VIDEO];
    int64_t got;
    int vae_reports;
    lv_generate_progress vae;
} run_out;

static lv_status sink(void *user, int64_t index, const float *rgb, int height, int width) {
    run_out *r = user;
    cr_assert(index == r->got && index < FRAMES && height == HEIGHT && width == WIDTH, "frame %lld of %d x %d",
              (long long)index, width, height);
    for (int c = 0; c < 3; c++)
        memcpy(r->frames + ((size_t)c * FRAMES + index) * PLANE, rgb + c * PLANE, PLANE * sizeof *rgb);
    r->got++;
    return LV_OK;
}

static void on_progress(void *user, const lv_generate_progress *p) {
    run_out *r = user;
    if (p->phase != LV_GEN_PHASE_VAE) return;
    cr_assert_eq(r->got, 0, "the VAE's report comes before the first frame");
    r->vae_reports++;
    r->vae = *p;
}

static lv_generate_options base(const char *dir) {
    static char dit[1200], vae[1200];
    snprintf(dit, sizeof dit, "%s/transformer", dir);
    snprintf(vae, sizeof vae, "%s/vae/diffusion_pytorch_model.safetensors", dir);
    lv_generate_options o;
    lv_generate_options_default(&o);
    o.model_path = dit;
    o.vae_path = vae;
    o.text_embeds_path = ts_tmp("vae-tiles-embeds.safetensors");
    o.prompt = "unused";
    o.frames = FRAMES;
    o.width = WIDTH;
    o.height = HEIGHT;
    o.block_frames = 1;
    o.seed = 7;
    return o;
}

static run_out *run(const lv_generate_options *o) {
    run_out *r = calloc(1, sizeof *r);
    lv_generate_options opt = *o;
    opt.frame_sink = sink;
    opt.frame_user = r;
    cr_assert_eq(lv_generate(&opt, on_progress, NULL, r, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(r->got, FRAMES);
    return r;
}

Test(generate_vae_tiles, tiles_off_fixed_and_auto, .timeout = 600) {
    const char *dir = ts_make_tiny_pipeline("vae-tiles-pipe");
    /* the prompt through the pipeline's Gemma-2 once, its rows kept for every run after; no
     * VAE: the latents to a .npy */
    lv_pipeline_dir parts;
    cr_assert_eq(lv_pipeline_dir_open(dir, &parts), LV_OK, "%s", lv_last_error());
    lv_generate_options o = base(dir);
    o.vae_path = NULL;
    o.text_embeds_path = NULL;
    o.text_encoder_path = parts.text_encoder; /* its tokenizer found in ../tokenizer/ */
    o.prompt = PROMPT;
    o.text_embeds_out = ts_tmp("vae-tiles-embeds.safetensors");
    o.output = ts_tmp("vae-tiles-latents.npy");
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    lv_npy lat;
    cr_assert_eq(lv_npy_read(ts_tmp("vae-tiles-latents.npy"), &lat), LV_OK, "%s", lv_last_error());
    cr_assert(lat.ndim == 4 && lat.shape[0] == 4 && lat.shape[1] == LATENT_FRAMES && lat.shape[2] == HEIGHT / 8 &&
              lat.shape[3] == WIDTH / 8);

    /* off: the untiled decode, and it says so */
    o = base(dir);
    o.vae_tiles = LV_GEN_VAE_TILES_OFF;
    run_out *off = run(&o);
    cr_assert_eq(off->vae_reports, 1);
    cr_assert_eq(off->vae.vae_tile_count, 0);
    cr_assert_eq(off->vae.vae_memory, off->vae.vae_untiled_memory);

    /* tiles of 6 x 8 latent pixels: 2 x 2 tiles overlapping by 3 */
    o.vae_tiles = LV_GEN_VAE_TILES_FIXED;
    o.vae_tile_h = 6;
    o.vae_tile_w = 8;
    run_out *tiled = run(&o);
    cr_assert_eq(tiled->vae_reports, 1);
    cr_assert(tiled->vae.vae_tile_count == 4 && tiled->vae.vae_tile_h == 6 && tiled->vae.vae_tile_w == 8 &&
              tiled->vae.vae_tile_overlap == 3, "%d tiles of %d x %d overlapping by %d", tiled->vae.vae_tile_count,
              tiled->vae.vae_tile_h, tiled->vae.vae_tile_w, tiled->vae.vae_tile_overlap);
    cr_assert(tiled->vae.vae_memory < tiled->vae.vae_untiled_memory);
    /* exactly the whole-video tiled decode of the same latents (clamped, as generate decodes) */
    lv_ctx *ctx = ts_ctx();
    lv_weights *w;
    lv_vae_decoder *dec;
    cr_assert_eq(lv_weights_open(VAE, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    lv_vae_set_clamp(dec, 1);
    float *want = malloc(VIDEO * sizeof *want);
    const lv_vae_tiling grid = {6, 8, 3};
    cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat.data, LATENT_FRAMES, HEIGHT / 8, WIDTH / 8, &grid, want), LV_OK,
                 "%s", lv_last_error());
    cr_assert_eq(memcmp(tiled->frames, want, VIDEO * sizeof *want), 0, "generate's tiles differ from "
                 "lv_vae_decode_tiled of its latents (max|diff| %.3g)", ts_max_abs_diff(tiled->frames, want, VIDEO));
    /* and near the untiled frames: the sanity bound (see the top) */
    double e = ts_nmse(tiled->frames, off->frames, VIDEO);
    cr_log_info("generate --vae-tiles 6x8 at latent 8 x 12: NMSE %.3g vs untiled, max|diff| %.3g; device memory "
                "%llu vs %llu bytes", e, ts_max_abs_diff(tiled->frames, off->frames, VIDEO),
                (unsigned long long)tiled->vae.vae_memory, (unsigned long long)tiled->vae.vae_untiled_memory);
    cr_assert(e > 0 && e < 0.1, "tiled frames NMSE %.3g vs untiled", e);
    free(want);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
    lv_npy_free(&lat);

    /* auto under a budget one byte below the untiled decode's memory: tiles, one within the budget */
    char budget[32];
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)(off->vae.vae_untiled_memory - 1));
    setenv("LONGVK_VAE_BUDGET", budget, 1);
    o.vae_tiles = LV_GEN_VAE_TILES_AUTO;
    run_out *small = run(&o);
    unsetenv("LONGVK_VAE_BUDGET");
    cr_assert_eq(small->vae_reports, 1);
    cr_assert_eq(small->vae.vae_budget, off->vae.vae_untiled_memory - 1);
    cr_assert(small->vae.vae_tile_count >= 2, "auto under a small budget did not tile");
    cr_assert(small->vae.vae_memory <= small->vae.vae_budget);
    cr_assert(ts_nmse(small->frames, off->frames, VIDEO) < 0.1);

    /* auto with the device's budget: untiled, the untiled frames bit for bit */
    run_out *roomy = run(&o);
    cr_assert_eq(roomy->vae.vae_tile_count, 0, "auto tiled with the device's budget %llu",
                 (unsigned long long)roomy->vae.vae_budget);
    cr_assert(roomy->vae.vae_budget >= roomy->vae.vae_untiled_memory);
    cr_assert_eq(memcmp(roomy->frames, off->frames, VIDEO * sizeof(float)), 0);
    free(off), free(tiled), free(small), free(roomy);
}

static char *cli(const char *args, int want) {
    char cmd[4096];
    char *out;
    snprintf(cmd, sizeof cmd, "%s generate %s 2>&1", LONGVK_CLI, args);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, want, "exit %d of %s:\n%s", rc, cmd, out);
    return out;
}

Test(generate_vae_tiles, cli_line_and_bad_values, .timeout = 300) {
    const char *dir = ts_make_tiny_pipeline("vae-tiles-pipe");
    char args[4096];
    /* one latent frame in tiles: the line says how the VAE decodes */
    snprintf(args, sizeof args, "--model %s -p '" PROMPT "' --frames 1 -W 96 -H 64 --scale 1 --codec ffv1 "
             "--vae-tiles 6x8 -o %s", dir, ts_tmp("vae-tiles-cli.mkv"));
    char *out = cli(args, 0);
    cr_assert(strstr(out, "VAE: 4 tiles of 6x8 latent pixels overlapping by 3: device memory "), "%s", out);
    free(out);
    /* bad values: exit 2 before anything is written */
    const char *bad[] = {"0x4", "6x", "big", "6x8x2"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "--model %s -p x --frames 1 --vae-tiles %s -o %s", dir, bad[i],
                 ts_tmp("vae-tiles-bad.mkv"));
        out = cli(args, 2);
        cr_assert(strstr(out, "--vae-tiles") && strstr(out, "auto, off or HxW"), "%s", out);
        free(out);
    }
    snprintf(args, sizeof args, "--model %s -p x --frames 1 --vae-tiles 6x8 --sp-emulate 2 -o %s", dir,
             ts_tmp("vae-tiles-bad.mkv"));
    out = cli(args, 2);
    cr_assert(strstr(out, "tiles or bands"), "%s", out);
    free(out);
    /* tiles without a VAE to tile: the default model (pixel space) */
    snprintf(args, sizeof args, "-p x --frames 1 --vae-tiles 32x32 -o %s", ts_tmp("vae-tiles-pixel.mkv"));
    out = cli(args, 2);
    cr_assert(strstr(out, "--vae-tiles 32x32") && strstr(out, "pixel-space"), "%s", out);
    free(out);
    struct stat st;
    cr_assert(stat(ts_tmp("vae-tiles-bad.mkv"), &st) != 0, "a refused run wrote its output");
    cr_assert(stat(ts_tmp("vae-tiles-pixel.mkv"), &st) != 0, "a refused run wrote its output");
}
