/* SANA-Video model files (longvk/sana.h): the original test weights load with their config;
 * the diffusers layout of the same weights (tests/reference/make_diffusers_fixture.py) loads
 * to byte-identical tensors under the original names; presets, configs and every check made
 * before device work (missing, mis-shaped, wrongly typed tensors, extras, wrong depth, mixed
 * namings) give the expected results and messages; `longvk info` reports them. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "sana_config.h"
#include "sana_names.h"
#include "ts_files.h"

#define TINY LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define HD112 LONGVK_ASSETS_DIR "/testdata/sana-video/hd112.weights.safetensors"
#define DIFFUSERS LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers"

static lv_sana_file *open_ok(const char *path, const char *config, const char *preset) {
    lv_sana_file *f = NULL;
    cr_assert_eq(lv_sana_file_open(path, config, preset, &f), LV_OK, "%s: %s", path, lv_last_error());
    return f;
}

static void expect_open_error(const char *path, const char *config, const char *preset, lv_status status,
                              const char *const *frags) {
    lv_sana_file *f = NULL;
    lv_clear_error();
    lv_status s = lv_sana_file_open(path, config, preset, &f);
    cr_assert_null(f);
    cr_assert_eq(s, status, "%s: %s, expected %s: %s", path, lv_status_name(s), lv_status_name(status), lv_last_error());
    for (const char *const *p = frags; *p; p++)
        cr_assert(strstr(lv_last_error(), *p), "message '%s' lacks '%s'", lv_last_error(), *p);
}
#define EXPECT_OPEN_ERROR(path, config, preset, status, ...) \
    expect_open_error(path, config, preset, status, (const char *const[]){__VA_ARGS__, NULL})

/* A copy of tiny-hd32 with changes: `drop` removed, `extra` tensors added, and the config
 * metadata kept unless `config` replaces it ("" removes it). Returns the path. */
static const char *tiny_variant(const char *name, const char *drop, const lv_weight *extra, int n_extra,
                                const char *config) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(TINY, &w), LV_OK, "%s", lv_last_error());
    int n = lv_weights_count(w);
    lv_weight *t = malloc(((size_t)n + (size_t)n_extra) * sizeof *t);
    int k = 0;
    for (int i = 0; i < n; i++) {
        const lv_weight *x = lv_weights_at(w, i);
        int replaced = 0;
        for (int j = 0; j < n_extra; j++) replaced |= !strcmp(extra[j].name, x->name);
        if ((drop && !strcmp(x->name, drop)) || replaced) continue;
        t[k++] = *x;
    }
    for (int j = 0; j < n_extra; j++) t[k++] = extra[j];
    const char *cfg = config ? config : lv_weights_metadata(w, "config");
    const char *meta[2] = {"config", cfg};
    const char *path = ts_tmp(name);
    cr_assert_eq(lv_safetensors_write(path, t, k, meta, *cfg ? 1 : 0), LV_OK, "%s", lv_last_error());
    free(t);
    lv_weights_close(w);
    return path;
}

/* Every model tensor of `a` equals the one of `b` (dtype, shape, bytes). */
static void expect_same_model(lv_sana_file *a, lv_sana_file *b) {
    cr_assert_eq(lv_sana_file_tensor_count(a), lv_sana_file_tensor_count(b));
    for (int i = 0; i < lv_sana_file_tensor_count(a); i++) {
        const lv_weight *x = lv_sana_file_tensor_at(a, i), *y = lv_sana_file_tensor(b, x->name);
        cr_assert_not_null(y, "%s missing", x->name);
        cr_assert_str_eq(y->name, x->name);
        cr_assert_eq(x->dtype, y->dtype, "%s", x->name);
        cr_assert_eq(x->ndim, y->ndim, "%s", x->name);
        for (int d = 0; d < x->ndim; d++) cr_assert_eq(x->shape[d], y->shape[d], "%s", x->name);
        cr_assert_eq(x->nbytes, y->nbytes, "%s", x->name);
        cr_assert(memcmp(x->data, y->data, x->nbytes) == 0, "%s: bytes differ", x->name);
    }
}

Test(sana_file, tiny_test_weights_load_with_their_config) {
    lv_sana_file *f = open_ok(TINY, NULL, NULL);
    const lv_sana_config *c = lv_sana_file_config(f);
    cr_assert_eq(c->hidden, 64);
    cr_assert_eq(c->depth, 2);
    cr_assert_eq(c->heads, 2);
    cr_assert_eq(c->head_dim, 32);
    cr_assert_eq(c->in_channels, 4);
    cr_assert_eq(c->out_channels, 4);
    cr_assert_eq(c->caption_channels, 32);
    cr_assert_eq(c->patch[0], 1);
    cr_assert_eq(c->patch[1], 2);
    cr_assert_eq(c->patch[2], 2);
    cr_assert_eq(c->ffn_hidden, 192);
    /* README: tiny-hd32 splits its 32 RoPE dims 12 / 10 / 10. */
    cr_assert_eq(c->rope_dims[0], 12);
    cr_assert_eq(c->rope_dims[1], 10);
    cr_assert_eq(c->rope_dims[2], 10);
    cr_assert_eq(c->rope_theta, 10000.0f);
    cr_assert_eq(c->qk_norm_eps, 1e-5f);
    cr_assert_eq(c->cross_norm_eps, 1e-6f);
    cr_assert_eq(c->caption_norm_eps, 1e-5f);
    cr_assert_eq(c->ln_eps, 1e-6f);
    cr_assert_eq(c->attn_eps, 1e-8f);
    cr_assert(strstr(lv_sana_file_config_source(f), "__metadata__.config"));
    cr_assert_eq(lv_sana_file_naming(f), LV_SANA_NAMES_ORIGINAL);
    cr_assert_eq(lv_sana_file_extra_count(f), 0);
    /* Every tensor of the file is a model tensor, handed out in place (no copy). */
    lv_weights *w;
    cr_assert_eq(lv_weights_open(TINY, &w), LV_OK);
    uint64_t params = 0;
    for (int i = 0; i < lv_weights_count(w); i++) {
        const lv_weight *raw = lv_weights_at(w, i), *t = lv_sana_file_tensor(f, raw->name);
        cr_assert_not_null(t, "%s", raw->name);
        cr_assert_eq(t->nbytes, raw->nbytes);
        cr_assert(memcmp(t->data, raw->data, raw->nbytes) == 0, "%s", raw->name);
        params += lv_weight_numel(raw);
    }
    cr_assert_eq(lv_sana_file_tensor_count(f), lv_weights_count(w));
    cr_assert_eq(lv_sana_file_param_count(f), params);
    cr_assert_eq(params, 228368); /* sum over the header's shapes (computed with Python) */
    cr_assert_null(lv_sana_file_tensor(f, "blocks.2.attn.qkv.weight"));
    cr_assert_null(lv_sana_file_tensor(f, "transformer_blocks.0.attn1.to_q.weight"));
    const lv_weight *qkv = lv_sana_file_tensor(f, "blocks.1.attn.qkv.weight");
    cr_assert_eq(qkv->shape[0], 192);
    cr_assert_eq(qkv->shape[1], 64);
    lv_weights_close(w);
    lv_sana_file_close(f);
}

Test(sana_file, a_model_image_in_memory_loads_like_the_file) {
    size_t len;
    uint8_t *image = ts_slurp(TINY, &len);
    lv_sana_file *mem = NULL, *file = open_ok(TINY, NULL, NULL);
    cr_assert_eq(lv_sana_file_open_memory(image, len, "embedded", &mem), LV_OK, "%s", lv_last_error());
    cr_assert(strstr(lv_sana_file_config_source(mem), "__metadata__.config of embedded"));
    expect_same_model(file, mem);
    lv_sana_file_close(mem);
    /* Damaged images are refused like files, naming the image. */
    image[len / 2] ^= 0xff;
    image[20] = '\x01';
    lv_clear_error();
    cr_assert_neq(lv_sana_file_open_memory(image, 100, "embedded", &mem), LV_OK);
    cr_assert(strstr(lv_last_error(), "embedded"), "%s", lv_last_error());
    cr_assert_null(mem);
    cr_assert_eq(lv_sana_file_open_memory("PK\x03\x04....", 8, "zipped", &mem), LV_ERR_UNSUPPORTED);
    lv_sana_file_close(file);
    free(image);
}

Test(sana_file, hd112_has_the_real_rope_split) {
    lv_sana_file *f = open_ok(HD112, NULL, NULL);
    const lv_sana_config *c = lv_sana_file_config(f);
    cr_assert_eq(c->hidden, 224);
    cr_assert_eq(c->head_dim, 112);
    cr_assert_eq(c->in_channels, 16);
    cr_assert_eq(c->rope_dims[0], 40);
    cr_assert_eq(c->rope_dims[1], 36);
    cr_assert_eq(c->rope_dims[2], 36);
    cr_assert_eq(c->ffn_hidden, 672);
    cr_assert_eq(lv_sana_file_param_count(f), 1526624);
    lv_sana_file_close(f);
}

Test(sana_file, diffusers_layout_loads_to_the_same_tensors) {
    lv_sana_file *orig = open_ok(TINY, NULL, NULL);
    /* The directory (config.json beside the weights), the weights file itself, and an explicit --config. */
    const char *paths[] = {DIFFUSERS, DIFFUSERS "/diffusion_pytorch_model.safetensors"};
    for (int i = 0; i < 2; i++) {
        lv_sana_file *d = open_ok(paths[i], NULL, NULL);
        cr_assert_eq(lv_sana_file_naming(d), LV_SANA_NAMES_DIFFUSERS);
        cr_assert(strstr(lv_sana_file_config_source(d), "config.json"), "%s", lv_sana_file_config_source(d));
        cr_assert_eq(lv_sana_file_config(d)->hidden, 64);
        cr_assert_eq(lv_sana_file_extra_count(d), 0);
        cr_assert_eq(lv_sana_file_param_count(d), lv_sana_file_param_count(orig));
        expect_same_model(orig, d);
        expect_same_model(d, orig);
        lv_sana_file_close(d);
    }
    lv_sana_file *d = open_ok(paths[1], DIFFUSERS "/config.json", NULL);
    expect_same_model(orig, d);
    lv_sana_file_close(d);
    lv_sana_file_close(orig);
}

Test(sana_file, sharded_diffusers_index_loads) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(DIFFUSERS "/diffusion_pytorch_model.safetensors", &w), LV_OK);
    int n = lv_weights_count(w), half = n / 2;
    lv_weight *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = *lv_weights_at(w, i);
    mkdir(ts_tmp("sana-sharded"), 0755);
    cr_assert_eq(lv_safetensors_write(ts_tmp("sana-sharded/m-00001-of-00002.safetensors"), t, half, NULL, 0), LV_OK);
    cr_assert_eq(lv_safetensors_write(ts_tmp("sana-sharded/m-00002-of-00002.safetensors"), t + half, n - half, NULL, 0),
                 LV_OK);
    char *index = malloc(65536);
    size_t at = (size_t)snprintf(index, 65536, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(index + at, 65536 - at, "%s\"%s\": \"m-0000%d-of-00002.safetensors\"", i ? ", " : "",
                               t[i].name, i < half ? 1 : 2);
    snprintf(index + at, 65536 - at, "}}");
    ts_spit(ts_tmp("sana-sharded/diffusion_pytorch_model.safetensors.index.json"), index, strlen(index));
    size_t len;
    uint8_t *cfg = ts_slurp(DIFFUSERS "/config.json", &len);
    ts_spit(ts_tmp("sana-sharded/config.json"), cfg, len);
    lv_sana_file *orig = open_ok(TINY, NULL, NULL);
    lv_sana_file *s = open_ok(ts_tmp("sana-sharded"), NULL, NULL);
    expect_same_model(orig, s);
    lv_sana_file_close(s);
    s = open_ok(ts_tmp("sana-sharded/diffusion_pytorch_model.safetensors.index.json"), NULL, NULL);
    expect_same_model(orig, s);
    lv_sana_file_close(s);
    lv_sana_file_close(orig);
    free(cfg);
    free(index);
    free(t);
    lv_weights_close(w);
}

Test(sana_file, presets_and_configs) {
    lv_sana_config c;
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-480p", &c), LV_OK, "%s", lv_last_error());
    cr_assert_eq(c.hidden, 2240);
    cr_assert_eq(c.depth, 20);
    cr_assert_eq(c.heads, 20);
    cr_assert_eq(c.head_dim, 112);
    cr_assert_eq(c.ffn_hidden, 6720);
    cr_assert_eq(c.caption_channels, 2304);
    cr_assert_eq(c.in_channels, 16);
    cr_assert_eq(c.out_channels, 16);
    cr_assert_eq(c.patch[1], 2);
    cr_assert_eq(c.rope_dims[0], 40);
    cr_assert_eq(c.rope_dims[1], 36);
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-720p", &c), LV_OK);
    cr_assert_eq(c.in_channels, 128);
    cr_assert_eq(c.out_channels, 128);
    cr_assert_eq(c.patch[0] * c.patch[1] * c.patch[2], 1);
    cr_assert_eq(lv_sana_config_preset("sana-video-14b", &c), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "unknown preset 'sana-video-14b'") &&
                  strstr(lv_last_error(), "sana-video-2b-480p, sana-video-2b-720p"),
              "%s", lv_last_error());
    /* JSON round trip. */
    char json[512];
    lv_sana_config back;
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-480p", &c), LV_OK);
    cr_assert_eq(lv_sana_config_to_json(&c, json, sizeof json), LV_OK);
    cr_assert_eq(lv_sana_config_parse(json, strlen(json), "json", &back), LV_OK, "%s", lv_last_error());
    cr_assert(memcmp(&c, &back, sizeof c) == 0);
    /* Diffusers keys; out_channels may be null. */
    const char *diff = "{\"num_layers\": 3, \"num_attention_heads\": 4, \"attention_head_dim\": 12, \"in_channels\": 8,"
                       " \"out_channels\": null, \"caption_channels\": 16, \"patch_size\": [1, 2, 2], \"mlp_ratio\": 2.5,"
                       " \"_class_name\": \"SanaVideoTransformer3DModel\", \"sample_size\": 30}";
    cr_assert_eq(lv_sana_config_parse(diff, strlen(diff), "diffusers", &c), LV_OK, "%s", lv_last_error());
    cr_assert_eq(c.hidden, 48);
    cr_assert_eq(c.out_channels, 8);
    cr_assert_eq(c.ffn_hidden, 120);
    cr_assert_eq(c.rope_dims[0], 4);
    cr_assert_eq(c.rope_dims[1], 4);
    cr_assert_eq(c.rope_theta, 10000.0f); /* SANA-Video's unless the config says otherwise */
    /* "rope_theta" (model.py writes it when it is not 10000): read, and kept by a round trip. */
    const char *theta = "{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 48, \"patch_size\": [1, 4, 4], "
                        "\"in_channels\": 3, \"caption_channels\": 32, \"mlp_ratio\": 3.0, \"rope_theta\": 100.0}";
    cr_assert_eq(lv_sana_config_parse(theta, strlen(theta), "theta", &c), LV_OK, "%s", lv_last_error());
    cr_assert_eq(c.rope_theta, 100.0f);
    cr_assert_eq(lv_sana_config_to_json(&c, json, sizeof json), LV_OK);
    cr_assert(strstr(json, "\"rope_theta\": 100"), "%s", json);
    cr_assert_eq(lv_sana_config_parse(json, strlen(json), "json", &back), LV_OK, "%s", lv_last_error());
    cr_assert(memcmp(&c, &back, sizeof c) == 0);
    lv_sana_config sana_theta = c;
    sana_theta.rope_theta = 10000.0f; /* otherwise the same: a different model */
    cr_assert(lv_sana_config_same(&c, &back) && !lv_sana_config_same(&c, &sana_theta));
}

Test(sana_file, bad_configs_name_the_key) {
    struct {
        const char *json, *fragment;
    } cases[] = {
        {"{\"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, \"caption_channels\": 32, "
         "\"mlp_ratio\": 3}",
         "config key 'depth' (or 'num_layers') is missing"},
        {"{\"depth\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, \"caption_channels\": 32, "
         "\"mlp_ratio\": 3}",
         "'num_heads' (or 'num_attention_heads') is missing"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"in_channels\": 4, \"caption_channels\": 32, "
         "\"mlp_ratio\": 3}",
         "config key 'patch_size' is missing"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32}",
         "config key 'mlp_ratio' is missing"},
        {"{\"depth\": \"2\", \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3}",
         "config key 'depth' must be an integer in [0, 1000000000]"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": 2, \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3}",
         "patch_size must be a list of 3 positive integers"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,0,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3}",
         "patch_size[1] is not an integer"},
        {"{\"hidden_size\": 60, \"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], "
         "\"in_channels\": 4, \"caption_channels\": 32, \"mlp_ratio\": 3}",
         "hidden_size 60 is not num_heads x head_dim = 2 x 32"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 33, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3}",
         "head_dim 33 must be even"},
        {"{\"depth\": 0, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3}",
         "depth = 0 is out of range"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": \"3\"}",
         "mlp_ratio is not a number"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": -1}",
         "mlp_ratio -1 is out of range"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3, \"rope_theta\": 1}",
         "rope_theta must be a number in [2, 1e9]"},
        {"{\"depth\": 2, \"num_heads\": 2, \"head_dim\": 32, \"patch_size\": [1,2,2], \"in_channels\": 4, "
         "\"caption_channels\": 32, \"mlp_ratio\": 3, \"rope_theta\": \"100\"}",
         "rope_theta must be a number in [2, 1e9]"},
        {"{\"depth\": 2,", "not valid JSON"},
        {"[2]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lv_sana_config c;
        cr_assert_eq(lv_sana_config_parse(cases[i].json, strlen(cases[i].json), "my.json", &c), LV_ERR_INVALID,
                     "case %zu accepted", i);
        cr_assert(strstr(lv_last_error(), "my.json") && strstr(lv_last_error(), cases[i].fragment),
                  "case %zu: '%s' lacks '%s'", i, lv_last_error(), cases[i].fragment);
    }
    /* Through a file: a bad --config is reported before anything else. */
    ts_spit(ts_tmp("sana-bad-config.json"), cases[0].json, strlen(cases[0].json));
    EXPECT_OPEN_ERROR(TINY, ts_tmp("sana-bad-config.json"), NULL, LV_ERR_INVALID, "sana-bad-config.json",
                      "'depth' (or 'num_layers') is missing");
    EXPECT_OPEN_ERROR(TINY, ts_tmp("sana-no-such-config.json"), NULL, LV_ERR_IO, "sana-no-such-config.json");
    EXPECT_OPEN_ERROR(TINY, ts_tmp("x.json"), "sana-video-2b-480p", LV_ERR_INVALID, "not both");
}

Test(sana_file, missing_misshaped_and_mistyped_tensors_are_named) {
    const char *path = tiny_variant("sana-missing.safetensors", "blocks.1.mlp.t_conv.weight", NULL, 0, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_INVALID, "sana-missing.safetensors",
                      "tensor 'blocks.1.mlp.t_conv.weight' is missing (expected shape [64, 64, 3, 1])",
                      "config from __metadata__.config");
    static float small[64 * 32];
    lv_weight wrong = {"blocks.0.attn.proj.weight", LV_F32, 2, {64, 32}, small, sizeof small};
    path = tiny_variant("sana-shape.safetensors", NULL, &wrong, 1, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_INVALID,
                      "tensor 'blocks.0.attn.proj.weight' has shape [64, 32] in the file, the config needs [64, 64]");
    static int32_t ints[64];
    lv_weight typed = {"attention_y_norm.weight", LV_I32, 1, {64}, ints, sizeof ints};
    path = tiny_variant("sana-type.safetensors", NULL, &typed, 1, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_INVALID, "tensor 'attention_y_norm.weight' has dtype i32, not a weight type");
    /* Several problems: the first in full, the others listed. */
    lv_weight two[2] = {wrong, typed};
    path = tiny_variant("sana-two.safetensors", "t_block.1.bias", two, 2, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_INVALID, "tensor 't_block.1.bias' is missing", "2 more problems",
                      "attention_y_norm.weight", "blocks.0.attn.proj.weight");
    /* The right file with the wrong config. */
    EXPECT_OPEN_ERROR(TINY, NULL, "sana-video-2b-480p", LV_ERR_INVALID,
                      "tensor 'x_embedder.proj.weight' has shape [64, 4, 1, 2, 2] in the file, the config needs "
                      "[2240, 16, 1, 2, 2]",
                      "config from preset sana-video-2b-480p");
}

Test(sana_file, extras_are_listed_and_extra_blocks_refused) {
    static float buf[300 * 32];
    lv_weight extra[] = {
        {"y_embedder.y_embedding", LV_F32, 2, {300, 32}, buf, sizeof buf},
        {"pos_embed", LV_F32, 1, {8}, buf, 32},
        {"logvar_linear.weight", LV_F32, 2, {1, 64}, buf, 256},
        {"my.own.tensor", LV_F16, 1, {3}, buf, 6},
    };
    const char *path = tiny_variant("sana-extras.safetensors", NULL, extra, 4, NULL);
    lv_sana_file *f = open_ok(path, NULL, NULL);
    cr_assert_eq(lv_sana_file_extra_count(f), 4);
    int known = 0;
    for (int i = 0; i < 4; i++) {
        const char *n = lv_sana_file_extra_name(f, i);
        int is_own = !strcmp(n, "my.own.tensor");
        cr_assert_eq(lv_sana_file_extra_known(f, i), !is_own, "%s", n);
        known += lv_sana_file_extra_known(f, i);
        cr_assert_eq(lv_sana_file_extra(f, i)->name, n);
    }
    cr_assert_eq(known, 3);
    cr_assert_eq(lv_sana_file_param_count(f), 228368, "extras are not parameters");
    cr_assert_null(lv_sana_file_tensor(f, "pos_embed"));
    lv_sana_file_close(f);

    lv_weight block2 = {"blocks.2.attn.qkv.weight", LV_F32, 2, {192, 64}, buf, 192 * 64 * 4};
    static float big[192 * 64];
    block2.data = big;
    path = tiny_variant("sana-block2.safetensors", NULL, &block2, 1, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_INVALID,
                      "tensor 'blocks.2.attn.qkv.weight' belongs to block 2 but the config has depth 2");
}

Test(sana_file, namings_must_not_mix_and_other_files_are_not_models) {
    static float buf[64 * 64];
    lv_weight diff = {"transformer_blocks.0.attn1.to_q.weight", LV_F32, 2, {64, 64}, buf, sizeof buf};
    const char *path = tiny_variant("sana-mixed.safetensors", NULL, &diff, 1, NULL);
    EXPECT_OPEN_ERROR(path, NULL, NULL, LV_ERR_FORMAT, "mixes original SANA-Video names", "diffusers names");
    EXPECT_OPEN_ERROR(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors", NULL, NULL, LV_ERR_FORMAT,
                      "not a SANA-Video model", "108 tensors");
    EXPECT_OPEN_ERROR(LONGVK_ASSETS_DIR "/fixtures", NULL, NULL, LV_ERR_IO, "without diffusion_pytorch_model.safetensors");
    /* Diffusers parts that disagree: to_k in bf16 while to_q and to_v are f32. */
    lv_weights *w;
    cr_assert_eq(lv_weights_open(DIFFUSERS "/diffusion_pytorch_model.safetensors", &w), LV_OK);
    int n = lv_weights_count(w);
    lv_weight *t = malloc((size_t)n * sizeof *t);
    static uint16_t half[64 * 64];
    for (int i = 0; i < n; i++) {
        t[i] = *lv_weights_at(w, i);
        if (!strcmp(t[i].name, "transformer_blocks.1.attn1.to_k.weight")) {
            t[i].dtype = LV_BF16;
            t[i].data = half;
            t[i].nbytes = sizeof half;
        }
    }
    mkdir(ts_tmp("sana-diff-dtype"), 0755);
    cr_assert_eq(lv_safetensors_write(ts_tmp("sana-diff-dtype/diffusion_pytorch_model.safetensors"), t, n, NULL, 0),
                 LV_OK);
    EXPECT_OPEN_ERROR(ts_tmp("sana-diff-dtype"), DIFFUSERS "/config.json", NULL, LV_ERR_INVALID,
                      "'transformer_blocks.1.attn1.to_q.weight' (f32) and 'transformer_blocks.1.attn1.to_k.weight' "
                      "(bf16) are parts of blocks.1.attn.qkv.weight");
    /* A missing diffusers part names both names. */
    for (int i = 0; i < n; i++) t[i] = *lv_weights_at(w, i);
    cr_assert_eq(lv_safetensors_write(ts_tmp("sana-diff-dtype/diffusion_pytorch_model.safetensors"), t, n - 1, NULL, 0),
                 LV_OK);
    const char *last = t[n - 1].name;
    lv_sana_file *f = NULL;
    cr_assert_neq(lv_sana_file_open(ts_tmp("sana-diff-dtype"), DIFFUSERS "/config.json", NULL, &f), LV_OK);
    cr_assert(strstr(lv_last_error(), last) && strstr(lv_last_error(), "is missing"), "%s: %s", last, lv_last_error());
    free(t);
    lv_weights_close(w);
}

Test(sana_file, bf16_weights_and_no_config) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(TINY, &w), LV_OK);
    int n = lv_weights_count(w);
    lv_weight *t = malloc((size_t)n * sizeof *t);
    uint16_t **bufs = malloc((size_t)n * sizeof *bufs);
    for (int i = 0; i < n; i++) {
        const lv_weight *x = lv_weights_at(w, i);
        uint64_t k = lv_weight_numel(x);
        bufs[i] = malloc(k * 2);
        for (uint64_t j = 0; j < k; j++) bufs[i][j] = lv_float_to_bf16(((const float *)x->data)[j]);
        t[i] = *x;
        t[i].dtype = LV_BF16;
        t[i].data = bufs[i];
        t[i].nbytes = k * 2;
    }
    const char *meta[2] = {"config", lv_weights_metadata(w, "config")};
    const char *path = ts_tmp("sana-bf16.safetensors");
    cr_assert_eq(lv_safetensors_write(path, t, n, meta, 1), LV_OK, "%s", lv_last_error());
    lv_sana_file *f = open_ok(path, NULL, NULL);
    for (int i = 0; i < n; i++) {
        const lv_weight *x = lv_sana_file_tensor(f, t[i].name);
        cr_assert_eq(x->dtype, LV_BF16);
        cr_assert(memcmp(x->data, bufs[i], t[i].nbytes) == 0);
    }
    lv_sana_file_close(f);
    /* Without the config: nothing to infer it from (it matches no preset). */
    const char *bare = ts_tmp("sana-bare.safetensors");
    cr_assert_eq(lv_safetensors_write(bare, t, n, NULL, 0), LV_OK);
    EXPECT_OPEN_ERROR(bare, NULL, NULL, LV_ERR_INVALID, "no config", "hidden 64, depth 2", "--config", "--preset",
                      "sana-video-2b-480p");
    /* ... and an explicit config file makes it load. */
    ts_spit(ts_tmp("sana-tiny.json"), meta[1], strlen(meta[1]));
    f = open_ok(bare, ts_tmp("sana-tiny.json"), NULL);
    cr_assert(strstr(lv_sana_file_config_source(f), "config file"));
    lv_sana_file_close(f);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(t);
    lv_weights_close(w);
}

/* The released 2B shapes, as a sparse file (no data is stored, nothing is read): the preset is
 * inferred from the shapes and the parameter count matches the architecture's formula. */
static const char *write_sparse_2b(void) {
    lv_sana_config c;
    cr_assert_eq(lv_sana_config_preset("sana-video-2b-480p", &c), LV_OK);
    lv_sana_tensor_spec *spec;
    int n;
    cr_assert_eq(lv_sana_expected_tensors(&c, &spec, &n), LV_OK);
    size_t cap = 1 << 20, at = 0;
    char *h = malloc(cap);
    uint64_t off = 0;
    at += (size_t)snprintf(h + at, cap - at, "{");
    for (int i = 0; i <= n; i++) {
        /* one extra a released checkpoint carries: y_embedder.y_embedding [300, 2304] */
        const char *name = i < n ? spec[i].name : "y_embedder.y_embedding";
        int ndim = i < n ? spec[i].ndim : 2;
        int64_t shape[5] = {300, 2304};
        if (i < n) memcpy(shape, spec[i].shape, sizeof shape);
        uint64_t bytes = 2;
        at += (size_t)snprintf(h + at, cap - at, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[", i ? "," : "", name);
        for (int d = 0; d < ndim; d++) {
            at += (size_t)snprintf(h + at, cap - at, d ? ",%lld" : "%lld", (long long)shape[d]);
            bytes *= (uint64_t)shape[d];
        }
        at += (size_t)snprintf(h + at, cap - at, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                               (unsigned long long)(off + bytes));
        off += bytes;
    }
    at += (size_t)snprintf(h + at, cap - at, "}");
    while ((8 + at) % 8) h[at++] = ' ';
    const char *path = ts_tmp("sana-2b-sparse.safetensors");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    cr_assert_geq(fd, 0);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)at >> (8 * i));
    cr_assert_eq(write(fd, len, 8), 8);
    cr_assert_eq(write(fd, h, at), (ssize_t)at);
    cr_assert_eq(ftruncate(fd, (off_t)(8 + at + off)), 0);
    close(fd);
    free(h);
    free(spec);
    return path;
}

/* SanaMSVideo_2000M: written out term by term from sana-video.md, independently of the tables. */
static uint64_t params_2b(void) {
    const uint64_t C = 2240, F = 6720, cap = 2304, in = 16, out = 16, P = 4, D = 20;
    uint64_t top = (C * in * P + C) + (C * 256 + C) + (C * C + C) + (6 * C * C + 6 * C) + (C * cap + C) + (C * C + C) + C +
                   (out * P * C + out * P) + 2 * C;
    uint64_t block = 6 * C + 3 * C * C + 2 * C + (C * C + C) + (C * C + C) + (2 * C * C + 2 * C) + 2 * C + (C * C + C) +
                     (2 * F * C + 2 * F) + (2 * F * 9 + 2 * F) + C * F + C * C * 3;
    return top + D * block;
}

Test(sana_file, released_2b_shapes_infer_the_preset) {
    const char *path = write_sparse_2b();
    lv_sana_file *f = open_ok(path, NULL, NULL);
    cr_assert(strstr(lv_sana_file_config_source(f), "preset sana-video-2b-480p (inferred"), "%s",
              lv_sana_file_config_source(f));
    cr_assert_eq(lv_sana_file_param_count(f), params_2b(), "%llu vs %llu",
                 (unsigned long long)lv_sana_file_param_count(f), (unsigned long long)params_2b());
    cr_assert_eq(lv_sana_file_tensor_count(f), 416);
    cr_assert_eq(lv_sana_file_extra_count(f), 1);
    cr_assert_str_eq(lv_sana_file_extra_name(f, 0), "y_embedder.y_embedding");
    lv_sana_file_close(f);
    /* The 720p preset does not fit these tensors. */
    EXPECT_OPEN_ERROR(path, NULL, "sana-video-2b-720p", LV_ERR_INVALID,
                      "'x_embedder.proj.weight' has shape [2240, 16, 1, 2, 2] in the file, the config needs "
                      "[2240, 128, 1, 1, 1]");

    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, path);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    char want[64];
    snprintf(want, sizeof want, "parameters:    %llu", (unsigned long long)params_2b());
    cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
    cr_assert(strstr(out, "bf16: 416 tensors"), "%s", out);
    cr_assert(strstr(out, "hidden 2240, depth 20, 20 heads x 112, FFN 6720"), "%s", out);
    cr_assert(strstr(out, "RoPE per head: t 40, h 36, w 36"), "%s", out);
    cr_assert(strstr(out, "15600 tokens"), "%s", out);
    cr_assert(strstr(out, "y_embedder.y_embedding bf16 [300, 2304]  (known"), "%s", out);
    unlink(path);
    free(out);
}

Test(sana_file, info_command) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, TINY);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "hidden 64, depth 2, 2 heads x 32, FFN 192"), "%s", out);
    cr_assert(strstr(out, "228368"), "%s", out);
    cr_assert(strstr(out, "f32: 56 tensors"), "%s", out);
    cr_assert(strstr(out, "original SANA-Video names"), "%s", out);
    cr_assert(strstr(out, "extra tensors: 0"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info %s --latent 4x8x8 --text-tokens 8", LONGVK_CLI, DIFFUSERS);
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "diffusers names, q/k/v merged"), "%s", out);
    /* 4 x 4 x 4 = 64 tokens: activations 4 B x (64 x max(6 x 64, 2 x 64 + 5 x 192) + 3 x 8 x 64) = 284672 B */
    cr_assert(strstr(out, "278.0 KiB  (64 tokens"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors");
    cr_assert_eq(ts_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "not a SANA-Video model") && strstr(out, "108"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info %s --preset sana-video-2b-480p", LONGVK_CLI, TINY);
    cr_assert_eq(ts_run(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "longvk: info:") && strstr(out, "x_embedder.proj.weight"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info %s/nothing-here", LONGVK_CLI, LONGVK_TEST_TMP);
    cr_assert_eq(ts_run(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "nothing-here: cannot open"), "%s", out);
    free(out);
}
