/* `longvk bench vae`: the Wan VAE decoder's time per latent frame and its memory.
 *
 * By default the real Wan2.1 decoder structure (dim 96, z 16) with random weights at a
 * small latent (4 x 6: 32 x 48 pixels), which lavapipe runs in seconds per frame; --vae
 * uses a weights file instead, --dim another base width. Latent frame 0 (1 pixel frame,
 * pipeline creation) is reported apart; the later ones (4 pixel frames each, the steady
 * state) give the median. Also: device memory at its peak against the decoder's own
 * estimate, and the memory a 480p decode needs (computed, lv_vae_memory_estimate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_vae_weights.h"
#include "longvk.h"
#include "longvk/vae.h"

typedef struct frame_count {
    int64_t frames;
} frame_count;

static lv_status count_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index, (void)rgb, (void)height, (void)width;
    ((frame_count *)user)->frames++;
    return LV_OK;
}

typedef struct vae_bench_args {
    bool json;
    const char *vae;
    int dim, frames, preset, precision;
    long latent[2];
} vae_bench_args;

static const cli_choice vae_presets[] = {{"small", 0}, {"480p", 1}, {0}};

static vae_bench_args args;

static const char *parse_latent(const char *value, void *dest) {
    return cli_parse_dims(value, 2, 1, 512, dest) ? NULL : "is not HxW with sizes in [1, 512], e.g. 4x6";
}

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--vae", .kind = CLI_INPUT, .dest = &args.vae,
     .def = "random weights of the Wan2.1 structure", .help = "decoder weights"},
    {.name = "--dim", .kind = CLI_INT, .dest = &args.dim, .metavar = "D", .min = 4, .max = 512,
     .def = "96, Wan2.1's", .help = "base width of the random decoder, a multiple of 4"},
    {.name = "--preset", .kind = CLI_CHOICE, .dest = &args.preset, .choices = vae_presets, .def = "small",
     .help = "the latent size: small 4x6 (32 x 48 pixels, for lavapipe), 480p 60x104 (480 x 832, SANA-Video's; "
             "5.9 GB of device memory, 13.6 TFLOP a latent frame: a GPU's)"},
    {.name = "--latent", .kind = CLI_CUSTOM, .dest = args.latent, .parse = parse_latent, .metavar = "HxW",
     .def = "the preset's", .help = "latent size instead"},
    {.name = "--frames", .kind = CLI_INT, .dest = &args.frames, .min = 2, .max = 64,
     .def = "4: frame 0, then 3 timed ones", .help = "latent frames"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.precision, .choices = cli_precisions,
     .def = "f32, or LONGVK_PRECISION",
     .help = "f16: the decoder's activations and history in f16 (half their memory, computed in f32), and on "
             "a device with tensor cores every convolution as f16 columns times the weights on them "
             "(engine/README.md); f32: the direct kernel"},
};

const cli_spec bench_vae_spec = {
    .command = "bench vae",
    .usage = "[--json] [--vae FILE | --dim D] [--preset small|480p] [--latent HxW] [--frames N] [--precision P]",
    .about = "The Wan VAE decoder's time per latent frame, pixel frames/s and its memory: by default the real\n"
             "Wan2.1 decoder structure with random weights at a small latent; --preset 480p at SANA-Video's.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

#define FAIL()                                                                               \
    do {                                                                                     \
        fprintf(stderr, "longvk bench vae: %s\n", lv_last_error());                          \
        goto done;                                                                           \
    } while (0)

int bench_vae(int argc, char **argv) {
    args = (vae_bench_args){.dim = 96, .frames = 4, .latent = {4, 6}};
    int r = cli_parse(&bench_vae_spec, argc, argv);
    if (r >= 0) return r;
    if (args.preset == 1 && !cli_given(&bench_vae_spec, "--latent")) {
        args.latent[0] = 60;
        args.latent[1] = 104;
    }
    const bool json = args.json;
    const char *vae = args.vae;
    const int dim = args.dim, h = (int)args.latent[0], w = (int)args.latent[1], frames = args.frames;
    if (dim % 4) return cli_usage_error("bench vae", "--dim must be a multiple of 4");

    int rc = 1;
    lv_ctx *ctx = NULL;
    lv_weights *weights = NULL;
    lv_vae_decoder *dec = NULL;
    float *lat = NULL;
    double *times = NULL;
    char tmp[] = "/tmp/longvk-bench-vae-XXXXXX";
    int tmp_made = 0;
    if (!vae) {
        int fd = mkstemp(tmp);
        if (fd < 0) {
            fprintf(stderr, "longvk bench vae: cannot make a temporary file %s\n", tmp);
            goto done;
        }
        close(fd);
        tmp_made = 1;
        if (bench_vae_write_random(tmp, dim) != LV_OK) FAIL();
        vae = tmp;
    }
    if (lv_weights_open(vae, &weights) != LV_OK) FAIL();
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.precision = args.precision;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) FAIL();
    uint64_t base = lv_ctx_memory_in_use(ctx);
    if (lv_vae_decoder_create(ctx, weights, &dec) != LV_OK) FAIL();
    lv_vae_info arch;
    lv_vae_decoder_info(dec, &arch);
    int z = lv_vae_z_dim(dec);
    size_t per = (size_t)z * h * w;
    lat = malloc(per * frames * sizeof *lat);
    times = calloc((size_t)frames, sizeof *times);
    if (!lat || !times) goto done;
    uint64_t noise = 777; /* uniform in [-1, 1) */
    for (size_t i = 0; i < per * frames; i++) {
        noise = noise * 6364136223846793005ull + 1442695040888963407ull;
        lat[i] = (float)((noise >> 40) & 0xffffff) / 8388608.0f - 1.0f;
    }
    /* frame f of [z, frames, h, w], one at a time */
    float *one = malloc(per * sizeof *one);
    if (!one) goto done;
    frame_count fc = {0};
    double first_ms = 0;
    for (int f = 0; f < frames; f++) {
        for (int c = 0; c < z; c++)
            memcpy(one + (size_t)c * h * w, lat + ((size_t)c * frames + f) * h * w, (size_t)h * w * sizeof *one);
        double t0 = bench_now();
        lv_status s = lv_vae_decode_frames_cb(ctx, dec, one, 1, h, w, count_frame, &fc);
        double dt = bench_now() - t0;
        if (s != LV_OK) {
            free(one);
            FAIL();
        }
        if (f == 0) first_ms = 1e3 * dt;
        else times[f - 1] = 1e3 * dt;
    }
    free(one);
    double med = bench_median(times, frames - 1);
    uint64_t peak = lv_ctx_memory_peak(ctx) - base, est = lv_vae_decoder_memory(dec, h, w);
    lv_vae_memory m480;
    lv_vae_memory_estimate_parts_at(60, 104, lv_ctx_precision(ctx), &m480); /* f16: f16 activations */
    const uint64_t est480 = m480.weights + m480.history + m480.work;
    double gflop = 2 * lv_vae_decoder_macs(dec, h, w) / 1e9;
    const int up = arch.upscale;
    const lv_device_info *dev = lv_ctx_device(ctx);
    static const char *const precision_names[] = {"auto", "f32", "f16", "bf16"};
    const char *precision = precision_names[lv_ctx_precision(ctx)];
    if (json) {
        printf("{\"device\": \"%s\", \"precision\": \"%s\", \"weights\": \"%s\", \"trunk\": %d, \"head\": %d, \"z\": %d, "
               "\"latent\": [%d, %d], \"pixels\": [%d, %d], \"latent_frames\": %d, \"pixel_frames\": %lld, "
               "\"first_frame_ms\": %.1f, \"ms_per_latent_frame\": %.1f, \"pixel_frames_per_s\": %.3f, "
               "\"gflop_per_latent_frame\": %.3f, "
               "\"gflops\": %.2f, \"device_peak_bytes\": %llu, \"device_estimate_bytes\": %llu, "
               "\"host_peak_rss_bytes\": %lld, \"estimate_480p_bytes\": %llu, "
               "\"estimate_480p\": {\"weights\": %llu, \"history\": %llu, \"work\": %llu}}\n",
               dev->name, precision, tmp_made ? "random" : vae, arch.trunk, arch.head_ch, z, h, w, up * h,
               up * w, frames, (long long)fc.frames, first_ms, med, 4e3 / med, gflop, gflop / (med / 1e3),
               (unsigned long long)peak, (unsigned long long)est, bench_peak_rss(),
               (unsigned long long)est480, (unsigned long long)m480.weights,
               (unsigned long long)m480.history, (unsigned long long)m480.work);
    } else {
        printf("VAE decode on %s: %s decoder (trunk %d, head %d, z %d), latent %dx%d -> %dx%d pixels, "
               "precision %s\n", dev->name, tmp_made ? "random-weight" : vae, arch.trunk, arch.head_ch, z, h, w,
               up * h, up * w, precision);
        printf("  latent frame 0 (1 pixel frame, pipelines created): %.1f ms\n", first_ms);
        printf("  later latent frames (4 pixel frames each), median of %d: %.1f ms  (%.2f GFLOP, %.2f GFLOP/s)\n",
               frames - 1, med, gflop, gflop / (med / 1e3));
        printf("  pixel frames/s: %.3f\n", 4e3 / med);
        printf("  device memory: peak %.1f MiB, decoder estimate %.1f MiB; host peak RSS %.1f MiB\n",
               peak / 1048576.0, est / 1048576.0, bench_peak_rss() / 1048576.0);
        printf("  480x832 (latent 60x104) needs %.2f GB of device memory: weights %.2f, conv history "
               "%.2f, work buffers %.2f\n", est480 / 1e9, m480.weights / 1e9,
               m480.history / 1e9, m480.work / 1e9);
    }
    rc = 0;
done:
    if (dec) lv_vae_decoder_destroy(ctx, dec);
    if (ctx) lv_ctx_destroy(ctx);
    lv_weights_close(weights);
    if (tmp_made) unlink(tmp);
    free(lat);
    free(times);
    return rc;
}
