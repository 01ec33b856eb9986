/* Samplers of SANA-Video (pipelines/sampling/sampler.c, pipelines/sampling/longsana.c) and the noise they
 * draw (pipelines/sampling/noise.c). The model predicts the flow-matching velocity v; with the
 * noise level s in [0, 1] (the DiT receives 1000 s), x0 = x - s v. */
#ifndef LONGVK_SAMPLER_H
#define LONGVK_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/cfg_partner.h"
#include "longvk/dit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Standard normal noise that depends only on (seed, stream, index): counter-based, so a
 * resumed run draws exactly what an uninterrupted one would, with no generator state to
 * save. Stream numbers name what the noise is for (chunk c, step k). */
void lv_noise_fill(uint64_t seed, uint64_t stream, float *out, size_t n); /* out NULL: nothing */
uint64_t lv_noise_stream(uint64_t chunk, uint64_t step);

/* The base model's time grids (steps + 1 values, sigmas[0] the noisiest, sigmas[steps] = 0),
 * in float32 as the original computes them so the integer timesteps agree:
 * DPM-Solver++: s = 1 - linspace(1, 0.001, steps + 1), shifted by shift s / (1 + (shift - 1) s),
 * reversed. Euler: u = linspace(1, shift(0.001), steps), shifted again, then 0. */
void lv_flow_sigmas(int steps, double shift, double *sigmas); /* sigmas NULL or steps < 1: nothing */
void lv_flow_sigmas_euler(int steps, double shift, double *sigmas);

typedef enum lv_solver { LV_SOLVER_EULER = 0, LV_SOLVER_DPMPP_2M } lv_solver;

typedef struct lv_clip_options {
    int steps;              /* default 50 */
    double shift;           /* default 8 */
    double cfg_scale;       /* default 6; 1 disables the unconditional pass */
    lv_solver solver;
    uint64_t seed;
    const float *noise;     /* optional: the initial noise instead of the seed's draw */
    /* Image-to-video (SanaImageToVideoPipeline): the first cond_frames frames given clean,
     * cond [C, cond_frames, H, W], at timestep 0 in every pass and both CFG branches, never
     * changed by a step (the pipeline steps the other frames only); as lv_chunk_options'. */
    int cond_frames;
    const float *cond;
} lv_clip_options;

/* The most positions (frames x height x width of the model's grid) one chunk or clip may
 * have: its indexing stays within 32 bits for every buffer of a pass. */
#define LV_CHUNK_MAX_POSITIONS (((int64_t)1 << 31) / 64)

/* Single-clip sampling of the base model: x [C, F, H, W] starts as noise (drawn here from
 * the seed), text slot 0 is the prompt, slot 1 the negative prompt (used when cfg != 1).
 * The dit's carried state is reset first and left empty. On return x holds the latents. */
lv_status lv_sample_clip(lv_ctx *ctx, lv_dit *dit, const lv_clip_options *opt, int frames,
                         int height, int width, float *x);

/* LongSANA: one chunk of `frames` latent frames at absolute frame `frame_offset`.
 * Denoises at the given timesteps (model scale, e.g. 1000, 960, 889, 727): after each
 * step x0 = x - s v, then x = (1 - s') x0 + s' n for the next step s', where n is fresh
 * noise (LV_CHUNK_RENOISE, LongSANA's sampler) or the noise the model predicts,
 * n = x + (1 - s) v (LV_CHUNK_EULER: the flow ODE's Euler step, for many-step blocks made
 * from the text alone). The last x0 is the chunk; a final t = 0 pass over it with the
 * prompt commits the chunk to the carried state. The initial noise and the re-noise draws
 * come from (seed, chunk). x0 [C, F, H, W]. A few steps need help to keep the objects of a
 * small model's chunks from fading block after block: CFG at the last step (cfg_last_steps)
 * and a start from the previous chunk's last frame (warm), see assets/default-model/RECIPE.md. */
typedef enum lv_chunk_sampler { LV_CHUNK_RENOISE = 0, LV_CHUNK_EULER } lv_chunk_sampler;

/* A twin of a dit on a second context and thread (pipelines/sampling/dit_twin.c): the same model,
 * texts and carried state, for CFG's unconditional passes, which then run beside the
 * conditional ones (two cores for a CPU device whose kernels run inline, cpu_threads 0).
 * The twin makes every write pass too, so its state stays equal to the dit's: the frames
 * are the same to the bit as without it. */
typedef struct lv_dit_twin lv_dit_twin;
lv_status lv_dit_twin_create(const lv_ctx_options *copt, const lv_sana_file *file,
                             const lv_dit_options *dopt, lv_dit_twin **out);
void lv_dit_twin_destroy(lv_dit_twin *twin);
/* Its context and dit, for lv_dit_set_text and lv_dit_state_load (not while a pass runs). */
lv_ctx *lv_dit_twin_ctx(lv_dit_twin *twin);
lv_dit *lv_dit_twin_dit(lv_dit_twin *twin);
/* Starts lv_dit_forward on the twin's thread; *pass and what it points to, and out, must
 * stay unchanged until lv_dit_twin_wait, which returns that forward's status (its error
 * message becomes this thread's). One pass at a time: a NULL pass, or a start while a
 * pass runs, makes the next wait fail (LV_ERR_INVALID), as does a wait with nothing
 * started, or a NULL twin. */
void lv_dit_twin_start(lv_dit_twin *twin, const lv_dit_pass *pass, float *out);
lv_status lv_dit_twin_wait(lv_dit_twin *twin);

/* Where lv_longsana_chunk failed (lv_chunk_options.failed_stage): a caller that words its
 * own message around the sampler's tells by this, never by the message's words, whether
 * the message begins with the stage ("step 2 of 2: ...", "the write pass: ...", "the
 * finished block has ..."). */
typedef enum lv_chunk_stage {
    LV_CHUNK_STAGE_NONE = 0,       /* no failure, or before any pass: the arguments, host memory */
    LV_CHUNK_STAGE_STEP,           /* a denoising step's pass (or its unconditional pass) */
    LV_CHUNK_STAGE_FINISHED_BLOCK, /* the finished block's check for non-finite values */
    LV_CHUNK_STAGE_WRITE_PASS      /* the write pass over the finished block */
} lv_chunk_stage;

typedef struct lv_chunk_options {
    const float *timesteps;
    int steps;
    uint64_t seed;
    double cfg_scale;       /* 1: prompt only (LongSANA's default); else text slot 1 is the
                               unconditional input */
    lv_chunk_sampler sampler;
    const float *const *noise; /* optional: noise[k] replaces the draw for step k (k = 0 is
                                  the initial noise), to check against other samplers */
    int cfg_last_steps;     /* with cfg_scale != 1: CFG only at the last this many steps
                               (0: every step); the others take the prompt's v alone */
    const float *warm;      /* optional: the previous chunk's last frame [C, H, W]; the
                               first step then starts from x = (1 - s_0) warm + s_0 noise
                               (every frame) instead of noise alone ("warm start") */
    lv_dit_twin *twin;      /* optional: runs the unconditional passes in parallel and
                               mirrors the write pass (lv_dit_twin_create) */
    const lv_cfg_partner *cfg_partner; /* optional, not with a twin: a partner process runs
                               the other pass of each guided step (longvk/cfg_partner.h) */
    /* optional: called after each step's passes (step 0 .. steps-1; `passes` 2 with CFG at
     * that step, else 1) and after the write pass (step = steps, passes 1), for progress
     * and timing */
    void (*step_done)(void *user, int step, int passes);
    void *step_user;
    lv_chunk_stage *failed_stage; /* optional: set to the stage that failed (LV_CHUNK_STAGE_NONE
                                     when none did) */
    /* Image-to-video conditioning (SANA-Video's SanaImageToVideoPipeline): the chunk's first
     * cond_frames frames are given clean, cond [C, cond_frames, H, W]. They enter every pass
     * of every step (both CFG branches) as they are, at timestep 0 (the pipeline's
     * t (1 - mask) with mask 1 on their tokens), no step changes them (the pipeline steps
     * only the other frames), and the finished chunk holds them as given. 0: none. */
    int cond_frames;
    const float *cond;
} lv_chunk_options;

/* Errors name the step and the stage: "step 2 of 2: the DiT's output has non-finite values
 * (...)" (lv_dit_forward's check), "step 2 of 2 (the unconditional pass): ...", "the write
 * pass: the carried state ...", "the finished block has non-finite values" (x0, checked
 * before it is returned). Bad arguments (NULL pointers, sizes, steps, a non-finite
 * cfg_scale or timestep) are LV_ERR_INVALID. */
lv_status lv_longsana_chunk(lv_ctx *ctx, lv_dit *dit, const lv_chunk_options *opt,
                            int64_t chunk_index, int frame_offset, int frames, int height,
                            int width, float *x0);

/* The write pass alone: a clean chunk x0 [C, frames, height, width] that was made elsewhere
 * (a clip being continued) committed to the carried state at t = 0, exactly as
 * lv_longsana_chunk commits the chunk it made (text slot 0, frame_offset its position);
 * `twin` (optional) mirrors it. A dit that carries no state: nothing to do. */
lv_status lv_longsana_commit(lv_ctx *ctx, lv_dit *dit, lv_dit_twin *twin, int frame_offset, int frames,
                             int height, int width, const float *x0);

#ifdef __cplusplus
}
#endif
#endif
