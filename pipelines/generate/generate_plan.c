/* The run's device-memory plan (pipelines/generate/README.md, "The device-memory plan"):
 * made once the device is known, before anything is uploaded, from the model's config and
 * the run's settings; a run that would not fit the device's budget is refused, naming the
 * settings that would make it fit. */
#include <stdio.h>
#include <string.h>

#include "generate_run.h"

/* The largest pass: a chunk as lv_gen_alloc_buffers sizes x0 (the first block takes the
 * remainder; a burn-in or a continued clip's first block may be longer), or the whole clip. */
static int largest_chunk(const gen_run *r, int block_frames) {
    if (r->o.sampler != LV_GEN_LONGSANA) return r->units;
    int shown = lv_generate_chunk_frames(r->units, block_frames, 0);
    int maxf = r->o.burn_in_blocks > 0 && block_frames > shown ? block_frames : shown;
    int clip = r->clip.frames ? lv_generate_chunk_frames(r->clip.frames, block_frames, 0) : 0;
    return clip > maxf ? clip : maxf;
}

/* The DiT's part of p under a weights rule, an activation precision and a block length, and
 * the peak again; the parts that do not depend on them (text, VAE, device) stay as p has
 * them. p->twin nonzero: CFG's twin runs (sized here). */
/* The VAE decoder this process makes (a latent model's, where it decodes), its activations at
 * `precision` (f16 halves its history and work buffers: lv_vae_activation_dtype); 0 if none. */
static lv_status plan_vae(const gen_run *r, lv_precision precision, uint64_t *vae) {
    *vae = 0;
    const bool decodes = r->root || (r->sp && (!r->o.cfg_partner || r->o.cfg_partner->role == LV_CFG_COND));
    if (!r->o.vae_path || r->m.card.pixel || !decodes) return LV_OK;
    lv_weights *w = NULL;
    LV_TRY(lv_weights_open(r->o.vae_path, &w));
    lv_status s = lv_vae_weights_memory(w, r->grid_h, r->grid_w, precision, vae);
    lv_weights_close(w);
    return s;
}

static lv_status plan_dit(const gen_run *r, const lv_dit_plan_input *device, int weights, lv_precision precision,
                          int block_frames, lv_generate_plan *p) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    p->weights_dtype = weights;
    p->precision = precision;
    p->chunk_frames = largest_chunk(r, block_frames);
    lv_dit_plan_input in = *device;
    in.weights = (lv_dit_weights)weights;
    in.stored = p->stored;
    in.precision = precision;
    in.frames = p->chunk_frames;
    in.height = p->grid_h;
    in.width = p->grid_w;
    in.text_tokens = p->text_tokens;
    in.text_slots = p->text_slots;
    in.cached_blocks = r->o.cached_blocks;
    LV_TRY(lv_dit_memory_plan_of(cfg, &in, &p->dit));
    if (p->vae) LV_TRY(plan_vae(r, precision, &p->vae)); /* a suggested precision changes it too */
    if (p->twin) p->twin = p->dit.passes;
    const uint64_t with_dit = lv_gen_plan_dit_phase(p);
    p->peak = p->text > with_dit ? p->text : with_dit;
    return LV_OK;
}

/* In the run's order: the DiT's texts set (lv_dit_set_text's peak); the twin's made and set
 * beside the DiT (bounded by the DiT's passes and a set_text); the VAE made; then the passes
 * of both DiTs with the VAE's buffers held from the first block's decode on. */
uint64_t lv_gen_plan_dit_phase(const lv_generate_plan *p) {
    uint64_t phase = p->dit.set_text;
    if (p->twin && p->dit.passes + p->dit.set_text > phase) phase = p->dit.passes + p->dit.set_text;
    const uint64_t passes = p->dit.passes + p->twin + p->vae;
    return passes > phase ? passes : phase;
}

lv_status lv_gen_plan(gen_run *r, bool twin, lv_generate_plan *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "%s", lv_ctx_device(r->ctx)->name);
    p->budget = lv_ctx_memory_budget(r->ctx);
    p->grid_h = r->grid_h;
    p->grid_w = r->grid_w;
    p->text_tokens = r->text_len;
    p->text_slots = r->uncond ? 2 : 1;
    if (r->nsw) {
        p->text_prompts = r->ntexts;
        p->text_rows_host = lv_gen_schedule_rows_bytes(r);
    }
    const lv_weight *qkv = lv_sana_file_tensor(r->m.file, "blocks.0.attn.qkv.weight");
    p->stored = qkv ? qkv->dtype : LV_F32;
    const uint64_t align = lv_ctx_alloc_alignment(r->ctx);
    if (r->use_encoder && r->root) p->text = lv_text_encoder_memory_plan(r->text, align);
    LV_TRY(plan_vae(r, lv_ctx_precision(r->ctx), &p->vae));
    p->twin = twin; /* a flag until plan_dit sizes it */
    lv_dit_plan_input device = {0};
    lv_dit_plan_device(r->ctx, &device);
    return plan_dit(r, &device, r->o.weights_dtype, lv_ctx_precision(r->ctx), r->o.block_frames, p);
}

/* "5.21 GiB" or "12.7 MiB" */
typedef struct bytes_text {
    char s[32];
} bytes_text;
static bytes_text human(uint64_t b) {
    bytes_text t;
    if (b >= (1ull << 30)) snprintf(t.s, sizeof t.s, "%.2f GiB", (double)b / (double)(1ull << 30));
    else snprintf(t.s, sizeof t.s, "%.1f MiB", (double)b / (double)(1ull << 20));
    return t;
}

/* Appends ", --flag VALUE (peak X)" for a setting that fits. */
static void suggest(char *buf, size_t size, const char *what, const lv_generate_plan *p) {
    size_t n = strlen(buf);
    if (n < size) snprintf(buf + n, size - n, "%s%s (peak %s)", n ? ", " : "", what, human(p->peak).s);
}

/* "FLAG" or "FLAG with --text-weights-dtype q8_0" into buf */
static const char *flag_with(char *buf, size_t size, const char *with_text, const char *flag) {
    snprintf(buf, size, "%s%s%s", flag, with_text[0] ? " with " : "", with_text);
    return buf;
}

lv_status lv_gen_plan_check(const gen_run *r, const lv_generate_plan *plan) {
    if (plan->peak <= plan->budget) return LV_OK;
    /* --vae-tiles auto or HxW decodes in tiles sized to what the run leaves (generate_vae_tiles.c,
     * which refuses at the first block when even the smallest tiles do not fit): the untiled VAE
     * counted here need not fit then, the rest must */
    if (r->o.vae_tiles != LV_GEN_VAE_TILES_OFF && plan->vae) {
        lv_generate_plan p = *plan;
        p.vae = 0;
        uint64_t dit = lv_gen_plan_dit_phase(&p);
        if ((p.text > dit ? p.text : dit) <= p.budget) return LV_OK;
    }
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    lv_dit_plan_input device = {0};
    lv_dit_plan_device(r->ctx, &device);
    char fits[768] = "";
    /* the text encoder's phase over the budget: its matrices quantized (q8_0, else q4_K), alone
     * when that is enough, else beside each of the DiT's settings below */
    lv_generate_plan base = *plan;
    char with_text[48] = "";
    if (r->text && plan->text > plan->budget && r->o.text_weights_dtype < LV_DIT_WEIGHTS_Q8_0) {
        const lv_text_weights tq[2] = {LV_TEXT_WEIGHTS_Q8_0, LV_TEXT_WEIGHTS_Q4_K};
        for (int i = 0; i < 2 && !with_text[0]; i++) {
            uint64_t t = lv_text_encoder_memory_plan_as(r->text, lv_ctx_alloc_alignment(r->ctx), tq[i]);
            if (!t || t > plan->budget) continue;
            snprintf(with_text, sizeof with_text, "--text-weights-dtype %s", i ? "q4_K" : "q8_0");
            base.text = t;
            const uint64_t dit = lv_gen_plan_dit_phase(&base);
            base.peak = t > dit ? t : dit;
        }
        /* the VAE in tiles (above) need not fit */
        lv_generate_plan tiled = base;
        if (r->o.vae_tiles != LV_GEN_VAE_TILES_OFF) tiled.vae = 0;
        const uint64_t tiled_dit = lv_gen_plan_dit_phase(&tiled);
        tiled.peak = base.text > tiled_dit ? base.text : tiled_dit;
        if (with_text[0] && tiled.peak <= base.budget) {
            suggest(fits, sizeof fits, with_text, &tiled);
            with_text[0] = 0; /* one setting is enough: the DiT's need not be shrunk too */
        }
    }
    char what[160];
    if (!fits[0]) { /* the DiT's settings, where the text encoder alone was not enough */
        /* one setting at a time, then the two together; the matrix weights only where they shrink */
        const int quant[2] = {LV_DIT_WEIGHTS_Q8_0, LV_DIT_WEIGHTS_Q4_K};
        const char *quant_flag[2] = {"--weights-dtype q8_0", "--weights-dtype q4_K"};
        const bool f32_acts = plan->precision == LV_PRECISION_F32;
        bool quant_fits = false;
        for (int i = 0; i < 2 && !quant_fits; i++) {
            if (plan->weights_dtype == quant[i] || (i == 0 && plan->weights_dtype == LV_DIT_WEIGHTS_Q4_K)) continue;
            lv_generate_plan p = base;
            if (plan_dit(r, &device, quant[i], plan->precision, r->o.block_frames, &p) == LV_OK && p.peak <= p.budget) {
                suggest(fits, sizeof fits, flag_with(what, sizeof what, with_text, quant_flag[i]), &p);
                quant_fits = true;
            }
        }
        if (f32_acts) {
            lv_generate_plan p = base;
            if (plan_dit(r, &device, plan->weights_dtype, LV_PRECISION_F16, r->o.block_frames, &p) == LV_OK &&
                p.peak <= p.budget)
                suggest(fits, sizeof fits, flag_with(what, sizeof what, with_text, "--precision f16"), &p);
            else if (!quant_fits && plan->weights_dtype != LV_DIT_WEIGHTS_Q4_K)
                for (int i = 0; i < 2; i++) {
                    p = base;
                    if (plan_dit(r, &device, quant[i], LV_PRECISION_F16, r->o.block_frames, &p) == LV_OK &&
                        p.peak <= p.budget) {
                        char both[64];
                        snprintf(both, sizeof both, "%s with --precision f16", quant_flag[i]);
                        suggest(fits, sizeof fits, flag_with(what, sizeof what, with_text, both), &p);
                        break;
                    }
                }
        }
        /* CFG's twin doubles the DiT: without it the unconditional passes take turns */
        if (plan->twin) {
            lv_generate_plan p = base;
            p.twin = 0;
            if (plan_dit(r, &device, plan->weights_dtype, plan->precision, r->o.block_frames, &p) == LV_OK &&
                p.peak <= p.budget)
                suggest(fits, sizeof fits, flag_with(what, sizeof what, with_text, "--parallel-cfg off"), &p);
        }
        /* the longest block that fits, in the model's frames */
        if (r->o.sampler == LV_GEN_LONGSANA)
            for (int b = r->o.block_frames - cfg->patch[0]; b >= cfg->patch[0]; b -= cfg->patch[0]) {
                lv_generate_plan p = base;
                if (plan_dit(r, &device, plan->weights_dtype, plan->precision, b, &p) != LV_OK) break;
                if (p.peak <= p.budget) {
                    char flag[48];
                    snprintf(flag, sizeof flag, "--block-frames %d", b);
                    suggest(fits, sizeof fits, flag_with(what, sizeof what, with_text, flag), &p);
                    break;
                }
            }
    }
    const uint64_t with_dit = lv_gen_plan_dit_phase(plan);
    return lv_error(LV_ERR_NOMEM,
                    "the run would hold %s of device memory at its peak and the device '%s' has %s%s (%s: text "
                    "encoder %s; DiT %s: weights %s, state %s, the rest for a %d-frame block %s%s; VAE decoder %s; "
                    "`longvk generate --dry-run` shows the plan); nothing was uploaded. %s%s",
                    human(plan->peak).s, plan->device, human(plan->budget).s,
                    lv_env_str("LONGVK_DEVICE_BUDGET") ? " (LONGVK_DEVICE_BUDGET)" : "",
                    plan->text > with_dit ? "the text encoder's phase" : "the DiT's phase", human(plan->text).s,
                    human(plan->dit.passes).s, human(plan->dit.weights).s, human(plan->dit.state).s, plan->chunk_frames,
                    human(plan->dit.passes - plan->dit.weights - plan->dit.state).s,
                    plan->twin ? "; CFG's twin the same again" : "", human(plan->vae).s,
                    fits[0] ? "It would fit with " : "No single setting makes it fit: a device with more memory is needed",
                    fits);
}
