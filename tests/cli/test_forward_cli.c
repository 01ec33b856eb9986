/* `longvk forward` end to end: inputs written from the reference vectors, the output
 * compared with the reference's (NMSE <= 1e-8, see test_sana_dit.c), a pipeline folder as
 * --model, and bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "longvk/weights.h"
#include "test_support.h"
#include "ts_files.h"

#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors"

static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s forward %s 2>%s/forward.err", LONGVK_CLI, args, LONGVK_TEST_TMP);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void write_inputs(lv_weights *v) {
    ts_forward_inputs(v, LONGVK_TEST_TMP "/fwd_x.npy", LONGVK_TEST_TMP "/fwd_text.safetensors");
}

static void compare(lv_weights *v, const char *out, const char *want) {
    lv_npy got;
    cr_assert_eq(lv_npy_read(out, &got), LV_OK, "%s", lv_last_error());
    const lv_weight *w = lv_weights_find(v, want);
    cr_assert_eq(lv_npy_numel(&got), (int64_t)lv_weight_numel(w));
    double e = ts_nmse(got.data, w->data, lv_weight_numel(w));
    cr_log_info("%s nmse %.3g", want, e);
    cr_assert(e <= 1e-8, "%s: nmse %.3g", want, e);
    lv_npy_free(&got);
}

Test(forward_cli, one_shot_and_block_causal_match_reference, .timeout = 300) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    write_inputs(v);
    cr_assert_eq(run("--model " WEIGHTS " --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 500 "
                     "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_out.npy"), 0);
    compare(v, LONGVK_TEST_TMP "/fwd_out.npy", "fwd_out");
    cr_assert_eq(run("--model " WEIGHTS " --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 727 --block-frames 2 "
                     "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_bc.npy"), 0);
    compare(v, LONGVK_TEST_TMP "/fwd_bc.npy", "bc_out");
    lv_weights_close(v);
}

/* --model PIPELINE (a diffusers folder: model_index.json beside transformer/), as its help
 * says and as generate takes it (issue 53, item 15): its transformer/'s prediction, the
 * reference's; a pipeline folder without transformer/ is named. */
Test(forward_cli, a_pipeline_folder_is_its_transformer, .timeout = 300) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    write_inputs(v);
    const char *pipe = LONGVK_TEST_TMP "/fwd_pipe";
    mkdir(pipe, 0755);
    mkdir(LONGVK_TEST_TMP "/fwd_pipe/transformer", 0755);
    ts_spit(LONGVK_TEST_TMP "/fwd_pipe/model_index.json", "{\"_class_name\": \"SanaVideoPipeline\"}", 36);
    size_t n;
    uint8_t *b = ts_slurp(WEIGHTS, &n);
    ts_spit(LONGVK_TEST_TMP "/fwd_pipe/transformer/diffusion_pytorch_model.safetensors", b, n);
    free(b);
    remove(LONGVK_TEST_TMP "/fwd_pipe_out.npy");
    cr_assert_eq(run("--model " LONGVK_TEST_TMP "/fwd_pipe --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 500 "
                     "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_pipe_out.npy"),
                 0);
    compare(v, LONGVK_TEST_TMP "/fwd_pipe_out.npy", "fwd_out");
    lv_weights_close(v);
    /* without transformer/: named */
    remove(LONGVK_TEST_TMP "/fwd_pipe/transformer/diffusion_pytorch_model.safetensors");
    rmdir(LONGVK_TEST_TMP "/fwd_pipe/transformer");
    cr_assert_eq(run("--model " LONGVK_TEST_TMP "/fwd_pipe --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 500 "
                     "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_none.npy"),
                 1);
    size_t len;
    char *err = (char *)ts_slurp(LONGVK_TEST_TMP "/forward.err", &len);
    cr_assert_not_null(strstr(err, "without transformer/"), "%s", err);
    free(err);
}

Test(forward_cli, bad_input_is_a_clean_error, .timeout = 300) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    write_inputs(v);
    lv_weights_close(v);
    remove(LONGVK_TEST_TMP "/fwd_none.npy");
    /* latents with the wrong channel count */
    float z[2 * 2 * 8 * 8] = {0};
    int64_t shape[4] = {2, 2, 8, 8};
    cr_assert_eq(lv_npy_write(LONGVK_TEST_TMP "/fwd_bad.npy", 4, shape, z), LV_OK);
    cr_assert_neq(run("--model " WEIGHTS " --latents " LONGVK_TEST_TMP "/fwd_bad.npy --timestep 500 "
                      "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_none.npy"), 0);
    /* a model file that does not exist, a timestep list of the wrong length */
    cr_assert_neq(run("--model /nonexistent.safetensors --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 500 "
                      "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_none.npy"), 0);
    cr_assert_neq(run("--model " WEIGHTS " --latents " LONGVK_TEST_TMP "/fwd_x.npy --timestep 1,2 "
                      "--text-embeds " LONGVK_TEST_TMP "/fwd_text.safetensors -o " LONGVK_TEST_TMP "/fwd_none.npy"), 0);
    struct stat st;
    cr_assert_neq(stat(LONGVK_TEST_TMP "/fwd_none.npy", &st), 0, "no output may be left behind");
}
