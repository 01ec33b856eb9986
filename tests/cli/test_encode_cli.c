/* `longvk encode` end to end with the tiny Wan VAE (both halves,
 * assets/testdata/wan-vae/wan-vae-tiny-full.weights.safetensors):
 * - a lossless 48 x 32 clip of 9 frames encodes into [4, 3, 4, 6] latents equal to the
 *   library's encode of the same decoded frames (at the target size the fit is a copy:
 *   v / 127.5 - 1), and `longvk decode` of them writes the 9 frames the library's decode
 *   of those latents gives (uint8(127.5 x + 127.5), truncated, as decode stores them);
 * - a 64 x 40 clip fitted to 48 x 32 (scaled by 0.8 to cover, 2 columns cropped each side),
 *   a 7-frame clip (2 latent frames; the last 2 frames said to be unused), the same with
 *   --vae-tiling and one tile covering the frame (the same latents);
 * - bad input: a missing file, a file that is no video, a decoder-only VAE, a size that is no
 *   multiple of 8, the output naming the input, an output in a folder that does not exist:
 *   exit 2 with a message saying what is wrong, nothing written. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk/codec.h"
#include "longvk/npy.h"
#include "longvk/vae.h"
#include "longvk/weights.h"
#include "test_clips.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_process.h"

#define FULL LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny-full.weights.safetensors"
#define DECODER_ONLY LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"

static const char *tmp(const char *name) {
    static char buf[16][512];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, 512, "%s/enc55_%s", LONGVK_TEST_TMP, name);
    return p;
}

static void expect_says(ts_proc p, const char *needle, const char *what) {
    cr_assert_not_null(strstr(p.err, needle), "%s: the message does not say '%s':\n%s", what, needle, p.err);
    free(p.err);
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Every frame of a video as [3, T, H, W] in [-1, 1] (v / 127.5 - 1) and its size. */
static float *read_video(const char *path, int *T, int *H, int *W) {
    lv_decoder *d;
    cr_assert_eq(lv_decoder_open(path, &d), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(d);
    *W = info->width, *H = info->height;
    const size_t P = (size_t)*W * *H;
    uint8_t *rgb = malloc(P * 3);
    uint8_t *all = NULL;
    int n = 0;
    for (;;) {
        int end = 0;
        cr_assert_eq(lv_decoder_next(d, rgb, NULL, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        all = realloc(all, (size_t)(n + 1) * P * 3);
        memcpy(all + (size_t)n * P * 3, rgb, P * 3);
        n++;
    }
    lv_decoder_close(d);
    float *out = malloc((size_t)3 * n * P * sizeof *out);
    for (int t = 0; t < n; t++)
        for (size_t q = 0; q < P; q++)
            for (int c = 0; c < 3; c++) out[((size_t)c * n + t) * P + q] = (float)(all[((size_t)t * P + q) * 3 + c] / 127.5 - 1.0);
    free(all), free(rgb);
    *T = n;
    return out;
}

Test(encode_cli, round_trip_through_encode_and_decode, .timeout = 300) {
    const char *clip = tmp("clip.mkv"), *lat = tmp("lat.npy"), *out = tmp("out.mkv");
    remove(lat), remove(out);
    cr_assert_eq(clip_write(clip, "ffv1", CLIP_SMOOTH, 48, 32, 16, 9, 4, 4), LV_OK, "%s", lv_last_error());
    ts_proc p = TS_LONGVK("encode", clip, "--vae", FULL, "-o", lat, "-W", "48", "-H", "32");
    ts_expect_exit(p, 0, "encode");
    free(p.err);
    lv_npy x;
    cr_assert_eq(lv_npy_read(lat, &x), LV_OK, "%s", lv_last_error());
    cr_assert(x.ndim == 4 && x.shape[0] == 4 && x.shape[1] == 3 && x.shape[2] == 4 && x.shape[3] == 6,
              "latents [%lld, %lld, %lld, %lld]", (long long)x.shape[0], (long long)x.shape[1], (long long)x.shape[2],
              (long long)x.shape[3]);

    /* the library on the same frames */
    int T, H, W;
    float *frames = read_video(clip, &T, &H, &W);
    cr_assert(T == 9 && H == 32 && W == 48);
    lv_ctx *ctx = ts_ctx();
    lv_weights *w;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK);
    lv_vae_encoder *enc;
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const size_t nl = (size_t)4 * 3 * 4 * 6;
    float *want = malloc(nl * sizeof *want);
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, frames, T, H, W, want), LV_OK, "%s", lv_last_error());
    cr_assert_eq(memcmp(x.data, want, nl * sizeof *want), 0, "the CLI's latents differ from the library's (nmse %.3g)",
                 ts_nmse(x.data, want, nl));

    p = TS_LONGVK("decode", "--vae", FULL, "--latents", lat, "-o", out, "--codec", "ffv1");
    ts_expect_exit(p, 0, "decode of the encoded latents");
    free(p.err);
    int T2, H2, W2;
    float *back = read_video(out, &T2, &H2, &W2);
    cr_assert(T2 == 9 && H2 == 32 && W2 == 48, "decoded %d frames of %d x %d", T2, W2, H2);
    float *video = malloc((size_t)3 * 9 * 32 * 48 * sizeof *video);
    lv_vae_set_clamp(dec, 1);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, want, 3, 4, 6, video), LV_OK, "%s", lv_last_error());
    for (size_t i = 0; i < (size_t)3 * 9 * 32 * 48; i++) {
        float v = (float)((int)(127.5f * video[i] + 127.5f) / 127.5 - 1.0); /* truncated, as decode stores */
        cr_assert_eq(back[i], v, "decoded value %zu: %g, the library's %g", i, back[i], v);
    }
    free(video), free(back), free(want), free(frames);
    lv_npy_free(&x);
    lv_vae_decoder_destroy(ctx, dec);
    lv_vae_encoder_destroy(ctx, enc);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}

Test(encode_cli, fitted_sizes_and_frame_counts, .timeout = 300) {
    const char *wide = tmp("wide.mkv"), *seven = tmp("seven.mkv"), *lat = tmp("fit.npy");
    cr_assert_eq(clip_write(wide, "ffv1", CLIP_SMOOTH, 64, 40, 16, 5, 4, 4), LV_OK, "%s", lv_last_error());
    cr_assert_eq(clip_write(seven, "ffv1", CLIP_SMOOTH, 48, 32, 16, 7, 4, 4), LV_OK, "%s", lv_last_error());
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s encode %s --vae %s -o %s -W 48 -H 32 2>&1", LONGVK_CLI, wide, FULL, lat);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", cmd);
    cr_assert(strstr(text, "64 x 40, scaled by 0.8 to cover 48 x 32, centre cropped"), "%s", text);
    free(text);
    lv_npy x;
    cr_assert_eq(lv_npy_read(lat, &x), LV_OK, "%s", lv_last_error());
    cr_assert(x.ndim == 4 && x.shape[1] == 2 && x.shape[2] == 4 && x.shape[3] == 6);
    lv_npy_free(&x);
    snprintf(cmd, sizeof cmd, "%s encode %s --vae %s -o %s -W 48 -H 32 2>&1", LONGVK_CLI, seven, FULL, lat);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", cmd);
    cr_assert(strstr(text, "the last 2 frames (past 1 + 4k = 5) are not used"), "%s", text);
    free(text);
    cr_assert_eq(lv_npy_read(lat, &x), LV_OK, "%s", lv_last_error());
    cr_assert(x.ndim == 4 && x.shape[1] == 2);
    /* --vae-tiling with one tile covering the frame: the same latents */
    const char *tiled = tmp("fit-tiled.npy");
    ts_proc p = TS_LONGVK("encode", seven, "--vae", FULL, "-o", tiled, "-W", "48", "-H", "32", "--vae-tiling", "--tile",
                          "8x8", "--tile-overlap", "2");
    ts_expect_exit(p, 0, "encode --vae-tiling");
    free(p.err);
    lv_npy y;
    cr_assert_eq(lv_npy_read(tiled, &y), LV_OK, "%s", lv_last_error());
    cr_assert(y.ndim == 4 && memcmp(x.data, y.data, (size_t)4 * 2 * 4 * 6 * sizeof(float)) == 0,
              "one tile's latents differ from the untiled encode's");
    lv_npy_free(&y);
    lv_npy_free(&x);
    p = TS_LONGVK("encode", seven, "--vae", FULL, "-o", tiled, "--vae-tiling", "--tile", "4x4", "--tile-overlap", "4");
    ts_expect_exit(p, 2, "an overlap as large as the tile");
    expect_says(p, "--tile-overlap 4 must be smaller", "--tile-overlap 4");
}

Test(encode_cli, bad_input_is_refused_and_nothing_written, .timeout = 300) {
    const char *clip = tmp("bad-clip.mkv"), *junk = tmp("junk.mkv"), *lat = tmp("never.npy");
    cr_assert_eq(clip_write(clip, "ffv1", CLIP_SMOOTH, 48, 32, 16, 5, 4, 4), LV_OK, "%s", lv_last_error());
    FILE *f = fopen(junk, "wb");
    cr_assert_not_null(f);
    fputs("this is no video at all, only text that FFmpeg will not take for one", f);
    fclose(f);
    remove(lat);
    ts_proc p = TS_LONGVK("encode", tmp("missing.mkv"), "--vae", FULL, "-o", lat, "-W", "48", "-H", "32");
    ts_expect_exit(p, 2, "a missing input");
    expect_says(p, "missing.mkv", "a missing input");
    p = TS_LONGVK("encode", junk, "--vae", FULL, "-o", lat, "-W", "48", "-H", "32");
    ts_expect_exit(p, 2, "an input that is no video");
    expect_says(p, "junk.mkv", "an input that is no video");
    p = TS_LONGVK("encode", clip, "--vae", DECODER_ONLY, "-o", lat, "-W", "48", "-H", "32");
    ts_expect_exit(p, 2, "a decoder-only VAE");
    expect_says(p, "decoder-only", "a decoder-only VAE");
    p = TS_LONGVK("encode", clip, "--vae", FULL, "-o", lat, "-W", "50", "-H", "32");
    ts_expect_exit(p, 2, "a width that is no multiple of 8");
    expect_says(p, "multiples of 8", "-W 50");
    p = TS_LONGVK("encode", clip, "--vae", FULL, "-o", clip, "-W", "48", "-H", "32");
    ts_expect_exit(p, 2, "the output naming the input");
    free(p.err);
    cr_assert(!exists(lat), "%s was written by a refused command", lat);
    p = TS_LONGVK("encode", clip, "--vae", FULL, "-o", LONGVK_TEST_TMP "/no-such-folder/x.npy", "-W", "48", "-H", "32");
    ts_expect_exit(p, 2, "an output in a missing folder");
    expect_says(p, "no-such-folder", "an output in a missing folder");
    cr_assert(!exists(LONGVK_TEST_TMP "/no-such-folder"));
    /* the clip is untouched: still 5 decodable frames */
    int T, H, W;
    free(read_video(clip, &T, &H, &W));
    cr_assert_eq(T, 5);
}

/* `longvk info` on a VAE file says which halves it holds and their parameters (the tiny VAE:
 * 108 decoder tensors, 86 encoder tensors, counted from the file by lv_vae_weights_halves). */
Test(encode_cli, info_describes_both_halves) {
    char cmd[1024], *text;
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, FULL);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", cmd);
    cr_assert(strstr(text, "decoder:      513471 parameters in 108 tensors"), "%s", text);
    cr_assert(strstr(text, "encoder:      378656 parameters in 86 tensors"), "%s", text);
    free(text);
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, DECODER_ONLY);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", cmd);
    cr_assert(strstr(text, "encoder:      absent: a decoder-only file"), "%s", text);
    free(text);
}
