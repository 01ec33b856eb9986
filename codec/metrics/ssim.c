/* SSIM and PSNR of 8-bit planes, defined as FFmpeg's ssim and psnr filters define them, so
 * that `longvk metrics` and `ffmpeg -lavfi ssim/psnr` agree (codec/metrics/README.md).
 *
 * SSIM (the x264 variant libavfilter uses): the plane is cut into whole 4x4 blocks; for each
 * block we sum x, y, x^2 + y^2 and x y. An 8x8 window is 2x2 neighbouring blocks, so windows
 * sit on a 4-pixel grid and overlap by half. With the sums s1, s2, ss, s12 over a window's
 * 64 pixels:
 *   vars  = 64 ss - s1^2 - s2^2,   covar = 64 s12 - s1 s2
 *   ssim  = (2 s1 s2 + C1)(2 covar + C2) / ((s1^2 + s2^2 + C1)(vars + C2))
 *   C1 = 0.01^2 255^2 64,  C2 = 0.03^2 255^2 64 63
 * and the plane's SSIM is the mean over windows. (This equals the textbook formula with
 * uniform weights and the unbiased covariance estimate; the Gaussian 11x11 SSIM of Wang et
 * al. differs by up to about 0.01.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/metrics.h"

typedef struct block_sums {
    int32_t s1, s2, ss, s12;
} block_sums;

/* Sums of every 4x4 block in one row of blocks (4 pixel rows starting at a and b). */
static void row_sums(const uint8_t *a, int astride, const uint8_t *b, int bstride, int nblocks, block_sums *out) {
    for (int bx = 0; bx < nblocks; bx++) {
        int32_t s1 = 0, s2 = 0, ss = 0, s12 = 0;
        for (int y = 0; y < 4; y++) {
            const uint8_t *pa = a + (size_t)y * (size_t)astride + 4 * bx;
            const uint8_t *pb = b + (size_t)y * (size_t)bstride + 4 * bx;
            for (int x = 0; x < 4; x++) {
                int32_t va = pa[x], vb = pb[x];
                s1 += va;
                s2 += vb;
                ss += va * va + vb * vb;
                s12 += va * vb;
            }
        }
        out[bx] = (block_sums){s1, s2, ss, s12};
    }
}

static double window_ssim(int64_t s1, int64_t s2, int64_t ss, int64_t s12) {
    const double c1 = 0.01 * 0.01 * 255.0 * 255.0 * 64.0;
    const double c2 = 0.03 * 0.03 * 255.0 * 255.0 * 64.0 * 63.0;
    double vars = (double)(ss * 64 - s1 * s1 - s2 * s2);
    double covar = (double)(s12 * 64 - s1 * s2);
    return ((double)(2 * s1 * s2) + c1) * (2.0 * covar + c2) / (((double)(s1 * s1 + s2 * s2) + c1) * (vars + c2));
}

double lv_ssim_plane(const uint8_t *a, int astride, const uint8_t *b, int bstride, int width, int height) {
    int bw = width / 4, bh = height / 4;
    if (bw < 2 || bh < 2) {
        for (int y = 0; y < height; y++)
            if (memcmp(a + (size_t)y * (size_t)astride, b + (size_t)y * (size_t)bstride, (size_t)width) != 0) return 0.0;
        return 1.0;
    }
    block_sums *rows = malloc(2 * (size_t)bw * sizeof *rows);
    if (!rows) return NAN;
    block_sums *above = rows, *below = rows + bw;
    row_sums(a, astride, b, bstride, bw, above);
    double total = 0;
    for (int by = 1; by < bh; by++) {
        row_sums(a + (size_t)(4 * by) * (size_t)astride, astride, b + (size_t)(4 * by) * (size_t)bstride, bstride, bw,
                 below);
        for (int bx = 0; bx + 1 < bw; bx++) {
            const block_sums *p = &above[bx], *q = &above[bx + 1], *r = &below[bx], *s = &below[bx + 1];
            total += window_ssim((int64_t)p->s1 + q->s1 + r->s1 + s->s1, (int64_t)p->s2 + q->s2 + r->s2 + s->s2,
                                 (int64_t)p->ss + q->ss + r->ss + s->ss, (int64_t)p->s12 + q->s12 + r->s12 + s->s12);
        }
        block_sums *t = above;
        above = below;
        below = t;
    }
    free(rows);
    return total / ((double)(bw - 1) * (double)(bh - 1));
}

uint64_t lv_sse_plane(const uint8_t *a, int astride, const uint8_t *b, int bstride, int width, int height) {
    uint64_t total = 0;
    for (int y = 0; y < height; y++) {
        const uint8_t *pa = a + (size_t)y * (size_t)astride, *pb = b + (size_t)y * (size_t)bstride;
        uint32_t row = 0; /* at most 65025 * width: fits for width <= 66000 */
        for (int x = 0; x < width; x++) {
            int d = (int)pa[x] - (int)pb[x];
            row += (uint32_t)(d * d);
        }
        total += row;
    }
    return total;
}

double lv_psnr_from_mse(double mse) {
    if (mse <= 0) return INFINITY;
    return 10.0 * log10(255.0 * 255.0 / mse);
}
