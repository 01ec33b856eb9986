/* See ref_check.h. */
#include "ref_check.h"

#include <string.h>

void ref_count_nonfinite(const float *x, size_t n, uint32_t base, uint32_t counts[3]) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        if ((bits & 0x7f800000u) != 0x7f800000u) continue;
        counts[(bits & 0x007fffffu) ? 0 : 1]++;
        uint32_t inv = ~(base + (uint32_t)i);
        if (inv > counts[2]) counts[2] = inv;
    }
}
