/* Latents through the VAE into a frame writer (longvk/frame_writer.h), the decode path of
 * lv_generate and `longvk decode`, and the checks of latents before a decode. */
#include <stdlib.h>

#include "longvk/frame_writer.h"

lv_status lv_decode_check_latents(const lv_vae_decoder *vae, const char *vae_name, const char *latents_name,
                                  int ndim, const int64_t *shape, int bands) {
    if (!vae || !shape || ndim < 0)
        return lv_error(LV_ERR_INVALID, "lv_decode_check_latents: %s", !vae ? "the VAE is NULL" : "no shape");
    if (!vae_name) vae_name = "the VAE";
    if (!latents_name) latents_name = "the latents";
    const int z = lv_vae_z_dim(vae);
    if (ndim != 4 || shape[0] != z) {
        if (ndim == 4)
            return lv_error(LV_ERR_INVALID, "%s: latents must be [%d, F, h, w] (the VAE's %d channels), got %d "
                            "dimensions with %lld channels", latents_name, z, z, ndim, (long long)shape[0]);
        return lv_error(LV_ERR_INVALID, "%s: latents must be [%d, F, h, w] (the VAE's %d channels), got %d dimensions",
                        latents_name, z, z, ndim);
    }
    if (shape[1] < 1 || shape[2] < 1 || shape[3] < 1)
        return lv_error(LV_ERR_INVALID, "%s: latents of shape [%lld, %lld, %lld, %lld] have a zero dimension (%s): "
                        "there is nothing to decode", latents_name, (long long)shape[0], (long long)shape[1],
                        (long long)shape[2], (long long)shape[3], shape[1] < 1 ? "no latent frames" : "no latent pixels");
    if (!lv_vae_has_normalization(vae))
        return lv_error(LV_ERR_UNSUPPORTED, "%s has %d latent channels and no de-normalisation tables (Wan2.1's are "
                        "built in for 16 channels only; a .safetensors file can carry them as latents_mean and "
                        "latents_std in its metadata, a .pth file cannot). Give --vae a .safetensors copy of these "
                        "weights with both in its metadata, each a JSON list of %d numbers (in Python: "
                        "safetensors.torch.save_file(state_dict, 'vae.safetensors', metadata={'latents_mean': "
                        "'[...]', 'latents_std': '[...]'}))", vae_name, z, z);
    const int64_t h = shape[2], w = shape[3];
    if (h > 4096 || w > 4096)
        return lv_error(LV_ERR_INVALID, "%s: latent size %d x %d is out of range", latents_name, (int)h, (int)w);
    if (bands > h)
        return lv_error(LV_ERR_INVALID, "%d sequence-parallel bands over %d latent rows: each band needs at least one "
                        "row (1 to %d bands)", bands, (int)h, (int)h);
    return LV_OK;
}

static lv_status on_decoded(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)index; /* the writer counts the frames of the whole video */
    return lv_frame_writer_write(user, rgb, 1, height, width);
}

lv_status lv_vae_decode_to_writer(lv_ctx *ctx, lv_vae_decoder *vae, const float *latents, int n, int h, int w,
                                  const lv_vae_tiling *tiling, lv_frame_writer *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_vae_decode_to_writer: the writer is NULL");
    if (!tiling) return lv_vae_decode_frames_cb(ctx, vae, latents, n, h, w, on_decoded, out);
    if (!vae || n < 1 || h < 1 || w < 1)
        return lv_error(LV_ERR_INVALID, "lv_vae_decode_to_writer: %s", !vae ? "the VAE is NULL" : "a bad size");
    const int64_t T = 1 + 4 * (int64_t)(n - 1); /* a whole video, from its start */
    float *video = malloc((size_t)T * 3 * 64 * h * w * sizeof *video);
    if (!video) return lv_error(LV_ERR_NOMEM, "out of host memory for the tiled video");
    lv_status st = lv_vae_decode_tiled(ctx, vae, latents, n, h, w, tiling, video);
    if (st == LV_OK) st = lv_frame_writer_write(out, video, (int)T, 8 * h, 8 * w);
    free(video);
    return st;
}
