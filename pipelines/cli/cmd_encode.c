/* `longvk encode IN -o OUT.npy --vae FILE`: a video or an image (anything FFmpeg reads)
 * through the Wan2.1 VAE encoder into normalised latents [z, F, H/8, W/8], the array
 * `longvk decode --latents` reads. Frames are fitted to the model's size by scaling to cover
 * and cropping the centre (frame_fit.h says why not padding). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "frame_fit.h"
#include "longvk.h"
#include "longvk/codec.h"
#include "longvk/npy.h"
#include "longvk/vae.h"

typedef struct encode_args {
    const char *input, *vae, *output;
    long width, height, frames, device, overlap;
    long tile[2];
    bool tiling;
} encode_args;

static encode_args args = {.width = 832, .height = 480, .frames = 0, .device = -1, .overlap = 8, .tile = {32, 32}};

static const char *parse_tile(const char *value, void *dest) {
    return cli_parse_dims(value, 2, 1, 4096, dest) ? NULL : "is not HxW in latent pixels in [1, 4096], e.g. 32x32";
}

static cli_option options[] = {
    {.name = NULL, .kind = CLI_INPUT, .dest = &args.input, .metavar = "IN", .required = true,
     .help = "a video or an image FFmpeg reads (.mp4, .mkv, .webm, .png, .jpg, ...)"},
    {.name = "--vae", .kind = CLI_INPUT, .dest = &args.vae, .required = true,
     .help = "Wan2.1_VAE.pth, or safetensors (original or diffusers names) with the encoder half"},
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.output, .metavar = "OUT.npy",
     .required = true, .help = "the latents, float32 [z, F, H/8, W/8] (what `longvk decode --latents` reads)"},
    {.name = "--width", .alias = "-W", .kind = CLI_LONG, .dest = &args.width, .min = 8, .max = 8192,
     .def = "832, SANA-Video 480p's", .help = "frame width the input is fitted to, a multiple of 8"},
    {.name = "--height", .alias = "-H", .kind = CLI_LONG, .dest = &args.height, .min = 8, .max = 8192,
     .def = "480", .help = "frame height, a multiple of 8"},
    {.name = "--frames", .kind = CLI_LONG, .dest = &args.frames, .min = 1, .max = 1000000, .def = "all",
     .help = "read at most N frames of the input"},
    {.name = "--vae-tiling", .kind = CLI_FLAG, .dest = &args.tiling,
     .help = "encode in spatial tiles (one tile's device memory; latents differ from an untiled encode near the "
             "seams)"},
    {.name = "--tile", .kind = CLI_CUSTOM, .dest = args.tile, .parse = parse_tile, .metavar = "HxW",
     .def = "32x32: 256 x 256 pixels", .help = "tile size in latent pixels"},
    {.name = "--tile-overlap", .kind = CLI_LONG, .dest = &args.overlap, .min = 0, .max = 4096, .def = "8",
     .help = "overlap of neighbouring tiles in latent pixels"},
    CLI_DEVICE_OPTION(&args.device),
};

const cli_spec cmd_encode_spec = {
    .command = "encode",
    .usage = "IN --vae FILE -o OUT.npy [options]",
    .about = "Encodes a video or an image with the Wan2.1 VAE encoder into normalised latents (the\n"
             "diffusion model's space, as WanVAE.encode gives them). Frames are scaled to cover\n"
             "W x H, aspect ratio kept, and the centre is cropped (no padding: bars would be encoded\n"
             "as content). As the original: frame 0 alone, then 4 frames at a time, so 1 + 4k frames\n"
             "give 1 + k latent frames; up to 3 frames past the last 1 + 4k are not used (said when so).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* Every frame (at most max; 0: all) of the input fitted to W x H, as [3, T, H, W] in [-1, 1]
 * (grown as frames come: a container may not state its count). */
static lv_status read_frames(lv_decoder *d, int W, int H, long max, float **out, int *count) {
    const lv_video_info *info = lv_decoder_info(d);
    frame_fit fit;
    frame_fit_plan(&fit, info->width, info->height, W, H);
    const size_t plane = (size_t)W * H, frame = 3 * plane;
    uint8_t *rgb = malloc((size_t)info->width * info->height * 3);
    float *tmp = malloc((size_t)info->height * W * 3 * sizeof *tmp), *one = malloc(frame * sizeof *one);
    float *all = NULL;
    size_t cap = 0;
    int n = 0;
    lv_status s = rgb && tmp && one ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for a frame");
    while (s == LV_OK && (max == 0 || n < max)) {
        int end = 0;
        s = lv_decoder_next(d, rgb, NULL, &end);
        if (s != LV_OK || end) break;
        if ((size_t)n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            float *g = realloc(all, ncap * frame * sizeof *g);
            if (!g) {
                s = lv_error(LV_ERR_NOMEM, "out of host memory after %d frames of %d x %d", n, W, H);
                break;
            }
            all = g, cap = ncap;
        }
        frame_fit_apply(&fit, rgb, one, tmp);
        /* frames are gathered frame-major; [3, T, H, W] is made once the count is known */
        memcpy(all + (size_t)n * frame, one, frame * sizeof *one);
        n++;
    }
    free(rgb), free(tmp), free(one);
    if (s != LV_OK) {
        free(all);
        return s;
    }
    float *planes = n ? malloc((size_t)n * frame * sizeof *planes) : NULL;
    if (n && !planes) {
        free(all);
        return lv_error(LV_ERR_NOMEM, "out of host memory for %d frames of %d x %d", n, W, H);
    }
    for (int t = 0; t < n; t++)
        for (int c = 0; c < 3; c++)
            memcpy(planes + ((size_t)c * n + t) * plane, all + (size_t)t * frame + c * plane, plane * sizeof *planes);
    free(all);
    *out = planes;
    *count = n;
    return LV_OK;
}

int cmd_encode(int argc, char **argv) {
    int r = cli_parse(&cmd_encode_spec, argc, argv);
    if (r >= 0) return r;
    const int W = (int)args.width, H = (int)args.height;
    if (W % 8 || H % 8)
        return cli_usage_error("encode", "--width %d x --height %d: both must be multiples of 8 (the VAE's 8x8 "
                               "latent pixels)", W, H);
    const lv_vae_tiling tiles = {(int)args.tile[0], (int)args.tile[1], (int)args.overlap};
    if (args.tiling && (args.overlap >= args.tile[0] || args.overlap >= args.tile[1]))
        return cli_usage_error("encode", "--tile-overlap %ld must be smaller than the tile %ldx%ld", args.overlap,
                               args.tile[0], args.tile[1]);
    /* the output's folder must take a new file (lv_npy_write makes one beside it): said now,
     * not after the whole encode */
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", args.output);
    const char *dir = dirname(folder);
    if (access(dir, W_OK | X_OK) != 0)
        return cli_usage_error("encode", "cannot write %s: its folder %s is missing or not writable", args.output,
                               dir);
    lv_decoder *vd = NULL;
    lv_weights *w = NULL;
    lv_ctx *ctx = NULL;
    lv_vae_encoder *enc = NULL;
    float *frames = NULL, *lat = NULL;
    int rc = 2, T = 0;
    /* an input that is no readable video is a bad value: exit 2 */
    if (lv_decoder_open(args.input, &vd) != LV_OK) {
        fprintf(stderr, "longvk encode: %s\n", lv_last_error());
        goto done;
    }
    if (lv_weights_open(args.vae, &w) != LV_OK) {
        fprintf(stderr, "longvk encode: %s\n", lv_last_error());
        goto done;
    }
    lv_vae_halves halves;
    lv_vae_weights_halves(w, &halves);
    if (halves.encoder_tensors == 0) { /* refused before the device is opened */
        fprintf(stderr, "longvk encode: %s: no encoder half (%d decoder tensors only): a decoder-only VAE file. "
                        "Give the whole VAE: Wan2.1_VAE.pth as released, or a diffusers vae/ folder's "
                        "diffusion_pytorch_model.safetensors with encoder.* and quant_conv.*\n",
                args.vae, halves.decoder_tensors);
        goto done;
    }
    rc = 1;
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.device_index = (int)args.device;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) {
        cli_fail(NULL);
        goto done;
    }
    lv_status es = lv_vae_encoder_create(ctx, w, &enc);
    if (es != LV_OK) {
        rc = es == LV_ERR_FORMAT ? 2 : 1; /* weights that are no Wan encoder: a bad value */
        cli_fail("VAE");
        goto done;
    }
    const lv_video_info *info = lv_decoder_info(vd);
    if (read_frames(vd, W, H, args.frames, &frames, &T) != LV_OK) {
        cli_fail(args.input);
        goto done;
    }
    if (T == 0) {
        fprintf(stderr, "longvk encode: %s: no frames could be decoded\n", args.input);
        rc = 2;
        goto done;
    }
    const int F = lv_vae_encoded_frames(T), used = 1 + 4 * (F - 1), z = lv_vae_encoder_z_dim(enc);
    const int ds = lv_vae_encoder_downscale(enc), h = H / ds, wd = W / ds;
    frame_fit fit;
    frame_fit_plan(&fit, info->width, info->height, W, H);
    printf("encoding %d frame%s of %s (%d x %d, scaled by %.4g to cover %d x %d, centre cropped) into %d latent "
           "frame%s of %d x %d\n", used, used == 1 ? "" : "s", args.input, info->width, info->height, fit.scale, W,
           H, F, F == 1 ? "" : "s", wd, h);
    if (used < T)
        printf("the last %d frame%s (past 1 + 4k = %d) %s not used, as in the original encoder\n", T - used,
               T - used == 1 ? "" : "s", used, T - used == 1 ? "is" : "are");
    fflush(stdout);
    lat = malloc((size_t)z * F * h * wd * sizeof *lat);
    if (!lat) {
        fprintf(stderr, "longvk encode: out of host memory\n");
        goto done;
    }
    if (args.tiling)
        printf("tiles of %ldx%ld latent pixels overlapping by %ld\n", args.tile[0], args.tile[1], args.overlap);
    lv_status st = args.tiling ? lv_vae_encode_tiled(ctx, enc, frames, T, H, W, &tiles, lat)
                               : lv_vae_encode_frames(ctx, enc, frames, T, H, W, lat);
    if (st != LV_OK) {
        cli_fail("encode");
        goto done;
    }
    const int64_t shape[4] = {z, F, h, wd};
    if (lv_npy_write(args.output, 4, shape, lat) != LV_OK) {
        cli_fail(args.output);
        goto done;
    }
    printf("wrote latents [%d, %d, %d, %d] to %s\n", z, F, h, wd, args.output);
    rc = 0;
done:
    free(frames);
    free(lat);
    if (enc) lv_vae_encoder_destroy(ctx, enc);
    if (ctx) lv_ctx_destroy(ctx);
    lv_weights_close(w);
    lv_decoder_close(vd);
    return rc;
}
