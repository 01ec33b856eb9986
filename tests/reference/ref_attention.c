#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>

void ref_softmax_attention(float *out, const float *q, const float *k, const float *v,
                           const float *mask, int n, int l, int heads, int head_dim,
                           float scale) {
    int width = heads * head_dim;
    double *s = malloc((size_t)(l > 0 ? l : 1) * sizeof *s);
    double *acc = malloc((size_t)head_dim * sizeof *acc);
    for (int i = 0; i < n; i++) {
        for (int h = 0; h < heads; h++) {
            const float *qi = q + (size_t)i * width + (size_t)h * head_dim;
            double m = -INFINITY;
            for (int j = 0; j < l; j++) {
                if (mask && mask[j] == 0.0f) continue;
                const float *kj = k + (size_t)j * width + (size_t)h * head_dim;
                double dot = 0;
                for (int d = 0; d < head_dim; d++) dot += (double)qi[d] * kj[d];
                s[j] = (double)scale * dot;
                if (s[j] > m) m = s[j];
            }
            double sum = 0;
            for (int d = 0; d < head_dim; d++) acc[d] = 0;
            for (int j = 0; j < l; j++) {
                if (mask && mask[j] == 0.0f) continue;
                double p = exp(s[j] - m);
                sum += p;
                const float *vj = v + (size_t)j * width + (size_t)h * head_dim;
                for (int d = 0; d < head_dim; d++) acc[d] += p * vj[d];
            }
            float *o = out + (size_t)i * width + (size_t)h * head_dim;
            for (int d = 0; d < head_dim; d++) o[d] = sum > 0 ? (float)(acc[d] / sum) : 0.0f;
        }
    }
    free(acc);
    free(s);
}

void ref_causal_attention(float *out, const float *q, const float *k, const float *v, int n, int l, int heads,
                          int kv_heads, int head_dim, float scale, int window, float softcap) {
    int width = heads * head_dim, kv_width = kv_heads * head_dim, group = heads / kv_heads;
    double *s = malloc((size_t)(l > 0 ? l : 1) * sizeof *s);
    double *acc = malloc((size_t)head_dim * sizeof *acc);
    for (int i = 0; i < n; i++) {
        int pos = l - n + i;
        for (int h = 0; h < heads; h++) {
            const float *qi = q + (size_t)i * width + (size_t)h * head_dim;
            size_t kv_off = (size_t)(h / group) * head_dim;
            int j0 = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
            double m = -INFINITY;
            for (int j = j0; j <= pos; j++) {
                const float *kj = k + (size_t)j * kv_width + kv_off;
                double dot = 0;
                for (int d = 0; d < head_dim; d++) dot += (double)qi[d] * kj[d];
                s[j] = (double)scale * dot;
                if (softcap > 0) s[j] = softcap * tanh(s[j] / softcap);
                if (s[j] > m) m = s[j];
            }
            double sum = 0;
            for (int d = 0; d < head_dim; d++) acc[d] = 0;
            for (int j = j0; j <= pos; j++) {
                double p = exp(s[j] - m);
                sum += p;
                const float *vj = v + (size_t)j * kv_width + kv_off;
                for (int d = 0; d < head_dim; d++) acc[d] += p * vj[d];
            }
            float *o = out + (size_t)i * width + (size_t)h * head_dim;
            for (int d = 0; d < head_dim; d++) o[d] = (float)(acc[d] / sum);
        }
    }
    free(acc);
    free(s);
}
