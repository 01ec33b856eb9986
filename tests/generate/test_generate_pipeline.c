/* From a prompt to a video with a whole diffusers pipeline folder, as a user of the released
 * SANA-Video weights runs it:
 *
 *   longvk generate --model DIR -p "..." -o out.mkv
 *
 * DIR is built here from the tiny test models: the tiny Gemma-2 (text_encoder/), its
 * SentencePiece tokenizer (tokenizer/), the tiny SANA-Video DiT with its caption projection
 * widened to Gemma's hidden size 96 (transformer/) and the tiny Wan2.1 VAE (vae/). Each model
 * is checked against its original elsewhere (test_gemma2, test_sana_dit, test_vae); this
 * test checks that generate feeds the DiT exactly what `encode-text` computes, that the same
 * rows given as --text-embeds make the same frames, the original release layout, and the
 * errors of a pipeline that does not fit together. With MPI: the pipeline over 2 ranks
 * (rank 0 encodes the text, each rank decodes its band of latent rows) makes the frames of
 * --sp-emulate 2, and over 4 ranks in two CFG groups of 2 bands too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_mpi.h"

#define G2 LONGVK_ASSETS_DIR "/testdata/gemma2"
#define SANA LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define PROMPT "a red fox running through snow"

static void copy(const char *from, const char *to) {
    size_t len;
    uint8_t *b = ts_slurp(from, &len);
    ts_spit(to, b, len);
    free(b);
}

/* The tiny DiT with caption_channels `cap`: y_embedder.y_proj.fc1.weight [64, cap] drawn
 * afresh, every other tensor as in tiny-hd32. */
static void write_dit(const char *path, int cap) {
    lv_weights *w;
    cr_assert_eq(lv_weights_open(SANA, &w), LV_OK, "%s", lv_last_error());
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

/* DIR with model_index.json, text_encoder/, tokenizer/, transformer/ and vae/. */
static const char *make_pipeline(const char *name) {
    static char root[1024];
    snprintf(root, sizeof root, "%s", ts_tmp(name));
    char p[1200];
    mkdir(root, 0755);
    const char *parts[] = {"text_encoder", "tokenizer", "transformer", "vae"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", root, parts[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/model_index.json", root);
    ts_spit(p, "{\"_class_name\": \"SanaVideoPipeline\"}", 36);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", root);
    copy(G2 "/tiny.weights.safetensors", p);
    snprintf(p, sizeof p, "%s/tokenizer/tokenizer.model", root);
    copy(G2 "/tokenizer.model", p);
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", root);
    write_dit(p, 96);
    snprintf(p, sizeof p, "%s/vae/diffusion_pytorch_model.safetensors", root);
    copy(VAE, p);
    return root;
}

static char *run(const char *cmd, int want_status) {
    char *out;
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, want_status, "exit %d of %s:\n%s", rc, cmd, out);
    return out;
}

/* Frame hashes of a video (ffmpeg's framemd5, an independent decoder), header dropped. */
static char *framemd5(const char *video) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f framemd5 - | grep -v '^#'", video);
    return run(cmd, 0);
}

static float *read_f32(const lv_weights *w, const char *name, int64_t want) {
    const lv_weight *t = lv_weights_find(w, name);
    cr_assert(t && t->dtype == LV_F32 && (int64_t)lv_weight_numel(t) == want, "%s: missing or not %lld floats", name,
              (long long)want);
    return (float *)t->data;
}

#define GEN_ARGS "--frames 9 -W 48 -H 32 --block-frames 1 --codec ffv1 -q"

Test(generate_pipeline, prompt_to_video_feeds_encode_text_rows, .timeout = 600) {
    const char *dir = make_pipeline("pipe");
    char cmd[4096], video[1024], embeds[1024], y_npy[1024], mask_npy[1024];
    snprintf(video, sizeof video, "%s", ts_tmp("pipe-out.mkv"));
    snprintf(embeds, sizeof embeds, "%s", ts_tmp("pipe-embeds.safetensors"));
    snprintf(y_npy, sizeof y_npy, "%s", ts_tmp("pipe-y.npy"));
    snprintf(mask_npy, sizeof mask_npy, "%s", ts_tmp("pipe-y.mask.npy"));

    /* the pipeline folder alone: the encoder, tokenizer and VAE come from it */
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' " GEN_ARGS " -o %s --save-text-embeds %s 2>&1",
             LONGVK_CLI, dir, video, embeds);
    char *out = run(cmd, 0);
    free(out);
    /* without -q the two memories are printed, and the encoder's is released first */
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --frames 1 -W 48 -H 32 --codec ffv1 -o %s 2>&1",
             LONGVK_CLI, dir, ts_tmp("pipe-one.mkv"));
    out = run(cmd, 0);
    cr_assert(strstr(out, "text encoder: encoding"), "%s", out);
    cr_assert(strstr(out, "(freed before the DiT is uploaded)"), "%s", out);
    cr_assert(strstr(out, "device memory: text encoder "), "%s", out);
    free(out);

    char *frames = framemd5(video);
    int lines = 0;
    for (const char *c = frames; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 9, "9 frames expected:\n%s", frames);

    /* encode-text on the same prompt: the rows and mask fed to the DiT, bit for bit */
    snprintf(cmd, sizeof cmd, "%s encode-text --text-encoder %s/text_encoder -p '" PROMPT "' -o %s 2>&1", LONGVK_CLI,
             dir, y_npy);
    free(run(cmd, 0));
    lv_weights *fed;
    lv_npy ey, em;
    cr_assert_eq(lv_weights_open(embeds, &fed), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_npy_read(y_npy, &ey), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_npy_read(mask_npy, &em), LV_OK, "%s", lv_last_error());
    const float *fy = read_f32(fed, "y", 300 * 96), *fm = read_f32(fed, "mask", 300);
    cr_assert(ey.ndim == 2 && ey.shape[0] == 300 && ey.shape[1] == 96);
    cr_assert(em.ndim == 1 && em.shape[0] == 300);
    cr_assert_eq(memcmp(fy, ey.data, 300 * 96 * sizeof(float)), 0, "generate fed other rows than encode-text's");
    cr_assert_eq(memcmp(fm, em.data, 300 * sizeof(float)), 0, "generate fed another mask than encode-text's");
    int valid = 0;
    for (int i = 0; i < 300; i++) valid += fm[i] == 1.0f;
    cr_assert(valid > 1 && valid < 300, "%d valid rows", valid);
    lv_npy_free(&ey);
    lv_npy_free(&em);
    lv_weights_close(fed);

    /* the same rows given as --text-embeds (no encoder at all) make the same frames */
    snprintf(cmd, sizeof cmd, "%s generate --model %s/transformer --vae %s/vae/diffusion_pytorch_model.safetensors "
             "--text-embeds %s " GEN_ARGS " -o %s 2>&1",
             LONGVK_CLI, dir, dir, embeds, ts_tmp("pipe-embeds.mkv"));
    free(run(cmd, 0));
    char *again = framemd5(ts_tmp("pipe-embeds.mkv"));
    cr_assert_str_eq(again, frames, "the frames differ with the saved rows");
    free(again);

    /* the original release layout: DiT, --text-encoder (tokenizer found in ../tokenizer/),
     * --vae: the same frames */
    snprintf(cmd, sizeof cmd, "%s generate --model %s/transformer/diffusion_pytorch_model.safetensors "
             "--text-encoder %s/text_encoder --vae %s/vae/diffusion_pytorch_model.safetensors -p '" PROMPT "' "
             GEN_ARGS " -o %s 2>&1",
             LONGVK_CLI, dir, dir, dir, ts_tmp("pipe-release.mkv"));
    free(run(cmd, 0));
    again = framemd5(ts_tmp("pipe-release.mkv"));
    cr_assert_str_eq(again, frames, "the release layout made other frames");
    free(again);
    free(frames);
}

Test(generate_pipeline, cfg_long_prompt_and_options, .timeout = 600) {
    const char *dir = make_pipeline("pipe-cfg");
    char cmd[4096];
    /* CFG: the negative prompt is SANA-Video's default one, encoded without the instruction */
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --cfg-scale 3 --frames 5 -W 48 -H 32 "
             "--codec ffv1 -q -o %s --save-text-embeds %s 2>&1",
             LONGVK_CLI, dir, ts_tmp("cfg.mkv"), ts_tmp("cfg.safetensors"));
    free(run(cmd, 0));
    lv_weights *w;
    cr_assert_eq(lv_weights_open(ts_tmp("cfg.safetensors"), &w), LV_OK, "%s", lv_last_error());
    const float *nm = read_f32(w, "negative_mask", 300);
    read_f32(w, "negative_y", 300 * 96);
    /* the negative prompt, tokenized here: <bos> + its tokens, no instruction, no padding rows */
    lv_tokenizer *tok;
    cr_assert_eq(lv_tokenizer_open(G2 "/tokenizer.model", &tok), LV_OK, "%s", lv_last_error());
    int n = 0, needed = 0;
    int32_t ids[300];
    cr_assert_eq(lv_tokenizer_encode(tok, lv_sana_video_negative_prompt, strlen(lv_sana_video_negative_prompt),
                                     LV_TOKENIZE_GEMMA, ids, 300, &n, &needed), LV_OK);
    int valid = 0;
    for (int i = 0; i < 300; i++) valid += nm[i] == 1.0f;
    cr_assert_eq(valid, n, "negative mask: %d rows, the negative prompt has %d tokens", valid, n);
    lv_tokenizer_close(tok);
    lv_weights_close(w);

    /* a 100 KB prompt: truncated as SANA-Video does, said in a warning, and the video made */
    size_t big = 100 * 1024;
    char *prompt = malloc(big + 1);
    for (size_t i = 0; i < big; i++) prompt[i] = "snow fox "[i % 9];
    prompt[big] = 0;
    char *long_cmd = malloc(big + 4096);
    snprintf(long_cmd, big + 4096, "%s generate --model %s -p '%s' --frames 1 -W 48 -H 32 --codec ffv1 -o %s 2>&1",
             LONGVK_CLI, dir, prompt, ts_tmp("long.mkv"));
    char *out = run(long_cmd, 0);
    /* in the prompt's own tokens: its first 299 are read (not the instruction's count) */
    cr_assert(strstr(out, "warning: prompt:") && strstr(out, "tokens, truncated: the model reads its first 299, the last"),
              "%s", out);
    free(out);
    free(long_cmd);
    free(prompt);
}

Test(generate_pipeline, pieces_that_do_not_fit_are_named, .timeout = 300) {
    const char *dir = make_pipeline("pipe-bad");
    char cmd[4096], p[1200];
    const char *o = ts_tmp("bad.mkv");

    /* a DiT whose captions are 32 wide with the 96-wide encoder */
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", dir);
    write_dit(p, 32);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p x --frames 1 -W 48 -H 32 -o %s 2>&1", LONGVK_CLI, dir, o);
    char *out = run(cmd, 1);
    cr_assert(strstr(out, "hidden size 96") && strstr(out, "captions of 32"), "%s", out);
    free(out);
    write_dit(p, 96);

    /* the tokenizer is not a SentencePiece model */
    snprintf(p, sizeof p, "%s/tokenizer/tokenizer.model", dir);
    ts_spit(p, "not a tokenizer", 15);
    out = run(cmd, 1);
    cr_assert(strstr(out, "tokenizer.model"), "%s", out);
    free(out);
    /* tokenizer/ without its file: the file named */
    remove(p);
    out = run(cmd, 1);
    cr_assert(strstr(out, "tokenizer/tokenizer.model") && strstr(out, "No such file"), "%s", out);
    free(out);
    /* no tokenizer/ at all: where it was looked for, and the option */
    snprintf(p, sizeof p, "%s/tokenizer", dir);
    rmdir(p);
    out = run(cmd, 1);
    cr_assert(strstr(out, "no tokenizer.model in or beside") && strstr(out, "--tokenizer"), "%s", out);
    free(out);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/tokenizer/tokenizer.model", dir);
    copy(G2 "/tokenizer.model", p);

    /* the encoder's config with a wrong shape: the tensor and both shapes named */
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(G2 "/tiny.weights.safetensors", &w), LV_OK, "%s", lv_last_error());
    int n = lv_weights_count(w);
    lv_weight *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) t[i] = *lv_weights_at(w, i);
    const char *cfg = lv_weights_metadata(w, "config");
    char *bad = strdup(cfg);
    char *at = strstr(bad, "\"intermediate_size\": 256");
    cr_assert(at, "%s", cfg);
    memcpy(at, "\"intermediate_size\": 255", 24);
    const char *meta[] = {"config", bad};
    cr_assert_eq(lv_safetensors_write(p, t, n, meta, 1), LV_OK, "%s", lv_last_error());
    out = run(cmd, 1);
    cr_assert(strstr(out, "mlp") && strstr(out, "255"), "%s", out);
    free(out);
    free(bad);
    free(t);
    lv_weights_close(w);
    copy(G2 "/tiny.weights.safetensors", p);

    /* a pipeline without transformer/, and a latent model with neither encoder nor embeddings */
    snprintf(p, sizeof p, "%s/model_index.json", ts_tmp("pipe-empty"));
    mkdir(ts_tmp("pipe-empty"), 0755);
    ts_spit(p, "{}", 2);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p x --frames 1 -o %s 2>&1", LONGVK_CLI, ts_tmp("pipe-empty"), o);
    out = run(cmd, 1);
    cr_assert(strstr(out, "without transformer/"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s generate --model %s/transformer -p x --frames 1 -W 48 -H 32 -o %s 2>&1", LONGVK_CLI,
             dir, o);
    out = run(cmd, 2); /* a usage error (issue 53): the options do not fit the model */
    cr_assert(strstr(out, "--text-encoder") && strstr(out, "--text-embeds"), "%s", out);
    free(out);
    /* a pixel model with a text encoder */
    snprintf(cmd, sizeof cmd, "%s generate --text-encoder %s/text_encoder -p x --frames 1 -o %s 2>&1", LONGVK_CLI,
             dir, o);
    out = run(cmd, 2);
    cr_assert(strstr(out, "own vocabulary"), "%s", out);
    free(out);
    cr_assert_neq(access(o, F_OK), 0, "a failed run left %s", o);
}

/* Issue 53, item 10: a single clip (--sampler euler | dpm++2m) from a prompt through the text
 * encoder failed with "lv_weights_open: no path" (the clip's branch returned before the
 * pipeline's encoder and VAE were resolved). Now it runs, and it feeds the DiT the rows the
 * encoder makes: the same clip from those rows saved (--save-text-embeds) and given back
 * (--text-embeds, the VAE named) has the same frames. */
Test(generate_pipeline, single_clip_from_a_prompt, .timeout = 600) {
    const char *dir = make_pipeline("pipe-clip");
    const char *samplers[] = {"euler", "dpm++2m"};
    for (int i = 0; i < 2; i++) {
        char cmd[4096], video[1024], again[1024], embeds[1024];
        snprintf(video, sizeof video, "%s", ts_tmp(i ? "clip-dpm.mkv" : "clip-euler.mkv"));
        snprintf(again, sizeof again, "%s", ts_tmp(i ? "clip-dpm-embeds.mkv" : "clip-euler-embeds.mkv"));
        snprintf(embeds, sizeof embeds, "%s", ts_tmp("clip-embeds.safetensors"));
        unlink(video);
        unlink(again);
        snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --sampler %s --steps 2 --frames 5 -W 48 "
                 "-H 32 --codec ffv1 -q -o %s --save-text-embeds %s 2>&1", LONGVK_CLI, dir, samplers[i], video, embeds);
        free(run(cmd, 0));
        char *frames = framemd5(video);
        int lines = 0;
        for (const char *c = frames; *c; c++) lines += *c == '\n';
        cr_assert_eq(lines, 5, "%s: 5 frames expected:\n%s", samplers[i], frames);
        snprintf(cmd, sizeof cmd, "%s generate --model %s/transformer --vae %s/vae/diffusion_pytorch_model.safetensors "
                 "--text-embeds %s --sampler %s --steps 2 --frames 5 -W 48 -H 32 --codec ffv1 -q -o %s 2>&1",
                 LONGVK_CLI, dir, dir, embeds, samplers[i], again);
        free(run(cmd, 0));
        char *same = framemd5(again);
        cr_assert_str_eq(same, frames, "%s: the encoder's clip and the saved rows' clip differ", samplers[i]);
        free(same);
        free(frames);
    }
}

/* Issue 53, item 12: a stop while Gemma-2 encodes the prompt (LONGVK_TEST_STOP=0:0: a
 * SIGUSR1 as the encoder starts, as a Ctrl-C then) ends the run within a layer, not after the
 * whole encoder; it says so, and that nothing is written; a latent model's run never says
 * it can resume (it cannot yet). Before, the encoder ran to its end and the run said
 * "interrupted before the first block" and "resume with the same command and --resume". */
Test(generate_pipeline, a_stop_ends_the_text_encoder_within_a_layer, .timeout = 300) {
    const char *dir = make_pipeline("pipe-stop");
    char cmd[4096], video[1024], state[1100];
    snprintf(video, sizeof video, "%s", ts_tmp("pipe-stop.mkv"));
    snprintf(state, sizeof state, "%s.longvk-state", video);
    unlink(video);
    snprintf(cmd, sizeof cmd, "LONGVK_TEST_STOP=0:0 %s generate --model %s -p '" PROMPT "' " GEN_ARGS " -o %s 2>&1",
             LONGVK_CLI, dir, video);
    char *out = run(cmd, 130);
    cr_assert(strstr(out, "stopping the text encoder after its current layer"), "%s", out);
    cr_assert(strstr(out, "interrupted while encoding the prompt"), "%s", out);
    /* the stop came as the encoder started: seen once its weights are uploaded, before its first layer */
    cr_assert(strstr(out, "stopped on request after the upload of its weights"), "%s", out);
    cr_assert(strstr(out, "nothing was written"), "%s", out);
    cr_assert(strstr(out, "cannot resume yet"), "%s", out);
    cr_assert_null(strstr(out, "resume with the same command"), "%s", out);
    cr_assert_null(strstr(out, "text encoder: done"), "the encoder ran to its end:\n%s", out);
    free(out);
    cr_assert_neq(access(video, F_OK), 0, "a run stopped in its text encoder left %s", video);
    cr_assert_neq(access(state, F_OK), 0, "a run stopped in its text encoder left %s", state);
}

#ifdef LONGVK_HAVE_MPI
/* 32 pixel rows = 4 latent rows = 2 token rows: a band of one token row per rank. Rank 0
 * alone runs the text encoder (the rows are broadcast); the VAE decodes 2 latent rows on each
 * rank (halo rows exchanged, pixel rows gathered to rank 0); the frames are --sp-emulate 2's. */
Test(generate_pipeline, two_ranks_make_the_frames_of_two_bands, .timeout = 600) {
    const char *dir = make_pipeline("pipe-mpi");
    char cmd[4096], e[1024], m[1024];
    snprintf(e, sizeof e, "%s", ts_tmp("pipe-e2.mkv"));
    snprintf(m, sizeof m, "%s", ts_tmp("pipe-m2.mkv"));
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' " GEN_ARGS " --sp-emulate 2 -o %s 2>&1",
             LONGVK_CLI, dir, e);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 "
             "--block-frames 1 --codec ffv1 --sequence-parallel -o %s 2>&1", LONGVK_CLI, dir, m);
    char *out = run(cmd, 0);
    const char *enc = strstr(out, "text encoder: encoding");
    cr_assert(enc && !strstr(enc + 1, "text encoder: encoding"), "rank 0 alone encodes and says so:\n%s", out);
    free(out);
    char *a = framemd5(e), *b = framemd5(m);
    cr_assert_str_eq(a, b, "2 ranks: frames differ from --sp-emulate 2's");
    free(a);
    free(b);
    /* with CFG over two groups of 2 bands: the conditional group decodes (its 2 ranks), the
     * other has no frames to make; the frames are one process's at 2 emulated bands */
    snprintf(e, sizeof e, "%s", ts_tmp("pipe-e2cfg.mkv"));
    snprintf(m, sizeof m, "%s", ts_tmp("pipe-m4cfg.mkv"));
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --cfg-scale 3 --frames 5 -W 48 -H 32 "
             "--block-frames 1 --codec ffv1 -q --sp-emulate 2 -o %s 2>&1", LONGVK_CLI, dir, e);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 4 %s generate --model %s -p '" PROMPT "' --cfg-scale 3 --frames 5 "
             "-W 48 -H 32 --block-frames 1 --codec ffv1 -q --sequence-parallel --cfg-parallel -o %s 2>&1", LONGVK_CLI,
             dir, m);
    free(run(cmd, 0));
    a = framemd5(e), b = framemd5(m);
    cr_assert_str_eq(a, b, "4 ranks in two CFG groups: frames differ from --sp-emulate 2's");
    free(a);
    free(b);
}
#endif

/* "longvk generate --dry-run" on the pipeline: its two phases (Gemma-2's, then the DiT's
 * beside the VAE decoder) are what the run then reports from the engine's accounting
 * ("device memory: text encoder X, then Y for the rest"), both printed to 0.1 MiB; three
 * blocks, so that the VAE's buffers are held beside the later blocks' passes. */
static double mib_after(const char *out, const char *label) {
    const char *p = strstr(out, label);
    cr_assert_not_null(p, "no '%s' in:\n%s", label, out);
    return strtod(p + strlen(label), NULL);
}

Test(generate_pipeline, dry_run_plan_equals_the_run, .timeout = 300) {
    const char *dir = make_pipeline("pipe-plan");
    char cmd[4096], video[1024];
    snprintf(video, sizeof video, "%s", ts_tmp("pipe-plan.mkv"));
    remove(video);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 --block-frames 1 "
             "--codec ffv1 -o %s --dry-run 2>&1", LONGVK_CLI, dir, video);
    char *plan = run(cmd, 0);
    cr_assert(access(video, F_OK) != 0, "--dry-run wrote the video");
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 --block-frames 1 "
             "--codec ffv1 -o %s 2>&1", LONGVK_CLI, dir, video);
    char *ran = run(cmd, 0);
    double text = mib_after(plan, "text encoder phase"), dit = mib_after(plan, "DiT phase");
    double text_run = mib_after(ran, "device memory: text encoder "), dit_run = mib_after(ran, " MiB, then ");
    cr_log_info("planned: text encoder %.1f MiB, DiT phase %.1f; the run: %.1f, %.1f", text, dit, text_run, dit_run);
    cr_assert(text > 0 && text <= text_run * 1.02 + 0.1 && text >= text_run * 0.98 - 0.1, "text encoder: planned %.1f, "
              "the run %.1f MiB\n%s\n%s", text, text_run, plan, ran);
    cr_assert(dit <= dit_run * 1.02 + 0.1 && dit >= dit_run * 0.98 - 0.1, "DiT phase: planned %.1f, the run %.1f MiB\n%s\n%s",
              dit, dit_run, plan, ran);
    free(plan);
    free(ran);
    /* a budget under the text encoder's phase: the run is refused before any upload, told
     * that the encoder's q8_0 matrices would fit; with them it runs (the VAE in tiles:
     * --vae-tiles auto) and its encoder holds what the plan says */
    remove(video);
    const unsigned long long budget = (unsigned long long)((text - 0.3) * 1048576);
    snprintf(cmd, sizeof cmd, "LONGVK_DEVICE_BUDGET=%llu %s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 "
             "--block-frames 1 --codec ffv1 -o %s 2>&1", budget, LONGVK_CLI, dir, video);
    char *refused = run(cmd, 1);
    cr_assert(strstr(refused, "nothing was uploaded") && strstr(refused, "It would fit with --text-weights-dtype q8_0"),
              "%s", refused);
    cr_assert(access(video, F_OK) != 0, "a refused run wrote the video");
    free(refused);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 --block-frames 1 "
             "--codec ffv1 --text-weights-dtype q8_0 -o %s --dry-run 2>&1", LONGVK_CLI, dir, video);
    char *q8 = run(cmd, 0);
    double text_q8 = mib_after(q8, "text encoder phase");
    cr_assert(text_q8 < text - 0.3, "q8_0: text encoder phase %.1f MiB, f32 %.1f", text_q8, text);
    snprintf(cmd, sizeof cmd, "LONGVK_DEVICE_BUDGET=%llu %s generate --model %s -p '" PROMPT "' --frames 9 -W 48 -H 32 "
             "--block-frames 1 --codec ffv1 --text-weights-dtype q8_0 -o %s 2>&1", budget, LONGVK_CLI, dir, video);
    ran = run(cmd, 0);
    text_run = mib_after(ran, "device memory: text encoder ");
    cr_assert(text_q8 <= text_run * 1.02 + 0.1 && text_q8 >= text_run * 0.98 - 0.1, "q8_0 text encoder: planned %.1f, "
              "the run %.1f MiB\n%s\n%s", text_q8, text_run, q8, ran);
    free(q8);
    free(ran);
}
