/* `longvk info DIR` on folders built from the tiny test models: a Hugging Face Gemma-2
 * folder (model.safetensors + tokenizer.model) and a diffusers pipeline folder
 * (model_index.json, text_encoder/, tokenizer/, transformer/, vae/); the figures printed
 * are checked against the files (parameter counts, device bytes computed here). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk.h"
#include "ts_files.h"

#define G2 LONGVK_ASSETS_DIR "/testdata/gemma2"
#define SANA LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"

static char *info(const char *dir, int want_status) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, dir);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, want_status, "exit %d: %s", rc, out);
    return out;
}

Test(info_dir_cli, gemma2_folder) {
    char root[1024];
    snprintf(root, sizeof root, "%s", ts_tmp("info-gemma2"));
    mkdir(root, 0755);
    ts_copy_file(G2 "/tiny.weights.safetensors", ts_tmp("info-gemma2/model.safetensors"));
    ts_copy_file(G2 "/tokenizer.model", ts_tmp("info-gemma2/tokenizer.model"));
    char *out = info(root, 0);
    cr_assert(strstr(out, "Gemma-2 text encoder"), "%s", out);
    cr_assert(strstr(out, "hidden 96, 3 layers, 4 heads (2 kv) x 32, MLP 256, vocab 512"), "%s", out);
    /* 3 layers x (4 x 96 norms + 128x96 + 2 x 64x96 + 96x128 + 3 x 256x96) + 96 + 512x96 */
    long per_layer = 4 * 96 + 128 * 96 + 2 * 64 * 96 + 96 * 128 + 3 * 256 * 96;
    long params = 3 * per_layer + 96 + 512 * 96;
    char want[128];
    snprintf(want, sizeof want, "parameters:    %ld (", params);
    cr_assert(strstr(out, want), "want '%s' in %s", want, out);
    /* device weights: everything but the table, f32 (the file is f32) = 4 B each */
    double mib = 4.0 * (double)(params - 512 * 96) / 1048576.0;
    snprintf(want, sizeof want, "weights on the device          %.1f MiB", mib);
    cr_assert(strstr(out, want), "want '%s' in %s", want, out);
    cr_assert(strstr(out, "embedding table, host        192.0 KiB"), "%s", out); /* 512 x 96 x 4 B */
    cr_assert(strstr(out, "SentencePiece, 512 pieces; <bos> 2, <eos> 1, <pad> 0"), "%s", out);
    free(out);
    /* a folder that is neither model: both reasons named */
    char empty[1024];
    snprintf(empty, sizeof empty, "%s", ts_tmp("info-empty"));
    mkdir(empty, 0755);
    out = info(empty, 1);
    cr_assert(strstr(out, "neither a SANA-Video model"), "%s", out);
    cr_assert(strstr(out, "Gemma-2"), "%s", out);
    free(out);
}

Test(info_dir_cli, diffusers_pipeline_folder) {
    char root[1024];
    snprintf(root, sizeof root, "%s", ts_tmp("info-pipe"));
    mkdir(root, 0755);
    const char *dirs[] = {"info-pipe/text_encoder", "info-pipe/tokenizer", "info-pipe/transformer", "info-pipe/vae"};
    for (int i = 0; i < 4; i++) mkdir(ts_tmp(dirs[i]), 0755);
    ts_spit(ts_tmp("info-pipe/model_index.json"), "{\"_class_name\": \"SanaVideoPipeline\"}", 36);
    ts_copy_file(G2 "/tiny.weights.safetensors", ts_tmp("info-pipe/text_encoder/model.safetensors"));
    ts_copy_file(G2 "/tokenizer.model", ts_tmp("info-pipe/tokenizer/tokenizer.model"));
    ts_copy_file(SANA, ts_tmp("info-pipe/transformer/diffusion_pytorch_model.safetensors"));
    float z[6] = {0};
    lv_weight vae = {.name = "decoder.conv_in.weight", .dtype = LV_F32, .ndim = 2, .shape = {2, 3}, .data = z,
                     .nbytes = sizeof z};
    cr_assert_eq(lv_safetensors_write(ts_tmp("info-pipe/vae/diffusion_pytorch_model.safetensors"), &vae, 1, NULL, 0),
                 LV_OK, "%s", lv_last_error());
    char *out = info(root, 0);
    const char *sections[] = {"== text_encoder/ ==", "== tokenizer/ ==", "== transformer/ ==", "== vae/ =="};
    const char *prev = out;
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(prev, sections[i]);
        cr_assert(at, "no '%s' (in order) in %s", sections[i], out);
        prev = at;
    }
    cr_assert(strstr(out, "Gemma-2 text encoder (SANA-Video's): hidden 96"), "%s", out);
    cr_assert(strstr(out, "SentencePiece, 512 pieces"), "%s", out);
    cr_assert(strstr(out, "SANA-Video DiT: hidden 64, depth 2"), "%s", out);
    cr_assert(strstr(out, "parameters:    6 ("), "%s", out);
    free(out);
    /* a component that cannot be read fails the command, the others are still described */
    ts_spit(ts_tmp("info-pipe/text_encoder/model.safetensors"), "not safetensors", 15);
    out = info(root, 1);
    cr_assert(strstr(out, "text_encoder"), "%s", out);
    cr_assert(strstr(out, "SANA-Video DiT"), "%s", out);
    free(out);
}
