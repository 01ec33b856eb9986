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
#include "longvk/vae.h"
#include "longvk/weights.h"

void lv_generate_options_default(lv_generate_options *opt) {
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

/* Text: the prompt through the card's tokenizer and the model's word tables. */
static lv_status embed_prompt(const lv_gen_model *m, const char *prompt, float *y, float *mask,
                              void (*warn)(void *, const char *), void *user) {
    char unknown[512];
    LV_TRY(lv_text_tables_embed(&m->text, &m->card, prompt, y, mask, unknown, sizeof unknown));
    if (unknown[0] && warn) {
        char msg[700];
        snprintf(msg, sizeof msg, "ignoring words the model does not know: %s (see `longvk info` for "
                 "its vocabulary)", unknown);
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
    int grid_h, grid_w;      /* the model's frame size: pixels, or latents for latent models */
    int units;               /* model frames to make: pixel frames, or latent frames */
    int text_len;
    float *y, *mask;         /* [2, L, caption] and [2, L]: prompt, negative prompt */
    lv_ctx *ctx;
    lv_dit *dit;
    lv_dit_twin *twin;       /* CFG's unconditional passes on a second context, or NULL */
    lv_encoder *enc;
    lv_weights *vae_weights;
    lv_vae_decoder *vae;
    float *x0, *big;         /* one chunk; its upscaled frames */
    float *last_frame;       /* the last chunk's last frame [C, H, W] (model space) */
    int64_t frame_values;    /* C * H * W */
    float *latents;          /* latent model without a VAE: every latent frame, for the .npy */
    int64_t frames_done;     /* output frames (pixel frames; latent frames without a VAE) */
    lv_block_recipe first;   /* a block made from the text alone: the first, or every block
                                when no state is carried */
    lv_block_recipe later;   /* a block that continues the earlier ones */
    bool uncond;             /* some block uses CFG: text slot 1 holds the negative prompt */
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

static lv_status resolve_options(const lv_generate_options *in, gen_run *r) {
    const lv_model_card *card = &r->m.card;
    lv_generate_options *o = &r->o;
    *o = *in;
    if (!o->output) return lv_error(LV_ERR_INVALID, "no output file (-o)");
    if (o->fps <= 0) o->fps = card->fps;
    if (o->frames <= 0) o->frames = (int)lround(o->seconds * o->fps);
    if (o->frames < 1) return lv_error(LV_ERR_INVALID, "the video needs at least one frame");
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
    if (o->scale < 1 || o->scale > 64) return lv_error(LV_ERR_INVALID, "--scale must be in [1, 64]");
    if (o->block_frames <= 0) o->block_frames = card->block_frames;
    if (o->cached_blocks == LV_GEN_MODEL_DEFAULT) o->cached_blocks = card->cached_blocks;
    else if (o->cached_blocks < 0) o->cached_blocks = LV_CACHED_ALL;
    if (o->burn_in_blocks == LV_GEN_MODEL_DEFAULT) o->burn_in_blocks = card->burn_in_blocks;
    if (o->burn_in_blocks < 0 || o->burn_in_blocks > LV_CARD_MAX_BURN_IN)
        return lv_error(LV_ERR_INVALID, "--burn-in-blocks must be in [0, %d]", LV_CARD_MAX_BURN_IN);
    /* without a carried state (or in a single clip) no block sees another: nothing to settle */
    if (o->cached_blocks == 0 || o->sampler != LV_GEN_LONGSANA) o->burn_in_blocks = 0;
    if (o->sampler != LV_GEN_LONGSANA) {
        /* the base model's single clip: every frame at once, its own schedule */
        if (o->steps <= 0) o->steps = 50;
        if (o->shift <= 0) o->shift = 8.0;
        if (o->cfg_scale < 0) o->cfg_scale = 6.0;
        if (o->resume) return lv_error(LV_ERR_UNSUPPORTED, "--resume works with block-wise generation only");
        o->block_frames = r->units; /* one chunk */
        r->uncond = o->cfg_scale != 1.0;
        return LV_OK;
    }
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
    if (!card->pixel) {
        if (!o->text_embeds_path)
            return lv_error(LV_ERR_INVALID, "%s works in a VAE's latent space and has no vocabulary: give "
                            "prompt embeddings with --text-embeds", r->m.name);
        if (o->resume) return lv_error(LV_ERR_UNSUPPORTED, "--resume works with pixel-space models only");
        if (!o->vae_path && !ends_with(o->output, ".npy"))
            return lv_error(LV_ERR_INVALID, "without --vae a latent model's output is its latents: "
                            "give an output ending in .npy, or a VAE with --vae");
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
    if (!r->m.card.pixel || r->o.text_embeds_path) return load_text_embeds(r, r->o.text_embeds_path, cap);
    r->text_len = r->m.card.text_len;
    r->y = malloc((size_t)2 * r->text_len * cap * sizeof *r->y);
    r->mask = malloc((size_t)2 * r->text_len * sizeof *r->mask);
    if (!r->y || !r->mask) return lv_error(LV_ERR_NOMEM, "out of host memory");
    LV_TRY(embed_prompt(&r->m, r->o.prompt, r->y, r->mask, warn, user));
    if (r->uncond)
        LV_TRY(embed_prompt(&r->m, r->o.negative_prompt ? r->o.negative_prompt : "",
                            r->y + (size_t)r->text_len * cap, r->mask + r->text_len, warn, user));
    return LV_OK;
}

static lv_status encode_frames(gen_run *r, const float *frames, int n, int h, int w) {
    const float *src = frames;
    if (r->o.scale > 1) {
        upscale(frames, n, h, w, r->o.scale, r->big);
        src = r->big;
    }
    LV_TRY(lv_encoder_write_float(r->enc, src, n, LV_LAYOUT_CFHW));
    r->frames_done += n;
    return LV_OK;
}

static lv_status on_vae_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index;
    return encode_frames(user, rgb, 1, height, width);
}

/* A finished chunk of n model frames, starting at model frame f0, to the output. */
static lv_status emit_chunk(gen_run *r, int f0, int n) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    if (r->m.card.pixel) {
        LV_TRY(encode_frames(r, r->x0, n, r->grid_h, r->grid_w));
        return lv_encoder_flush_block(r->enc);
    }
    if (r->vae) {
        LV_TRY(lv_vae_decode_frames_cb(r->ctx, r->vae, r->x0, n, r->grid_h, r->grid_w, on_vae_frame, r));
        return lv_encoder_flush_block(r->enc);
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

static lv_status open_output(gen_run *r, int64_t keep_frames) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    int maxf = lv_generate_chunk_frames(r->units, r->o.block_frames, 0);
    size_t chunk = (size_t)cfg->in_channels * maxf * r->grid_h * r->grid_w;
    r->x0 = malloc(chunk * sizeof *r->x0);
    if (!r->x0) return lv_error(LV_ERR_NOMEM, "out of host memory");
    if (!r->m.card.pixel && !r->o.vae_path) {
        r->latents = malloc((size_t)cfg->in_channels * r->units * r->grid_h * r->grid_w * sizeof *r->latents);
        return r->latents ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for the latents");
    }
    if (r->o.vae_path) {
        LV_TRY(lv_weights_open(r->o.vae_path, &r->vae_weights));
        LV_TRY(lv_vae_decoder_create(r->ctx, r->vae_weights, &r->vae));
        lv_vae_set_clamp(r->vae, 1);
        if (lv_vae_z_dim(r->vae) != cfg->in_channels)
            return lv_error(LV_ERR_INVALID, "the VAE %s has %d latent channels, the model %d", r->o.vae_path,
                            lv_vae_z_dim(r->vae), cfg->in_channels);
    }
    /* frames reaching the encoder at once: a pixel chunk, or one decoded frame */
    size_t frame = (size_t)3 * r->o.height * r->o.width;
    size_t at_once = r->m.card.pixel ? (size_t)maxf : 1;
    if (r->o.scale > 1) {
        r->big = malloc(at_once * frame * (size_t)r->o.scale * r->o.scale * sizeof *r->big);
        if (!r->big) return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    int out_w = r->o.width * r->o.scale, out_h = r->o.height * r->o.scale;
    if (r->o.resume)
        return lv_encoder_open_resume(r->o.output, out_w, out_h, r->o.fps, &r->o.encoder, keep_frames, &r->enc);
    return lv_encoder_open(r->o.output, out_w, out_h, r->o.fps, &r->o.encoder, &r->enc);
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
            lv_encoder_abort(r->enc);
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
    lv_gen_model_close(&r->m);
    free(r->y);
    free(r->mask);
    free(r->x0);
    free(r->last_frame);
    free(r->big);
    free(r->latents);
}

/* The CFG twin pays when the unconditional passes can run on a core of their own: a CPU
 * device whose kernels run inline on lavapipe's queue thread (cpu_threads 0), two cores
 * or more, block-by-block sampling with some CFG. Elsewhere it only doubles the memory. */
static bool use_twin(const gen_run *r, int cpu_threads) {
    if (r->o.parallel_cfg == 0 || !r->uncond || r->o.sampler != LV_GEN_LONGSANA) return false;
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

lv_status lv_generate(const lv_generate_options *opt_in, lv_generate_callback progress,
                      void (*warn)(void *user, const char *message), void *user,
                      volatile sig_atomic_t *stop) {
    gen_run r;
    memset(&r, 0, sizeof r);
    LV_TRY(lv_gen_model_open(opt_in->model_path, &r.m));
    lv_generate_options *o = &r.o;
    lv_status s = resolve_options(opt_in, &r);
    const lv_sana_config *cfg = lv_sana_file_config(r.m.file);
    char state_path[4096];
    if (opt_in->state_path) snprintf(state_path, sizeof state_path, "%s", opt_in->state_path);
    else snprintf(state_path, sizeof state_path, "%s.longvk-state", opt_in->output ? opt_in->output : "");

    if (s == LV_OK) s = prepare_text(&r, warn, user);
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.device_index = o->device_index;
    copt.cpu_threads = o->cpu_threads;
    if (s == LV_OK && o->cpu_threads == LV_GEN_CPU_THREADS_AUTO) {
        int64_t tokens = (int64_t)((o->block_frames + cfg->patch[0] - 1) / cfg->patch[0]) * frame_tokens(&r);
        copt.cpu_threads = lv_generate_auto_cpu_threads(tokens, cfg->hidden);
    }
    if (s == LV_OK) s = lv_ctx_create(&copt, &r.ctx);
    lv_dit_options dopt = {.cached_blocks = o->cached_blocks};
    if (s == LV_OK) s = lv_dit_create(r.ctx, r.m.file, &dopt, &r.dit);
    if (s == LV_OK) s = set_texts(&r, r.ctx, r.dit);
    if (s == LV_OK && use_twin(&r, copt.cpu_threads)) s = twin_open(&r, &copt, &dopt);

    int chunks = lv_generate_chunk_count(r.units, o->block_frames);
    int first_chunk = 0;
    int64_t done_units = 0;
    r.frame_values = (int64_t)cfg->in_channels * r.grid_h * r.grid_w;
    if (s == LV_OK && !(r.last_frame = calloc((size_t)r.frame_values, sizeof *r.last_frame)))
        s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK && o->resume) {
        lv_gen_resume resume;
        s = lv_gen_resume_load(r.ctx, r.dit, state_path, o, &r.m, &resume, r.last_frame, r.frame_values);
        if (s == LV_OK && r.twin) s = twin_copy_state(&r, resume.chunks_done);
        first_chunk = resume.chunks_done;
        done_units = resume.frames_done;
        r.frames_done = resume.frames_done;
    }
    if (s == LV_OK) s = open_output(&r, done_units);
    double t_start = now();
    int64_t frames_at_start = r.frames_done;
    int64_t frames_total = r.m.card.pixel || !o->vae_path ? r.units : 1 + 4 * (int64_t)(r.units - 1);
    if (s == LV_OK && o->sampler != LV_GEN_LONGSANA) {
        lv_clip_options clip = {.steps = o->steps, .shift = o->shift, .cfg_scale = o->cfg_scale,
                                .solver = o->sampler == LV_GEN_EULER ? LV_SOLVER_EULER : LV_SOLVER_DPMPP_2M,
                                .seed = o->seed};
        s = lv_sample_clip(r.ctx, r.dit, &clip, r.units, r.grid_h, r.grid_w, r.x0);
        if (s == LV_OK) s = emit_chunk(&r, 0, r.units);
        first_chunk = chunks; /* done */
        if (s == LV_OK && progress) {
            double t = now() - t_start;
            lv_generate_progress p = {.block = 1, .blocks = 1, .frames_done = r.frames_done,
                                      .frames_total = frames_total, .seconds = t,
                                      .frames_per_second = t > 0 ? (double)r.frames_done / t : 0,
                                      .state_bytes = 0, /* one clip: nothing is carried */
                                      .device = lv_ctx_device(r.ctx)->name};
            progress(user, &p);
        }
    }
    /* Chunks 0 .. burn-1 are the burn-in: made and committed to the carried state like the
     * others, then dropped. Chunk c's noise stream is c, its position in the video (RoPE)
     * counts every frame made, the burn-in's too. */
    int burn = o->burn_in_blocks;
    for (int c = first_chunk; s == LV_OK && c < burn + chunks; c++) {
        bool shown = c >= burn;
        if (stop && *stop && c > burn) { /* once a block is written (the burn-in is short) */
            s = lv_error(LV_ERR_INTERRUPTED, "interrupted after %lld of %lld frames",
                         (long long)r.frames_done, (long long)frames_total);
            break;
        }
        int n = shown ? lv_generate_chunk_frames(r.units, o->block_frames, c - burn) : o->block_frames;
        int position = shown ? (int)((int64_t)burn * o->block_frames + done_units) : c * o->block_frames;
        const lv_block_recipe *rec = c == 0 || !lv_dit_carries_state(r.dit) ? &r.first : &r.later;
        lv_chunk_options chunk_opt = {.timesteps = rec->timesteps, .steps = rec->steps, .seed = o->seed,
                                      .cfg_scale = rec->cfg_scale, .sampler = rec->sampler,
                                      .cfg_last_steps = rec->cfg_last_steps,
                                      .warm = rec->warm_start ? r.last_frame : NULL,
                                      .twin = r.twin};
        s = lv_longsana_chunk(r.ctx, r.dit, &chunk_opt, c, position, n, r.grid_h, r.grid_w, r.x0);
        if (s == LV_OK) keep_last_frame(&r, n);
        if (s == LV_OK && shown) s = emit_chunk(&r, (int)done_units, n);
        if (shown) done_units += n;
        if (s == LV_OK && shown && r.m.card.pixel)
            s = lv_gen_resume_save(r.ctx, r.dit, state_path, o, &r.m, c + 1, done_units, r.last_frame,
                                   r.frame_values);
        if (s == LV_OK && progress) {
            double t = now() - t_start;
            int made = c + 1 - first_chunk; /* blocks this run; they cost about the same */
            lv_generate_progress p = {
                .block = c + 1, .blocks = burn + chunks, .burn_in_blocks = burn, .frames_done = r.frames_done,
                .frames_total = frames_total, .seconds = t,
                .frames_per_second = t > 0 ? (double)(r.frames_done - frames_at_start) / t : 0,
                .eta_seconds = t / made * (burn + chunks - c - 1),
                .state_bytes = lv_dit_carries_state(r.dit) ? lv_dit_state_bytes(r.dit) : 0,
                .device = lv_ctx_device(r.ctx)->name};
            progress(user, &p);
        }
    }
    s = close_output(&r, s);
    if (s == LV_OK) remove(state_path); /* finished: nothing to resume */
    run_free(&r);
    return s;
}
