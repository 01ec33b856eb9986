/* Counter-based Gaussian noise (see longvk/sampler.h): value i of stream s under seed k
 * is a pure function of (k, s, i), from splitmix64 hashing and Box-Muller. */
#include <math.h>

#include "longvk/sampler.h"

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1], never 0 so that log() is finite */
static double uniform(uint64_t key, uint64_t counter) {
    uint64_t bits = mix64(key + 0x9e3779b97f4a7c15ull * (counter + 1));
    return ((double)(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

uint64_t lv_noise_stream(uint64_t chunk, uint64_t step) { return (chunk << 8) | (step & 0xff); }

void lv_noise_fill(uint64_t seed, uint64_t stream, float *out, size_t n) {
    if (!out) return;
    const double two_pi = 6.283185307179586;
    uint64_t key = mix64(mix64(seed) ^ (stream * 0xd1b54a32d192ed03ull));
    for (size_t i = 0; i < n; i += 2) {
        double u1 = uniform(key, i), u2 = uniform(key, i + 1);
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(r * cos(two_pi * u2));
        if (i + 1 < n) out[i + 1] = (float)(r * sin(two_pi * u2));
    }
}
