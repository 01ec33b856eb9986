/* `longvk generate` with the embedded default model: frame count, determinism, an
 * interrupted run that still plays, and resume == an uninterrupted run (bit-exact, ffv1);
 * CFG's unconditional passes on a twin context (--parallel-cfg) change nothing; a burn-in
 * is the run with its first blocks cut. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "test_support.h"
#include "ts_files.h"

#define PROMPT "two red balls bouncing on a blue background"

/* Decodes every frame of `path` into one malloc'd RGB buffer. */
static uint8_t *decode_all(const char *path, int64_t *frames, int *w, int *h) {
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    *w = info->width;
    *h = info->height;
    size_t frame_bytes = (size_t)*w * *h * 3, cap = 64;
    uint8_t *all = malloc(cap * frame_bytes);
    int64_t n = 0;
    for (;;) {
        if ((size_t)n == cap) {
            cap *= 2;
            all = realloc(all, cap * frame_bytes);
        }
        lv_frame_info fi;
        int end = 0;
        cr_assert_eq(lv_decoder_next(dec, all + (size_t)n * frame_bytes, &fi, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        cr_assert_eq(fi.index, n);
        n++;
    }
    lv_decoder_close(dec);
    *frames = n;
    return all;
}

static void options(lv_generate_options *o, const char *out, int frames) {
    lv_generate_options_default(o);
    o->prompt = PROMPT;
    o->frames = frames;
    o->scale = 1;
    o->seed = 7;
    o->output = out;
    o->block_frames = 2; /* explicit, as the counts below depend on it */
    o->burn_in_blocks = 0; /* every block made is written (burn_in_drops_the_first_blocks: with) */
    o->encoder.codec = "ffv1";
}

typedef struct stop_after {
    int blocks;
    volatile sig_atomic_t flag;
    int seen;
} stop_after;

static void on_progress(void *user, const lv_generate_progress *p) {
    stop_after *s = user;
    s->seen = p->block;
    cr_assert_gt(p->state_bytes, 0);
    if (s->blocks && p->block >= s->blocks) s->flag = 1;
}

Test(generate, frame_count_determinism_and_resume, .timeout = 600) {
    const char *a = LONGVK_TEST_TMP "/gen_a.mkv", *b = LONGVK_TEST_TMP "/gen_b.mkv";
    const char *c = LONGVK_TEST_TMP "/gen_c.mkv";
    const int frames = 7; /* 3 blocks of 2, the first taking the remainder: 3 + 2 + 2 */
    lv_generate_options o;
    stop_after none = {0};

    options(&o, a, frames);
    o.parallel_cfg = 0; /* every pass on one context */
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &none, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(none.seen, 3);
    options(&o, b, frames);
    o.parallel_cfg = 1; /* the unconditional passes on the twin, which mirrors the state */
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());

    int64_t na, nb;
    int w, h;
    uint8_t *fa = decode_all(a, &na, &w, &h), *fb = decode_all(b, &nb, &w, &h);
    cr_assert_eq(na, frames);
    cr_assert_eq(nb, frames);
    cr_assert_eq(w, 32);
    cr_assert_eq(h, 32);
    cr_assert(memcmp(fa, fb, (size_t)frames * w * h * 3) == 0,
              "same seed, same device, with or without the CFG twin: identical frames");

    /* interrupted after the second block: the file plays and holds both blocks */
    stop_after two = {.blocks = 2};
    options(&o, c, frames);
    o.parallel_cfg = 1;
    lv_status s = lv_generate(&o, on_progress, NULL, &two, &two.flag);
    cr_assert_eq(s, LV_ERR_INTERRUPTED, "%s", lv_last_error());
    int64_t nc;
    uint8_t *fc = decode_all(c, &nc, &w, &h);
    cr_assert_eq(nc, 5, "an interrupted run keeps its finished blocks (3 + 2 frames), got %lld", (long long)nc);
    cr_assert(memcmp(fa, fc, (size_t)nc * w * h * 3) == 0);
    free(fc);

    /* resumed (the twin starts from the resumed state): the same frames as the
     * uninterrupted run */
    options(&o, c, frames);
    o.parallel_cfg = 1;
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    fc = decode_all(c, &nc, &w, &h);
    cr_assert_eq(nc, frames);
    cr_assert(memcmp(fa, fc, (size_t)frames * w * h * 3) == 0, "resume must equal the uninterrupted run");
    free(fa);
    free(fb);
    free(fc);
    cr_assert_eq(lv_validation_messages_total(), 0, "validation messages");
}

/* A burn-in of k blocks is the same run with its first k blocks cut: the same noise
 * streams, positions and carried state, only not written. Resumed, too. */
Test(generate, burn_in_drops_the_first_blocks, .timeout = 600) {
    const char *full = LONGVK_TEST_TMP "/gen_burn_full.mkv", *cut = LONGVK_TEST_TMP "/gen_burn_cut.mkv";
    const int burn = 2, frames = 6; /* blocks of 2: 2 dropped, 3 written */
    lv_generate_options o;
    options(&o, full, (burn * 2) + frames);
    o.burn_in_blocks = 0;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    stop_after one = {.blocks = burn + 1};
    options(&o, cut, frames);
    o.burn_in_blocks = burn;
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &one, &one.flag), LV_ERR_INTERRUPTED, "%s", lv_last_error());
    cr_assert_eq(one.seen, burn + 1, "a stop is honoured once a block is written");
    options(&o, cut, frames);
    o.burn_in_blocks = burn;
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());

    int64_t nf, nc;
    int w, h;
    uint8_t *ff = decode_all(full, &nf, &w, &h), *fc = decode_all(cut, &nc, &w, &h);
    cr_assert_eq(nf, burn * 2 + frames);
    cr_assert_eq(nc, frames);
    size_t frame_bytes = (size_t)w * h * 3;
    cr_assert(memcmp(ff + burn * 2 * frame_bytes, fc, frames * frame_bytes) == 0,
              "the burnt-in run must be the full run's last %d frames", frames);
    free(fc);

    /* A stop in the burn-in is honoured after that block (issue 44: it waited for the whole
     * burn-in): no video yet, a resume file holding the burn-in made, and --resume gives the
     * same frames. */
    remove(cut);
    stop_after first = {.blocks = 1};
    options(&o, cut, frames);
    o.burn_in_blocks = burn;
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &first, &first.flag), LV_ERR_INTERRUPTED, "%s", lv_last_error());
    cr_assert_eq(first.seen, 1, "stopped after block 1 of the burn-in, not after block %d", first.seen);
    cr_assert(strstr(lv_last_error(), "in the burn-in after block 1 of 5") != NULL, "%s", lv_last_error());
    cr_assert_eq(access(cut, F_OK), -1, "no frame is written: no video at %s", cut);
    cr_assert_eq(access(LONGVK_TEST_TMP "/gen_burn_cut.mkv.longvk-state", F_OK), 0, "the resume file holds the burn-in");
    options(&o, cut, frames);
    o.burn_in_blocks = burn;
    o.resume = true;
    stop_after none = {0};
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &none, NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(none.seen, burn + 3, "the resumed run continues at block 2");
    fc = decode_all(cut, &nc, &w, &h);
    cr_assert_eq(nc, frames);
    cr_assert(memcmp(ff + burn * 2 * frame_bytes, fc, frames * frame_bytes) == 0,
              "resumed in the burn-in: the same frames as the uninterrupted run");
    free(ff);
    free(fc);

    options(&o, cut, frames); /* a resume file holds its burn-in: another one is another run */
    o.burn_in_blocks = burn;
    stop_after again = {.blocks = 1};
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &again, &again.flag), LV_ERR_INTERRUPTED);
    options(&o, cut, frames);
    o.burn_in_blocks = burn + 1;
    o.resume = true;
    cr_assert_neq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK);
    cr_assert(strstr(lv_last_error(), "burn_in_blocks") != NULL, "%s", lv_last_error());
    cr_assert_eq(lv_validation_messages_total(), 0, "validation messages");
}

Test(generate, bad_input_is_a_clean_error) {
    lv_generate_options o;
    options(&o, LONGVK_TEST_TMP "/gen_bad.mkv", 8);
    o.encoder.codec = "no-such-codec";
    cr_assert_neq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK);
    cr_assert(strstr(lv_last_error(), "no-such-codec") != NULL, "%s", lv_last_error());
    options(&o, LONGVK_TEST_TMP "/gen_bad.mkv", 8);
    o.model_path = "/nonexistent/model.safetensors";
    cr_assert_neq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK);
    options(&o, LONGVK_TEST_TMP "/gen_bad.mkv", 8);
    o.resume = true; /* nothing to resume */
    remove(LONGVK_TEST_TMP "/gen_bad.mkv.longvk-state");
    cr_assert_neq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK);
}

static void collect_warning(void *user, const char *message) { snprintf(user, 512, "%s", message); }

Test(generate, unknown_words_are_named) {
    lv_generate_options o;
    options(&o, LONGVK_TEST_TMP "/gen_words.mkv", 4);
    o.prompt = "two red zebras bouncing ünïcödé 42 🎈";
    char warning[512] = "";
    cr_assert_eq(lv_generate(&o, NULL, collect_warning, warning, NULL), LV_OK, "%s", lv_last_error());
    cr_assert(strstr(warning, "zebras") != NULL, "warning: '%s'", warning);
    /* in the prompt's own characters, digits and emoji included (issue 44: "n c d") */
    cr_assert(strstr(warning, "prompt: ignored (not in the vocabulary): zebras, ünïcödé, 42, 🎈") != NULL,
              "warning: '%s'", warning);
}

/* Runs `longvk ARGS`, which must succeed, and returns its standard output in text. */
static void cli_output(const char *args, char *text, size_t size) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s > %s/cli_output.txt", LONGVK_CLI, args, LONGVK_TEST_TMP);
    int rc = system(cmd);
    cr_assert_eq(WEXITSTATUS(rc), 0, "%s", cmd);
    FILE *h = fopen(LONGVK_TEST_TMP "/cli_output.txt", "r");
    cr_assert_not_null(h);
    size_t n = fread(text, 1, size - 1, h);
    fclose(h);
    text[n] = '\0';
}

Test(generate, cli_help_and_errors) {
    char text[16384];
    cli_output("generate --help", text, sizeof text);
    /* the defaults --help states are the embedded model's */
    lv_sana_file *f;
    cr_assert_eq(lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default model", &f), LV_OK);
    lv_model_card card;
    cr_assert_eq(lv_model_card_parse(lv_weights_metadata(lv_sana_file_weights(f), "longvk"), "default model", &card),
                 LV_OK, "%s", lv_last_error());
    char want[128];
    snprintf(want, sizeof want, "frames per block (default: the model's, %d)", card.block_frames);
    cr_assert(strstr(text, want) != NULL, "--help lacks '%s'", want);
    snprintf(want, sizeof want, "(%d %s steps, CFG %g)", card.first_block.steps,
             card.first_block.sampler == LV_CHUNK_EULER ? "Euler" : "re-noise", card.first_block.cfg_scale);
    cr_assert(strstr(text, want) != NULL, "--help lacks '%s'", want);
    snprintf(want, sizeof want, "(default: the model's, %d = ", card.burn_in_blocks);
    cr_assert(strstr(text, want) != NULL, "--help lacks '%s'", want);
    /* `longvk info` without a model describes the embedded one, vocabulary included */
    cli_output("info", text, sizeof text);
    cr_assert(strstr(text, "vocabulary:    38 words") != NULL, "info lacks the vocabulary:\n%s", text);
    cr_assert(strstr(text, " bouncing ") != NULL && strstr(text, " triangles ") != NULL);
    cr_assert(strstr(text, "first block: ") != NULL);
    /* the later blocks' recipe as the card gives it: warm start, CFG at the last step */
    snprintf(want, sizeof want, "later blocks: %d re-noise steps at t = %g", card.later_blocks.steps,
             (double)card.later_blocks.timesteps[0]);
    cr_assert(strstr(text, want) != NULL, "info lacks '%s':\n%s", want, text);
    snprintf(want, sizeof want, "the first %d blocks are made and dropped", card.burn_in_blocks);
    cr_assert((strstr(text, want) != NULL) == (card.burn_in_blocks > 0), "info on the burn-in:\n%s", text);
    if (card.later_blocks.warm_start)
        cr_assert(strstr(text, "starting from the previous block's last frame") != NULL, "%s", text);
    lv_model_card_free(&card);
    lv_sana_file_close(f);
    int rc;
    rc = system(LONGVK_CLI " generate -p x 2> /dev/null"); /* no -o */
    cr_assert_neq(WEXITSTATUS(rc), 0);
    rc = system(LONGVK_CLI " generate -p x -o " LONGVK_TEST_TMP "/x.mp4 --seconds -3 2> /dev/null");
    cr_assert_neq(WEXITSTATUS(rc), 0);
    rc = system(LONGVK_CLI " generate -p x -o " LONGVK_TEST_TMP "/x.mp4 --burn-in-blocks -1 2> /dev/null");
    cr_assert_neq(WEXITSTATUS(rc), 0);
}

/* A latent-space model (the tiny random SANA-Video) with the tiny Wan2.1 VAE: latents are
 * decoded block by block and streamed to the encoder, 1 + 4 (L - 1) frames. */
Test(generate, latent_model_with_vae_streams_frames, .timeout = 600) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors", &v), LV_OK);
    lv_weight text[2] = {*lv_weights_find(v, "y"), *lv_weights_find(v, "mask")};
    text[0].name = "y";
    text[1].name = "mask";
    cr_assert_eq(lv_safetensors_write(LONGVK_TEST_TMP "/gen_text.safetensors", text, 2, NULL, 0), LV_OK);
    lv_weights_close(v);
    lv_generate_options o;
    options(&o, LONGVK_TEST_TMP "/gen_latent.mkv", 9); /* 9 pixel frames = 3 latent frames */
    o.model_path = LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors";
    o.text_embeds_path = LONGVK_TEST_TMP "/gen_text.safetensors";
    o.vae_path = LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors";
    o.width = 64;
    o.height = 64; /* 8 x 8 latents */
    o.block_frames = 2;
    o.steps = 2;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    int64_t n;
    int w, h;
    free(decode_all(LONGVK_TEST_TMP "/gen_latent.mkv", &n, &w, &h));
    cr_assert_eq(n, 9);
    cr_assert_eq(w, 64);
    cr_assert_eq(h, 64);
    /* without a VAE: the latents as .npy */
    options(&o, LONGVK_TEST_TMP "/gen_latent.npy", 9);
    o.model_path = LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors";
    o.text_embeds_path = LONGVK_TEST_TMP "/gen_text.safetensors";
    o.width = 64;
    o.height = 64;
    o.block_frames = 2;
    o.steps = 2;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    lv_npy lat;
    cr_assert_eq(lv_npy_read(LONGVK_TEST_TMP "/gen_latent.npy", &lat), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lat.ndim, 4);
    cr_assert_eq(lat.shape[0], 4);
    cr_assert_eq(lat.shape[1], 3);
    cr_assert_eq(lat.shape[2], 8);
    lv_npy_free(&lat);
}

/* Issue 44: a video shorter than one block with a burn-in overflowed the chunk buffer (sized
 * for the written chunks while burn-in chunks are whole blocks): 1, 3 and 5 frames, and
 * 0.1 s (2 frames), with blocks of 4 frames and a burn-in, have exactly that many frames. */
Test(generate, shorter_than_a_block_with_burn_in, .timeout = 600) {
    const char *out = LONGVK_TEST_TMP "/gen_short.mkv";
    const int lengths[] = {1, 3, 5, 0};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        lv_generate_options o;
        options(&o, out, lengths[i]);
        o.block_frames = 4;
        o.burn_in_blocks = 2;
        if (!lengths[i]) o.seconds = 0.1; /* 1.6 frames at 16 fps: 2 */
        cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%d frames: %s", lengths[i], lv_last_error());
        int64_t n;
        int w, h;
        free(decode_all(out, &n, &w, &h));
        cr_assert_eq(n, lengths[i] ? lengths[i] : 2, "asked %d frames, got %lld", lengths[i], (long long)n);
        cr_assert_eq(access(LONGVK_TEST_TMP "/gen_short.mkv.longvk-state", F_OK), -1, "finished: no resume file");
    }
}

/* Issue 44: every option is checked before anything is opened, non-finite values too; a bad
 * one is LV_ERR_INVALID with a message naming it, and nothing is written. */
Test(generate, options_are_checked) {
    const char *out = LONGVK_TEST_TMP "/gen_opts.mkv";
    remove(out);
    cr_assert_eq(lv_generate(NULL, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "NULL") != NULL, "%s", lv_last_error());
    struct {
        const char *field;
        lv_generate_options o;
    } cases[32];
    int n = 0;
#define CASE(what, stmt)                                                                                            \
    do {                                                                                                            \
        options(&cases[n].o, out, 8);                                                                               \
        lv_generate_options *p = &cases[n].o;                                                                       \
        stmt;                                                                                                       \
        cases[n++].field = what;                                                                                    \
    } while (0)
    CASE("scale", p->scale = 0); /* divided by zero before issue 44 */
    CASE("scale", p->scale = 65);
    CASE("cfg_scale", p->cfg_scale = NAN);
    CASE("cfg_scale", p->cfg_scale = INFINITY);
    CASE("cfg_scale", p->cfg_scale = 1e30);
    CASE("shift", p->shift = NAN);
    CASE("fps", p->fps = NAN);
    CASE("fps", p->fps = INFINITY);
    CASE("fps", p->fps = 5000);
    CASE("seconds", (p->frames = 0, p->seconds = NAN));
    CASE("seconds", (p->frames = 0, p->seconds = -INFINITY));
    CASE("seconds", (p->frames = 0, p->seconds = 0));
    CASE("seconds", (p->frames = 0, p->seconds = 1e9)); /* more frames than any run makes */
    CASE("frames", p->frames = 20000000);
    CASE("-W/-H", p->width = -32);
    CASE("-W/-H", p->height = 100000);
    CASE("sampler", p->sampler = (lv_gen_sampler)7);
    CASE("steps", p->steps = 5000);
    CASE("block", p->block_frames = 5000);
    CASE("burn-in", p->burn_in_blocks = -3);
    CASE("cached-blocks", p->cached_blocks = 100000);
    CASE("cpu_threads", p->cpu_threads = -9);
    CASE("parallel_cfg", p->parallel_cfg = 2);
    CASE("device", p->device_index = -5);
    CASE("output", p->output = NULL);
    CASE("output", p->output = "");
    CASE("state_path", p->state_path = "");
#undef CASE
    for (int i = 0; i < n; i++) {
        lv_clear_error();
        cr_assert_eq(lv_generate(&cases[i].o, NULL, NULL, NULL, NULL), LV_ERR_INVALID, "case %d (%s): %s", i,
                     cases[i].field, lv_last_error());
        cr_assert(strstr(lv_last_error(), cases[i].field) != NULL, "case %d: the message must name %s: %s", i,
                  cases[i].field, lv_last_error());
        cr_assert_eq(access(out, F_OK), -1, "case %d (%s): a file was written", i, cases[i].field);
    }
}

/* A copy of the default model, with `nan_tensor`'s value `nan_index` set to NaN (NULL:
 * unchanged), written as a safetensors file with the same metadata. */
static void write_model(const char *path, const char *nan_tensor, int64_t nan_index) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open_memory(lv_default_model_data(), lv_default_model_size(), "default model", &w), LV_OK);
    int n = lv_weights_count(w), m = lv_weights_metadata_count(w);
    lv_weight *t = malloc((size_t)n * sizeof *t);
    const char **kv = malloc((size_t)(2 * m + 1) * sizeof *kv);
    float *copy = NULL;
    for (int i = 0; i < n; i++) {
        t[i] = *lv_weights_at(w, i);
        if (nan_tensor && strcmp(t[i].name, nan_tensor) == 0) {
            cr_assert_eq(t[i].dtype, LV_F32);
            cr_assert_lt(nan_index, (int64_t)lv_weight_numel(&t[i]));
            copy = malloc(t[i].nbytes);
            memcpy(copy, t[i].data, t[i].nbytes);
            copy[nan_index] = NAN;
            t[i].data = copy;
        }
    }
    cr_assert(!nan_tensor || copy, "no tensor %s", nan_tensor);
    for (int i = 0; i < m; i++) {
        kv[2 * i] = lv_weights_metadata_key(w, i);
        kv[2 * i + 1] = lv_weights_metadata_value(w, i);
    }
    cr_assert_eq(lv_safetensors_write(path, t, n, kv, m), LV_OK, "%s", lv_last_error());
    free(copy);
    free(kv);
    free(t);
    lv_weights_close(w);
}

/* Issue 44: a NaN weight gave black frames with no word. Now each block is checked on the
 * device and the run stops naming the block, the step and the stage; what was written
 * stays: the file plays, the resume file holds the last good block and completes the video
 * once the model is mended. */
Test(generate, non_finite_values_stop_the_run, .timeout = 600) {
    const char *model = LONGVK_TEST_TMP "/gen_nan_model.safetensors", *out = LONGVK_TEST_TMP "/gen_nan.mkv";
    const char *ref = LONGVK_TEST_TMP "/gen_nan_ref.mkv", *state = LONGVK_TEST_TMP "/gen_nan.mkv.longvk-state";
    lv_generate_options o;
    /* a NaN in the final layer: the first prediction of the first block */
    write_model(model, "final_layer.linear.weight", 5);
    remove(out);
    options(&o, out, 6);
    o.model_path = model;
    o.burn_in_blocks = 1;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "block 1 of 4 (burn-in), step 1 of ") != NULL, "%s", lv_last_error());
    cr_assert(strstr(lv_last_error(), "the DiT's output has non-finite values") != NULL, "%s", lv_last_error());
    cr_assert_eq(access(out, F_OK), -1, "nothing was written: no file (it was an unplayable one)");

    /* the same model without the NaN, interrupted after its first written block ... */
    write_model(model, NULL, 0);
    options(&o, ref, 6);
    o.model_path = model;
    o.burn_in_blocks = 1;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    stop_after two = {.blocks = 2};
    options(&o, out, 6);
    o.model_path = model;
    o.burn_in_blocks = 1;
    cr_assert_eq(lv_generate(&o, on_progress, NULL, &two, &two.flag), LV_ERR_INTERRUPTED, "%s", lv_last_error());
    /* ... then resumed with the NaN back in (same file, same size): stops at block 3 */
    write_model(model, "final_layer.linear.weight", 5);
    options(&o, out, 6);
    o.model_path = model;
    o.burn_in_blocks = 1;
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "block 3 of 4, step 1 of ") != NULL, "%s", lv_last_error());
    cr_assert(strstr(lv_last_error(), "non-finite") != NULL, "%s", lv_last_error());
    int64_t nr, nc;
    int w, h;
    uint8_t *fr = decode_all(ref, &nr, &w, &h), *fc = decode_all(out, &nc, &w, &h);
    cr_assert_eq(nc, 2, "the written block stays and plays: %lld frames", (long long)nc);
    cr_assert(memcmp(fr, fc, (size_t)nc * w * h * 3) == 0);
    free(fc);
    cr_assert_eq(access(state, F_OK), 0);
    /* the resume file is still good: mended, the run completes with the reference's frames */
    write_model(model, NULL, 0);
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    fc = decode_all(out, &nc, &w, &h);
    cr_assert_eq(nc, 6);
    cr_assert(memcmp(fr, fc, (size_t)nc * w * h * 3) == 0, "resumed after the error: the uninterrupted frames");
    free(fc);
    free(fr);

    /* A NaN only the negative prompt meets (its word's row of the text table): the
     * unconditional pass of the first CFG step is named, on the twin or not */
    lv_model_card card;
    cr_assert_eq(lv_model_card_of(NULL, &card), LV_OK);
    int purple = -1;
    for (int i = 0; i < card.vocab_size; i++)
        if (!strcmp(card.vocab[i], "purple")) purple = i;
    cr_assert_geq(purple, 0);
    lv_model_card_free(&card);
    write_model(model, "text_embedding.weight", (int64_t)purple * 32 + 3);
    for (int twin = 0; twin <= 1; twin++) {
        options(&o, out, 6);
        o.model_path = model;
        o.burn_in_blocks = 1;
        o.negative_prompt = "purple";
        o.parallel_cfg = twin;
        cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
        cr_assert(strstr(lv_last_error(), "block 1 of 4 (burn-in), step 1 of 10 (the unconditional pass): ") != NULL,
                  "twin %d: %s", twin, lv_last_error());
        cr_assert(strstr(lv_last_error(), "the DiT's output has non-finite values") != NULL, "%s", lv_last_error());
    }
    remove(model);
}

/* `longvk bench generate` runs the real loop (lv_generate on files it writes): 3 blocks of 1
 * latent frame are 1 + 4 x 2 = 9 pixel frames in the video, and it cleans up after itself.
 * --no-encode: the frames go to a sink, FFmpeg is never called and no video is written. */
static char *bench_generate(const char *extra) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "TMPDIR=%s %s bench generate --depth 1 --frames 1 --latent 4x4 --vae-dim 8 "
             "--text-tokens 8 %s --json", LONGVK_TEST_TMP, LONGVK_CLI, extra);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s: %s", cmd, out);
    return out;
}

Test(generate, bench_generate_runs_the_block_loop, .timeout = 600) {
    char *out = bench_generate("--codec ffv1");
    cr_assert(strstr(out, "\"blocks\": 3,") && strstr(out, "\"pixel_frames\": 9,") &&
              strstr(out, "\"pixels\": [32, 32]") && strstr(out, "\"frames_per_s\": "), "%s", out);
    free(out);
    out = bench_generate("--no-encode");
    cr_assert(strstr(out, "\"pixel_frames\": 9,") && strstr(out, "\"codec\": \"none\"") &&
              strstr(out, "\"video_bytes\": 0"), "%s", out);
    free(out);
    int rc = ts_run("ls -d " LONGVK_TEST_TMP "/longvk-bench-generate-* 2>/dev/null | wc -l", &out);
    cr_assert(rc == 0 && atoi(out) == 0, "temporary folders left: %s", out);
    free(out);
}

/* Frames to the caller (lv_generate_options.frame_sink): with no output file, every frame in
 * order and nothing on disk; converted as the encoder does (lv_encoder_write_float: clamp to
 * [-1, 1], (int)(127.5 x + 128)), they are the frames of the ffv1 video a file run writes. */
typedef struct sink_frames {
    uint8_t *rgb; /* [frames][h][w][3] */
    int64_t calls, next;
    int w, h;
} sink_frames;

static lv_status to_bytes(void *user, int64_t index, const float *x, int height, int width) {
    sink_frames *s = user;
    cr_assert_eq(index, s->next, "frame %lld after %lld", (long long)index, (long long)s->next);
    cr_assert(height == s->h && width == s->w);
    const size_t P = (size_t)height * width;
    for (int c = 0; c < 3; c++)
        for (size_t p = 0; p < P; p++) {
            float v = x[c * P + p];
            v = !(v > -1.0f) ? -1.0f : v > 1.0f ? 1.0f : v;
            s->rgb[((size_t)index * P + p) * 3 + c] = (uint8_t)(int)(127.5 * (double)v + 128.0);
        }
    s->next++;
    s->calls++;
    return LV_OK;
}

static lv_status refuse_third(void *user, int64_t index, const float *x, int height, int width) {
    (void)user, (void)x, (void)height, (void)width;
    return index == 2 ? lv_error(LV_ERR_IO, "the caller's sink is full") : LV_OK;
}

Test(generate, frames_to_a_sink, .timeout = 600) {
    const char *a = LONGVK_TEST_TMP "/gen_sink_file.mkv";
    const int frames = 3; /* a block of 1 (the remainder), then one of 2: both sink paths */
    lv_generate_options o;
    options(&o, a, frames);
    o.scale = 2; /* the sink gets what the encoder gets: upscaled */
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    int64_t n;
    int w, h;
    uint8_t *want = decode_all(a, &n, &w, &h);
    cr_assert_eq(n, frames);
    cr_assert(w == 64 && h == 64);

    sink_frames s = {.rgb = calloc((size_t)frames * w * h * 3, 1), .w = w, .h = h};
    options(&o, NULL, frames);
    o.scale = 2;
    o.frame_sink = to_bytes;
    o.frame_user = &s;
    /* run in an empty folder of its own (other tests share the tmp folder): it stays empty */
    char cwd[4096], *listing;
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    const char *empty = LONGVK_TEST_TMP "/gen_sink_cwd";
    cr_assert_eq(ts_run("rm -rf " LONGVK_TEST_TMP "/gen_sink_cwd && mkdir " LONGVK_TEST_TMP "/gen_sink_cwd", &listing),
                 0);
    free(listing);
    cr_assert_eq(chdir(empty), 0);
    lv_status st = lv_generate(&o, NULL, NULL, NULL, NULL);
    cr_assert_eq(chdir(cwd), 0);
    cr_assert_eq(st, LV_OK, "%s", lv_last_error());
    cr_assert_eq(ts_run("ls -A " LONGVK_TEST_TMP "/gen_sink_cwd", &listing), 0);
    cr_assert_str_eq(listing, "", "a run without an output file wrote: %s", listing);
    free(listing);
    cr_assert_eq(s.calls, frames);
    cr_assert(memcmp(s.rgb, want, (size_t)frames * w * h * 3) == 0, "the sink's frames are not the video's");

    /* a sink that fails stops the run with its message; no sink and no file is refused; a
     * latent model without a VAE has no frames to give */
    options(&o, NULL, frames);
    o.frame_sink = refuse_third;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "the caller's sink is full"), "%s", lv_last_error());
    options(&o, NULL, frames);
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "no output file"), "%s", lv_last_error());
    options(&o, NULL, frames);
    o.frame_sink = to_bytes;
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "--resume needs the output file"), "%s", lv_last_error());
    free(s.rgb);
    free(want);
}
