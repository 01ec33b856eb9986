/* The Wan VAE decoder on the engine against the original WanVAE_.decode (fp32 vectors in
 * assets/testdata/wan-vae/, tiny random-weight config that has every path of the real
 * decoder: both upsample3d, the middle attention, a shortcut block, non-square latents).
 *
 * Bound: normalised MSE <= 1e-9 for every intermediate the vectors hold and for the
 * video, as the issue asks. An implementation written from the spec reaches ~1e-12 in
 * fp32; the engine's kernels are each within a few ulp per output (test_vae_ops.c). The
 * spec's list of wrong variants (first frame in the time_conv history, swapped halves,
 * replicate padding, ...) all give NMSE above 0.07. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "longvk/codec.h"
#include "longvk/npy.h"
#include "longvk/vae.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "wan_vae_internal.h"

#define NMSE_BOUND 1e-9
#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.vectors.safetensors"

typedef struct fixture {
    lv_ctx *ctx;
    lv_weights *w, *vec;
    lv_vae_decoder *dec;
    int z, L, h, wd;     /* latents [z, L, h, wd] */
    int T, OH, OW;       /* video [3, T, OH, OW] */
} fixture;

static const lv_weight *vec(const fixture *fx, const char *name) {
    const lv_weight *t = lv_weights_find(fx->vec, name);
    cr_assert_not_null(t, "vector '%s' missing", name);
    cr_assert_eq(t->dtype, LV_F32);
    return t;
}

static void open_fixture(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->ctx = ts_ctx();
    cr_assert_eq(lv_weights_open(WEIGHTS, &fx->w), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &fx->vec), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decoder_create(fx->ctx, fx->w, &fx->dec), LV_OK, "%s", lv_last_error());
    const lv_weight *lat = vec(fx, "latents"), *video = vec(fx, "video");
    fx->z = (int)lat->shape[0], fx->L = (int)lat->shape[1], fx->h = (int)lat->shape[2];
    fx->wd = (int)lat->shape[3];
    fx->T = (int)video->shape[1], fx->OH = (int)video->shape[2], fx->OW = (int)video->shape[3];
    cr_assert_eq(lv_vae_z_dim(fx->dec), fx->z);
}

static void close_fixture(fixture *fx) {
    lv_vae_decoder_destroy(fx->ctx, fx->dec);
    lv_weights_close(fx->vec);
    lv_weights_close(fx->w);
    ts_ctx_done(fx->ctx);
}

static double check(const char *what, const float *got, const float *want, size_t n) {
    double e = ts_nmse(got, want, n);
    cr_log_info("%-28s nmse %.3g  max|err| %.3g", what, e, ts_max_abs_diff(got, want, n));
    cr_assert(e <= NMSE_BOUND, "%s: nmse %.3g > %.0e", what, e, NMSE_BOUND);
    return e;
}

/* latents[:, f0:f0+n] as a contiguous [z, n, h, w] array */
static float *latent_frames(const fixture *fx, int f0, int n) {
    const float *lat = vec(fx, "latents")->data;
    size_t P = (size_t)fx->h * fx->wd;
    float *out = malloc((size_t)fx->z * n * P * sizeof *out);
    for (int c = 0; c < fx->z; c++)
        memcpy(out + (size_t)c * n * P, lat + ((size_t)c * fx->L + f0) * P, (size_t)n * P * sizeof *out);
    return out;
}

/* Decodes the latents in blocks of the given sizes; returns [3, T, OH, OW]. */
static float *decode_chunks(fixture *fx, const int *sizes, int count) {
    size_t fr = (size_t)fx->OH * fx->OW;
    float *video = calloc((size_t)3 * fx->T * fr, sizeof *video);
    int f0 = 0;
    int64_t t0 = 0;
    for (int i = 0; i < count; i++) {
        int n = sizes[i];
        int64_t T = lv_vae_frames_for(fx->dec, n);
        float *lat = latent_frames(fx, f0, n), *part = malloc((size_t)3 * T * fr * sizeof *part);
        cr_assert_eq(lv_vae_decode_frames(fx->ctx, fx->dec, lat, n, fx->h, fx->wd, part), LV_OK,
                     "%s", lv_last_error());
        for (int c = 0; c < 3; c++)
            memcpy(video + ((size_t)c * fx->T + t0) * fr, part + (size_t)c * T * fr,
                   (size_t)T * fr * sizeof *video);
        free(lat), free(part);
        f0 += n;
        t0 += T;
    }
    cr_assert_eq(f0, fx->L);
    cr_assert_eq(t0, fx->T);
    cr_assert_eq(lv_vae_frames_decoded(fx->dec), fx->T);
    return video;
}

/* ---- every intermediate the vectors hold -------------------------------------------------- */

typedef struct tap_acc {
    const char *name;   /* the decoder's tap name */
    const char *vector; /* the vectors' name ([C, T, H, W]) */
    float *got;         /* [T, H, W, C] accumulated over steps */
    int64_t frames;
} tap_acc;

typedef struct tap_state {
    tap_acc acc[8];
    int n;
} tap_state;

static void on_tap(void *user, const char *name, lv_ctx *ctx, const lv_tensor *t) {
    tap_state *ts = user;
    for (int i = 0; i < ts->n; i++) {
        tap_acc *a = &ts->acc[i];
        if (strcmp(a->name, name) != 0) continue;
        float *part = ts_read(ctx, t);
        size_t per = (size_t)(lv_tensor_numel(t) / t->shape[0]);
        memcpy(a->got + (size_t)a->frames * per, part, (size_t)lv_tensor_numel(t) * sizeof *part);
        a->frames += t->shape[0];
        free(part);
    }
}

Test(vae, every_intermediate_and_the_video) {
    fixture fx;
    open_fixture(&fx);
    tap_state ts = {.n = 8,
                    .acc = {{"latents_denorm", "latents_denorm"},
                            {"conv2", "after_conv2"},
                            {"decoder.conv1", "tap.decoder.conv1"},
                            {"decoder.middle.2", "tap.decoder.middle.2"},
                            {"decoder.upsamples.3", "tap.decoder.upsamples.3"},
                            {"decoder.upsamples.7", "tap.decoder.upsamples.7"},
                            {"decoder.upsamples.11", "tap.decoder.upsamples.11"},
                            {"decoder.upsamples.14", "tap.decoder.upsamples.14"}}};
    for (int i = 0; i < ts.n; i++)
        ts.acc[i].got = malloc(lv_weight_numel(vec(&fx, ts.acc[i].vector)) * sizeof(float));
    lv_vae_set_tap(fx.dec, on_tap, &ts);
    int whole[1] = {fx.L};
    float *video = decode_chunks(&fx, whole, 1); /* 1-frame steps inside */
    lv_vae_set_tap(fx.dec, NULL, NULL);
    for (int i = 0; i < ts.n; i++) {
        const lv_weight *want = vec(&fx, ts.acc[i].vector);
        int64_t C = want->shape[0], T = want->shape[1], P = want->shape[2] * want->shape[3];
        cr_assert_eq(ts.acc[i].frames, T, "%s: %lld frames, want %lld", ts.acc[i].name,
                     (long long)ts.acc[i].frames, (long long)T);
        /* [T, P, C] -> [C, T, P] */
        float *cf = malloc((size_t)C * T * P * sizeof *cf);
        for (int64_t t = 0; t < T; t++)
            for (int64_t p = 0; p < P; p++)
                for (int64_t c = 0; c < C; c++)
                    cf[(c * T + t) * P + p] = ts.acc[i].got[(t * P + p) * C + c];
        check(ts.acc[i].vector, cf, want->data, (size_t)(C * T * P));
        free(cf), free(ts.acc[i].got);
    }
    check("video", video, vec(&fx, "video")->data, lv_weight_numel(vec(&fx, "video")));
    free(video);

    lv_vae_reset(fx.dec);
    lv_vae_set_clamp(fx.dec, 1);
    video = decode_chunks(&fx, whole, 1);
    const lv_weight *vc = vec(&fx, "video_clamped");
    check("video_clamped", video, vc->data, lv_weight_numel(vc));
    for (size_t i = 0; i < lv_weight_numel(vc); i++)
        cr_assert(video[i] >= -1.0f && video[i] <= 1.0f, "clamped value %g", video[i]);
    free(video);
    close_fixture(&fx);
}

/* ---- causality and chunking --------------------------------------------------------------- */

Test(vae, first_frame_alone) {
    fixture fx;
    open_fixture(&fx);
    float *lat = latent_frames(&fx, 0, 1);
    size_t n = (size_t)3 * fx.OH * fx.OW;
    float *out = malloc(n * sizeof *out);
    cr_assert_eq(lv_vae_frames_for(fx.dec, 1), 1);
    cr_assert_eq(lv_vae_decode_frames(fx.ctx, fx.dec, lat, 1, fx.h, fx.wd, out), LV_OK, "%s",
                 lv_last_error());
    check("first_frame_video", out, vec(&fx, "first_frame_video")->data, n);
    free(lat), free(out);
    close_fixture(&fx);
}

Test(vae, chunkings_give_the_same_frames) {
    fixture fx;
    open_fixture(&fx);
    const float *want = vec(&fx, "video")->data;
    size_t n = (size_t)3 * fx.T * fx.OH * fx.OW;
    int c1111[4] = {1, 1, 1, 1}, c121[3] = {1, 2, 1}, whole[1] = {4}, c211[3] = {2, 1, 1};
    float *a = decode_chunks(&fx, c1111, 4);
    check("chunks 1-1-1-1", a, want, n);
    lv_vae_reset(fx.dec);
    float *b = decode_chunks(&fx, c121, 3);
    check("chunks 1-2-1", b, want, n);
    lv_vae_reset(fx.dec);
    float *c = decode_chunks(&fx, whole, 1);
    check("whole, 1-frame steps", c, want, n);
    /* the same device work in each: the frames are identical */
    cr_assert_eq(memcmp(a, b, n * sizeof *a), 0, "chunks 1-2-1 differ from 1-1-1-1");
    cr_assert_eq(memcmp(a, c, n * sizeof *a), 0, "whole differs from 1-1-1-1");
    /* whole-sequence passes: one step of 4 latent frames, and a first step of 2 (the
     * original code would give 10 frames for [2, 1, 1]; only frame 0 may skip time_conv) */
    cr_assert_eq(lv_vae_set_step_frames(fx.dec, 4), LV_OK);
    lv_vae_reset(fx.dec);
    float *d = decode_chunks(&fx, whole, 1);
    check("whole, one 4-frame step", d, want, n);
    lv_vae_reset(fx.dec);
    float *e = decode_chunks(&fx, c211, 3);
    check("chunks 2-1-1, 4-frame steps", e, want, n);
    cr_log_info("one-pass vs 1-frame steps: max|diff| %.3g", ts_max_abs_diff(d, a, n));
    free(a), free(b), free(c), free(d), free(e);
    close_fixture(&fx);
}

/* ---- memory -------------------------------------------------------------------------------- */

Test(vae, memory_matches_the_estimate) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    uint64_t base = lv_ctx_memory_in_use(ctx);
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const lv_weight *lat = lv_weights_find(v, "latents");
    int L = (int)lat->shape[1], h = (int)lat->shape[2], wd = (int)lat->shape[3];
    float *out = malloc((size_t)3 * (1 + 4 * (L - 1)) * 64 * h * wd * sizeof *out);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat->data, L, h, wd, out), LV_OK, "%s", lv_last_error());
    uint64_t used = lv_ctx_memory_peak(ctx) - base, est = lv_vae_decoder_memory(dec, h, wd);
    /* the same from the weights alone, before any upload (generate's plan) */
    uint64_t from_weights = 0;
    cr_assert_eq(lv_vae_weights_memory(w, h, wd, LV_PRECISION_F32, &from_weights), LV_OK, "%s", lv_last_error());
    cr_assert_eq(from_weights, est);
    cr_log_info("tiny decoder at %dx%d: peak %llu bytes, estimate %llu", h, wd,
                (unsigned long long)used, (unsigned long long)est);
    /* tensors are rounded up to the 16-byte offset alignment: at most 16 bytes each */
    cr_assert(used <= est + 16 * 512, "peak %llu > estimate %llu", (unsigned long long)used,
              (unsigned long long)est);
    cr_assert(used >= est, "peak %llu < estimate %llu: the estimate counts a buffer not used",
              (unsigned long long)used, (unsigned long long)est);
    free(out);
    lv_vae_decoder_destroy(ctx, dec);
    cr_assert_eq(lv_ctx_memory_in_use(ctx), base, "the decoder left device memory behind");
    lv_weights_close(w);
    lv_weights_close(v);
    ts_ctx_done(ctx);
}

/* f16 activations (a context of f16 precision, pipelines/wan_vae/README.md "Precision"): the
 * work buffers and the history frames hold f16, every kernel computes in f32. Each stored
 * value is rounded once, relative error at most 2^-11 (u16); a value passes through about
 * 40 stored activations on its way from the latents to the pixels (conv2, conv1, the
 * middle's 2 blocks of 4 and the attention's 5, 15 upsampling modules of 1 to 4, the head),
 * and the RMS norms keep every layer's gain near 1, so independent roundings give a relative
 * RMS error of about sqrt(40 / 3) u16 = 1.8e-3 at the pixels, NMSE 3e-6 against the
 * reference video (whose own f32 error is 1e-9). We assert NMSE <= 2e-5 (a relative RMS
 * error of 4.5e-3: 9 u16), a PSNR of at least 50 dB on the [-1, 1] range, and that the f16
 * decode's memory is what the plan says (lv_vae_decoder_memory, lv_vae_weights_memory at f16),
 * with history and work buffers half of f32's. A kernel that read or wrote the wrong half of
 * a word, or a buffer of the wrong dtype, gives an NMSE near 1. */
Test(vae, f16_activations_near_the_f32_video) {
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.precision = LV_PRECISION_F16;
    lv_ctx *ctx = ts_ctx_with(opt);
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    uint64_t base = lv_ctx_memory_in_use(ctx);
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    /* the first 2 latent frames (the first-frame rule and a later frame through the
     * time_convs): video frames 0 to 4, by causality the reference's first 5 */
    const lv_weight *lat = lv_weights_find(v, "latents"), *want = lv_weights_find(v, "video");
    const int z = (int)lat->shape[0], L = (int)lat->shape[1], h = (int)lat->shape[2], wd = (int)lat->shape[3], n_lat = 2;
    const size_t P = (size_t)h * wd, fr = (size_t)want->shape[2] * want->shape[3], T = 5, n = 3 * T * fr;
    float *lat2 = malloc((size_t)z * n_lat * P * sizeof *lat2), *out = malloc(n * sizeof *out), *ref = malloc(n * sizeof *ref);
    for (int c = 0; c < z; c++)
        memcpy(lat2 + (size_t)c * n_lat * P, (const float *)lat->data + (size_t)c * L * P, n_lat * P * sizeof *lat2);
    for (int c = 0; c < 3; c++)
        memcpy(ref + c * T * fr, (const float *)want->data + (size_t)c * want->shape[1] * fr, T * fr * sizeof *ref);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat2, n_lat, h, wd, out), LV_OK, "%s", lv_last_error());
    const double e = ts_nmse(out, ref, n), maxd = ts_max_abs_diff(out, ref, n);
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
    const double psnr = 10 * log10(4.0 / (se / (double)n)); /* peak-to-peak 2 */
    cr_log_info("f16 activations: video nmse %.3g, max|err| %.3g, PSNR %.1f dB", e, maxd, psnr);
    cr_assert(e <= 2e-5, "f16 activations: video nmse %.3g > 2e-5", e);
    cr_assert(psnr >= 50, "f16 activations: PSNR %.1f dB < 50", psnr);

    uint64_t used = lv_ctx_memory_peak(ctx) - base, est = lv_vae_decoder_memory(dec, h, wd), from_weights = 0, f32 = 0;
    cr_assert_eq(lv_vae_weights_memory(w, h, wd, LV_PRECISION_F16, &from_weights), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_weights_memory(w, h, wd, LV_PRECISION_F32, &f32), LV_OK, "%s", lv_last_error());
    cr_assert_eq(from_weights, est);
    vae_memory m16, m32;
    vae_arch_memory(&dec->arch, h, wd, 1, LV_F16, &m16);
    vae_arch_memory(&dec->arch, h, wd, 1, LV_F32, &m32);
    cr_assert_eq(2 * m16.history, m32.history);
    cr_assert_eq(2 * m16.work, m32.work);
    cr_assert_eq(f32 - est, m16.history + m16.work);
    cr_assert(used <= est + 16 * 512 && used >= est, "f16: peak %llu, estimate %llu", (unsigned long long)used,
              (unsigned long long)est);
    free(out), free(ref), free(lat2);
    lv_vae_decoder_destroy(ctx, dec);
    lv_weights_close(w);
    lv_weights_close(v);
    ts_ctx_done(ctx);
}

Test(vae, real_config_plan) {
    vae_arch a;
    vae_arch_wan21(&a);
    cr_assert_eq(vae_arch_params(&a), 73295603ull); /* the spec's count for conv2 + decoder.* */
    cr_assert_eq(vae_arch_slots(&a), 32);
    vae_memory m;
    vae_arch_memory(&a, 60, 104, 1, LV_F32, &m);
    /* the spec: 32 slots x 2 frames at 480 x 832 are about 0.94 G floats (3.8 GB) */
    double g = (double)m.history / 4 / 1e9;
    cr_log_info("480p: weights %.2f GB, history %.2f GB, work %.2f GB, total %.2f GB",
                m.weights / 1e9, m.history / 1e9, m.work / 1e9, lv_vae_memory_estimate(60, 104) / 1e9);
    cr_assert(g > 0.93 && g < 0.95, "history %.3f G floats", g);
    /* the largest activation of a step: 4 frames x 96 channels at 480 x 832 */
    cr_assert_eq(m.work_elems, 4ull * 96 * 480 * 832);
    /* in tiles (generate --vae-tiles): one tile's decoder on the device, every tile's history on
     * the host; the figures of pipelines/wan_vae/README.md, section 7 */
    const int tiles[4][3] = {{60, 64, 2}, {48, 48, 6}, {32, 32, 12}, {24, 24, 24}};
    for (int i = 0; i < 4; i++) {
        vae_memory t;
        vae_arch_memory(&a, tiles[i][0], tiles[i][1], 1, LV_F32, &t);
        cr_log_info("480p in %d tiles of %dx%d (overlap %d): device %.2f GB, host history %.2f GB", tiles[i][2],
                    tiles[i][0], tiles[i][1], lv_vae_tile_overlap(tiles[i][0], tiles[i][1]),
                    lv_vae_memory_estimate(tiles[i][0], tiles[i][1]) / 1e9, tiles[i][2] * (double)t.history / 1e9);
        cr_assert(lv_vae_memory_estimate(tiles[i][0], tiles[i][1]) < lv_vae_memory_estimate(60, 104));
    }
    cr_assert(lv_vae_memory_estimate(32, 32) < 1.25e9, "a 256 x 256-pixel tile: %.3f GB",
              lv_vae_memory_estimate(32, 32) / 1e9);
}

/* What longvk/vae.h tells of a structure without the internals (`longvk bench vae` uses only
 * these): the tiny config's tensors are the original module's, by name and shape, in the
 * file's count; the parts of the 480p estimate add up to it; a loaded decoder's widths and
 * multiply-adds are its structure's. */
Test(vae, public_structure_queries) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK, "%s", lv_last_error());
    lv_vae_tensor_spec *specs;
    int n;
    cr_assert_eq(lv_vae_expected_tensors(8, 4, &specs, &n), LV_OK, "%s", lv_last_error());
    int decoder_tensors = 0;
    for (int i = 0; i < lv_weights_count(w); i++) {
        const char *name = lv_weights_at(w, i)->name;
        decoder_tensors += strncmp(name, "conv2.", 6) == 0 || strncmp(name, "decoder.", 8) == 0;
    }
    cr_assert_eq(n, decoder_tensors, "%d tensors listed, %d in the original's decoder", n, decoder_tensors);
    for (int i = 0; i < n; i++) {
        const lv_weight *t = lv_weights_find(w, specs[i].name);
        cr_assert_not_null(t, "'%s' is not in the original's state dict", specs[i].name);
        cr_assert_eq(t->ndim, specs[i].ndim, "%s", specs[i].name);
        for (int d = 0; d < t->ndim; d++) cr_assert_eq(t->shape[d], specs[i].shape[d], "%s dim %d", specs[i].name, d);
    }
    free(specs);
    /* Wan2.1's: the parameters of the spec */
    cr_assert_eq(lv_vae_expected_tensors(96, 16, &specs, &n), LV_OK, "%s", lv_last_error());
    uint64_t params = 0;
    for (int i = 0; i < n; i++) {
        uint64_t count = 1;
        for (int d = 0; d < specs[i].ndim; d++) count *= (uint64_t)specs[i].shape[d];
        params += count;
    }
    cr_assert_eq(params, 73295603ull);
    free(specs);
    cr_assert_eq(lv_vae_expected_tensors(6, 16, &specs, &n), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_expected_tensors(8, 0, &specs, &n), LV_ERR_INVALID);

    lv_vae_memory m;
    lv_vae_memory_estimate_parts(60, 104, &m);
    cr_assert_eq(m.weights + m.history + m.work, lv_vae_memory_estimate(60, 104));
    cr_assert_eq(m.weights, 4 * 73295603ull);

    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    lv_vae_info info;
    lv_vae_decoder_info(dec, &info);
    cr_assert_eq(info.z, 4);
    cr_assert_eq(info.trunk, 32);
    cr_assert_eq(info.head_ch, 8);
    cr_assert_eq(info.out_ch, 3);
    cr_assert_eq(info.upscale, 8);
    cr_assert_eq(lv_vae_decoder_macs(dec, 3, 5), vae_arch_macs(&dec->arch, 3, 5));
    vae_arch a;
    vae_arch_wan21(&a);
    /* 13.6 TFLOP a latent frame at 480p (`bench vae --help`) */
    double tflop = 2 * vae_arch_macs(&a, 60, 104) / 1e12;
    cr_assert(tflop > 13.55 && tflop < 13.65, "%.3f TFLOP", tflop);
    lv_vae_decoder_destroy(ctx, dec);
    lv_weights_close(w);
    ts_ctx_done(ctx);
}

/* ---- weights under other names, and bad input -------------------------------------------- */

/* A copy of the tiny weights under diffusers AutoencoderKLWan names decodes the same. */
Test(vae, diffusers_names) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    int n = lv_weights_count(w);
    lv_weight *t = calloc((size_t)n, sizeof *t);
    char (*names)[160] = calloc((size_t)n, sizeof *names);
    for (int i = 0; i < n; i++) {
        t[i] = *lv_weights_at(w, i);
        cr_assert(vae_diffusers_name(t[i].name, 2, names[i], sizeof names[i]), "no diffusers name for %s",
                  t[i].name);
        for (int j = 0; j < i; j++) cr_assert_str_neq(names[i], names[j]);
        t[i].name = names[i];
    }
    const char *meta[4] = {"latents_mean", lv_weights_metadata(w, "latents_mean"), "latents_std",
                           lv_weights_metadata(w, "latents_std")};
    const char *path = LONGVK_TEST_TMP "/wan-vae-tiny-diffusers.safetensors";
    cr_assert_eq(lv_safetensors_write(path, t, n, meta, 2), LV_OK, "%s", lv_last_error());
    char probe[160];
    cr_assert(vae_diffusers_name("decoder.upsamples.7.time_conv.weight", 2, probe, sizeof probe));
    cr_assert_str_eq(probe, "decoder.up_blocks.1.upsamplers.0.time_conv.weight");
    cr_assert(vae_diffusers_name("decoder.upsamples.4.shortcut.bias", 2, probe, sizeof probe));
    cr_assert_str_eq(probe, "decoder.up_blocks.1.resnets.0.conv_shortcut.bias");
    cr_assert(vae_diffusers_name("decoder.middle.2.residual.3.gamma", 2, probe, sizeof probe));
    cr_assert_str_eq(probe, "decoder.mid_block.resnets.1.norm2.gamma");

    fixture fx;
    open_fixture(&fx);
    lv_weights *dw;
    cr_assert_eq(lv_weights_open(path, &dw), LV_OK, "%s", lv_last_error());
    lv_vae_decoder *dd;
    cr_assert_eq(lv_vae_decoder_create(fx.ctx, dw, &dd), LV_OK, "%s", lv_last_error());
    int whole[1] = {fx.L};
    float *a = decode_chunks(&fx, whole, 1);
    lv_vae_decoder *orig = fx.dec;
    fx.dec = dd;
    float *b = decode_chunks(&fx, whole, 1);
    fx.dec = orig;
    size_t nv = (size_t)3 * fx.T * fx.OH * fx.OW;
    cr_assert_eq(memcmp(a, b, nv * sizeof *a), 0, "diffusers-named weights decode differently");
    free(a), free(b);
    lv_vae_decoder_destroy(fx.ctx, dd);
    lv_weights_close(dw);
    close_fixture(&fx);
    free(t), free(names);
    lv_weights_close(w);
}

/* The same weights as a PyTorch checkpoint (torch.save of the state dict, as
 * Wan2.1_VAE.pth is saved; tests/reference/make_wan_vae_pth.py) decode the same. */
Test(vae, pytorch_checkpoint) {
    fixture fx;
    open_fixture(&fx);
    lv_weights *pw;
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.pth", &pw),
                 LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_format(pw), "pytorch");
    lv_vae_decoder *pd;
    cr_assert_eq(lv_vae_decoder_create(fx.ctx, pw, &pd), LV_OK, "%s", lv_last_error());
    /* a checkpoint has no metadata: the tiny config's 4-entry tables come from the vectors */
    cr_assert_eq(lv_vae_set_normalization(pd, vec(&fx, "latents_mean")->data, vec(&fx, "latents_std")->data),
                 LV_OK);
    int whole[1] = {fx.L};
    float *a = decode_chunks(&fx, whole, 1);
    lv_vae_decoder *orig = fx.dec;
    fx.dec = pd;
    float *b = decode_chunks(&fx, whole, 1);
    fx.dec = orig;
    cr_assert_eq(memcmp(a, b, (size_t)3 * fx.T * fx.OH * fx.OW * sizeof *a), 0,
                 "the .pth weights decode differently from the safetensors ones");
    free(a), free(b);
    lv_vae_decoder_destroy(fx.ctx, pd);
    lv_weights_close(pw);
    close_fixture(&fx);
}

/* Bindings of 128 KiB (lavapipe allows 128 MiB): at latent 8 x 12 a full-resolution frame
 * of the last stage (64 x 96 x 8 floats, 196 KB) no longer fits one binding, so every op
 * there runs in bands of rows; the frames must not change. */
typedef struct collect {
    float *out;
    size_t per;
} collect;

static lv_status collect_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    collect *c = user;
    memcpy(c->out + (size_t)index * c->per, rgb, (size_t)3 * height * width * sizeof *rgb);
    return LV_OK;
}

static float *decode_random(lv_ctx *ctx, const lv_weights *w, const float *lat, int n, int h, int wd) {
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    int64_t T = lv_vae_frames_for(dec, n);
    collect c = {.per = (size_t)3 * 64 * h * wd};
    c.out = malloc((size_t)T * c.per * sizeof *c.out);
    cr_assert_eq(lv_vae_decode_frames_cb(ctx, dec, lat, n, h, wd, collect_frame, &c), LV_OK, "%s",
                 lv_last_error());
    lv_vae_decoder_destroy(ctx, dec);
    return c.out;
}

Test(vae, small_bindings_same_frames) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    const int n = 2, h = 8, wd = 12;
    size_t count = (size_t)4 * n * h * wd, frames = 5 * (size_t)3 * 64 * h * wd;
    float *lat = ts_rand_alloc(count, 900, -2, 2);
    lv_ctx *ctx = ts_ctx();
    float *a = decode_random(ctx, w, lat, n, h, wd);
    ts_ctx_done(ctx);
    ctx = ts_ctx_with_binding(128 * 1024);
    float *b = decode_random(ctx, w, lat, n, h, wd);
    ts_ctx_done(ctx);
    cr_assert_eq(memcmp(a, b, frames * sizeof *a), 0, "banded decode differs (max|diff| %.3g)",
                 ts_max_abs_diff(b, a, frames));
    free(a), free(b), free(lat);
    lv_weights_close(w);
}

/* ---- spatial tiling ------------------------------------------------------------------------- */

Test(vae, tiling) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const int n = 2, h = 8, wd = 12;
    size_t frames = (size_t)3 * (1 + 4 * (n - 1)) * 64 * h * wd;
    float *lat = ts_rand_alloc((size_t)4 * n * h * wd, 910, -2, 2);
    float *full = malloc(frames * sizeof *full), *tiled = malloc(frames * sizeof *tiled);
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, n, h, wd, full), LV_OK, "%s", lv_last_error());
    /* one tile covering the frame is the untiled decode */
    lv_vae_tiling one = {16, 16, 4};
    cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat, n, h, wd, &one, tiled), LV_OK, "%s", lv_last_error());
    cr_assert_eq(memcmp(full, tiled, frames * sizeof *full), 0, "a single tile differs from untiled");
    /* 2 x 2 tiles of 6 x 8 overlapping by 4: how far from the untiled decode. No tiled
     * output equals the untiled one anywhere: the middle attention sees the whole tile, and
     * every conv pads the tile edge with zeros. So only a sanity bound is asserted (a
     * misplaced, missing or unblended tile gives NMSE near 1 or NaN) and the figures are
     * logged: on this random-weight model NMSE 0.026 at these small tiles. */
    const lv_vae_tiling grids[1] = {{6, 8, 4}};
    for (int g = 0; g < 1; g++) {
        cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat, n, h, wd, &grids[g], tiled), LV_OK, "%s",
                     lv_last_error());
        double e = ts_nmse(tiled, full, frames);
        cr_log_info("tiles %dx%d overlap %d at latent %dx%d: nmse vs untiled %.3g, max|diff| %.3g, "
                    "device memory %llu vs %llu bytes", grids[g].tile_h, grids[g].tile_w,
                    grids[g].overlap, h, wd, e, ts_max_abs_diff(tiled, full, frames),
                    (unsigned long long)lv_vae_tiled_memory(dec, h, wd, &grids[g]),
                    (unsigned long long)lv_vae_decoder_memory(dec, h, wd));
        cr_assert(e < 0.1, "tiled decode nmse %.3g vs untiled", e);
    }
    lv_vae_tiling bad = {4, 4, 4};
    cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat, n, h, wd, &bad, tiled), LV_ERR_INVALID);
    free(lat), free(full), free(tiled);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

/* Tiles streamed block by block (lv_vae_tile_stream, what `generate --vae-tiles` runs): each
 * tile keeps its own causal history between the blocks, so a video given in blocks of 1, 2 and
 * 1 latent frames gives lv_vae_decode_tiled's frames over the whole video bit for bit (the same
 * GPU work per tile and latent frame, the same blend); with a history shared between the tiles,
 * or reset between blocks, it would not. One tile covering the frame is the untiled decode. */
/* The history bytes of a decoder at latent h x w, from its plan (independent of the stream's own count). */
static uint64_t dec_history_bytes(const lv_vae_decoder *dec, int h, int w) {
    vae_memory m;
    vae_arch_memory(&dec->arch, h, w, 1, LV_F32, &m);
    return m.history;
}

typedef struct frames_sink {
    float *out;
    int64_t T, P;
    int64_t next;
} frames_sink;

static lv_status stream_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    frames_sink *s = user;
    cr_assert_eq(index, s->next, "frame %lld came after %lld", (long long)index, (long long)s->next);
    cr_assert(index < s->T && (int64_t)height * width == s->P);
    for (int c = 0; c < 3; c++)
        memcpy(s->out + ((size_t)c * s->T + index) * s->P, rgb + (size_t)c * s->P, (size_t)s->P * sizeof *rgb);
    s->next++;
    return LV_OK;
}

static void stream_blocks(lv_ctx *ctx, lv_vae_decoder *dec, const float *lat, int n, int h, int wd,
                          const lv_vae_tiling *tiling, float *out) {
    lv_vae_tile_stream *ts;
    cr_assert_eq(lv_vae_tile_stream_create(dec, h, wd, tiling, &ts), LV_OK, "%s", lv_last_error());
    frames_sink sink = {.out = out, .T = 1 + 4 * (n - 1), .P = (int64_t)64 * h * wd};
    const int blocks[3] = {1, 2, 1};
    float *part = malloc((size_t)4 * 2 * h * wd * sizeof *part);
    for (int b = 0, f0 = 0; b < 3; f0 += blocks[b], b++) {
        for (int c = 0; c < 4; c++) /* [z, n, h, w] -> this block's [z, k, h, w] */
            memcpy(part + (size_t)c * blocks[b] * h * wd, lat + ((size_t)c * n + f0) * h * wd,
                   (size_t)blocks[b] * h * wd * sizeof *part);
        cr_assert_eq(lv_vae_tile_stream_decode(ctx, ts, part, blocks[b], stream_frame, &sink), LV_OK, "%s", lv_last_error());
    }
    cr_assert_eq(sink.next, sink.T);
    free(part);
    lv_vae_tile_stream_destroy(ts);
}

Test(vae, tile_stream_keeps_each_tiles_history) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const int n = 4, h = 8, wd = 12;
    size_t frames = (size_t)3 * (1 + 4 * (n - 1)) * 64 * h * wd;
    float *lat = ts_rand_alloc((size_t)4 * n * h * wd, 920, -2, 2);
    float *want = malloc(frames * sizeof *want), *got = malloc(frames * sizeof *got);
    const lv_vae_tiling grid = {6, 8, 3};
    cr_assert_eq(lv_vae_decode_tiled(ctx, dec, lat, n, h, wd, &grid, want), LV_OK, "%s", lv_last_error());
    stream_blocks(ctx, dec, lat, n, h, wd, &grid, got);
    cr_assert_eq(memcmp(got, want, frames * sizeof *got), 0, "streamed tiles differ from the whole-video tiled "
                 "decode (max|diff| %.3g)", ts_max_abs_diff(got, want, frames));
    lv_vae_tile_stream *ts;
    cr_assert_eq(lv_vae_tile_stream_create(dec, h, wd, &grid, &ts), LV_OK);
    cr_assert_eq(lv_vae_tile_stream_count(ts), 4, "2 x 2 tiles of 6 x 8 over 8 x 12");
    /* host: every tile's history, the decoder's history at the tile's size */
    cr_assert_eq(lv_vae_tile_stream_host_bytes(ts), 4 * dec_history_bytes(dec, 6, 8));
    lv_vae_tile_stream_destroy(ts);
    /* one tile covering the frame: the untiled decode */
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, n, h, wd, want), LV_OK, "%s", lv_last_error());
    lv_vae_reset(dec);
    const lv_vae_tiling one = {16, 16, 4};
    stream_blocks(ctx, dec, lat, n, h, wd, &one, got);
    cr_assert_eq(memcmp(got, want, frames * sizeof *got), 0, "one streamed tile differs from the untiled decode");
    /* bands and tiles are refused; an overlap as large as the tile too */
    const lv_vae_tiling bad = {4, 4, 4};
    cr_assert_eq(lv_vae_tile_stream_create(dec, h, wd, &bad, &ts), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_set_sequence_parallel(dec, 2, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_tile_stream_create(dec, h, wd, &grid, &ts), LV_ERR_INVALID);
    free(lat), free(want), free(got);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

/* ---- resuming a decode (generate --resume) ------------------------------------------------- */

/* The latent frames [f0, f0 + n) of lat [4, total, h, w] as [4, n, h, w]. */
static float *frames_from(const float *lat, int total, int f0, int n, int h, int wd) {
    float *part = malloc((size_t)4 * n * h * wd * sizeof *part);
    for (int c = 0; c < 4; c++)
        memcpy(part + (size_t)c * n * h * wd, lat + ((size_t)c * total + f0) * h * wd, (size_t)n * h * wd * sizeof *part);
    return part;
}

typedef struct after_sink {
    float *out;
    int64_t base, T, P; /* frames before base are dropped */
} after_sink;

static lv_status after_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    after_sink *s = user;
    (void)height, (void)width;
    if (index < s->base) return LV_OK;
    cr_assert(index - s->base < s->T);
    for (int c = 0; c < 3; c++)
        memcpy(s->out + ((size_t)c * s->T + (index - s->base)) * s->P, rgb + (size_t)c * s->P, (size_t)s->P * sizeof *rgb);
    return LV_OK;
}

/* A reset decoder given latent frames [N - r, N) of lat, their frames dropped, then [N, n):
 * the frames of [N, n) into out [3, 4 (n - N), H, W]. */
static void resumed(lv_ctx *ctx, lv_vae_decoder *dec, const float *lat, int n, int h, int wd, int N, int r,
                    float *out) {
    float *prime = frames_from(lat, n, N - r, r, h, wd), *rest = frames_from(lat, n, N, n - N, h, wd);
    after_sink sink = {.out = out, .base = 1 + 4 * (int64_t)(r - 1), .T = 4 * (int64_t)(n - N), .P = (int64_t)64 * h * wd};
    lv_vae_reset(dec);
    cr_assert_eq(lv_vae_decode_frames_cb(ctx, dec, prime, r, h, wd, after_frame, &sink), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decode_frames_cb(ctx, dec, rest, n - N, h, wd, after_frame, &sink), LV_OK, "%s", lv_last_error());
    free(prime), free(rest);
}

/* generate --resume puts a latent model's decoder back by decoding the last R =
 * lv_vae_history_frames latent frames again on a reset decoder (README "Resuming a decode"):
 * the frames after them are then the whole video's, bit for bit (a tile stream's tile and a band
 * are each such a decoder: test_latent_resume.c resumes them inside generate); R is the structure's temporal receptive field (40 for Wan2.1's structure, which the
 * tiny config shares). Fewer frames again leave a different history: the bound is not loose to
 * the point of hiding that (10 frames, a quarter of it, differ). */
Test(vae, resume_by_decoding_the_last_frames_again, .timeout = 600) {
    vae_arch real;
    vae_arch_wan21(&real);
    cr_assert_eq(vae_arch_history_frames(&real), 40);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const int R = lv_vae_history_frames(dec);
    cr_assert_eq(R, 40, "the tiny config has Wan2.1's structure");
    const int h = 2, wd = 4, n = R + 2, N = R + 1; /* resumed after N latent frames */
    const int64_t T = 1 + 4 * (int64_t)(n - 1), tail = 4 * (int64_t)(n - N), P = (int64_t)64 * h * wd;
    float *lat = ts_rand_alloc((size_t)4 * n * h * wd, 930, -2, 2);
    float *whole = malloc((size_t)3 * T * P * sizeof *whole), *want = malloc((size_t)3 * tail * P * sizeof *want);
    float *got = malloc((size_t)3 * tail * P * sizeof *got);
    const size_t count = (size_t)3 * tail * P;
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, n, h, wd, whole), LV_OK, "%s", lv_last_error());
    for (int c = 0; c < 3; c++) /* the whole decode's last frames, those of [N, n) */
        memcpy(want + (size_t)c * tail * P, whole + ((size_t)c * T + (T - tail)) * P, (size_t)(tail * P) * sizeof *want);
    resumed(ctx, dec, lat, n, h, wd, N, R, got);
    cr_assert_eq(memcmp(got, want, count * sizeof *got), 0, "the frames after %d again differ (max|diff| "
                 "%.3g)", R, ts_max_abs_diff(got, want, count));
    resumed(ctx, dec, lat, n, h, wd, N, R / 4, got);
    double short_diff = ts_max_abs_diff(got, want, count);
    cr_log_info("decoding %d frames again instead of %d: max|diff| %.3g", R / 4, R, short_diff);
    cr_assert_gt(short_diff, 0, "%d frames again gave the same frames as %d: the test sees no history", R / 4, R);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    /* f16 activations (a context of f16 precision): the same computation in f16, so the
     * history comes back bit for bit as well */
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.precision = LV_PRECISION_F16;
    ctx = ts_ctx_with(opt);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat, n, h, wd, whole), LV_OK, "%s", lv_last_error());
    cr_assert_eq(dec->buf_dtype, LV_F16);
    for (int c = 0; c < 3; c++)
        memcpy(want + (size_t)c * tail * P, whole + ((size_t)c * T + (T - tail)) * P, (size_t)(tail * P) * sizeof *want);
    resumed(ctx, dec, lat, n, h, wd, N, R, got);
    cr_assert_eq(memcmp(got, want, count * sizeof *got), 0, "f16: the frames after %d again differ (max|diff| %.3g)", R,
                 ts_max_abs_diff(got, want, count));
    free(lat), free(whole), free(want), free(got);
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

/* Tiles for a budget: none when the untiled decode fits, else the largest square whose one tile
 * fits (so one size up does not). */
Test(vae, tiling_for_a_budget) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    lv_ctx *ctx = ts_ctx();
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    const int h = 8, wd = 12;
    const uint64_t full = lv_vae_decoder_memory(dec, h, wd);
    lv_vae_tiling t;
    cr_assert_eq(lv_vae_choose_tiling(dec, h, wd, full, &t), 0);
    const lv_vae_tiling six = {6, 6, 3};
    const uint64_t budget = lv_vae_tiled_memory(dec, h, wd, &six);
    cr_assert_eq(lv_vae_choose_tiling(dec, h, wd, budget, &t), 1);
    cr_assert(t.tile_h == 6 && t.tile_w == 6 && t.overlap == 3, "%d x %d overlap %d", t.tile_h, t.tile_w, t.overlap);
    cr_assert_eq(lv_vae_tile_overlap(32, 40), 8);
    cr_assert_eq(lv_vae_tile_overlap(6, 8), 3);
    cr_assert_eq(lv_vae_choose_tiling(dec, h, wd, 1000, &t), -1, "the weights alone are more than 1000 bytes");
    lv_vae_decoder_destroy(ctx, dec);
    ts_ctx_done(ctx);
    lv_weights_close(w);
}

/* Writes the tiny weights without `skip` (or with `reshape` given a wrong shape), with
 * their metadata when `meta`. */
static const char *write_broken(const char *file, const char *skip, const char *reshape, int meta) {
    static char path[512];
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    int n = lv_weights_count(w), k = 0;
    lv_weight *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) {
        const lv_weight *s = lv_weights_at(w, i);
        if (skip && strcmp(s->name, skip) == 0) continue;
        t[k] = *s;
        if (reshape && strcmp(s->name, reshape) == 0) { /* [32, 32, 3, 3, 3] -> [32, 96, 3, 3, 1] */
            t[k].shape[1] *= 3;
            t[k].shape[4] = 1;
        }
        k++;
    }
    snprintf(path, sizeof path, "%s/%s", LONGVK_TEST_TMP, file);
    int nm = lv_weights_metadata_count(w);
    const char **kv = calloc((size_t)(2 * nm + 1), sizeof *kv);
    for (int i = 0; i < nm; i++) {
        kv[2 * i] = lv_weights_metadata_key(w, i);
        kv[2 * i + 1] = lv_weights_metadata_value(w, i);
    }
    cr_assert_eq(lv_safetensors_write(path, t, k, kv, meta ? nm : 0), LV_OK, "%s", lv_last_error());
    free(kv);
    free(t);
    lv_weights_close(w);
    return path;
}

Test(vae, bad_weights_and_inputs_are_clean_errors) {
    lv_ctx *ctx = ts_ctx();
    lv_weights *w;
    lv_vae_decoder *dec = NULL;
    const char *p = write_broken("vae-missing.safetensors", "decoder.upsamples.4.shortcut.weight", NULL, 1);
    cr_assert_eq(lv_weights_open(p, &w), LV_OK);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "decoder.upsamples.4.shortcut.weight") != NULL, "%s", lv_last_error());
    cr_assert_null(dec);
    lv_weights_close(w);
    p = write_broken("vae-shape.safetensors", NULL, "decoder.middle.0.residual.6.weight", 1);
    cr_assert_eq(lv_weights_open(p, &w), LV_OK);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "[32, 96, 3, 3, 1]") != NULL, "%s", lv_last_error());
    lv_weights_close(w);
    /* no metadata tables and z = 4: no default de-normalisation, decoding refuses */
    p = write_broken("vae-nometa.safetensors", NULL, NULL, 0);
    cr_assert_eq(lv_weights_open(p, &w), LV_OK);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    float lat0[4 * 4 * 6] = {0}, px[3 * 32 * 48];
    cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat0, 1, 4, 6, px), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_vae_set_normalization") != NULL, "%s", lv_last_error());
    float mean[4] = {0, 0, 0, 0}, bad_std[4] = {1, 1, 0, 1};
    cr_assert_eq(lv_vae_set_normalization(dec, mean, bad_std), LV_ERR_INVALID);
    lv_vae_decoder_destroy(ctx, dec);
    dec = NULL;
    lv_weights_close(w);
    /* a SANA DiT file is not a VAE */
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors", &w), LV_OK);
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_ERR_FORMAT);
    cr_assert(strstr(lv_last_error(), "conv2.weight") != NULL, "%s", lv_last_error());
    lv_weights_close(w);
    cr_assert_eq(lv_vae_memory_estimate(60, 104) > 4000000000ull, 1);
    ts_ctx_done(ctx);

    fixture fx;
    open_fixture(&fx);
    float *lat = latent_frames(&fx, 0, 2), out[1];
    float *frames = malloc((size_t)3 * 5 * fx.OH * fx.OW * sizeof *frames);
    cr_assert_eq(lv_vae_decode_frames(fx.ctx, fx.dec, lat, 1, fx.h, fx.wd, frames), LV_OK, "%s", lv_last_error());
    /* the video continues at another size: refused */
    cr_assert_eq(lv_vae_decode_frames(fx.ctx, fx.dec, lat, 1, fx.h + 1, fx.wd, out), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "lv_vae_reset") != NULL, "%s", lv_last_error());
    cr_assert_eq(lv_vae_decode_frames(fx.ctx, fx.dec, lat, -1, fx.h, fx.wd, out), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_set_step_frames(fx.dec, 0), LV_ERR_INVALID);
    free(lat), free(frames);
    close_fixture(&fx);
}

/* ---- longvk decode ------------------------------------------------------------------------- */

static int run_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s decode %s >%s/decode.out 2>%s/decode.err", LONGVK_CLI, args,
             LONGVK_TEST_TMP, LONGVK_TEST_TMP);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Test(vae, cli_decode_writes_the_frames) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    const lv_weight *lat = lv_weights_find(v, "latents"), *vc = lv_weights_find(v, "video_clamped");
    const char *npy = LONGVK_TEST_TMP "/vae_latents.npy", *mkv = LONGVK_TEST_TMP "/vae_decode.mkv";
    cr_assert_eq(lv_npy_write(npy, 4, lat->shape, lat->data), LV_OK, "%s", lv_last_error());
    remove(mkv);
    char args[2048];
    snprintf(args, sizeof args, "--vae %s --latents %s -o %s --codec ffv1 --fps 16", WEIGHTS, npy, mkv);
    cr_assert_eq(run_cli(args), 0, "longvk decode failed (see %s/decode.err)", LONGVK_TEST_TMP);
    /* ffv1 stores RGB losslessly: the frames are uint8(clamp(127.5 x + 127.5)), truncated */
    lv_decoder *d;
    cr_assert_eq(lv_decoder_open(mkv, &d), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(d);
    int T = (int)vc->shape[1], H = (int)vc->shape[2], W = (int)vc->shape[3];
    cr_assert_eq(info->width, W);
    cr_assert_eq(info->height, H);
    uint8_t *rgb = malloc((size_t)H * W * 3);
    int frames = 0, off_by_one = 0;
    const float *x = vc->data;
    for (;;) {
        int end = 0;
        cr_assert_eq(lv_decoder_next(d, rgb, NULL, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        cr_assert_lt(frames, T);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < H * W; p++) {
                double s = 127.5 * x[((size_t)c * T + frames) * H * W + p] + 127.5;
                int want = (int)(s < 0 ? 0 : s > 255 ? 255 : s);
                int diff = abs((int)rgb[(size_t)p * 3 + c] - want);
                /* the engine's value may sit on the other side of an integer (|err| ~1e-6) */
                cr_assert_leq(diff, 1, "frame %d channel %d pixel %d: %d, want %d", frames, c, p,
                              rgb[(size_t)p * 3 + c], want);
                off_by_one += diff;
            }
        frames++;
    }
    cr_assert_eq(frames, T);
    cr_log_info("cli decode: %d frames, %d of %d samples off by one", frames, off_by_one, T * H * W * 3);
    cr_assert_leq(off_by_one, T * H * W * 3 / 1000);
    lv_decoder_close(d);
    free(rgb);
    /* the memory it needs is printed before it starts */
    FILE *f = fopen(LONGVK_TEST_TMP "/decode.out", "r");
    cr_assert_not_null(f);
    char line[512];
    int saw = 0;
    while (fgets(line, sizeof line, f)) saw |= strstr(line, "device memory") != NULL;
    fclose(f);
    cr_assert(saw, "decode did not print the memory it needs");

    /* bad input: wrong latent channel count, missing file, tiling not implemented */
    int64_t bad_shape[4] = {3, 2, 4, 6};
    float zeros[3 * 2 * 4 * 6] = {0};
    cr_assert_eq(lv_npy_write(LONGVK_TEST_TMP "/vae_bad.npy", 4, bad_shape, zeros), LV_OK);
    snprintf(args, sizeof args, "--vae %s --latents %s/vae_bad.npy -o %s", WEIGHTS, LONGVK_TEST_TMP, mkv);
    cr_assert_neq(run_cli(args), 0);
    snprintf(args, sizeof args, "--vae %s/nope.safetensors --latents %s -o %s", LONGVK_TEST_TMP, npy, mkv);
    cr_assert_neq(run_cli(args), 0);
    snprintf(args, sizeof args, "--vae %s --latents %s -o %s --vae-tiling --tile 4x4 --tile-overlap 4",
             WEIGHTS, npy, mkv);
    cr_assert_neq(run_cli(args), 0); /* overlap must be smaller than a tile */
    /* tiled: 4 x 4 tiles overlapping by 2 on the 4 x 6 latents; it runs and writes every frame */
    snprintf(args, sizeof args, "--vae %s --latents %s -o %s --codec ffv1 --vae-tiling --tile 4x4 "
             "--tile-overlap 2", WEIGHTS, npy, mkv);
    cr_assert_eq(run_cli(args), 0, "tiled decode failed (see %s/decode.err)", LONGVK_TEST_TMP);
    cr_assert_eq(lv_decoder_open(mkv, &d), LV_OK, "%s", lv_last_error());
    frames = 0;
    for (int end = 0; !end; frames++) cr_assert_eq(lv_decoder_next(d, NULL, NULL, &end), LV_OK);
    cr_assert_eq(frames - 1, T);
    lv_decoder_close(d);
    lv_weights_close(v);
}

/* ---- the tensor-core path: every convolution as columns and one matrix product ----------- */

/* LONGVK_VAE_CONV=gemm (what a device with cooperative matrices runs at f16 precision) on the
 * whole decoder: with f32 columns the video within the same NMSE 1e-9 of the original; with
 * 16-bit columns each convolution's input is rounded once (relative error at most eps / 2,
 * eps = 2^-11 for f16, 2^-8 for bf16), so the video's NMSE is bounded by (convs + 1) eps^2:
 * about 12x the variance eps^2 / 12 each rounding adds, summed over the convs, for the gain
 * of the layers after it. At f16 precision the decoder's activations are f16 as well
 * (f16_activations_near_the_f32_video): about two roundings a conv (its input, the norm's
 * output, and its output), variance 2 eps^2 / 12 a conv, still under the bound. Measured
 * here: f16 2.5e-6 (7.3e-7 with f32 activations, the columns alone rounded), bf16 4.8e-5. */
Test(vae, tensor_core_path_columns, .timeout = 600) {
    setenv("LONGVK_VAE_CONV", "gemm", 1);
    lv_weights *w, *v;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    const lv_weight *lat = lv_weights_find(v, "latents"), *video = lv_weights_find(v, "video");
    const int L = (int)lat->shape[1], h = (int)lat->shape[2], wd = (int)lat->shape[3];
    const size_t n = (size_t)lv_weight_numel(video);
    float *out = malloc(n * sizeof *out);
    const int precisions[3] = {LV_PRECISION_F32, LV_PRECISION_F16, LV_PRECISION_BF16};
    const double eps[3] = {0, 1.0 / 2048, 1.0 / 256};
    for (int p = 0; p < 3; p++) {
        lv_ctx_options opt;
        lv_ctx_options_default(&opt);
        opt.precision = precisions[p];
        lv_ctx *ctx = ts_ctx_with(opt);
        lv_vae_decoder *dec;
        cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
        const vae_arch *a = &dec->arch;
        int convs = 1 + 4 + 1; /* conv1, the middle's two blocks, the head */
        for (int i = 0; i < a->nups; i++) convs += a->ups[i].kind == VAE_RES ? 2 : a->ups[i].kind == VAE_UP3D ? 2 : 1;
        const double bound = p == 0 ? NMSE_BOUND : (convs + 1) * eps[p] * eps[p];
        cr_assert_eq(lv_vae_decode_frames(ctx, dec, lat->data, L, h, wd, out), LV_OK, "%s", lv_last_error());
        double e = ts_nmse(out, video->data, n);
        cr_log_info("columns in %s: video nmse %.3g (bound %.3g over %d convs)", p == 0 ? "f32" : p == 1 ? "f16" : "bf16",
                    e, bound, convs);
        cr_assert(e <= bound, "columns in precision %d: nmse %.3g > %.3g", p, e, bound);
        lv_vae_decoder_destroy(ctx, dec);
        ts_ctx_done(ctx);
    }
    free(out);
    lv_weights_close(v);
    lv_weights_close(w);
}
