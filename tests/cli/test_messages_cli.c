/* Messages that say what is wrong and what to do (issue 44 E): latents with a zero
 * dimension, a VAE without de-normalisation tables given to the CLI, the state sizes of
 * `info` and `generate` (different quantities, each named, equal where they are the same),
 * and `metrics` on a one-frame video (no "nan"). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "ts_files.h"

#define VAE_DIR LONGVK_ASSETS_DIR "/testdata/wan-vae"
#define PROMPT "two red balls bouncing on a blue background"

/* `longvk decode` on latents [4, 0, 4, 6] (the tiny VAE has 4 channels) said "got 4
 * dimensions with another channel count". */
Test(messages, decode_names_a_zero_dimension) {
    int64_t shape[4] = {4, 0, 4, 6};
    float none[1] = {0};
    const char *npy = ts_tmp("msg_zero.npy"), *out = ts_tmp("msg_zero.mkv");
    cr_assert_eq(lv_npy_write(npy, 4, shape, none), LV_OK, "%s", lv_last_error());
    unlink(out);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s decode --vae %s/wan-vae-tiny.weights.safetensors --latents %s -o %s", LONGVK_CLI,
             VAE_DIR, npy, out);
    cr_assert_eq(ts_run(cmd, &text), 1, "%s", text);
    cr_assert_null(strstr(text, "another channel count"), "%s", text);
    cr_assert_not_null(strstr(text, "[4, 0, 4, 6]"), "%s", text);
    cr_assert_not_null(strstr(text, "zero dimension"), "%s", text);
    cr_assert_not_null(strstr(text, "no latent frames"), "%s", text);
    free(text);
    /* and a real channel mismatch gives the count */
    int64_t bad[4] = {3, 2, 4, 6};
    float zeros[3 * 2 * 4 * 6] = {0};
    cr_assert_eq(lv_npy_write(npy, 4, bad, zeros), LV_OK);
    cr_assert_eq(ts_run(cmd, &text), 1, "%s", text);
    cr_assert_not_null(strstr(text, "with 3 channels"), "%s", text);
    free(text);
    cr_assert_eq(access(out, F_OK), -1, "a refused decode created %s", out);
}

/* The tiny VAE as .pth (4 latent channels, no metadata): the library tells a program to call
 * lv_vae_set_normalization; the CLI tells its user which file to give. */
Test(messages, decode_without_normalisation_says_what_to_give) {
    int64_t shape[4] = {4, 2, 4, 6};
    float zeros[4 * 2 * 4 * 6] = {0};
    const char *npy = ts_tmp("msg_lat.npy"), *out = ts_tmp("msg_pth.mkv");
    cr_assert_eq(lv_npy_write(npy, 4, shape, zeros), LV_OK, "%s", lv_last_error());
    unlink(out);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s decode --vae %s/wan-vae-tiny.weights.pth --latents %s -o %s", LONGVK_CLI, VAE_DIR,
             npy, out);
    cr_assert_eq(ts_run(cmd, &text), 1, "%s", text);
    cr_assert_null(strstr(text, "lv_vae_set_normalization"), "a CLI user cannot call a function: %s", text);
    cr_assert_not_null(strstr(text, "--vae"), "%s", text);
    cr_assert_not_null(strstr(text, ".safetensors"), "%s", text);
    cr_assert_not_null(strstr(text, "latents_mean"), "%s", text);
    cr_assert_not_null(strstr(text, "latents_std"), "%s", text);
    free(text);
    cr_assert_eq(access(out, F_OK), -1, "a refused decode created %s", out);
}

/* The value after `label` in `text` up to "KiB", e.g. "390.0". */
static void kib_after(const char *text, const char *label, char *out, size_t cap) {
    const char *p = strstr(text, label);
    cr_assert_not_null(p, "'%s' not in:\n%s", label, text);
    p += strlen(label);
    while (*p == ' ') p++;
    size_t n = 0;
    while (p[n] && p[n] != ' ' && n + 1 < cap) n++;
    memcpy(out, p, n);
    out[n] = 0;
    cr_assert(strncmp(p + n, " KiB", 4) == 0, "no KiB after '%s': %.40s", label, p);
}

typedef struct stopper {
    volatile sig_atomic_t flag;
} stopper;

static void stop_now(void *user, const lv_generate_progress *p) {
    (void)p;
    ((stopper *)user)->flag = 1;
}

/* `info` said "carried state 169.5 KiB" where `generate` said "carried state 390.0 KiB" for
 * the embedded model: info's formula held one S, z per layer (the model reads a window of 2
 * blocks), generate's number was the state's device memory with its working slots. Now
 * info gives both, named, and each equals what it names: generate's "state memory", and the
 * carried state a resume file holds. */
Test(messages, info_and_generate_state_sizes_agree, .timeout = 600) {
    char cmd[2048], *info, *gen, carried[32], memory[32], reported[32];
    snprintf(cmd, sizeof cmd, "%s info", LONGVK_CLI);
    cr_assert_eq(ts_run(cmd, &info), 0, "%s", info);
    kib_after(info, "carried state (S, z, conv cache)", carried, sizeof carried);
    kib_after(info, "state memory incl. working slots", memory, sizeof memory);

    snprintf(cmd, sizeof cmd, "%s generate -p '%s' --frames 8 --burn-in-blocks 0 --codec ffv1 -o %s", LONGVK_CLI,
             PROMPT, ts_tmp("msg_gen.mkv"));
    cr_assert_eq(ts_run(cmd, &gen), 0, "%s", gen);
    kib_after(gen, "state memory", reported, sizeof reported);
    cr_assert_str_eq(reported, memory, "generate reports %s KiB of state memory, info %s KiB:\n%s\n%s", reported, memory,
                     gen, info);
    cr_assert_null(strstr(gen, "carried state"), "generate calls its state memory the carried state: %s", gen);

    /* the carried state is what the resume file holds */
    lv_generate_options o;
    lv_generate_options_default(&o);
    o.prompt = PROMPT;
    o.frames = 8;
    o.burn_in_blocks = 0;
    o.encoder.codec = "ffv1";
    o.output = ts_tmp("msg_cut.mkv");
    char state[600];
    snprintf(state, sizeof state, "%s.longvk-state", o.output);
    remove(state);
    stopper stop = {0};
    cr_assert_eq(lv_generate(&o, stop_now, NULL, &stop, &stop.flag), LV_ERR_INTERRUPTED, "%s", lv_last_error());
    lv_weights *w;
    cr_assert_eq(lv_weights_open(state, &w), LV_OK, "%s", lv_last_error());
    const lv_weight *t = lv_weights_find(w, "carried_state");
    cr_assert_not_null(t);
    char saved[32];
    snprintf(saved, sizeof saved, "%.1f", (double)t->nbytes / 1024);
    cr_assert_str_eq(saved, carried, "the resume file carries %s KiB, info says %s KiB", saved, carried);
    lv_weights_close(w);
    cr_log_info("info: carried %s KiB, state memory %s KiB; generate: state memory %s KiB", carried, memory, reported);
    free(info);
    free(gen);
}

/* `longvk metrics` on a one-frame video printed "nan" for every pair metric. */
Test(messages, metrics_of_one_frame_has_no_nan) {
    const char *path = ts_tmp("msg_one.mkv");
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = "ffv1";
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open(path, 64, 48, 16, &opt, &enc), LV_OK, "%s", lv_last_error());
    uint8_t rgb[64 * 48 * 3];
    memset(rgb, 90, sizeof rgb);
    cr_assert_eq(lv_encoder_write_rgb(enc, rgb, 1), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "%s metrics %s --block-frames 4", LONGVK_CLI, path);
    cr_assert_eq(ts_run(cmd, &text), 0, "%s", text);
    cr_assert_null(strstr(text, "nan"), "%s", text);
    cr_assert_not_null(strstr(text, "n/a (one frame)"), "%s", text);
    free(text);
}
