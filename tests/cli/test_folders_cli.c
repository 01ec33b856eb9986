/* Folders and the messages about them (issue 53, item 15), through the built longvk:
 *   - `--vae DIR` (a pipeline's vae/ folder) is taken as --model takes folders, by generate
 *     and decode: the same frames as the weights file named;
 *   - `info DIR/vae` and `info DIR/tokenizer` describe the component;
 *   - `info` of a VAE (file or folder) gives the device memory of that decoder, computed from
 *     its own widths: the figure of the tiny VAE loaded on the device
 *     (lv_vae_decoder_memory), not the real Wan2.1's 5.50 GiB;
 *   - a folder with tokenizer.json alone says that tokenizer.json is not read. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "ts_files.h"

#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define TOKENIZER LONGVK_ASSETS_DIR "/testdata/gemma2/tokenizer.model"

static char *run(const char *cmd, int want_status) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, want_status, "exit %d of %s:\n%s", rc, cmd, out);
    return out;
}

/* FOLDER/vae/diffusion_pytorch_model.safetensors, the tiny VAE; returns FOLDER/vae. */
static const char *vae_folder(const char *name) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s", ts_tmp(name));
    mkdir(dir, 0755);
    char file[1100];
    snprintf(file, sizeof file, "%s/diffusion_pytorch_model.safetensors", dir);
    ts_copy_file(VAE, file);
    return dir;
}

/* The frames of a video, by ffmpeg's framemd5 (an independent decoder), header dropped. */
static char *framemd5(const char *video) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", video);
    return run(cmd, 0);
}

Test(folders_cli, vae_folder_is_taken_like_its_file, .timeout = 300) {
    const char *dir = vae_folder("fold-vae");
    int64_t shape[4] = {4, 2, 4, 6};
    float lat[4 * 2 * 4 * 6];
    for (int i = 0; i < 4 * 2 * 4 * 6; i++) lat[i] = 0.3f * (float)((i * 7) % 11) - 1.5f;
    const char *npy = ts_tmp("fold-lat.npy");
    cr_assert_eq(lv_npy_write(npy, 4, shape, lat), LV_OK, "%s", lv_last_error());
    char cmd[4096];
    const char *by_file = ts_tmp("fold-file.mkv"), *by_dir = ts_tmp("fold-dir.mkv");
    unlink(by_file);
    unlink(by_dir);
    snprintf(cmd, sizeof cmd, "%s decode --vae %s --latents %s --codec ffv1 -o %s 2>&1", LONGVK_CLI, VAE, npy, by_file);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, "%s decode --vae %s --latents %s --codec ffv1 -o %s 2>&1", LONGVK_CLI, dir, npy, by_dir);
    free(run(cmd, 0));
    char *a = framemd5(by_file), *b = framemd5(by_dir);
    cr_assert_str_eq(a, b, "decode --vae DIR made other frames than --vae FILE");
    free(a);
    free(b);

    /* generate: prompt rows for tiny-hd32 (caption 32, 8 tokens) */
    float y[8 * 32], mask[8];
    for (int i = 0; i < 8 * 32; i++) y[i] = 0.01f * (float)((i * 13) % 37) - 0.2f;
    for (int i = 0; i < 8; i++) mask[i] = 1.0f;
    lv_weight t[2] = {{.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {8, 32}, .data = y, .nbytes = sizeof y},
                      {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {8}, .data = mask, .nbytes = sizeof mask}};
    const char *embeds = ts_tmp("fold-embeds.safetensors");
    cr_assert_eq(lv_safetensors_write(embeds, t, 2, NULL, 0), LV_OK, "%s", lv_last_error());
    const char *gen_file = ts_tmp("fold-gen-file.mkv"), *gen_dir = ts_tmp("fold-gen-dir.mkv");
    const char *vaes[2] = {VAE, dir}, *outs[2] = {gen_file, gen_dir};
    for (int i = 0; i < 2; i++) {
        unlink(outs[i]);
        snprintf(cmd, sizeof cmd, "%s generate --model %s/testdata/sana-video/tiny-hd32.weights.safetensors "
                 "--text-embeds %s --vae %s --frames 5 -W 48 -H 32 --block-frames 1 --codec ffv1 -q -o %s "
                 "2>&1", LONGVK_CLI, LONGVK_ASSETS_DIR, embeds, vaes[i], outs[i]);
        free(run(cmd, 0));
    }
    a = framemd5(gen_file);
    b = framemd5(gen_dir);
    cr_assert_str_eq(a, b, "generate --vae DIR made other frames than --vae FILE");
    free(a);
    free(b);
}

/* "memory:        this decoder at 480x832 (latent 60x104) needs about 12.3 MiB on the device" */
static void expect_vae_memory(const char *out, const char *want) {
    const char *m = strstr(out, "needs about ");
    cr_assert_not_null(m, "%s", out);
    cr_assert(strncmp(m + 12, want, strlen(want)) == 0 && m[12 + strlen(want)] == ' ', "want %s:\n%s", want, out);
    cr_assert_null(strstr(out, "5.50 GiB"), "the real Wan2.1's figure for the tiny VAE:\n%s", out);
}

Test(folders_cli, info_describes_components_and_their_memory, .timeout = 300) {
    /* the figure of the tiny VAE loaded on the device, one-frame steps, as info formats it */
    lv_ctx *ctx;
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    cr_assert_eq(lv_ctx_create(&copt, &ctx), LV_OK, "%s", lv_last_error());
    lv_weights *w;
    cr_assert_eq(lv_weights_open(VAE, &w), LV_OK, "%s", lv_last_error());
    lv_vae_decoder *dec;
    cr_assert_eq(lv_vae_decoder_create(ctx, w, &dec), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_vae_set_step_frames(dec, 1), LV_OK, "%s", lv_last_error());
    double bytes = (double)lv_vae_decoder_memory(dec, 60, 104);
    lv_vae_decoder_destroy(ctx, dec);
    lv_weights_close(w);
    lv_ctx_destroy(ctx);
    char want[32];
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(want, sizeof want, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(want, sizeof want, "%.1f MiB", bytes / (1024.0 * 1024));
    else snprintf(want, sizeof want, "%.1f KiB", bytes / 1024.0);

    char cmd[2048];
    const char *dir = vae_folder("fold-info-vae");
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, dir);
    char *out = run(cmd, 0);
    cr_assert_null(strstr(out, "neither"), "%s", out);
    cr_assert_not_null(strstr(out, "diffusion_pytorch_model.safetensors"), "%s", out);
    expect_vae_memory(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, VAE);
    out = run(cmd, 0);
    expect_vae_memory(out, want);
    free(out);

    /* a tokenizer folder */
    char tok[1024], file[1100];
    snprintf(tok, sizeof tok, "%s", ts_tmp("fold-tokenizer"));
    mkdir(tok, 0755);
    snprintf(file, sizeof file, "%s/tokenizer.model", tok);
    ts_copy_file(TOKENIZER, file);
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, tok);
    out = run(cmd, 0);
    cr_assert_not_null(strstr(out, "SentencePiece, 512 pieces"), "%s", out);
    free(out);
    /* tokenizer.json alone: said not to be read */
    unlink(file);
    snprintf(file, sizeof file, "%s/tokenizer.json", tok);
    ts_spit(file, "{}", 2);
    snprintf(cmd, sizeof cmd, "%s info %s 2>&1", LONGVK_CLI, tok);
    out = run(cmd, 1);
    cr_assert_not_null(strstr(out, "tokenizer.json"), "%s", out);
    cr_assert_not_null(strstr(out, "is not read"), "%s", out);
    free(out);
}
