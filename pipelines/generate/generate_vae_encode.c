/* A latent model's "pixel frames -> model frames" step, shared by --image (generate_image.c)
 * and --continue (generate_continue.c): the Wan2.1 VAE's encoder half, from the same file as
 * the decoder (--vae, or the pipeline folder's vae/). It returns SANA-Video's normalised
 * latents, (mean - latents_mean) / latents_std with the file's tables (lv_vae_encode_frames
 * applies them once; the decoder undoes them with the same tables), i.e. what the DiT makes.
 *
 * Memory: the encoder is uploaded, run and freed on the run's context before the DiT's weights
 * are uploaded (the text encoder's rule, generate_text.c), so the peak is the larger of the
 * two, not their sum. */
#include <stdio.h>
#include <stdlib.h>

#include "generate_run.h"

const char *lv_gen_vae_path(const gen_run *r) {
    if (r->o.vae_path) return r->o.vae_path;
    if (r->encoder_vae) return r->encoder_vae;
    return r->m.pipeline && r->m.parts.vae[0] ? r->m.parts.vae : NULL;
}

lv_status lv_gen_vae_encoder_check(const gen_run *r, const char *flag) {
    const char *path = lv_gen_vae_path(r);
    if (!path)
        return lv_error(LV_ERR_INVALID, "%s with %s (a latent-space model): the input is brought into its latent "
                        "space by the Wan2.1 VAE's encoder: give the VAE with --vae (Wan2.1_VAE.pth, or a diffusers "
                        "vae/ file with both halves), or a pipeline folder with a vae/ as --model", flag, r->m.name);
    lv_weights *w;
    lv_status s = lv_weights_open(path, &w);
    if (s != LV_OK) return lv_error_prefix(s, "%s: the VAE %s", flag, path);
    lv_vae_halves h;
    lv_vae_weights_halves(w, &h);
    lv_weights_close(w);
    if (h.encoder_tensors == 0)
        return lv_error(LV_ERR_INVALID, "%s: the VAE %s holds the decoder half only (no encoder.* / conv1.*, nor "
                        "diffusers' encoder.* / quant_conv.*), and %s needs the encoder to bring its input into the "
                        "latent space: give a VAE file with both halves (Wan2.1_VAE.pth as released, or diffusers' "
                        "vae/diffusion_pytorch_model.safetensors)", flag, path, flag);
    return LV_OK;
}

lv_status lv_gen_vae_encode(const gen_run *r, const char *flag, const float *rgb, int T, float *latents) {
    const char *path = lv_gen_vae_path(r);
    if (!path) return lv_gen_vae_encoder_check(r, flag); /* says what to give (checked with the options) */
    const int C = lv_sana_file_config(r->m.file)->in_channels;
    lv_weights *w;
    lv_vae_encoder *enc = NULL;
    LV_TRY(lv_weights_open(path, &w));
    lv_status s = lv_vae_encoder_create(r->ctx, w, &enc);
    if (s != LV_OK) lv_error_prefix(s, "%s: the VAE encoder of %s", flag, path);
    if (s == LV_OK && (lv_vae_encoder_z_dim(enc) != C || lv_vae_encoder_downscale(enc) != 8))
        s = lv_error(LV_ERR_INVALID, "%s: the VAE %s makes %d latent channels at 1/%d of the size, the model %s "
                     "takes %d at 1/8", flag, path, lv_vae_encoder_z_dim(enc), lv_vae_encoder_downscale(enc),
                     r->m.name, C);
    if (s == LV_OK && (s = lv_vae_encode_frames(r->ctx, enc, rgb, T, r->o.height, r->o.width, latents)) != LV_OK)
        lv_error_prefix(s, "%s: encoding %d frame%s of %dx%d", flag, T, T == 1 ? "" : "s", r->o.width, r->o.height);
    lv_vae_encoder_destroy(r->ctx, enc);
    lv_weights_close(w);
    return s;
}
