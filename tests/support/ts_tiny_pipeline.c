/* The tiny diffusers pipeline folder of the generate tests (ts_tiny_pipeline.h). */
#include "ts_tiny_pipeline.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"

void ts_write_tiny_dit_in(const char *assets, const char *path, int cap) {
    char sana[1024];
    snprintf(sana, sizeof sana, "%s/testdata/sana-video/tiny-hd32.weights.safetensors", assets);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(sana, &w), LV_OK, "%s", lv_last_error());
    int n = lv_weights_count(w);
    lv_weight *t = calloc((size_t)n, sizeof *t);
    float *fc1 = ts_rand_alloc((size_t)64 * cap, 4301, -0.5f, 0.5f);
    for (int i = 0; i < n; i++) {
        t[i] = *lv_weights_at(w, i);
        if (strcmp(t[i].name, "y_embedder.y_proj.fc1.weight") == 0) {
            t[i].shape[1] = cap;
            t[i].data = fc1;
            t[i].nbytes = (uint64_t)64 * cap * sizeof(float);
        }
    }
    char config[512];
    snprintf(config, sizeof config,
             "{\"hidden_size\": 64, \"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1, 2, 2], "
             "\"in_channels\": 4, \"out_channels\": 4, \"caption_channels\": %d, \"mlp_ratio\": 3.0}",
             cap);
    const char *meta[] = {"config", config};
    cr_assert_eq(lv_safetensors_write(path, t, n, meta, 1), LV_OK, "%s", lv_last_error());
    free(fc1);
    free(t);
    lv_weights_close(w);
}

const char *ts_make_tiny_pipeline_in(const char *assets, const char *dir) {
    static char root[1024];
    snprintf(root, sizeof root, "%s", dir);
    char p[1200], from[1200];
    mkdir(root, 0755);
    const char *parts[] = {"text_encoder", "tokenizer", "transformer", "vae"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", root, parts[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/model_index.json", root);
    ts_spit(p, "{\"_class_name\": \"SanaVideoPipeline\"}", 36);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", root);
    snprintf(from, sizeof from, "%s/testdata/gemma2/tiny.weights.safetensors", assets);
    ts_copy_file(from, p);
    snprintf(p, sizeof p, "%s/tokenizer/tokenizer.model", root);
    snprintf(from, sizeof from, "%s/testdata/gemma2/tokenizer.model", assets);
    ts_copy_file(from, p);
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", root);
    ts_write_tiny_dit_in(assets, p, 96);
    snprintf(p, sizeof p, "%s/vae/diffusion_pytorch_model.safetensors", root);
    snprintf(from, sizeof from, "%s/testdata/wan-vae/wan-vae-tiny.weights.safetensors", assets);
    ts_copy_file(from, p);
    return root;
}
