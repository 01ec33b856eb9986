/* Frames to the encoder and the frame sink (see longvk/frame_writer.h): the upscale, the
 * float-to-byte conversion and the sink's copy of each frame, for frames made by the model
 * (lv_generate) and frames decoded by the VAE (decode_latents.c: lv_generate, `longvk
 * decode`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/frame_writer.h"

/* [3, F, h, w] -> [3, F, h*s, w*s], bilinear with edge clamping (half-pixel centres). */
static void upscale(const float *in, int F, int h, int w, int s, float *out) {
    int H = h * s, W = w * s;
    for (int c = 0; c < 3; c++)
        for (int f = 0; f < F; f++) {
            const float *src = in + ((size_t)c * F + f) * h * w;
            float *dst = out + ((size_t)c * F + f) * H * W;
            for (int y = 0; y < H; y++) {
                double sy = (y + 0.5) / s - 0.5;
                int y0 = (int)floor(sy);
                double fy = sy - y0;
                int ya = y0 < 0 ? 0 : y0, yb = y0 + 1 >= h ? h - 1 : y0 + 1;
                if (ya > h - 1) ya = h - 1;
                for (int x = 0; x < W; x++) {
                    double sx = (x + 0.5) / s - 0.5;
                    int x0 = (int)floor(sx);
                    double fx = sx - x0;
                    int xa = x0 < 0 ? 0 : x0, xb = x0 + 1 >= w ? w - 1 : x0 + 1;
                    if (xa > w - 1) xa = w - 1;
                    double top = src[ya * w + xa] * (1 - fx) + src[ya * w + xb] * fx;
                    double bot = src[yb * w + xa] * (1 - fx) + src[yb * w + xb] * fx;
                    dst[y * W + x] = (float)(top * (1 - fy) + bot * fy);
                }
            }
        }
}

/* *buf of at least n elements of `size` bytes. */
static lv_status grow(void **buf, size_t *have, size_t n, size_t size) {
    if (*have >= n) return LV_OK;
    void *p = realloc(*buf, n * size);
    if (!p) return lv_error(LV_ERR_NOMEM, "out of host memory");
    *buf = p;
    *have = n;
    return LV_OK;
}

static int scale_of(const lv_frame_writer *w) { return w->scale > 1 ? w->scale : 1; }

lv_status lv_frame_writer_reserve(lv_frame_writer *w, int n, int height, int width) {
    if (!w || n < 0 || height < 0 || width < 0)
        return lv_error(LV_ERR_INVALID, "lv_frame_writer_reserve: %s", !w ? "the writer is NULL" : "a negative size");
    const int s = scale_of(w);
    const size_t frame = (size_t)3 * height * width * s * s;
    if (s > 1) LV_TRY(grow((void **)&w->upscaled, &w->upscaled_size, (size_t)n * frame, sizeof *w->upscaled));
    if (w->sink && n > 1) LV_TRY(grow((void **)&w->one, &w->one_size, frame, sizeof *w->one));
    if (w->encoder && w->rounding == LV_FRAME_TRUNCATE) LV_TRY(grow((void **)&w->rgb, &w->rgb_size, frame, 1));
    return LV_OK;
}

/* One frame [3, H, W] (plane stride `stride` floats between channels, frame t of the block)
 * to packed bytes: uint8(clamp(127.5 x + 127.5, 0, 255)), truncated. */
static void truncate_frame(const float *x, size_t stride, size_t P, uint8_t *rgb) {
    for (int c = 0; c < 3; c++)
        for (size_t p = 0; p < P; p++) {
            float v = 127.5f * x[c * stride + p] + 127.5f;
            v = v > 0.0f ? v : 0.0f; /* also maps NaN to 0 */
            v = v < 255.0f ? v : 255.0f;
            rgb[p * 3 + c] = (uint8_t)v;
        }
}

lv_status lv_frame_writer_write(lv_frame_writer *w, const float *frames, int n, int height, int width) {
    if (!w || (n > 0 && !frames) || n < 0 || height < 1 || width < 1)
        return lv_error(LV_ERR_INVALID, "lv_frame_writer_write: %s",
                        !w ? "the writer is NULL" : n < 0 || height < 1 || width < 1 ? "a bad size" : "no frames");
    if (w->rounding != LV_FRAME_ROUND && w->rounding != LV_FRAME_TRUNCATE)
        return lv_error(LV_ERR_INVALID, "lv_frame_writer_write: unknown rounding %d", (int)w->rounding);
    LV_TRY(lv_frame_writer_reserve(w, n, height, width));
    const int s = scale_of(w);
    const float *src = frames;
    if (s > 1) {
        upscale(frames, n, height, width, s, w->upscaled);
        src = w->upscaled;
    }
    const int H = height * s, W = width * s;
    const size_t plane = (size_t)H * W;
    if (w->encoder && w->rounding == LV_FRAME_ROUND) LV_TRY(lv_encoder_write_float(w->encoder, src, n, LV_LAYOUT_CFHW));
    for (int t = 0; w->encoder && w->rounding == LV_FRAME_TRUNCATE && t < n; t++) {
        truncate_frame(src + (size_t)t * plane, (size_t)n * plane, plane, w->rgb);
        LV_TRY(lv_encoder_write_rgb(w->encoder, w->rgb, 1));
    }
    for (int t = 0; w->sink && t < n; t++) {
        const float *frame = n > 1 ? w->one : src;
        if (n > 1) /* [3, n, H, W] -> frame t's [3, H, W] */
            for (int c = 0; c < 3; c++)
                memcpy(w->one + c * plane, src + ((size_t)c * n + t) * plane, plane * sizeof *frame);
        LV_TRY(w->sink(w->sink_user, w->frames + t, frame, H, W));
    }
    w->frames += n;
    return LV_OK;
}

void lv_frame_writer_free(lv_frame_writer *w) {
    if (!w) return;
    free(w->upscaled);
    free(w->one);
    free(w->rgb);
    w->upscaled = w->one = NULL;
    w->rgb = NULL;
    w->upscaled_size = w->one_size = w->rgb_size = 0;
}
