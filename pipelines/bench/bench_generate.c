/* `longvk bench generate [--depth N] [--blocks N] [--frames N] [--latent HxW] [--text-tokens L]
 *                        [--vae-dim D] [--codec C | --no-encode] [--json]`
 *
 * The whole block loop at SANA-Video 2B's 480p shape, as a user runs it: lv_generate (the
 * call behind `longvk generate`) with a released-layout model file of random bf16 weights
 * (bench dit's), random prompt embeddings and a Wan2.1 VAE of random weights (bench vae's),
 * all written to a temporary folder first; each block is LongSANA's chunk (4 read passes
 * and the write pass), its VAE decode and the frames handed to the encoder, exactly as in
 * `generate` (a latent model writes no resume file yet: `--resume` is for pixel models).
 * The first block also creates every pipeline; the blocks after it give the steady rate:
 * pixel frames/s end to end. --no-encode hands the frames to a frame sink that discards them
 * (lv_generate_options.frame_sink) instead: no FFmpeg call at all, for a machine that has
 * none (the GPU bundle's FFmpeg is a stub); the encoder's share is then not counted.
 * The 720p preset is not offered: SANA's 720p release decodes
 * with LTX-2's VAE, which longvk does not have. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "bench_dit_model.h"
#include "bench_dit_setup.h"
#include "bench_vae_weights.h"
#include "longvk/generate.h"

#define MAX_BLOCKS 64

typedef struct gen_bench_args {
    bench_dit_args shape;
    bool json;
    int blocks, vae_dim;
    const char *codec;
    bool no_encode;
    int precision;
} gen_bench_args;

static gen_bench_args args;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--depth", .kind = CLI_INT, .dest = &args.shape.depth, .metavar = "N", .min = 1, .max = 20,
     .def = "20, the model's: a 4.1 GB model file in the temporary folder",
     .help = "DiT blocks (about 0.2 GB of weights each); fewer for a CPU device"},
    {.name = "--blocks", .kind = CLI_INT, .dest = &args.blocks, .metavar = "N", .min = 2, .max = MAX_BLOCKS,
     .def = "3: the first, then 2 timed", .help = "LongSANA blocks (chunks) to make"},
    {.name = "--frames", .kind = CLI_INT, .dest = &args.shape.frames, .metavar = "N", .min = 1, .max = 64,
     .def = "10, LongSANA's chunk (40 pixel frames)", .help = "latent frames in a block"},
    {.name = "--latent", .kind = CLI_CUSTOM, .dest = &args.shape, .parse = bench_dit_parse_latent, .metavar = "HxW",
     .def = "60x104 (480 x 832 pixels)", .help = "latent grid of a frame instead (even sides)"},
    {.name = "--text-tokens", .kind = CLI_INT, .dest = &args.shape.text_tokens, .metavar = "L", .min = 1, .max = 1024,
     .def = "300, SANA-Video's text length", .help = "caption tokens the cross-attention reads"},
    {.name = "--vae-dim", .kind = CLI_INT, .dest = &args.vae_dim, .metavar = "D", .min = 4, .max = 512,
     .def = "96, Wan2.1's", .help = "base width of the random VAE decoder, a multiple of 4"},
    {.name = "--codec", .kind = CLI_STRING, .dest = &args.codec, .metavar = "NAME", .def = "libx264",
     .help = "the encoder (as generate's --codec)"},
    {.name = "--no-encode", .kind = CLI_FLAG, .dest = &args.no_encode,
     .help = "frames to a sink that discards them instead of the encoder (no FFmpeg call: the encoder's time is "
             "not counted)"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.precision, .choices = cli_precisions,
     .def = "f32, or LONGVK_PRECISION", .help = "as generate's --precision (f16: the DiT's activations, and the "
             "tensor cores for its products and the VAE's convolutions where the device has them)"},
};

const cli_spec bench_generate_spec = {
    .command = "bench generate",
    .usage = "[--json] [--depth N] [--blocks N] [--frames N] [--latent HxW] [--text-tokens L] [--vae-dim D]\n"
             "                      [--codec NAME | --no-encode] [--precision P]",
    .about = "The whole block loop at SANA-Video 2B's 480p shape with random weights, through lv_generate (DiT,\n"
             "VAE decode, frames to the encoder): seconds per block and pixel frames/s end to\n"
             "end, after the first block. Writes the model, the embeddings, the VAE and the video into a\n"
             "temporary folder ($TMPDIR or /tmp), removed at the end. On lavapipe use e.g. --depth 1\n"
             "--frames 2 --latent 8x8 --vae-dim 8.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* --no-encode: every frame ends here; the first value read so that the frame is really there */
static lv_status discard_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index, (void)height, (void)width;
    *(volatile float *)user = rgb[0];
    return LV_OK;
}

typedef struct block_clock {
    double seconds[MAX_BLOCKS + 1];
    int64_t frames[MAX_BLOCKS + 1];
    int blocks;
    uint64_t memory, state_bytes;
    char device_name[256];
} block_clock;

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void on_progress(void *user, const lv_generate_progress *p) {
    block_clock *k = user;
    if (p->phase != LV_GEN_PHASE_BLOCK || p->block < 1 || p->block > MAX_BLOCKS) return;
    k->seconds[p->block] = p->seconds;
    k->frames[p->block] = p->frames_done;
    k->blocks = p->block;
    k->memory = p->model_memory;
    k->state_bytes = p->state_bytes;
    snprintf(k->device_name, sizeof k->device_name, "%s", p->device ? p->device : "?");
}

static lv_status write_image(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return lv_error(LV_ERR_IO, "cannot write %s", path);
    size_t put = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || put != size) return lv_error(LV_ERR_IO, "cannot write %s (disk full?)", path);
    return LV_OK;
}

/* y [L, cap] random in [-1, 1), mask all 1: what `--text-embeds` reads */
static lv_status write_text(const char *path, int L, int cap) {
    float *y = malloc((size_t)L * cap * sizeof *y), *mask = malloc((size_t)L * sizeof *mask);
    if (!y || !mask) {
        free(y);
        free(mask);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    uint64_t state = 7;
    for (size_t i = 0; i < (size_t)L * cap; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        y[i] = (float)((double)(state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    for (int i = 0; i < L; i++) mask[i] = 1;
    lv_weight t[2] = {{.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {L, cap}, .data = y,
                       .nbytes = (uint64_t)L * cap * sizeof *y},
                      {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {L}, .data = mask,
                       .nbytes = (uint64_t)L * sizeof *mask}};
    lv_status s = lv_safetensors_write(path, t, 2, NULL, 0);
    free(y);
    free(mask);
    return s;
}

int bench_generate(int argc, char **argv) {
    args = (gen_bench_args){.shape = BENCH_DIT_ARGS_DEFAULT, .blocks = 3, .vae_dim = 96, .codec = "libx264"};
    int r = cli_parse(&bench_generate_spec, argc, argv);
    if (r >= 0) return r;
    const bench_dit_shape *shp = &bench_dit_shapes[0]; /* 480p: Wan2.1's VAE */
    lv_sana_config cfg;
    if (lv_sana_config_preset(shp->preset, &cfg) != LV_OK) {
        fprintf(stderr, "longvk bench generate: %s\n", lv_last_error());
        return 1;
    }
    const int full_depth = cfg.depth;
    cfg.depth = args.shape.depth;
    const int lh = args.shape.have_latent ? (int)args.shape.latent[0] : shp->latent_h;
    const int lw = args.shape.have_latent ? (int)args.shape.latent[1] : shp->latent_w;
    if (lh % cfg.patch[1] || lw % cfg.patch[2])
        return cli_usage_error("bench generate", "--latent %dx%d is not a multiple of the patch %dx%d", lh, lw,
                               cfg.patch[1], cfg.patch[2]);
    if (args.vae_dim % 4) return cli_usage_error("bench generate", "--vae-dim must be a multiple of 4");
    const int F = args.shape.frames, blocks = args.blocks;

    const char *tmpdir = getenv("TMPDIR");
    char dir[1024], model[1100], text[1100], vae[1100], out[1100], state[1200];
    snprintf(dir, sizeof dir, "%s/longvk-bench-generate-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "longvk bench generate: cannot make a temporary folder %s\n", dir);
        return 1;
    }
    snprintf(model, sizeof model, "%s/dit.safetensors", dir);
    snprintf(text, sizeof text, "%s/text.safetensors", dir);
    snprintf(vae, sizeof vae, "%s/vae.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.mkv", dir);
    snprintf(state, sizeof state, "%s.longvk-state", out);

    int rc = 1;
    block_clock clock = {0};
    bench_dit_model m = {0};
    double t0 = bench_now();
    lv_status s = bench_dit_model_make(&cfg, 42, &m);
    if (s == LV_OK) s = write_image(model, m.image, m.size);
    const uint64_t params = m.params;
    bench_dit_model_free(&m);
    if (s == LV_OK) s = write_text(text, args.shape.text_tokens, cfg.caption_channels);
    if (s == LV_OK) s = bench_vae_write_random(vae, args.vae_dim);
    const double files_s = bench_now() - t0;
    if (s != LV_OK) {
        fprintf(stderr, "longvk bench generate: %s\n", lv_last_error());
        goto done;
    }
    const int64_t latents = (int64_t)blocks * F, pixel_frames = 1 + 4 * (latents - 1);
    if (!args.json)
        fprintf(stderr, "bench generate: depth %d of %d (%.2f G parameters), %d blocks of %d latent frames of %dx%d "
                        "(%lld pixel frames of %dx%d), files made in %.1f s in %s; generating...\n",
                cfg.depth, full_depth, (double)params / 1e9, blocks, F, lh, lw, (long long)pixel_frames, 8 * lw,
                8 * lh, files_s, dir);
    lv_generate_options o;
    lv_generate_options_default(&o);
    o.model_path = model;
    o.text_embeds_path = text;
    o.vae_path = vae;
    static float seen;
    o.output = args.no_encode ? NULL : out;
    o.frame_sink = args.no_encode ? discard_frame : NULL;
    o.frame_user = &seen;
    o.frames = (int)pixel_frames;
    o.width = 8 * lw;
    o.height = 8 * lh;
    o.block_frames = F;
    o.encoder.codec = args.codec;
    o.precision = args.precision;
    s = lv_generate(&o, on_progress, NULL, &clock, NULL);
    if (s != LV_OK) {
        fprintf(stderr, "longvk bench generate: %s\n", lv_last_error());
        goto done;
    }
    if (clock.blocks < 2) {
        fprintf(stderr, "longvk bench generate: %d blocks reported, 2 or more needed\n", clock.blocks);
        goto done;
    }
    const int n = clock.blocks;
    const double first_s = clock.seconds[1], steady_s = clock.seconds[n] - clock.seconds[1];
    const int64_t steady_frames = clock.frames[n] - clock.frames[1];
    const double fps = steady_frames / steady_s, per_block = steady_s / (n - 1);
    const long long video_bytes = args.no_encode ? 0 : file_size(out);
    const char *sink = args.no_encode ? "none: frames discarded" : args.codec;
    static const char *const precision_names[] = {"auto", "f32", "f16", "bf16"};
    const char *env = getenv("LONGVK_PRECISION"); /* what AUTO resolves to (lv_ctx_options) */
    const char *precision = args.precision ? precision_names[args.precision] : env && *env ? env : "f32";
    if (args.json) {
        printf("{\"bench\": \"generate\", \"device\": \"%s\", \"preset\": \"%s\", \"depth\": %d, \"model_depth\": %d, "
               "\"blocks\": %d, \"latent_frames_per_block\": %d, \"latent\": [%d, %d], \"pixels\": [%d, %d], "
               "\"text_tokens\": %d, \"vae_dim\": %d, \"codec\": \"%s\", \"precision\": \"%s\", \"pixel_frames\": %lld, "
               "\"first_block_s\": %.4f, \"block_s\": %.4f, \"frames_per_s\": %.4f, \"device_memory_peak_bytes\": "
               "%llu, \"state_bytes\": %llu, \"video_bytes\": %lld}\n",
               clock.device_name, shp->preset, cfg.depth, full_depth, n, F, lh, lw, 8 * lh, 8 * lw,
               args.shape.text_tokens, args.vae_dim, args.no_encode ? "none" : args.codec, precision,
               (long long)clock.frames[n],
               first_s, per_block, fps,
               (unsigned long long)clock.memory, (unsigned long long)clock.state_bytes, video_bytes);
    } else {
        printf("generate on %s: %s, depth %d of %d, VAE width %d, %s, precision %s; %d blocks of %d latent frames of "
               "%dx%d (%dx%d pixels)\n", clock.device_name, shp->preset, cfg.depth, full_depth, args.vae_dim, sink,
               precision, n,
               F, lh, lw, 8 * lw, 8 * lh);
        printf("  first block %.3f s (pipelines created); then %.3f s a block: %.3g pixel frames/s end to end "
               "(DiT, VAE, %s)", first_s, per_block, fps, args.no_encode ? "no encoder" : "encoder");
        if (cfg.depth != full_depth) printf("; the DiT is %d of the model's %d blocks", cfg.depth, full_depth);
        printf("\n  device memory: peak %.2f GiB, carried state %.1f MiB; ", (double)clock.memory / (1 << 30),
               (double)clock.state_bytes / (1 << 20));
        if (args.no_encode) printf("no video (frames discarded)\n");
        else printf("video %.1f MiB\n", (double)video_bytes / (1 << 20));
    }
    rc = 0;
done:
    unlink(model);
    unlink(text);
    unlink(vae);
    unlink(out);
    unlink(state);
    rmdir(dir);
    return rc;
}
