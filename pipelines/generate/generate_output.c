/* What a run writes: each finished chunk to the encoder and the frame sink (upscaled,
 * through the VAE for a latent model) or into the latents of the .npy; the video file from
 * its probe to its close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"
#include "longvk/frame_writer.h"
#include "longvk/npy.h"

/* n frames [3, n, h, w] to the encoder and the frame sink, upscaled by o.scale (the
 * writer: lv_frame_writer). */
static lv_status encode_frames(gen_run *r, const float *frames, int n, int h, int w) {
    r->writer.encoder = r->enc; /* opened with the first written block */
    r->writer.frames = r->frames_done;
    LV_TRY(lv_frame_writer_write(&r->writer, frames, n, h, w));
    r->frames_done = r->writer.frames;
    return LV_OK;
}

/* A finished latent chunk of n frames through the VAE into the encoder and the frame sink
 * (lv_vae_decode_to_writer). With sequence parallelism the chunk x0 is whole and the same
 * on every process of the writing group; each decodes its bands' rows
 * (lv_vae_set_sequence_parallel) and the pixel rows reach the writing process, which alone
 * gets frames (the others' writers write nothing and count nothing). */
static lv_status decode_chunk(gen_run *r, int n) {
    r->writer.encoder = r->enc;
    r->writer.frames = r->frames_done;
    LV_TRY(lv_gen_vae_decode(r, n));
    r->frames_done = r->writer.frames;
    return LV_OK;
}

/* A finished chunk of n model frames, starting at model frame f0, to the output. The other
 * processes of a sequence-parallel run decode their bands of it (a latent model with a
 * VAE) and count the frames. */
lv_status lv_gen_emit_chunk(gen_run *r, int f0, int n) {
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
        memcpy(r->latents + ((size_t)c * lv_gen_written_units(r) + f0) * plane, r->x0 + (size_t)c * n * plane,
               (size_t)n * plane * sizeof(float));
    r->frames_done += n;
    return LV_OK;
}

/* The chunk's last frame (of n), which the next chunk starts from when warm-started. */
void lv_gen_keep_last_frame(gen_run *r, int n) {
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
lv_status lv_gen_alloc_buffers(gen_run *r) {
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    int shown = lv_generate_chunk_frames(r->units, r->o.block_frames, 0);
    int maxf = r->o.burn_in_blocks > 0 && r->o.block_frames > shown ? r->o.block_frames : shown;
    int clip = r->clip.frames ? lv_generate_chunk_frames(r->clip.frames, r->o.block_frames, 0) : 0;
    if (clip > maxf) maxf = clip; /* a continued clip's first block */
    size_t chunk = (size_t)cfg->in_channels * maxf * r->grid_h * r->grid_w;
    r->x0 = malloc(chunk * sizeof *r->x0);
    if (!r->x0) return lv_error(LV_ERR_NOMEM, "out of host memory for a block of %d frames", maxf);
    /* the VAE over the bands: every process of the writing group (with --cfg-parallel the
     * conditional one; the other group has no frames to make) */
    const bool decodes = r->root || (r->sp && (!r->o.cfg_partner || r->o.cfg_partner->role == LV_CFG_COND));
    if (r->o.vae_path && !r->m.card.pixel && decodes) {
        LV_TRY(lv_weights_open(r->o.vae_path, &r->vae_weights));
        const uint64_t held = lv_ctx_memory_in_use(r->ctx);
        LV_TRY(lv_vae_decoder_create(r->ctx, r->vae_weights, &r->vae));
        r->vae_weight_bytes = lv_ctx_memory_in_use(r->ctx) - held;
        lv_vae_set_clamp(r->vae, 1);
        if (lv_vae_z_dim(r->vae) != cfg->in_channels)
            return lv_error(LV_ERR_INVALID, "the VAE %s has %d latent channels, the model %d", r->o.vae_path,
                            lv_vae_z_dim(r->vae), cfg->in_channels);
        LV_TRY(lv_vae_set_sequence_parallel(r->vae, r->o.sp_bands, r->sp));
    }
    if (!r->root) return LV_OK; /* the rest is the output's: the writing process's alone */
    if (!r->m.card.pixel && !r->o.vae_path) {
        r->latents = malloc((size_t)cfg->in_channels * lv_gen_written_units(r) * r->grid_h * r->grid_w *
                            sizeof *r->latents);
        return r->latents ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory for the latents");
    }
    /* frames reaching the encoder at once: a written pixel chunk, or one decoded frame */
    int at_once = r->m.card.pixel ? shown : 1;
    r->writer = (lv_frame_writer){.rounding = LV_FRAME_ROUND, .scale = r->o.scale, .sink = r->o.frame_sink,
                                  .sink_user = r->o.frame_user};
    return lv_frame_writer_reserve(&r->writer, at_once, r->o.height, r->o.width);
}

/* A video file (a pixel model, or a VAE): not when the frames go to a frame sink alone. */
bool lv_gen_writes_video(const gen_run *r) { return (r->m.card.pixel || r->o.vae_path) && r->o.output; }

/* A new video under the temporary name (see above); keep_frames > 0: the interrupted
 * run's first keep_frames frames, continued. */
lv_status lv_gen_open_video(gen_run *r, int64_t keep_frames, lv_encoder **out) {
    return lv_encoder_open_resume(r->o.output, r->o.width * r->o.scale, r->o.height * r->o.scale, r->o.fps,
                                  &r->o.encoder, keep_frames, out);
}

lv_status lv_gen_probe_output(gen_run *r) {
    lv_encoder *e = NULL;
    LV_TRY(lv_gen_open_video(r, 0, &e));
    lv_encoder_abort(e); /* removes the temporary file: nothing is left */
    return LV_OK;
}

lv_status lv_gen_close_output(gen_run *r, lv_status s) {
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
        int64_t shape[4] = {cfg->in_channels, lv_gen_written_units(r), r->grid_h, r->grid_w};
        s = lv_npy_write(r->o.output, 4, shape, r->latents);
    }
    return s;
}
