#include "ref_vae.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void ref_vae_conv(float *out, double *mag, const float *s, int Ts, int H, int W, int Ci,
                  const float *wt, int Co, int kt, int ks, const float *bias,
                  const float *residual) {
    int T = Ts - kt + 1, p = ks / 2;
    for (int t = 0; t < T; t++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int o = 0; o < Co; o++) {
                    size_t idx = (((size_t)t * H + y) * W + x) * Co + o;
                    double sum = bias ? bias[o] : 0.0, abs_sum = fabs(sum);
                    if (residual) {
                        sum += residual[idx];
                        abs_sum += fabs((double)residual[idx]);
                    }
                    for (int f = 0; f < kt; f++)
                        for (int dy = 0; dy < ks; dy++)
                            for (int dx = 0; dx < ks; dx++) {
                                int yy = y + dy - p, xx = x + dx - p;
                                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                                const float *src = s + (((size_t)(t + f) * H + yy) * W + xx) * Ci;
                                for (int i = 0; i < Ci; i++) {
                                    double term =
                                        (double)wt[((((size_t)o * Ci + i) * kt + f) * ks + dy) * ks + dx] *
                                        src[i];
                                    sum += term;
                                    abs_sum += fabs(term);
                                }
                            }
                    out[idx] = (float)sum;
                    if (mag) mag[idx] = abs_sum;
                }
}

void ref_vae_rmsnorm(float *out, const float *x, long rows, int C, const float *gamma, int silu) {
    for (long r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        double denom = sqrt(ss);
        if (denom < 1e-12) denom = 1e-12;
        for (int c = 0; c < C; c++) {
            double y = xr[c] / denom * sqrt((double)C) * gamma[c];
            if (silu) y = y / (1.0 + exp(-y));
            out[(size_t)r * C + c] = (float)y;
        }
    }
}

void ref_vae_upsample2x(float *out, const float *x, int T, int H, int W, int C) {
    for (int t = 0; t < T; t++)
        for (int y = 0; y < 2 * H; y++)
            for (int xx = 0; xx < 2 * W; xx++)
                memcpy(out + (((size_t)t * 2 * H + y) * 2 * W + xx) * C,
                       x + (((size_t)t * H + y / 2) * W + xx / 2) * C, (size_t)C * sizeof *out);
}

void ref_vae_interleave_halves(float *out, const float *x, int T, int H, int W, int C) {
    size_t P = (size_t)H * W;
    for (int t = 0; t < T; t++)
        for (int half = 0; half < 2; half++)
            for (size_t p = 0; p < P; p++)
                memcpy(out + (((size_t)(2 * t + half)) * P + p) * C,
                       x + ((size_t)t * P + p) * 2 * C + (size_t)half * C, (size_t)C * sizeof *out);
}

void ref_vae_attention(float *out, const float *q, const float *k, const float *v, int N,
                       int L, int D, double scale) {
    double *s = malloc((size_t)L * sizeof *s);
    double *acc = malloc((size_t)D * sizeof *acc);
    if (!s || !acc) {
        free(s);
        free(acc);
        return;
    }
    for (int n = 0; n < N; n++) {
        double m = -INFINITY;
        for (int j = 0; j < L; j++) {
            double d = 0;
            for (int c = 0; c < D; c++) d += (double)q[(size_t)n * D + c] * k[(size_t)j * D + c];
            s[j] = d * scale;
            if (s[j] > m) m = s[j];
        }
        double l = 0;
        for (int c = 0; c < D; c++) acc[c] = 0;
        for (int j = 0; j < L; j++) {
            double p = exp(s[j] - m);
            l += p;
            for (int c = 0; c < D; c++) acc[c] += p * v[(size_t)j * D + c];
        }
        for (int c = 0; c < D; c++) out[(size_t)n * D + c] = (float)(acc[c] / l);
    }
    free(s);
    free(acc);
}
