/* From a prompt to a video with a whole diffusers pipeline folder, as a user of the released
 * SANA-Video weights runs it:
 *
 *   longvk generate --model DIR -p "..." -o out.mkv
 *
 * DIR is built (ts_tiny_pipeline.h) from the tiny test models: the tiny Gemma-2
 * (text_encoder/), its SentencePiece tokenizer (tokenizer/), the tiny SANA-Video DiT with its
 * caption projection widened to Gemma's hidden size 96 (transformer/) and the tiny Wan2.1 VAE
 * (vae/). Each model
 * is checked against its original elsewhere (test_gemma2, test_sana_dit, test_vae); this
 * test checks that generate feeds the DiT exactly what `encode-text` computes, that the same
 * rows given as --text-embeds make the same frames, the original release layout, and the
 * errors of a pipeline that does not fit together; a prompt schedule (issue 54: each distinct
 * prompt through Gemma-2 once, the rows each switch applies, replay, bands and ranks, recache
 * on latents); the matrices quantized on load (issue 56: q8_0 near the f32 frames). With MPI:
 * the pipeline over 2 ranks (rank 0 encodes the text, each rank decodes its band of latent
 * rows) makes the frames of --sp-emulate 2, and over 4 ranks in two CFG groups of 2 bands too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_frames.h"
#include "ts_mpi.h"
#include "ts_tiny_pipeline.h"

#define G2 LONGVK_ASSETS_DIR "/testdata/gemma2"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define PROMPT "a red fox running through snow"

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
    const char *dir = ts_make_tiny_pipeline("pipe");
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
    const char *dir = ts_make_tiny_pipeline("pipe-cfg");
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
    const char *dir = ts_make_tiny_pipeline("pipe-bad");
    char cmd[4096], p[1200];
    const char *o = ts_tmp("bad.mkv");

    /* a DiT whose captions are 32 wide with the 96-wide encoder */
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", dir);
    ts_write_tiny_dit(p, 32);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p x --frames 1 -W 48 -H 32 -o %s 2>&1", LONGVK_CLI, dir, o);
    char *out = run(cmd, 1);
    cr_assert(strstr(out, "hidden size 96") && strstr(out, "captions of 32"), "%s", out);
    free(out);
    ts_write_tiny_dit(p, 96);

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
    ts_copy_file(G2 "/tokenizer.model", p);

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
    ts_copy_file(G2 "/tiny.weights.safetensors", p);

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
    const char *dir = ts_make_tiny_pipeline("pipe-clip");
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
 * whole encoder; it says so, and that nothing is written, and leaves no resume state (the
 * one it began with is removed), so it does not say it can resume. Before, the encoder ran to its end and the run said
 * "interrupted before the first block" and "resume with the same command and --resume". */
Test(generate_pipeline, a_stop_ends_the_text_encoder_within_a_layer, .timeout = 300) {
    const char *dir = ts_make_tiny_pipeline("pipe-stop");
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
    cr_assert(strstr(out, "run it again to make the video"), "%s", out);
    cr_assert_null(strstr(out, "resume with the same command"), "%s", out);
    cr_assert_null(strstr(out, "text encoder: done"), "the encoder ran to its end:\n%s", out);
    free(out);
    cr_assert_neq(access(video, F_OK), 0, "a run stopped in its text encoder left %s", video);
    cr_assert_neq(access(state, F_OK), 0, "a run stopped in its text encoder left %s", state);
}

/* Lines first .. last (0-based) of a framemd5 listing, as a new string. */
static char *md5_lines(const char *all, int first, int last) {
    const char *a = all;
    for (int i = 0; i < first && a; i++) a = strchr(a, '\n'), a = a ? a + 1 : NULL;
    cr_assert(a, "fewer than %d frames:\n%s", first, all);
    const char *b = a;
    for (int i = first; i <= last && b; i++) b = strchr(b, '\n'), b = b ? b + 1 : NULL;
    cr_assert(b, "fewer than %d frames:\n%s", last + 1, all);
    return strndup(a, (size_t)(b - a));
}

static void same_floats(const lv_weights *a, const char *na, const lv_weights *b, const char *nb, int64_t n) {
    const float *x = read_f32(a, na, n), *y = read_f32(b, nb, n);
    cr_assert_eq(memcmp(x, y, (size_t)n * sizeof(float)), 0, "%s differs from %s", na, nb);
}

#define PROMPT_B "a green boat on a calm lake"
#define SCHED_ARGS "--frames 13 -W 48 -H 32 --block-frames 1 --cached-blocks 1 --codec ffv1"

/* A prompt schedule on a latent model (issue 54): 13 pixel frames = 4 latent blocks (frame 0,
 * 1-4, 5-8, 9-12); PROMPT at 0, PROMPT_B at frame 5 (block 3), PROMPT again at frame 9 (block
 * 4). Gemma-2 runs once, before the DiT, on the 2 distinct prompts (said by progress, and the
 * rows saved by --save-text-embeds hold 2 texts); the rows each switch applies are those the
 * prompt alone makes (its one-prompt run's saved rows, bit for bit); the frames before the
 * switch are the one-prompt video's, the ones after it are not; OUT.schedule replayed makes
 * the same frames; --on-switch recache (on latents) keeps the frames before the switch and,
 * under the same prompt, is the one-prompt video; --sp-emulate 2 makes the one-process frames
 * (to 8-bit rounding); with MPI,
 * 2 ranks make --sp-emulate 2's frames and --cfg-parallel over 2 ranks the one process's, bit
 * for bit; what cannot be scheduled on a latent model (--text-embeds, --prompts-from; recache
 * with --cfg-parallel) is refused before any work. */
Test(generate_pipeline, a_schedule_encodes_each_prompt_once, .timeout = 1200) {
    const char *dir = ts_make_tiny_pipeline("pipe-sched");
    char cmd[4096], one[1024], other[1024], sched[1024], replay[1024], emu[1024];
    char e_one[1024], e_other[1024], e_sched[1024];
    snprintf(one, sizeof one, "%s", ts_tmp("sched-a.mkv"));
    snprintf(other, sizeof other, "%s", ts_tmp("sched-b.mkv"));
    snprintf(sched, sizeof sched, "%s", ts_tmp("sched-ab.mkv"));
    snprintf(replay, sizeof replay, "%s", ts_tmp("sched-replay.mkv"));
    snprintf(emu, sizeof emu, "%s", ts_tmp("sched-emu.mkv"));
    snprintf(e_one, sizeof e_one, "%s", ts_tmp("sched-a.safetensors"));
    snprintf(e_other, sizeof e_other, "%s", ts_tmp("sched-b.safetensors"));
    snprintf(e_sched, sizeof e_sched, "%s", ts_tmp("sched-ab.safetensors"));
    const char *outs[] = {one, other, sched, replay, emu};
    for (int i = 0; i < 5; i++) {
        char b[1100];
        snprintf(b, sizeof b, "%s.schedule", outs[i]);
        unlink(outs[i]);
        unlink(b);
    }

    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' " SCHED_ARGS " -q -o %s --save-text-embeds %s "
             "2>&1", LONGVK_CLI, dir, one, e_one);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT_B "' --frames 1 -W 48 -H 32 --codec ffv1 -q -o %s "
             "--save-text-embeds %s 2>&1", LONGVK_CLI, dir, other, e_other);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --prompt-at '5f=" PROMPT_B "' --prompt-at "
             "'9f=" PROMPT "' " SCHED_ARGS " -o %s --save-text-embeds %s 2>&1", LONGVK_CLI, dir, sched, e_sched);
    char *out = run(cmd, 0);
    /* one upload of the encoder for the two distinct prompts, their rows kept on the host:
     * 2 x 2 slots x 300 rows x (96 + 1) floats = 0.4 MiB */
    const char *enc = strstr(out, "text encoder: encoding 2 distinct prompts of the schedule");
    cr_assert(enc && !strstr(enc + 1, "text encoder: encoding"), "%s", out);
    cr_assert(strstr(out, "the rows of 2 prompts kept on the host, 0.4 MiB"), "%s", out);
    cr_assert(strstr(out, "switch 1/2: block 3/4 (block 3 of the video) from frame 5 = "), "%s", out);
    cr_assert(strstr(out, "switch 2/2: block 4/4 (block 4 of the video) from frame 9 = "), "%s", out);
    free(out);

    /* --dry-run's plan says it too, beside the encoder's device memory */
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule " SCHED_ARGS " --dry-run -o %s 2>&1",
             LONGVK_CLI, dir, sched, replay);
    out = run(cmd, 0);
    cr_assert(strstr(out, "(host) the rows            0.4  of the schedule's 2 distinct prompts, each encoded once"),
              "%s", out);
    free(out);

    /* the rows: entry 1 and 3's are the prompt's alone, entry 2's PROMPT_B's alone, bit for bit */
    lv_weights *wa, *wb, *ws;
    cr_assert_eq(lv_weights_open(e_one, &wa), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(e_other, &wb), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_weights_open(e_sched, &ws), LV_OK, "%s", lv_last_error());
    same_floats(ws, "y", wa, "y", 300 * 96);
    same_floats(ws, "mask", wa, "mask", 300);
    same_floats(ws, "text1.y", wb, "y", 300 * 96);
    same_floats(ws, "text1.mask", wb, "mask", 300);
    cr_assert_null(lv_weights_find(ws, "text2.y"), "a prompt given twice was encoded twice");
    const char *texts = lv_weights_metadata(ws, "schedule_texts");
    cr_assert(texts && !strcmp(texts, "0 1 0"), "schedule_texts: %s", texts ? texts : "(none)");
    cr_assert(memcmp(read_f32(wa, "y", 300 * 96), read_f32(wb, "y", 300 * 96), 300 * 96 * sizeof(float)),
              "the two prompts have the same rows: the check would prove nothing");
    lv_weights_close(wa);
    lv_weights_close(wb);
    lv_weights_close(ws);

    /* the frames: before the switch the one-prompt video's (the VAE decodes causally), after it
     * others */
    char *fa = framemd5(one), *fs = framemd5(sched);
    char *a_before = md5_lines(fa, 0, 4), *s_before = md5_lines(fs, 0, 4);
    char *a_after = md5_lines(fa, 5, 12), *s_after = md5_lines(fs, 5, 12);
    cr_assert_str_eq(s_before, a_before, "frames 0-4 differ from the one-prompt video's");
    cr_assert_str_neq(s_after, a_after, "the switch changed nothing");
    free(a_before), free(s_before), free(a_after), free(s_after);

    /* OUT.schedule replayed: the same frames */
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule " SCHED_ARGS " -q -o %s 2>&1", LONGVK_CLI,
             dir, sched, replay);
    free(run(cmd, 0));
    char *fr = framemd5(replay);
    cr_assert_str_eq(fr, fs, "the replayed schedule made other frames");
    free(fr);

    /* two bands in this process: the one process's frames, to the rounding of bands (their
     * floats differ at rounding level, which moves a few 8-bit values by 1: 4 of 59904 bytes
     * in the one-prompt video, measured; the switch moves thousands by far more) */
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule " SCHED_ARGS " -q --sp-emulate 2 -o %s "
             "2>&1", LONGVK_CLI, dir, sched, emu);
    free(run(cmd, 0));
    int64_t n1, n2;
    size_t b1, b2;
    uint8_t *v1 = ts_decode_all(sched, &n1, &b1), *v2 = ts_decode_all(emu, &n2, &b2);
    cr_assert(n1 == 13 && n2 == 13 && b1 == b2, "%lld and %lld frames", (long long)n1, (long long)n2);
    int most = 0, off = 0;
    for (size_t i = 0; i < (size_t)n1 * b1; i++) {
        int d = abs((int)v1[i] - (int)v2[i]);
        most = d > most ? d : most;
        off += d > 0;
    }
    cr_assert(most <= 1 && off <= 64, "--sp-emulate 2: %d bytes differ, by up to %d, from the one process's", off,
              most);
    free(v1);
    free(v2);

#ifdef LONGVK_HAVE_MPI
    /* over 2 ranks: rank 0 alone encodes the 2 prompts and hands every text's rows on; the
     * frames are --sp-emulate 2's, bit for bit (as for one prompt) */
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate --model %s --schedule %s.schedule " SCHED_ARGS
             " --sequence-parallel -o %s 2>&1", LONGVK_CLI, dir, sched, ts_tmp("sched-mpi.mkv"));
    unlink(ts_tmp("sched-mpi.mkv"));
    out = run(cmd, 0);
    enc = strstr(out, "text encoder: encoding 2 distinct prompts");
    cr_assert(enc && !strstr(enc + 1, "text encoder: encoding"), "rank 0 alone encodes, once:\n%s", out);
    free(out);
    char *fm = framemd5(ts_tmp("sched-mpi.mkv")), *fe = framemd5(emu);
    cr_assert_str_eq(fm, fe, "2 ranks: frames differ from --sp-emulate 2's");
    free(fm);
    free(fe);
    /* with CFG over two groups of one rank: the conditional group's rank 0 encodes (the prompts
     * and SANA-Video's negative prompt) and hands the rows to its partner; one process's frames */
    char cfg_one[1024], cfg_two[1024];
    snprintf(cfg_one, sizeof cfg_one, "%s", ts_tmp("sched-cfg1.mkv"));
    snprintf(cfg_two, sizeof cfg_two, "%s", ts_tmp("sched-cfg2.mkv"));
    unlink(cfg_one);
    unlink(cfg_two);
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule " SCHED_ARGS " --cfg-scale 3 -q -o %s "
             "2>&1", LONGVK_CLI, dir, sched, cfg_one);
    free(run(cmd, 0));
    snprintf(cmd, sizeof cmd, TS_MPIRUN "-np 2 %s generate --model %s --schedule %s.schedule " SCHED_ARGS
             " --cfg-scale 3 -q --cfg-parallel -o %s 2>&1", LONGVK_CLI, dir, sched, cfg_two);
    free(run(cmd, 0));
    fm = framemd5(cfg_two), fe = framemd5(cfg_one);
    cr_assert_str_eq(fm, fe, "--cfg-parallel over 2 ranks: frames differ from one process's");
    free(fm);
    free(fe);
#endif

    /* --on-switch recache: the ring keeps the last K + 1 = 2 blocks' clean latents (latent
     * channels and grid) and re-runs their write passes. The switch at block 3 re-makes the
     * state from nothing, the one at block 4 reloads it as after block 2 and re-commits
     * blocks 2 and 3: the frames before the first switch are the one-prompt video's, the
     * ones from it are not keep's; and under the prompt already in force, from nothing,
     * recache is the one-prompt video bit for bit */
    char rc[1024];
    snprintf(rc, sizeof rc, "%s", ts_tmp("sched-recache.mkv"));
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule " SCHED_ARGS " --on-switch recache -q "
             "--overwrite -o %s 2>&1", LONGVK_CLI, dir, sched, rc);
    free(run(cmd, 0));
    char *fc = framemd5(rc);
    a_before = md5_lines(fa, 0, 4), s_before = md5_lines(fc, 0, 4);
    a_after = md5_lines(fs, 5, 12), s_after = md5_lines(fc, 5, 12);
    cr_assert_str_eq(s_before, a_before, "recache changed the frames before its switch");
    cr_assert_str_neq(s_after, a_after, "recache made keep's frames after the switch");
    free(a_before), free(s_before), free(a_after), free(s_after), free(fc);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --prompt-at '5f=" PROMPT "' " SCHED_ARGS
             " --on-switch recache -q --overwrite -o %s 2>&1", LONGVK_CLI, dir, rc);
    free(run(cmd, 0));
    fc = framemd5(rc);
    cr_assert_str_eq(fc, fa, "recache under the same prompt, from nothing: not the one-prompt video");
    free(fc);
    free(fa);
    free(fs);

    /* what a latent model cannot schedule: refused before any work */
    snprintf(cmd, sizeof cmd, "%s generate --model %s/transformer --vae %s/vae/diffusion_pytorch_model.safetensors "
             "--text-embeds %s --schedule %s.schedule " SCHED_ARGS " -o %s 2>&1", LONGVK_CLI, dir, dir, e_one, sched,
             ts_tmp("sched-bad.mkv"));
    out = run(cmd, 2);
    cr_assert(strstr(out, "--schedule and --text-embeds: one or the other"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --prompts-from /dev/null " SCHED_ARGS " -o %s "
             "2>&1", LONGVK_CLI, dir, ts_tmp("sched-bad.mkv"));
    out = run(cmd, 2);
    cr_assert(strstr(out, "--prompts-from: prompts typed during the run need the default model's word tables"), "%s",
              out);
    free(out);
    /* CFG groups over ranks would each re-make their own state */
    snprintf(cmd, sizeof cmd, "%s generate --model %s --schedule %s.schedule --on-switch recache --cfg-scale 3 "
             "--cfg-parallel " SCHED_ARGS " -o %s 2>&1", LONGVK_CLI, dir, sched, ts_tmp("sched-bad.mkv"));
    out = run(cmd, 2);
    cr_assert(strstr(out, "--on-switch recache: not with --cfg-parallel"), "%s", out);
    free(out);
    cr_assert_neq(access(ts_tmp("sched-bad.mkv"), F_OK), 0, "a refused run left its video");
}

#ifdef LONGVK_HAVE_MPI
/* 32 pixel rows = 4 latent rows = 2 token rows: a band of one token row per rank. Rank 0
 * alone runs the text encoder (the rows are broadcast); the VAE decodes 2 latent rows on each
 * rank (halo rows exchanged, pixel rows gathered to rank 0); the frames are --sp-emulate 2's. */
Test(generate_pipeline, two_ranks_make_the_frames_of_two_bands, .timeout = 600) {
    const char *dir = ts_make_tiny_pipeline("pipe-mpi");
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
    const char *dir = ts_make_tiny_pipeline("pipe-plan");
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

/* Issue 56: the whole pipeline with its matrices quantized on load (--weights-dtype and
 * --text-weights-dtype q8_0: the DiT's and Gemma-2's), against the f32 frames. The bound
 * comes from the per-forward ones: q8_0 keeps each model's output within NMSE 1.9e-3 of f32
 * (test_sana_dit's and test_gemma2's bounds, from the quantization step), so the latents
 * within a relative RMS error of sqrt(2 x 1.9e-3) = 6.2 %; the frames' pixels have an RMS of
 * 59 about their mean, which makes 3.7 levels of error, 36.7 dB. We assert 30 dB (a factor
 * 2.2 of amplification through the sampler's steps and the VAE); measured 41.5 dB. q4_K is
 * stated (22.3 dB when written: the tiny Gemma-2's matrices are whole 256-blocks). */
static uint8_t *pipeline_frames(const char *dir, const char *dtype, int64_t *n, size_t *fb) {
    char cmd[4096], video[1024];
    snprintf(video, sizeof video, "%s/../pipe-q-%s.mkv", dir, dtype);
    snprintf(cmd, sizeof cmd, "%s generate --model %s -p '" PROMPT "' --frames 5 -W 48 -H 32 --block-frames 1 "
             "--codec ffv1 -q --weights-dtype %s --text-weights-dtype %s -o %s 2>&1", LONGVK_CLI, dir, dtype, dtype,
             video);
    remove(video);
    free(run(cmd, 0));
    uint8_t *v = ts_decode_all(video, n, fb);
    remove(video);
    return v;
}

Test(generate_pipeline, quantized_weights_near_the_f32_frames, .timeout = 600) {
    const char *dir = ts_make_tiny_pipeline("pipe-quant");
    int64_t n32, n8, n4;
    size_t fb32, fb8, fb4;
    uint8_t *f32 = pipeline_frames(dir, "as-stored", &n32, &fb32), *q8 = pipeline_frames(dir, "q8_0", &n8, &fb8),
            *q4 = pipeline_frames(dir, "q4_K", &n4, &fb4);
    cr_assert(n32 == 5 && n8 == n32 && n4 == n32 && fb8 == fb32 && fb4 == fb32, "%lld / %lld / %lld frames",
              (long long)n32, (long long)n8, (long long)n4);
    const size_t bytes = (size_t)n32 * fb32;
    const double p8 = ts_psnr(f32, q8, bytes), p4 = ts_psnr(f32, q4, bytes);
    cr_log_info("q8_0 against f32: PSNR %.1f dB; q4_K %.1f dB", p8, p4);
    cr_assert(p8 >= 30 && p8 < 99, "q8_0: PSNR %.1f dB against the f32 frames (bound 30; 99 means not quantized)", p8);
    cr_assert(p4 < 99, "q4_K made the f32 frames: not quantized");
    free(f32), free(q8), free(q4);
}
