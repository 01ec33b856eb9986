/* The resume file of a run: written after every block (and before the first), read back by
 * --resume and handed to every process; what an interrupted run says it left. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generate_run.h"

/* The resume file after chunks_done blocks. Every process takes part in reading the carried
 * state (with bands on other processes lv_dit_state_save gathers the conv caches' rows);
 * the writing process alone writes it: whole, the same file whatever the bands. */
bool lv_gen_resumable(const gen_run *r) {
    return (r->m.card.pixel || r->o.vae_path) && r->o.sampler == LV_GEN_LONGSANA;
}

lv_status lv_gen_save_state(gen_run *r, int chunks_done, int64_t frames_done) {
    if (!lv_gen_resumable(r)) return LV_OK;
    if (!r->state_path[0]) return LV_OK; /* no file: frames to a sink alone */
    float *state = NULL;
    int64_t count = 0;
    if (chunks_done) LV_TRY(lv_dit_state_save(r->ctx, r->dit, &state, &count)); /* 0: before the first block */
    char *live = lv_gen_live_record(r, chunks_done - r->o.burn_in_blocks);
    /* a latent model's: the VAE decoder's place and its last latent frames */
    lv_gen_vae_state vae = {0};
    const bool latent = !r->m.card.pixel;
    lv_status s = r->root && latent ? lv_gen_vae_record(r, &vae) : LV_OK;
    if (s == LV_OK)
        s = !r->root ? LV_OK
            : r->o.live && !live ? lv_error(LV_ERR_NOMEM, "out of host memory")
                                 : lv_gen_resume_save(r->state_path, &r->o, &r->m, r->clip.identity, chunks_done,
                                                      frames_done, state, count, r->last_frame, r->frame_values,
                                                      r->hist, r->hist ? (int64_t)r->hist_slots * r->hist_stride : 0,
                                                      live, latent ? &vae : NULL);
    free(vae.latents);
    free(live);
    free(state);
    if (s == LV_OK) r->saved_frames = frames_done;
    return s;
}

/* HLS (-o OUT.m3u8; codec/hls_resume.c). The playlist names whole segments only, about 2 s
 * each, so a killed run's stream holds fewer frames than its resume file says were made: up
 * to a segment's worth are lost, and --resume must continue from the frames the playlist
 * names, with the carried state of that moment. So a second resume file is kept,
 * STATE-segment, holding the run at the frames the playlist names:
 *
 * - after a block is written (the encoder flushed: a segment the block completes, or the
 *   first block, is then named), when the playlist names another frame count than at the
 *   last look and that count is the resume file's on disk (written after the block before,
 *   whose end is where the segment ended: segments end at a block's keyframe), the resume
 *   file is renamed to STATE-segment (atomic, nothing copied); then this block's resume file
 *   is written as always;
 * - so at any moment either STATE-segment or STATE itself holds the run at the frames the
 *   playlist names: --resume reads STATE, and STATE-segment when STATE is at another frame.
 *
 * A segment that does not end at a block's end (an encoder without a keyframe at every
 * block: low_delay) has no resume file: --resume then refuses, naming both files' frames. */
bool lv_gen_hls_output(const gen_run *r) {
    return r->root && lv_gen_writes_video(r) && lv_encoder_path_is_hls(r->o.output) && lv_gen_resumable(r) &&
           r->state_path[0];
}

void lv_gen_segment_state_path(const gen_run *r, char *out, size_t size) {
    snprintf(out, size, "%s-segment", r->state_path);
}

bool lv_gen_resume_file_exists(const gen_run *r) {
    char seg[sizeof r->state_path + 16];
    lv_gen_segment_state_path(r, seg, sizeof seg);
    return access(r->state_path, F_OK) == 0 || (lv_gen_hls_output(r) && access(seg, F_OK) == 0);
}

lv_status lv_gen_hls_segment_state(gen_run *r) { /* (never fails: a status for what may come) */
    if (!lv_gen_hls_output(r)) return LV_OK;
    int64_t named = -1;
    /* a playlist that cannot be read costs the resume file, not the run: --resume says why */
    if (lv_hls_named_frames(r->o.output, r->o.fps, &named) != LV_OK && named != 0) return LV_OK;
    if (named < 0) named = 0; /* an earlier run's first segment, no playlist yet */
    if (named == r->hls_named) return LV_OK;
    r->hls_named = named;
    if (named != r->saved_frames) return LV_OK; /* no resume file at that frame (see above) */
    char seg[sizeof r->state_path + 16];
    lv_gen_segment_state_path(r, seg, sizeof seg);
    if (rename(r->state_path, seg) != 0)
        return lv_error(LV_ERR_IO, "keeping the resume file %s as %s (a rename in its folder): %s", r->state_path, seg,
                        strerror(errno));
    return LV_OK;
}

/* --resume of an HLS stream: the resume file at the frames the playlist names (above). */
static lv_status read_hls_resume(gen_run *r, lv_gen_resume *out, float **state, int64_t *count) {
    int64_t named = -1;
    lv_status hs = lv_hls_named_frames(r->o.output, r->o.fps, &named);
    /* no playlist but a first segment: killed between the muxer's first segment and its first
     * playlist (then the run is resumed from frame 0), or the playlist deleted (refused) */
    if (hs != LV_OK && named != 0) return hs;
    char why[1024];
    snprintf(why, sizeof why, "%s", hs != LV_OK ? lv_last_error() : "");
    char seg[sizeof r->state_path + 16], found[2][64];
    lv_gen_segment_state_path(r, seg, sizeof seg);
    r->saved_frames = -1; /* none */
    const char *files[2] = {r->state_path, seg};
    for (int i = 0; i < 2; i++) {
        snprintf(found[i], sizeof found[i], "none there");
        if (access(files[i], F_OK) != 0) continue;
        lv_gen_resume res = {0};
        float *st = NULL;
        int64_t n = 0;
        LV_TRY(lv_gen_resume_read(files[i], &r->o, &r->m, r->clip.identity, &res, &st, &n, r->last_frame,
                                  r->frame_values, r->hist, r->hist ? (int64_t)r->hist_slots * r->hist_stride : 0,
                                  !r->m.card.pixel));
        if (i == 0) r->saved_frames = res.frames_done; /* the resume file on disk: STATE */
        if (res.frames_done == named) {
            *out = res;
            *state = st;
            *count = n;
            r->hls_named = -1; /* looked at again after the first block, as in a new run */
            return LV_OK;
        }
        snprintf(found[i], sizeof found[i], "at %lld frames", (long long)res.frames_done);
        free(st);
        free(res.live);
        free(res.vae.latents);
    }
    if (hs != LV_OK) return lv_error(hs, "%s", why);
    return lv_error(LV_ERR_FORMAT, "cannot resume %s: its playlist names %lld frames, and no resume file holds the run "
                    "there (%s: %s; %s: %s); start again with --overwrite", r->o.output, (long long)named,
                    r->state_path, found[0], seg, found[1]);
}

/* Frames written once `chunks_done` chunks (burn-in and a clip included) are done. */
static int64_t frames_after(const gen_run *r, int chunks_done) { return lv_gen_frames_after(r, chunks_done); }

/* Sequence parallelism over processes: the writing process reads the resume file (the
 * others may not see its folder: cluster nodes need not share the output's) and hands it
 * on: its verdict first, so that every process stops when it is refused, then the carried
 * state and the last frame. */
static lv_status share_resume(gen_run *r, lv_status read, lv_gen_resume *res, float **state, int64_t *count) {
    lv_gen_vae_state *v = &res->vae;
    int64_t head[9] = {read, res->chunks_done, res->frames_done, *count, v->fed, v->tile_h, v->tile_w, v->overlap,
                       v->kept};
    LV_TRY(lv_gen_share(r, head, sizeof head));
    if (head[0] != LV_OK)
        return r->root ? read : lv_error((lv_status)head[0], "the resume file %s was refused by the process that "
                                         "reads it (rank 0: its message says why)", r->state_path);
    res->chunks_done = (int)head[1];
    res->frames_done = head[2];
    *count = head[3];
    if (!r->root && *count > 0 && !(*state = malloc((size_t)*count * sizeof **state)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the carried state (%lld values)", (long long)*count);
    LV_TRY(lv_gen_share(r, *state, (uint64_t)*count * sizeof **state));
    /* a latent model's VAE: every process decoding bands decodes the kept frames again */
    *v = (lv_gen_vae_state){.fed = head[4], .tile_h = (int)head[5], .tile_w = (int)head[6], .overlap = (int)head[7],
                            .kept = head[8], .latents = v->latents};
    const uint64_t vae_values = (uint64_t)v->kept * (uint64_t)r->frame_values;
    if (!r->root && vae_values > 0 && !(v->latents = malloc(vae_values * sizeof *v->latents)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the VAE's %lld latent frames", (long long)v->kept);
    LV_TRY(lv_gen_share(r, v->latents, vae_values * sizeof *v->latents));
    return lv_gen_share(r, r->last_frame, (uint64_t)r->frame_values * sizeof *r->last_frame);
}

/* --resume: the state of the interrupted run (into the dit, its twin and last_frame). */
lv_status lv_gen_load_resume(gen_run *r, int *first_chunk) {
    lv_gen_resume resume = {0};
    float *state = NULL;
    int64_t count = 0;
    lv_status s = LV_OK;
    if (r->root && lv_gen_hls_output(r))
        s = read_hls_resume(r, &resume, &state, &count);
    else if (r->root)
        s = lv_gen_resume_read(r->state_path, &r->o, &r->m, r->clip.identity, &resume, &state, &count, r->last_frame, r->frame_values,
                               r->hist, r->hist ? (int64_t)r->hist_slots * r->hist_stride : 0, !r->m.card.pixel);
    if (lv_gen_several(r)) s = share_resume(r, s, &resume, &state, &count);
    r->vae_resume = resume.vae; /* decoded again once the decoder exists (lv_gen_vae_reprime) */
    /* the switches pushed during the interrupted run, applied again */
    if (s == LV_OK && r->o.live && resume.live) s = lv_gen_live_restore(r, resume.live, r->state_path);
    free(resume.live);
    int total = lv_gen_total_chunks(r);
    if (s == LV_OK && resume.chunks_done > 0 && resume.chunks_done <= total) {
        /* the blocks the state holds: a continued clip's first blocks and burn-in are not committed */
        s = lv_dit_state_load(r->ctx, r->dit, state, count, lv_gen_committed_after(r, resume.chunks_done),
                              lv_gen_frame_tokens(r));
        if (s != LV_OK) lv_error_prefix(s, "%s", r->state_path);
    }
    free(state);
    LV_TRY(s);
    if (resume.chunks_done < 0 || resume.chunks_done > total || resume.frames_done != frames_after(r, resume.chunks_done))
        return lv_error(LV_ERR_FORMAT, "%s: %d blocks made and %lld frames written do not fit this run (%d blocks, "
                        "%lld frames after %d)", r->state_path, resume.chunks_done, (long long)resume.frames_done,
                        total, resume.chunks_done >= 0 && resume.chunks_done <= total
                            ? (long long)frames_after(r, resume.chunks_done) : -1LL, resume.chunks_done);
    if (!r->m.card.pixel && r->vae_resume.fed != lv_gen_vae_fed_after(r, resume.chunks_done))
        return lv_error(LV_ERR_FORMAT, "%s: the VAE decoded %lld latent frames, this run would have decoded %lld "
                        "after %d blocks", r->state_path, (long long)r->vae_resume.fed,
                        (long long)lv_gen_vae_fed_after(r, resume.chunks_done), resume.chunks_done);
    if (r->twin) LV_TRY(lv_gen_twin_copy_state(r, resume.chunks_done));
    *first_chunk = resume.chunks_done;
    r->frames_done = resume.frames_done;
    return LV_OK;
}

/* Stopped on request before block `next` (0-based): the resume file already holds the
 * blocks made. */
lv_status lv_gen_interrupted(const gen_run *r, int next) {
    int total = lv_gen_total_chunks(r);
    if (next == 0)
        return lv_error(LV_ERR_INTERRUPTED, "interrupted before the first block: nothing is made yet");
    if (!r->o.output) /* frames to a sink alone */
        return lv_error(LV_ERR_INTERRUPTED, "interrupted after block %d of %d: %lld of %lld frames made", next, total,
                        (long long)r->frames_done, (long long)r->frames_total);
    if (r->frames_done == 0 && !lv_gen_resumable(r))
        return lv_error(LV_ERR_INTERRUPTED, "interrupted in the burn-in after block %d of %d (%d made and dropped "
                        "before the first written frame): no frame is written yet", next, total,
                        r->o.burn_in_blocks);
    if (r->frames_done == 0 && next > r->o.burn_in_blocks) /* a continued clip's blocks, --continue-output new */
        return lv_error(LV_ERR_INTERRUPTED, "interrupted after block %d of %d, committing the clip: no frame is "
                        "written yet, %s holds the blocks done", next, total, r->state_path);
    if (r->frames_done == 0)
        return lv_error(LV_ERR_INTERRUPTED, "interrupted in the burn-in after block %d of %d (%d made and dropped "
                        "before the first written frame): no frame is written yet, %s holds the blocks made",
                        next, total, r->o.burn_in_blocks, r->state_path);
    return lv_error(LV_ERR_INTERRUPTED, "interrupted after block %d of %d: %s plays and holds %lld of %lld frames",
                    next, total, r->o.output, (long long)r->frames_done, (long long)r->frames_total);
}
