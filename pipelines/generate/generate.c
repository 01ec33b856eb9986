/* Long-video generation: LongSANA chunk after chunk over the carried state, each finished
 * chunk straight to the encoder and a resume file at every block boundary (see
 * longvk/generate.h). Host memory holds one chunk; device memory holds the weights, the
 * fixed-size carried state and one pass's activations. This file: the run from the opened
 * model to the last block; its other concerns are listed in generate_run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "generate_run.h"
#include "longvk/dit.h"
#include "longvk/files.h"
#include "longvk/sampler.h"

double lv_gen_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Chunk sizes as LongSANA cuts them: blocks of B frames, the first taking the remainder. */
int lv_generate_chunk_frames(int total, int B, int chunk) {
    if (total <= B) return chunk == 0 ? total : 0;
    int n = total / B;
    if (chunk >= n) return 0;
    return chunk == 0 ? B + total % B : B;
}

int lv_generate_chunk_count(int total, int B) { return total <= B ? 1 : total / B; }

/* More than one process makes this video: bands (sp_comm), a CFG partner, or both. */
bool lv_gen_several(const gen_run *r) { return r->sp || r->o.cfg_partner; }

/* data from the writing process to every other: within its group of bands from band 0,
 * then from each conditional process to its partner (the unconditional group's band 0
 * reads nothing: what its own broadcast spreads is overwritten by the partner's) */
lv_status lv_gen_share(gen_run *r, void *data, uint64_t bytes) {
    if (r->sp) LV_TRY(lv_sp_comm_broadcast(r->sp, data, bytes));
    const lv_cfg_partner *p = r->o.cfg_partner;
    return p ? p->share(p->user, data, bytes) : LV_OK;
}

static void run_free(gen_run *r) {
    lv_gen_vae_tiles_free(r);
    if (r->vae) lv_vae_decoder_destroy(r->ctx, r->vae);
    lv_weights_close(r->vae_weights);
    lv_dit_twin_destroy(r->twin);
    if (r->dit) lv_dit_destroy(r->ctx, r->dit);
    if (r->ctx) lv_ctx_destroy(r->ctx);
    lv_text_encoder_close(r->text);
    lv_gen_model_close(&r->m);
    free(r->y);
    free(r->mask);
    free(r->x0);
    free(r->last_frame);
    lv_frame_writer_free(&r->writer);
    free(r->latents);
    for (int i = 0; i < r->nsw; i++) {
        free(r->sw[i].own_prompt);
        free(r->sw[i].own_negative);
    }
    free(r->sw);
    free(r->texts_y);
    free(r->texts_mask);
    free(r->hist);
    free(r->vae_ring);
    free(r->vae_resume.latents);
    free(r->cond);
    free(r->image);
    lv_gen_continue_free(r);
    lv_text_encoder_close(r->live_text);
}

/* Tokens a frame of the model's grid makes. */
int64_t lv_gen_frame_tokens(const gen_run *r) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    return (int64_t)(r->grid_h / cfg->patch[1]) * (r->grid_w / cfg->patch[2]);
}

/* How block `chunk` (burn-in included) is made: the first from the text alone, the others
 * continuing it; with --image the first block continues the picture (frame 0, whose
 * last frame a warm-started recipe starts from), as a later block continues the one before. */
const lv_block_recipe *lv_gen_recipe_of(const gen_run *r, int chunk) {
    if (chunk == 0 && r->cond) return &r->later;
    return chunk == 0 || !lv_dit_carries_state(r->dit) ? &r->first : &r->later;
}

/* Everything from the opened model to the last block; the caller closes and frees. */
static lv_status run(gen_run *r, const lv_generate_options *opt_in, lv_generate_callback progress,
                     void (*warn)(void *, const char *), void *user, volatile sig_atomic_t *stop) {
    lv_generate_options *o = &r->o;
    r->progress = progress, r->progress_user = user;
    LV_TRY(lv_gen_resolve_options(opt_in, r));
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    if (o->output) { /* a symbolic link is written through: the video and its state go beside its target */
        int special = 0;
        LV_TRY(lv_output_target(o->output, r->output_target, sizeof r->output_target, &special));
        /* a device or FIFO (/dev/null) cannot take the video: it is built under a temporary name and
         * renamed into place, its resume state beside it, so that a killed run leaves either nothing
         * or a playable file; refused rather than replaced */
        if (special)
            return lv_error(LV_ERR_INVALID, "the output %s is not a regular file (a device or FIFO): generate "
                            "writes its video under a temporary name beside it, renames it into place and keeps "
                            "a resume state beside it; give a file name", o->output);
        o->output = r->output_target;
    }
    if (opt_in->state_path) snprintf(r->state_path, sizeof r->state_path, "%s", opt_in->state_path);
    else if (!o->output) r->state_path[0] = '\0'; /* frames to a sink alone: no file, no resume file */
    else if (snprintf(r->state_path, sizeof r->state_path, "%s.longvk-state", o->output) >= (int)sizeof r->state_path)
        return lv_error(LV_ERR_INVALID, "output path too long: %s", o->output);

    r->sp = o->sp_comm;
    r->root = (!r->sp || lv_sp_comm_first(r->sp) == 0) && (!o->cfg_partner || o->cfg_partner->role == LV_CFG_COND);
    if (o->cfg_partner && (!r->uncond || o->sampler != LV_GEN_LONGSANA))
        return lv_error(LV_ERR_INVALID, "--cfg-parallel: %s", o->sampler != LV_GEN_LONGSANA
                        ? "block-wise generation only (the LongSANA sampler), not a single clip"
                        : "this run uses no CFG (a CFG scale of 1 at every block): nothing to share between the groups; "
                          "give every rank a band instead (--sequence-parallel alone)");
    if (!r->root) warn = NULL; /* the same words on every process: said once */
    LV_TRY(lv_gen_resolve_schedule(r));
    LV_TRY(lv_gen_prepare_text(r, warn, user));
    LV_TRY(lv_gen_prepare_image(r, warn, user)); /* before anything is written: a bad image writes nothing */
    lv_gen_continue_warn(r, warn, user);
    int burn = o->burn_in_blocks, total = lv_gen_total_chunks(r);
    r->frames_total = lv_gen_output_frames(r);
    r->frame_values = (int64_t)cfg->in_channels * r->grid_h * r->grid_w;
    if (!(r->last_frame = calloc((size_t)r->frame_values, sizeof *r->last_frame)))
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    if (r->cond) /* --image: what the first block continues, as a later block continues the last frame */
        lv_gen_keep_cond_frame(r);
    r->hls_named = -1;
    if (r->root && o->resume && !lv_gen_resume_file_exists(r)) /* before the device is set up */
        return lv_error(LV_ERR_IO, "--resume needs the state file an interrupted run left (%s): there is none",
                        r->state_path);
    if (r->root && !o->resume && !o->plan_only) {
        /* before the device: a bad codec fails at once; then the resume file says the run
         * has started (see "what a killed run leaves") */
        if (lv_gen_writes_video(r)) LV_TRY(lv_gen_probe_output(r));
        LV_TRY(lv_gen_save_state(r, 0, 0));
        if (lv_gen_hls_output(r)) { /* an earlier run's, which this one replaces */
            char seg[sizeof r->state_path + 16];
            lv_gen_segment_state_path(r, seg, sizeof seg);
            remove(seg);
        }
        r->wrote_start_state = lv_gen_resumable(r) && r->state_path[0];
    }

    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.device_index = o->device_index;
    copt.cpu_threads = o->cpu_threads;
    copt.precision = o->precision;
    if (o->cpu_threads == LV_GEN_CPU_THREADS_AUTO) {
        int64_t tokens = (int64_t)((o->block_frames + cfg->patch[0] - 1) / cfg->patch[0]) * lv_gen_frame_tokens(r);
        copt.cpu_threads = lv_generate_auto_cpu_threads(tokens, cfg->hidden);
    }
    LV_TRY(lv_ctx_create(&copt, &r->ctx));
    {
        lv_generate_plan plan;
        LV_TRY(lv_gen_plan(r, lv_gen_use_twin(r, copt.cpu_threads), &plan));
        if (opt_in->plan_out) *opt_in->plan_out = plan;
        if (o->plan_only) return LV_OK;
        if (!o->sp_bands && !r->sp) LV_TRY(lv_gen_plan_check(r, &plan)); /* planned unsplit */
    }
    if (r->use_encoder && r->root) {
        lv_status text = lv_gen_encode_text(r, progress, user, stop);
        r->stopped_in_text = text == LV_ERR_INTERRUPTED;
        LV_TRY(text);
    }
    if (r->use_encoder && lv_gen_several(r)) LV_TRY(lv_gen_share_text(r));
    if (o->text_embeds_out && r->root) LV_TRY(lv_gen_save_text_embeds(r, o->text_embeds_out));
    /* a latent model's picture and clip through the VAE encoder, freed before the DiT's weights come */
    LV_TRY(lv_gen_encode_image(r));
    LV_TRY(lv_gen_continue_encode(r));
    lv_dit_options dopt = {.cached_blocks = o->cached_blocks, .weights = (lv_dit_weights)o->weights_dtype,
                           .sp_bands = o->sp_bands, .sp_comm = o->sp_comm};
    LV_TRY(lv_dit_create(r->ctx, r->m.file, &dopt, &r->dit));
    LV_TRY(lv_gen_set_texts(r, r->ctx, r->dit));
    if (lv_gen_use_twin(r, copt.cpu_threads)) LV_TRY(lv_gen_twin_open(r, &copt, &dopt));

    int first_chunk = 0;
    if (o->resume) LV_TRY(lv_gen_load_resume(r, &first_chunk));
    LV_TRY(lv_gen_alloc_buffers(r));
    /* a latent model's VAE: its causal history put back from the last latent frames it decoded */
    if (o->resume && first_chunk < total) LV_TRY(lv_gen_vae_reprime(r));
    LV_TRY(lv_gen_continue_open(r, first_chunk));
    if (r->root && lv_gen_writes_video(r) && o->resume) {
        if (r->frames_done > 0) LV_TRY(lv_gen_open_video(r, r->frames_done, &r->enc)); /* checks the old video */
        else LV_TRY(lv_gen_probe_output(r));
    }

    r->t_start = lv_gen_now();
    int64_t frames_at_start = r->frames_done;
    int64_t frames_total = r->frames_total;
    if (o->sampler != LV_GEN_LONGSANA) {
        lv_clip_options clip = {.steps = o->steps, .shift = o->shift, .cfg_scale = o->cfg_scale,
                                .solver = o->sampler == LV_GEN_EULER ? LV_SOLVER_EULER : LV_SOLVER_DPMPP_2M,
                                .seed = o->seed, .cond_frames = r->cond_frames, .cond = r->cond};
        LV_TRY(lv_sample_clip(r->ctx, r->dit, &clip, r->units, r->grid_h, r->grid_w, r->x0));
        if (r->root && lv_gen_writes_video(r) && !r->enc) LV_TRY(lv_gen_open_video(r, 0, &r->enc));
        LV_TRY(lv_gen_emit_chunk(r, 0, r->units));
        if (progress) {
            double t = lv_gen_now() - r->t_start;
            lv_generate_progress p = {.block = 1, .blocks = 1, .frames_done = r->frames_done,
                                      .frames_total = frames_total, .seconds = t,
                                      .frames_per_second = t > 0 ? (double)r->frames_done / t : 0,
                                      .state_bytes = 0, /* one clip: nothing is carried */
                                      .device = lv_ctx_device(r->ctx)->name,
                                      .text_seconds = r->text_seconds,
                                      .text_encoder_memory = r->text_memory,
                                      .model_memory = lv_ctx_memory_peak(r->ctx)};
            progress(user, &p);
        }
        return LV_OK;
    }
    /* Chunks 0 .. burn-1 are the burn-in: made and committed to the carried state like the
     * others, then dropped. A clip being continued comes next, its blocks committed (not
     * made), then the new blocks. Chunk c's noise stream is c, its position in the video
     * (RoPE) counts every frame before it, the burn-in's and the clip's too (lv_gen_chunk).
     * A stop is honoured after any block. */
    for (int c = first_chunk; c < total; c++) {
        /* every process stops after the same block: a stop reaching any of them counts */
        int stop_now = stop && *stop;
        if (r->sp) LV_TRY(lv_sp_comm_agree_max(r->sp, &stop_now));
        if (o->cfg_partner) LV_TRY(o->cfg_partner->agree_max(o->cfg_partner->user, &stop_now));
        if (stop_now) return lv_gen_interrupted(r, c);
        if (o->live) LV_TRY(lv_gen_live_poll(r, c, warn, user));
        int started;
        LV_TRY(lv_gen_schedule_block(r, c, &started));
        /* a run steered during it: OUT.schedule says at once what was applied so far */
        if (started >= 0 && o->live) LV_TRY(lv_gen_schedule_write(r, c - burn + 1));
        if (started >= 0 && o->on_switch == LV_GEN_SWITCH_RECACHE) LV_TRY(lv_gen_schedule_recache(r, c));
        if (started >= 0 && progress) {
            lv_generate_progress sp = {.phase = LV_GEN_PHASE_SWITCH, .block = c + 1, .blocks = total,
                                       .burn_in_blocks = burn, .frames_done = r->frames_done,
                                       .frames_total = frames_total};
            lv_gen_schedule_report(r, started, &sp);
            progress(user, &sp);
        }
        const gen_chunk k = lv_gen_chunk(r, c);
        bool shown = c >= burn;
        int n = k.frames, position = k.position;
        if (k.kind == GEN_CHUNK_CLIP || !k.made) { /* a clip's block, or a burn-in the state cannot hold */
            if (k.written && r->root && lv_gen_writes_video(r) && !r->enc) LV_TRY(lv_gen_open_video(r, 0, &r->enc));
            if (k.read) LV_TRY(lv_gen_continue_block(r, &k));
            if (k.read) lv_gen_keep_last_frame(r, n);
            if (k.committed) r->blocks_made++, r->work_done += 1; /* one pass */
            if (!k.read && c + 1 < total) continue; /* passed over: nothing to save or report */
            LV_TRY(lv_gen_hls_segment_state(r));
            LV_TRY(lv_gen_save_state(r, c + 1, r->frames_done));
            if (progress) lv_gen_report_progress(r, progress, user, c + 1, total, burn, frames_at_start, frames_total);
            continue;
        }
        const lv_block_recipe *rec = lv_gen_recipe_of(r, c);
        lv_chunk_stage stage = LV_CHUNK_STAGE_NONE;
        lv_chunk_options chunk_opt = {.timesteps = rec->timesteps, .steps = rec->steps, .seed = o->seed,
                                      .cfg_scale = rec->cfg_scale, .sampler = rec->sampler,
                                      .cfg_last_steps = rec->cfg_last_steps,
                                      .warm = rec->warm_start ? r->last_frame : NULL,
                                      .twin = r->twin, .cfg_partner = o->cfg_partner, .step_done = lv_gen_on_step,
                                      .step_user = r, .failed_stage = &stage};
        if (c == 0 && r->cond) { /* --image: the video's first block starts from it (no burn-in then) */
            chunk_opt.cond_frames = r->cond_frames;
            chunk_opt.cond = r->cond;
        }
        lv_status s = lv_longsana_chunk(r->ctx, r->dit, &chunk_opt, c, position, n, r->grid_h, r->grid_w, r->x0);
        if (s != LV_OK) { /* "block 17 of 160 (burn-in), step 2 of 2: the DiT's output ..." */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", lv_last_error());
            /* a stage's message names it ("step 2 of 2: ...") and continues the block's words */
            return lv_error(s, "block %d of %d%s%s%s", c + 1, total, shown ? "" : " (burn-in)",
                            stage != LV_CHUNK_STAGE_NONE ? ", " : ": ", msg);
        }
        lv_gen_schedule_keep_block(r, c, position, n);
        r->blocks_made++;
        r->work_done += lv_gen_recipe_work(r, rec);
        lv_gen_keep_last_frame(r, n);
        if (shown) {
            if (r->root && lv_gen_writes_video(r) && !r->enc) LV_TRY(lv_gen_open_video(r, 0, &r->enc));
            LV_TRY(lv_gen_emit_chunk(r, k.out_first, n));
            LV_TRY(lv_gen_hls_segment_state(r)); /* before this block's resume file replaces the last */
        }
        LV_TRY(lv_gen_save_state(r, c + 1, r->frames_done));
        if (progress) lv_gen_report_progress(r, progress, user, c + 1, total, burn, frames_at_start, frames_total);
    }
    lv_gen_live_after(r, warn, user);
    LV_TRY(lv_gen_schedule_write(r, r->chunks));
    /* resumed with every block made (killed while closing): say so all the same */
    if (progress && first_chunk >= total)
        lv_gen_report_progress(r, progress, user, total, total, burn, frames_at_start, frames_total);
    return LV_OK;
}

lv_status lv_generate_check_schedule(const lv_generate_options *opt_in) {
    if (!opt_in) return lv_error(LV_ERR_INVALID, "lv_generate_check_schedule: options are NULL");
    if ((!opt_in->schedule || opt_in->schedule_count <= 0) && !opt_in->live) return LV_OK;
    LV_TRY(lv_gen_check_options(opt_in));
    gen_run r;
    memset(&r, 0, sizeof r);
    LV_TRY(lv_gen_model_open(opt_in->model_path, &r.m));
    lv_status s = lv_gen_resolve_options(opt_in, &r);
    if (s == LV_OK) s = lv_gen_resolve_schedule(&r);
    run_free(&r);
    return s;
}

lv_status lv_generate(const lv_generate_options *opt_in, lv_generate_callback progress,
                      void (*warn)(void *user, const char *message), void *user,
                      volatile sig_atomic_t *stop) {
    if (!opt_in)
        return lv_error(LV_ERR_INVALID, "lv_generate: options are NULL (lv_generate_options_default makes them)");
    LV_TRY(lv_gen_check_options(opt_in));
    gen_run r;
    memset(&r, 0, sizeof r);
    LV_TRY(lv_gen_model_open(opt_in->model_path, &r.m));
    lv_status s = run(&r, opt_in, progress, warn, user, stop);
    s = lv_gen_close_output(&r, s);
    /* finished: nothing to resume (a plan alone finished nothing: an earlier run's state stays) */
    if (s == LV_OK && r.root && r.state_path[0] && !opt_in->plan_only) {
        remove(r.state_path);
        if (lv_gen_hls_output(&r)) {
            char seg[sizeof r.state_path + 16];
            lv_gen_segment_state_path(&r, seg, sizeof seg);
            remove(seg);
        }
    }
    /* stopped while encoding the prompt: nothing is made, and nothing is left (as it says) */
    if (s == LV_ERR_INTERRUPTED && r.wrote_start_state && r.stopped_in_text) remove(r.state_path);
    /* a start that failed leaves nothing: not even the resume file it began with */
    if (s != LV_OK && s != LV_ERR_INTERRUPTED && r.wrote_start_state && r.blocks_made == 0) remove(r.state_path);
    run_free(&r);
    return s;
}

lv_status lv_generate_check(const lv_generate_options *opt, bool *bad_value) {
    if (bad_value) *bad_value = false;
    if (!opt) return lv_error(LV_ERR_INVALID, "lv_generate_check: options are NULL");
    lv_status s = lv_gen_check_options(opt);
    if (s != LV_OK) {
        if (bad_value) *bad_value = true;
        return s;
    }
    gen_run *r = calloc(1, sizeof *r);
    if (!r) return lv_error(LV_ERR_NOMEM, "out of host memory");
    s = lv_gen_model_open(opt->model_path, &r->m);
    if (s == LV_OK && (s = lv_gen_resolve_options(opt, r)) != LV_OK && bad_value) *bad_value = true;
    /* an image that cannot be read is a bad value too: the command line names it */
    if (s == LV_OK && (s = lv_gen_prepare_image(r, NULL, NULL)) != LV_OK && bad_value) *bad_value = true;
    run_free(r);
    free(r);
    return s;
}
