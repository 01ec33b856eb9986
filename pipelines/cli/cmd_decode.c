/* `longvk decode`: latents (from `generate` or `forward`) through the Wan2.1 VAE decoder
 * into a video file, one latent frame at a time, each decoded frame going straight to the
 * encoder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_mpi.h"
#include "commands.h"
#include "longvk.h"
#include "longvk/frame_writer.h"
#include "longvk/sp_comm.h"
#include "longvk/vae.h"

typedef struct decode_args {
    const char *vae, *latents, *output, *codec;
    long fps, crf, step, device, overlap, sp_emulate;
    long tile[2];
    bool tiling, sequence_parallel;
} decode_args;

static decode_args args = {.fps = 16, .crf = -1, .step = 1, .device = -1, .overlap = 8, .tile = {32, 32}};

static const char *parse_tile(const char *value, void *dest) {
    return cli_parse_dims(value, 2, 1, 4096, dest) ? NULL : "is not HxW in latent pixels in [1, 4096], e.g. 32x32";
}

static cli_option options[] = {
    {.name = "--vae", .kind = CLI_INPUT, .dest = &args.vae, .required = true,
     .help = "Wan2.1_VAE.pth, or safetensors (original or diffusers names), or a pipeline's vae/ folder"},
    {.name = "--latents", .kind = CLI_INPUT, .dest = &args.latents, .metavar = "X.npy", .required = true,
     .help = "the latents"},
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.output, .metavar = "OUT", .required = true,
     .help = ".mp4 / .mkv / .webm (the container picks the default codec)"},
    {.name = "--fps", .kind = CLI_LONG, .dest = &args.fps, .min = 1, .max = 1000, .def = "16, SANA-Video's",
     .help = "frame rate"},
    {.name = "--codec", .kind = CLI_STRING, .dest = &args.codec, .metavar = "NAME",
     .help = "encoder: libx264, libx265, ffv1 (lossless RGB, .mkv), libvpx-vp9, av1 (libsvtav1) or libaom-av1"},
    {.name = "--crf", .kind = CLI_LONG, .dest = &args.crf, .min = 0, .max = 63, .def = "the codec's",
     .help = "constant-quality factor"},
    {.name = "--step-frames", .kind = CLI_LONG, .dest = &args.step, .min = 1, .max = 1024, .def = "1: least memory",
     .help = "latent frames per decoder step"},
    {.name = "--vae-tiling", .kind = CLI_FLAG, .dest = &args.tiling,
     .help = "decode in spatial tiles (one tile's device memory; the whole video is assembled in host memory "
             "before it is encoded)"},
    {.name = "--tile", .kind = CLI_CUSTOM, .dest = args.tile, .parse = parse_tile, .metavar = "HxW",
     .def = "32x32: 256 x 256 pixels", .help = "tile size in latent pixels"},
    {.name = "--tile-overlap", .kind = CLI_LONG, .dest = &args.overlap, .min = 0, .max = 4096, .def = "8",
     .help = "overlap of neighbouring tiles in latent pixels"},
    CLI_SEQUENCE_PARALLEL_OPTION(&args.sequence_parallel,
        "run by every rank of `mpirun -np R`: each latent frame's rows in R bands, one per rank on its own "
        "device " CLI_SP_RANK_DEVICE ", one halo row per 3x3 conv from each neighbour; rank 0 writes the "
        "video, the frames of a one-process decode (" CLI_SP_NEEDS_MPI ")"),
    CLI_SP_EMULATE_OPTION(&args.sp_emulate, "the bands of --sequence-parallel emulated on this device, each "
                                            "computed as one rank would (R <= latent rows)"),
    CLI_DEVICE_OPTION(&args.device),
};

const cli_spec cmd_decode_spec = {
    .command = "decode",
    .usage = "--vae FILE --latents X.npy -o OUT.mp4 [options]",
    .about = "Decodes normalised latents [16, F, h, w] (float32 .npy, as `generate` and\n"
             "`forward` write them; [1, 16, F, h, w] is accepted) with the Wan2.1 VAE into\n"
             "1 + 4 (F - 1) frames of 8h x 8w pixels. Values are clamped to [-1, 1] and stored\n"
             "as uint8(127.5 x + 127.5), truncated, as SANA-Video does.\n"
             "Over several GPUs: mpirun -np R longvk decode ... --sequence-parallel (the same frames).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

static double gib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

/* "5.51 GiB" or "37.2 MiB" */
static const char *human(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= (1ull << 30)) snprintf(buf, size, "%.2f GiB", gib(bytes));
    else snprintf(buf, size, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    return buf;
}

int cmd_decode(int argc, char **argv) {
    int r = cli_parse(&cmd_decode_spec, argc, argv);
    if (r >= 0) return r;
    const char *vae = args.vae, *latents = args.latents, *output = args.output, *codec = args.codec;
    long fps = args.fps, crf = args.crf, step = args.step, device = args.device, overlap = args.overlap;
    int tiling = args.tiling, tile_h = (int)args.tile[0], tile_w = (int)args.tile[1];
    lv_vae_tiling tiles = {tile_h, tile_w, (int)overlap};
    if (tiling && (overlap >= tile_h || overlap >= tile_w)) {
        return cli_usage_error("decode", "--tile-overlap %ld must be smaller than the tile %dx%d", overlap, tile_h,
                               tile_w);
    }
    long sp_emulate = args.sp_emulate;
    if (tiling && (sp_emulate || args.sequence_parallel))
        return cli_usage_error("decode", "--vae-tiling and %s: tiles or bands, one or the other",
                               sp_emulate ? "--sp-emulate" : "--sequence-parallel");
    if (sp_emulate && args.sequence_parallel)
        return cli_usage_error("decode", "--sequence-parallel and --sp-emulate: one or the other");
    if (cli_mpi_check_launch("decode", args.sequence_parallel)) return 2;
    cli_mpi mpi = {.rank = 0, .ranks = 1};
    if (args.sequence_parallel) {
        int m = cli_mpi_begin("decode", false, &mpi);
        if (m) return m;
        device = cli_mpi_device(&mpi, (int)device);
    }
    const bool root = mpi.rank == 0; /* writes the video and speaks */

    lv_npy x = {0};
    lv_weights *w = NULL;
    lv_ctx *ctx = NULL;
    lv_vae_decoder *dec = NULL;
    /* SANA-Video's conversion: uint8(127.5 x + 127.5), truncated */
    lv_frame_writer out = {.rounding = LV_FRAME_TRUNCATE};
    int rc = 1;
    if (lv_npy_read(latents, &x) != LV_OK) {
        cli_fail("latents");
        goto done;
    }
    if (x.ndim == 5 && x.shape[0] == 1) { /* [1, C, F, h, w] */
        memmove(x.shape, x.shape + 1, 4 * sizeof *x.shape);
        x.ndim = 4;
    }
    /* NaN or infinite latents decode to black frames: refused, as forward and generate refuse them */
    if (lv_check_finite(latents, "latents", x.data, x.ndim, x.shape) != LV_OK) {
        cli_error("longvk decode: %s", lv_last_error());
        goto done;
    }
    char vae_file[4200]; /* a folder (a pipeline's vae/), as generate takes it: its weights file */
    if (lv_vae_weights_file(vae, vae_file, sizeof vae_file) != LV_OK || lv_weights_open(vae_file, &w) != LV_OK) {
        cli_fail("VAE weights");
        goto done;
    }
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.device_index = (int)device;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) {
        cli_fail(NULL);
        goto done;
    }
    if (lv_vae_decoder_create(ctx, w, &dec) != LV_OK || lv_vae_set_step_frames(dec, (int)step) != LV_OK ||
        lv_vae_set_sequence_parallel(dec, (int)sp_emulate, mpi.comm) != LV_OK) {
        cli_fail("VAE");
        goto done;
    }
    int bands = sp_emulate ? (int)sp_emulate : mpi.ranks;
    if (lv_decode_check_latents(dec, vae, latents, x.ndim, x.shape, bands) != LV_OK) {
        cli_error("longvk decode: %s", lv_last_error());
        goto done;
    }
    int F = (int)x.shape[1], h = (int)x.shape[2], wd = (int)x.shape[3];
    int64_t T = lv_vae_frames_for(dec, F);
    uint64_t need = tiling ? lv_vae_tiled_memory(dec, h, wd, &tiles) : lv_vae_decoder_memory(dec, h, wd);
    const lv_device_info *info = lv_ctx_device(ctx);
    char b1[32], b2[32];
    if (root) {
        printf("decoding %d latent frames of %d x %d into %lld frames of %d x %d", F, h, wd, (long long)T, 8 * wd,
               8 * h);
        if (bands > 1) printf(" in %d bands of latent rows%s", bands, sp_emulate ? " (emulated)" : ", one per rank");
        printf("\ndevice memory needed%s: %s (weights, conv history and work buffers%s); '%s' has %s\n",
               mpi.ranks > 1 ? " on each rank" : "", human(need, b1, sizeof b1), tiling ? " of one tile" : "",
               info->name, human(info->device_local_bytes, b2, sizeof b2));
    }
    if (tiling)
        printf("tiles of %dx%d latent pixels overlapping by %ld; host memory for the video: %s\n",
               tile_h, tile_w, overlap, human((uint64_t)T * 3 * 64 * h * wd * sizeof(float), b1, sizeof b1));
    fflush(stdout);
    if (info->device_local_bytes && need > info->device_local_bytes)
        fprintf(stderr, "longvk decode: warning: the decode needs more memory than the device "
                        "reports; it may fail%s\n", tiling || bands > 1 ? "" : " (--vae-tiling uses less)");

    lv_encoder_options eopt;
    lv_encoder_options_default(&eopt);
    eopt.codec = codec;
    eopt.crf = (int)crf;
    if (root && lv_encoder_open(output, 8 * wd, 8 * h, (double)fps, &eopt, &out.encoder) != LV_OK) {
        cli_fail(output);
        goto done;
    }
    if (lv_frame_writer_reserve(&out, 1, 8 * h, 8 * wd) != LV_OK) {
        cli_error("longvk decode: out of host memory");
        goto done;
    }
    lv_vae_set_clamp(dec, 1);
    if (lv_vae_decode_to_writer(ctx, dec, x.data, F, h, wd, tiling ? &tiles : NULL, &out) != LV_OK) {
        cli_fail("decode");
        goto done;
    }
    lv_encoder *enc = out.encoder;
    out.encoder = NULL;
    if (root && lv_encoder_close(enc) != LV_OK) {
        cli_fail(output);
        goto done;
    }
    if (root) printf("wrote %lld frames to %s\n", (long long)out.frames, output);
    rc = 0;
done:
    if (out.encoder) lv_encoder_abort(out.encoder);
    lv_frame_writer_free(&out);
    if (dec) lv_vae_decoder_destroy(ctx, dec);
    if (ctx) lv_ctx_destroy(ctx);
    lv_weights_close(w);
    lv_npy_free(&x);
    cli_mpi_end(&mpi, "decode", rc);
    return rc;
}
