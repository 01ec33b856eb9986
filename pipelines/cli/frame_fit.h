/* Fitting a decoded frame to the size a model works at (pipelines/cli/frame_fit.c), for
 * `longvk encode`: scaled to cover the target (aspect ratio kept), then the centre cropped
 * to it. Cover-and-crop rather than pad: padding bars would be encoded as content, and a
 * diffusion model continuing or conditioning on them would draw the bars on. */
#ifndef LONGVK_CLI_FRAME_FIT_H
#define LONGVK_CLI_FRAME_FIT_H

#include <stdint.h>

/* The part of a w0 x h0 frame that fills a W x H target: scale s = max(W / w0, H / h0) and
 * the source window's offsets (in source pixels) that centre it. */
typedef struct frame_fit {
    int w0, h0, W, H;
    double scale, x0, y0;
} frame_fit;

void frame_fit_plan(frame_fit *f, int w0, int h0, int W, int H);

/* rgb: packed 8-bit RGB, w0 x h0; out: [3, H, W] channel planes in [-1, 1] (v / 127.5 - 1,
 * as Wan's pipelines normalise), resampled with a triangle filter whose support widens with
 * the reduction (bilinear when enlarging, area-like when reducing; the same size at scale 1
 * is a copy); tmp: h0 * W * 3 floats. */
void frame_fit_apply(const frame_fit *f, const uint8_t *rgb, float *out, float *tmp);

#endif
