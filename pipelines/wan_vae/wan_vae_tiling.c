/* Spatially tiled decoding for devices that cannot hold the full-frame decoder: the latent
 * frame is cut into overlapping tiles, each tile is decoded over the whole video on its
 * own (its own conv history, reset between tiles), and the tiles' frames are blended with
 * linear ramps across the overlaps. Device memory is that of one tile; the output video is
 * assembled in host memory. Tiles do not see their neighbours' pixels (every conv pads
 * the tile edge with zeros), so the result differs from an untiled decode near the seams;
 * the overlap hides most of it (test_vae.c measures it).
 *
 * The same tiles decode a video streamed block by block (lv_vae_tile_stream, below), each tile
 * keeping its own history in host memory between blocks.
 *
 * Encoding is tiled the same way (lv_vae_encode_tiled): the frames are cut into tiles of
 * whole latent pixels (8 x 8 pixels each), each tile encoded over the whole video, the
 * tiles' latents blended with the same ramps across their overlaps (test_vae_encoder.c). */
#include <stdlib.h>
#include <string.h>

#include "wan_vae_internal.h"

/* Tile starts along one axis of n latent pixels: the first at 0, the last ending at n,
 * neighbours overlapping by at least `overlap`. */
static int tile_starts(int n, int tile, int overlap, int *starts, int max) {
    if (tile >= n) {
        starts[0] = 0;
        return 1;
    }
    int stride = tile - overlap, count = 0;
    for (int s = 0;; s += stride) {
        if (count == max) return -1;
        if (s + tile >= n) {
            starts[count++] = n - tile;
            break;
        }
        starts[count++] = s;
    }
    return count;
}

/* Blend weight of output pixel i of a tile spanning [0, len) whose low (high) edge borders
 * another tile over `ov` pixels: rises linearly from the tile edge across the overlap. */
static float ramp(int i, int len, int ov, bool low, bool high) {
    float w = 1.0f;
    if (low && i < ov) w = ((float)i + 0.5f) / (float)ov;
    if (high && len - 1 - i < ov) {
        float v = ((float)(len - 1 - i) + 0.5f) / (float)ov;
        if (v < w) w = v;
    }
    return w;
}

/* A tiling of an h x w latent grid: checked, its tiles clamped to the grid, and where they
 * start along each axis (the decoder's, the encoder's and the stream's one grid). */
enum { VAE_MAX_TILES = 256 };
typedef struct tile_grid {
    int th, tw, ny, nx;
    int ys[VAE_MAX_TILES], xs[VAE_MAX_TILES];
} tile_grid;

static lv_status tile_grid_of(const char *who, int h, int w, const lv_vae_tiling *t, tile_grid *g) {
    int th = t->tile_h, tw = t->tile_w, ov = t->overlap;
    if (th < 1 || tw < 1 || ov < 0 || (ov >= th && th < h) || (ov >= tw && tw < w))
        return lv_error(LV_ERR_INVALID, "%s: tiles %d x %d with overlap %d (the overlap must be smaller than a "
                        "tile)", who, th, tw, ov);
    g->th = th < h ? th : h;
    g->tw = tw < w ? tw : w;
    g->ny = tile_starts(h, g->th, ov, g->ys, VAE_MAX_TILES);
    g->nx = tile_starts(w, g->tw, ov, g->xs, VAE_MAX_TILES);
    if (g->ny < 0 || g->nx < 0)
        return lv_error(LV_ERR_INVALID, "%s: tiles %d x %d over latent %d x %d: more than %d tiles along an axis",
                        who, g->th, g->tw, h, w, VAE_MAX_TILES);
    return LV_OK;
}

/* The blend weights of tile (iy, ix) along each axis, at `up` output pixels per grid pixel:
 * wy [th * up], wx [tw * up], ramps across the overlaps with its neighbours. */
static void grid_weights(const tile_grid *g, int iy, int ix, int up, float *wy, float *wx) {
    const int ly = g->ys[iy], lx = g->xs[ix], th = g->th, tw = g->tw;
    /* overlaps in output pixels: to the neighbour's start (or end) */
    int ov_up = iy > 0 ? (g->ys[iy - 1] + th - ly) * up : 0;
    int ov_down = iy + 1 < g->ny ? (ly + th - g->ys[iy + 1]) * up : 0;
    int ov_left = ix > 0 ? (g->xs[ix - 1] + tw - lx) * up : 0;
    int ov_right = ix + 1 < g->nx ? (lx + tw - g->xs[ix + 1]) * up : 0;
    for (int y = 0; y < th * up; y++) {
        float lo = ramp(y, th * up, ov_up, ov_up > 0, false), hi = ramp(y, th * up, ov_down, false, ov_down > 0);
        wy[y] = lo < hi ? lo : hi;
    }
    for (int x = 0; x < tw * up; x++) {
        float lo = ramp(x, tw * up, ov_left, ov_left > 0, false), hi = ramp(x, tw * up, ov_right, false, ov_right > 0);
        wx[x] = lo < hi ? lo : hi;
    }
}

typedef struct tile_sink {
    float *acc;          /* [3, T, H, W] weighted sum */
    const float *wy, *wx; /* this tile's weights along y and x */
    int64_t T, H, W;     /* the full video */
    int y0, x0, th, tw;  /* the tile in output pixels */
    int channels;
} tile_sink;

static lv_status add_tile_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    tile_sink *s = user;
    if (index >= s->T || height != s->th || width != s->tw)
        return lv_error(LV_ERR_INVALID, "tiled VAE decode: unexpected frame %lld (%d x %d)",
                        (long long)index, height, width);
    for (int c = 0; c < s->channels; c++)
        for (int y = 0; y < height; y++) {
            float *dst = s->acc + ((size_t)(c * s->T + index) * s->H + s->y0 + y) * s->W + s->x0;
            const float *src = rgb + ((size_t)c * height + y) * width;
            for (int x = 0; x < width; x++) dst[x] += s->wy[y] * s->wx[x] * src[x];
        }
    return LV_OK;
}

lv_status lv_vae_decode_tiled(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents, int n,
                              int h, int w, const lv_vae_tiling *tiling, float *frames_out) {
    if (!ctx || !dec || !latents || !tiling || !frames_out || n < 1 || h < 1 || w < 1)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_tiled: missing argument or empty video");
    if (dec->comm)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_tiled: the decoder is set to decode over bands "
                        "(lv_vae_set_sequence_parallel): tiles or bands, one or the other");
    tile_grid grid, *g = &grid;
    LV_TRY(tile_grid_of("lv_vae_decode_tiled", h, w, tiling, g));
    const int th = g->th, tw = g->tw, ny = g->ny, nx = g->nx;
    const int *ys = g->ys, *xs = g->xs;
    const vae_arch *a = &dec->arch;
    int up = 1;
    for (int i = 0; i < a->nups; i++)
        if (a->ups[i].kind != VAE_RES) up *= 2;
    lv_vae_reset(dec);
    const int64_t T = lv_vae_frames_for(dec, n), H = (int64_t)h * up, W = (int64_t)w * up;
    const int C = a->out_ch;
    size_t plane = (size_t)H * W;
    float *wsum = calloc(plane, sizeof *wsum);
    float *crop = malloc((size_t)a->z * n * th * tw * sizeof *crop);
    float *wy = malloc((size_t)th * up * sizeof *wy), *wx = malloc((size_t)tw * up * sizeof *wx);
    lv_status s = LV_OK;
    if (!wsum || !crop || !wy || !wx) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK) memset(frames_out, 0, (size_t)C * T * plane * sizeof *frames_out);
    for (int iy = 0; s == LV_OK && iy < ny; iy++)
        for (int ix = 0; s == LV_OK && ix < nx; ix++) {
            int ly = ys[iy], lx = xs[ix];
            for (int c = 0; c < a->z; c++)
                for (int f = 0; f < n; f++)
                    for (int y = 0; y < th; y++)
                        memcpy(crop + (((size_t)c * n + f) * th + y) * tw,
                               latents + (((size_t)c * n + f) * h + ly + y) * w + lx,
                               (size_t)tw * sizeof *crop);
            grid_weights(g, iy, ix, up, wy, wx);
            tile_sink sink = {.acc = frames_out, .wy = wy, .wx = wx, .T = T, .H = H, .W = W,
                              .y0 = ly * up, .x0 = lx * up, .th = th * up, .tw = tw * up,
                              .channels = C};
            lv_vae_reset(dec);
            s = lv_vae_decode_frames_cb(ctx, dec, crop, n, th, tw, add_tile_frame, &sink);
            if (s == LV_OK)
                for (int y = 0; y < th * up; y++)
                    for (int x = 0; x < tw * up; x++)
                        wsum[(size_t)(ly * up + y) * W + lx * up + x] += wy[y] * wx[x];
        }
    if (s == LV_OK)
        for (size_t ct = 0; ct < (size_t)C * T; ct++)
            for (size_t p = 0; p < plane; p++) frames_out[ct * plane + p] /= wsum[p];
    lv_vae_reset(dec);
    free(wsum), free(crop), free(wy), free(wx);
    return s;
}

uint64_t lv_vae_tiled_memory(const lv_vae_decoder *dec, int h, int w, const lv_vae_tiling *tiling) {
    int th = tiling->tile_h < h ? tiling->tile_h : h, tw = tiling->tile_w < w ? tiling->tile_w : w;
    return lv_vae_decoder_memory(dec, th, tw);
}

/* ---- the encoder ---------------------------------------------------------------------------- */

lv_status lv_vae_encode_tiled(lv_ctx *ctx, lv_vae_encoder *enc, const float *rgb, int T, int H, int W,
                              const lv_vae_tiling *tiling, float *latents_out) {
    if (!ctx || !enc || !rgb || !tiling || !latents_out || T < 1)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_tiled: missing argument or empty video");
    const int ds = enc->downscale, z = enc->core.arch.z, C = enc->in_ch;
    if (H < ds || W < ds || H % ds || W % ds)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_tiled: frames of %d x %d pixels (width and height "
                        "multiples of %d)", W, H, ds);
    const int h = H / ds, w = W / ds;
    tile_grid grid, *g = &grid;
    LV_TRY(tile_grid_of("lv_vae_encode_tiled", h, w, tiling, g));
    const int th = g->th, tw = g->tw, ny = g->ny, nx = g->nx;
    const int *ys = g->ys, *xs = g->xs;
    const int F = lv_vae_encoded_frames(T), pth = th * ds, ptw = tw * ds;
    const size_t plane = (size_t)h * w, tplane = (size_t)th * tw;
    float *wsum = calloc(plane, sizeof *wsum), *crop = malloc((size_t)C * T * pth * ptw * sizeof *crop);
    float *part = malloc((size_t)z * F * tplane * sizeof *part);
    float *wy = malloc((size_t)th * sizeof *wy), *wx = malloc((size_t)tw * sizeof *wx);
    lv_status s = wsum && crop && part && wy && wx ? LV_OK : lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s == LV_OK) memset(latents_out, 0, (size_t)z * F * plane * sizeof *latents_out);
    for (int iy = 0; s == LV_OK && iy < ny; iy++)
        for (int ix = 0; s == LV_OK && ix < nx; ix++) {
            const int ly = ys[iy], lx = xs[ix];
            for (int c = 0; c < C; c++)
                for (int t = 0; t < T; t++)
                    for (int y = 0; y < pth; y++)
                        memcpy(crop + (((size_t)c * T + t) * pth + y) * ptw,
                               rgb + (((size_t)c * T + t) * H + ly * ds + y) * W + lx * ds, (size_t)ptw * sizeof *crop);
            grid_weights(g, iy, ix, 1, wy, wx); /* in latent pixels */
            s = lv_vae_encode_frames(ctx, enc, crop, T, pth, ptw, part);
            for (int c = 0; s == LV_OK && c < z; c++)
                for (int f = 0; f < F; f++)
                    for (int y = 0; y < th; y++)
                        for (int x = 0; x < tw; x++)
                            latents_out[((size_t)c * F + f) * plane + (size_t)(ly + y) * w + lx + x] +=
                                wy[y] * wx[x] * part[((size_t)c * F + f) * tplane + (size_t)y * tw + x];
            if (s == LV_OK)
                for (int y = 0; y < th; y++)
                    for (int x = 0; x < tw; x++) wsum[(size_t)(ly + y) * w + lx + x] += wy[y] * wx[x];
        }
    if (s == LV_OK)
        for (size_t cf = 0; cf < (size_t)z * F; cf++)
            for (size_t p = 0; p < plane; p++) latents_out[cf * plane + p] /= wsum[p];
    free(wsum), free(crop), free(part), free(wy), free(wx);
    return s;
}

uint64_t lv_vae_encoder_tiled_memory(const lv_vae_encoder *enc, int H, int W, const lv_vae_tiling *tiling) {
    const int ds = enc->downscale;
    int th = tiling->tile_h * ds < H ? tiling->tile_h * ds : H, tw = tiling->tile_w * ds < W ? tiling->tile_w * ds : W;
    return lv_vae_encoder_memory(enc, th, tw);
}

/* ---- tiles streamed block by block (lv_vae_tile_stream) --------------------------------------
 *
 * The decoder is causal: a tile's frames of a block depend on the tile's earlier blocks only
 * through its convs' history. So each tile keeps its own: after decoding a tile's part of a
 * block the decoder's history (every slot's two frames, how many are real, the first-frame
 * flag, the frame count) is read back into the tile's host copy, and written back to the
 * device before the tile's next block. The device holds one tile's decoder; the host holds
 * every tile's history and one block's frames. The tiles are blended exactly as
 * lv_vae_decode_tiled blends them (same weights, same order of additions), so decoding a video
 * in blocks gives its frames bit for bit. */

typedef struct tile_state {
    float *frames[VAE_MAX_SLOTS]; /* the slot's [2, rows, cols, C], NULL until it holds a frame */
    int valid[VAE_MAX_SLOTS], newest[VAE_MAX_SLOTS];
    bool started;
    int64_t frames_done;
} tile_state;

struct lv_vae_tile_stream {
    lv_vae_decoder *dec;
    int h, w, up;
    tile_grid g;
    float *wy, *wx;      /* per tile: th * up, tw * up weights */
    float *wsum;         /* [H, W]: the sum of the weights at each output pixel */
    tile_state *tiles;
    float *crop, *acc;   /* one tile's latents of a block; the block's frames [3, T, H, W] */
    int crop_frames;
    int64_t acc_frames;
    int64_t frames_done;
    uint64_t host_bytes;
};


lv_status lv_vae_tile_stream_create(lv_vae_decoder *dec, int h, int w, const lv_vae_tiling *tiling,
                                    lv_vae_tile_stream **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_vae_tile_stream_create: out is NULL");
    *out = NULL;
    if (!dec || !tiling || h < 1 || w < 1 || h > 4096 || w > 4096)
        return lv_error(LV_ERR_INVALID, "lv_vae_tile_stream_create: %s", !dec || !tiling ? "missing argument"
                                                                                        : "latent size out of range");
    if (dec->comm)
        return lv_error(LV_ERR_INVALID, "VAE tiles: the decoder is set to decode over bands "
                        "(lv_vae_set_sequence_parallel): tiles or bands, one or the other");
    lv_vae_tile_stream *s = calloc(1, sizeof *s);
    if (!s) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status gs = tile_grid_of("VAE tiles", h, w, tiling, &s->g);
    if (gs != LV_OK) {
        free(s);
        return gs;
    }
    lv_vae_info info;
    lv_vae_decoder_info(dec, &info);
    s->dec = dec, s->h = h, s->w = w, s->up = info.upscale;
    const int up = s->up, n = s->g.ny * s->g.nx, th = s->g.th, tw = s->g.tw;
    const size_t W = (size_t)w * up, plane = (size_t)h * up * W;
    s->wy = malloc((size_t)n * th * up * sizeof *s->wy);
    s->wx = malloc((size_t)n * tw * up * sizeof *s->wx);
    s->wsum = calloc(plane, sizeof *s->wsum);
    s->tiles = calloc((size_t)n, sizeof *s->tiles);
    if (!s->wy || !s->wx || !s->wsum || !s->tiles) {
        lv_vae_tile_stream_destroy(s);
        return lv_error(LV_ERR_NOMEM, "out of host memory for %d VAE tiles", n);
    }
    for (int iy = 0; iy < s->g.ny; iy++)
        for (int ix = 0; ix < s->g.nx; ix++) {
            int t = iy * s->g.nx + ix;
            float *wy = s->wy + (size_t)t * th * up, *wx = s->wx + (size_t)t * tw * up;
            grid_weights(&s->g, iy, ix, up, wy, wx);
            for (int y = 0; y < th * up; y++)
                for (int x = 0; x < tw * up; x++)
                    s->wsum[(size_t)(s->g.ys[iy] * up + y) * W + s->g.xs[ix] * up + x] += wy[y] * wx[x];
        }
    /* what the tiles' histories will hold on the host: every slot of a tile, two frames */
    uint64_t per_tile = 0;
    for (int i = 0; i < dec->nslots; i++)
        per_tile += 2ull * th * dec->hist[i].scale * tw * dec->hist[i].scale * dec->hist[i].C * lv_dtype_size(vae_act_dtype(dec));
    s->host_bytes = per_tile * (uint64_t)n;
    *out = s;
    return LV_OK;
}

void lv_vae_tile_stream_destroy(lv_vae_tile_stream *s) {
    if (!s) return;
    for (int t = 0; s->tiles && t < s->g.ny * s->g.nx; t++)
        for (int i = 0; i < VAE_MAX_SLOTS; i++) free(s->tiles[t].frames[i]);
    free(s->tiles), free(s->wy), free(s->wx), free(s->wsum), free(s->crop), free(s->acc);
    free(s);
}

int lv_vae_tile_stream_count(const lv_vae_tile_stream *s) { return s->g.ny * s->g.nx; }
void lv_vae_tile_stream_size(const lv_vae_tile_stream *s, int *tile_h, int *tile_w) {
    *tile_h = s->g.th;
    *tile_w = s->g.tw;
}
uint64_t lv_vae_tile_stream_host_bytes(const lv_vae_tile_stream *s) { return s->host_bytes; }

/* The tile's history onto the device decoder (a tile that has not started: a new video). */
static lv_status tile_restore(lv_ctx *ctx, lv_vae_decoder *d, const tile_state *t, int th, int tw) {
    lv_vae_reset(d);
    if (!t->started) return LV_OK;
    LV_TRY(vae_ensure_buffers(ctx, d, th, tw));
    for (int i = 0; i < d->nslots; i++) {
        d->hist[i].valid = t->valid[i];
        d->hist[i].newest = t->newest[i];
        if (t->valid[i] > 0)
            LV_TRY(lv_tensor_write(ctx, &d->hist[i].frames, t->frames[i], lv_tensor_nbytes(&d->hist[i].frames)));
    }
    d->started = true;
    d->frames_done = t->frames_done;
    return LV_OK;
}

/* The device decoder's history into the tile's host copy. */
static lv_status tile_save(lv_ctx *ctx, const lv_vae_decoder *d, tile_state *t) {
    for (int i = 0; i < d->nslots; i++) {
        t->valid[i] = d->hist[i].valid;
        t->newest[i] = d->hist[i].newest;
        if (d->hist[i].valid == 0) continue;
        uint64_t bytes = lv_tensor_nbytes(&d->hist[i].frames);
        if (!t->frames[i] && !(t->frames[i] = malloc(bytes)))
            return lv_error(LV_ERR_NOMEM, "out of host memory for a VAE tile's history");
        LV_TRY(lv_tensor_read(ctx, &d->hist[i].frames, t->frames[i], bytes));
    }
    t->started = d->started;
    t->frames_done = d->frames_done;
    return LV_OK;
}

typedef struct stream_sink {
    float *acc;
    const float *wy, *wx;
    int64_t base, T, W, plane;
    int y0, x0, th, tw, channels;
} stream_sink;

static lv_status add_stream_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    stream_sink *s = user;
    int64_t t = index - s->base;
    if (t < 0 || t >= s->T || height != s->th || width != s->tw)
        return lv_error(LV_ERR_INVALID, "VAE tiles: unexpected frame %lld (%d x %d)", (long long)index, height, width);
    for (int c = 0; c < s->channels; c++)
        for (int y = 0; y < height; y++) {
            float *dst = s->acc + (size_t)(c * s->T + t) * s->plane + (size_t)(s->y0 + y) * s->W + s->x0;
            const float *src = rgb + ((size_t)c * height + y) * width;
            for (int x = 0; x < width; x++) dst[x] += s->wy[y] * s->wx[x] * src[x];
        }
    return LV_OK;
}

lv_status lv_vae_tile_stream_decode(lv_ctx *ctx, lv_vae_tile_stream *s, const float *latents, int n,
                                    lv_vae_frame_fn fn, void *user) {
    if (!ctx || !s || !fn || (n > 0 && !latents))
        return lv_error(LV_ERR_INVALID, "lv_vae_tile_stream_decode: ctx, stream, latents and a callback are required");
    if (n < 0) return lv_error(LV_ERR_INVALID, "lv_vae_tile_stream_decode: %d latent frames", n);
    if (n == 0) return LV_OK;
    lv_vae_decoder *d = s->dec;
    const vae_arch *a = &d->arch;
    const int up = s->up, th = s->g.th, tw = s->g.tw, C = a->out_ch, z = a->z;
    const int64_t T = s->frames_done == 0 ? 1 + 4 * ((int64_t)n - 1) : 4 * (int64_t)n;
    const int64_t W = (int64_t)s->w * up, plane = (int64_t)s->h * up * W;
    if (n > s->crop_frames) {
        free(s->crop);
        s->crop_frames = 0;
        if (!(s->crop = malloc((size_t)z * n * th * tw * sizeof *s->crop)))
            return lv_error(LV_ERR_NOMEM, "out of host memory for a VAE tile");
        s->crop_frames = n;
    }
    if (T > s->acc_frames) {
        free(s->acc);
        s->acc_frames = 0;
        if (!(s->acc = malloc((size_t)C * T * plane * sizeof *s->acc)))
            return lv_error(LV_ERR_NOMEM, "out of host memory for a block of %lld frames", (long long)T);
        s->acc_frames = T;
    }
    memset(s->acc, 0, (size_t)C * T * plane * sizeof *s->acc);
    lv_status st = LV_OK;
    for (int iy = 0; st == LV_OK && iy < s->g.ny; iy++)
        for (int ix = 0; st == LV_OK && ix < s->g.nx; ix++) {
            const int t = iy * s->g.nx + ix, ly = s->g.ys[iy], lx = s->g.xs[ix];
            for (int c = 0; c < z; c++)
                for (int f = 0; f < n; f++)
                    for (int y = 0; y < th; y++)
                        memcpy(s->crop + (((size_t)c * n + f) * th + y) * tw,
                               latents + (((size_t)c * n + f) * s->h + ly + y) * s->w + lx, (size_t)tw * sizeof *s->crop);
            stream_sink sink = {.acc = s->acc, .wy = s->wy + (size_t)t * th * up, .wx = s->wx + (size_t)t * tw * up,
                                .base = s->frames_done, .T = T, .W = W, .plane = plane, .y0 = ly * up, .x0 = lx * up,
                                .th = th * up, .tw = tw * up, .channels = C};
            st = tile_restore(ctx, d, &s->tiles[t], th, tw);
            if (st == LV_OK) st = lv_vae_decode_frames_cb(ctx, d, s->crop, n, th, tw, add_stream_frame, &sink);
            if (st == LV_OK) st = tile_save(ctx, d, &s->tiles[t]);
        }
    lv_vae_reset(d);
    if (st != LV_OK) return lv_error_prefix(st, "VAE tiles");
    float *one = malloc((size_t)C * plane * sizeof *one);
    if (!one) return lv_error(LV_ERR_NOMEM, "out of host memory for a frame");
    for (int64_t f = 0; st == LV_OK && f < T; f++) {
        for (int c = 0; c < C; c++) {
            const float *src = s->acc + ((size_t)c * T + f) * plane;
            float *dst = one + (size_t)c * plane;
            for (int64_t p = 0; p < plane; p++) dst[p] = src[p] / s->wsum[p];
        }
        st = fn(user, s->frames_done + f, one, (int)(s->h * up), (int)W);
    }
    free(one);
    if (st == LV_OK) s->frames_done += T;
    return st;
}

/* ---- tiles for a budget ------------------------------------------------------------------- */

int lv_vae_tile_overlap(int tile_h, int tile_w) {
    int m = tile_h < tile_w ? tile_h : tile_w;
    return m / 2 < 8 ? m / 2 : 8;
}

/* The rule of lv_vae_choose_tiling for any decoder's memory at a latent size (th x tw). */
typedef uint64_t (*decoder_bytes_fn)(const void *user, int th, int tw);

static int largest_square_tiles(int h, int w, uint64_t budget, decoder_bytes_fn bytes, const void *user,
                                lv_vae_tiling *out) {
    if (bytes(user, h, w) <= budget) return 0;
    /* one tile's memory shrinks with the tile: the largest square that fits */
    for (int t = (h > w ? h : w) - 1; t >= 4; t--) {
        lv_vae_tiling c = {t < h ? t : h, t < w ? t : w, 0};
        c.overlap = lv_vae_tile_overlap(c.tile_h, c.tile_w);
        if (bytes(user, c.tile_h, c.tile_w) <= budget) {
            *out = c;
            return 1;
        }
    }
    return -1;
}

static uint64_t loaded_decoder_bytes(const void *dec, int th, int tw) { return lv_vae_decoder_memory(dec, th, tw); }

static uint64_t estimated_decoder_bytes(const void *precision, int th, int tw) {
    return lv_vae_memory_estimate_at(th, tw, *(const lv_precision *)precision);
}

int lv_vae_choose_tiling(const lv_vae_decoder *dec, int h, int w, uint64_t budget, lv_vae_tiling *out) {
    return largest_square_tiles(h, w, budget, loaded_decoder_bytes, dec, out);
}

int lv_vae_choose_tiling_estimate(int h, int w, lv_precision precision, uint64_t budget, lv_vae_tiling *out) {
    return largest_square_tiles(h, w, budget, estimated_decoder_bytes, &precision, out);
}
