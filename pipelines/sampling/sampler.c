/* Single-clip sampling for the base model: flow-matching Euler and DPM-Solver++ 2M with
 * the shifted time grid and classifier-free guidance (see longvk/sampler.h). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sampler.h"

/* shift s / (1 + (shift - 1) s) with every operation rounded to float32 (torch float32 ops) */
static float shifted(double shift, float s) {
    float num = (float)shift * s;
    float den = 1.0f + (float)(shift - 1.0) * s;
    return num / den;
}

/* DPM-Solver++'s grid as the original builds it, in float32: b = linspace(1, 0.001, N + 1)
 * (torch's formula: each half counted from its own end), s = 1 - b, shifted, reversed. */
void lv_flow_sigmas(int steps, double shift, double *sigmas) {
    if (!sigmas || steps < 1) return;
    const float start = 1.0f, end = 0.001f;
    const float step = (end - start) / (float)steps;
    for (int i = 0; i <= steps; i++) {
        float b = i < (steps + 1) / 2 ? start + step * (float)i : end - step * (float)(steps - i);
        float s = 1.0f - b;
        sigmas[steps - i] = shifted(shift, s);
    }
}

/* The flow-matching Euler grid of the original (diffusers' FlowMatchEulerDiscreteScheduler
 * with a shift): N sigmas from u = linspace(1, shift(0.001), N), each shifted again, then 0. */
void lv_flow_sigmas_euler(int steps, double shift, double *sigmas) {
    if (!sigmas || steps < 1) return;
    /* the scheduler's table ends at shift(0.001) in float32; the inference grid is
     * linspace(1000, 1000 sigma_min, steps) / 1000 in double, shifted in double, then float */
    double sigma_min = shifted(shift, 1.0f / 1000.0f);
    double t0 = 1000.0, t1 = sigma_min * 1000.0;
    for (int i = 0; i < steps; i++) {
        double t = steps == 1 ? t0 : (i == steps - 1 ? t1 : t0 + (double)i * ((t1 - t0) / (double)(steps - 1)));
        double u = t / 1000.0;
        sigmas[i] = (float)(shift * u / (1.0 + (shift - 1.0) * u));
    }
    sigmas[steps] = 0.0;
}

/* Whether a step runs the unconditional pass: the original's Euler guides only for cfg > 1,
 * its DPM-Solver++ whenever cfg != 1. */
static bool guided(const lv_clip_options *opt) {
    return opt->solver == LV_SOLVER_EULER ? opt->cfg_scale > 1.0 : opt->cfg_scale != 1.0;
}

/* v = v_uncond + cfg (v_cond - v_uncond), or v_cond alone when unguided */
static lv_status velocity(lv_ctx *ctx, lv_dit *dit, const lv_clip_options *opt, const float *x,
                          int frames, int height, int width, double sigma, float *v,
                          float *v_uncond, size_t n) {
    float *ts = malloc((size_t)frames * sizeof *ts);
    if (!ts) return lv_error(LV_ERR_NOMEM, "out of host memory");
    /* t (1 - mask): the conditioning frames' tokens at 0 */
    for (int f = 0; f < frames; f++) ts[f] = f < opt->cond_frames ? 0.0f : (float)(sigma * 1000.0);
    lv_dit_pass pass = {.x = x, .frames = frames, .height = height, .width = width,
                        .timesteps = ts, .text_slot = 0};
    lv_status s = lv_dit_forward(ctx, dit, &pass, v);
    if (s == LV_OK && guided(opt)) {
        pass.text_slot = 1;
        s = lv_dit_forward(ctx, dit, &pass, v_uncond);
        for (size_t i = 0; s == LV_OK && i < n; i++)
            v[i] = v_uncond[i] + (float)opt->cfg_scale * (v[i] - v_uncond[i]);
    }
    free(ts);
    return s;
}

/* The conditioning frames (lv_clip_options.cond) into frames [0, cond_frames) of x. */
static void hold_cond(const lv_clip_options *opt, float *x, int channels, int frames, size_t plane) {
    if (opt->cond_frames <= 0) return;
    size_t held = (size_t)opt->cond_frames * plane;
    for (int c = 0; c < channels; c++)
        memcpy(x + (size_t)c * frames * plane, opt->cond + (size_t)c * held, held * sizeof *x);
}

lv_status lv_sample_clip(lv_ctx *ctx, lv_dit *dit, const lv_clip_options *opt, int frames,
                         int height, int width, float *x) {
    if (!ctx || !dit || !opt || !x)
        return lv_error(LV_ERR_INVALID, "lv_sample_clip: %s is NULL",
                        !ctx ? "the context" : !dit ? "the dit" : !opt ? "the options" : "x");
    const lv_sana_config *cfg = lv_dit_config(dit);
    if (opt->steps < 1 || opt->steps > 1000)
        return lv_error(LV_ERR_INVALID, "steps must be in [1, 1000], not %d", opt->steps);
    if (!isfinite(opt->shift) || !(opt->shift > 0) || !isfinite(opt->cfg_scale))
        return lv_error(LV_ERR_INVALID, "lv_sample_clip: shift %g (> 0) and cfg_scale %g must be finite", opt->shift,
                        opt->cfg_scale);
    if (opt->solver != LV_SOLVER_EULER && opt->solver != LV_SOLVER_DPMPP_2M)
        return lv_error(LV_ERR_INVALID, "lv_sample_clip: unknown solver %d", (int)opt->solver);
    if (frames < 1 || height < 1 || width < 1 || (int64_t)frames * height * width > LV_CHUNK_MAX_POSITIONS)
        return lv_error(LV_ERR_INVALID, "lv_sample_clip: %d frames of %dx%d", frames, width, height);
    if (opt->cond_frames < 0 || opt->cond_frames > frames || (opt->cond_frames > 0 && !opt->cond))
        return lv_error(LV_ERR_INVALID, "lv_sample_clip: %d conditioning frames %s", opt->cond_frames,
                        opt->cond_frames < 0 || opt->cond_frames > frames ? "in a clip of that many frames"
                                                                            : "without their values (cond is NULL)");
    const size_t plane = (size_t)height * width;
    size_t n = (size_t)cfg->in_channels * frames * height * width;
    double *sigmas = malloc((size_t)(opt->steps + 1) * sizeof *sigmas);
    float *v = malloc(n * sizeof *v), *vu = malloc(n * sizeof *vu);
    float *x0 = malloc(n * sizeof *x0), *x0_prev = malloc(n * sizeof *x0_prev);
    lv_status s = LV_OK;
    if (!sigmas || !v || !vu || !x0 || !x0_prev) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK) s = lv_dit_reset(ctx, dit);
    if (s == LV_OK) {
        if (opt->solver == LV_SOLVER_EULER) lv_flow_sigmas_euler(opt->steps, opt->shift, sigmas);
        else lv_flow_sigmas(opt->steps, opt->shift, sigmas);
        if (opt->noise) memcpy(x, opt->noise, n * sizeof *x);
        else lv_noise_fill(opt->seed, 0, x, n);
        hold_cond(opt, x, cfg->in_channels, frames, plane);
    }
    double h_prev = 0;
    for (int i = 0; s == LV_OK && i < opt->steps; i++) {
        double sig = sigmas[i], sig_next = sigmas[i + 1];
        s = velocity(ctx, dit, opt, x, frames, height, width, sig, v, vu, n);
        if (s != LV_OK) break;
        if (opt->solver == LV_SOLVER_EULER) {
            for (size_t j = 0; j < n; j++) x[j] += (float)(sig_next - sig) * v[j];
            hold_cond(opt, x, cfg->in_channels, frames, plane); /* stepped: the other frames only */
            continue;
        }
        /* DPM-Solver++ 2M in data prediction, alpha = 1 - sigma, lambda = log(alpha/sigma) */
        for (size_t j = 0; j < n; j++) x0[j] = x[j] - (float)sig * v[j];
        if (sig_next <= 0) { /* last step: the denoised estimate (lower order at the end) */
            memcpy(x, x0, n * sizeof *x);
            hold_cond(opt, x, cfg->in_channels, frames, plane);
            break;
        }
        double lam = log((1 - sig) / sig), lam_next = log((1 - sig_next) / sig_next);
        double h = lam_next - lam;
        double ratio = sig_next / sig, coef = (1 - sig_next) * (1 - exp(-h));
        if (i == 0) {
            for (size_t j = 0; j < n; j++) x[j] = (float)(ratio * x[j] + coef * x0[j]);
        } else {
            double r = h_prev / h;
            double a = 1 + 1 / (2 * r), b = 1 / (2 * r);
            for (size_t j = 0; j < n; j++)
                x[j] = (float)(ratio * x[j] + coef * (a * x0[j] - b * x0_prev[j]));
        }
        /* the conditioning frames' x0 only feeds their own (overwritten) update */
        hold_cond(opt, x, cfg->in_channels, frames, plane);
        memcpy(x0_prev, x0, n * sizeof *x0);
        h_prev = h;
    }
    free(sigmas);
    free(v);
    free(vu);
    free(x0);
    free(x0_prev);
    return s;
}
