/* Host-side rope tables: (cos, sin) of every adjacent pair's angle, computed in double and
 * rounded once to float. */
#include <math.h>

#include "longvk/ops.h"

/* theta^(-2j/d): the frequency of pair j of an axis with d dims */
static double axis_frequency(double theta, int j, int d) {
    return pow(theta, -2.0 * (double)j / (double)d);
}

static void put_pair(float *row, int pair, double angle) {
    row[2 * pair] = (float)cos(angle);
    row[2 * pair + 1] = (float)sin(angle);
}

/* Bad arguments fill what can be addressed with NaN (these helpers return nothing), so a
 * misuse shows up in the first output instead of as plausible numbers. */
static void fill_nan(float *table, long long n) {
    if (!table) return;
    for (long long i = 0; i < n; i++) table[i] = NAN;
}

void lv_rope_table_3d(float *table, int F, int H, int W, int f0, int D, int dt, int dh, int dw,
                      double theta) {
    if (!table || F <= 0 || H <= 0 || W <= 0) return;
    long long N = (long long)F * H * W;
    if (D <= 0 || dt < 0 || dh < 0 || dw < 0 || dt % 2 || dh % 2 || dw % 2 || dt + dh + dw != D ||
        !(theta > 0)) {
        fill_nan(table, D > 0 ? N * D : 0);
        return;
    }
    /* one row of angles per axis position would be enough, but tables are small next to
     * the activations they rotate: compute each token's row directly */
    for (int f = 0; f < F; f++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                float *row = table + (((long long)f * H + h) * W + w) * D;
                int pair = 0;
                for (int j = 0; j < dt / 2; j++, pair++)
                    put_pair(row, pair, (double)(f0 + f) * axis_frequency(theta, j, dt));
                for (int j = 0; j < dh / 2; j++, pair++)
                    put_pair(row, pair, (double)h * axis_frequency(theta, j, dh));
                for (int j = 0; j < dw / 2; j++, pair++)
                    put_pair(row, pair, (double)w * axis_frequency(theta, j, dw));
            }
}

void lv_rope_table_1d(float *table, const float *positions, int N, int D, double theta) {
    if (!table || N <= 0) return;
    if (!positions || D <= 0 || D % 2 || !(theta > 0)) {
        fill_nan(table, D > 0 ? (long long)N * D : 0);
        return;
    }
    for (int n = 0; n < N; n++)
        for (int j = 0; j < D / 2; j++)
            put_pair(table + (long long)n * D, j, (double)positions[n] * axis_frequency(theta, j, D));
}
