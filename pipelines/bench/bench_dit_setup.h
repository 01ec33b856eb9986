/* What `bench dit` and `bench sp` share (bench_dit_setup.c): the SANA-Video 2B presets and
 * their chunk shapes, the options that pick a shape, and the set-up of a DiT with random
 * bf16 weights (bench_dit_model.c) on a new context, its text set. */
#ifndef LONGVK_BENCH_DIT_SETUP_H
#define LONGVK_BENCH_DIT_SETUP_H

#include <stdbool.h>
#include <stdint.h>

#include "longvk.h"
#include "longvk/dit.h"
#include "options.h"

/* What a preset's chunk is made of, besides the DiT's config. */
typedef struct bench_dit_shape {
    const char *preset;
    int latent_h, latent_w;   /* the latent grid of one frame */
    int pixel_h, pixel_w;     /* the frames it decodes to */
    int pixels_per_latent;    /* pixel frames per latent frame in a chunk (the VAE's stride in time) */
    const char *vae;
} bench_dit_shape;

extern const bench_dit_shape bench_dit_shapes[];
extern const cli_choice bench_dit_presets[];
#define BENCH_DIT_PRESET_HELP                                                                       \
    "the model and its chunk:\n"                                                                    \
    "  sana-video-2b-480p: 480 x 832, Wan2.1 latents 60 x 104, 1560 tokens a frame\n"               \
    "  sana-video-2b-720p: 704 x 1280, LTX-2 latents 22 x 40 (patch 1), 880 tokens a frame"

/* The shape options' values (--preset, --depth, --frames, --latent, --text-tokens). */
typedef struct bench_dit_args {
    int preset, depth, frames, text_tokens;
    long latent[2];
    bool have_latent;
} bench_dit_args;
#define BENCH_DIT_ARGS_DEFAULT {.depth = 20, .frames = 10, .text_tokens = 300}

/* The option table's entries for the shape, bench dit's and bench sp's: --preset, --depth,
 * --frames, --latent, --text-tokens into the bench_dit_args `a` (a static). */
#define BENCH_DIT_SHAPE_OPTIONS(a)                                                                          \
    {.name = "--preset", .kind = CLI_CHOICE, .dest = &(a).preset, .choices = bench_dit_presets,            \
     .def = "sana-video-2b-480p", .help = BENCH_DIT_PRESET_HELP},                                           \
    {.name = "--depth", .kind = CLI_INT, .dest = &(a).depth, .metavar = "N", .min = 1, .max = 20,            \
     .def = "20, the model's: 4.1 GB of bf16 weights in host memory while they upload",                    \
     .help = "DiT blocks (about 0.2 GB of weights each); fewer for a CPU device"},                          \
    {.name = "--frames", .kind = CLI_INT, .dest = &(a).frames, .metavar = "N", .min = 1, .max = 64,          \
     .def = "10, LongSANA's chunk", .help = "latent frames in the chunk"},                                  \
    {.name = "--latent", .kind = CLI_CUSTOM, .dest = &(a), .parse = bench_dit_parse_latent, .metavar = "HxW", \
     .def = "the preset's", .help = "latent grid of a frame instead (a multiple of the patch: 2 at 480p)"},  \
    {.name = "--text-tokens", .kind = CLI_INT, .dest = &(a).text_tokens, .metavar = "L", .min = 1,           \
     .max = 1024, .def = "300, SANA-Video's text length", .help = "caption tokens the cross-attention reads"}

/* CLI_CUSTOM parser of --latent HxW; dest is the bench_dit_args. */
const char *bench_dit_parse_latent(const char *s, void *dest);

/* A DiT set up for timing. */
typedef struct bench_dit_run {
    const bench_dit_shape *shape;
    lv_sana_config cfg;       /* depth as asked */
    int full_depth;           /* the preset's */
    int lh, lw;               /* latent grid of a frame */
    int64_t T;                /* tokens in the chunk */
    uint64_t params, weight_bytes;
    double make_s, upload_s;  /* making the random weights, uploading them */
    double nmse, nmse_s;      /* with nmse asked: the probe's NMSE (else -1) and the seconds it took */
    lv_ctx *ctx;
    lv_dit *dit;
} bench_dit_run;

/* Whether bench_dit_open measures the quality (--nmse), and whether it makes the timed dit. */
typedef enum bench_dit_nmse { BENCH_DIT_NO_NMSE, BENCH_DIT_NMSE, BENCH_DIT_NMSE_ONLY } bench_dit_nmse;

/* Resolves the shape, makes the weights, creates the context (ctx_opt, or the defaults) and
 * the dit (dit_opt, or every chunk cached), sets 300 (--text-tokens) random caption vectors
 * in slot 0. With BENCH_DIT_NMSE, first measures what dit_opt->weights costs in quality:
 * one read pass at t = 1000 over random latents of the chunk's shape with that text,
 * through the same random weights uploaded as stored (bf16) and as dit_opt says, each on a
 * context of its own made with ctx_opt; run->nmse = sum (q - b)^2 / sum b^2 of the two
 * predictions. BENCH_DIT_NMSE_ONLY: that alone; run->dit stays NULL (run->ctx is made),
 * run->weight_bytes is the quantized probe's. Returns 0, or prints "longvk BENCH: ..." and
 * returns the exit status (2: a usage error); *run is then closed. */
int bench_dit_open(const char *bench, const bench_dit_args *a, const lv_ctx_options *ctx_opt,
                   const lv_dit_options *dit_opt, bench_dit_nmse nmse, bench_dit_run *run);
void bench_dit_close(bench_dit_run *run);

#endif
