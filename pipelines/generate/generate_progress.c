/* Progress reports and the ETA: blocks weighed by their forward passes, at the time per
 * pass measured since the warm-up. */
#include "generate_run.h"

/* Forward passes a block of this recipe takes: one per step, one more per step with CFG
 * (the unconditional pass, on the twin or not: about as long either way on a CPU), and the
 * write pass. What the ETA weighs blocks by: the first block takes five times the passes
 * of a later one with the default model. */
double lv_gen_recipe_work(const gen_run *r, const lv_block_recipe *rec) {
    int cfg_steps = 0;
    if (rec->cfg_scale != 1.0)
        cfg_steps = rec->cfg_last_steps > 0 && rec->cfg_last_steps < rec->steps ? rec->cfg_last_steps : rec->steps;
    return rec->steps + cfg_steps + (lv_dit_carries_state(r->dit) ? 1 : 0);
}

/* Passes of blocks [from, to). */
static double work_of(const gen_run *r, int from, int to) {
    /* a continued clip's blocks: one write pass each where committed; a burn-in passed over: none */
    double clip = 0;
    for (int pre = r->clip.frames ? r->o.burn_in_blocks + r->clip.chunks : 0; from < to && from < pre; from++) {
        gen_chunk k = lv_gen_chunk(r, from);
        clip += k.made ? lv_gen_recipe_work(r, from == 0 ? &r->first : &r->later) : k.committed;
    }
    if (from >= to) return clip;
    /* the first recipe: block 0 (with --image it continues the picture instead), or every
     * block when no state is carried (lv_gen_recipe_of) */
    int firsts = !lv_dit_carries_state(r->dit) ? to - from : from == 0;
    if (from == 0 && r->cond) firsts--;
    return clip + firsts * lv_gen_recipe_work(r, &r->first) + (to - from - firsts) * lv_gen_recipe_work(r, &r->later);
}

/* lv_chunk_options.step_done: the end of the first step this run makes is the end of the
 * warm-up (every kernel compiled): the ETA's rate is measured from there. */
void lv_gen_on_step(void *user, int step, int passes) {
    (void)step;
    gen_run *r = user;
    if (r->warm_end > 0) return;
    r->warm_end = lv_gen_now();
    r->warm_work = passes;
}

/* Seconds left for blocks [next, total): the time per pass since the warm-up, times the
 * passes left. */
double lv_gen_eta_seconds(const gen_run *r, int next, int total) {
    double t = lv_gen_now(), rate = 0;
    if (r->warm_end > 0 && r->work_done > r->warm_work && t > r->warm_end)
        rate = (t - r->warm_end) / (r->work_done - r->warm_work);
    else if (r->work_done > 0)
        rate = (t - r->t_start) / r->work_done;
    return rate * work_of(r, next, total);
}

void lv_gen_report_progress(gen_run *r, lv_generate_callback progress, void *user, int block, int blocks,
                            int burn, int64_t frames_at_start, int64_t frames_total) {
    double t = lv_gen_now() - r->t_start;
    lv_generate_progress p = {
        .block = block, .blocks = blocks, .burn_in_blocks = burn, .frames_done = r->frames_done,
        .frames_total = frames_total, .seconds = t,
        .frames_per_second = t > 0 ? (double)(r->frames_done - frames_at_start) / t : 0,
        .eta_seconds = lv_gen_eta_seconds(r, block, blocks),
        .state_bytes = lv_dit_carries_state(r->dit) ? lv_dit_state_bytes(r->dit) : 0,
        .device = lv_ctx_device(r->ctx)->name,
        .frames_resumed = frames_at_start,
        .continue_blocks = r->clip.chunks,
        .text_seconds = r->text_seconds,
        .text_encoder_memory = r->text_memory,
        .model_memory = lv_ctx_memory_peak(r->ctx)};
    progress(user, &p);
}
