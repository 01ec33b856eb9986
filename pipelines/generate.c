/* Long-video generation: LongSANA chunk after chunk over the carried state, each finished
 * chunk straight to the encoder and a resume file at every block boundary (see
 * longvk/generate.h). Host memory holds one chunk; device memory holds the weights, the
 * fixed-size carried state and one pass's activations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "generate_internal.h"
#include "longvk/dit.h"
#include "longvk/sampler.h"

void lv_generate_options_default(lv_generate_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->frames = 0;
    opt->seconds = 60;
    opt->scale = 1;
    opt->cfg_scale = -1;
    opt->block_frames = 0;
    opt->cached_blocks = -1;
    opt->device_index = -1;
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

/* Text: the prompt through the card's tokenizer and the model's embedding table. */
static lv_status embed_prompt(const lv_gen_model *m, const char *prompt, float *y, float *mask,
                              void (*warn)(void *, const char *), void *user) {
    const lv_model_card *card = &m->card;
    const lv_weight *table = m->text_table;
    int cap = lv_sana_file_config(m->file)->caption_channels;
    int *ids = malloc((size_t)card->text_len * sizeof *ids);
    if (!ids) return lv_error(LV_ERR_NOMEM, "out of host memory");
    char unknown[512];
    lv_status s = lv_model_card_tokenize(card, prompt, ids, mask, unknown, sizeof unknown);
    if (s == LV_OK && unknown[0] && warn) {
        char msg[700];
        snprintf(msg, sizeof msg, "ignoring words the model does not know: %s (see `longvk info` for "
                 "its vocabulary)", unknown);
        warn(user, msg);
    }
    for (int i = 0; s == LV_OK && i < card->text_len; i++)
        memcpy(y + (size_t)i * cap, (const float *)table->data + (size_t)ids[i] * cap, (size_t)cap * sizeof *y);
    free(ids);
    return s;
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

static lv_status resolve_options(const lv_generate_options *in, const lv_gen_model *m,
                                 lv_generate_options *o) {
    const lv_model_card *card = &m->card;
    *o = *in;
    if (!card->pixel)
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s works in a VAE's latent space: `generate` makes videos with pixel-space "
                        "models (like the default one); use `longvk forward` for latent models",
                        m->name);
    if (o->fps <= 0) o->fps = card->fps;
    if (o->frames <= 0) o->frames = (int)lround(o->seconds * o->fps);
    if (o->frames < 1) return lv_error(LV_ERR_INVALID, "the video needs at least one frame");
    if (!o->height) o->height = card->height;
    if (!o->width) o->width = card->width;
    const lv_sana_config *cfg = lv_sana_file_config(m->file);
    if (o->height % cfg->patch[1] || o->width % cfg->patch[2])
        return lv_error(LV_ERR_INVALID, "-W/-H %dx%d must be multiples of the model's patch %dx%d",
                        o->width, o->height, cfg->patch[2], cfg->patch[1]);
    if (o->scale < 1 || o->scale > 64) return lv_error(LV_ERR_INVALID, "--scale must be in [1, 64]");
    if (o->block_frames <= 0) o->block_frames = card->block_frames;
    if (o->cached_blocks < 0) o->cached_blocks = card->cached_blocks;
    if (o->steps <= 0) o->steps = card->steps;
    if (o->steps > card->steps)
        return lv_error(LV_ERR_INVALID, "--steps %d: this model samples with at most %d steps per chunk",
                        o->steps, card->steps);
    if (o->cfg_scale < 0) o->cfg_scale = card->cfg_scale;
    if (!o->output) return lv_error(LV_ERR_INVALID, "no output file (-o)");
    return LV_OK;
}

/* The first `steps` of the card's schedule, spread over it: steps = 2 of [1000, 750, 500,
 * 250] gives [1000, 500]. */
static void pick_timesteps(const lv_model_card *card, int steps, float *out) {
    for (int i = 0; i < steps; i++) out[i] = card->timesteps[(i * card->steps) / steps];
}

lv_status lv_generate(const lv_generate_options *opt_in, lv_generate_callback progress,
                      void (*warn)(void *user, const char *message), void *user,
                      volatile sig_atomic_t *stop) {
    lv_gen_model m;
    LV_TRY(lv_gen_model_open(opt_in->model_path, &m));
    lv_generate_options o;
    lv_ctx *ctx = NULL;
    lv_dit *dit = NULL;
    lv_encoder *enc = NULL;
    float *y = NULL, *mask = NULL, *x0 = NULL, *big = NULL;
    lv_gen_resume resume = {0};
    lv_status s = resolve_options(opt_in, &m, &o);
    const lv_sana_config *cfg = lv_sana_file_config(m.file);
    char state_path[4096];
    if (o.state_path) snprintf(state_path, sizeof state_path, "%s", o.state_path);
    else snprintf(state_path, sizeof state_path, "%s.longvk-state", o.output ? o.output : "");

    if (s == LV_OK) {
        y = malloc((size_t)m.card.text_len * cfg->caption_channels * 2 * sizeof *y);
        mask = malloc((size_t)m.card.text_len * 2 * sizeof *mask);
        if (!y || !mask) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (s == LV_OK) s = embed_prompt(&m, o.prompt, y, mask, warn, user);
    if (s == LV_OK && o.cfg_scale != 1.0)
        s = embed_prompt(&m, o.negative_prompt ? o.negative_prompt : "",
                         y + (size_t)m.card.text_len * cfg->caption_channels, mask + m.card.text_len, warn, user);
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.device_index = o.device_index;
    if (s == LV_OK) s = lv_ctx_create(&copt, &ctx);
    lv_dit_options dopt = {.cached_blocks = o.cached_blocks};
    if (s == LV_OK) s = lv_dit_create(ctx, m.file, &dopt, &dit);
    if (s == LV_OK) s = lv_dit_set_text(ctx, dit, 0, y, m.card.text_len, mask);
    if (s == LV_OK && o.cfg_scale != 1.0)
        s = lv_dit_set_text(ctx, dit, 1, y + (size_t)m.card.text_len * cfg->caption_channels,
                            m.card.text_len, mask + m.card.text_len);

    int chunks = lv_generate_chunk_count(o.frames, o.block_frames);
    int first_chunk = 0;
    int64_t frames_done = 0;
    if (s == LV_OK && o.resume) {
        s = lv_gen_resume_load(ctx, dit, state_path, &o, &m, &resume);
        first_chunk = resume.chunks_done;
        frames_done = resume.frames_done;
    }
    int out_w = o.width * o.scale, out_h = o.height * o.scale;
    if (s == LV_OK) {
        if (o.resume)
            s = lv_encoder_open_resume(o.output, out_w, out_h, o.fps, &o.encoder, frames_done, &enc);
        else
            s = lv_encoder_open(o.output, out_w, out_h, o.fps, &o.encoder, &enc);
    }
    int maxf = lv_generate_chunk_frames(o.frames, o.block_frames, 0);
    size_t chunk_values = (size_t)cfg->in_channels * maxf * o.height * o.width;
    if (s == LV_OK) {
        x0 = malloc(chunk_values * sizeof *x0);
        if (o.scale > 1) big = malloc(chunk_values * (size_t)o.scale * o.scale * sizeof *big);
        if (!x0 || (o.scale > 1 && !big)) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    float timesteps[LV_CARD_MAX_STEPS];
    pick_timesteps(&m.card, o.steps, timesteps);
    lv_chunk_options chunk_opt = {.timesteps = timesteps, .steps = o.steps, .seed = o.seed,
                                  .cfg_scale = o.cfg_scale};
    double t_start = now();
    int64_t frames_this_run = 0;
    for (int c = first_chunk; s == LV_OK && c < chunks; c++) {
        if (stop && *stop) {
            s = lv_error(LV_ERR_INTERRUPTED, "interrupted after %lld of %d frames",
                         (long long)frames_done, o.frames);
            break;
        }
        int n = lv_generate_chunk_frames(o.frames, o.block_frames, c);
        s = lv_longsana_chunk(ctx, dit, &chunk_opt, c, (int)frames_done, n, o.height, o.width, x0);
        if (s != LV_OK) break;
        if (o.scale > 1) upscale(x0, n, o.height, o.width, o.scale, big);
        s = lv_encoder_write_float(enc, o.scale > 1 ? big : x0, n, LV_LAYOUT_CFHW);
        if (s == LV_OK) s = lv_encoder_flush_block(enc);
        frames_done += n;
        frames_this_run += n;
        if (s == LV_OK) s = lv_gen_resume_save(ctx, dit, state_path, &o, &m, c + 1, frames_done);
        if (s == LV_OK && progress) {
            double t = now() - t_start;
            double fps = t > 0 ? (double)frames_this_run / t : 0;
            lv_generate_progress p = {
                .block = c + 1, .blocks = chunks, .frames_done = frames_done,
                .frames_total = o.frames, .seconds = t, .frames_per_second = fps,
                .eta_seconds = fps > 0 ? (double)(o.frames - frames_done) / fps : 0,
                .state_bytes = lv_dit_state_bytes(dit), .device = lv_ctx_device(ctx)->name};
            progress(user, &p);
        }
    }
    if (enc) {
        if (s == LV_OK || s == LV_ERR_INTERRUPTED) {
            char saved[1024];
            snprintf(saved, sizeof saved, "%s", lv_last_error());
            lv_status cs = lv_encoder_close(enc);
            if (s == LV_OK) s = cs;
            else if (cs == LV_OK) lv_error(s, "%s", saved);
        } else {
            lv_encoder_abort(enc);
        }
    }
    if (s == LV_OK) remove(state_path); /* finished: nothing to resume */
    if (dit) lv_dit_destroy(ctx, dit);
    if (ctx) lv_ctx_destroy(ctx);
    lv_gen_model_close(&m);
    free(y);
    free(mask);
    free(x0);
    free(big);
    return s;
}
