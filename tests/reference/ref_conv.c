#include "ref_conv.h"

#include <math.h>
#include <stddef.h>

void ref_dwconv3x3(float *out, double *mag, const float *x, const float *wt, const float *bias,
                   int f, int h, int w, int c) {
    for (int t = 0; t < f; t++)
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++)
                for (int ch = 0; ch < c; ch++) {
                    double sum = bias ? bias[ch] : 0.0;
                    double abs_sum = fabs(sum);
                    for (int i = 0; i < 3; i++)
                        for (int j = 0; j < 3; j++) {
                            int yy = y + i - 1, xj = xx + j - 1;
                            if (yy < 0 || yy >= h || xj < 0 || xj >= w) continue;
                            double term = (double)wt[ch * 9 + i * 3 + j] *
                                          x[(((size_t)t * h + yy) * w + xj) * c + ch];
                            sum += term;
                            abs_sum += fabs(term);
                        }
                    size_t o = (((size_t)t * h + y) * w + xx) * c + ch;
                    out[o] = (float)sum;
                    if (mag) mag[o] = abs_sum;
                }
}

void ref_temporal_conv(float *out, double *mag, const float *x, const float *prev,
                       const float *wt, int f, int p, int c) {
    for (int t = 0; t < f; t++)
        for (int px = 0; px < p; px++)
            for (int o = 0; o < c; o++) {
                double sum = 0, abs_sum = 0;
                for (int k = 0; k < 3; k++) {
                    int src = t + k - 1;
                    const float *row;
                    if (src < 0) row = prev ? prev + (size_t)px * c : NULL;
                    else if (src >= f) row = NULL;
                    else row = x + ((size_t)src * p + px) * c;
                    if (!row) continue;
                    for (int i = 0; i < c; i++) {
                        double term = (double)wt[((size_t)o * c + i) * 3 + k] * row[i];
                        sum += term;
                        abs_sum += fabs(term);
                    }
                }
                size_t idx = ((size_t)t * p + px) * c + o;
                out[idx] = (float)sum;
                if (mag) mag[idx] = abs_sum;
            }
}
