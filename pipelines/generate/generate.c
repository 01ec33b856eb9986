/* Long-video generation: LongSANA chunk after chunk over the carried state, each finished
 * chunk straight to the encoder and a resume file at every block boundary (see
 * longvk/generate.h). Host memory holds one chunk; device memory holds the weights, the
 * fixed-size carried state and one pass's activations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "generate_internal.h"
#include "longvk/dit.h"
#include "longvk/npy.h"
#include "longvk/sampler.h"
#include "longvk/sp_comm.h"
#include "longvk/vae.h"
#include "longvk/weights.h"

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

static double now(void) {
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

/* Text: the prompt through the card's tokenizer and the model's word tables. What the
 * tokenizer ignores (words not in the vocabulary, digits, emoji, words past the model's
 * text length) is said, in the prompt's own characters. */
static lv_status embed_prompt(const lv_gen_model *m, const char *what, const char *prompt, float *y, float *mask,
                              void (*warn)(void *, const char *), void *user) {
    char ignored[1024];
    LV_TRY(lv_text_tables_embed(&m->text, &m->card, prompt, y, mask, ignored, sizeof ignored));
    if (ignored[0] && warn) {
        char msg[1400];
        snprintf(msg, sizeof msg, "%s: %s%s", what, ignored,
                 strstr(ignored, "not in the vocabulary") ? " (`longvk info` lists the vocabulary)" : "");
        warn(user, msg);
    }
    return LV_OK;
}

/* [3, F, h, w] -> [3, F, h*s, w*s], bilinear with edge clamping (half-pixel centres). */
static void upscale(const float *in, int F, int h, int w, int s, float *out) {
    int H = h * s, W = w * s;
    for (int c = 0; c < 3; c++)
        for (int f = 0; f < F; f++) {
            const float *src = in + ((size_t)c * F + f) * h * w;
            float *dst = out + ((size_t)c * F + f) * H * W;
            for (int y = 0; y < H; y++) {
                double sy = (y + 0.5) / s - 0.5;
                int y0 = (int)floor(sy);
                double fy = sy - y0;
                int ya = y0 < 0 ? 0 : y0, yb = y0 + 1 >= h ? h - 1 : y0 + 1;
                if (ya > h - 1) ya = h - 1;
                for (int x = 0; x < W; x++) {
                    double sx = (x + 0.5) / s - 0.5;
                    int x0 = (int)floor(sx);
                    double fx = sx - x0;
                    int xa = x0 < 0 ? 0 : x0, xb = x0 + 1 >= w ? w - 1 : x0 + 1;
                    if (xa > w - 1) xa = w - 1;
                    double top = src[ya * w + xa] * (1 - fx) + src[ya * w + xb] * fx;
                    double bot = src[yb * w + xa] * (1 - fx) + src[yb * w + xb] * fx;
                    dst[y * W + x] = (float)(top * (1 - fy) + bot * fy);
                }
            }
        }
}

/* One generation: the resolved options and everything it holds. */
typedef struct gen_run {
    lv_generate_options o;
    lv_gen_model m;
    char state_path[4096];
    int grid_h, grid_w;      /* the model's frame size: pixels, or latents for latent models */
    int units;               /* model frames to make: pixel frames, or latent frames */
    int chunks;              /* chunks of the video (the burn-in not counted) */
    int text_len;
    float *y, *mask;         /* [2, L, caption] and [2, L]: prompt, negative prompt */
    bool use_encoder;        /* the text goes through a Gemma-2 encoder (latent models) */
    lv_gen_text text;        /* its files and the tokenized prompts, until it has run */
    uint64_t text_memory;    /* the encoder's device bytes at most (0: none ran) */
    double text_seconds;
    lv_ctx *ctx;
    lv_dit *dit;
    lv_dit_twin *twin;       /* CFG's unconditional passes on a second context, or NULL */
    lv_encoder *enc;
    lv_weights *vae_weights;
    lv_vae_decoder *vae;
    float *x0, *big;         /* one chunk; its upscaled frames */
    float *sink_frame;       /* one frame for the frame sink [3, H, W] (several frames at once) */
    float *last_frame;       /* the last chunk's last frame [C, H, W] (model space) */
    int64_t frame_values;    /* C * H * W */
    float *latents;          /* latent model without a VAE: every latent frame, for the .npy */
    int64_t frames_done;     /* output frames (pixel frames; latent frames without a VAE) */
    int64_t frames_total;    /* the same, of the whole video */
    lv_block_recipe first;   /* a block made from the text alone: the first, or every block
                                when no state is carried */
    lv_block_recipe later;   /* a block that continues the earlier ones */
    bool uncond;             /* some block uses CFG: text slot 1 holds the negative prompt */
    /* the ETA's clock: forward passes done this run, and when the first step of this
     * run's first block ended (it pays for compiling every kernel: not a rate to go by) */
    double t_start, warm_end, warm_work, work_done;
    int blocks_made;         /* by this run */
    bool wrote_start_state;  /* a fresh run's resume file, written before its first block */
    lv_sp_comm *sp;          /* sequence parallelism over processes (o.sp_comm), or NULL */
    bool root;               /* this process writes the video and the resume file (band 0's) */
} gen_run;

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

/* What can be checked before the model is opened: every value the caller set, so that a
 * bad one is an error naming it (never a crash, a division by zero or a silent NaN). */
static lv_status check_options(const lv_generate_options *o) {
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
    if (o->scale < 1 || o->scale > 64)
        return lv_error(LV_ERR_INVALID, "lv_generate: scale %d (--scale): must be in [1, 64]", o->scale);
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
    if (o->weights_dtype < LV_DIT_WEIGHTS_AS_STORED || o->weights_dtype > LV_DIT_WEIGHTS_BF16)
        return lv_error(LV_ERR_INVALID, "lv_generate: weights_dtype %d (lv_dit_weights)", o->weights_dtype);
    if (o->text_softcap != 0 && o->text_softcap != 1)
        return lv_error(LV_ERR_INVALID, "lv_generate: text_softcap %d (0 off, 1 the config's)", o->text_softcap);
    if (o->motion_score != LV_GEN_MODEL_DEFAULT && (o->motion_score < 0 || o->motion_score > 1000))
        return lv_error(LV_ERR_INVALID, "lv_generate: motion score %d (--motion-score): must be in [0, 1000]",
                        o->motion_score);
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
    return LV_OK;
}

static lv_status resolve_options(const lv_generate_options *in, gen_run *r) {
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
    if (!o->height) o->height = card->height;
    if (!o->width) o->width = card->width;
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    int stride = card->pixel ? 1 : 8; /* Wan2.1 VAE: 8 x 8 pixels per latent */
    if (o->height % (stride * cfg->patch[1]) || o->width % (stride * cfg->patch[2]))
        return lv_error(LV_ERR_INVALID, "-W/-H %dx%d must be multiples of %dx%d for this model",
                        o->width, o->height, stride * cfg->patch[2], stride * cfg->patch[1]);
    r->grid_h = o->height / stride;
    r->grid_w = o->width / stride;
    /* latent models: pixel frame 0 alone, then 4 pixel frames per latent frame */
    r->units = card->pixel ? o->frames : 1 + (o->frames - 1 + 3) / 4;
    if (o->block_frames <= 0) o->block_frames = card->block_frames;
    if (o->cached_blocks == LV_GEN_MODEL_DEFAULT) o->cached_blocks = card->cached_blocks;
    else if (o->cached_blocks < 0) o->cached_blocks = LV_CACHED_ALL;
    if (o->burn_in_blocks == LV_GEN_MODEL_DEFAULT) o->burn_in_blocks = card->burn_in_blocks;
    /* without a carried state (or in a single clip) no block sees another: nothing to settle */
    if (o->cached_blocks == 0 || o->sampler != LV_GEN_LONGSANA) o->burn_in_blocks = 0;
    if (o->sampler != LV_GEN_LONGSANA) {
        /* the base model's single clip: every frame at once, its own schedule */
        if (o->steps <= 0) o->steps = 50;
        if (o->shift <= 0) o->shift = 8.0;
        if (o->cfg_scale < 0) o->cfg_scale = 6.0;
        if (o->resume) return lv_error(LV_ERR_UNSUPPORTED, "--resume works with block-wise generation only");
        o->block_frames = r->units; /* one chunk */
        r->chunks = 1;
        r->uncond = o->cfg_scale != 1.0;
        return LV_OK;
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
    if (card->pixel && (o->text_encoder_path || o->tokenizer_path))
        return lv_error(LV_ERR_INVALID, "%s has its own vocabulary: a text encoder (--text-encoder, --tokenizer) "
                        "is for latent-space models such as SANA-Video", r->m.name);
    if (!card->pixel) {
        /* a pipeline folder supplies what is not given */
        const lv_pipeline_dir *parts = &r->m.parts;
        if (!o->text_encoder_path && r->m.pipeline && parts->text_encoder[0]) o->text_encoder_path = parts->text_encoder;
        if (!o->tokenizer_path && r->m.pipeline && parts->tokenizer[0]) o->tokenizer_path = parts->tokenizer;
        if (!o->vae_path && r->m.pipeline && parts->vae[0]) o->vae_path = parts->vae;
        r->use_encoder = !o->text_embeds_path && o->text_encoder_path;
        if (!o->text_embeds_path && !o->text_encoder_path)
            return lv_error(LV_ERR_INVALID, "%s works in a VAE's latent space and has no vocabulary: give its text "
                            "encoder (--text-encoder DIR, or a diffusers pipeline folder as --model) or prompt "
                            "embeddings (--text-embeds)", r->m.name);
        if (o->resume) return lv_error(LV_ERR_UNSUPPORTED, "--resume works with pixel-space models only");
        if (!o->vae_path && (!o->output || !ends_with(o->output, ".npy")))
            return lv_error(LV_ERR_INVALID, "without --vae a latent model's output is its latents: "
                            "give an output ending in .npy, or a VAE with --vae%s",
                            o->output ? "" : " (a frame sink needs frames)");
    }
    return LV_OK;
}

/* Prompt embeddings from a file: y [L, caption] (or [1, L, caption]) and mask [L]; with
 * CFG also negative_y / negative_mask. */
static lv_status load_text_embeds(gen_run *r, const char *path, int cap) {
    lv_weights *w;
    LV_TRY(lv_weights_open(path, &w));
    lv_status s = LV_OK;
    const char *names[2][2] = {{"y", "mask"}, {"negative_y", "negative_mask"}};
    int slots = r->uncond ? 2 : 1;
    for (int slot = 0; s == LV_OK && slot < slots; slot++) {
        const lv_weight *y = lv_weights_find(w, names[slot][0]), *m = lv_weights_find(w, names[slot][1]);
        if (!y || y->dtype != LV_F32 || y->ndim < 2 || y->shape[y->ndim - 1] != cap) {
            s = lv_error(LV_ERR_FORMAT, "%s: needs float32 '%s' [L, %d]%s", path, names[slot][0], cap,
                         slot ? " for --cfg-scale" : "");
            break;
        }
        int L = (int)y->shape[y->ndim - 2];
        if (slot == 0) {
            r->text_len = L;
            r->y = calloc((size_t)2 * L * cap, sizeof *r->y);
            r->mask = calloc((size_t)2 * L, sizeof *r->mask);
            if (!r->y || !r->mask) {
                s = lv_error(LV_ERR_NOMEM, "out of host memory");
                break;
            }
        } else if (L != r->text_len) {
            s = lv_error(LV_ERR_FORMAT, "%s: 'negative_y' has %d tokens, 'y' %d", path, L, r->text_len);
            break;
        }
        memcpy(r->y + (size_t)slot * L * cap, y->data, (size_t)L * cap * sizeof(float));
        for (int i = 0; i < L; i++) r->mask[slot * L + i] = 1.0f;
        if (m) {
            if (m->dtype != LV_F32 || (int64_t)lv_weight_numel(m) != L)
                s = lv_error(LV_ERR_FORMAT, "%s: '%s' must be float32 with %d values", path, names[slot][1], L);
            else
                memcpy(r->mask + (size_t)slot * L, m->data, (size_t)L * sizeof(float));
        }
    }
    lv_weights_close(w);
    return s;
}

static lv_status prepare_text(gen_run *r, void (*warn)(void *, const char *), void *user) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels;
    /* tokenized now; encoded once the device is up (encode_text); with processes of a
     * sequence-parallel run, by rank 0 alone, which hands the rows on (share_text) */
    if (r->use_encoder) {
        const lv_generate_options *o = &r->o;
        const char *negative = !r->uncond ? NULL : o->negative_prompt ? o->negative_prompt
                                                                      : lv_sana_video_negative_prompt;
        int motion = o->motion_score == LV_GEN_MODEL_DEFAULT ? LV_SANA_VIDEO_MOTION_SCORE : o->motion_score;
        if (r->root)
            LV_TRY(lv_gen_text_open(&r->text, o->text_encoder_path, o->tokenizer_path, o->prompt, negative, motion,
                                    cap, warn, user));
        r->text_len = LV_SANA_PROMPT_ROWS;
        r->y = calloc((size_t)2 * r->text_len * cap, sizeof *r->y);
        r->mask = calloc((size_t)2 * r->text_len, sizeof *r->mask);
        return r->y && r->mask ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (!r->m.card.pixel || r->o.text_embeds_path) return load_text_embeds(r, r->o.text_embeds_path, cap);
    r->text_len = r->m.card.text_len;
    r->y = malloc((size_t)2 * r->text_len * cap * sizeof *r->y);
    r->mask = malloc((size_t)2 * r->text_len * sizeof *r->mask);
    if (!r->y || !r->mask) return lv_error(LV_ERR_NOMEM, "out of host memory");
    LV_TRY(embed_prompt(&r->m, "prompt", r->o.prompt, r->y, r->mask, warn, user));
    if (r->uncond)
        LV_TRY(embed_prompt(&r->m, "negative prompt", r->o.negative_prompt ? r->o.negative_prompt : "",
                            r->y + (size_t)r->text_len * cap, r->mask + r->text_len, warn, user));
    return LV_OK;
}

/* The rows fed to the DiT, in the file format --text-embeds reads (text_embeds_out). */
static lv_status save_text_embeds(const gen_run *r, const char *path) {
    int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    lv_weight t[4] = {
        {.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {L, cap}, .data = r->y,
         .nbytes = (uint64_t)L * cap * sizeof(float)},
        {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {L}, .data = r->mask, .nbytes = (uint64_t)L * sizeof(float)},
        {.name = "negative_y", .dtype = LV_F32, .ndim = 2, .shape = {L, cap}, .data = r->y + (size_t)L * cap,
         .nbytes = (uint64_t)L * cap * sizeof(float)},
        {.name = "negative_mask", .dtype = LV_F32, .ndim = 1, .shape = {L}, .data = r->mask + L,
         .nbytes = (uint64_t)L * sizeof(float)}};
    return lv_safetensors_write(path, t, r->uncond ? 4 : 2, NULL, 0);
}

/* More than one process makes this video: bands (sp_comm), a CFG partner, or both. */
static bool several(const gen_run *r) { return r->sp || r->o.cfg_partner; }

/* data from the writing process to every other: within its group of bands from band 0,
 * then from each conditional process to its partner (the unconditional group's band 0
 * reads nothing: what its own broadcast spreads is overwritten by the partner's) */
static lv_status share(gen_run *r, void *data, uint64_t bytes) {
    if (r->sp) LV_TRY(lv_sp_comm_broadcast(r->sp, data, bytes));
    const lv_cfg_partner *p = r->o.cfg_partner;
    return p ? p->share(p->user, data, bytes) : LV_OK;
}

/* Sequence parallelism over processes: the Gemma-2 encoder runs on rank 0 alone (the others
 * need neither its files nor its memory), which hands the rows and masks on. */
static lv_status share_text(gen_run *r) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels;
    LV_TRY(share(r, r->y, (uint64_t)2 * r->text_len * cap * sizeof *r->y));
    return share(r, r->mask, (uint64_t)2 * r->text_len * sizeof *r->mask);
}

/* The text encoder's pass: uploaded, run on the prompts and freed before the DiT is
 * created (see gen_text.c); progress says when it starts and what it took. */
static lv_status encode_text(gen_run *r, lv_generate_callback progress, void *user) {
    lv_generate_progress p = {.phase = LV_GEN_PHASE_TEXT_START, .device = lv_ctx_device(r->ctx)->name,
                              .text_tokens = r->text.prompt.n_ids + r->text.negative.n_ids};
    if (progress) progress(user, &p);
    double t0 = now();
    LV_TRY(lv_gen_text_encode(&r->text, r->ctx, r->o.text_softcap, r->y, r->mask, &r->text_memory));
    r->text_seconds = now() - t0;
    lv_gen_text_close(&r->text); /* the tokenizer and the mapped weights too */
    lv_ctx_memory_reset_peak(r->ctx); /* from here the peak is the DiT's */
    p.phase = LV_GEN_PHASE_TEXT_DONE;
    p.text_seconds = r->text_seconds;
    p.text_encoder_memory = r->text_memory;
    if (progress) progress(user, &p);
    return LV_OK;
}

/* n frames [3, n, h, w] to the encoder and the frame sink, upscaled by o.scale. */
static lv_status encode_frames(gen_run *r, const float *frames, int n, int h, int w) {
    const float *src = frames;
    if (r->o.scale > 1) {
        upscale(frames, n, h, w, r->o.scale, r->big);
        src = r->big;
    }
    if (r->enc) LV_TRY(lv_encoder_write_float(r->enc, src, n, LV_LAYOUT_CFHW));
    const int H = h * r->o.scale, W = w * r->o.scale;
    const size_t plane = (size_t)H * W;
    for (int t = 0; r->o.frame_sink && t < n; t++) {
        const float *frame = n > 1 ? r->sink_frame : src;
        if (n > 1) /* [3, n, H, W] -> frame t's [3, H, W] */
            for (int c = 0; c < 3; c++)
                memcpy(r->sink_frame + c * plane, src + ((size_t)c * n + t) * plane, plane * sizeof *frame);
        LV_TRY(r->o.frame_sink(r->o.frame_user, r->frames_done + t, frame, H, W));
    }
    r->frames_done += n;
    return LV_OK;
}

static lv_status on_vae_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index;
    return encode_frames(user, rgb, 1, height, width);
}

/* A finished latent chunk of n frames through the VAE into the encoder (on_vae_frame).
 * With sequence parallelism the chunk x0 is whole and the same on every process of the
 * writing group; each decodes its bands' rows (lv_vae_set_sequence_parallel) and the pixel
 * rows reach the writing process, which alone gets frames. */
static lv_status decode_chunk(gen_run *r, int n) {
    return lv_vae_decode_frames_cb(r->ctx, r->vae, r->x0, n, r->grid_h, r->grid_w, on_vae_frame, r);
}

/* A finished chunk of n model frames, starting at model frame f0, to the output. The other
 * processes of a sequence-parallel run decode their bands of it (a latent model with a
 * VAE) and count the frames. */
static lv_status emit_chunk(gen_run *r, int f0, int n) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    if (!r->root) { /* pixel frames, or latent frames; the VAE makes 4 of each, the first 1 */
        if (r->vae) LV_TRY(decode_chunk(r, n));
        r->frames_done += r->m.card.pixel || !r->o.vae_path ? n : f0 == 0 ? 1 + 4 * (n - 1) : 4 * n;
        return LV_OK;
    }
    if (r->m.card.pixel) {
        LV_TRY(encode_frames(r, r->x0, n, r->grid_h, r->grid_w));
        return r->enc ? lv_encoder_flush_block(r->enc) : LV_OK;
    }
    if (r->vae) {
        LV_TRY(decode_chunk(r, n));
        return r->enc ? lv_encoder_flush_block(r->enc) : LV_OK;
    }
    size_t plane = (size_t)r->grid_h * r->grid_w;
    for (int c = 0; c < cfg->in_channels; c++)
        memcpy(r->latents + ((size_t)c * r->units + f0) * plane, r->x0 + (size_t)c * n * plane,
               (size_t)n * plane * sizeof(float));
    r->frames_done += n;
    return LV_OK;
}

/* The chunk's last frame (of n), which the next chunk starts from when warm-started. */
static void keep_last_frame(gen_run *r, int n) {
    size_t plane = (size_t)r->grid_h * r->grid_w;
    for (int c = 0; c < lv_sana_file_config(r->m.file)->in_channels; c++)
        memcpy(r->last_frame + c * plane, r->x0 + ((size_t)c * n + n - 1) * plane, plane * sizeof(float));
}

/* Where the video goes while it is made, and what a killed run leaves (issue 44).
 *
 * The choice: both a temporary name for the video and a resume file that covers the
 * burn-in. The video is written under OUT.resume-part (lv_encoder_open_resume with no frame
 * to keep), opened when the first written block is ready and renamed to OUT by the flush
 * that puts that block on disk; from then on OUT plays and holds every flushed block. The
 * resume file is written as soon as the options, the model and the codec are checked
 * (before the device is set up: "started, no block yet"), then after every block, burn-in
 * blocks included. So whenever the process dies (SIGKILL, a second Ctrl-C, a crash, out
 * of memory), OUT holds either nothing of this run (no frame was ready: the start, the
 * burn-in) or a playable video, and OUT.longvk-state says how far the run got: --resume
 * continues from there with the same frames as an uninterrupted run, in the burn-in too.
 * Only a run killed while it reads the model (the first milliseconds) leaves no resume
 * file; it has made nothing, and is started again without --resume. A start that fails
 * (a bad model, codec or size, no device, out of memory) leaves nothing: the resume file
 * it began with is removed. A temporary name alone would make a kill in the burn-in (120
 * blocks with the default model, over a minute) lose the whole burn-in; a resume file
 * alone would leave an unplayable 0-frame video at OUT.
 *
 * The codec and options are checked first all the same: an encoder is opened on the
 * temporary name and closed at once (probe_output), so a bad --codec fails in a second, not
 * after the burn-in. */

/* The chunk buffers: x0 holds a written chunk (the first takes the remainder) or a burn-in
 * chunk of block_frames frames, whichever is larger. */
static lv_status alloc_buffers(gen_run *r) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    int shown = lv_generate_chunk_frames(r->units, r->o.block_frames, 0);
    int maxf = r->o.burn_in_blocks > 0 && r->o.block_frames > shown ? r->o.block_frames : shown;
    size_t chunk = (size_t)cfg->in_channels * maxf * r->grid_h * r->grid_w;
    r->x0 = malloc(chunk * sizeof *r->x0);
    if (!r->x0) return lv_error(LV_ERR_NOMEM, "out of host memory for a block of %d frames", maxf);
    /* the VAE over the bands: every process of the writing group (with --cfg-parallel the
     * conditional one; the other group has no frames to make) */
    const bool decodes = r->root || (r->sp && (!r->o.cfg_partner || r->o.cfg_partner->role == LV_CFG_COND));
    if (r->o.vae_path && !r->m.card.pixel && decodes) {
        LV_TRY(lv_weights_open(r->o.vae_path, &r->vae_weights));
        LV_TRY(lv_vae_decoder_create(r->ctx, r->vae_weights, &r->vae));
        lv_vae_set_clamp(r->vae, 1);
        if (lv_vae_z_dim(r->vae) != cfg->in_channels)
            return lv_error(LV_ERR_INVALID, "the VAE %s has %d latent channels, the model %d", r->o.vae_path,
                            lv_vae_z_dim(r->vae), cfg->in_channels);
        LV_TRY(lv_vae_set_sequence_parallel(r->vae, r->o.sp_bands, r->sp));
    }
    if (!r->root) return LV_OK; /* the rest is the output's: the writing process's alone */
    if (!r->m.card.pixel && !r->o.vae_path) {
        r->latents = malloc((size_t)cfg->in_channels * r->units * r->grid_h * r->grid_w * sizeof *r->latents);
        return r->latents ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for the latents");
    }
    /* frames reaching the encoder at once: a written pixel chunk, or one decoded frame */
    size_t frame = (size_t)3 * r->o.height * r->o.width;
    size_t at_once = r->m.card.pixel ? (size_t)shown : 1;
    if (r->o.scale > 1) {
        r->big = malloc(at_once * frame * (size_t)r->o.scale * r->o.scale * sizeof *r->big);
        if (!r->big) return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (r->o.frame_sink && at_once > 1) {
        r->sink_frame = malloc(frame * (size_t)r->o.scale * r->o.scale * sizeof *r->sink_frame);
        if (!r->sink_frame) return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    return LV_OK;
}

/* A video file (a pixel model, or a VAE): not when the frames go to a frame sink alone. */
static bool writes_video(const gen_run *r) { return (r->m.card.pixel || r->o.vae_path) && r->o.output; }

/* A new video under the temporary name (see above); keep_frames > 0: the interrupted
 * run's first keep_frames frames, continued. */
static lv_status open_video(gen_run *r, int64_t keep_frames, lv_encoder **out) {
    return lv_encoder_open_resume(r->o.output, r->o.width * r->o.scale, r->o.height * r->o.scale, r->o.fps,
                                  &r->o.encoder, keep_frames, out);
}

static lv_status probe_output(gen_run *r) {
    lv_encoder *e = NULL;
    LV_TRY(open_video(r, 0, &e));
    lv_encoder_abort(e); /* removes the temporary file: nothing is left */
    return LV_OK;
}

static lv_status close_output(gen_run *r, lv_status s) {
    if (r->enc) {
        if (s == LV_OK || s == LV_ERR_INTERRUPTED) {
            char saved[1024];
            snprintf(saved, sizeof saved, "%s", lv_last_error());
            lv_status cs = lv_encoder_close(r->enc);
            if (s == LV_OK) s = cs;
            else if (cs == LV_OK) lv_error(s, "%s", saved);
        } else {
            lv_encoder_abort(r->enc); /* the flushed blocks stay: the file plays */
        }
        r->enc = NULL;
    }
    if (s == LV_OK && r->latents) {
        const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
        int64_t shape[4] = {cfg->in_channels, r->units, r->grid_h, r->grid_w};
        s = lv_npy_write(r->o.output, 4, shape, r->latents);
    }
    return s;
}

static void run_free(gen_run *r) {
    if (r->vae) lv_vae_decoder_destroy(r->ctx, r->vae);
    lv_weights_close(r->vae_weights);
    lv_dit_twin_destroy(r->twin);
    if (r->dit) lv_dit_destroy(r->ctx, r->dit);
    if (r->ctx) lv_ctx_destroy(r->ctx);
    lv_gen_text_close(&r->text);
    lv_gen_model_close(&r->m);
    free(r->y);
    free(r->mask);
    free(r->x0);
    free(r->last_frame);
    free(r->big);
    free(r->sink_frame);
    free(r->latents);
}

/* The CFG twin pays when the unconditional passes can run on a core of their own: a CPU
 * device whose kernels run inline on lavapipe's queue thread (cpu_threads 0), two cores
 * or more, block-by-block sampling with some CFG. Elsewhere it only doubles the memory. */
static bool use_twin(const gen_run *r, int cpu_threads) {
    if (r->o.parallel_cfg == 0 || !r->uncond || r->o.sampler != LV_GEN_LONGSANA) return false;
    if (r->o.sp_bands > 0 || r->sp || r->o.cfg_partner) return false; /* check_options */
    if (r->o.parallel_cfg == 1) return true;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cpu_threads == 0 && cores >= 2 && lv_ctx_device(r->ctx)->type == LV_DEVICE_CPU;
}

/* Tokens a frame of the model's grid makes. */
static int64_t frame_tokens(const gen_run *r) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    return (int64_t)(r->grid_h / cfg->patch[1]) * (r->grid_w / cfg->patch[2]);
}

/* Text slot 0: the prompt; slot 1, when some block uses CFG: the negative prompt. */
static lv_status set_texts(const gen_run *r, lv_ctx *ctx, lv_dit *dit) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    LV_TRY(lv_dit_set_text(ctx, dit, 0, r->y, r->text_len, r->mask));
    if (!r->uncond) return LV_OK;
    return lv_dit_set_text(ctx, dit, 1, r->y + (size_t)r->text_len * cfg->caption_channels, r->text_len,
                           r->mask + r->text_len);
}

static lv_status twin_open(gen_run *r, const lv_ctx_options *copt, const lv_dit_options *dopt) {
    LV_TRY(lv_dit_twin_create(copt, r->m.file, dopt, &r->twin));
    return set_texts(r, lv_dit_twin_ctx(r->twin), lv_dit_twin_dit(r->twin));
}

/* After a resume the twin starts from the dit's state. */
static lv_status twin_copy_state(gen_run *r, int64_t chunks) {
    if (!lv_dit_carries_state(r->dit) || chunks == 0) return LV_OK;
    float *data = NULL;
    int64_t count = 0;
    lv_status s = lv_dit_state_save(r->ctx, r->dit, &data, &count);
    if (s == LV_OK)
        s = lv_dit_state_load(lv_dit_twin_ctx(r->twin), lv_dit_twin_dit(r->twin), data, count, chunks,
                              frame_tokens(r));
    free(data);
    return s;
}

int lv_generate_auto_cpu_threads(int64_t tokens_per_block, int hidden) {
    return (double)tokens_per_block * hidden * hidden <= (double)(1 << 24) ? 0 : -1;
}

/* Forward passes a block of this recipe takes: one per step, one more per step with CFG
 * (the unconditional pass, on the twin or not: about as long either way on a CPU), and the
 * write pass. What the ETA weighs blocks by: the first block takes five times the passes
 * of a later one with the default model. */
static double recipe_work(const gen_run *r, const lv_block_recipe *rec) {
    int cfg_steps = 0;
    if (rec->cfg_scale != 1.0)
        cfg_steps = rec->cfg_last_steps > 0 && rec->cfg_last_steps < rec->steps ? rec->cfg_last_steps : rec->steps;
    return rec->steps + cfg_steps + (lv_dit_carries_state(r->dit) ? 1 : 0);
}

static const lv_block_recipe *recipe_of(const gen_run *r, int chunk) {
    return chunk == 0 || !lv_dit_carries_state(r->dit) ? &r->first : &r->later;
}

/* Passes of blocks [from, to). */
static double work_of(const gen_run *r, int from, int to) {
    if (from >= to) return 0;
    int firsts = !lv_dit_carries_state(r->dit) ? to - from : from == 0;
    return firsts * recipe_work(r, &r->first) + (to - from - firsts) * recipe_work(r, &r->later);
}

/* lv_chunk_options.step_done: the end of the first step this run makes is the end of the
 * warm-up (every kernel compiled): the ETA's rate is measured from there. */
static void on_step(void *user, int step, int passes) {
    (void)step;
    gen_run *r = user;
    if (r->warm_end > 0) return;
    r->warm_end = now();
    r->warm_work = passes;
}

/* Seconds left for blocks [next, total): the time per pass since the warm-up, times the
 * passes left. */
static double eta_seconds(const gen_run *r, int next, int total) {
    double t = now(), rate = 0;
    if (r->warm_end > 0 && r->work_done > r->warm_work && t > r->warm_end)
        rate = (t - r->warm_end) / (r->work_done - r->warm_work);
    else if (r->work_done > 0)
        rate = (t - r->t_start) / r->work_done;
    return rate * work_of(r, next, total);
}

/* The resume file after chunks_done blocks. Every process takes part in reading the carried
 * state (with bands on other processes lv_dit_state_save gathers the conv caches' rows);
 * the writing process alone writes it: whole, the same file whatever the bands. */
static lv_status save_state(gen_run *r, int chunks_done, int64_t frames_done) {
    if (!r->m.card.pixel || r->o.sampler != LV_GEN_LONGSANA) return LV_OK; /* resume: block-wise, pixel space */
    if (!r->state_path[0]) return LV_OK; /* no file: frames to a sink alone */
    float *state = NULL;
    int64_t count = 0;
    if (chunks_done) LV_TRY(lv_dit_state_save(r->ctx, r->dit, &state, &count)); /* 0: before the first block */
    lv_status s = !r->root ? LV_OK
                           : lv_gen_resume_save(r->state_path, &r->o, &r->m, chunks_done, frames_done, state, count,
                                                r->last_frame, r->frame_values);
    free(state);
    return s;
}

/* Frames written once `chunks_done` chunks (burn-in included) are made. */
static int64_t frames_after(const gen_run *r, int chunks_done) {
    int64_t f = 0;
    for (int k = 0; k < chunks_done - r->o.burn_in_blocks; k++)
        f += lv_generate_chunk_frames(r->units, r->o.block_frames, k);
    return f;
}

/* Sequence parallelism over processes: the writing process reads the resume file (the
 * others may not see its folder: cluster nodes need not share the output's) and hands it
 * on: its verdict first, so that every process stops when it is refused, then the carried
 * state and the last frame. */
static lv_status share_resume(gen_run *r, lv_status read, lv_gen_resume *res, float **state, int64_t *count) {
    int64_t head[4] = {read, res->chunks_done, res->frames_done, *count};
    LV_TRY(share(r, head, sizeof head));
    if (head[0] != LV_OK)
        return r->root ? read : lv_error((lv_status)head[0], "the resume file %s was refused by the process that "
                                         "reads it (rank 0: its message says why)", r->state_path);
    res->chunks_done = (int)head[1];
    res->frames_done = head[2];
    *count = head[3];
    if (!r->root && *count > 0 && !(*state = malloc((size_t)*count * sizeof **state)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the carried state (%lld values)", (long long)*count);
    LV_TRY(share(r, *state, (uint64_t)*count * sizeof **state));
    return share(r, r->last_frame, (uint64_t)r->frame_values * sizeof *r->last_frame);
}

/* --resume: the state of the interrupted run (into the dit, its twin and last_frame). */
static lv_status load_resume(gen_run *r, int *first_chunk) {
    lv_gen_resume resume = {0};
    float *state = NULL;
    int64_t count = 0;
    lv_status s = LV_OK;
    if (r->root)
        s = lv_gen_resume_read(r->state_path, &r->o, &r->m, &resume, &state, &count, r->last_frame, r->frame_values);
    if (several(r)) s = share_resume(r, s, &resume, &state, &count);
    if (s == LV_OK && resume.chunks_done > 0) {
        s = lv_dit_state_load(r->ctx, r->dit, state, count, resume.chunks_done, frame_tokens(r));
        if (s != LV_OK) lv_error_prefix(s, "%s", r->state_path);
    }
    free(state);
    LV_TRY(s);
    int total = r->o.burn_in_blocks + r->chunks;
    if (resume.chunks_done < 0 || resume.chunks_done > total || resume.frames_done != frames_after(r, resume.chunks_done))
        return lv_error(LV_ERR_FORMAT, "%s: %d blocks made and %lld frames written do not fit this run (%d blocks, "
                        "%lld frames after %d)", r->state_path, resume.chunks_done, (long long)resume.frames_done,
                        total, resume.chunks_done >= 0 && resume.chunks_done <= total
                            ? (long long)frames_after(r, resume.chunks_done) : -1LL, resume.chunks_done);
    if (r->twin) LV_TRY(twin_copy_state(r, resume.chunks_done));
    *first_chunk = resume.chunks_done;
    r->frames_done = resume.frames_done;
    return LV_OK;
}

/* Stopped on request before block `next` (0-based): the resume file already holds the
 * blocks made. */
static lv_status interrupted(const gen_run *r, int next) {
    int total = r->o.burn_in_blocks + r->chunks;
    if (next == 0)
        return lv_error(LV_ERR_INTERRUPTED, "interrupted before the first block: nothing is made yet");
    if (!r->o.output) /* frames to a sink alone */
        return lv_error(LV_ERR_INTERRUPTED, "interrupted after block %d of %d: %lld of %lld frames made", next, total,
                        (long long)r->frames_done, (long long)r->frames_total);
    if (r->frames_done == 0)
        return lv_error(LV_ERR_INTERRUPTED, "interrupted in the burn-in after block %d of %d (%d made and dropped "
                        "before the first written frame): no frame is written yet, %s holds the blocks made",
                        next, total, r->o.burn_in_blocks, r->state_path);
    return lv_error(LV_ERR_INTERRUPTED, "interrupted after block %d of %d: %s plays and holds %lld of %lld frames",
                    next, total, r->o.output, (long long)r->frames_done, (long long)r->frames_total);
}

static void report_progress(gen_run *r, lv_generate_callback progress, void *user, int block, int blocks,
                            int burn, int64_t frames_at_start, int64_t frames_total) {
    double t = now() - r->t_start;
    lv_generate_progress p = {
        .block = block, .blocks = blocks, .burn_in_blocks = burn, .frames_done = r->frames_done,
        .frames_total = frames_total, .seconds = t,
        .frames_per_second = t > 0 ? (double)(r->frames_done - frames_at_start) / t : 0,
        .eta_seconds = eta_seconds(r, block, blocks),
        .state_bytes = lv_dit_carries_state(r->dit) ? lv_dit_state_bytes(r->dit) : 0,
        .device = lv_ctx_device(r->ctx)->name,
        .frames_resumed = frames_at_start,
        .text_seconds = r->text_seconds,
        .text_encoder_memory = r->text_memory,
        .model_memory = lv_ctx_memory_peak(r->ctx)};
    progress(user, &p);
}

/* Everything from the opened model to the last block; the caller closes and frees. */
static lv_status run(gen_run *r, const lv_generate_options *opt_in, lv_generate_callback progress,
                     void (*warn)(void *, const char *), void *user, volatile sig_atomic_t *stop) {
    lv_generate_options *o = &r->o;
    LV_TRY(resolve_options(opt_in, r));
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
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
    LV_TRY(prepare_text(r, warn, user));
    int burn = o->burn_in_blocks, total = burn + r->chunks;
    r->frames_total = r->m.card.pixel || !o->vae_path ? r->units : 1 + 4 * (int64_t)(r->units - 1);
    r->frame_values = (int64_t)cfg->in_channels * r->grid_h * r->grid_w;
    if (!(r->last_frame = calloc((size_t)r->frame_values, sizeof *r->last_frame)))
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    if (r->root && o->resume && access(r->state_path, F_OK) != 0) /* before the device is set up */
        return lv_error(LV_ERR_IO, "--resume needs the state file an interrupted run left (%s): there is none",
                        r->state_path);
    if (r->root && !o->resume) {
        /* before the device: a bad codec fails at once; then the resume file says the run
         * has started (see "what a killed run leaves") */
        if (writes_video(r)) LV_TRY(probe_output(r));
        LV_TRY(save_state(r, 0, 0));
        r->wrote_start_state = r->m.card.pixel && o->sampler == LV_GEN_LONGSANA && r->state_path[0];
    }

    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.device_index = o->device_index;
    copt.cpu_threads = o->cpu_threads;
    copt.precision = o->precision;
    if (o->cpu_threads == LV_GEN_CPU_THREADS_AUTO) {
        int64_t tokens = (int64_t)((o->block_frames + cfg->patch[0] - 1) / cfg->patch[0]) * frame_tokens(r);
        copt.cpu_threads = lv_generate_auto_cpu_threads(tokens, cfg->hidden);
    }
    LV_TRY(lv_ctx_create(&copt, &r->ctx));
    if (r->use_encoder && r->root) LV_TRY(encode_text(r, progress, user));
    if (r->use_encoder && several(r)) LV_TRY(share_text(r));
    if (o->text_embeds_out && r->root) LV_TRY(save_text_embeds(r, o->text_embeds_out));
    lv_dit_options dopt = {.cached_blocks = o->cached_blocks, .weights = (lv_dit_weights)o->weights_dtype,
                           .sp_bands = o->sp_bands, .sp_comm = o->sp_comm};
    LV_TRY(lv_dit_create(r->ctx, r->m.file, &dopt, &r->dit));
    LV_TRY(set_texts(r, r->ctx, r->dit));
    if (use_twin(r, copt.cpu_threads)) LV_TRY(twin_open(r, &copt, &dopt));

    int first_chunk = 0;
    if (o->resume) LV_TRY(load_resume(r, &first_chunk));
    LV_TRY(alloc_buffers(r));
    if (r->root && writes_video(r) && o->resume) {
        if (r->frames_done > 0) LV_TRY(open_video(r, r->frames_done, &r->enc)); /* checks the old video */
        else LV_TRY(probe_output(r));
    }

    r->t_start = now();
    int64_t frames_at_start = r->frames_done;
    int64_t frames_total = r->frames_total;
    if (o->sampler != LV_GEN_LONGSANA) {
        lv_clip_options clip = {.steps = o->steps, .shift = o->shift, .cfg_scale = o->cfg_scale,
                                .solver = o->sampler == LV_GEN_EULER ? LV_SOLVER_EULER : LV_SOLVER_DPMPP_2M,
                                .seed = o->seed};
        LV_TRY(lv_sample_clip(r->ctx, r->dit, &clip, r->units, r->grid_h, r->grid_w, r->x0));
        if (r->root && writes_video(r) && !r->enc) LV_TRY(open_video(r, 0, &r->enc));
        LV_TRY(emit_chunk(r, 0, r->units));
        if (progress) {
            double t = now() - r->t_start;
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
     * others, then dropped. Chunk c's noise stream is c, its position in the video (RoPE)
     * counts every frame made, the burn-in's too. A stop is honoured after any block. */
    int64_t done_units = r->frames_done;
    for (int c = first_chunk; c < total; c++) {
        /* every process stops after the same block: a stop reaching any of them counts */
        int stop_now = stop && *stop;
        if (r->sp) LV_TRY(lv_sp_comm_agree_max(r->sp, &stop_now));
        if (o->cfg_partner) LV_TRY(o->cfg_partner->agree_max(o->cfg_partner->user, &stop_now));
        if (stop_now) return interrupted(r, c);
        bool shown = c >= burn;
        int n = shown ? lv_generate_chunk_frames(r->units, o->block_frames, c - burn) : o->block_frames;
        int position = shown ? (int)((int64_t)burn * o->block_frames + done_units) : c * o->block_frames;
        const lv_block_recipe *rec = recipe_of(r, c);
        lv_chunk_options chunk_opt = {.timesteps = rec->timesteps, .steps = rec->steps, .seed = o->seed,
                                      .cfg_scale = rec->cfg_scale, .sampler = rec->sampler,
                                      .cfg_last_steps = rec->cfg_last_steps,
                                      .warm = rec->warm_start ? r->last_frame : NULL,
                                      .twin = r->twin, .cfg_partner = o->cfg_partner, .step_done = on_step,
                                      .step_user = r};
        lv_status s = lv_longsana_chunk(r->ctx, r->dit, &chunk_opt, c, position, n, r->grid_h, r->grid_w, r->x0);
        if (s != LV_OK) { /* "block 17 of 160 (burn-in), step 2 of 2: the DiT's output ..." */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", lv_last_error());
            bool stage = !strncmp(msg, "step ", 5) || !strncmp(msg, "the write pass", 14) ||
                         !strncmp(msg, "the finished block", 18);
            return lv_error(s, "block %d of %d%s%s%s", c + 1, total, shown ? "" : " (burn-in)", stage ? ", " : ": ",
                            msg);
        }
        r->blocks_made++;
        r->work_done += recipe_work(r, rec);
        keep_last_frame(r, n);
        if (shown) {
            if (r->root && writes_video(r) && !r->enc) LV_TRY(open_video(r, 0, &r->enc));
            LV_TRY(emit_chunk(r, (int)done_units, n));
            done_units += n;
        }
        LV_TRY(save_state(r, c + 1, done_units));
        if (progress) report_progress(r, progress, user, c + 1, total, burn, frames_at_start, frames_total);
    }
    /* resumed with every block made (killed while closing): say so all the same */
    if (progress && first_chunk >= total)
        report_progress(r, progress, user, total, total, burn, frames_at_start, frames_total);
    return LV_OK;
}

lv_status lv_generate(const lv_generate_options *opt_in, lv_generate_callback progress,
                      void (*warn)(void *user, const char *message), void *user,
                      volatile sig_atomic_t *stop) {
    if (!opt_in)
        return lv_error(LV_ERR_INVALID, "lv_generate: options are NULL (lv_generate_options_default makes them)");
    LV_TRY(check_options(opt_in));
    gen_run r;
    memset(&r, 0, sizeof r);
    LV_TRY(lv_gen_model_open(opt_in->model_path, &r.m));
    lv_status s = run(&r, opt_in, progress, warn, user, stop);
    s = close_output(&r, s);
    if (s == LV_OK && r.root && r.state_path[0]) remove(r.state_path); /* finished: nothing to resume */
    /* a start that failed leaves nothing: not even the resume file it began with */
    if (s != LV_OK && s != LV_ERR_INTERRUPTED && r.wrote_start_state && r.blocks_made == 0) remove(r.state_path);
    run_free(&r);
    return s;
}
