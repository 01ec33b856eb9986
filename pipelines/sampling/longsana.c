/* LongSANA's chunk procedure (see longvk/sampler.h): a few denoising steps with re-noising
 * (or Euler steps) in between, then a t = 0 write pass that commits the clean chunk to the
 * carried state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sampler.h"

static void draw_noise(const lv_chunk_options *opt, int64_t chunk, int step, float *out, size_t n) {
    if (opt->noise) memcpy(out, opt->noise[step], n * sizeof *out);
    else lv_noise_fill(opt->seed, lv_noise_stream((uint64_t)chunk, (uint64_t)step), out, n);
}

/* Runs `pass` on the dit and, when `other` is given, `other` too: on the twin beside it when
 * there is one, else after it on the dit. *other_failed: the failure was other's. */
static lv_status forward_beside(lv_ctx *ctx, lv_dit *dit, lv_dit_twin *twin, const lv_dit_pass *pass,
                                float *out, const lv_dit_pass *other, float *other_out, bool *other_failed) {
    *other_failed = false;
    if (other && twin) lv_dit_twin_start(twin, other, other_out);
    lv_status s = lv_dit_forward(ctx, dit, pass, out);
    if (other && twin) {
        char mine[1024];
        snprintf(mine, sizeof mine, "%s", lv_last_error());
        lv_status st = lv_dit_twin_wait(twin);
        if (s == LV_OK && st != LV_OK) {
            s = st;
            *other_failed = true;
        } else if (s != LV_OK) {
            lv_error(s, "%s", mine); /* the dit's own failure comes first */
        }
    } else if (other && s == LV_OK) {
        s = lv_dit_forward(ctx, dit, other, other_out);
        *other_failed = s != LV_OK;
    }
    return s;
}

/* A guided step with a CFG partner: this process's pass, then the swap; *uncond_failed when
 * the unconditional pass was this process's and failed. */
static lv_status guided_with_partner(lv_ctx *ctx, lv_dit *dit, const lv_cfg_partner *partner, const lv_dit_pass *cond,
                                     const lv_dit_pass *uncond, float *v, float *vu, size_t n, bool *uncond_failed) {
    const bool mine_cond = partner->role == LV_CFG_COND;
    float *mine = mine_cond ? v : vu, *theirs = mine_cond ? vu : v;
    lv_status s = lv_dit_forward(ctx, dit, mine_cond ? cond : uncond, mine);
    *uncond_failed = s != LV_OK && !mine_cond;
    if (s == LV_OK) s = partner->swap(partner->user, mine, theirs, n);
    return s;
}

/* Where the chunk failed, for the caller (lv_chunk_options.failed_stage). */
static void set_stage(const lv_chunk_options *opt, lv_chunk_stage stage) {
    if (opt->failed_stage) *opt->failed_stage = stage;
}

/* A stage that failed: "step 2 of 2[ (the unconditional pass)]: <its message>". */
static lv_status step_error(const lv_chunk_options *opt, lv_status s, int k, bool uncond_failed) {
    set_stage(opt, LV_CHUNK_STAGE_STEP);
    return lv_error_prefix(s, "step %d of %d%s", k + 1, opt->steps, uncond_failed ? " (the unconditional pass)" : "");
}

/* The conditioning frames (lv_chunk_options.cond) into frames [0, cond_frames) of a chunk
 * [C, frames, H, W]: what the pipeline's latents hold there at every step. */
static void hold_cond(const lv_chunk_options *opt, float *x, int frames, size_t plane, int channels) {
    if (opt->cond_frames <= 0) return;
    size_t held = (size_t)opt->cond_frames * plane;
    for (int c = 0; c < channels; c++)
        memcpy(x + (size_t)c * frames * plane, opt->cond + (size_t)c * held, held * sizeof *x);
}

static lv_status check_chunk_args(lv_ctx *ctx, lv_dit *dit, const lv_chunk_options *opt, int64_t chunk_index,
                                  int frame_offset, int frames, int height, int width, float *x0) {
    if (!ctx || !dit || !opt || !x0)
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: %s is NULL",
                        !ctx ? "the context" : !dit ? "the dit" : !opt ? "the options" : "x0");
    if (opt->steps < 1 || opt->steps > 64)
        return lv_error(LV_ERR_INVALID, "a chunk takes 1 to 64 denoising steps, not %d", opt->steps);
    if (!opt->timesteps) return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: no timesteps");
    for (int k = 0; k < opt->steps; k++)
        if (!(opt->timesteps[k] >= 0.0f && opt->timesteps[k] <= 1000.0f))
            return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: timestep %d is %g, not in [0, 1000]", k,
                            (double)opt->timesteps[k]);
    if (!isfinite(opt->cfg_scale))
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: cfg_scale %g is not finite", opt->cfg_scale);
    if (opt->cfg_last_steps < 0)
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: cfg_last_steps %d", opt->cfg_last_steps);
    if (opt->cfg_partner && (opt->twin || !opt->cfg_partner->swap ||
                             (opt->cfg_partner->role != LV_CFG_COND && opt->cfg_partner->role != LV_CFG_UNCOND)))
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: a CFG partner %s", opt->twin ? "and a twin: one or the other"
                        : !opt->cfg_partner->swap ? "without a swap" : "with an unknown role");
    if (opt->sampler != LV_CHUNK_RENOISE && opt->sampler != LV_CHUNK_EULER)
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: unknown sampler %d", (int)opt->sampler);
    if (opt->noise) /* the draws the chunk makes: the initial noise, and re-noise before steps 1.. */
        for (int k = 0; k < (opt->sampler == LV_CHUNK_RENOISE ? opt->steps : 1); k++)
            if (!opt->noise[k]) return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: noise[%d] is NULL", k);
    if (opt->cond_frames < 0 || opt->cond_frames > frames || (opt->cond_frames > 0 && !opt->cond))
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: %d conditioning frames %s", opt->cond_frames,
                        opt->cond_frames < 0 || opt->cond_frames > frames ? "in a chunk of that many frames"
                                                                            : "without their values (cond is NULL)");
    if (chunk_index < 0 || frame_offset < 0)
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: chunk %lld at frame %d", (long long)chunk_index,
                        frame_offset);
    if (frames < 1 || height < 1 || width < 1 || (int64_t)frames * height * width > LV_CHUNK_MAX_POSITIONS)
        return lv_error(LV_ERR_INVALID, "lv_longsana_chunk: %d frames of %dx%d", frames, width, height);
    return LV_OK;
}

lv_status lv_longsana_chunk(lv_ctx *ctx, lv_dit *dit, const lv_chunk_options *opt,
                            int64_t chunk_index, int frame_offset, int frames, int height,
                            int width, float *x0) {
    if (opt) set_stage(opt, LV_CHUNK_STAGE_NONE);
    LV_TRY(check_chunk_args(ctx, dit, opt, chunk_index, frame_offset, frames, height, width, x0));
    const lv_sana_config *cfg = lv_dit_config(dit);
    size_t n = (size_t)cfg->in_channels * frames * height * width;
    float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v), *vu = NULL;
    float *ts = malloc((size_t)frames * sizeof *ts);
    bool cfg_on = opt->cfg_scale != 1.0;
    if (cfg_on) vu = malloc(n * sizeof *vu);
    lv_status s = LV_OK;
    if (!x || !v || !ts || (cfg_on && !vu)) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    const size_t plane = (size_t)height * width;
    const int channels = cfg->in_channels;
    if (s == LV_OK) draw_noise(opt, chunk_index, 0, x, n);
    if (s == LV_OK && opt->warm) { /* x = (1 - s0) warm + s0 noise, warm repeated over the frames */
        double s0 = opt->timesteps[0] / 1000.0;
        for (size_t j = 0; j < n; j++) {
            size_t c = j / ((size_t)frames * plane), p = j % plane;
            x[j] = (float)((1 - s0) * opt->warm[c * plane + p] + s0 * x[j]);
        }
    }
    if (s == LV_OK) hold_cond(opt, x, frames, plane, channels);
    lv_dit_pass pass = {.x = x, .frames = frames, .height = height, .width = width,
                        .timesteps = ts, .frame_offset = frame_offset};
    for (int k = 0; s == LV_OK && k < opt->steps; k++) {
        double sig = opt->timesteps[k] / 1000.0;
        /* t (1 - mask): the conditioning frames' tokens at 0, in both CFG branches */
        for (int f = 0; f < frames; f++) ts[f] = f < opt->cond_frames ? 0.0f : opt->timesteps[k];
        bool cfg_here = cfg_on && (opt->cfg_last_steps <= 0 || k >= opt->steps - opt->cfg_last_steps);
        pass.text_slot = 0;
        lv_dit_pass uncond = pass;
        uncond.text_slot = 1;
        bool uncond_failed;
        if (cfg_here && opt->cfg_partner)
            s = guided_with_partner(ctx, dit, opt->cfg_partner, &pass, &uncond, v, vu, n, &uncond_failed);
        else
            s = forward_beside(ctx, dit, opt->twin, &pass, v, cfg_here ? &uncond : NULL, vu, &uncond_failed);
        if (s != LV_OK) {
            step_error(opt, s, k, uncond_failed);
            break;
        }
        if (opt->step_done) opt->step_done(opt->step_user, k, cfg_here ? 2 : 1);
        if (cfg_here)
            for (size_t j = 0; j < n; j++) v[j] = vu[j] + (float)opt->cfg_scale * (v[j] - vu[j]);
        for (size_t j = 0; j < n; j++) x0[j] = x[j] - (float)sig * v[j];
        hold_cond(opt, x0, frames, plane, channels); /* their prediction is not used */
        if (k + 1 < opt->steps) {
            double next = opt->timesteps[k + 1] / 1000.0;
            if (opt->sampler == LV_CHUNK_EULER) /* n = the predicted noise x + (1 - s) v */
                for (size_t j = 0; j < n; j++) v[j] = x[j] + (float)(1 - sig) * v[j];
            else
                draw_noise(opt, chunk_index, k + 1, v, n);
            for (size_t j = 0; j < n; j++) x[j] = (float)((1 - next) * x0[j] + next * v[j]);
            hold_cond(opt, x, frames, plane, channels); /* stepped: the other frames only */
        }
    }
    /* The DiT's predictions were checked on the device; what the host made of them (CFG's
     * extrapolation, x0) can still overflow: a few thousand comparisons per block. */
    for (size_t j = 0; s == LV_OK && j < n; j++)
        if (!isfinite(x0[j])) {
            set_stage(opt, LV_CHUNK_STAGE_FINISHED_BLOCK);
            s = lv_error(LV_ERR_INVALID, "the finished block has non-finite values (the first at value %zu of %zu; "
                         "the DiT's predictions were finite, the sampler's arithmetic on them overflowed)", j, n);
        }
    if (s == LV_OK && lv_dit_carries_state(dit)) { /* write pass over the clean chunk */
        for (int f = 0; f < frames; f++) ts[f] = 0.0f;
        pass.x = x0;
        pass.text_slot = 0;
        pass.commit = true;
        /* no prediction: the state is what it is for; the twin's state follows */
        bool twin_failed;
        s = forward_beside(ctx, dit, opt->twin, &pass, NULL, opt->twin ? &pass : NULL, NULL, &twin_failed);
        if (s != LV_OK) {
            set_stage(opt, LV_CHUNK_STAGE_WRITE_PASS);
            lv_error_prefix(s, "the write pass%s", twin_failed ? " (on the CFG twin)" : "");
        } else if (opt->step_done) {
            opt->step_done(opt->step_user, opt->steps, 1);
        }
    }
    free(x);
    free(v);
    free(vu);
    free(ts);
    return s;
}

lv_status lv_longsana_commit(lv_ctx *ctx, lv_dit *dit, lv_dit_twin *twin, int frame_offset, int frames,
                             int height, int width, const float *x0) {
    if (!ctx || !dit || !x0)
        return lv_error(LV_ERR_INVALID, "lv_longsana_commit: %s is NULL", !ctx ? "the context" : !dit ? "the dit" : "x0");
    if (frame_offset < 0 || frames < 1 || height < 1 || width < 1 ||
        (int64_t)frames * height * width > ((int64_t)1 << 31) / 64)
        return lv_error(LV_ERR_INVALID, "lv_longsana_commit: %d frames of %dx%d at frame %d", frames, width, height,
                        frame_offset);
    if (!lv_dit_carries_state(dit)) return LV_OK;
    float *ts = calloc((size_t)frames, sizeof *ts); /* t = 0 for every frame */
    if (!ts) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_dit_pass pass = {.x = x0, .frames = frames, .height = height, .width = width, .timesteps = ts,
                        .frame_offset = frame_offset, .text_slot = 0, .commit = true};
    bool twin_failed;
    lv_status s = forward_beside(ctx, dit, twin, &pass, NULL, twin ? &pass : NULL, NULL, &twin_failed);
    if (s != LV_OK) lv_error_prefix(s, "the write pass%s", twin_failed ? " (on the CFG twin)" : "");
    free(ts);
    return s;
}
