/* Scale to cover, crop the centre (frame_fit.h): two separable passes of a triangle filter,
 * rows then columns, with edge pixels repeated past the frame. */
#include <math.h>
#include <stddef.h>

#include "frame_fit.h"

void frame_fit_plan(frame_fit *f, int w0, int h0, int W, int H) {
    double sx = (double)W / w0, sy = (double)H / h0, s = sx > sy ? sx : sy;
    *f = (frame_fit){.w0 = w0, .h0 = h0, .W = W, .H = H, .scale = s, .x0 = (w0 - W / s) / 2, .y0 = (h0 - H / s) / 2};
}

/* Output sample i of n along an axis of `len` source pixels: the source position of its
 * centre (pixel-centre coordinates) is c = offset + (i + 0.5) / s - 0.5; the filter's radius
 * r = max(1, 1 / s). Weights into w (normalised), their first source index into *first. */
static int taps(double offset, double s, int i, int *first, double *w, int max) {
    const double c = offset + (i + 0.5) / s - 0.5, r = s < 1 ? 1 / s : 1;
    int lo = (int)ceil(c - r), hi = (int)floor(c + r), n = 0;
    if (hi - lo + 1 > max) hi = lo + max - 1;
    double sum = 0;
    for (int j = lo; j <= hi; j++) {
        double v = 1 - fabs(j - c) / r;
        w[n++] = v > 0 ? v : 0;
        sum += w[n - 1];
    }
    for (int k = 0; k < n; k++) w[k] = sum > 0 ? w[k] / sum : 0;
    *first = lo;
    return n;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

#define MAX_TAPS 1024

void frame_fit_apply(const frame_fit *f, const uint8_t *rgb, float *out, float *tmp) {
    double w[MAX_TAPS];
    for (int x = 0; x < f->W; x++) { /* rows: tmp [h0, W, 3] */
        int first, n = taps(f->x0, f->scale, x, &first, w, MAX_TAPS);
        for (int y = 0; y < f->h0; y++) {
            double acc[3] = {0, 0, 0};
            for (int k = 0; k < n; k++) {
                const uint8_t *p = rgb + ((size_t)y * f->w0 + clampi(first + k, 0, f->w0 - 1)) * 3;
                for (int c = 0; c < 3; c++) acc[c] += w[k] * p[c];
            }
            for (int c = 0; c < 3; c++) tmp[((size_t)y * f->W + x) * 3 + c] = (float)acc[c];
        }
    }
    const size_t plane = (size_t)f->H * f->W;
    for (int y = 0; y < f->H; y++) { /* columns: out [3, H, W] */
        int first, n = taps(f->y0, f->scale, y, &first, w, MAX_TAPS);
        for (int x = 0; x < f->W; x++) {
            double acc[3] = {0, 0, 0};
            for (int k = 0; k < n; k++) {
                const float *p = tmp + ((size_t)clampi(first + k, 0, f->h0 - 1) * f->W + x) * 3;
                for (int c = 0; c < 3; c++) acc[c] += w[k] * p[c];
            }
            for (int c = 0; c < 3; c++) out[c * plane + (size_t)y * f->W + x] = (float)(acc[c] / 127.5 - 1.0);
        }
    }
}
