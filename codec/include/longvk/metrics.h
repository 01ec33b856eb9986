/* Temporal-consistency metrics of `longvk metrics` (codec/metrics/README.md): SSIM and
 * PSNR as FFmpeg's filters compute them, and a streaming pass over a video's frames that
 * summarises how its blocks join (seams, flicker, colour drift, freezes, long-range
 * similarity), written as text, JSON or an SVG chart. Implemented in codec/metrics/.
 *
 * Functions that can fail return an lv_status and leave a message in lv_last_error(). */
#ifndef LONGVK_METRICS_H
#define LONGVK_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/codec.h"   /* lv_yuv_planes */
#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Similarity of two 8-bit planes as FFmpeg's filters compute it. */

/* SSIM as libavfilter's ssim filter (from x264): 8x8 windows on a 4-pixel grid built from
 * 4x4 block sums, mean over windows; pixels beyond the last whole 4x4 block are ignored.
 * Planes smaller than 8x8 give 1 if identical, else 0. */
double lv_ssim_plane(const uint8_t *a, int astride, const uint8_t *b, int bstride, int width, int height);
/* Sum of squared differences of two planes. */
uint64_t lv_sse_plane(const uint8_t *a, int astride, const uint8_t *b, int bstride, int width, int height);
/* PSNR in dB for 8-bit data from a mean squared error (infinity when mse is 0). */
double lv_psnr_from_mse(double mse);

/* ------------------------------------------------------------------------------------------
 * Temporal-consistency metrics, computed in one streaming pass: push frames in order, then
 * read the summary and series, or write them as JSON and SVG.
 *
 * Memory: the frames the long-range similarity needs, max(distances) luma planes (256 by
 * default: 102 MB at 832x480), plus the previous RGB frame and its chroma planes
 * (lv_metrics_frame_bytes tells the total); this does not grow with the length of the
 * video. The per-pair and per-block series kept for the JSON and the chart grow by 8 bytes
 * per series per frame pair (80 bytes a frame with the default five distances: 7 MB for an
 * hour at 24 fps). */

#define LV_METRICS_MAX_DISTANCES 8

typedef struct lv_metrics_options {
    int block_frames;       /* frames per block (required, >= 1) */
    int first_block_frames; /* frames in block 0; 0 means block_frames. A latent block of L
                             * frames through the Wan VAE gives 1 + 4 (L - 1) pixel frames
                             * first and 4 L after. */
    int ndistances;         /* long-range SSIM distances d: SSIM(frame t, frame t + d) */
    int distances[LV_METRICS_MAX_DISTANCES]; /* default 1, 4, 16, 64, 256 */
    double freeze_mae;      /* a pair with MAE below this is frozen (default 0.5) */
} lv_metrics_options;

void lv_metrics_options_default(lv_metrics_options *opt);

typedef struct lv_metrics lv_metrics;

typedef enum lv_metrics_series {
    LV_SERIES_MAE = 0,      /* mean |I_{t+1} - I_t| over pixels and RGB channels */
    LV_SERIES_LUMA_FLICKER, /* |mean Y_{t+1} - mean Y_t| */
    LV_SERIES_PSNR_Y,       /* dB on the luma plane (infinity for identical frames) */
    LV_SERIES_PSNR_AVG,     /* dB over all planes, weighted by plane size as FFmpeg's psnr_avg */
    LV_SERIES_SSIM_Y,       /* SSIM on the luma plane */
    LV_SERIES_COUNT
} lv_metrics_series;

/* Bytes of frame storage lv_metrics_create allocates for this size and these options. */
size_t lv_metrics_frame_bytes(int width, int height, const lv_metrics_options *opt);
lv_status lv_metrics_create(int width, int height, const lv_metrics_options *opt, lv_metrics **out);
/* Adds the next frame: packed RGB (width * height * 3) and its YUV planes (luma the same size
 * as the frame). With planes NULL (frames that were never encoded, e.g. straight from the
 * model) they are computed from the RGB, BT.709 limited range 4:4:4, in 3 more planes of
 * memory. */
lv_status lv_metrics_push(lv_metrics *m, const uint8_t *rgb, const lv_yuv_planes *planes);
void lv_metrics_free(lv_metrics *m);
/* The options in effect (first_block_frames filled in). */
const lv_metrics_options *lv_metrics_options_used(const lv_metrics *m);

typedef struct lv_metrics_summary {
    int width, height;
    int64_t frames, pairs, blocks;
    int64_t boundary_pairs, within_pairs;
    /* seam ratio R = mean D over boundary pairs / mean D over within-block pairs, for
     * D = MAE and D = 1 - SSIM. 1 when both means are 0 (nothing moves, nothing jumps),
     * infinity when only the within-block mean is 0, NaN when there is no boundary pair or no
     * within-block pair. */
    double seam_ratio_mae, seam_ratio_ssim;
    double boundary_mae, within_mae;
    double temporal_flickering;              /* (255 - mean MAE) / 255; 1 is static */
    double luma_flicker, luma_flicker_boundary, luma_flicker_within; /* means */
    double mean_mae, mean_ssim_y, mean_psnr_y; /* mean PSNR over pairs that differ */
    int64_t identical_pairs;                 /* pairs with infinite PSNR */
    double freeze_fraction;                  /* share of pairs with MAE < freeze_mae */
    int64_t frozen_pairs;
    double colour_drift[3];       /* mean R, G, B of the last block minus the first's */
    double colour_max_step;       /* largest |change| of a channel mean between neighbours */
    int64_t colour_max_step_block; /* the step is from block b - 1 to block b; -1 if none */
    double hist_last, hist_max;   /* histogram chi-square distance to block 0: last, largest */
    int ndistances;
    int distances[LV_METRICS_MAX_DISTANCES];
    double long_range_ssim[LV_METRICS_MAX_DISTANCES]; /* mean; NaN when video is too short */
    int64_t long_range_pairs[LV_METRICS_MAX_DISTANCES];
} lv_metrics_summary;

void lv_metrics_summarize(const lv_metrics *m, lv_metrics_summary *out);

/* One-line readings of the summary (thresholds from codec/metrics/README.md where it gives
 * them: a seam ratio about 1 is no visible seam, above 1.5 a seam you can see; the others
 * are stated in the line). The text stays valid until the next verdict call on the thread. */
const char *lv_metrics_verdict_seam(const lv_metrics_summary *s);
const char *lv_metrics_verdict_flicker(const lv_metrics_summary *s);
const char *lv_metrics_verdict_colour(const lv_metrics_summary *s);
const char *lv_metrics_verdict_freeze(const lv_metrics_summary *s);

/* Per frame pair t (frames t and t + 1): `*n` values. */
const double *lv_metrics_pair_series(const lv_metrics *m, lv_metrics_series which, int64_t *n);
/* 1 when pair t crosses a block boundary. */
int lv_metrics_is_boundary_pair(const lv_metrics *m, int64_t t);
/* SSIM(frame t, frame t + distances[k]) for t = 0 .. n - 1. */
const double *lv_metrics_long_range_series(const lv_metrics *m, int k, int64_t *n);

typedef struct lv_metrics_block {
    int64_t first_frame, frames;
    double mean_rgb[3], mean_y;
    double hist_chi2; /* chi-square distance 0.5 sum (h - g)^2 / (h + g) of this block's RGB
                       * histogram (32 bins per channel, normalised to sum 1) to block 0's:
                       * 0 same palette, 1 disjoint */
} lv_metrics_block;
/* Blocks with at least one frame, in order. */
const lv_metrics_block *lv_metrics_blocks(const lv_metrics *m, int64_t *n);

/* Writes every series, the summary and its verdicts as JSON (atomically: a temporary file
 * renamed when complete). `video` describes the source (may be NULL). Infinite and NaN
 * values are written as null. */
lv_status lv_metrics_write_json(const lv_metrics *m, const char *path, const char *video_path,
                                const lv_video_info *video);
/* Draws MAE and 1 - SSIM per frame pair with the block boundaries marked, and the per-block
 * colour means below, as an SVG file (atomically). */
lv_status lv_metrics_write_svg(const lv_metrics *m, const char *path, const char *title);

#ifdef __cplusplus
}
#endif
#endif
