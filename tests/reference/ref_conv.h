/* Plain C references for the Mix-FFN convolutions (double accumulation, no Vulkan). Each
 * can also return, per output, the sum of the absolute values of its terms (`mag`, or
 * NULL), from which tests derive a rounding-error bound. */
#ifndef LONGVK_REF_CONV_H
#define LONGVK_REF_CONV_H

/* Per-frame depthwise 3x3, zero padding 1. x, out: [f, h, w, c]; wt: [c, 1, 3, 3];
 * bias: [c] or NULL. */
void ref_dwconv3x3(float *out, double *mag, const float *x, const float *wt, const float *bias,
                   int f, int h, int w, int c);

/* Temporal conv, kernel 3 over frames, full channel mix, no bias:
 * out[t, p, o] = sum_{k<3} sum_i wt[o, i, k] x[t + k - 1, p, i], with x[-1] = prev (or 0
 * when NULL) and x[f] = 0. x, out: [f, p, c]; prev: [p, c] or NULL; wt: [c, c, 3]. */
void ref_temporal_conv(float *out, double *mag, const float *x, const float *prev,
                       const float *wt, int f, int p, int c);

#endif
