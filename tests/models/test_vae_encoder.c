/* The Wan VAE encoder on the engine against the original WanVAE_.encode (fp32 vectors in
 * assets/testdata/wan-vae/wan-vae-tiny-encoder.vectors.safetensors, made by
 * tests/reference/make_wan_vae_encoder_vectors.py from Wan-Video/Wan2.1's vae.py): the tiny
 * configuration of the decoder's vectors (both downsample3d, a downsample2d, the middle
 * attention, shortcut blocks) at 32 x 48 pixels (non-square), T = 1, 5, 9 (1 + 4k) and 7
 * (not: the original ignores the last 2 frames).
 *
 * Bounds:
 * - fp32: normalised MSE <= 1e-8 for the means (the bound) and for every tap; the
 *   kernels are each within a few ulp per output (test_vae_ops.c), so ~1e-12 is expected.
 * - 16-bit columns (the tensor-core path at f16 / bf16 precision): each convolution's input
 *   is rounded once to eps / 2 (eps = 2^-11 f16, 2^-8 bf16), the variance eps^2 / 12 of
 *   each rounding carried to the output by the layers after it; as for the decoder
 *   (test_vae.c, tensor_core_path_columns) the NMSE is bounded by (convs + 1) eps^2.
 * - The round trip (a smooth clip encoded, then decoded by the engine's decoder) against the
 *   original's encode then decode: NMSE <= 1e-8 (the encoder's 1e-8 carried through the
 *   decoder, whose own error is 1e-9). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/vae.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "wan_vae_internal.h"

#define NMSE_BOUND 1e-8
#define DIR LONGVK_ASSETS_DIR "/testdata/wan-vae/"
#define FULL DIR "wan-vae-tiny-full.weights.safetensors"
#define DECODER_ONLY DIR "wan-vae-tiny.weights.safetensors"
#define VECTORS DIR "wan-vae-tiny-encoder.vectors.safetensors"

static const lv_weight *vec(const lv_weights *v, const char *name) {
    const lv_weight *t = lv_weights_find(v, name);
    cr_assert_not_null(t, "vector '%s' missing", name);
    cr_assert_eq(t->dtype, LV_F32);
    return t;
}

static double check(const char *what, const float *got, const float *want, size_t n, double bound) {
    double e = ts_nmse(got, want, n);
    cr_log_info("%-34s nmse %.3g  max|err| %.3g", what, e, ts_max_abs_diff(got, want, n));
    cr_assert(e <= bound, "%s: nmse %.3g > %.1e", what, e, bound);
    return e;
}

/* The first T frames of video [3, Tv, H, W] as a contiguous [3, T, H, W] array. */
static float *first_frames(const lv_weight *video, int T) {
    const int Tv = (int)video->shape[1];
    const size_t P = (size_t)video->shape[2] * video->shape[3];
    float *out = malloc((size_t)3 * T * P * sizeof *out);
    for (int c = 0; c < 3; c++)
        memcpy(out + (size_t)c * T * P, (const float *)video->data + (size_t)c * Tv * P, (size_t)T * P * sizeof *out);
    return out;
}

/* Encodes video's first T frames; returns [z, F, h, w]. */
static float *encode(lv_ctx *ctx, lv_vae_encoder *enc, const lv_weight *video, int T) {
    const int H = (int)video->shape[2], W = (int)video->shape[3], ds = lv_vae_encoder_downscale(enc);
    float *rgb = first_frames(video, T);
    float *lat = malloc((size_t)lv_vae_encoder_z_dim(enc) * lv_vae_encoded_frames(T) * (H / ds) * (W / ds) * sizeof *lat);
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, rgb, T, H, W, lat), LV_OK, "%s", lv_last_error());
    free(rgb);
    return lat;
}

/* ---- the means and every intermediate the vectors hold ----------------------------------- */

typedef struct tap_acc {
    const char *name; /* the tap's and (with "tap.") the vector's */
    float *got;       /* [T, H, W, C] accumulated over chunks */
    int64_t frames;
} tap_acc;

typedef struct tap_state {
    tap_acc acc[5];
} tap_state;

static void on_tap(void *user, const char *name, lv_ctx *ctx, const lv_tensor *t) {
    tap_state *ts = user;
    for (int i = 0; i < 5; i++) {
        tap_acc *a = &ts->acc[i];
        if (strcmp(a->name, name) != 0) continue;
        float *part = ts_read(ctx, t);
        size_t per = (size_t)(lv_tensor_numel(t) / t->shape[0]);
        memcpy(a->got + (size_t)a->frames * per, part, (size_t)lv_tensor_numel(t) * sizeof *part);
        a->frames += t->shape[0];
        free(part);
    }
}

Test(vae_encoder, means_and_intermediates_match_the_original) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    lv_vae_encoder *enc;
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encoder_z_dim(enc), 4);
    cr_assert_eq(lv_vae_encoder_downscale(enc), 8);
    const lv_weight *video = vec(v, "video");
    const int counts[4] = {1, 5, 7, 9};
    for (int i = 0; i < 4; i++) {
        const int T = counts[i];
        char name[32];
        snprintf(name, sizeof name, "mean_T%d", T);
        const lv_weight *want = vec(v, name);
        cr_assert_eq(want->shape[1], lv_vae_encoded_frames(T), "%s: %lld latent frames, the API says %d", name,
                     (long long)want->shape[1], lv_vae_encoded_frames(T));
        tap_state ts = {.acc = {{"encoder.downsamples.2"}, {"encoder.downsamples.5"}, {"encoder.downsamples.8"},
                                {"encoder.middle.2"}, {"encoder.head"}}};
        if (T == 9) {
            for (int k = 0; k < 5; k++) {
                char vn[64];
                snprintf(vn, sizeof vn, "tap.%s", ts.acc[k].name);
                ts.acc[k].got = malloc((size_t)lv_weight_numel(vec(v, vn)) * sizeof(float));
            }
            lv_vae_encoder_set_tap(enc, on_tap, &ts);
        }
        float *got = encode(ctx, enc, video, T);
        check(name, got, want->data, (size_t)lv_weight_numel(want), NMSE_BOUND);
        free(got);
        lv_vae_encoder_set_tap(enc, NULL, NULL);
        for (int k = 0; T == 9 && k < 5; k++) {
            char vn[64];
            snprintf(vn, sizeof vn, "tap.%s", ts.acc[k].name);
            const lv_weight *tw = vec(v, vn); /* [C, T, H, W] */
            const int64_t C = tw->shape[0], Tt = tw->shape[1], P = tw->shape[2] * tw->shape[3];
            cr_assert_eq(ts.acc[k].frames, Tt, "%s: %lld frames, the original %lld", vn, (long long)ts.acc[k].frames,
                         (long long)Tt);
            float *cf = malloc((size_t)lv_weight_numel(tw) * sizeof *cf); /* [T, H, W, C] -> [C, T, H, W] */
            for (int64_t c = 0; c < C; c++)
                for (int64_t q = 0; q < Tt * P; q++) cf[c * Tt * P + q] = ts.acc[k].got[q * C + c];
            check(vn, cf, tw->data, (size_t)lv_weight_numel(tw), NMSE_BOUND);
            free(cf);
            free(ts.acc[k].got);
        }
    }
    lv_vae_encoder_destroy(ctx, enc);
    lv_weights_close(v);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}

/* ---- frame counts, sizes, files ---------------------------------------------------------- */

Test(vae_encoder, frame_count_rules) {
    const int T[9] = {0, 1, 2, 4, 5, 7, 8, 9, 81}, F[9] = {0, 1, 1, 1, 2, 2, 2, 3, 21};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(lv_vae_encoded_frames(T[i]), F[i], "%d frames: %d latent frames, want %d", T[i],
                     lv_vae_encoded_frames(T[i]), F[i]);
}

Test(vae_encoder, decoder_only_file_and_bad_sizes_are_clean_errors) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w;
    lv_vae_encoder *enc = NULL;
    cr_assert_eq(lv_weights_open(DECODER_ONLY, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_ERR_FORMAT);
    cr_assert_null(enc);
    const char *msg = lv_last_error();
    cr_assert(strstr(msg, "decoder-only") && strstr(msg, "Wan2.1_VAE.pth") && strstr(msg, "wan-vae-tiny.weights"),
              "%s", msg);
    lv_vae_halves halves;
    lv_vae_weights_halves(w, &halves);
    cr_assert_eq(halves.encoder_tensors, 0);
    cr_assert_eq(halves.decoder_tensors, 108);
    lv_weights_close(w);

    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK, "%s", lv_last_error());
    lv_vae_weights_halves(w, &halves);
    cr_assert_eq(halves.encoder_tensors + halves.decoder_tensors, 194);
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encoder_params(enc), halves.encoder_params);
    float rgb[3 * 12 * 16] = {0}, lat[4 * 2 * 2];
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, rgb, 1, 12, 16, lat), LV_ERR_INVALID); /* 12 rows: not 8k */
    cr_assert(strstr(lv_last_error(), "multiples of 8"), "%s", lv_last_error());
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, rgb, 0, 8, 16, lat), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, NULL, 1, 8, 16, lat), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_encode_frames(ctx, enc, rgb, 1, 8, 16, lat), LV_OK, "%s", lv_last_error());
    lv_vae_encoder_destroy(ctx, enc);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}

/* ---- the round trip ----------------------------------------------------------------------- */

Test(vae_encoder, round_trip_matches_the_original) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    lv_vae_encoder *enc;
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const lv_weight *clip = vec(v, "smooth_video"), *mean = vec(v, "smooth_mean"), *recon = vec(v, "smooth_recon");
    const int T = (int)clip->shape[1], F = (int)mean->shape[1], h = (int)mean->shape[2], wd = (int)mean->shape[3];
    float *lat = encode(ctx, enc, clip, T);
    check("smooth_mean", lat, mean->data, (size_t)lv_weight_numel(mean), NMSE_BOUND);
    float *out = malloc((size_t)lv_weight_numel(recon) * sizeof *out);
    cr_assert_eq(lv_vae_frames_for(dec, F), recon->shape[1]);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, F, h, wd, out), LV_OK, "%s", lv_last_error());
    check("smooth_recon (encode, decode)", out, recon->data, (size_t)lv_weight_numel(recon), NMSE_BOUND);
    free(out), free(lat);
    lv_vae_decoder_destroy(ctx, dec);
    lv_vae_encoder_destroy(ctx, enc);
    lv_weights_close(v);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}

/* ---- 16-bit columns ----------------------------------------------------------------------- */

Test(vae_encoder, tensor_core_path_columns, .timeout = 300) {
    setenv("LONGVK_VAE_CONV", "gemm", 1);
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK);
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    const lv_weight *video = vec(v, "video"), *want = vec(v, "mean_T9");
    const size_t n = (size_t)lv_weight_numel(want);
    const int precisions[3] = {LV_PRECISION_F32, LV_PRECISION_F16, LV_PRECISION_BF16};
    const double eps[3] = {0, 1.0 / 2048, 1.0 / 256};
    for (int p = 0; p < 3; p++) {
        lv_ctx_options opt;
        lv_ctx_options_default(&opt);
        opt.precision = precisions[p];
        lv_ctx *ctx = ts_ctx_with(opt);
        lv_vae_encoder *enc;
        cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
        int convs = 1 + 4 + 1; /* conv1, the middle's two blocks, the head */
        for (int i = 0; i < enc->nlayers; i++)
            convs += enc->layers[i].kind == VAE_ENC_DOWN2D ? 1 : 2; /* a block's two, a downsample3d's two */
        const double bound = p == 0 ? NMSE_BOUND : (convs + 1) * eps[p] * eps[p];
        float *got = encode(ctx, enc, video, 9);
        char what[64];
        snprintf(what, sizeof what, "mean_T9, columns in %s", p == 0 ? "f32" : p == 1 ? "f16" : "bf16");
        cr_log_info("%s: bound %.3g over %d convs", what, bound, convs);
        check(what, got, want->data, n, bound);
        free(got);
        lv_vae_encoder_destroy(ctx, enc);
        ts_ctx_done(ctx);
    }
    lv_weights_close(v);
    lv_weights_close(w);
}

/* ---- diffusers names ---------------------------------------------------------------------- */

/* The whole tiny VAE under diffusers AutoencoderKLWan names (quant_conv, encoder.conv_in,
 * encoder.down_blocks.{i} as one flat list, mid_block, norm_out, conv_out) encodes exactly as
 * under the original names. */
Test(vae_encoder, diffusers_names) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK);
    int n = lv_weights_count(w);
    lv_weight *t = calloc((size_t)n, sizeof *t);
    char (*names)[160] = calloc((size_t)n, sizeof *names);
    for (int i = 0; i < n; i++) {
        t[i] = *lv_weights_at(w, i);
        cr_assert(vae_diffusers_name(t[i].name, 2, names[i], sizeof names[i]), "no diffusers name for %s", t[i].name);
        for (int j = 0; j < i; j++) cr_assert_str_neq(names[i], names[j]);
        t[i].name = names[i];
    }
    const char *probes[][2] = {
        {"conv1.weight", "quant_conv.weight"},
        {"encoder.conv1.bias", "encoder.conv_in.bias"},
        {"encoder.downsamples.5.time_conv.weight", "encoder.down_blocks.5.time_conv.weight"},
        {"encoder.downsamples.2.resample.1.bias", "encoder.down_blocks.2.resample.1.bias"},
        {"encoder.downsamples.3.shortcut.weight", "encoder.down_blocks.3.conv_shortcut.weight"},
        {"encoder.downsamples.10.residual.3.gamma", "encoder.down_blocks.10.norm2.gamma"},
        {"encoder.middle.1.to_qkv.weight", "encoder.mid_block.attentions.0.to_qkv.weight"},
        {"encoder.middle.2.residual.6.bias", "encoder.mid_block.resnets.1.conv2.bias"},
        {"encoder.head.0.gamma", "encoder.norm_out.gamma"},
        {"encoder.head.2.weight", "encoder.conv_out.weight"},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        char probe[160];
        cr_assert(vae_diffusers_name(probes[i][0], 2, probe, sizeof probe));
        cr_assert_str_eq(probe, probes[i][1]);
    }
    const char *meta[4] = {"latents_mean", lv_weights_metadata(w, "latents_mean"), "latents_std",
                           lv_weights_metadata(w, "latents_std")};
    const char *path = LONGVK_TEST_TMP "/wan-vae-tiny-full-diffusers.safetensors";
    cr_assert_eq(lv_safetensors_write(path, t, n, meta, 2), LV_OK, "%s", lv_last_error());

    lv_ctx *ctx = ts_ctx();
    lv_weights *dw, *v;
    cr_assert_eq(lv_weights_open(path, &dw), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    lv_vae_encoder *a, *b;
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_encoder_create(ctx, dw, &b), LV_OK, "%s", lv_last_error());
    const lv_weight *video = vec(v, "video");
    float *la = encode(ctx, a, video, 5), *lb = encode(ctx, b, video, 5);
    const size_t nl = (size_t)4 * 2 * 4 * 6;
    cr_assert_eq(memcmp(la, lb, nl * sizeof *la), 0, "diffusers-named weights encode differently");
    free(la), free(lb);
    lv_vae_encoder_destroy(ctx, a);
    lv_vae_encoder_destroy(ctx, b);
    lv_weights_close(v);
    lv_weights_close(dw);
    ts_ctx_done(ctx);
    free(t), free(names);
    lv_weights_close(w);
}

/* ---- spatial tiling ----------------------------------------------------------------------- */

/* One tile covering the frame is the untiled encode, bit for bit. Two tiles of 4 x 4 latent
 * pixels overlapping by 2 on the 4 x 6 latent frame (starts 0 and 2): where only one tile
 * covers a latent pixel (columns 0-1, 4-5) the result is exactly that tile's encode of its
 * 32 x 32 pixel crop; across the overlap it is blended. No tiled latent equals the untiled one
 * (the tile edges are zero-padded, the attention sees one tile): only a sanity bound on the
 * whole is asserted (a misplaced or unblended tile gives NMSE near 1), the figure logged:
 * 0.014 on this random-weight model. */
Test(vae_encoder, tiling) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(FULL, &w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    lv_vae_encoder *enc;
    cr_assert_eq(lv_vae_encoder_create(ctx, w, &enc), LV_OK, "%s", lv_last_error());
    const lv_weight *video = vec(v, "video");
    const int T = 9, H = 32, W = 48, F = 3, h = 4, wd = 6;
    float *rgb = first_frames(video, T), *full = encode(ctx, enc, video, T);
    const size_t n = (size_t)4 * F * h * wd;
    float *tiled = malloc(n * sizeof *tiled);
    lv_vae_tiling one = {8, 8, 2};
    cr_assert_eq(lv_vae_encode_tiled(ctx, enc, rgb, T, H, W, &one, tiled), LV_OK, "%s", lv_last_error());
    cr_assert_eq(memcmp(full, tiled, n * sizeof *full), 0, "a single tile differs from the untiled encode");

    lv_vae_tiling two = {4, 4, 2};
    cr_assert_eq(lv_vae_encode_tiled(ctx, enc, rgb, T, H, W, &two, tiled), LV_OK, "%s", lv_last_error());
    for (int k = 0; k < 2; k++) { /* the pixel crops of the two tiles: columns 0-31 and 16-47 */
        const int px0 = 16 * k;
        float *crop = malloc((size_t)3 * T * H * 32 * sizeof *crop), lat[4 * 3 * 4 * 4];
        for (int ct = 0; ct < 3 * T; ct++)
            for (int y = 0; y < H; y++)
                memcpy(crop + ((size_t)ct * H + y) * 32, rgb + ((size_t)ct * H + y) * W + px0, 32 * sizeof *crop);
        cr_assert_eq(lv_vae_encode_frames(ctx, enc, crop, T, H, 32, lat), LV_OK, "%s", lv_last_error());
        for (int cf = 0; cf < 4 * F; cf++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < 2; x++) { /* tile 0's columns 0-1, tile 1's columns 2-3 (latent 4-5) */
                    const int tx = k == 0 ? x : 2 + x, ox = 2 * k + tx;
                    cr_assert_eq(tiled[((size_t)cf * h + y) * wd + ox], lat[((size_t)cf * h + y) * 4 + tx],
                                 "tile %d, latent column %d: not the tile's own encode", k, ox);
                }
        free(crop);
    }
    double e = ts_nmse(tiled, full, n);
    cr_log_info("2 tiles of 4 x 4 overlapping by 2 at latent 4 x 6: nmse vs untiled %.3g; device memory %llu vs %llu "
                "bytes", e, (unsigned long long)lv_vae_encoder_tiled_memory(enc, H, W, &two),
                (unsigned long long)lv_vae_encoder_memory(enc, H, W));
    cr_assert(e < 0.1, "tiled encode nmse %.3g vs untiled", e);
    cr_assert(lv_vae_encoder_tiled_memory(enc, H, W, &two) < lv_vae_encoder_memory(enc, H, W));
    lv_vae_tiling bad = {4, 4, 4};
    cr_assert_eq(lv_vae_encode_tiled(ctx, enc, rgb, T, H, W, &bad, tiled), LV_ERR_INVALID);
    free(rgb), free(full), free(tiled);
    lv_vae_encoder_destroy(ctx, enc);
    lv_weights_close(v);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}
