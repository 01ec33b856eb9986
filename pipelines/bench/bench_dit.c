/* `longvk bench dit --preset sana-video-2b-480p|sana-video-2b-720p [--depth N] [--frames N]
 *                   [--latent HxW] [--runs N] [--precision P] [--weights-dtype D] [--nmse] [--json]`
 *
 * One LongSANA chunk of SANA-Video 2B at the real shape: the 4 read passes at t = 1000, 960,
 * 889, 727 (LongSANA's steps, prompt only) and the write pass that commits the chunk to the
 * carried state, through lv_longsana_chunk, the call `generate` makes. Random bf16 weights
 * are made in host memory (bench_dit_model.c: no file read or written), uploaded as a real
 * model's are (matmul weights as --weights-dtype says, by default bf16 as stored, the rest
 * f32), and the text is 300 random caption vectors.
 *
 * --nmse (issue 56's quality figure): before the timing, one read pass at t = 1000 over
 * random latents of the chunk's shape runs twice on the same random weights and text, with
 * the matrices as stored (bf16) and as --weights-dtype says (quantized on load by
 * lv_dit_create, as generate's --weights-dtype), each on a context of its own; the NMSE of
 * the second prediction against the first is reported (bench_dit_setup.c). With --runs 0 no
 * chunk runs and no dit but the probes' is made: the quality figure (and the quantized
 * probe's weights' device memory) alone.
 *
 * The first chunk is the warm-up (pipeline creation, no carried state to read); the next
 * --runs chunks are timed and their median reported. A chunk's time is what
 * `generate` spends in it: besides the kernels, the noise drawn on the host, the latents'
 * uploads and read-backs, and each pass's check for non-finite values (a few MB and a
 * synchronisation per pass, small beside 57.6 TFLOP a pass at 480p).
 *
 * FLOPs are counted from the shapes (dit_flops below): per token and layer the products
 * 36 C^2 (qkv 6, proj 2, cross q 2, cross proj 2, inverted conv 12, point conv 6, temporal
 * conv 6, in units of C^2 with the FFN width 3 C), the linear attention 4 C d, the
 * cross-attention 4 L C, the depthwise 3x3 conv 36 F; then the patch embedder and, in the
 * read passes, the final layer. The cross-attention's key/value projections of the text
 * are made once per prompt (lv_dit_set_text) and are not counted; nor are norms and
 * element-wise work (under 1% of the FLOPs). At 480p this gives 3.69 GFLOP per token per
 * forward, the figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_dit_setup.h"
#include "longvk.h"
#include "longvk/dit.h"
#include "longvk/sampler.h"

#define STEPS 4
#define MAX_RUNS 16

typedef struct dit_bench_args {
    bench_dit_args shape;
    bool json;
    bool nmse;
    int runs, precision, weights;
} dit_bench_args;

static dit_bench_args args;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    BENCH_DIT_SHAPE_OPTIONS(args.shape),
    {.name = "--runs", .kind = CLI_INT, .dest = &args.runs, .metavar = "N", .min = 0, .max = MAX_RUNS, .def = "3",
     .help = "timed chunks after the warm-up chunk (the median is reported); 0 with --nmse: no chunk, the "
             "quality figure alone"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.precision, .choices = cli_precisions,
     .def = "f32, or LONGVK_PRECISION", .help = "the DiT's activations between kernels (as generate's --precision)"},
    {.name = "--weights-dtype", .kind = CLI_CHOICE, .dest = &args.weights, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .def = "as-stored (bf16)", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "the matrices on the device, as generate's --weights-dtype (q8_0 / q4_K: quantized on load; at the "
             "2B's width 2240, not a multiple of q4_K's 256, almost every q4_K matrix falls back to q8_0)"},
    {.name = "--nmse", .kind = CLI_FLAG, .dest = &args.nmse,
     .help = "also the quality: the NMSE of one read pass's prediction (t = 1000, random latents of the chunk's "
             "shape) with these weights against the same random weights as stored (bf16), at this --precision"},
};

const cli_spec bench_dit_spec = {
    .command = "bench dit",
    .usage = "[--json] [--preset P] [--depth N] [--frames N] [--latent HxW] [--text-tokens L] [--runs N] "
             "[--precision P] [--weights-dtype D] [--nmse]",
    .about = "One LongSANA chunk of SANA-Video 2B (4 read passes and the write pass) at the real shape with\n"
             "random bf16 weights made in host memory: time per chunk and per forward, frames/s of the DiT\n"
             "alone (pixel frames: 10 latent frames are 40 at 480p), TFLOP/s counted from the shapes (3.69\n"
             "GFLOP per token per forward at 480p), the fraction of the device's peak and its memory; with\n"
             "--nmse, what --weights-dtype costs in quality against bf16. The whole model needs a GPU: on\n"
             "lavapipe use e.g. --depth 1 --frames 1 --latent 16x26.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* FLOPs of one forward over T tokens (F frames), per the file's comment. */
typedef struct dit_flops {
    double layer_per_token; /* one block, per token */
    double read_pass;       /* a whole read pass */
    double write_pass;      /* the write pass (no final layer) */
} dit_flops;

static dit_flops count_flops(const lv_sana_config *c, int64_t T, int L) {
    double C = c->hidden, F = c->ffn_hidden, d = c->head_dim;
    double P = (double)c->patch[0] * c->patch[1] * c->patch[2];
    double products = 2 * C * 3 * C + 2 * C * C   /* qkv, proj */
                      + 2 * C * C + 2 * C * C     /* cross-attention q, proj */
                      + 2 * C * 2 * F + 2 * F * C /* inverted conv (value and gate), point conv */
                      + 2 * 3 * C * C;            /* temporal conv, 3 taps */
    double attn = 4 * C * d                       /* S += v k^T, then S q */
                  + 4 * (double)L * C;            /* cross-attention scores and weighted sum */
    double dw = 2 * 9 * 2 * F;                    /* depthwise 3x3 over 2F channels */
    dit_flops f;
    f.layer_per_token = products + attn + dw;
    double embed = 2 * c->in_channels * P * C, final = 2 * C * c->out_channels * P;
    f.write_pass = (double)T * (c->depth * f.layer_per_token + embed);
    f.read_pass = f.write_pass + (double)T * final;
    return f;
}

typedef struct pass_clock {
    double start, times[STEPS + 1];
} pass_clock;

/* step_done: each read pass (step 0..3) and the write pass (step 4) ends here */
static void pass_done(void *user, int step, int passes) {
    (void)passes;
    pass_clock *pc = user;
    double now = bench_now();
    if (step >= 0 && step <= STEPS) pc->times[step] = now - pc->start;
    pc->start = now;
}

#define FAIL(...)                                                                            \
    do {                                                                                     \
        fprintf(stderr, "longvk bench dit: " __VA_ARGS__);                                   \
        goto done;                                                                           \
    } while (0)

int bench_dit(int argc, char **argv) {
    args = (dit_bench_args){.shape = BENCH_DIT_ARGS_DEFAULT, .runs = 3, .weights = LV_DIT_WEIGHTS_AS_STORED};
    int r = cli_parse(&bench_dit_spec, argc, argv);
    if (r >= 0) return r;
    if (args.runs == 0 && !args.nmse) return cli_usage_error("bench dit", "--runs 0 times nothing: it needs --nmse");
    lv_ctx_options ctx_opt;
    lv_ctx_options_default(&ctx_opt);
    ctx_opt.precision = args.precision;
    bench_dit_run run;
    lv_dit_options dit_opt = {.cached_blocks = LV_CACHED_ALL, .weights = (lv_dit_weights)args.weights};
    bench_dit_nmse nmse_mode = !args.nmse ? BENCH_DIT_NO_NMSE : args.runs ? BENCH_DIT_NMSE : BENCH_DIT_NMSE_ONLY;
    if ((r = bench_dit_open("bench dit", &args.shape, &ctx_opt, &dit_opt, nmse_mode, &run)) != 0) return r;
    const bench_dit_shape *shp = run.shape;
    const lv_sana_config cfg = run.cfg;
    const int full_depth = run.full_depth, frames = args.shape.frames, runs = args.runs, L = args.shape.text_tokens;
    const int lh = run.lh, lw = run.lw;
    const int64_t T = run.T;
    const bool json = args.json;
    lv_ctx *ctx = run.ctx;
    lv_dit *dit = run.dit;
    const lv_device_info *dev = lv_ctx_device(ctx);
    static const char *const precision_names[] = {"auto", "f32", "f16", "bf16"};
    const char *precision = precision_names[lv_ctx_precision(ctx)];
    const char *weights = bench_weights_name(args.weights);
    char nmse[32] = "null";
    if (args.nmse) snprintf(nmse, sizeof nmse, "%.6g", run.nmse);
    const uint64_t params = run.params, weight_bytes = run.weight_bytes;
    const double make_s = run.make_s, upload_s = run.upload_s;

    int rc = 1;
    float *x0 = NULL;
    double chunk_s[MAX_RUNS], read_s[MAX_RUNS * STEPS], write_s[MAX_RUNS], t0;
    size_t nx = (size_t)cfg.out_channels * frames * lh * lw;
    if (!(x0 = malloc(nx * sizeof *x0))) FAIL("out of host memory\n");

    if (runs == 0) { /* --nmse alone */
        if (json)
            printf("{\"bench\": \"dit\", \"device\": \"%s\", \"preset\": \"%s\", \"depth\": %d, "
                   "\"model_depth\": %d, \"frames\": %d, \"latent\": [%d, %d], \"tokens\": %lld, "
                   "\"text_tokens\": %d, \"params\": %llu, \"weights_dtype\": \"%s\", \"nmse_vs_bf16\": %s, "
                   "\"runs\": 0, \"device_weight_bytes\": %llu, \"precision\": \"%s\"}\n",
                   dev->name, shp->preset, cfg.depth, full_depth, frames, lh, lw, (long long)T, L,
                   (unsigned long long)params, weights, nmse, (unsigned long long)weight_bytes, precision);
        else
            printf("DiT on %s: %s, depth %d of %d, %d latent frames of %dx%d = %lld tokens, %d text tokens, random "
                   "bf16 weights as %s on the device (%.2f GiB at precision %s)\n  quality: NMSE %.3g of a read "
                   "pass's prediction (t = 1000) with %s weights against bf16 (%.1f s)\n",
                   dev->name, shp->preset, cfg.depth, full_depth, frames, lh, lw, (long long)T, L, weights,
                   (double)weight_bytes / (1 << 30), precision, run.nmse, weights, run.nmse_s);
        rc = 0;
        goto done;
    }
    if (!json)
        fprintf(stderr, "%s on %s: depth %d of %d, %d latent frames of %dx%d (%lld tokens), %d text tokens; "
                        "weights made in %.1f s, uploaded in %.1f s; warm-up chunk, then %d timed...\n",
                shp->preset, dev->name, cfg.depth, full_depth, frames, lh, lw, (long long)T, L, make_s, upload_s,
                runs);
    static const float steps[STEPS] = {1000, 960, 889, 727};
    pass_clock pc;
    lv_chunk_options copt = {.timesteps = steps, .steps = STEPS, .seed = 1, .cfg_scale = 1.0,
                             .step_done = pass_done, .step_user = &pc};
    double warm_s = 0;
    for (int c = 0; c <= runs; c++) {
        pc.start = t0 = bench_now();
        if (lv_longsana_chunk(ctx, dit, &copt, c, c * frames, frames, lh, lw, x0) != LV_OK)
            FAIL("chunk %d: %s\n", c, lv_last_error());
        double dt = bench_now() - t0;
        if (c == 0) {
            warm_s = dt;
            continue;
        }
        chunk_s[c - 1] = dt;
        for (int k = 0; k < STEPS; k++) read_s[(c - 1) * STEPS + k] = pc.times[k];
        write_s[c - 1] = pc.times[STEPS];
    }
    double chunk = bench_median(chunk_s, runs), read = bench_median(read_s, runs * STEPS);
    double write = bench_median(write_s, runs);
    dit_flops fl = count_flops(&cfg, T, L);
    double chunk_flop = STEPS * fl.read_pass + fl.write_pass;
    double tflops = chunk_flop / chunk / 1e12;
    double pixel_frames = (double)frames * shp->pixels_per_latent;
    double fps = pixel_frames / chunk;
    /* what the whole model would take at this rate, when --depth is below the model's */
    double scale = (double)full_depth / cfg.depth;
    const bench_peak *pk = bench_peak_of(dev->name);
    double f32_frac = bench_peak_fraction(tflops, pk ? pk->fp32 : 0);
    double half_frac = bench_peak_fraction(tflops, pk ? pk->half : 0);
    uint64_t peak_mem = lv_ctx_memory_peak(ctx);
    /* what is neither weights nor carried state (nor the text's keys and values) at the peak:
     * the activations and scratch, i.e. the peak above what stays held between chunks */
    uint64_t held = lv_ctx_memory_in_use(ctx);
    uint64_t act_mem = peak_mem > held ? peak_mem - held : 0;
    if (json) {
        char j1[16], j2[16];
        printf("{\"bench\": \"dit\", \"device\": \"%s\", \"preset\": \"%s\", \"depth\": %d, \"model_depth\": %d, "
               "\"frames\": %d, \"latent\": [%d, %d], \"tokens\": %lld, \"text_tokens\": %d, \"params\": %llu, "
               "\"weights_dtype\": \"%s\", \"nmse_vs_bf16\": %s, \"runs\": %d, \"warmup_chunk_s\": %.4f, "
               "\"chunk_s\": %.4f, \"forward_s\": %.4f, \"read_pass_s\": %.4f, \"write_pass_s\": %.4f, "
               "\"pixel_frames\": %.0f, "
               "\"frames_per_s\": %.3f, \"gflop_per_token_forward\": %.4f, \"tflop_per_chunk\": %.4f, "
               "\"tflops\": %.4f, \"fraction_fp32_peak\": %s, \"fraction_half_peak\": %s, "
               "\"device_memory_peak_bytes\": %llu, \"device_weight_bytes\": %llu, \"state_bytes\": %llu, "
               "\"precision\": \"%s\", \"device_activation_bytes\": %llu, \"host_peak_rss_bytes\": %lld}\n",
               dev->name, shp->preset, cfg.depth, full_depth, frames, lh, lw, (long long)T, L,
               (unsigned long long)params, weights, nmse, runs, warm_s, chunk, chunk / (STEPS + 1), read, write,
               pixel_frames, fps,
               fl.read_pass / (double)T / 1e9, chunk_flop / 1e12, tflops, bench_json_fraction(j1, sizeof j1, f32_frac),
               bench_json_fraction(j2, sizeof j2, half_frac),
               (unsigned long long)peak_mem, (unsigned long long)weight_bytes,
               (unsigned long long)lv_dit_state_bytes(dit), precision, (unsigned long long)act_mem,
               bench_peak_rss());
    } else {
        printf("DiT on %s: %s, depth %d of %d, %d latent frames of %dx%d = %lld tokens (%s, %.0f pixel frames), "
               "%d text tokens, random bf16 weights as %s on the device (%.2f G parameters)\n",
               dev->name, shp->preset, cfg.depth, full_depth, frames, lh, lw, (long long)T, shp->vae, pixel_frames, L,
               weights, (double)params / 1e9);
        if (args.nmse)
            printf("  quality: NMSE %.3g of a read pass's prediction (t = 1000) with %s weights against bf16 "
                   "(%.1f s)\n", run.nmse, weights, run.nmse_s);
        printf("  chunk (4 read passes + write pass), median of %d: %.3f s (warm-up chunk %.3f s)\n", runs, chunk,
               warm_s);
        printf("  per forward: %.3f s on average; read pass %.3f s, write pass %.3f s (medians)\n",
               chunk / (STEPS + 1), read, write);
        printf("  DiT frames/s: %.3g (%.0f pixel frames a chunk)", fps, pixel_frames);
        if (scale != 1) printf("; the %d-block model at this rate: about %.3g", full_depth, fps / scale);
        printf("\n  FLOPs: %.3f GFLOP per token per read pass (%.1f MFLOP per token per block), %.2f TFLOP a chunk\n",
               fl.read_pass / (double)T / 1e9, fl.layer_per_token / 1e6, chunk_flop / 1e12);
        if (pk)
            printf("  %.3f TFLOP/s: %.1f%% of the fp32 peak, %.1f%% of the fp16/bf16 tensor peak (%s)\n", tflops,
                   100 * f32_frac, 100 * half_frac, pk->label);
        else
            printf("  %.3f TFLOP/s (peak unknown: the device is not in pipelines/bench/bench_peak.c)\n", tflops);
        printf("  device memory: peak %.2f GiB (weights %.2f GiB, state %.1f MiB, activations %.1f MiB at "
               "precision %s); host peak RSS %.2f GiB\n",
               (double)peak_mem / (1 << 30), (double)weight_bytes / (1 << 30),
               (double)lv_dit_state_bytes(dit) / (1 << 20), (double)act_mem / (1 << 20), precision,
               (double)bench_peak_rss() / (1 << 30));
    }
    rc = 0;
done:
    bench_dit_close(&run);
    free(x0);
    return rc;
}
