/* Single-clip sampling for the base model: flow-matching Euler and DPM-Solver++ 2M with
 * the shifted time grid and classifier-free guidance (see longvk/sampler.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sampler.h"

void lv_flow_sigmas(int steps, double shift, double *sigmas) {
    for (int i = 0; i <= steps; i++) {
        double s = 0.999 * (double)i / (double)steps;
        sigmas[steps - i] = shift * s / (1.0 + (shift - 1.0) * s);
    }
}

/* v = v_uncond + cfg (v_cond - v_uncond), or v_cond alone when cfg == 1 */
static lv_status velocity(lv_ctx *ctx, lv_dit *dit, const lv_clip_options *opt, const float *x,
                          int frames, int height, int width, double sigma, float *v,
                          float *v_uncond, size_t n) {
    float *ts = malloc((size_t)frames * sizeof *ts);
    if (!ts) return lv_error(LV_ERR_NOMEM, "out of host memory");
    for (int f = 0; f < frames; f++) ts[f] = (float)(sigma * 1000.0);
    lv_dit_pass pass = {.x = x, .frames = frames, .height = height, .width = width,
                        .timesteps = ts, .text_slot = 0};
    lv_status s = lv_dit_forward(ctx, dit, &pass, v);
    if (s == LV_OK && opt->cfg_scale != 1.0) {
        pass.text_slot = 1;
        s = lv_dit_forward(ctx, dit, &pass, v_uncond);
        for (size_t i = 0; s == LV_OK && i < n; i++)
            v[i] = v_uncond[i] + (float)opt->cfg_scale * (v[i] - v_uncond[i]);
    }
    free(ts);
    return s;
}

lv_status lv_sample_clip(lv_ctx *ctx, lv_dit *dit, const lv_clip_options *opt, int frames,
                         int height, int width, float *x) {
    const lv_sana_config *cfg = lv_dit_config(dit);
    if (opt->steps < 1 || opt->steps > 1000)
        return lv_error(LV_ERR_INVALID, "steps must be in [1, 1000], not %d", opt->steps);
    size_t n = (size_t)cfg->in_channels * frames * height * width;
    double *sigmas = malloc((size_t)(opt->steps + 1) * sizeof *sigmas);
    float *v = malloc(n * sizeof *v), *vu = malloc(n * sizeof *vu);
    float *x0 = malloc(n * sizeof *x0), *x0_prev = malloc(n * sizeof *x0_prev);
    lv_status s = LV_OK;
    if (!sigmas || !v || !vu || !x0 || !x0_prev) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK) s = lv_dit_reset(ctx, dit);
    if (s == LV_OK) {
        lv_flow_sigmas(opt->steps, opt->shift, sigmas);
        if (opt->noise) memcpy(x, opt->noise, n * sizeof *x);
        else lv_noise_fill(opt->seed, 0, x, n);
    }
    double h_prev = 0;
    for (int i = 0; s == LV_OK && i < opt->steps; i++) {
        double sig = sigmas[i], sig_next = sigmas[i + 1];
        s = velocity(ctx, dit, opt, x, frames, height, width, sig, v, vu, n);
        if (s != LV_OK) break;
        if (opt->solver == LV_SOLVER_EULER) {
            for (size_t j = 0; j < n; j++) x[j] += (float)(sig_next - sig) * v[j];
            continue;
        }
        /* DPM-Solver++ 2M in data prediction, alpha = 1 - sigma, lambda = log(alpha/sigma) */
        for (size_t j = 0; j < n; j++) x0[j] = x[j] - (float)sig * v[j];
        if (sig_next <= 0) { /* last step: the denoised estimate (lower order at the end) */
            memcpy(x, x0, n * sizeof *x);
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
