/* Plain C reference of the non-finite count (lv_op_count_nonfinite, shaders/
 * count_nonfinite.comp): classifies each float by its bits, as IEEE 754 defines NaN and
 * infinity (exponent all ones; mantissa non-zero: NaN, zero: infinity). */
#ifndef LONGVK_REF_CHECK_H
#define LONGVK_REF_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Adds to counts as the kernel does: counts[0] += NaNs, counts[1] += infinities,
 * counts[2] = max(counts[2], ~(base + i)) over the non-finite x[i]. */
void ref_count_nonfinite(const float *x, size_t n, uint32_t base, uint32_t counts[3]);

#endif
