/* Synthetic video clips and video helpers for the codec and metrics tests. */
#ifndef LONGVK_TEST_CLIPS_H
#define LONGVK_TEST_CLIPS_H

#include <stdint.h>

#include "longvk.h"

typedef enum clip_kind {
    CLIP_GRADIENT_SQUARE, /* colour gradient, a white square moving 2 px right and 1 px down a frame */
    CLIP_HARD_CUTS,       /* like CLIP_GRADIENT_SQUARE, but every `period` frames a new scene:
                           * another background colour and square position */
    CLIP_STATIC,          /* one frame repeated */
    CLIP_SMOOTH,          /* a sinusoidal pattern panning 1 px a frame under a moving square */
    CLIP_NOISY            /* CLIP_GRADIENT_SQUARE plus deterministic noise (texture for SSIM/PSNR) */
} clip_kind;

/* Frame t of a clip as packed RGB (w * h * 3). `period` is the scene length of CLIP_HARD_CUTS. */
void clip_frame(clip_kind kind, int w, int h, int t, int period, uint8_t *rgb);

/* Writes n frames of a clip to `path`, flushing a block every `block` frames (codec NULL:
 * the container's default). Returns the status of the first failing call. */
lv_status clip_write(const char *path, const char *codec, clip_kind kind, int w, int h, double fps, int n, int block,
                     int period);

/* PSNR in dB between two packed 8-bit buffers of n bytes (infinity when equal). */
double clip_psnr(const uint8_t *a, const uint8_t *b, size_t n);

/* Runs a shell command; returns its exit status (-1 if it could not run or was killed). */
int clip_run(const char *command);
/* Reads a whole text file into a malloc'd string (NULL on failure). */
char *clip_read_text(const char *path);

#endif
