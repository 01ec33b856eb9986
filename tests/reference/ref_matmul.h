/* Plain C reference for the matrix multiply (engine/ops/ops_matmul.c): double accumulation,
 * no Vulkan. PyTorch Linear layout:
 *
 *   out[b, m, n] = sum_k a[b, m, k] * w[b?, n, k] + bias[n]
 *
 * a: [batch, M, K]; w: [N, K] shared by every batch (batched_w = 0) or [batch, N, K];
 * bias: [N] or NULL; out: [batch, M, N]. w is given in fp32: for 16-bit weights pass the
 * values rounded as the device sees them (ts_round_to). mag, if not NULL, receives per
 * output sum_k |a[b, m, k] * w[n, k]| + |bias[n]|, the scale of its rounding error. */
#ifndef LONGVK_REF_MATMUL_H
#define LONGVK_REF_MATMUL_H

#include <stdint.h>

void ref_matmul(float *out, double *mag, const float *a, const float *w, const float *bias,
                int64_t batch, int64_t M, int64_t N, int64_t K, int batched_w);

#endif
