/* Plain C reference for the matrix multiply: see ref_matmul.h. */
#include "ref_matmul.h"

#include <math.h>

void ref_matmul(float *out, double *mag, const float *a, const float *w, const float *bias,
                int64_t batch, int64_t M, int64_t N, int64_t K, int batched_w) {
    for (int64_t b = 0; b < batch; b++) {
        const float *ab = a + b * M * K;
        const float *wb = batched_w ? w + b * N * K : w;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = bias ? bias[n] : 0.0, s_abs = bias ? fabs(bias[n]) : 0.0;
                for (int64_t k = 0; k < K; k++) {
                    double p = (double)ab[m * K + k] * (double)wb[n * K + k];
                    s += p;
                    s_abs += fabs(p);
                }
                out[(b * M + m) * N + n] = (float)s;
                if (mag) mag[(b * M + m) * N + n] = s_abs;
            }
    }
}
