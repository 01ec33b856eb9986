/* `longvk forward`: one DiT forward pass on latents from a .npy file, so that anyone can
 * check the engine against another implementation of the same weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_mpi.h"
#include "commands.h"
#include "longvk.h"
#include "longvk/dit.h"
#include "longvk/generate.h"

typedef struct forward_args {
    const char *model, *config, *preset, *latents, *timestep, *text, *output;
    long block_frames, cached, device, sp_emulate;
    int weights, precision;
    bool sequence_parallel;
} forward_args;

static forward_args args = {.cached = LV_CACHED_ALL, .device = -1};

/* --timestep: one number or a comma list, each a finite number in the model's range; the
 * count is checked against the latent frames once they are read */
static const char *parse_timestep_list(const char *value, void *dest) {
    char buf[64];
    const char *p = value;
    do {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        double t;
        if (n >= sizeof buf) return "is not a comma-separated list of numbers in [0, 1000]";
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (!cli_parse_finite(buf, &t) || t < 0 || t > 1000)
            return "is not a comma-separated list of numbers in [0, 1000]";
        p = comma ? comma + 1 : NULL;
    } while (p);
    *(const char **)dest = value;
    return NULL;
}

static cli_option options[] = {
    {.name = "--model", .kind = CLI_INPUT, .dest = &args.model, .metavar = "MODEL", .required = true,
     .help = "weights: .safetensors, .pth/.pt, a transformer folder, or a diffusers pipeline folder "
             "(model_index.json: its transformer/)"},
    {.name = "--config", .kind = CLI_INPUT, .dest = &args.config, .metavar = "C.json",
     .def = "the file's metadata, else a preset", .help = "architecture"},
    {.name = "--preset", .kind = CLI_STRING, .dest = &args.preset, .metavar = "NAME",
     .help = "sana-video-2b-480p or sana-video-2b-720p"},
    {.name = "--latents", .kind = CLI_INPUT, .dest = &args.latents, .metavar = "X.npy", .required = true,
     .help = "float32 [C, F, H, W]"},
    {.name = "--timestep", .kind = CLI_CUSTOM, .dest = &args.timestep, .parse = parse_timestep_list,
     .metavar = "T", .required = true,
     .help = "model scale 0..1000 (truncated to an integer as the model does); a comma list gives one per "
             "latent frame"},
    {.name = "--text-embeds", .kind = CLI_INPUT, .dest = &args.text, .metavar = "E", .required = true,
     .help = "safetensors with 'y' [L, caption_channels] (also accepted: 'prompt_embeds', 'text_embeds') and "
             "optionally 'mask' [L] (1 valid, 0 padding)"},
    {.name = "--block-frames", .kind = CLI_LONG, .dest = &args.block_frames, .metavar = "B", .min = 1, .max = 100000,
     .def = "one block, bidirectional over all frames",
     .help = "block-causal: chunks of B latent frames, each reading the carried state of the earlier ones"},
    {.name = "--cached-blocks", .kind = CLI_LONG, .dest = &args.cached, .metavar = "K", .min = 0, .max = 100000,
     .def = "all", .help = "with --block-frames: only the last K chunks (0: none)"},
    {.name = "--weights-dtype", .kind = CLI_CHOICE, .dest = &args.weights, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K", .def = "as-stored",
     .help = "the matrix weights on the device: as stored, or converted (f16/bf16 halve an f32 file's memory), "
             "or quantized on load (q8_0, q4_K; rows not whole blocks fall back: q4_K to q8_0 to as stored)"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.precision, .choices = cli_precisions,
     .def = "f32, or LONGVK_PRECISION",
     .help = "the DiT's activations that feed matrix products and the Mix-FFN's convs: f32, or stored as "
             "f16 or bf16 (computed in f32; the residual stream, norms and attention stay f32; f16 also puts "
             "the f32-input products on the tensor cores of a device that offers them)"},
    CLI_SEQUENCE_PARALLEL_OPTION(&args.sequence_parallel,
        "run by every rank of `mpirun -np R`: one band of token rows per rank, each on its own device "
        CLI_SP_RANK_DEVICE "; rank 0 writes the output, the bits of --sp-emulate R (" CLI_SP_NEEDS_MPI ")"),
    CLI_SP_EMULATE_OPTION(&args.sp_emulate, "sequence parallelism emulated on this device: the token rows in R "
                                            "bands, each computed as one rank would, partial states summed in "
                                            "band order, halo rows for the 3x3 conv (R <= token rows)"),
    CLI_DEVICE_OPTION(&args.device),
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.output, .metavar = "OUT.npy",
     .required = true, .help = "output file (written only when the pass succeeds)"},
};

const cli_spec cmd_forward_spec = {
    .command = "forward",
    .usage = "--model MODEL --latents X.npy --timestep T\n"
             "                      --text-embeds E.safetensors -o OUT.npy [options]",
    .about = "Runs the DiT once and writes its velocity prediction (float32 .npy, the model's\n"
             "latent layout [C, F, H, W]).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

static const lv_weight *find_any(const lv_weights *w, const char *const *names) {
    for (int i = 0; names[i]; i++) {
        const lv_weight *t = lv_weights_find(w, names[i]);
        if (t) return t;
    }
    return NULL;
}

/* Reads y [L, caption] and the optional mask [L] as f32 host arrays. */
static int load_text(const char *path, int caption_channels, float **y, float **mask, int *L) {
    lv_weights *w;
    if (lv_weights_open(path, &w) != LV_OK) return cli_fail("text embeddings");
    static const char *const ynames[] = {"y", "prompt_embeds", "text_embeds", NULL};
    static const char *const mnames[] = {"mask", "prompt_attention_mask", "attention_mask", NULL};
    const lv_weight *ty = find_any(w, ynames), *tm = find_any(w, mnames);
    int rc = 0;
    if (!ty) {
        cli_error("longvk forward: %s has no tensor 'y' (or 'prompt_embeds', 'text_embeds')", path);
        rc = 1;
    } else if (ty->dtype != LV_F32 || !(ty->ndim == 2 || (ty->ndim == 3 && ty->shape[0] == 1)) ||
               ty->shape[ty->ndim - 1] != caption_channels) {
        cli_error("longvk forward: %s: '%s' must be float32 [L, %d] (or [1, L, %d])", path,
                ty->name, caption_channels, caption_channels);
        rc = 1;
    }
    if (!rc) {
        *L = (int)ty->shape[ty->ndim - 2];
        if (lv_check_finite(path, ty->name, ty->data, ty->ndim, ty->shape) != LV_OK ||
            (tm && tm->dtype == LV_F32 && lv_check_finite(path, tm->name, tm->data, tm->ndim, tm->shape) != LV_OK)) {
            cli_error("longvk forward: %s", lv_last_error());
            lv_weights_close(w);
            return 1;
        }
        *y = malloc(ty->nbytes);
        *mask = NULL;
        memcpy(*y, ty->data, ty->nbytes);
        if (tm) {
            if (tm->dtype != LV_F32 || (int64_t)lv_weight_numel(tm) != *L) {
                cli_error("longvk forward: %s: '%s' must be float32 with %d values", path, tm->name, *L);
                rc = 1;
            } else {
                *mask = malloc(tm->nbytes);
                memcpy(*mask, tm->data, tm->nbytes);
            }
        }
    }
    lv_weights_close(w);
    return rc;
}

static int parse_timesteps(const char *s, int frames, float *out) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || n == frames) return -1;
        out[n++] = (float)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    if (n == 1)
        for (int i = 1; i < frames; i++) out[i] = out[0];
    else if (n != frames)
        return -1;
    return 0;
}

int cmd_forward(int argc, char **argv) {
    int r = cli_parse(&cmd_forward_spec, argc, argv);
    if (r >= 0) return r;
    const char *model = args.model, *config = args.config, *preset = args.preset, *latents = args.latents;
    if (!cli_check_preset("forward", preset)) return 2;
    const char *timestep = args.timestep, *text = args.text, *output = args.output;
    long block_frames = args.block_frames, cached = args.cached, device = args.device;
    long sp_emulate = args.sp_emulate;
    if (cli_mpi_check_launch("forward", args.sequence_parallel)) return 2;
    cli_mpi mpi = {.rank = 0, .ranks = 1};
    if (args.sequence_parallel) {
        if (sp_emulate) return cli_usage_error("forward", "--sequence-parallel and --sp-emulate: one or the other");
        int m = cli_mpi_begin("forward", false, &mpi);
        if (m) return m;
        device = cli_mpi_device(&mpi, (int)device);
    }

    lv_sana_file *file = NULL;
    lv_npy x = {0};
    lv_ctx *ctx = NULL;
    lv_dit *dit = NULL;
    float *y = NULL, *mask = NULL, *out = NULL, *ts = NULL, *chunk_in = NULL, *chunk_out = NULL;
    int rc = 1, L = 0;
    /* a diffusers pipeline folder (model_index.json), as generate takes it: its transformer/ */
    static lv_pipeline_dir parts;
    if (lv_is_pipeline_dir(model)) {
        if (lv_pipeline_dir_open(model, &parts) != LV_OK) {
            cli_fail("model");
            goto done;
        }
        model = parts.transformer;
    }
    if (lv_sana_file_open(model, config, preset, &file) != LV_OK) {
        cli_fail("model");
        goto done;
    }
    const lv_sana_config *cfg = lv_sana_file_config(file);
    if (lv_npy_read(latents, &x) != LV_OK) {
        cli_fail("latents");
        goto done;
    }
    if (x.ndim != 4 || x.shape[0] != cfg->in_channels) {
        cli_error("longvk forward: %s: latents must be [C=%d, F, H, W], got %d dimensions%s",
                latents, cfg->in_channels, x.ndim, x.ndim == 4 ? " with another channel count" : "");
        goto done;
    }
    if (lv_check_finite(latents, "latents", x.data, x.ndim, x.shape) != LV_OK) {
        cli_error("longvk forward: %s", lv_last_error());
        goto done;
    }
    int C = (int)x.shape[0], F = (int)x.shape[1], H = (int)x.shape[2], W = (int)x.shape[3];
    ts = malloc((size_t)F * sizeof *ts);
    if (parse_timesteps(timestep, F, ts) != 0) {
        cli_error("longvk forward: --timestep '%s': give one number or %d comma-separated ones", timestep, F);
        goto done;
    }
    if (load_text(text, cfg->caption_channels, &y, &mask, &L)) goto done;

    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.device_index = (int)device;
    opt.precision = args.precision;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) {
        cli_fail(NULL);
        goto done;
    }
    lv_dit_options dopt = {.cached_blocks = (int)cached, .sp_bands = (int)sp_emulate,
                           .weights = (lv_dit_weights)args.weights, .sp_comm = mpi.comm};
    if (lv_dit_create(ctx, file, &dopt, &dit) != LV_OK || lv_dit_set_text(ctx, dit, 0, y, L, mask) != LV_OK) {
        cli_fail("model");
        goto done;
    }
    int B = block_frames > 0 ? (int)block_frames : F;
    size_t HW = (size_t)H * W;
    out = malloc((size_t)cfg->out_channels * F * HW * sizeof *out);
    chunk_in = malloc((size_t)C * B * HW * sizeof *chunk_in);
    chunk_out = malloc((size_t)cfg->out_channels * B * HW * sizeof *chunk_out);
    if (!out || !chunk_in || !chunk_out) {
        cli_error("longvk forward: out of host memory");
        goto done;
    }
    for (int f0 = 0; f0 < F; f0 += B) {
        int n = F - f0 < B ? F - f0 : B;
        for (int c = 0; c < C; c++)
            memcpy(chunk_in + (size_t)c * n * HW, x.data + ((size_t)c * F + f0) * HW, n * HW * sizeof(float));
        lv_dit_pass pass = {.x = chunk_in, .frames = n, .height = H, .width = W,
                            .timesteps = ts + f0, .frame_offset = f0, .commit = n < F};
        if (lv_dit_forward(ctx, dit, &pass, chunk_out) != LV_OK) {
            cli_fail("forward");
            goto done;
        }
        for (int c = 0; c < cfg->out_channels; c++)
            memcpy(out + ((size_t)c * F + f0) * HW, chunk_out + (size_t)c * n * HW, n * HW * sizeof(float));
    }
    int64_t shape[4] = {cfg->out_channels, F, H, W};
    if (mpi.rank == 0 && lv_npy_write(output, 4, shape, out) != LV_OK) { /* every rank has it: rank 0 writes */
        cli_fail(NULL);
        goto done;
    }
    rc = 0;
done:
    if (dit) lv_dit_destroy(ctx, dit);
    if (ctx) lv_ctx_destroy(ctx);
    lv_sana_file_close(file);
    lv_npy_free(&x);
    free(y);
    free(mask);
    free(out);
    free(ts);
    free(chunk_in);
    free(chunk_out);
    cli_mpi_end(&mpi, "forward", rc);
    return rc;
}
