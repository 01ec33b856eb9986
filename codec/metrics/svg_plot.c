/* `longvk metrics --plot`: an SVG chart of the metrics, three panels on one frame axis:
 * MAE per frame pair and 1 - SSIM per frame pair, each with the block boundaries marked
 * (dashed red lines), and the per-block colour means (R, G, B, Y) below, drawn at each
 * block's frames. Series longer than the plot is wide are reduced to the largest value per
 * bucket of pairs, so a seam never disappears in the reduction. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "longvk/metrics.h"

#define SVG_W 1000
#define LEFT 70
#define RIGHT 20
#define PANEL_H 180
#define GAP 60
#define TOP 50
#define MAX_POINTS 2000

typedef struct panel {
    double y0;          /* top of the panel in SVG units */
    double lo, hi;      /* value range */
    double x_frames;    /* frames spanned by the x axis */
} panel;

static double px(const panel *p, double frame) {
    double w = SVG_W - LEFT - RIGHT;
    return LEFT + (p->x_frames > 0 ? frame / p->x_frames : 0) * w;
}

static double py(const panel *p, double v) {
    if (!isfinite(v)) v = p->hi;
    double f = p->hi > p->lo ? (v - p->lo) / (p->hi - p->lo) : 0;
    if (f < 0) f = 0;
    if (f > 1) f = 1;
    return p->y0 + PANEL_H - f * PANEL_H;
}

/* A round upper bound for an axis (1, 2, 5 x 10^k). */
static double nice_max(double v) {
    if (!(v > 0) || !isfinite(v)) return 1;
    double e = pow(10, floor(log10(v)));
    for (int i = 0; i < 3; i++) {
        double m = (double[]){1, 2, 5}[i] * e;
        if (v <= m) return m;
    }
    return 10 * e;
}

static void escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static void axes(FILE *f, const panel *p, const char *label) {
    double x1 = SVG_W - RIGHT;
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", LEFT, p->y0,
            SVG_W - LEFT - RIGHT, PANEL_H);
    for (int i = 0; i <= 2; i++) {
        double v = p->lo + (p->hi - p->lo) * i / 2.0;
        double y = py(p, v);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, y, x1, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.4g</text>\n", LEFT - 5, y + 4, v);
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"13\">", LEFT, p->y0 - 8);
    escape(f, label);
    fputs("</text>\n", f);
    /* frame ticks */
    double step = nice_max(p->x_frames / 10.0);
    for (double t = 0; t <= p->x_frames + 1e-9 && step > 0; t += step) {
        double x = px(p, t);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%.0f</text>\n", x,
                p->y0 + PANEL_H + 14, t);
    }
}

static void boundaries(FILE *f, const lv_metrics *m, const panel *p, int64_t pairs) {
    for (int64_t t = 0; t < pairs; t++)
        if (lv_metrics_is_boundary_pair(m, t)) {
            double x = px(p, (double)t + 0.5); /* between the pair's two frames */
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d33\" stroke-width=\"0.8\" "
                    "stroke-dasharray=\"3,3\" opacity=\"0.7\"/>\n",
                    x, p->y0, x, p->y0 + PANEL_H);
        }
}

/* A per-pair series as a polyline at x = t + 0.5, reduced to bucket maxima when long. */
static void pair_line(FILE *f, const panel *p, const double *v, int64_t n, int one_minus, const char *colour) {
    if (n <= 0) return;
    int64_t buckets = n < MAX_POINTS ? n : MAX_POINTS;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" points=\"", colour);
    for (int64_t b = 0; b < buckets; b++) {
        int64_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
        double best = -INFINITY;
        int64_t at = lo;
        for (int64_t t = lo; t < hi; t++) {
            double x = one_minus ? 1.0 - v[t] : v[t];
            if (x > best) {
                best = x;
                at = t;
            }
        }
        fprintf(f, "%.1f,%.1f ", px(p, (double)at + 0.5), py(p, best));
    }
    fputs("\"/>\n", f);
}

static double series_max(const double *v, int64_t n, int one_minus) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = one_minus ? 1.0 - v[i] : v[i];
        if (isfinite(x) && x > m) m = x;
    }
    return m;
}

lv_status lv_metrics_write_svg(const lv_metrics *m, const char *path, const char *title) {
    if (!m || !path) return lv_error(LV_ERR_INVALID, "lv_metrics_write_svg: NULL argument");
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    int64_t n, nb;
    const double *mae = lv_metrics_pair_series(m, LV_SERIES_MAE, &n);
    const double *ssim = lv_metrics_pair_series(m, LV_SERIES_SSIM_Y, NULL);
    const lv_metrics_block *blocks = lv_metrics_blocks(m, &nb);
    double frames = s.frames > 1 ? (double)(s.frames - 1) : 1;
    int height = TOP + 3 * PANEL_H + 2 * GAP + 60;

    lv_atomic_file out;
    LV_TRY(lv_atomic_open(&out, path));
    FILE *f = out.fp;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n",
            SVG_W, height, SVG_W, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", LEFT);
    escape(f, title ? title : "temporal consistency");
    fputs("</text>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"38\" font-size=\"11\" fill=\"#555\">%lld frames, %lld blocks; seam ratio %.3g (MAE), "
               "%.3g (1-SSIM); dashed red: block boundaries</text>\n",
            LEFT, (long long)s.frames, (long long)s.blocks, s.seam_ratio_mae, s.seam_ratio_ssim);

    panel p1 = {TOP + 20, 0, nice_max(series_max(mae, n, 0)), frames};
    axes(f, &p1, "MAE per frame pair (RGB, 0-255)");
    boundaries(f, m, &p1, n);
    pair_line(f, &p1, mae, n, 0, "#1f5fbf");

    panel p2 = {p1.y0 + PANEL_H + GAP, 0, nice_max(series_max(ssim, n, 1)), frames};
    axes(f, &p2, "1 - SSIM per frame pair (luma)");
    boundaries(f, m, &p2, n);
    pair_line(f, &p2, ssim, n, 1, "#2a8a3a");

    /* per-block means as steps across each block's frames */
    double lo = 255, hi = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) {
            double v = c < 3 ? blocks[b].mean_rgb[c] : blocks[b].mean_y;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    if (nb == 0 || hi - lo < 4) {
        double mid = nb ? 0.5 * (lo + hi) : 128;
        lo = mid - 2;
        hi = mid + 2;
    }
    lo = floor(lo - 1);
    hi = ceil(hi + 1);
    panel p3 = {p2.y0 + PANEL_H + GAP, lo, hi, frames};
    axes(f, &p3, "mean R, G, B and Y per block (0-255)");
    static const char *const colours[4] = {"#d62728", "#2ca02c", "#1f77b4", "#555555"};
    for (int c = 0; c < 4; c++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colours[c]);
        for (int64_t b = 0; b < nb; b++) {
            double v = c < 3 ? blocks[b].mean_rgb[c] : blocks[b].mean_y;
            double x0 = px(&p3, (double)blocks[b].first_frame);
            double x1 = px(&p3, (double)(blocks[b].first_frame + blocks[b].frames - 1));
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", x0, py(&p3, v), x1, py(&p3, v));
        }
        fputs("\"/>\n", f);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"%s\">%s</text>\n", SVG_W - RIGHT - 120 + 30 * c,
                p3.y0 - 8, colours[c], (const char *[]){"R", "G", "B", "Y"}[c]);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">frame</text>\n",
            LEFT + (SVG_W - LEFT - RIGHT) / 2, height - 12);
    fputs("</svg>\n", f);
    return lv_atomic_commit(&out);
}
