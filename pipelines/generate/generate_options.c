/* lv_generate's options: the defaults, what is checked before the model is opened, and
 * their resolution against the model's card (sizes, chunks, recipes, the parts a pipeline
 * folder supplies). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "generate_run.h"
#include "longvk/sampler.h"

void lv_generate_options_default(lv_generate_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->frames = 0;
    opt->seconds = 60;
    opt->scale = 1;
    opt->cfg_scale = -1;
    opt->block_frames = 0;
    opt->cached_blocks = LV_GEN_MODEL_DEFAULT;
    opt->burn_in_blocks = LV_GEN_MODEL_DEFAULT;
    opt->device_index = -1;
    opt->cpu_threads = LV_GEN_CPU_THREADS_AUTO;
    opt->parallel_cfg = -1;
    opt->motion_score = LV_GEN_MODEL_DEFAULT;
    lv_encoder_options_default(&opt->encoder);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* `steps` of a recipe's schedule, spread over it: steps = 2 of [1000, 750, 500, 250] gives
 * [1000, 500]. */
static lv_block_recipe pick_steps(const lv_block_recipe *full, int steps) {
    lv_block_recipe r = *full;
    r.steps = steps;
    for (int i = 0; i < steps; i++) r.timesteps[i] = full->timesteps[(i * full->steps) / steps];
    return r;
}

/* The most frames a run makes (the CLI's --frames limit), and the largest CFG scale: the
 * guided velocity vu + g (v - vu) must stay far from float32's range. */
#define LV_GEN_MAX_FRAMES 10000000
#define LV_GEN_MAX_CFG 1000.0
/* The upscale of a pixel-space model's frames when the caller leaves it to the model. */
#define LV_GEN_PIXEL_SCALE 8

/* What can be checked before the model is opened: every value the caller set, so that a
 * bad one is an error naming it (never a crash, a division by zero or a silent NaN). */
lv_status lv_gen_check_options(const lv_generate_options *o) {
    if ((!o->output || !*o->output) && !o->frame_sink)
        return lv_error(LV_ERR_INVALID, "lv_generate: no output file (-o) and no frame sink");
    if (o->output && !*o->output) return lv_error(LV_ERR_INVALID, "lv_generate: an empty output file name (-o)");
    if (!o->output && o->resume) return lv_error(LV_ERR_INVALID, "lv_generate: --resume needs the output file");
    const struct { const char *name; double v; } reals[] = {
        {"seconds (--seconds)", o->seconds}, {"fps (--fps)", o->fps},
        {"cfg_scale (--cfg-scale)", o->cfg_scale}, {"shift (--shift)", o->shift}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (!isfinite(reals[i].v))
            return lv_error(LV_ERR_INVALID, "lv_generate: %s is %g: it must be a finite number", reals[i].name,
                            reals[i].v);
    if (o->frames > LV_GEN_MAX_FRAMES)
        return lv_error(LV_ERR_INVALID, "lv_generate: %d frames (--frames): at most %d", o->frames, LV_GEN_MAX_FRAMES);
    if (o->frames <= 0 && !(o->seconds > 0))
        return lv_error(LV_ERR_INVALID, "lv_generate: the video needs a length: frames > 0 or seconds > 0 (seconds "
                        "is %g)", o->seconds);
    if (o->fps > 1000) return lv_error(LV_ERR_INVALID, "lv_generate: fps %g (--fps): at most 1000", o->fps);
    if (o->width < 0 || o->width > 8192 || o->height < 0 || o->height > 8192)
        return lv_error(LV_ERR_INVALID, "lv_generate: size %dx%d (-W/-H): each side in [1, 8192], or 0 for the "
                        "model's", o->width, o->height);
    if ((o->scale < 1 || o->scale > 64) && o->scale != LV_GEN_MODEL_DEFAULT)
        return lv_error(LV_ERR_INVALID, "lv_generate: scale %d (--scale): must be in [1, 64], or LV_GEN_MODEL_DEFAULT",
                        o->scale);
    if (o->sampler != LV_GEN_LONGSANA && o->sampler != LV_GEN_EULER && o->sampler != LV_GEN_DPMPP_2M)
        return lv_error(LV_ERR_INVALID, "lv_generate: unknown sampler %d", (int)o->sampler);
    if (o->steps > 1000) return lv_error(LV_ERR_INVALID, "lv_generate: %d steps (--steps): at most 1000", o->steps);
    if (o->cfg_scale > LV_GEN_MAX_CFG)
        return lv_error(LV_ERR_INVALID, "lv_generate: cfg_scale %g (--cfg-scale): at most %g", o->cfg_scale,
                        LV_GEN_MAX_CFG);
    if (o->block_frames > 1024)
        return lv_error(LV_ERR_INVALID, "lv_generate: %d frames per block (--block-frames): at most 1024",
                        o->block_frames);
    if (o->cached_blocks != LV_GEN_MODEL_DEFAULT && o->cached_blocks > 4096)
        return lv_error(LV_ERR_INVALID, "lv_generate: --cached-blocks %d: at most 4096", o->cached_blocks);
    if (o->burn_in_blocks != LV_GEN_MODEL_DEFAULT && (o->burn_in_blocks < 0 || o->burn_in_blocks > LV_CARD_MAX_BURN_IN))
        return lv_error(LV_ERR_INVALID, "lv_generate: --burn-in-blocks %d: must be in [0, %d]", o->burn_in_blocks,
                        LV_CARD_MAX_BURN_IN);
    if (o->device_index < -1) return lv_error(LV_ERR_INVALID, "lv_generate: device %d (-1: automatic)", o->device_index);
    if (o->cpu_threads < LV_GEN_CPU_THREADS_AUTO)
        return lv_error(LV_ERR_INVALID, "lv_generate: cpu_threads %d (LV_GEN_CPU_THREADS_AUTO, -1, 0 or a count)",
                        o->cpu_threads);
    if (o->parallel_cfg < -1 || o->parallel_cfg > 1)
        return lv_error(LV_ERR_INVALID, "lv_generate: parallel_cfg %d (1 on, 0 off, -1 automatic)", o->parallel_cfg);
    if (o->state_path && !*o->state_path) return lv_error(LV_ERR_INVALID, "lv_generate: empty state_path");
    if (o->precision != LV_PRECISION_AUTO && o->precision != LV_PRECISION_F32 && o->precision != LV_PRECISION_F16 &&
        o->precision != LV_PRECISION_BF16)
        return lv_error(LV_ERR_INVALID, "lv_generate: precision %d (LV_PRECISION_AUTO, _F32, _F16 or _BF16)", o->precision);
    if (o->weights_dtype < LV_DIT_WEIGHTS_AS_STORED || o->weights_dtype > LV_DIT_WEIGHTS_Q4_K)
        return lv_error(LV_ERR_INVALID, "lv_generate: weights_dtype %d (lv_dit_weights)", o->weights_dtype);
    if (o->text_weights_dtype < LV_DIT_WEIGHTS_AS_STORED || o->text_weights_dtype > LV_DIT_WEIGHTS_Q4_K)
        return lv_error(LV_ERR_INVALID, "lv_generate: text_weights_dtype %d (lv_dit_weights)", o->text_weights_dtype);
    if (o->text_softcap != 0 && o->text_softcap != 1)
        return lv_error(LV_ERR_INVALID, "lv_generate: text_softcap %d (0 off, 1 the config's)", o->text_softcap);
    if (o->motion_score != LV_GEN_MODEL_DEFAULT && (o->motion_score < 0 || o->motion_score > 1000))
        return lv_error(LV_ERR_INVALID, "lv_generate: motion score %d (--motion-score): must be in [0, 1000]",
                        o->motion_score);
    if (o->image_path && !*o->image_path) return lv_error(LV_ERR_INVALID, "lv_generate: an empty image path (--image)");
    if (o->text_embeds_out && !*o->text_embeds_out)
        return lv_error(LV_ERR_INVALID, "lv_generate: empty text_embeds_out");
    if (o->sp_bands < 0 || o->sp_bands > 4096)
        return lv_error(LV_ERR_INVALID, "lv_generate: %d sequence-parallel bands (--sp-emulate): 1 to 4096, or 0 "
                        "for none", o->sp_bands);
    if (o->sp_bands > 0 && o->sp_comm)
        return lv_error(LV_ERR_INVALID, "lv_generate: sp_bands (--sp-emulate) and sp_comm (--sequence-parallel) "
                        "both set: one or the other");
    if (o->cfg_partner && (!o->cfg_partner->swap || !o->cfg_partner->share || !o->cfg_partner->agree_max))
        return lv_error(LV_ERR_INVALID, "lv_generate: a CFG partner without its swap, share or agree_max");
    if (o->cfg_partner && o->parallel_cfg == 1)
        return lv_error(LV_ERR_INVALID, "lv_generate: --parallel-cfg on with --cfg-parallel: the twin or the partner "
                        "process runs the unconditional passes, not both");
    if ((o->sp_bands > 0 || o->sp_comm) && o->parallel_cfg == 1)
        return lv_error(LV_ERR_INVALID, "lv_generate: --parallel-cfg on with sequence parallelism: CFG's twin is "
                        "not split into bands (leave --parallel-cfg out: it is off with bands)");
    LV_TRY(lv_gen_check_vae_tiles(o));
    return LV_OK;
}

/* The largest chunk (a block, or the single clip) against the sampler's limit
 * (LV_CHUNK_MAX_POSITIONS), before any work: what to lower is named. */
static lv_status check_positions(const gen_run *r) {
    const lv_generate_options *o = &r->o;
    /* a single clip is every frame at once; of blocks the first is the largest (the remainder's) */
    int64_t most = o->sampler != LV_GEN_LONGSANA ? r->units : lv_generate_chunk_frames(r->units, o->block_frames, 0);
    int64_t positions = most * r->grid_h * r->grid_w;
    if (positions <= LV_CHUNK_MAX_POSITIONS) return LV_OK;
    return lv_error(LV_ERR_INVALID, "%s of %lld frames of %dx%d (%dx%d %s) is %lld positions, over the sampler's "
                    "limit of %lld per chunk: lower -W/-H%s",
                    o->sampler != LV_GEN_LONGSANA ? "a single clip" : "a block",
                    (long long)most, o->width, o->height, r->grid_w, r->grid_h, r->m.card.pixel ? "pixels" : "latents",
                    (long long)positions, (long long)LV_CHUNK_MAX_POSITIONS,
                    o->sampler != LV_GEN_LONGSANA ? " or --frames (or use --sampler longsana: a block at a time)"
                                                  : " or --block-frames");
}

/* The text and the VAE: a pixel-space model has its own vocabulary; a latent model takes
 * its text encoder, tokenizer and VAE from a pipeline folder where they are not given. For
 * block-wise runs and single clips alike. */
static lv_status resolve_parts(gen_run *r) {
    const lv_model_card *card = &r->m.card;
    lv_generate_options *o = &r->o;
    if (card->pixel && (o->text_encoder_path || o->tokenizer_path))
        return lv_error(LV_ERR_INVALID, "%s has its own vocabulary: a text encoder (--text-encoder, --tokenizer) "
                        "is for latent-space models such as SANA-Video", r->m.name);
    if (!card->pixel) {
        /* a pipeline folder supplies what is not given */
        const lv_pipeline_dir *parts = &r->m.parts;
        if (!o->text_encoder_path && r->m.pipeline && parts->text_encoder[0]) o->text_encoder_path = parts->text_encoder;
        if (!o->tokenizer_path && r->m.pipeline && parts->tokenizer[0]) o->tokenizer_path = parts->tokenizer;
        if (!o->vae_path && r->m.pipeline && parts->vae[0]) o->vae_path = parts->vae;
        if (o->vae_path) { /* a folder (a pipeline's vae/) as --model takes one: its weights file */
            LV_TRY(lv_vae_weights_file(o->vae_path, r->vae_file, sizeof r->vae_file));
            o->vae_path = r->vae_file;
        }
        /* a .npy output is the latents themselves: a VAE then serves only --image / --continue's
         * encoder (generate_vae_encode.c), nothing is decoded */
        if (o->vae_path && o->output && ends_with(o->output, ".npy")) {
            r->encoder_vae = o->vae_path;
            o->vae_path = NULL;
        }
        r->use_encoder = !o->text_embeds_path && o->text_encoder_path;
        if (!o->text_embeds_path && !o->text_encoder_path)
            return lv_error(LV_ERR_INVALID, "%s works in a VAE's latent space and has no vocabulary: give its text "
                            "encoder (--text-encoder DIR, or a diffusers pipeline folder as --model) or prompt "
                            "embeddings (--text-embeds)", r->m.name);
        /* a video through the VAE resumes (generate_vae_history.c); a .npy of latents is written
         * whole at the end, so an interrupted one leaves nothing to continue */
        if (o->resume && !o->vae_path)
            return lv_error(LV_ERR_UNSUPPORTED, "--resume: a latent model's .npy output (its latents) is written "
                            "only at the end, so an interrupted run leaves nothing to resume: write a video through "
                            "the VAE (--vae, or a pipeline folder's vae/) to resume");
        if (!o->vae_path && (!o->output || !ends_with(o->output, ".npy")))
            return lv_error(LV_ERR_INVALID, "without --vae a latent model's output is its latents: "
                            "give an output ending in .npy, or a VAE with --vae%s",
                            o->output ? "" : " (a frame sink needs frames)");
    }
    if (o->vae_tiles == LV_GEN_VAE_TILES_FIXED && (card->pixel || !o->vae_path))
        return lv_error(LV_ERR_INVALID, "--vae-tiles %dx%d: %s decodes no latents (%s)", o->vae_tile_h, o->vae_tile_w,
                        r->m.name, card->pixel ? "a pixel-space model: its frames are its output" : "no --vae");
    return LV_OK;
}

lv_status lv_gen_resolve_options(const lv_generate_options *in, gen_run *r) {
    const lv_model_card *card = &r->m.card;
    lv_generate_options *o = &r->o;
    *o = *in;
    if (o->fps <= 0) o->fps = card->fps;
    if (o->frames <= 0) {
        if (o->seconds * o->fps > LV_GEN_MAX_FRAMES)
            return lv_error(LV_ERR_INVALID, "seconds %g at %g fps: more than %d frames", o->seconds, o->fps,
                            LV_GEN_MAX_FRAMES);
        o->frames = (int)lround(o->seconds * o->fps);
    }
    if (o->frames < 1)
        return lv_error(LV_ERR_INVALID, "the video needs at least one frame (%g s at %g fps is none)", o->seconds,
                        o->fps);
    /* a pixel-space model's frames are tiny (the embedded one's 32 x 32): shown 8 times larger;
     * a latent model's are the VAE's full size (832 x 480): as they are */
    if (o->scale == LV_GEN_MODEL_DEFAULT) o->scale = card->pixel ? LV_GEN_PIXEL_SCALE : 1;
    if (!o->height) o->height = card->height;
    if (!o->width) o->width = card->width;
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    int stride = card->pixel ? 1 : 8; /* Wan2.1 VAE: 8 x 8 pixels per latent */
    if (o->height % (stride * cfg->patch[1]) || o->width % (stride * cfg->patch[2]))
        return lv_error(LV_ERR_INVALID, "-W/-H %dx%d must be multiples of %dx%d for this model",
                        o->width, o->height, stride * cfg->patch[2], stride * cfg->patch[1]);
    r->grid_h = o->height / stride;
    r->grid_w = o->width / stride;
    /* limits a run would meet only at its first block, after the model's upload: said now */
    int rows = r->grid_h / cfg->patch[1];
    if (o->sp_bands > rows)
        return lv_error(LV_ERR_INVALID, "%d sequence-parallel bands (--sp-emulate) but a frame of %dx%d has %d token "
                        "rows (%s height %d / patch %d), one band needs one at least: at most %d bands, or a larger "
                        "-H", o->sp_bands, o->width, o->height, rows, card->pixel ? "pixel" : "latent", r->grid_h,
                        cfg->patch[1], rows);
    /* latent models: pixel frame 0 alone, then 4 pixel frames per latent frame */
    r->units = card->pixel ? o->frames : 1 + (o->frames - 1 + 3) / 4;
    if (o->block_frames <= 0) o->block_frames = card->block_frames;
    LV_TRY(check_positions(r));
    if (o->cached_blocks == LV_GEN_MODEL_DEFAULT) o->cached_blocks = card->cached_blocks;
    else if (o->cached_blocks < 0) o->cached_blocks = LV_CACHED_ALL;
    if (o->burn_in_blocks == LV_GEN_MODEL_DEFAULT) o->burn_in_blocks = card->burn_in_blocks;
    /* without a carried state (or in a single clip) no block sees another: nothing to settle */
    if (o->cached_blocks == 0 || o->sampler != LV_GEN_LONGSANA) o->burn_in_blocks = 0;
    LV_TRY(lv_gen_image_check(r, in));
    if (o->image_path) o->burn_in_blocks = 0; /* the image is the first frame: nothing before it */
    if (o->sampler != LV_GEN_LONGSANA) {
        /* the base model's single clip: every frame at once, its own schedule */
        if (o->steps <= 0) o->steps = 50;
        if (o->shift <= 0) o->shift = 8.0;
        if (o->cfg_scale < 0) o->cfg_scale = 6.0;
        if (o->resume)
            return lv_error(LV_ERR_UNSUPPORTED, "--resume: a single clip (--sampler euler|dpm++2m) cannot resume; "
                            "--resume works with block-wise generation (--sampler longsana) only");
        if (o->continue_path || o->continue_frames) return lv_gen_resolve_continue(r); /* refused */
        o->block_frames = r->units; /* one chunk */
        r->chunks = 1;
        r->uncond = o->cfg_scale != 1.0;
        return resolve_parts(r);
    }
    r->chunks = lv_generate_chunk_count(r->units, o->block_frames);
    const lv_block_recipe *later = &card->later_blocks;
    if (o->steps <= 0) o->steps = later->steps;
    if (o->steps > later->steps)
        return lv_error(LV_ERR_INVALID, "--steps %d: this model samples with at most %d steps per chunk",
                        o->steps, later->steps);
    if (o->cfg_scale < 0) o->cfg_scale = later->cfg_scale;
    r->later = pick_steps(later, o->steps);
    r->later.cfg_scale = o->cfg_scale;
    r->first = card->first_block; /* --steps is for the later blocks; --cfg-scale for all */
    if (in->cfg_scale >= 0) r->first.cfg_scale = in->cfg_scale;
    r->uncond = r->first.cfg_scale != 1.0 || r->later.cfg_scale != 1.0;
    LV_TRY(resolve_parts(r));
    return lv_gen_resolve_continue(r);
}

int lv_generate_auto_cpu_threads(int64_t tokens_per_block, int hidden) {
    return (double)tokens_per_block * hidden * hidden <= (double)(1 << 24) ? 0 : -1;
}
