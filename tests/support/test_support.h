/* Helpers shared by the Criterion tests: a validated context, deterministic random data,
 * error measures, and tensor upload in any dtype. */
#ifndef LONGVK_TEST_SUPPORT_H
#define LONGVK_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "longvk.h"

/* A context with the validation layer on; fails the test if it cannot be made. */
lv_ctx *ts_ctx(void);
/* A context made with these options and the validation layer on. */
lv_ctx *ts_ctx_with(lv_ctx_options opt);
/* The same with a smaller binding limit, to exercise the splitting paths. */
lv_ctx *ts_ctx_with_binding(uint64_t max_binding_bytes);
/* Asserts that the validation layer reported nothing, then destroys the context. */
void ts_ctx_done(lv_ctx *ctx);

/* Deterministic uniform random floats in [lo, hi) from a seed (splitmix64). */
void ts_rand_fill(float *x, size_t n, uint64_t seed, float lo, float hi);
float *ts_rand_alloc(size_t n, uint64_t seed, float lo, float hi);

/* Normalised mean squared error sum (g - w)^2 / sum w^2 (0 when both are zero). */
double ts_nmse(const float *got, const float *want, size_t n);
/* The most a matrix's q8_0 quantization moves it, as an NMSE: over blocks of 32 weights,
 * d = max|w| / 127 (rounded up to f16: at most 2^-10 more) and each weight moves by at most
 * d / 2, so beta = sum 32 (d / 2)^2 / sum w^2. n a multiple of 32. The quantized-weight
 * tests derive their bounds from it. */
double ts_q8_0_weight_nmse(const float *w, int64_t n);
/* Prompt embeddings for the tiny SANA-Video DiT (tiny-hd32) written to `path` as
 * --text-embeds reads them: y [8, 32] (its text tokens and caption channels), mask [8]. */
void ts_write_tiny_embeds(const char *path);
double ts_max_abs_diff(const float *got, const float *want, size_t n);
/* Asserts |got - want| <= tol[i] for every element (a failure names the element and
 * `what`), and logs the worst error / bound. */
void ts_expect_within(const char *what, const float *got, const float *want, const double *tol, size_t n);
/* Asserts |got - want| <= factor * mag[i] for every element (mag: the reference's sum of
 * absolute terms), logs the worst error / bound and returns it. */
double ts_check_bound(const char *what, const float *got, const float *want, const double *mag,
                      size_t n, double factor);
/* The same with an absolute term added to every bound (f16's subnormal spacing). */
double ts_check_bound_abs(const char *what, const float *got, const float *want, const double *mag,
                          size_t n, double factor, double abs_term);

/* Create a tensor of `dtype` holding `data` (converted from f32); fails the test on error. */
lv_tensor ts_tensor(lv_ctx *ctx, lv_dtype dtype, int ndim, const int64_t *shape, const float *data);
/* Create an uninitialised f32 tensor. */
lv_tensor ts_empty(lv_ctx *ctx, int ndim, const int64_t *shape);
/* Read an f32, f16 or bf16 tensor into a new malloc'd f32 array (flushes first). */
float *ts_read(lv_ctx *ctx, const lv_tensor *t);
/* The relative error of storing an fp32 value in `dtype` (0 for f32): one unit in the last
 * place, 2^-10 (f16) or 2^-7 (bf16), twice a rounding to nearest, so that a shader whose
 * packHalf2x16 rounds another way (the GLSL spec leaves it open) still passes; f16's
 * subnormals add an absolute 2^-25 (half their spacing), which tests add themselves. */
double ts_half_rel(lv_dtype dtype);
/* Round f32 values through a 16-bit dtype in place, as the device will see them. */
void ts_round_to(lv_dtype dtype, float *x, size_t n);
/* The inputs of `longvk forward` from a vectors file of the DiT tests: its 'x' as a .npy at
 * x_path, its 'y' and 'mask' as the --text-embeds safetensors at text_path. */
void ts_forward_inputs(const lv_weights *v, const char *x_path, const char *text_path);

#endif
