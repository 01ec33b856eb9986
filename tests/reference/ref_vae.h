/* Plain C references for the Wan VAE decoder kernels (double accumulation, no Vulkan),
 * written from pipelines/wan_vae/README.md. Activations are channels-last
 * [T, H, W, C]; weights are in PyTorch's layout. The convolution can also return, per
 * output, the sum of the absolute values of its terms (`mag`, or NULL), from which tests
 * derive a rounding-error bound. */
#ifndef LONGVK_REF_VAE_H
#define LONGVK_REF_VAE_H

/* Convolution over time without temporal padding, "same" spatial zero padding:
 * s: [Ts, H, W, Ci] (for a causal conv: the two history frames, then the chunk);
 * wt: PyTorch [Co, Ci, kt, ks, ks] (kt = 1 or 3, ks = 1 or 3); bias [Co] or NULL;
 * residual [Ts - kt + 1, H, W, Co] or NULL.
 * out[t, y, x, o] = bias[o] + residual[t, y, x, o]
 *                 + sum_{f, i, dy, dx} wt[o, i, f, dy, dx] s[t + f, y + dy - p, x + dx - p, i]. */
void ref_vae_conv(float *out, double *mag, const float *s, int Ts, int H, int W, int Ci,
                  const float *wt, int Co, int kt, int ks, const float *bias,
                  const float *residual);

/* y = x / max(||x||, 1e-12) * sqrt(C) * gamma over the last dim, then SiLU if `silu`. */
void ref_vae_rmsnorm(float *out, const float *x, long rows, int C, const float *gamma, int silu);

/* Nearest 2x: x [T, H, W, C] -> out [T, 2H, 2W, C]. */
void ref_vae_upsample2x(float *out, const float *x, int T, int H, int W, int C);

/* Channel halves: x [T, H, W, 2C] -> out [2T, H, W, C], out[2t] = first half. */
void ref_vae_interleave_halves(float *out, const float *x, int T, int H, int W, int C);

/* out[n] = sum_j softmax_j(scale q[n] . k[j]) v[j]; q, out [N, D]; k, v [L, D]. */
void ref_vae_attention(float *out, const float *q, const float *k, const float *v, int N,
                       int L, int D, double scale);

#endif
