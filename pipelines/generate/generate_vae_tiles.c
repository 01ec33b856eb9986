/* The VAE in spatial tiles inside a run (--vae-tiles auto|off|HxW): whether to tile is decided
 * when the first block is decoded, once the DiT's weights, state and work buffers are on the
 * device, so that "what the run holds" is measured rather than guessed; then every block goes
 * through the one decoder untiled, or through a tile stream (lv_vae_tile_stream) whose tiles
 * each keep their own causal history across the blocks. */
#include <stdio.h>

#include "generate_run.h"

lv_status lv_gen_check_vae_tiles(const lv_generate_options *o) {
    if (o->vae_tiles < LV_GEN_VAE_TILES_AUTO || o->vae_tiles > LV_GEN_VAE_TILES_FIXED)
        return lv_error(LV_ERR_INVALID, "lv_generate: vae_tiles %d (--vae-tiles): auto, off or fixed tiles",
                        o->vae_tiles);
    if (o->vae_tiles != LV_GEN_VAE_TILES_FIXED) return LV_OK;
    if (o->vae_tile_h < 1 || o->vae_tile_w < 1 || o->vae_tile_h > 4096 || o->vae_tile_w > 4096)
        return lv_error(LV_ERR_INVALID, "lv_generate: VAE tiles of %d x %d latent pixels (--vae-tiles HxW): each "
                        "side 1 to 4096", o->vae_tile_h, o->vae_tile_w);
    if (o->sp_bands > 0 || o->sp_comm)
        return lv_error(LV_ERR_INVALID, "lv_generate: --vae-tiles %dx%d with sequence parallelism: the VAE is "
                        "decoded over the bands already (tiles or bands, one or the other)", o->vae_tile_h,
                        o->vae_tile_w);
    return LV_OK;
}

/* The bytes the VAE may hold (weights, history, work): LONGVK_VAE_BUDGET, else the device's
 * largest heap minus what everything but the VAE holds now. */
static uint64_t vae_budget(const gen_run *r) {
    uint64_t forced = lv_env_u64("LONGVK_VAE_BUDGET", 0, 1, UINT64_MAX);
    if (forced) return forced;
    uint64_t heap = lv_ctx_device(r->ctx)->device_local_bytes, in_use = lv_ctx_memory_in_use(r->ctx);
    uint64_t others = in_use > r->vae_weight_bytes ? in_use - r->vae_weight_bytes : 0;
    return heap > others ? heap - others : 0;
}

static lv_status choose(gen_run *r) {
    const int h = r->grid_h, w = r->grid_w;
    lv_generate_progress p = {.phase = LV_GEN_PHASE_VAE, .device = lv_ctx_device(r->ctx)->name,
                              .frames_done = r->frames_done, .frames_total = r->frames_total,
                              .vae_untiled_memory = lv_vae_decoder_memory(r->vae, h, w)};
    lv_vae_tiling tiling = {0, 0, 0};
    bool tiled = false;
    if (r->vae_forced) { /* --resume: the interrupted run's choice, whatever the budget says now */
        tiling = r->vae_tiling;
        tiled = tiling.tile_h > 0;
    } else if (r->o.vae_tiles == LV_GEN_VAE_TILES_FIXED) {
        tiling.tile_h = r->o.vae_tile_h < h ? r->o.vae_tile_h : h;
        tiling.tile_w = r->o.vae_tile_w < w ? r->o.vae_tile_w : w;
        tiling.overlap = lv_vae_tile_overlap(tiling.tile_h, tiling.tile_w);
        tiled = true;
    } else if (r->o.vae_tiles == LV_GEN_VAE_TILES_AUTO && !r->sp && r->o.sp_bands == 0) {
        p.vae_budget = vae_budget(r);
        int c = lv_vae_choose_tiling(r->vae, h, w, p.vae_budget, &tiling);
        if (c < 0)
            return lv_error(LV_ERR_NOMEM, "the VAE does not fit the device: an untiled decode at %d x %d latent "
                            "pixels needs %llu bytes, tiles of 4 x 4 %llu, and the budget is %llu bytes (the "
                            "device's largest heap minus what the run holds, or LONGVK_VAE_BUDGET)", h, w,
                            (unsigned long long)p.vae_untiled_memory,
                            (unsigned long long)lv_vae_tiled_memory(r->vae, h, w, &(lv_vae_tiling){4, 4, 2}),
                            (unsigned long long)p.vae_budget);
        tiled = c > 0;
    }
    if (tiled) {
        LV_TRY(lv_vae_tile_stream_create(r->vae, h, w, &tiling, &r->vae_stream));
        p.vae_tile_count = lv_vae_tile_stream_count(r->vae_stream);
        lv_vae_tile_stream_size(r->vae_stream, &p.vae_tile_h, &p.vae_tile_w);
        p.vae_tile_overlap = tiling.overlap;
        p.vae_memory = lv_vae_tiled_memory(r->vae, h, w, &tiling);
        p.vae_host_bytes = lv_vae_tile_stream_host_bytes(r->vae_stream);
    } else {
        p.vae_memory = p.vae_untiled_memory;
    }
    r->vae_chosen = true;
    r->vae_tiling = tiled ? tiling : (lv_vae_tiling){0, 0, 0};
    if (r->progress && r->root) r->progress(r->progress_user, &p);
    return LV_OK;
}

static lv_status to_writer(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index; /* the writer counts the frames of the whole video */
    return lv_frame_writer_write(user, rgb, 1, height, width);
}

static lv_status dropped(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)user, (void)index, (void)rgb, (void)height, (void)width;
    return LV_OK;
}

lv_status lv_gen_vae_decode_to(gen_run *r, const float *x, int n, lv_vae_frame_fn fn, void *user) {
    if (!r->vae_chosen) LV_TRY(choose(r));
    if (!fn) fn = dropped;
    if (!r->vae_stream) LV_TRY(lv_vae_decode_frames_cb(r->ctx, r->vae, x, n, r->grid_h, r->grid_w, fn, user));
    else LV_TRY(lv_vae_tile_stream_decode(r->ctx, r->vae_stream, x, n, fn, user));
    lv_gen_vae_keep(r, x, n); /* for the resume file */
    return LV_OK;
}

lv_status lv_gen_vae_decode(gen_run *r, int n) { return lv_gen_vae_decode_to(r, r->x0, n, to_writer, &r->writer); }

void lv_gen_vae_tiles_free(gen_run *r) {
    lv_vae_tile_stream_destroy(r->vae_stream);
    r->vae_stream = NULL;
}
