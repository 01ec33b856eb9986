/* A latent model's VAE decoder across an interruption (README, "Resuming a latent model"):
 * the decoder's causal history (two frames per conv, about 3.8 GB at 480 x 832) is not saved;
 * the resume file keeps the last R latent frames it decoded instead (R =
 * lv_vae_history_frames, 40 for Wan2.1: 16 MB at 480 x 832), and --resume decodes them again
 * on a reset decoder, dropping their frames, which leaves every conv's history as the
 * interrupted run left it, bit for bit; fewer than R frames decoded: all of them, from the
 * video's first. In tiles (--vae-tiles) the same tiles as the interrupted run's are used, so
 * each tile's history is put back the same way; over bands each process decodes its rows. */
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"

void lv_gen_vae_keep(gen_run *r, const float *x, int n) {
    if (!r->root || !r->vae) return; /* the writing process writes the resume file */
    if (!r->vae_ring) {
        r->vae_ring_cap = lv_vae_history_frames(r->vae);
        r->vae_ring = malloc((size_t)r->vae_ring_cap * (size_t)r->frame_values * sizeof *r->vae_ring);
        if (!r->vae_ring) r->vae_ring_cap = 0; /* lv_gen_vae_record says so */
    }
    if (!r->vae_ring) {
        r->vae_fed += n;
        return;
    }
    const size_t plane = (size_t)r->grid_h * r->grid_w;
    const int C = lv_sana_file_config(r->m.file)->in_channels;
    for (int t = 0; t < n; t++) {
        float *slot = r->vae_ring + (size_t)((r->vae_fed + t) % r->vae_ring_cap) * (size_t)r->frame_values;
        for (int c = 0; c < C; c++) memcpy(slot + c * plane, x + ((size_t)c * n + t) * plane, plane * sizeof *x);
    }
    r->vae_fed += n;
}

lv_status lv_gen_vae_record(const gen_run *r, lv_gen_vae_state *out) {
    *out = (lv_gen_vae_state){.fed = r->vae_fed, .tile_h = r->vae_tiling.tile_h, .tile_w = r->vae_tiling.tile_w,
                              .overlap = r->vae_tiling.overlap};
    if (r->vae_fed == 0) return LV_OK;
    if (!r->vae_ring) return lv_error(LV_ERR_NOMEM, "out of host memory for the VAE's last latent frames");
    out->kept = r->vae_fed < r->vae_ring_cap ? r->vae_fed : r->vae_ring_cap;
    if (!(out->latents = malloc((size_t)out->kept * (size_t)r->frame_values * sizeof *out->latents)))
        return lv_error(LV_ERR_NOMEM, "out of host memory for the VAE's last latent frames");
    for (int64_t i = 0; i < out->kept; i++) /* oldest first */
        memcpy(out->latents + i * r->frame_values,
               r->vae_ring + ((r->vae_fed - out->kept + i) % r->vae_ring_cap) * r->frame_values,
               (size_t)r->frame_values * sizeof *out->latents);
    return LV_OK;
}

/* Which chunks the decoder takes: the new blocks (the burn-in is dropped undecoded), and a
 * continued clip's blocks when they prime it (generate_continue.c). */
int64_t lv_gen_vae_fed_after(const gen_run *r, int chunks_done) {
    int64_t fed = 0;
    for (int c = 0; c < chunks_done; c++) {
        gen_chunk k = lv_gen_chunk(r, c);
        if (k.kind == GEN_CHUNK_NEW || (k.kind == GEN_CHUNK_CLIP && r->clip.prime_decoder && k.read)) fed += k.frames;
    }
    return fed;
}

lv_status lv_gen_vae_prime(gen_run *r, const float *x, int n) { return lv_gen_vae_decode_to(r, x, n, NULL, NULL); }

lv_status lv_gen_vae_reprime(gen_run *r) {
    lv_gen_vae_state *v = &r->vae_resume;
    if (!r->vae || v->fed == 0) return LV_OK;
    const int R = lv_vae_history_frames(r->vae);
    if (v->kept != (v->fed < R ? v->fed : R))
        return lv_error(LV_ERR_FORMAT, "%s: %lld latent frames kept for the VAE, %lld expected (%lld decoded, the "
                        "decoder's history spans %d)", r->state_path, (long long)v->kept,
                        (long long)(v->fed < R ? v->fed : R), (long long)v->fed, R);
    if (v->tile_h > 0 && (r->sp || r->o.sp_bands > 0)) /* the decoder is split over the bands instead */
        return lv_error(LV_ERR_INVALID, "--resume: the interrupted run decoded the VAE in tiles of %d x %d latent "
                        "pixels, and over bands (--sp-emulate, --sequence-parallel) the VAE is not tiled: resume "
                        "it without them, as it was made", v->tile_h, v->tile_w);
    r->vae_tiling = (lv_vae_tiling){v->tile_h, v->tile_w, v->overlap};
    r->vae_forced = true;
    r->vae_fed = v->fed - v->kept; /* lv_gen_vae_keep counts them again */
    /* in pieces of a block (the tile stream blends a piece's frames in host memory) */
    const int B = r->o.block_frames > 0 ? r->o.block_frames : 1, C = lv_sana_file_config(r->m.file)->in_channels;
    const size_t plane = (size_t)r->grid_h * r->grid_w;
    float *piece = malloc((size_t)r->frame_values * (size_t)B * sizeof *piece);
    if (!piece) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status s = LV_OK;
    for (int64_t f = 0; s == LV_OK && f < v->kept; f += B) {
        const int n = v->kept - f < B ? (int)(v->kept - f) : B;
        for (int t = 0; t < n; t++)
            for (int c = 0; c < C; c++)
                memcpy(piece + ((size_t)c * n + t) * plane, v->latents + (f + t) * r->frame_values + c * plane,
                       plane * sizeof *piece);
        s = lv_gen_vae_decode_to(r, piece, n, NULL, NULL);
    }
    free(piece);
    if (s != LV_OK) return lv_error_prefix(s, "--resume: decoding the VAE's last %lld latent frames again",
                                           (long long)v->kept);
    r->vae_fed = v->fed; /* on every process (only the writing one keeps them) */
    return LV_OK;
}
