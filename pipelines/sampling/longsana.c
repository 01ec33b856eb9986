/* LongSANA's chunk procedure (see longvk/sampler.h): a few denoising steps with re-noising
 * (or Euler steps) in between, then a t = 0 write pass that commits the clean chunk to the
 * carried state. */
#include <stdlib.h>
#include <string.h>

#include "longvk/sampler.h"

static void draw_noise(const lv_chunk_options *opt, int64_t chunk, int step, float *out, size_t n) {
    if (opt->noise) memcpy(out, opt->noise[step], n * sizeof *out);
    else lv_noise_fill(opt->seed, lv_noise_stream((uint64_t)chunk, (uint64_t)step), out, n);
}

/* Runs `pass` on the dit and, when `other` is given, `other` too: on the twin beside it when
 * there is one, else after it on the dit. */
static lv_status forward_beside(lv_ctx *ctx, lv_dit *dit, lv_dit_twin *twin, const lv_dit_pass *pass,
                                float *out, const lv_dit_pass *other, float *other_out) {
    if (other && twin) lv_dit_twin_start(twin, other, other_out);
    lv_status s = lv_dit_forward(ctx, dit, pass, out);
    if (other && twin) {
        lv_status st = lv_dit_twin_wait(twin);
        if (s == LV_OK) s = st;
    } else if (other && s == LV_OK) {
        s = lv_dit_forward(ctx, dit, other, other_out);
    }
    return s;
}

lv_status lv_longsana_chunk(lv_ctx *ctx, lv_dit *dit, const lv_chunk_options *opt,
                            int64_t chunk_index, int frame_offset, int frames, int height,
                            int width, float *x0) {
    const lv_sana_config *cfg = lv_dit_config(dit);
    if (opt->steps < 1 || opt->steps > 64)
        return lv_error(LV_ERR_INVALID, "a chunk takes 1 to 64 denoising steps, not %d", opt->steps);
    size_t n = (size_t)cfg->in_channels * frames * height * width;
    float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v), *vu = NULL;
    float *ts = malloc((size_t)frames * sizeof *ts);
    bool cfg_on = opt->cfg_scale != 1.0;
    if (cfg_on) vu = malloc(n * sizeof *vu);
    lv_status s = LV_OK;
    if (!x || !v || !ts || (cfg_on && !vu)) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK) draw_noise(opt, chunk_index, 0, x, n);
    if (s == LV_OK && opt->warm) { /* x = (1 - s0) warm + s0 noise, warm repeated over the frames */
        double s0 = opt->timesteps[0] / 1000.0;
        size_t plane = (size_t)height * width;
        for (size_t j = 0; j < n; j++) {
            size_t c = j / ((size_t)frames * plane), p = j % plane;
            x[j] = (float)((1 - s0) * opt->warm[c * plane + p] + s0 * x[j]);
        }
    }
    lv_dit_pass pass = {.x = x, .frames = frames, .height = height, .width = width,
                        .timesteps = ts, .frame_offset = frame_offset};
    for (int k = 0; s == LV_OK && k < opt->steps; k++) {
        double sig = opt->timesteps[k] / 1000.0;
        for (int f = 0; f < frames; f++) ts[f] = opt->timesteps[k];
        bool cfg_here = cfg_on && (opt->cfg_last_steps <= 0 || k >= opt->steps - opt->cfg_last_steps);
        pass.text_slot = 0;
        lv_dit_pass uncond = pass;
        uncond.text_slot = 1;
        s = forward_beside(ctx, dit, opt->twin, &pass, v, cfg_here ? &uncond : NULL, vu);
        if (s != LV_OK) break;
        if (cfg_here)
            for (size_t j = 0; j < n; j++) v[j] = vu[j] + (float)opt->cfg_scale * (v[j] - vu[j]);
        for (size_t j = 0; j < n; j++) x0[j] = x[j] - (float)sig * v[j];
        if (k + 1 < opt->steps) {
            double next = opt->timesteps[k + 1] / 1000.0;
            if (opt->sampler == LV_CHUNK_EULER) /* n = the predicted noise x + (1 - s) v */
                for (size_t j = 0; j < n; j++) v[j] = x[j] + (float)(1 - sig) * v[j];
            else
                draw_noise(opt, chunk_index, k + 1, v, n);
            for (size_t j = 0; j < n; j++) x[j] = (float)((1 - next) * x0[j] + next * v[j]);
        }
    }
    if (s == LV_OK && lv_dit_carries_state(dit)) { /* write pass over the clean chunk */
        for (int f = 0; f < frames; f++) ts[f] = 0.0f;
        pass.x = x0;
        pass.text_slot = 0;
        pass.commit = true;
        /* no prediction: the state is what it is for; the twin's state follows */
        s = forward_beside(ctx, dit, opt->twin, &pass, NULL, opt->twin ? &pass : NULL, NULL);
    }
    free(x);
    free(v);
    free(vu);
    free(ts);
    return s;
}
