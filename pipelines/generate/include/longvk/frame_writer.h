/* Frames to where they go (pipelines/generate/frame_writer.c, decode_latents.c): the one path by which frames,
 * made by the model or decoded by the VAE, reach a video encoder and a frame sink, for
 * lv_generate and `longvk decode` alike. */
#ifndef LONGVK_FRAME_WRITER_H
#define LONGVK_FRAME_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/codec.h"
#include "longvk/engine.h"
#include "longvk/generate.h"
#include "longvk/vae.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a float in [-1, 1] becomes the encoder's byte. */
typedef enum lv_frame_rounding {
    LV_FRAME_ROUND = 0,  /* round(127.5 x + 127.5), NaN as 0 (lv_encoder_write_float): lv_generate */
    LV_FRAME_TRUNCATE    /* uint8(127.5 x + 127.5) truncated, after clamping to [0, 255], NaN as 0:
                            SANA-Video's own conversion, `longvk decode`'s */
} lv_frame_rounding;

/* Set the fields, zero the rest (lv_frame_writer w = {.encoder = e, ...}); lv_frame_writer_free
 * frees what it allocated (never the encoder). */
typedef struct lv_frame_writer {
    lv_encoder *encoder;          /* borrowed; NULL: no video */
    lv_frame_rounding rounding;
    int scale;                    /* bilinear upscale by this integer first (half-pixel centres,
                                     edges clamped); 0 or 1: none */
    lv_generate_frame_fn sink;    /* optional: every frame [3, H, W] as the encoder gets it */
    void *sink_user;
    int64_t frames;               /* frames written: the next frame's index for the sink (a
                                     resumed video starts it at the frames kept) */
    /* host buffers, grown as needed (lv_frame_writer_reserve: at once) */
    float *upscaled, *one;
    uint8_t *rgb;
    size_t upscaled_size, one_size, rgb_size; /* in elements */
} lv_frame_writer;

/* Buffers for n frames of height x width (before the upscale) at a time, allocated now so
 * that a run out of host memory fails before its first frame. */
lv_status lv_frame_writer_reserve(lv_frame_writer *w, int n, int height, int width);
/* n frames [3, n, height, width] (channel planes, frame-major within each) in order. */
lv_status lv_frame_writer_write(lv_frame_writer *w, const float *frames, int n, int height, int width);
void lv_frame_writer_free(lv_frame_writer *w);

/* Whether latents of shape [ndim] can be decoded by `vae` (its channels, no zero or
 * out-of-range size, de-normalisation tables, at least one latent row per sequence-parallel
 * band): LV_OK, or the error saying what is wrong, naming the files (vae_name,
 * latents_name; NULL: generic words). (pipelines/generate/decode_latents.c) */
lv_status lv_decode_check_latents(const lv_vae_decoder *vae, const char *vae_name, const char *latents_name,
                                  int ndim, const int64_t *shape, int bands);

/* Latents [z, n, h, w] (normalised, diffusion space) through the VAE into the writer: frame
 * by frame as each is decoded (lv_vae_decode_frames_cb), continuing the decoder's video; or
 * with `tiling` (not NULL) the whole video from its start in spatial tiles
 * (lv_vae_decode_tiled), held in host memory [3, T, 8h, 8w] and then written. Over
 * sequence-parallel bands (lv_vae_set_sequence_parallel) the frames reach the writer on the
 * process holding band 0 only. */
lv_status lv_vae_decode_to_writer(lv_ctx *ctx, lv_vae_decoder *vae, const float *latents, int n, int h, int w,
                                  const lv_vae_tiling *tiling, lv_frame_writer *out);

#ifdef __cplusplus
}
#endif
#endif
