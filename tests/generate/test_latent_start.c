/* --image and --continue with a latent model (issue 55): the tiny diffusers-layout SANA-Video
 * (assets/fixtures/tiny-hd32-diffusers, 4 latent channels) with the tiny Wan2.1 VAE that has
 * both halves (wan-vae-tiny-full), 48 x 32 pixels (6 x 4 latents), blocks of 1 latent frame,
 * prompt rows from a --text-embeds file written here. The model and the VAE are checked
 * against their originals elsewhere (test_sana_dit, test_image_conditioning, test_vae,
 * test_vae_encoder); this test checks what generate does with them:
 *
 * - image_to_latent_frame_zero: the first chunk's latent frame 0 (the .npy output) is the
 *   encoder's normalised latent of the picture, computed here with the library's encoder on
 *   its own context; and frame 0 of the video (frame sink, floats) is that latent decoded
 *   alone by the same VAE: both equal to 1e-6 (the same kernels on the same device: 0 measured).
 * - continue_equals_uninterrupted: the clip given as latents (continue_frames, the first 2
 *   latent frames of an uninterrupted 4-latent-frame run) continued for 8 pixel frames
 *   (2 latent frames) gives that run's last 2 latent frames bit for bit (the write passes of
 *   the same clean latents build the same state); with --continue-output whole the .npy holds
 *   all 4; through the VAE the 8 new frames are the uninterrupted video's frames 5-12 bit for
 *   bit (the decoder is primed with the clip's latents: 4 pixel frames a new latent frame).
 * - continue_a_file: a 17-frame video of the pipeline cut to 9 frames (ffv1, lossless) and
 *   continued by 8 frames: 17 frames, the clip's 9 byte for byte, the junction's seam within
 *   1.5x the median step between frames (below); `new` writes the same 8 new frames; a clip of 11
 *   frames uses its first 9 (a warning says so) and makes the same video.
 * - refused: a decoder-only VAE, or no VAE, with --image or --continue: exit 2 from the
 *   program naming what to give, nothing written. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "longvk/npy.h"
#include "longvk/vae.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_frames.h"

#define MODEL LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers"
#define VAE_FULL LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny-full.weights.safetensors"
#define VAE_DEC LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define W 48
#define H 32
#define PIX (W * H)
#define LAT (6 * 4)
#define Z 4

/* Prompt rows for the tiny DiT (caption 32): y [8, 32], mask [8]. */
static const char *embeds(void) {
    static char path[1024];
    snprintf(path, sizeof path, "%s", ts_tmp("latent_embeds.safetensors"));
    float *y = ts_rand_alloc(8 * 32, 5501, -1.0f, 1.0f), mask[8];
    for (int i = 0; i < 8; i++) mask[i] = 1.0f;
    lv_weight t[2] = {{.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {8, 32}, .data = y, .nbytes = 8 * 32 * 4},
                      {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {8}, .data = mask, .nbytes = 8 * 4}};
    cr_assert_eq(lv_safetensors_write(path, t, 2, NULL, 0), LV_OK, "%s", lv_last_error());
    free(y);
    return path;
}

static void options(lv_generate_options *o, int frames) {
    lv_generate_options_default(o);
    o->model_path = MODEL;
    o->text_embeds_path = embeds();
    o->prompt = "unused";
    o->frames = frames;
    o->width = W;
    o->height = H;
    o->block_frames = 1;
    o->scale = 1;
    o->seed = 5;
    o->encoder.codec = "ffv1";
}

/* A smooth picture, 48 x 32 packed RGB: the fitted frame is its bytes / 127.5 - 1 exactly. */
static void picture(uint8_t *rgb) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = rgb + ((size_t)y * W + x) * 3;
            p[0] = (uint8_t)(40 + 4 * x);
            p[1] = (uint8_t)(200 - 5 * y);
            p[2] = (uint8_t)(128 + 60 * sin(0.3 * x + 0.2 * y));
        }
}

static char *run(const char *cmd, int want) {
    char *out = NULL;
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, want, "exit %d (wanted %d) of %s:\n%s", rc, want, cmd, out ? out : "");
    return out;
}

static const char *write_png(const uint8_t *rgb) {
    const char *raw = ts_tmp("latent_picture.rgb");
    ts_spit(raw, rgb, (size_t)PIX * 3);
    static char png[1024], cmd[3000];
    snprintf(png, sizeof png, "%s", ts_tmp("latent_picture.png"));
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt rgb24 -s %dx%d -i %s "
             "-frames:v 1 %s 2>&1", W, H, raw, png);
    free(run(cmd, 0));
    return png;
}

/* The frames of a frame sink, [16][3, H, W]. */
typedef struct sink {
    float frames[16][3 * PIX];
    int n;
} sink;

static lv_status keep(void *user, int64_t index, const float *rgb, int height, int width) {
    sink *s = user;
    cr_assert(height == H && width == W && index == s->n && s->n < 16);
    memcpy(s->frames[s->n++], rgb, sizeof s->frames[0]);
    return LV_OK;
}

static lv_npy read_npy(const char *path, int frames) {
    lv_npy a;
    cr_assert_eq(lv_npy_read(path, &a), LV_OK, "%s", lv_last_error());
    cr_assert(a.ndim == 4 && a.shape[0] == Z && a.shape[1] == frames && a.shape[2] == 4 && a.shape[3] == 6,
              "%s: shape [%lld, %lld, %lld, %lld], wanted [4, %d, 4, 6]", path, (long long)a.shape[0],
              (long long)a.shape[1], (long long)a.shape[2], (long long)a.shape[3], frames);
    return a;
}

Test(latent_start, image_to_latent_frame_zero, .timeout = 300) {
    uint8_t rgb[PIX * 3];
    picture(rgb);
    const char *png = write_png(rgb);
    /* what the encoder makes of the picture, and that latent decoded alone */
    float x[3 * PIX], want_lat[Z * LAT], want_frame[3 * PIX];
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < PIX; p++) x[(size_t)c * PIX + p] = rgb[(size_t)p * 3 + c] / 127.5f - 1.0f;
    lv_ctx *ctx = ts_ctx();
    lv_weights *w;
    lv_vae_encoder *enc;
    lv_vae_decoder *dec;
    cr_assert_eq(lv_weights_open(VAE_FULL, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, x, 1, H, W, want_lat), LV_OK, "%s", lv_last_error());
    lv_vae_encoder_destroy(ctx, enc);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    lv_vae_set_clamp(dec, 1); /* as generate decodes */
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, want_lat, 1, 4, 6, want_frame), LV_OK, "%s", lv_last_error());
    lv_vae_decoder_destroy(ctx, dec);
    lv_weights_close(w);
    ts_ctx_done(ctx);

    /* the latents: frame 0 of the first chunk is the picture's latent */
    lv_generate_options o;
    options(&o, 9); /* 3 latent frames */
    o.image_path = png;
    o.vae_path = VAE_FULL; /* for the encoder: a .npy output is the latents */
    o.output = ts_tmp("latent_image.npy");
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    lv_npy a = read_npy(o.output, 3);
    float lat0[Z * LAT];
    for (int c = 0; c < Z; c++) memcpy(lat0 + c * LAT, a.data + (size_t)c * 3 * LAT, LAT * sizeof(float));
    double d = ts_max_abs_diff(lat0, want_lat, Z * LAT);
    cr_log_info("latent frame 0 vs the encoder's latent: max |diff| %g", d);
    cr_assert_leq(d, 1e-6, "latent frame 0 is not the picture's latent: max |diff| %g", d);
    /* the other latent frames were made, not copied */
    cr_assert_gt(ts_max_abs_diff(a.data + LAT, want_lat, LAT), 1e-3);
    lv_npy_free(&a);

    /* the video: frame 0 is that latent decoded */
    sink *s = calloc(1, sizeof *s);
    options(&o, 9);
    o.image_path = png;
    o.vae_path = VAE_FULL;
    o.frame_sink = keep;
    o.frame_user = s;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(s->n, 9);
    d = ts_max_abs_diff(s->frames[0], want_frame, 3 * PIX);
    free(s);
    cr_log_info("frame 0 vs the latent decoded alone: max |diff| %g", d);
    cr_assert_leq(d, 1e-6, "frame 0 is not the picture through encode and decode: max |diff| %g", d);
}

Test(latent_start, continue_equals_uninterrupted, .timeout = 300) {
    lv_generate_options o;
    options(&o, 13); /* 4 latent frames, 4 blocks */
    o.output = ts_tmp("latent_full.npy");
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    lv_npy full = read_npy(o.output, 4);
    float clip[Z * 2 * LAT];
    for (int c = 0; c < Z; c++) memcpy(clip + c * 2 * LAT, full.data + (size_t)c * 4 * LAT, 2 * LAT * sizeof(float));
    for (int whole = 0; whole < 2; whole++) {
        options(&o, 8); /* 8 new pixel frames: 2 latent frames continuing the clip's */
        o.continue_frames = clip;
        o.continue_count = 2;
        o.continue_output = whole ? LV_GEN_CONTINUE_WHOLE : LV_GEN_CONTINUE_NEW;
        o.output = ts_tmp(whole ? "latent_cont_whole.npy" : "latent_cont_new.npy");
        cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
        lv_npy b = read_npy(o.output, whole ? 4 : 2);
        for (int c = 0; c < Z; c++)
            cr_assert(memcmp(b.data + (size_t)c * b.shape[1] * LAT, full.data + ((size_t)c * 4 + (whole ? 0 : 2)) * LAT,
                             (size_t)b.shape[1] * LAT * sizeof(float)) == 0,
                      "%s: channel %d differs from the uninterrupted run's latents", whole ? "whole" : "new", c);
        lv_npy_free(&b);
    }
    /* through the VAE: the decoder primed with the clip's latents gives the uninterrupted
     * video's frames 5-12 (4 a new latent frame), not a video's start */
    sink *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    options(&o, 13);
    o.vae_path = VAE_FULL;
    o.frame_sink = keep;
    o.frame_user = a;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(a->n, 13);
    options(&o, 8);
    o.vae_path = VAE_FULL;
    o.continue_frames = clip;
    o.continue_count = 2;
    o.continue_output = LV_GEN_CONTINUE_NEW;
    o.frame_sink = keep;
    o.frame_user = b;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(b->n, 8, "2 new latent frames continuing the clip: 8 pixel frames");
    for (int t = 0; t < 8; t++)
        cr_assert(memcmp(b->frames[t], a->frames[5 + t], sizeof a->frames[0]) == 0,
                  "new frame %d differs from the uninterrupted video's frame %d", t, 5 + t);
    free(a), free(b);
    lv_npy_free(&full);
}

#define CLI_COMMON "--model " MODEL " -W 48 -H 32 --block-frames 1 --scale 1 --codec ffv1 -s 5 -q"

Test(latent_start, continue_a_file, .timeout = 300) {
    const char *emb = embeds();
    char cmd[8192], full[1024], cut[1024], cut11[1024], cont[1024], cont_new[1024], cont11[1024];
    snprintf(full, sizeof full, "%s", ts_tmp("latent_clip_full.mkv"));
    snprintf(cut, sizeof cut, "%s", ts_tmp("latent_clip_9.mkv"));
    snprintf(cut11, sizeof cut11, "%s", ts_tmp("latent_clip_11.mkv"));
    snprintf(cont, sizeof cont, "%s", ts_tmp("latent_cont.mkv"));
    snprintf(cont_new, sizeof cont_new, "%s", ts_tmp("latent_cont_new.mkv"));
    snprintf(cont11, sizeof cont11, "%s", ts_tmp("latent_cont_11.mkv"));
    snprintf(cmd, sizeof cmd, "%s generate " CLI_COMMON " --text-embeds %s --vae " VAE_FULL " --frames 17 -o %s 2>&1",
             LONGVK_CLI, emb, full);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -i %s -frames:v 9 -c copy %s 2>&1 && ffmpeg "
             "-nostdin -loglevel error -y -i %s -frames:v 11 -c copy %s 2>&1", full, cut, full, cut11);
    free(run(cmd, 0));
    const char *outs[3] = {cont, cont_new, cont11}, *clips[3] = {cut, cut, cut11};
    const char *how[3] = {"whole", "new", "whole"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s generate " CLI_COMMON " --text-embeds %s --vae " VAE_FULL " --frames 8 "
                 "--continue %s --continue-output %s -o %s 2>&1", LONGVK_CLI, emb, clips[i], how[i], outs[i]);
        char *said = run(cmd, 0);
        if (i == 2) cr_expect(strstr(said, "its last 2 frames are not used"), "no warning for 11 frames:\n%s", said);
        free(said);
    }
    int64_t nf, nc, nn, n11;
    size_t fb;
    uint8_t *vf = ts_decode_all(full, &nf, &fb), *vc = ts_decode_all(cont, &nc, &fb);
    uint8_t *vn = ts_decode_all(cont_new, &nn, &fb), *v11 = ts_decode_all(cont11, &n11, &fb);
    cr_assert_eq(fb, (size_t)PIX * 3);
    cr_assert_eq(nf, 17);
    cr_assert_eq(nc, 17, "whole: the clip's 9 frames, then 8 new ones (4 a latent frame)");
    cr_assert_eq(nn, 8);
    cr_assert_eq(n11, 17, "a clip of 11 frames: its first 9 used and written");
    cr_assert(memcmp(vc, vf, 9 * fb) == 0, "whole: the clip's frames come back byte for byte (ffv1)");
    cr_assert(memcmp(vc + 9 * fb, vn, 8 * fb) == 0, "new: the same new frames as whole's");
    cr_assert(memcmp(vc, v11, 17 * fb) == 0, "the 2 frames past 1 + 4k change nothing");
    /* The junction (frames 8 -> 9) against the video's other steps between frames. The clip
     * reached the state through 8-bit frames and the tiny random VAE's encoder, whose round
     * trip is far from the identity, so the continued latents are not the uninterrupted run's
     * (that equality is checked with float latents above, the primed decoder with it). The
     * random tiny model's frames change a lot from one to the next, so this is the issue's
     * seam check (1.5x the median), not a fine one. Measured on lavapipe: junction 73.14,
     * median 72.90 (ratio 1.003); the uninterrupted run's own step at frame 8 64.41, median
     * 70.35. */
    double steps[16];
    for (int t = 0; t < 16; t++) steps[t] = ts_pair_mae(vc, fb, t);
    double junction = steps[8];
    qsort(steps, 16, sizeof *steps, ts_cmp_double);
    double median = (steps[7] + steps[8]) / 2;
    for (int t = 0; t < 16; t++) steps[t] = ts_pair_mae(vf, fb, t);
    const double own = steps[8];
    qsort(steps, 16, sizeof *steps, ts_cmp_double);
    cr_log_info("junction seam %.2f, median %.2f (ratio %.3f); the uninterrupted run's at frame 8: %.2f, median %.2f",
                junction, median, junction / median, own, (steps[7] + steps[8]) / 2);
    cr_expect_leq(junction, 1.5 * median, "junction %.2f vs median %.2f", junction, median);
    free(vf), free(vc), free(vn), free(v11);
}

Test(latent_start, refused, .timeout = 120) {
    const char *emb = embeds();
    uint8_t rgb[PIX * 3];
    picture(rgb);
    const char *png = write_png(rgb);
    char cmd[4096], out[1024];
    snprintf(out, sizeof out, "%s", ts_tmp("latent_refused.mkv"));
    remove(out);
    struct {
        const char *args, *says;
    } cases[] = {
        {"--vae " VAE_DEC " --image %s", "holds the decoder half only"},
        {"--vae " VAE_DEC " --continue %s", "holds the decoder half only"},
        {"--image %s", "give the VAE with --vae"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, cases[i].args, png);
        snprintf(cmd, sizeof cmd, "%s generate " CLI_COMMON " --text-embeds %s --frames 9 %s -o %s 2>&1", LONGVK_CLI,
                 emb, args, i == 2 ? ts_tmp("latent_refused.npy") : out);
        char *said = run(cmd, 2);
        cr_expect(strstr(said, cases[i].says), "case %zu: no '%s' in\n%s", i, cases[i].says, said);
        cr_expect(access(out, F_OK) != 0, "case %zu wrote %s", i, out);
        free(said);
    }
}
