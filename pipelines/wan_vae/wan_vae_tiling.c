/* Spatially tiled decoding for devices that cannot hold the full-frame decoder: the latent
 * frame is cut into overlapping tiles, each tile is decoded over the whole video on its
 * own (its own conv history, reset between tiles), and the tiles' frames are blended with
 * linear ramps across the overlaps. Device memory is that of one tile; the output video is
 * assembled in host memory. Tiles do not see their neighbours' pixels (every conv pads
 * the tile edge with zeros), so the result differs from an untiled decode near the seams;
 * the overlap hides most of it (test_vae.c measures it).
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
    int th = tiling->tile_h, tw = tiling->tile_w, ov = tiling->overlap;
    if (th < 1 || tw < 1 || ov < 0 || (ov >= th && th < h) || (ov >= tw && tw < w))
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_tiled: tiles %d x %d with overlap %d (the "
                        "overlap must be smaller than a tile)", th, tw, ov);
    if (th > h) th = h;
    if (tw > w) tw = w;
    enum { MAX_TILES = 256 };
    int ys[MAX_TILES], xs[MAX_TILES];
    int ny = tile_starts(h, th, ov, ys, MAX_TILES), nx = tile_starts(w, tw, ov, xs, MAX_TILES);
    if (ny < 0 || nx < 0)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_tiled: more than %d tiles along an axis",
                        MAX_TILES);
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
            /* overlaps in output pixels: to the neighbour's start (or end) */
            int ov_up = iy > 0 ? (ys[iy - 1] + th - ly) * up : 0;
            int ov_down = iy + 1 < ny ? (ly + th - ys[iy + 1]) * up : 0;
            int ov_left = ix > 0 ? (xs[ix - 1] + tw - lx) * up : 0;
            int ov_right = ix + 1 < nx ? (lx + tw - xs[ix + 1]) * up : 0;
            for (int y = 0; y < th * up; y++) {
                float lo = ramp(y, th * up, ov_up, ov_up > 0, false);
                float hi = ramp(y, th * up, ov_down, false, ov_down > 0);
                wy[y] = lo < hi ? lo : hi;
            }
            for (int x = 0; x < tw * up; x++) {
                float lo = ramp(x, tw * up, ov_left, ov_left > 0, false);
                float hi = ramp(x, tw * up, ov_right, false, ov_right > 0);
                wx[x] = lo < hi ? lo : hi;
            }
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
    int th = tiling->tile_h, tw = tiling->tile_w, ov = tiling->overlap;
    if (th < 1 || tw < 1 || ov < 0 || (ov >= th && th < h) || (ov >= tw && tw < w))
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_tiled: tiles %d x %d with overlap %d (the overlap must "
                        "be smaller than a tile)", th, tw, ov);
    if (th > h) th = h;
    if (tw > w) tw = w;
    enum { MAX_TILES = 256 };
    int ys[MAX_TILES], xs[MAX_TILES];
    int ny = tile_starts(h, th, ov, ys, MAX_TILES), nx = tile_starts(w, tw, ov, xs, MAX_TILES);
    if (ny < 0 || nx < 0)
        return lv_error(LV_ERR_INVALID, "lv_vae_encode_tiled: more than %d tiles along an axis", MAX_TILES);
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
            /* overlaps in latent pixels: to the neighbour's start (or end) */
            const int ov_up = iy > 0 ? ys[iy - 1] + th - ly : 0, ov_down = iy + 1 < ny ? ly + th - ys[iy + 1] : 0;
            const int ov_left = ix > 0 ? xs[ix - 1] + tw - lx : 0, ov_right = ix + 1 < nx ? lx + tw - xs[ix + 1] : 0;
            for (int y = 0; y < th; y++) {
                float lo = ramp(y, th, ov_up, ov_up > 0, false), hi = ramp(y, th, ov_down, false, ov_down > 0);
                wy[y] = lo < hi ? lo : hi;
            }
            for (int x = 0; x < tw; x++) {
                float lo = ramp(x, tw, ov_left, ov_left > 0, false), hi = ramp(x, tw, ov_right, false, ov_right > 0);
                wx[x] = lo < hi ? lo : hi;
            }
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
