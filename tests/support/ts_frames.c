/* Measures over decoded video frames (ts_frames.h). */
#include "ts_frames.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

double ts_pair_mae(const uint8_t *v, size_t frame_bytes, int t) {
    double s = 0;
    for (size_t i = 0; i < frame_bytes; i++)
        s += fabs((double)v[(size_t)(t + 1) * frame_bytes + i] - v[(size_t)t * frame_bytes + i]);
    return s / frame_bytes;
}

double ts_psnr(const uint8_t *a, const uint8_t *b, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return se == 0 ? 99 : 10 * log10(255.0 * 255.0 / (se / n));
}

int ts_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double ts_median_seam(const uint8_t *v, size_t frame_bytes, int64_t frames, int block_frames) {
    cr_assert(block_frames > 0 && frames > block_frames, "median seam: %lld frames, blocks of %d",
              (long long)frames, block_frames);
    double *m = malloc((size_t)(frames / block_frames) * sizeof *m);
    cr_assert_not_null(m);
    int n = 0;
    for (int64_t f = block_frames; f < frames; f += block_frames) m[n++] = ts_pair_mae(v, frame_bytes, (int)f - 1);
    qsort(m, (size_t)n, sizeof *m, ts_cmp_double);
    double median = n % 2 ? m[n / 2] : 0.5 * (m[n / 2 - 1] + m[n / 2]);
    free(m);
    return median;
}
