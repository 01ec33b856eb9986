/* CFG's twin: the unconditional passes on a second context and thread (lv_dit_twin), when
 * it pays, with the texts and the carried state of the main DiT. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generate_run.h"

/* The CFG twin pays when the unconditional passes can run on a core of their own: a CPU
 * device whose kernels run inline on lavapipe's queue thread (cpu_threads 0), two cores
 * or more, block-by-block sampling with some CFG. Elsewhere it only doubles the memory.
 * LONGVK_PARALLEL_CFG=on|off replaces that rule (parallel_cfg -1 only): the cores may be
 * another program's, as when CTest runs two tests at once on two cores. */
bool lv_gen_use_twin(const gen_run *r, int cpu_threads) {
    if (r->o.parallel_cfg == 0 || !r->uncond || r->o.sampler != LV_GEN_LONGSANA) return false;
    if (r->o.sp_bands > 0 || r->sp || r->o.cfg_partner) return false; /* check_options */
    if (r->o.parallel_cfg == 1) return true;
    const char *env = lv_env_str("LONGVK_PARALLEL_CFG");
    if (env && !strcmp(env, "on")) return true;
    if (env && !strcmp(env, "off")) return false;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cpu_threads == 0 && cores >= 2 && lv_ctx_device(r->ctx)->type == LV_DEVICE_CPU;
}

/* Text slot 0: the prompt; slot 1, when some block uses CFG: the negative prompt. */
lv_status lv_gen_set_texts(const gen_run *r, lv_ctx *ctx, lv_dit *dit) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    LV_TRY(lv_dit_set_text(ctx, dit, 0, r->y, r->text_len, r->mask));
    if (!r->uncond) return LV_OK;
    return lv_dit_set_text(ctx, dit, 1, r->y + (size_t)r->text_len * cfg->caption_channels, r->text_len,
                           r->mask + r->text_len);
}

lv_status lv_gen_twin_open(gen_run *r, const lv_ctx_options *copt, const lv_dit_options *dopt) {
    LV_TRY(lv_dit_twin_create(copt, r->m.file, dopt, &r->twin));
    return lv_gen_set_texts(r, lv_dit_twin_ctx(r->twin), lv_dit_twin_dit(r->twin));
}

/* After a resume the twin starts from the dit's state. */
lv_status lv_gen_twin_copy_state(gen_run *r, int64_t chunks) {
    if (!lv_dit_carries_state(r->dit) || chunks == 0) return LV_OK;
    float *data = NULL;
    int64_t count = 0;
    lv_status s = lv_dit_state_save(r->ctx, r->dit, &data, &count);
    if (s == LV_OK)
        s = lv_dit_state_load(lv_dit_twin_ctx(r->twin), lv_dit_twin_dit(r->twin), data, count, chunks,
                              lv_gen_frame_tokens(r));
    free(data);
    return s;
}
