/* --image: the picture a video starts from (image-to-video, SANA-Video's
 * SanaImageToVideoPipeline). The image is read by FFmpeg's decoders (the codec layer's
 * lv_decoder: PNG, JPEG, WebP, or a video's first frame), fitted to the model's frame size
 * (scale and centre-crop), normalised as the model's pixels are, then turned into what the
 * first chunk holds clean in its frame 0 by the model's "frames -> conditioning" step:
 * the frames themselves for a pixel-space model, the Wan2.1 VAE encoder's normalised latents
 * for a latent model (generate_vae_encode.c; run on the device once it is up, before the DiT
 * is uploaded: lv_gen_encode_image). The chunk sampler does the rest
 * (lv_chunk_options.cond_frames, pipelines/sampling/longsana.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "generate_run.h"

/* The model's "frames -> conditioning" step: rgb [3, frames, H, W] in [-1, 1] at the model's
 * pixel size (o.height x o.width) into the clean values of the first chunk's leading frames,
 * cond [C, cond_frames, grid_h, grid_w] (malloc'd). One per kind of model. */
typedef lv_status (*gen_frames_to_cond)(const gen_run *r, const float *rgb, int frames, float **cond,
                                        int *cond_frames);

/* A pixel-space model's frames are its own values: the image, as it is. */
static lv_status pixel_frames(const gen_run *r, const float *rgb, int frames, float **cond, int *cond_frames) {
    size_t n = (size_t)3 * frames * r->grid_h * r->grid_w;
    if (!(*cond = malloc(n * sizeof **cond))) return lv_error(LV_ERR_NOMEM, "out of host memory for --image");
    memcpy(*cond, rgb, n * sizeof **cond);
    *cond_frames = frames;
    return LV_OK;
}

/* A latent model's frames are the VAE encoder's latents (one latent frame for the first
 * pixel frame, 1 + 4k frames for 1 + k), already normalised as SANA-Video's pipeline does it
 * (generate_vae_encode.c): on the run's context, which must be up. */
static lv_status latent_frames(const gen_run *r, const float *rgb, int frames, float **cond, int *cond_frames) {
    const int C = lv_sana_file_config(r->m.file)->in_channels, F = lv_vae_encoded_frames(frames);
    if (!(*cond = malloc((size_t)C * F * r->grid_h * r->grid_w * sizeof **cond)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for --image");
    lv_status s = lv_gen_vae_encode(r, "--image", rgb, frames, *cond);
    if (s != LV_OK) {
        free(*cond);
        *cond = NULL;
        return s;
    }
    *cond_frames = F;
    return LV_OK;
}

/* The step of this run's model, or an error saying why there is none: a latent model needs a
 * VAE file with the encoder half. */
static lv_status frames_to_cond_of(const gen_run *r, gen_frames_to_cond *out) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    if (!r->m.card.pixel) {
        LV_TRY(lv_gen_vae_encoder_check(r, "--image"));
        *out = latent_frames;
        return LV_OK;
    }
    if (cfg->in_channels != 3)
        return lv_error(LV_ERR_UNSUPPORTED, "--image: %s is a pixel-space model of %d channels, not RGB", r->m.name,
                        cfg->in_channels);
    *out = pixel_frames;
    return LV_OK;
}

/* What a run with an image cannot be (a single clip takes one too: lv_clip_options.cond), checked with the other options before anything is
 * opened or written (lv_gen_resolve_options). */
lv_status lv_gen_image_check(const gen_run *r, const lv_generate_options *in) {
    if (!r->o.image_path) return LV_OK;
    if (in->continue_path || in->continue_frames)
        return lv_error(LV_ERR_INVALID, "--image and --continue: one or the other (both say what the video starts "
                        "from: a picture as its frame 0, or a clip it goes on from)");
    gen_frames_to_cond step = NULL; /* set by frames_to_cond_of when it returns LV_OK */
    LV_TRY(frames_to_cond_of(r, &step));
    if (in->burn_in_blocks != LV_GEN_MODEL_DEFAULT && in->burn_in_blocks > 0)
        return lv_error(LV_ERR_INVALID, "--image with --burn-in-blocks %d: the image is the video's first frame, so "
                        "no block can be made and dropped before it (leave --burn-in-blocks out, or give 0)",
                        in->burn_in_blocks);
    return LV_OK;
}

/* One axis of an area-average resample: dst[i] (m values, stride ds) is the mean of src (n
 * values, stride ss) over [i n / m, (i + 1) n / m), each source pixel weighed by how much of
 * it the interval covers. n = m copies; n > m averages; n < m repeats (each source pixel
 * covers whole target pixels or shares one with its neighbour). */
static void resample_axis(const float *src, int n, size_t ss, float *dst, int m, size_t ds) {
    for (int i = 0; i < m; i++) {
        double a = (double)i * n / m, b = (double)(i + 1) * n / m, sum = 0;
        for (int j = (int)floor(a); j < n && j < b; j++) {
            double w = fmin(b, j + 1.0) - fmax(a, (double)j);
            if (w > 0) sum += w * src[(size_t)j * ss];
        }
        dst[(size_t)i * ds] = (float)(sum / (b - a));
    }
}

/* rgb bytes [sh, sw, 3] -> [3, th, tw] floats in [-1, 1]: the largest centred window of the
 * target's aspect ratio, area-averaged to the target size, then x = byte / 127.5 - 1 (the
 * inverse of what the encoder stores, uint8(127.5 x + 127.5)). */
static lv_status fit_image(const uint8_t *rgb, int sw, int sh, int tw, int th, float *out, int *cw, int *ch) {
    if ((int64_t)sw * th > (int64_t)sh * tw) { /* wider than the model's frame: crop columns */
        *ch = sh;
        *cw = (int)llround((double)sh * tw / th);
    } else {
        *cw = sw;
        *ch = (int)llround((double)sw * th / tw);
    }
    if (*cw < 1) *cw = 1;
    if (*ch < 1) *ch = 1;
    int x0 = (sw - *cw) / 2, y0 = (sh - *ch) / 2;
    float *win = malloc((size_t)*cw * *ch * sizeof *win), *rows = malloc((size_t)*cw * th * sizeof *rows);
    if (!win || !rows) {
        free(win);
        free(rows);
        return lv_error(LV_ERR_NOMEM, "out of host memory for --image (%dx%d)", sw, sh);
    }
    for (int c = 0; c < 3; c++) {
        for (int y = 0; y < *ch; y++)
            for (int x = 0; x < *cw; x++) win[(size_t)y * *cw + x] = rgb[((size_t)(y0 + y) * sw + x0 + x) * 3 + c];
        for (int x = 0; x < *cw; x++) resample_axis(win + x, *ch, (size_t)*cw, rows + x, th, (size_t)*cw);
        float *plane = out + (size_t)c * th * tw;
        for (int y = 0; y < th; y++) resample_axis(rows + (size_t)y * *cw, *cw, 1, plane + (size_t)y * tw, tw, 1);
        for (size_t p = 0; p < (size_t)th * tw; p++) plane[p] = plane[p] / 127.5f - 1.0f;
    }
    free(win);
    free(rows);
    return LV_OK;
}

/* The first frame of `path` as 8-bit RGB (*rgb malloc'd, *w x *h). */
static lv_status read_first_frame(const char *path, uint8_t **rgb, int *w, int *h) {
    lv_decoder *dec;
    *rgb = NULL;
    *w = *h = 0;
    lv_status s = lv_decoder_open(path, &dec);
    if (s != LV_OK) return lv_error_prefix(s, "--image %s: not an image FFmpeg reads (PNG, JPEG, WebP, ...)", path);
    const lv_video_info *info = lv_decoder_info(dec);
    *w = info->width;
    *h = info->height;
    int end = 0;
    if (!(*rgb = malloc((size_t)*w * *h * 3))) s = lv_error(LV_ERR_NOMEM, "out of host memory for --image %s", path);
    if (s == LV_OK && (s = lv_decoder_next(dec, *rgb, NULL, &end)) != LV_OK)
        lv_error_prefix(s, "--image %s: decoding it", path);
    if (s == LV_OK && end) s = lv_error(LV_ERR_FORMAT, "--image %s: it holds no picture (no frame decodes)", path);
    lv_decoder_close(dec);
    if (s != LV_OK) {
        free(*rgb);
        *rgb = NULL;
    }
    return s;
}

lv_status lv_gen_prepare_image(gen_run *r, void (*warn)(void *, const char *), void *user) {
    if (!r->o.image_path) return LV_OK;
    gen_frames_to_cond step = NULL; /* set by frames_to_cond_of when it returns LV_OK */
    LV_TRY(frames_to_cond_of(r, &step));
    uint8_t *rgb = NULL;
    int sw = 0, sh = 0, cw = 0, ch = 0, tw = r->o.width, th = r->o.height;
    LV_TRY(read_first_frame(r->o.image_path, &rgb, &sw, &sh));
    float *frame = malloc((size_t)3 * tw * th * sizeof *frame);
    lv_status s = frame ? fit_image(rgb, sw, sh, tw, th, frame, &cw, &ch)
                        : lv_error(LV_ERR_NOMEM, "out of host memory for --image");
    free(rgb);
    if (s == LV_OK && warn && (cw != sw || ch != sh)) {
        char msg[512];
        snprintf(msg, sizeof msg, "--image %s is %dx%d, the model's frames %dx%d (another aspect ratio): its centre "
                 "%dx%d is used (%d %s cropped), scaled to %dx%d", r->o.image_path, sw, sh, tw, th, cw, ch,
                 cw != sw ? sw - cw : sh - ch, cw != sw ? "columns" : "rows", tw, th);
        warn(user, msg);
    }
    /* a pixel model's step needs no device: done now, before the resume file is first written;
     * a latent model's waits for the device (lv_gen_encode_image) */
    if (s == LV_OK && r->m.card.pixel) s = step(r, frame, 1, &r->cond, &r->cond_frames);
    if (s == LV_OK && !r->m.card.pixel) {
        r->image = frame;
        return LV_OK;
    }
    free(frame);
    return s;
}

lv_status lv_gen_encode_image(gen_run *r) {
    if (!r->image) return LV_OK;
    if (r->root) {
        gen_frames_to_cond step = NULL; /* set by frames_to_cond_of when it returns LV_OK */
        LV_TRY(frames_to_cond_of(r, &step));
        LV_TRY(step(r, r->image, 1, &r->cond, &r->cond_frames));
    }
    free(r->image);
    r->image = NULL;
    if (lv_gen_several(r)) { /* the writing process encoded it; the others get its latents */
        const size_t n = (size_t)lv_sana_file_config(r->m.file)->in_channels * r->grid_h * r->grid_w;
        r->cond_frames = 1;
        if (!r->cond && !(r->cond = malloc(n * sizeof *r->cond)))
            return lv_error(LV_ERR_NOMEM, "out of host memory for --image");
        LV_TRY(lv_gen_share(r, r->cond, n * sizeof *r->cond));
    }
    lv_gen_keep_cond_frame(r);
    return LV_OK;
}



void lv_gen_keep_cond_frame(gen_run *r) {
    size_t plane = (size_t)r->grid_h * r->grid_w;
    int C = lv_sana_file_config(r->m.file)->in_channels;
    for (int c = 0; c < C; c++)
        memcpy(r->last_frame + c * plane, r->cond + ((size_t)c * r->cond_frames + r->cond_frames - 1) * plane,
               plane * sizeof *r->last_frame);
}

char *lv_gen_image_identity(const lv_generate_options *o) {
    return o->image_path ? lv_gen_file_identity(o->image_path) : NULL;
}

char *lv_gen_file_identity(const char *path) {
    char *id = malloc(64);
    FILE *f = fopen(path, "rb");
    if (!id || !f) {
        if (f) fclose(f);
        if (id) snprintf(id, 64, "unreadable");
        return id;
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    unsigned char buf[65536];
    size_t got;
    long long bytes = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        crc = crc32(crc, buf, (uInt)got);
        bytes += (long long)got;
    }
    fclose(f);
    snprintf(id, 64, "crc32:%08lx, %lld bytes", (unsigned long)crc, bytes);
    return id;
}
