/* `longvk convert IN OUT.gguf --quantize q8_0|q4_K` on tiny-hd32, read back with no
 * conversion: every matrix weight (linear layers, 1x1 convs; rows whole blocks) holds exactly
 * the blocks lv_quantize_rows makes of the source's values, the 1x1 convs as [N, K]; every
 * other tensor keeps its dtype and bytes; the config comes along as metadata; `longvk info`
 * shows the types and bytes; and the DiT made from the file (as stored) gives bit for bit the
 * output of the safetensors file quantized on load (lv_dit_options.weights q8_0), both being
 * the same blocks through the same kernels. Bad uses exit 2 and write nothing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "longvk/dit.h"
#include "longvk/quant.h"
#include "longvk/sana.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "ts_files.h"

#define TINY LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.vectors.safetensors"

static void convert(const char *out, const char *quant) {
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s convert %s %s --quantize %s", LONGVK_CLI, TINY, out, quant);
    int rc = ts_run(cmd, &text);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, text);
    free(text);
}

/* a matrix weight as the converter defines it: *.weight, [N, K, 1...], rows whole blocks,
 * no embedding table */
static int64_t matrix_k(const lv_weight *t, int64_t block) {
    size_t len = strlen(t->name);
    if (len < 7 || strcmp(t->name + len - 7, ".weight") || t->ndim < 2 || strstr(t->name, "embedding")) return 0;
    for (int d = 2; d < t->ndim; d++)
        if (t->shape[d] != 1) return 0;
    int64_t k = t->shape[1];
    return k % block ? 0 : k;
}

static void check_tensors(const char *path, lv_dtype dt, int *quantized) {
    lv_weights *src, *got;
    cr_assert_eq(lv_weights_open(TINY, &src), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(path, &got), LV_OK, "%s", lv_last_error());
    cr_assert_str_eq(lv_weights_format(got), "gguf");
    cr_assert_eq(lv_weights_count(got), lv_weights_count(src));
    cr_assert_not_null(lv_weights_metadata(got, "config"));
    cr_assert_str_eq(lv_weights_metadata(got, "config"), lv_weights_metadata(src, "config"));
    *quantized = 0;
    for (int i = 0; i < lv_weights_count(src); i++) {
        const lv_weight *s = lv_weights_at(src, i), *g = lv_weights_find(got, s->name);
        cr_assert_not_null(g, "%s missing", s->name);
        lv_dtype want = dt;
        int64_t k = matrix_k(s, lv_dtype_block(dt, NULL));
        if (!k && dt == LV_Q4_K) want = LV_Q8_0, k = matrix_k(s, 32);
        if (!k) { /* as it was */
            cr_assert_eq(g->dtype, s->dtype, "%s", s->name);
            cr_assert_eq(lv_weight_numel(g), lv_weight_numel(s), "%s", s->name);
            cr_assert_eq(g->nbytes, s->nbytes);
            cr_assert(memcmp(g->data, s->data, s->nbytes) == 0, "%s: bytes differ", s->name);
            continue;
        }
        int64_t rows = s->shape[0];
        cr_assert_eq(g->dtype, want, "%s: %s", s->name, lv_dtype_name(g->dtype));
        cr_assert_eq(g->ndim, 2, "%s", s->name);
        cr_assert(g->shape[0] == rows && g->shape[1] == k, "%s: [%lld, %lld]", s->name, (long long)g->shape[0],
                  (long long)g->shape[1]);
        uint64_t nb = lv_dtype_bytes(want, rows * k);
        cr_assert_eq(g->nbytes, nb);
        void *blocks = malloc(nb);
        cr_assert_eq(lv_quantize_rows(want, s->data, s->dtype, rows, k, blocks), LV_OK, "%s", lv_last_error());
        cr_assert(memcmp(g->data, blocks, nb) == 0, "%s: blocks differ", s->name);
        free(blocks);
        (*quantized)++;
    }
    lv_weights_close(src);
    lv_weights_close(got);
}

static float *forward(const char *model_path, lv_dit_weights rule) {
    lv_ctx *ctx = ts_ctx();
    lv_sana_file *model;
    lv_weights *v;
    cr_assert_eq(lv_sana_file_open(model_path, NULL, NULL, &model), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    const lv_weight *x = lv_weights_find(v, "x"), *y = lv_weights_find(v, "y");
    int F = (int)x->shape[1], H = (int)x->shape[2], W = (int)x->shape[3];
    size_t n = (size_t)x->shape[0] * F * H * W;
    float ts[64], *out = malloc(n * sizeof *out);
    for (int f = 0; f < F; f++) ts[f] = 500.0f;
    lv_dit *dit;
    lv_dit_options opt = {.cached_blocks = LV_CACHED_ALL, .weights = rule};
    cr_assert_eq(lv_dit_create(ctx, model, &opt, &dit), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_set_text(ctx, dit, 0, y->data, (int)y->shape[0], NULL), LV_OK, "%s", lv_last_error());
    lv_dit_pass pass = {.x = x->data, .frames = F, .height = H, .width = W, .timesteps = ts};
    cr_assert_eq(lv_dit_forward(ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
    lv_dit_destroy(ctx, dit);
    lv_weights_close(v);
    lv_sana_file_close(model);
    ts_ctx_done(ctx);
    return out;
}

Test(convert_quantize_cli, q8_0_round_trip_and_the_same_forward) {
    const char *path = ts_tmp("tiny-q8_0.gguf");
    convert(path, "q8_0");
    int quantized;
    check_tensors(path, LV_Q8_0, &quantized);
    cr_assert_eq(quantized, 20, "%d matrices quantized (tiny-hd32: 20 but the patch embedding)", quantized);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, path);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert(strstr(text, "q8_0: 20 tensors") && strstr(text, "(gguf;"), "%s", text);
    free(text);
    float *from_file = forward(path, LV_DIT_WEIGHTS_AS_STORED), *on_load = forward(TINY, LV_DIT_WEIGHTS_Q8_0);
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK);
    size_t numel = (size_t)lv_weight_numel(lv_weights_find(v, "x"));
    lv_weights_close(v);
    cr_assert(memcmp(from_file, on_load, numel * sizeof(float)) == 0, "the GGUF's forward differs from q8_0 on load");
    free(from_file);
    free(on_load);
}

Test(convert_quantize_cli, q4_k_falls_back_to_q8_0_where_rows_are_short) {
    const char *path = ts_tmp("tiny-q4_k.gguf");
    convert(path, "q4_K");
    int quantized;
    check_tensors(path, LV_Q4_K, &quantized);
    cr_assert_eq(quantized, 20);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s info %s", LONGVK_CLI, path);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert(strstr(text, "q8_0: 19 tensors") && strstr(text, "q4_k: 1 tensor"), "%s", text);
    free(text);
}

Test(convert_quantize_cli, bad_uses_exit_2_and_write_nothing) {
    const char *outs[] = {ts_tmp("x.safetensors"), ts_tmp("y.gguf")};
    const char *quants[] = {"q8_0", "q5_0"};
    for (int i = 0; i < 2; i++) {
        char cmd[2048], *text;
        snprintf(cmd, sizeof cmd, "%s convert %s %s --quantize %s 2>&1", LONGVK_CLI, TINY, outs[i], quants[i]);
        cr_assert_eq(ts_run(cmd, &text), 2, "%s", text);
        cr_assert(strstr(text, i == 0 ? "OUT must end in .gguf" : "q8_0 or q4_K"), "%s", text);
        struct stat st;
        cr_assert_neq(stat(outs[i], &st), 0, "%s was written", outs[i]);
        free(text);
    }
}
