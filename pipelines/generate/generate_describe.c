/* What a run will do (lv_generate_describe): the options resolved against the model's card
 * as lv_generate resolves them, without a device. The CLI prints it before the first frame
 * and words its messages by it (a run that cannot resume never says it can). */
#include <stdio.h>
#include <string.h>

#include "generate_run.h"

lv_status lv_generate_describe(const lv_generate_options *opt, lv_generate_description *plan) {
    if (!opt || !plan) return lv_error(LV_ERR_INVALID, "lv_generate_describe: options or plan are NULL");
    memset(plan, 0, sizeof *plan);
    LV_TRY(lv_gen_check_options(opt));
    lv_precision precision;
    LV_TRY(lv_precision_resolve(opt->precision, &precision));
    gen_run r;
    memset(&r, 0, sizeof r);
    LV_TRY(lv_gen_model_open(opt->model_path, &r.m));
    lv_status s = lv_gen_resolve_options(opt, &r);
    if (s == LV_OK) {
        const lv_generate_options *o = &r.o;
        snprintf(plan->model, sizeof plan->model, "%s", r.m.name);
        plan->latent = !r.m.card.pixel;
        plan->resumable = lv_gen_resumable(&r) && (o->output || o->state_path);
        plan->width = o->width;
        plan->height = o->height;
        plan->scale = o->scale;
        /* as run() counts them: a latent model with a VAE writes 4 pixel frames a latent frame, the first alone */
        plan->frames = r.m.card.pixel || !o->vae_path ? r.units : 1 + 4 * (int64_t)(r.units - 1);
        plan->frames_asked = o->frames;
        plan->fps = o->fps;
        plan->burn_in_blocks = o->burn_in_blocks;
        plan->blocks = o->burn_in_blocks + r.chunks;
        plan->block_frames = o->block_frames;
        plan->steps = o->steps;
        plan->cfg_scale = o->cfg_scale;
        plan->seed = o->seed;
        plan->precision = precision;
        plan->sampler = o->sampler;
    }
    lv_gen_model_close(&r.m);
    return s;
}
