/* Kernels of the Wan2.1 VAE decoder and encoder (engine/ops/ops_vae.c; pipelines/wan_vae/README.md).
 *
 * Activations are channels-last, frame-major: a video chunk is [T, H, W, C] f32, like the
 * engine's other convolutions, or f16 / bf16 (16-bit activations: the decoder at f16
 * precision), computed in f32 either way; a conv's history frames have x's dtype and its
 * residual out's, and a copy's or the norm's out and x may differ. Weights, biases and
 * gammas are f32. Convolution weights are uploaded once in a packed layout,
 * [Co, kT, kH, kW, Ci] (input channels innermost, so that a kernel reads a tap's weights
 * as contiguous vectors); lv_vae_pack_conv_weight() converts PyTorch's [Co, Ci, kT, kH, kW]
 * on the host. Every op splits its work over image rows so that no binding exceeds
 * lv_ctx_max_binding(). */
#ifndef LONGVK_OPS_VAE_H
#define LONGVK_OPS_VAE_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host: PyTorch conv weight [co, ci, kt, kh, kw] -> packed [co, kt, kh, kw, ci]. */
void lv_vae_pack_conv_weight(const float *torch_w, int co, int ci, int kt, int kh, int kw,
                             float *packed);

/* Causal 3-D conv over time with a two-frame history (CausalConv3d with its feature cache):
 *
 *   out[t, y, x, o] = bias[o] + residual[t, y, x, o]
 *                   + sum_{f<3, i, dy, dx} w[o, f, dy, dx, i] * s[t + f, y + dy - p, x + dx - p, i]
 *
 * where s = cat(hist_old, hist_new, x) over time (s[0] = hist_old, s[1] = hist_new,
 * s[2 + t] = x[t]), so output frame t reads frames t-2, t-1, t; a NULL history frame is
 * zeros (the causal padding of a video's start). Spatial padding p = (k - 1) / 2 zeros.
 *   x: [T, H, W, Ci]; hist_old, hist_new: [H, W, Ci] or NULL; w: packed [Co, 3, k, k, Ci]
 *   with k = 3 (3x3x3 convs) or k = 1 (the 3x1x1 time_conv); bias: [Co] or NULL;
 *   residual: [T, H, W, Co] or NULL (may be the same range as out: added in place);
 *   out: [T, H, W, Co], must not overlap x or the history.
 * The history is not updated: the caller keeps the last two frames of cat(history, x). */
lv_status lv_op_vae_conv3d(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                           const lv_tensor *hist_old, const lv_tensor *hist_new,
                           const lv_tensor *w, const lv_tensor *bias, const lv_tensor *residual);

/* upsample3d's time_conv (a causal 3x1x1 conv C -> 2C) with its channel-half interleave:
 * output frame 2t holds channels [0, C) of the conv at input frame t, frame 2t + 1
 * channels [C, 2C). x: [T, H, W, C]; out: [2T, H, W, C]; w: packed [2C, 3, 1, 1, C];
 * bias [2C] or NULL; history as for lv_op_vae_conv3d. The halves are written straight
 * into their frames (no [T, H, W, 2C] intermediate). */
lv_status lv_op_vae_time_conv(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                              const lv_tensor *hist_old, const lv_tensor *hist_new,
                              const lv_tensor *w, const lv_tensor *bias);

/* Per-frame 2-D 3x3 conv with zero padding 1, optionally on the nearest-exact 2x upsampled
 * frame (upsample = 1: Resample's "Upsample(scale 2, nearest-exact) then Conv2d", without
 * materialising the upsampled frame). x: [T, H, W, Ci]; out: [T, H', W', Co] with
 * H' = H << upsample, W' = W << upsample; w: packed [Co, 1, 3, 3, Ci]; bias [Co] or NULL. */
lv_status lv_op_vae_conv2d(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                           const lv_tensor *w, const lv_tensor *bias, int upsample);
/* The same conv computing only output rows [out_row0, out_row0 + Ho) of every frame:
 * out [T, Ho, W', Co] (the zero padding stays at the edges of x's whole frame). The VAE
 * over the bands (pipelines/wan_vae/wan_vae.c) upsamples a band with its halo rows this
 * way and keeps one halo row per side. */
lv_status lv_op_vae_conv2d_rows(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                const lv_tensor *w, const lv_tensor *bias, int upsample,
                                int64_t out_row0);

/* The encoder's Resample conv (downsample2d / downsample3d's spatial part): per frame,
 * ZeroPad2d((0, 1, 0, 1)) then a 3x3 conv with stride 2 and no other padding:
 *   out[t, y, x, o] = bias[o] + sum_{dy, dx, i} w[o, 0, dy, dx, i] * x[t, 2y + dy, 2x + dx, i]
 * with zeros past the frame's last row and column. x: [T, H, W, Ci] (H, W >= 2);
 * out: [T, H / 2, W / 2, Co] (rounded down, as PyTorch's); w: packed [Co, 1, 3, 3, Ci];
 * bias [Co] or NULL. */
lv_status lv_op_vae_conv2d_down(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                const lv_tensor *w, const lv_tensor *bias);

/* The VAE's channel RMS norm over the last dimension, optionally followed by SiLU:
 *   y = x / max(||x||_2, 1e-12) * sqrt(C) * gamma;  out = silu ? y * sigmoid(y) : y.
 * x, out: [..., C] (out may be the same range as x); gamma: C elements. */
lv_status lv_op_vae_rmsnorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                            const lv_tensor *gamma, int silu);

/* Nearest-exact 2x spatial upsample (pixel duplication into 2x2 blocks):
 * x [T, H, W, C] -> out [T, 2H, 2W, C]. */
lv_status lv_op_vae_upsample2x(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);

/* The time_conv channel-half interleave on its own: x [T, H, W, 2C] -> out [2T, H, W, C]
 * with out[2t] = x[t, ..., 0:C] and out[2t + 1] = x[t, ..., C:2C]. */
lv_status lv_op_vae_interleave_halves(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x);

/* Single-head softmax attention over long key sets, flash style (online softmax over key
 * tiles; the [N, L] score matrix is never stored):
 *   out[n] = sum_j softmax_j(scale * q[n] . k[j]) v[j]
 * q, out: [N, D]; k, v: [L, D] (k and v of q's dtype; any of them f32 or 16-bit, the
 * scores and sums f32); D <= 512. Queries are split over dispatches to fit the
 * binding limit; k and v must each fit one binding. */
lv_status lv_op_flash_attention(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                                const lv_tensor *k, const lv_tensor *v, float scale);

#ifdef __cplusplus
}
#endif
#endif
