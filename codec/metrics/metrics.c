/* Temporal-consistency metrics in one streaming pass (codec/metrics/README.md).
 *
 * Frames arrive in order. For the pair (t - 1, t) we need the previous RGB frame and the
 * previous YUV planes; for the long-range SSIM(t - d, t) the luma planes of the last
 * max(d) frames, kept in a ring. Nothing else of the video is kept but the per-pair and
 * per-block numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/metrics.h"

#define HIST_BINS 32 /* per channel: 8 levels a bin */

typedef struct series {
    double *v;
    int64_t n, cap;
} series;

struct lv_metrics {
    int width, height;
    lv_metrics_options opt;
    int max_d;
    size_t luma_bytes;
    uint8_t *ring;         /* max_d luma planes, frame f in slot f % max_d */
    uint8_t *prev_rgb;
    uint8_t *prev_chroma;  /* two chroma planes of the previous frame, packed */
    uint8_t *own_yuv;      /* yuv444 computed here when lv_metrics_push gets no planes */
    int nplanes;           /* of the stream, fixed by the first frame */
    int chroma_w, chroma_h;
    double prev_mean_y;
    int64_t frames;
    series pair[LV_SERIES_COUNT];
    series lr[LV_METRICS_MAX_DISTANCES];
    lv_metrics_block *blocks;
    int64_t nblocks, cap_blocks;
    double block_sum_rgb[3], block_sum_y;
    uint64_t hist0[3 * HIST_BINS];   /* block 0 */
    uint64_t hist_cur[3 * HIST_BINS];/* the current block (block 0: hist0 itself) */
};

void lv_metrics_options_default(lv_metrics_options *opt) {
    memset(opt, 0, sizeof *opt);
    static const int d[] = {1, 4, 16, 64, 256};
    opt->ndistances = 5;
    memcpy(opt->distances, d, sizeof d);
    opt->freeze_mae = 0.5;
}

static lv_status check_options(int width, int height, const lv_metrics_options *opt) {
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
        return lv_error(LV_ERR_INVALID, "metrics: frame size %dx%d out of range", width, height);
    if (opt->block_frames < 1) return lv_error(LV_ERR_INVALID, "metrics: block_frames must be at least 1 (got %d)", opt->block_frames);
    if (opt->first_block_frames < 0)
        return lv_error(LV_ERR_INVALID, "metrics: first_block_frames must be >= 0 (got %d)", opt->first_block_frames);
    if (opt->ndistances < 0 || opt->ndistances > LV_METRICS_MAX_DISTANCES)
        return lv_error(LV_ERR_INVALID, "metrics: %d long-range distances (at most %d)", opt->ndistances,
                        LV_METRICS_MAX_DISTANCES);
    for (int k = 0; k < opt->ndistances; k++)
        if (opt->distances[k] < 1 || opt->distances[k] > 100000)
            return lv_error(LV_ERR_INVALID, "metrics: long-range distance %d out of [1, 100000]", opt->distances[k]);
    return LV_OK;
}

static int max_distance(const lv_metrics_options *opt) {
    int m = 1; /* the pair metrics need the previous frame's luma */
    for (int k = 0; k < opt->ndistances; k++)
        if (opt->distances[k] > m) m = opt->distances[k];
    return m;
}

size_t lv_metrics_frame_bytes(int width, int height, const lv_metrics_options *opt) {
    size_t plane = (size_t)width * (size_t)height;
    /* luma ring + previous RGB frame + two chroma planes (at most full size) */
    return (size_t)max_distance(opt) * plane + 3 * plane + 2 * plane;
}

lv_status lv_metrics_create(int width, int height, const lv_metrics_options *opt, lv_metrics **out) {
    if (!out || !opt) return lv_error(LV_ERR_INVALID, "lv_metrics_create: NULL argument");
    *out = NULL;
    LV_TRY(check_options(width, height, opt));
    lv_metrics *m = calloc(1, sizeof *m);
    if (!m) return lv_error(LV_ERR_NOMEM, "metrics: out of memory");
    m->width = width;
    m->height = height;
    m->opt = *opt;
    if (m->opt.first_block_frames == 0) m->opt.first_block_frames = m->opt.block_frames;
    m->max_d = max_distance(opt);
    m->luma_bytes = (size_t)width * (size_t)height;
    m->ring = malloc((size_t)m->max_d * m->luma_bytes);
    m->prev_rgb = malloc(3 * m->luma_bytes);
    m->prev_chroma = malloc(2 * m->luma_bytes);
    if (!m->ring || !m->prev_rgb || !m->prev_chroma) {
        lv_metrics_free(m);
        return lv_error(LV_ERR_NOMEM, "metrics: cannot allocate %.1f MB of frame storage for %dx%d and distance %d",
                        (double)lv_metrics_frame_bytes(width, height, opt) / 1e6, width, height, max_distance(opt));
    }
    *out = m;
    return LV_OK;
}

void lv_metrics_free(lv_metrics *m) {
    if (!m) return;
    free(m->ring);
    free(m->prev_rgb);
    free(m->prev_chroma);
    free(m->own_yuv);
    for (int s = 0; s < LV_SERIES_COUNT; s++) free(m->pair[s].v);
    for (int k = 0; k < LV_METRICS_MAX_DISTANCES; k++) free(m->lr[k].v);
    free(m->blocks);
    free(m);
}

static int append(series *s, double v) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 1024;
        double *p = realloc(s->v, (size_t)cap * sizeof *p);
        if (!p) return 0;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 1;
}

static int64_t block_of(const lv_metrics *m, int64_t frame) {
    int64_t first = m->opt.first_block_frames;
    return frame < first ? 0 : 1 + (frame - first) / m->opt.block_frames;
}

int lv_metrics_is_boundary_pair(const lv_metrics *m, int64_t t) { return block_of(m, t) != block_of(m, t + 1); }

/* Chi-square distance 0.5 sum (h - g)^2 / (h + g) of two histograms, each normalised to 1. */
static double chi_square(const uint64_t *h, const uint64_t *g) {
    double nh = 0, ng = 0;
    for (int i = 0; i < 3 * HIST_BINS; i++) {
        nh += (double)h[i];
        ng += (double)g[i];
    }
    if (nh == 0 || ng == 0) return 0;
    double d = 0;
    for (int i = 0; i < 3 * HIST_BINS; i++) {
        double a = (double)h[i] / nh, b = (double)g[i] / ng;
        if (a + b > 0) d += (a - b) * (a - b) / (a + b);
    }
    return 0.5 * d;
}

/* Adds the frame to its block's colour sums and histogram, starting a new block if needed. */
static lv_status add_to_block(lv_metrics *m, const uint8_t *rgb, double sum_y) {
    int64_t b = block_of(m, m->frames);
    if (b >= m->nblocks) {
        if (m->nblocks == m->cap_blocks) {
            int64_t cap = m->cap_blocks ? 2 * m->cap_blocks : 64;
            lv_metrics_block *p = realloc(m->blocks, (size_t)cap * sizeof *p);
            if (!p) return lv_error(LV_ERR_NOMEM, "metrics: out of memory at frame %lld", (long long)m->frames);
            m->blocks = p;
            m->cap_blocks = cap;
        }
        memset(&m->blocks[m->nblocks], 0, sizeof m->blocks[0]);
        m->blocks[m->nblocks].first_frame = m->frames;
        m->nblocks++;
        memset(m->block_sum_rgb, 0, sizeof m->block_sum_rgb);
        m->block_sum_y = 0;
        memset(m->hist_cur, 0, sizeof m->hist_cur);
    }
    uint64_t *hist = m->nblocks == 1 ? m->hist0 : m->hist_cur;
    uint64_t sums[3] = {0, 0, 0};
    size_t n = m->luma_bytes;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            uint8_t v = rgb[3 * i + (size_t)c];
            sums[c] += v;
            hist[c * HIST_BINS + v / (256 / HIST_BINS)]++;
        }
    lv_metrics_block *blk = &m->blocks[m->nblocks - 1];
    blk->frames++;
    double pixels = (double)blk->frames * (double)n;
    for (int c = 0; c < 3; c++) {
        m->block_sum_rgb[c] += (double)sums[c];
        blk->mean_rgb[c] = m->block_sum_rgb[c] / pixels;
    }
    m->block_sum_y += sum_y;
    blk->mean_y = m->block_sum_y / pixels;
    blk->hist_chi2 = m->nblocks == 1 ? 0 : chi_square(m->hist_cur, m->hist0);
    return LV_OK;
}

static uint64_t plane_sum(const uint8_t *p, int stride, int w, int h) {
    uint64_t s = 0;
    for (int y = 0; y < h; y++) {
        const uint8_t *row = p + (size_t)y * (size_t)stride;
        for (int x = 0; x < w; x++) s += row[x];
    }
    return s;
}

static void copy_plane(uint8_t *dst, const uint8_t *src, int stride, int w, int h) {
    for (int y = 0; y < h; y++) memcpy(dst + (size_t)y * (size_t)w, src + (size_t)y * (size_t)stride, (size_t)w);
}

static lv_status check_planes(lv_metrics *m, const lv_yuv_planes *p) {
    if (p->nplanes != 1 && p->nplanes != 3)
        return lv_error(LV_ERR_INVALID, "metrics: frame %lld has %d planes (1 or 3 expected)", (long long)m->frames, p->nplanes);
    if (p->width[0] != m->width || p->height[0] != m->height)
        return lv_error(LV_ERR_INVALID, "metrics: frame %lld luma is %dx%d, expected %dx%d", (long long)m->frames,
                        p->width[0], p->height[0], m->width, m->height);
    if (m->frames == 0) {
        m->nplanes = p->nplanes;
        m->chroma_w = p->nplanes == 3 ? p->width[1] : 0;
        m->chroma_h = p->nplanes == 3 ? p->height[1] : 0;
        if (m->nplanes == 3 && (m->chroma_w > m->width || m->chroma_h > m->height || p->width[2] != m->chroma_w ||
                                p->height[2] != m->chroma_h))
            return lv_error(LV_ERR_INVALID, "metrics: chroma planes %dx%d / %dx%d do not fit a %dx%d frame", p->width[1],
                            p->height[1], p->width[2], p->height[2], m->width, m->height);
    } else if (p->nplanes != m->nplanes || (m->nplanes == 3 && (p->width[1] != m->chroma_w || p->height[1] != m->chroma_h))) {
        return lv_error(LV_ERR_INVALID, "metrics: the plane layout changed at frame %lld", (long long)m->frames);
    }
    return LV_OK;
}

/* Y'CbCr 4:4:4 from RGB, BT.709 limited range, as the encoder would store it (the
 * coefficients of ITU-R BT.709 scaled to 219 and 224 levels, rounded to nearest). */
static lv_status own_planes(lv_metrics *m, const uint8_t *rgb, lv_yuv_planes *p) {
    size_t n = m->luma_bytes;
    if (!m->own_yuv && !(m->own_yuv = malloc(3 * n))) return lv_error(LV_ERR_NOMEM, "metrics: out of memory");
    uint8_t *y = m->own_yuv, *u = y + n, *v = u + n;
    for (size_t i = 0; i < n; i++) {
        double r = rgb[3 * i] / 255.0, g = rgb[3 * i + 1] / 255.0, b = rgb[3 * i + 2] / 255.0;
        double ey = 0.2126 * r + 0.7152 * g + 0.0722 * b;
        y[i] = (uint8_t)lrint(16 + 219 * ey);
        u[i] = (uint8_t)lrint(128 + 224 * (b - ey) / 1.8556);
        v[i] = (uint8_t)lrint(128 + 224 * (r - ey) / 1.5748);
    }
    *p = (lv_yuv_planes){3, {y, u, v}, {m->width, m->width, m->width}, {m->width, m->width, m->width},
                         {m->height, m->height, m->height}, 0};
    return LV_OK;
}

lv_status lv_metrics_push(lv_metrics *m, const uint8_t *rgb, const lv_yuv_planes *planes) {
    if (!m || !rgb) return lv_error(LV_ERR_INVALID, "lv_metrics_push: NULL argument");
    lv_yuv_planes computed;
    const lv_yuv_planes *p = planes;
    if (!p) {
        LV_TRY(own_planes(m, rgb, &computed));
        p = &computed;
    }
    LV_TRY(check_planes(m, p));
    int w = m->width, h = m->height;
    size_t n = m->luma_bytes;
    double sum_y = (double)plane_sum(p->data[0], p->stride[0], w, h);
    double mean_y = sum_y / (double)n;
    int64_t t = m->frames;
    const uint8_t *prev_y = m->ring + (size_t)((t - 1 + m->max_d) % m->max_d) * n;
    int ok = 1;
    if (t > 0) {
        uint64_t abs_sum = 0;
        for (size_t i = 0; i < 3 * n; i++) abs_sum += (uint64_t)abs((int)rgb[i] - (int)m->prev_rgb[i]);
        double mae = (double)abs_sum / (3.0 * (double)n);
        uint64_t sse_y = lv_sse_plane(p->data[0], p->stride[0], prev_y, w, w, h);
        uint64_t sse_all = sse_y;
        double pixels_all = (double)n;
        if (m->nplanes == 3) {
            size_t cn = (size_t)m->chroma_w * (size_t)m->chroma_h;
            for (int c = 1; c <= 2; c++)
                sse_all += lv_sse_plane(p->data[c], p->stride[c], m->prev_chroma + (size_t)(c - 1) * cn, m->chroma_w,
                                        m->chroma_w, m->chroma_h);
            pixels_all += 2.0 * (double)cn;
        }
        double ssim = lv_ssim_plane(p->data[0], p->stride[0], prev_y, w, w, h);
        ok &= append(&m->pair[LV_SERIES_MAE], mae);
        ok &= append(&m->pair[LV_SERIES_LUMA_FLICKER], fabs(mean_y - m->prev_mean_y));
        ok &= append(&m->pair[LV_SERIES_PSNR_Y], lv_psnr_from_mse((double)sse_y / (double)n));
        ok &= append(&m->pair[LV_SERIES_PSNR_AVG], lv_psnr_from_mse((double)sse_all / pixels_all));
        ok &= append(&m->pair[LV_SERIES_SSIM_Y], ssim);
    }
    for (int k = 0; k < m->opt.ndistances; k++) {
        int d = m->opt.distances[k];
        if (t < d) continue;
        double v = d == 1 ? m->pair[LV_SERIES_SSIM_Y].v[t - 1]
                          : lv_ssim_plane(p->data[0], p->stride[0], m->ring + (size_t)((t - d) % m->max_d) * n, w, w, h);
        ok &= append(&m->lr[k], v);
    }
    if (!ok) return lv_error(LV_ERR_NOMEM, "metrics: out of memory at frame %lld", (long long)t);
    LV_TRY(add_to_block(m, rgb, sum_y));
    /* keep this frame for the next pairs */
    copy_plane(m->ring + (size_t)(t % m->max_d) * n, p->data[0], p->stride[0], w, h);
    memcpy(m->prev_rgb, rgb, 3 * n);
    if (m->nplanes == 3) {
        size_t cn = (size_t)m->chroma_w * (size_t)m->chroma_h;
        copy_plane(m->prev_chroma, p->data[1], p->stride[1], m->chroma_w, m->chroma_h);
        copy_plane(m->prev_chroma + cn, p->data[2], p->stride[2], m->chroma_w, m->chroma_h);
    }
    m->prev_mean_y = mean_y;
    m->frames++;
    return LV_OK;
}

const double *lv_metrics_pair_series(const lv_metrics *m, lv_metrics_series which, int64_t *n) {
    if (!m || which < 0 || which >= LV_SERIES_COUNT) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = m->pair[which].n;
    return m->pair[which].v;
}

const double *lv_metrics_long_range_series(const lv_metrics *m, int k, int64_t *n) {
    if (!m || k < 0 || k >= m->opt.ndistances) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = m->lr[k].n;
    return m->lr[k].v;
}

const lv_metrics_block *lv_metrics_blocks(const lv_metrics *m, int64_t *n) {
    if (n) *n = m ? m->nblocks : 0;
    return m ? m->blocks : NULL;
}

static double ratio(double boundary, double within) {
    if (!(within > 0)) return boundary > 0 ? INFINITY : 1.0;
    return boundary / within;
}

void lv_metrics_summarize(const lv_metrics *m, lv_metrics_summary *s) {
    memset(s, 0, sizeof *s);
    s->width = m->width;
    s->height = m->height;
    s->frames = m->frames;
    s->pairs = m->pair[LV_SERIES_MAE].n;
    s->blocks = m->nblocks;
    const double *mae = m->pair[LV_SERIES_MAE].v, *ssim = m->pair[LV_SERIES_SSIM_Y].v;
    const double *lf = m->pair[LV_SERIES_LUMA_FLICKER].v, *psnr = m->pair[LV_SERIES_PSNR_Y].v;
    double b_mae = 0, w_mae = 0, b_ssim = 0, w_ssim = 0, b_lf = 0, w_lf = 0;
    double all_mae = 0, all_ssim = 0, all_lf = 0, all_psnr = 0;
    int64_t finite_psnr = 0;
    for (int64_t t = 0; t < s->pairs; t++) {
        int boundary = lv_metrics_is_boundary_pair(m, t);
        double d_ssim = 1.0 - ssim[t];
        if (boundary) {
            s->boundary_pairs++;
            b_mae += mae[t];
            b_ssim += d_ssim;
            b_lf += lf[t];
        } else {
            s->within_pairs++;
            w_mae += mae[t];
            w_ssim += d_ssim;
            w_lf += lf[t];
        }
        all_mae += mae[t];
        all_ssim += ssim[t];
        all_lf += lf[t];
        if (isfinite(psnr[t])) {
            all_psnr += psnr[t];
            finite_psnr++;
        } else {
            s->identical_pairs++;
        }
        if (mae[t] < m->opt.freeze_mae) s->frozen_pairs++;
    }
    double np = (double)s->pairs, nb = (double)s->boundary_pairs, nw = (double)s->within_pairs;
    s->boundary_mae = nb > 0 ? b_mae / nb : NAN;
    s->within_mae = nw > 0 ? w_mae / nw : NAN;
    if (nb > 0 && nw > 0) {
        s->seam_ratio_mae = ratio(b_mae / nb, w_mae / nw);
        s->seam_ratio_ssim = ratio(b_ssim / nb, w_ssim / nw);
    } else {
        s->seam_ratio_mae = s->seam_ratio_ssim = NAN;
    }
    s->mean_mae = np > 0 ? all_mae / np : NAN;
    s->temporal_flickering = np > 0 ? (255.0 - s->mean_mae) / 255.0 : NAN;
    s->luma_flicker = np > 0 ? all_lf / np : NAN;
    s->luma_flicker_boundary = nb > 0 ? b_lf / nb : NAN;
    s->luma_flicker_within = nw > 0 ? w_lf / nw : NAN;
    s->mean_ssim_y = np > 0 ? all_ssim / np : NAN;
    s->mean_psnr_y = finite_psnr > 0 ? all_psnr / (double)finite_psnr : (np > 0 ? INFINITY : NAN);
    s->freeze_fraction = np > 0 ? (double)s->frozen_pairs / np : NAN;

    s->colour_max_step_block = -1;
    if (m->nblocks > 0) {
        const lv_metrics_block *first = &m->blocks[0], *last = &m->blocks[m->nblocks - 1];
        for (int c = 0; c < 3; c++) s->colour_drift[c] = last->mean_rgb[c] - first->mean_rgb[c];
        for (int64_t b = 1; b < m->nblocks; b++) {
            for (int c = 0; c < 3; c++) {
                double step = fabs(m->blocks[b].mean_rgb[c] - m->blocks[b - 1].mean_rgb[c]);
                if (step > s->colour_max_step) {
                    s->colour_max_step = step;
                    s->colour_max_step_block = b;
                }
            }
            if (m->blocks[b].hist_chi2 > s->hist_max) s->hist_max = m->blocks[b].hist_chi2;
        }
        s->hist_last = last->hist_chi2;
    }
    s->ndistances = m->opt.ndistances;
    for (int k = 0; k < m->opt.ndistances; k++) {
        s->distances[k] = m->opt.distances[k];
        s->long_range_pairs[k] = m->lr[k].n;
        double sum = 0;
        for (int64_t i = 0; i < m->lr[k].n; i++) sum += m->lr[k].v[i];
        s->long_range_ssim[k] = m->lr[k].n > 0 ? sum / (double)m->lr[k].n : NAN;
    }
}

const lv_metrics_options *lv_metrics_options_used(const lv_metrics *m) { return m ? &m->opt : NULL; }
