/* Continuing a clip (lv_generate_options.continue_path / continue_frames; the design:
 * README.md, "Continuing a clip"): the run's chunks with the clip's blocks in place of the
 * blocks an uninterrupted run would have made first, the clip's frames brought into the
 * model's space and committed through the write pass, so that the new blocks find the
 * carried state, the conv cache, the warm start, the noise streams and the RoPE positions
 * where an uninterrupted run leaves them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "generate_run.h"
#include "longvk/sampler.h"

/* Frames into the model's space: the one step that differs between a pixel-space model
 * (its own normalisation and size: pixel_frame, block by block as the clip is committed) and
 * a latent model (the frames at the model's pixel size through the Wan2.1 VAE's encoder, the
 * whole clip at once before the DiT is uploaded: lv_gen_continue_encode; the encoder is
 * causal over the whole clip, as the original's encode is). */

/* The crop (the clip's centred rectangle of the target's aspect) box-averaged to height x
 * width: each target pixel averages the source pixels whose centres fall in its box (an
 * exact s x s average when the clip is s times the target, the identity at the same size;
 * the nearest pixel when the target is the larger), as x = mean / 127.5 - 1, the inverse
 * of the encoder's byte = round(127.5 x + 127.5). */
static void pixel_frame(const gen_clip *c, const uint8_t *rgb, int height, int width, float *out, int t, int n) {
    const size_t plane = (size_t)height * width;
    for (int y = 0; y < height; y++) {
        double a = c->crop_y + (double)y * c->crop_h / height, b = c->crop_y + (double)(y + 1) * c->crop_h / height;
        int y0 = (int)ceil(a - 0.5), y1 = (int)ceil(b - 0.5); /* centres i + 0.5 in [a, b) */
        if (y1 <= y0) y1 = (y0 = (int)floor((a + b) / 2)) + 1;
        for (int x = 0; x < width; x++) {
            double l = c->crop_x + (double)x * c->crop_w / width, r = c->crop_x + (double)(x + 1) * c->crop_w / width;
            int x0 = (int)ceil(l - 0.5), x1 = (int)ceil(r - 0.5);
            if (x1 <= x0) x1 = (x0 = (int)floor((l + r) / 2)) + 1;
            for (int ch = 0; ch < 3; ch++) {
                double sum = 0;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) sum += rgb[((size_t)yy * c->in_w + xx) * 3 + ch];
                double mean = sum / ((double)(y1 - y0) * (x1 - x0));
                out[((size_t)ch * n + t) * plane + (size_t)y * width + x] = (float)(mean / 127.5 - 1.0);
            }
        }
    }
}

/* Blocks of a run of `total` frames before block k: the first takes the remainder. */
static int frames_before(int total, int B, int k) {
    return k == 0 ? 0 : lv_generate_chunk_frames(total, B, 0) + (k - 1) * B;
}

int lv_gen_written_units(const gen_run *r) {
    return r->units + (r->o.continue_output == LV_GEN_CONTINUE_WHOLE ? r->clip.frames : 0);
}

int64_t lv_gen_output_frames(const gen_run *r) {
    const gen_clip *c = &r->clip;
    const bool whole = r->o.continue_output == LV_GEN_CONTINUE_WHOLE;
    if (r->m.card.pixel || !r->o.vae_path) return lv_gen_written_units(r); /* model frames */
    if (!c->frames) return 1 + 4 * (int64_t)(r->units - 1); /* the VAE: frame 0 alone, then 4 a latent */
    return 4 * (int64_t)r->units + (whole ? c->pixel_frames : 0); /* continuing the clip's */
}

int lv_gen_total_chunks(const gen_run *r) { return r->o.burn_in_blocks + r->clip.chunks + r->chunks; }

gen_chunk lv_gen_chunk(const gen_run *r, int c) {
    const int B = r->o.block_frames, burn = r->o.burn_in_blocks, F = r->clip.frames;
    const bool whole = r->o.continue_output == LV_GEN_CONTINUE_WHOLE;
    gen_chunk k = {0};
    if (c < burn) { /* made only when every clip block is committed after it */
        k = (gen_chunk){.kind = GEN_CHUNK_BURN_IN, .index = c, .frames = B, .position = c * B};
        k.made = k.committed = r->clip.commit_from == 0; /* burn-in: none without a state */
    } else if (c < burn + r->clip.chunks) {
        int j = c - burn;
        k = (gen_chunk){.kind = GEN_CHUNK_CLIP, .index = j, .frames = lv_generate_chunk_frames(F, B, j),
                        .first = frames_before(F, B, j)};
        k.position = burn * B + k.first;
        k.committed = j >= r->clip.commit_from && r->o.cached_blocks != 0;
        k.written = whole;
        /* the last block is read all the same: its last frame warm-starts the next; a latent
         * model's every block when the VAE decodes the new ones (its causal history primed) */
        k.read = j >= r->clip.commit_from || whole || j == r->clip.chunks - 1 || r->clip.prime_decoder;
        k.out_first = k.first;
    } else {
        int j = c - burn - r->clip.chunks;
        k = (gen_chunk){.kind = GEN_CHUNK_NEW, .index = j, .frames = lv_generate_chunk_frames(r->units, B, j),
                        .first = frames_before(r->units, B, j)};
        k.position = burn * B + F + k.first;
        k.out_first = (whole ? F : 0) + k.first;
        k.made = k.written = true;
        k.committed = r->o.cached_blocks != 0;
    }
    return k;
}

static int pixel_count(const gen_run *r, int first, int n);

int64_t lv_gen_frames_after(const gen_run *r, int chunks_done) {
    const bool vae = !r->m.card.pixel && r->o.vae_path; /* pixel frames through the VAE */
    int64_t f = 0;
    for (int c = 0; c < chunks_done; c++) {
        gen_chunk k = lv_gen_chunk(r, c);
        if (!k.written) continue;
        if (!vae) f += k.frames;
        else if (k.kind == GEN_CHUNK_NEW && r->clip.frames) f += 4 * (int64_t)k.frames; /* continuing the clip's */
        else f += pixel_count(r, k.first, k.frames); /* frame 0 alone, then 4 a latent frame */
    }
    return f;
}

int lv_gen_committed_after(const gen_run *r, int chunks_done) {
    int n = 0;
    for (int c = 0; c < chunks_done; c++) n += lv_gen_chunk(r, c).committed;
    return n;
}

/* CRC-32 of the clip file, for the run's identity (a resumed run must continue the same clip). */
static lv_status file_identity(const char *path, char *out, size_t size) {
    FILE *f = fopen(path, "rb");
    if (!f) return lv_error(LV_ERR_IO, "--continue %s: cannot be read", path);
    static unsigned char buf[1 << 16];
    uLong crc = crc32(0L, Z_NULL, 0);
    unsigned long long bytes = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        crc = crc32(crc, buf, (uInt)got);
        bytes += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return lv_error(LV_ERR_IO, "--continue %s: reading it failed", path);
    snprintf(out, size, "file crc32:%08lx, %llu bytes", (unsigned long)crc, bytes);
    return LV_OK;
}

/* Opens the clip file and checks it: a video stream, a size. */
static lv_status open_clip(const char *path, lv_decoder **dec) {
    lv_status s = lv_decoder_open(path, dec);
    if (s != LV_OK) return lv_error_prefix(s, "--continue %s", path);
    const lv_video_info *in = lv_decoder_info(*dec);
    if (in->width < 1 || in->height < 1) {
        lv_decoder_close(*dec);
        *dec = NULL;
        return lv_error(LV_ERR_FORMAT, "--continue %s: its video stream has no frame size", path);
    }
    return LV_OK;
}

lv_status lv_gen_resolve_continue(gen_run *r) {
    const lv_generate_options *o = &r->o;
    memset(&r->clip, 0, sizeof r->clip);
    if (!o->continue_path && !o->continue_frames) return LV_OK;
    const char *flag = o->continue_path ? "--continue" : "continue_frames";
    if (o->continue_path && o->continue_frames)
        return lv_error(LV_ERR_INVALID, "lv_generate: continue_path and continue_frames both set: one or the other");
    if (o->continue_output != LV_GEN_CONTINUE_WHOLE && o->continue_output != LV_GEN_CONTINUE_NEW)
        return lv_error(LV_ERR_INVALID, "lv_generate: continue_output %d (whole or new)", o->continue_output);
    const bool latent = !r->m.card.pixel;
    if (latent && o->continue_path) LV_TRY(lv_gen_vae_encoder_check(r, flag));
    if (o->sampler != LV_GEN_LONGSANA)
        return lv_error(LV_ERR_INVALID, "%s: block-wise generation only (the LongSANA sampler): a single clip "
                        "carries no state to continue from", flag);
    if ((o->schedule && o->schedule_count > 0) || o->live)
        return lv_error(LV_ERR_INVALID, "%s with a prompt schedule (--prompt-at, --schedule, --prompts-from): not "
                        "supported yet; give the continuation one prompt (-p)", flag);
    if (o->sp_comm || o->cfg_partner)
        return lv_error(LV_ERR_INVALID, "%s: one process only, not over MPI ranks (--sequence-parallel, "
                        "--cfg-parallel)", flag);
    gen_clip *c = &r->clip;
    if (o->continue_frames) {
        if (o->continue_count < 1)
            return lv_error(LV_ERR_INVALID, "lv_generate: continue_frames with continue_count %d", o->continue_count);
        c->frames = o->continue_count;
        const size_t n = (size_t)lv_sana_file_config(r->m.file)->in_channels * c->frames * r->grid_h * r->grid_w;
        snprintf(c->identity, sizeof c->identity, "frames crc32:%08lx, %d frames",
                 (unsigned long)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)o->continue_frames,
                                      (uInt)(n * sizeof(float))), c->frames);
    } else {
        LV_TRY(file_identity(o->continue_path, c->identity, sizeof c->identity));
        lv_decoder *dec;
        LV_TRY(open_clip(o->continue_path, &dec));
        int end = 0;
        int64_t count = 0;
        lv_status s = LV_OK;
        while (s == LV_OK && (s = lv_decoder_next(dec, NULL, NULL, &end)) == LV_OK && !end) count++;
        lv_decoder_close(dec);
        if (s != LV_OK) return lv_error_prefix(s, "--continue %s: frame %lld", o->continue_path, (long long)count);
        if (count > 10000000)
            return lv_error(LV_ERR_INVALID, "--continue %s: %lld frames: at most 10000000", o->continue_path,
                            (long long)count);
        c->frames = (int)count;
        if (latent) { /* pixel frame 0 alone, then 4 a latent frame; up to 3 past the last 1 + 4k unused */
            c->frames = lv_vae_encoded_frames((int)count);
            c->pixel_frames = count < 1 ? 0 : 1 + 4 * (c->frames - 1);
            c->dropped = (int)count - c->pixel_frames;
        }
    }
    if (latent) {
        /* the new part: 4 pixel frames a latent frame, continuing the clip's (not a video's
         * first frame alone); the VAE decoder is primed with the clip's latents */
        r->units = (o->frames + 3) / 4;
        r->chunks = lv_generate_chunk_count(r->units, o->block_frames);
        c->prime_decoder = o->vae_path != NULL;
        if (o->continue_frames) c->pixel_frames = 1 + 4 * (c->frames - 1);
    } else {
        c->pixel_frames = c->frames;
    }
    if (c->frames < o->block_frames)
        return lv_error(LV_ERR_INVALID, "%s%s%s: %d %sframe%s, too short for one block of %d frames: the state is "
                        "made of whole blocks", flag, o->continue_path ? " " : "",
                        o->continue_path ? o->continue_path : "", c->frames, latent ? "latent " : "",
                        c->frames == 1 ? "" : "s", o->block_frames);
    c->chunks = lv_generate_chunk_count(c->frames, o->block_frames);
    /* the blocks the state can hold: the window's K and one more, whose commit primes the conv
     * cache (its own terms leave the window again); every block with the additive state; none
     * without a state (lv_gen_chunk reads the last one for the warm start) */
    if (o->cached_blocks == 0) c->commit_from = c->chunks;
    else if (o->cached_blocks == LV_CACHED_ALL || o->cached_blocks + 1 >= c->chunks) c->commit_from = 0;
    else c->commit_from = c->chunks - (o->cached_blocks + 1);
    return LV_OK;
}

void lv_gen_continue_warn(const gen_run *r, void (*warn)(void *, const char *), void *user) {
    if (!warn || !r->o.continue_path) return;
    lv_decoder *dec;
    if (lv_decoder_open(r->o.continue_path, &dec) != LV_OK) return; /* the run says why */
    const lv_video_info *in = lv_decoder_info(dec);
    const int W = r->o.width, H = r->o.height, s = r->o.scale;
    char msg[1024];
    if ((int64_t)in->width * H != (int64_t)in->height * W) {
        snprintf(msg, sizeof msg, "--continue %s: %dx%d frames, another aspect than the model's %dx%d: its centre "
                 "is cropped to %d:%d and resized to %dx%d (and to %dx%d for the output)", r->o.continue_path,
                 in->width, in->height, W, H, W, H, W, H, W * s, H * s);
        warn(user, msg);
    } else if (in->width != W * s) {
        snprintf(msg, sizeof msg, "--continue %s: %dx%d frames resized to the model's %dx%d (box average)%s",
                 r->o.continue_path, in->width, in->height, W, H,
                 r->o.continue_output == LV_GEN_CONTINUE_WHOLE ? " and to the output's size" : "");
        warn(user, msg);
    }
    if (r->clip.dropped > 0) {
        snprintf(msg, sizeof msg, "--continue %s: %d frames, and the VAE encodes 1 + 4k of them (frame 0 alone, "
                 "then 4 a latent frame): its last %d frame%s %s not used (nor written), and the new frames follow "
                 "its frame %d", r->o.continue_path, r->clip.pixel_frames + r->clip.dropped, r->clip.dropped,
                 r->clip.dropped == 1 ? "" : "s", r->clip.dropped == 1 ? "is" : "are", r->clip.pixel_frames - 1);
        warn(user, msg);
    }
    if (in->fps > 0 && fabs(in->fps - r->o.fps) > 1e-3 * r->o.fps) {
        snprintf(msg, sizeof msg, "--continue %s: %g fps, this run %g fps: its frames are taken one for one (the "
                 "motion's speed changes)", r->o.continue_path, in->fps, r->o.fps);
        warn(user, msg);
    }
    lv_decoder_close(dec);
}

/* Opens the clip for reading its frames: the decoder, the centred crop of the model's aspect,
 * a frame's buffer. */
static lv_status open_for_frames(gen_run *r) {
    gen_clip *c = &r->clip;
    LV_TRY(open_clip(r->o.continue_path, &c->dec));
    const lv_video_info *in = lv_decoder_info(c->dec);
    c->in_w = in->width;
    c->in_h = in->height;
    c->next_frame = 0;
    const int W = r->o.width, H = r->o.height;
    c->crop_w = in->width, c->crop_h = in->height;
    if ((int64_t)in->width * H > (int64_t)in->height * W) c->crop_w = (int)((int64_t)in->height * W / H);
    else c->crop_h = (int)((int64_t)in->width * H / W);
    c->crop_x = (in->width - c->crop_w) / 2;
    c->crop_y = (in->height - c->crop_h) / 2;
    if (!c->rgb && !(c->rgb = malloc((size_t)in->width * in->height * 3)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the clip's frames");
    return LV_OK;
}

/* The pixel frames of model frames [first, first + n): the same for a pixel model; for a latent
 * model frame 0 is pixel frame 0 alone and latent frame f > 0 pixel frames 4f - 3 .. 4f. */
static int pixel_first(const gen_run *r, int first) { return r->m.card.pixel || first == 0 ? first : 1 + 4 * (first - 1); }
static int pixel_count(const gen_run *r, int first, int n) {
    return pixel_first(r, first + n) - pixel_first(r, first);
}

/* Decoded frames up to pixel frame `first` skipped. */
static lv_status skip_to(gen_run *r, int64_t first) {
    gen_clip *c = &r->clip;
    while (c->next_frame < first) {
        int end = 0;
        LV_TRY(lv_decoder_next(c->dec, NULL, NULL, &end));
        if (end) break;
        c->next_frame++;
    }
    return LV_OK;
}

/* The next decoded frame, which must be pixel frame `want`, into c->rgb. */
static lv_status next_frame(gen_run *r, int64_t want) {
    gen_clip *c = &r->clip;
    int end = 0;
    lv_status st = lv_decoder_next(c->dec, c->rgb, NULL, &end);
    if (st != LV_OK) return lv_error_prefix(st, "--continue %s: frame %lld", r->o.continue_path, (long long)want);
    if (end || c->next_frame != want)
        return lv_error(LV_ERR_FORMAT, "--continue %s: it ended at frame %lld, before the %d frames it had when "
                        "the run began (was it changed?)", r->o.continue_path, (long long)c->next_frame,
                        c->pixel_frames);
    c->next_frame++;
    return LV_OK;
}

lv_status lv_gen_continue_encode(gen_run *r) {
    gen_clip *c = &r->clip;
    if (!c->frames || r->m.card.pixel || !r->o.continue_path) return LV_OK;
    const size_t n = (size_t)lv_sana_file_config(r->m.file)->in_channels * c->frames * r->grid_h * r->grid_w;
    if (!(c->latents = malloc(n * sizeof *c->latents)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the clip's latents");
    lv_status s = LV_OK;
    if (r->root) { /* the whole clip at the model's pixel size, [3, T, H, W] (host memory: 12 bytes a pixel) */
        const int T = c->pixel_frames, H = r->o.height, W = r->o.width;
        float *rgb = malloc((size_t)3 * T * H * W * sizeof *rgb);
        if (!rgb) return lv_error(LV_ERR_NOMEM, "out of host memory for the clip's %d frames of %dx%d", T, W, H);
        s = open_for_frames(r);
        for (int t = 0; s == LV_OK && t < T; t++)
            if ((s = next_frame(r, t)) == LV_OK) pixel_frame(c, c->rgb, H, W, rgb, t, T);
        lv_decoder_close(c->dec);
        c->dec = NULL;
        if (s == LV_OK) s = lv_gen_vae_encode(r, "--continue", rgb, T, c->latents);
        free(rgb);
    }
    if (s == LV_OK && lv_gen_several(r)) s = lv_gen_share(r, c->latents, n * sizeof *c->latents);
    return s;
}

lv_status lv_gen_continue_open(gen_run *r, int first_chunk) {
    gen_clip *c = &r->clip;
    if (!c->frames || !r->o.continue_path) return LV_OK;
    if (first_chunk >= r->o.burn_in_blocks + c->chunks) return LV_OK; /* resumed past the clip */
    const bool whole = r->o.continue_output == LV_GEN_CONTINUE_WHOLE;
    /* a latent model's latents are encoded already: the file is read again only for its own
     * pixels in a video with the clip (not in a .npy of latents) */
    if (!r->m.card.pixel && !(whole && r->o.vae_path)) return LV_OK;
    LV_TRY(open_for_frames(r));
    const int maxf = lv_generate_chunk_frames(c->frames, r->o.block_frames, 0);
    const int maxp = r->m.card.pixel ? maxf : 4 * maxf; /* pixel frames of the largest block */
    if (whole && !(c->out = malloc((size_t)3 * maxp * r->o.height * r->o.scale * r->o.width * r->o.scale *
                                   sizeof *c->out)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the clip's frames");
    return LV_OK;
}

/* The block's frames from the file: a pixel model's into x0 (model space) and, for the
 * output, out; a latent model's (its latents are encoded already) into out only. */
static lv_status read_frames(gen_run *r, const gen_chunk *k) {
    const int H = r->o.height, W = r->o.width, s = r->o.scale;
    const int p0 = pixel_first(r, k->first), n = pixel_count(r, k->first, k->frames);
    LV_TRY(skip_to(r, p0)); /* blocks not read (resumed, or before the window) */
    for (int t = 0; t < n; t++) {
        LV_TRY(next_frame(r, p0 + t));
        if (r->m.card.pixel) pixel_frame(&r->clip, r->clip.rgb, r->grid_h, r->grid_w, r->x0, t, k->frames);
        if (k->written) pixel_frame(&r->clip, r->clip.rgb, H * s, W * s, r->clip.out, t, n);
    }
    return LV_OK;
}

lv_status lv_gen_continue_block(gen_run *r, const gen_chunk *k) {
    gen_clip *c = &r->clip;
    const size_t plane = (size_t)r->grid_h * r->grid_w;
    const int C = lv_sana_file_config(r->m.file)->in_channels;
    if (c->dec) LV_TRY(read_frames(r, k));
    const float *model = c->latents ? c->latents : r->o.continue_frames;
    if (model) { /* frames in model space, [C, F, H, W]: the block's frames per channel */
        for (int ch = 0; ch < C; ch++)
            memcpy(r->x0 + (size_t)ch * k->frames * plane, model + ((size_t)ch * c->frames + k->first) * plane,
                   (size_t)k->frames * plane * sizeof(float));
    }
    if (k->committed) {
        lv_status s = lv_longsana_commit(r->ctx, r->dit, r->twin, k->position, k->frames, r->grid_h, r->grid_w, r->x0);
        if (s != LV_OK) return lv_error_prefix(s, "the clip's block %d of %d (frames %d-%d)", k->index + 1, c->chunks,
                                               k->first, k->first + k->frames - 1);
    }
    /* a latent model's VAE decoder: its causal history primed with the clip's latents, so the
     * new blocks decode as frames that continue the clip (4 a latent frame), not as a video's
     * start. The clip's frames are written as the file has them; given as latents, as decoded. */
    if (c->prime_decoder && r->vae) {
        if (k->written && !c->dec && r->root) return lv_gen_emit_chunk(r, k->out_first, k->frames);
        LV_TRY(lv_gen_vae_prime(r, r->x0, k->frames)); /* in tiles too, and kept for the resume file */
    }
    if (!k->written || !r->root) return LV_OK;
    /* frames given in model space, or a latent model's latents (.npy): as the run writes its own */
    if (!c->dec) return lv_gen_emit_chunk(r, k->out_first, k->frames);
    /* the clip's own pixels at the output's size, not the model's frames upscaled again */
    r->writer.encoder = r->enc;
    r->writer.frames = r->frames_done;
    const int scale = r->writer.scale;
    r->writer.scale = 1;
    lv_status s = lv_frame_writer_write(&r->writer, c->out, pixel_count(r, k->first, k->frames),
                                        r->o.height * r->o.scale, r->o.width * r->o.scale);
    r->writer.scale = scale;
    LV_TRY(s);
    r->frames_done = r->writer.frames;
    return r->enc ? lv_encoder_flush_block(r->enc) : LV_OK;
}

void lv_gen_continue_free(gen_run *r) {
    lv_decoder_close(r->clip.dec);
    free(r->clip.rgb);
    free(r->clip.out);
    free(r->clip.latents);
    r->clip.latents = NULL;
    r->clip.dec = NULL;
    r->clip.rgb = NULL;
    r->clip.out = NULL;
}
