/* Plain C reference for linear attention: see ref_linear_attention.h. */
#include "ref_linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_phi(int phi, double x) {
    switch (phi) {
    case 1: return x > 0 ? x : 0;
    case 2: return x > 0 ? x + 1.0 : exp(x);
    default: return x;
    }
}

void ref_rope_table_1d(float *table, const float *pos, int n, int dim, double theta) {
    for (int t = 0; t < n; t++)
        for (int j = 0; j < dim / 2; j++) {
            double a = (double)pos[t] * pow(theta, -2.0 * j / dim);
            table[(size_t)t * dim + 2 * j] = (float)cos(a);
            table[(size_t)t * dim + 2 * j + 1] = (float)sin(a);
        }
}

/* y = rot(phi(x)) and its magnitude (|a c| + |b s|, |a s| + |b c|) for one head's dim
 * values; without a table y = phi(x) and ya = |phi(x)|. Also the unrotated p = phi(x). */
static void features(double *y, double *ya, double *p, const float *x, const float *rope_row,
                     int dim, int phi) {
    for (int c = 0; c < dim; c++) p[c] = ref_phi(phi, x[c]);
    if (!rope_row) {
        for (int c = 0; c < dim; c++) {
            y[c] = p[c];
            ya[c] = fabs(p[c]);
        }
        return;
    }
    for (int c = 0; c < dim; c += 2) {
        double a = p[c], b = p[c + 1], cs = rope_row[c], sn = rope_row[c + 1];
        y[c] = a * cs - b * sn;
        y[c + 1] = a * sn + b * cs;
        ya[c] = fabs(a * cs) + fabs(b * sn);
        ya[c + 1] = fabs(a * sn) + fabs(b * cs);
    }
}

void ref_linattn_state(double *S, double *z, double *S_mag, double *z_mag, const float *S0,
                       const float *z0, const float *k, const float *v, const float *rope,
                       int n, int heads, int dim, int phi) {
    const size_t sn = (size_t)heads * dim * dim, zn = (size_t)heads * dim;
    double *y = malloc(3 * (size_t)dim * sizeof *y), *ya = y + dim, *p = ya + dim;
    double *Sl = calloc(sn, sizeof *Sl), *zl = calloc(zn, sizeof *zl);
    double *Sm = calloc(sn, sizeof *Sm), *zm = calloc(zn, sizeof *zm);
    for (size_t i = 0; S0 && i < sn; i++) {
        Sl[i] = S0[i];
        Sm[i] = fabs(S0[i]);
    }
    for (size_t i = 0; z0 && i < zn; i++) {
        zl[i] = z0[i];
        zm[i] = fabs(z0[i]);
    }
    const size_t row = (size_t)heads * dim;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++) {
            features(y, ya, p, k + t * row + (size_t)h * dim, rope ? rope + (size_t)t * dim : NULL, dim, phi);
            const float *vt = v + t * row + (size_t)h * dim;
            for (int r = 0; r < dim; r++)
                for (int c = 0; c < dim; c++) {
                    size_t i = ((size_t)h * dim + r) * dim + c;
                    Sl[i] += vt[r] * y[c];
                    Sm[i] += fabs((double)vt[r]) * ya[c];
                }
            for (int c = 0; c < dim; c++) {
                zl[(size_t)h * dim + c] += p[c];
                zm[(size_t)h * dim + c] += fabs(p[c]);
            }
        }
    if (S) memcpy(S, Sl, sn * sizeof *S);
    if (z) memcpy(z, zl, zn * sizeof *z);
    if (S_mag) memcpy(S_mag, Sm, sn * sizeof *S_mag);
    if (z_mag) memcpy(z_mag, zm, zn * sizeof *z_mag);
    free(Sl);
    free(zl);
    free(Sm);
    free(zm);
    free(y);
}

void ref_linattn_query(double *out, double *mag, const float *q, const float *S, const float *z,
                       const float *rope, int n, int heads, int dim, int phi, int normalize,
                       float eps) {
    double *y = malloc(3 * (size_t)dim * sizeof *y), *ya = y + dim, *p = ya + dim;
    const size_t row = (size_t)heads * dim;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++) {
            features(y, ya, p, q + t * row + (size_t)h * dim, rope ? rope + (size_t)t * dim : NULL, dim, phi);
            double den = eps, den_mag = 0;
            if (normalize)
                for (int c = 0; c < dim; c++) {
                    den += (double)z[(size_t)h * dim + c] * p[c];
                    den_mag += fabs((double)z[(size_t)h * dim + c] * p[c]);
                }
            for (int r = 0; r < dim; r++) {
                const float *Srow = S + ((size_t)h * dim + r) * dim;
                double num = 0, num_mag = 0;
                for (int c = 0; c < dim; c++) {
                    num += Srow[c] * y[c];
                    num_mag += fabs((double)Srow[c]) * ya[c];
                }
                size_t o = t * row + (size_t)h * dim + r;
                double val = normalize ? num / den : num;
                out[o] = val;
                if (mag) mag[o] = normalize ? (num_mag + fabs(val) * den_mag) / fabs(den) : num_mag;
            }
        }
    free(y);
}

static double rule_weight(int bi, int bj, int rule, int window, double decay) {
    if (bj > bi) return 0;
    if (rule == REF_RULE_WINDOW) return bi - bj <= window ? 1 : 0;
    if (rule == REF_RULE_DECAY) return pow(decay, bi - bj);
    return 1;
}

void ref_linattn_masked(double *out, double *mag, const float *q, const float *k, const float *v,
                        const float *rope, int n, int heads, int dim, int block_size, int phi,
                        int normalize, float eps, int rule, int window, double decay) {
    const size_t row = (size_t)heads * dim;
    /* rotated and plain features of every key, per head */
    double *ky = malloc((size_t)n * row * sizeof *ky), *kya = malloc((size_t)n * row * sizeof *kya);
    double *kp = malloc((size_t)n * row * sizeof *kp);
    double *qy = malloc(3 * (size_t)dim * sizeof *qy), *qya = qy + dim, *qp = qya + dim;
    double *num = malloc(2 * (size_t)dim * sizeof *num), *num_mag = num + dim;
    for (int j = 0; j < n; j++)
        for (int h = 0; h < heads; h++) {
            size_t o = j * row + (size_t)h * dim;
            features(ky + o, kya + o, kp + o, k + o, rope ? rope + (size_t)j * dim : NULL, dim, phi);
        }
    for (int i = 0; i < n; i++)
        for (int h = 0; h < heads; h++) {
            size_t oi = i * row + (size_t)h * dim;
            features(qy, qya, qp, q + oi, rope ? rope + (size_t)i * dim : NULL, dim, phi);
            double den = eps, den_mag = 0;
            for (int r = 0; r < dim; r++) num[r] = num_mag[r] = 0;
            for (int j = 0; j < n; j++) {
                double w = rule_weight(i / block_size, j / block_size, rule, window, decay);
                if (w == 0) continue;
                size_t oj = j * row + (size_t)h * dim;
                double dot = 0, dot_mag = 0, pd = 0, pd_mag = 0;
                for (int c = 0; c < dim; c++) {
                    dot += ky[oj + c] * qy[c];
                    dot_mag += kya[oj + c] * qya[c];
                    pd += kp[oj + c] * qp[c];
                    pd_mag += fabs(kp[oj + c] * qp[c]);
                }
                for (int r = 0; r < dim; r++) {
                    num[r] += w * v[oj + r] * dot;
                    num_mag[r] += w * fabs((double)v[oj + r]) * dot_mag;
                }
                den += w * pd;
                den_mag += w * pd_mag;
            }
            for (int r = 0; r < dim; r++) {
                double val = normalize ? num[r] / den : num[r];
                out[oi + r] = val;
                if (mag) mag[oi + r] = normalize ? (num_mag[r] + fabs(val) * den_mag) / fabs(den) : num_mag[r];
            }
        }
    free(ky);
    free(kya);
    free(kp);
    free(qy);
    free(num);
}
