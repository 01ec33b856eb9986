/* Saving and restoring the DiT's carried state (see longvk/dit.h). */
#include <stdlib.h>
#include <string.h>

#include "sana_dit_internal.h"

lv_dit_state_size lv_dit_state_size_of(const lv_sana_config *cfg, int cached_blocks, int64_t tokens_per_frame) {
    lv_dit_state_size size = {0, 0};
    if (!cfg || cfg->depth < 1 || tokens_per_frame < 0) return size;
    const uint64_t slot = 4ull * (uint64_t)cfg->heads * (uint64_t)cfg->head_dim * ((uint64_t)cfg->head_dim + 1);
    const uint64_t conv = 4ull * (uint64_t)cfg->hidden * (uint64_t)tokens_per_frame;
    const uint64_t depth = (uint64_t)cfg->depth;
    if (cached_blocks == 0) { /* the slots exist, nothing is committed */
        size.memory = depth * 3 * slot;
        return size;
    }
    const uint64_t kept = cached_blocks > 0 ? (uint64_t)cached_blocks : 1; /* a window's ring, or the sum */
    size.carried = depth * (kept * slot + conv);
    size.memory = size.carried + depth * 2 * slot; /* + the chunk's own S, z and the sum its queries read */
    return size;
}

/* Bands on other processes (an MPI rank's dit): each process's conv caches hold only the
 * rows its bands wrote. Every layer's cache [P, C] is read, seen as frame l of
 * [depth, conv_rows, P / conv_rows * C], and the rows gathered in one collective, so that
 * the saved state is whole and independent of the number of bands. Every process must
 * call lv_dit_state_save then (it is a collective); the emulation has nothing to gather. */
static lv_status gather_conv_caches(lv_ctx *ctx, lv_dit *dit, float *buf) {
    const int depth = dit->cfg.depth;
    const int64_t m = lv_tensor_numel(&dit->blocks[0].conv_cache);
    float *all = malloc((size_t)depth * m * sizeof *all);
    if (!all) return lv_error(LV_ERR_NOMEM, "out of host memory for the conv caches");
    lv_status s = LV_OK;
    for (int b = 0; s == LV_OK && b < depth; b++)
        s = lv_tensor_read(ctx, &dit->blocks[b].conv_cache, all + (size_t)b * m, (uint64_t)m * 4);
    if (s == LV_OK) s = lv_sp_comm_gather_rows(dit->sp, all, depth, dit->conv_rows, m / dit->conv_rows);
    float *p = buf;
    for (int b = 0; s == LV_OK && b < depth; b++) {
        p += lv_linattn_state_saved_floats(dit->blocks[b].state);
        memcpy(p, all + (size_t)b * m, (size_t)m * sizeof *p);
        p += m;
    }
    free(all);
    return s;
}

lv_status lv_dit_state_save(lv_ctx *ctx, lv_dit *dit, float **data, int64_t *count) {
    if (!ctx || !dit || !data || !count)
        return lv_error(LV_ERR_INVALID, "lv_dit_state_save: %s is NULL",
                        !ctx ? "the context" : !dit ? "the dit" : !data ? "data" : "count");
    *data = NULL;
    *count = 0;
    int64_t n = 0;
    for (int b = 0; b < dit->cfg.depth; b++) {
        n += lv_linattn_state_saved_floats(dit->blocks[b].state);
        if (dit->blocks[b].conv_valid) n += lv_tensor_numel(&dit->blocks[b].conv_cache);
    }
    float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf) return lv_error(LV_ERR_NOMEM, "out of host memory for the carried state");
    float *p = buf;
    for (int b = 0; b < dit->cfg.depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        lv_status s = lv_linattn_state_save(ctx, blk->state, p);
        p += lv_linattn_state_saved_floats(blk->state);
        if (s == LV_OK && blk->conv_valid) {
            int64_t m = lv_tensor_numel(&blk->conv_cache);
            s = lv_tensor_read(ctx, &blk->conv_cache, p, (uint64_t)m * 4);
            p += m;
        }
        if (s != LV_OK) {
            free(buf);
            return s;
        }
    }
    if (dit->sp && dit->conv_rows > 0 && dit->blocks[0].conv_valid) {
        lv_status s = gather_conv_caches(ctx, dit, buf);
        if (s != LV_OK) {
            free(buf);
            return s;
        }
    }
    *data = buf;
    *count = n;
    return LV_OK;
}

lv_status lv_dit_state_load(lv_ctx *ctx, lv_dit *dit, const float *data, int64_t count,
                            int64_t chunks, int64_t tokens_per_frame) {
    if (!ctx || !dit || (!data && count > 0))
        return lv_error(LV_ERR_INVALID, "lv_dit_state_load: %s is NULL", !ctx ? "the context" : !dit ? "the dit" : "data");
    if (count < 0 || chunks < 0 || (chunks > 0 && (tokens_per_frame < 1 || tokens_per_frame > ((int64_t)1 << 30))))
        return lv_error(LV_ERR_INVALID, "lv_dit_state_load: %lld values after %lld chunks of %lld tokens per frame",
                        (long long)count, (long long)chunks, (long long)tokens_per_frame);
    const int64_t C = dit->cfg.hidden;
    int64_t need = 0;
    for (int b = 0; b < dit->cfg.depth; b++)
        need += lv_linattn_state_saved_floats(dit->blocks[b].state) + (chunks > 0 ? tokens_per_frame * C : 0);
    if (count != need)
        return lv_error(LV_ERR_FORMAT, "the saved state holds %lld values, this model and size need %lld",
                        (long long)count, (long long)need);
    LV_TRY(lv_dit_reset(ctx, dit));
    dit->conv_rows = 0; /* every process now holds the whole caches */
    const float *p = data;
    for (int b = 0; b < dit->cfg.depth; b++) {
        lv_dit_block *blk = &dit->blocks[b];
        LV_TRY(lv_linattn_state_load(ctx, blk->state, p, chunks));
        p += lv_linattn_state_saved_floats(blk->state);
        if (chunks > 0) {
            if (!blk->conv_cache.alloc) {
                int64_t shape[2] = {tokens_per_frame, C};
                LV_TRY(lv_tensor_create(ctx, LV_F32, 2, shape, &blk->conv_cache));
                dit->state_bytes += lv_tensor_nbytes(&blk->conv_cache);
            } else if (blk->conv_cache.shape[0] != tokens_per_frame) {
                return lv_error(LV_ERR_INVALID, "conv cache of %lld tokens per frame, the state has %lld",
                                (long long)blk->conv_cache.shape[0], (long long)tokens_per_frame);
            }
            LV_TRY(lv_tensor_write(ctx, &blk->conv_cache, p, (uint64_t)(tokens_per_frame * C) * 4));
            blk->conv_valid = true;
            p += tokens_per_frame * C;
        }
    }
    dit->chunks = chunks;
    return LV_OK;
}
