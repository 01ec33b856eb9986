/* What a `generate` run is and what it promises (issue 53, items 6, 7, 15 and 16), through
 * the built longvk:
 *   - -p beside --text-embeds (whose rows the DiT reads) is refused, exit 2;
 *   - a latent model (SANA-Video) resumes: stopped, it says how to resume and leaves a resume
 *     state, --resume with other --vae-tiles is refused naming the option, and --resume with
 *     the same options finishes the video (its frames: test_latent_resume.c); a .npy of
 *     latents (written at the end) refuses --resume (exit 2) saying why;
 *   - every option that changes the frames is in the run identity: a run stopped at f32 and
 *     resumed at bf16 (--precision or LONGVK_PRECISION), with other --weights-dtype, or the
 *     other way round, is refused naming the option; the same options resume; --text-embeds
 *     is recorded by its content: an edited file is refused, the same file moved resumes;
 *   - before the first frame one line says what the run will do (model, size, frames,
 *     sampler, steps, CFG, seed, precision), none with -q; a latent model that rounds
 *     --frames 6 up to 9 says so; without --scale a latent model's frames are not upscaled
 *     (the embedded model's are, 8 times);
 *   - `longvk --version` gives the version, `longvk --help` every variable engine/README.md's
 *     table marks for users. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_process.h"

#define SANA LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define ENGINE_README LONGVK_ASSETS_DIR "/../engine/README.md"
#define PROMPT "two red balls bouncing on a blue background"

static ts_proc gen(const char *const *argv) { return ts_spawn(argv, 300); }

static void expect_exit(ts_proc p, int status, const char *what) {
    cr_assert(!p.timed_out && p.signal == 0 && p.status == status, "%s: status %d (signal %d), want %d:\n%s", what,
              p.status, p.signal, status, p.err);
}

static void expect_has(const ts_proc *p, const char *needle, const char *what) {
    cr_assert_not_null(strstr(p->err, needle), "%s: '%s' not in:\n%s", what, needle, p->err);
}

static void expect_lacks(const ts_proc *p, const char *needle, const char *what) {
    cr_assert_null(strstr(p->err, needle), "%s: '%s' in:\n%s", what, needle, p->err);
}

/* Prompt embeddings for tiny-hd32 (ts_write_tiny_embeds). */
static const char *write_embeds(void) {
    const char *path = ts_tmp("ident-embeds.safetensors");
    ts_write_tiny_embeds(path);
    return path;
}

#define LATENT(out, ...)                                                                                            \
    (const char *[]) {                                                                                              \
        LONGVK_CLI, "generate", "--model", SANA, "--text-embeds", embeds, "--vae", VAE, "-W", "48", "-H", "32",       \
            "--block-frames", "1", "--codec", "ffv1", "-o", out, __VA_ARGS__, NULL                                  \
    }

Test(run_identity, latent_models_resume, .timeout = 600) {
    const char *embeds = write_embeds();
    char out[1024], state[1100];
    snprintf(out, sizeof out, "%s", ts_tmp("ident-latent.mkv"));
    snprintf(state, sizeof state, "%s.longvk-state", out);
    ts_remove_output_and_state(out);

    /* a prompt beside the rows would not be read: refused, not ignored (item 15) */
    ts_proc p = gen(LATENT(out, "--frames", "5", "-p", "a red fox"));
    expect_exit(p, 2, "-p with --text-embeds");
    expect_has(&p, "--prompt and --text-embeds: one or the other", "-p with --text-embeds");
    free(p.err);

    /* --resume of a .npy of latents: refused before any work, saying why */
    char npy[1024];
    snprintf(npy, sizeof npy, "%s", ts_tmp("ident-latent.npy"));
    const char *const to_npy[] = {LONGVK_CLI, "generate", "--model", SANA, "--text-embeds", embeds, "-W", "48", "-H",
                                  "32", "--block-frames", "1", "--frames", "5", "--resume", "-o", npy, NULL};
    p = gen(to_npy);
    expect_exit(p, 2, "--resume to a .npy");
    expect_has(&p, "written only at the end", "--resume to a .npy");
    cr_assert_eq(access(npy, F_OK), -1, "a refused run made %s", npy);
    free(p.err);

    /* stopped after its first block (a SIGUSR1 then, as Ctrl-C or mpirun's forward): it plays,
     * says how to resume, and its state is there */
    setenv("LONGVK_TEST_STOP", "0:1", 1);
    p = gen(LATENT(out, "--frames", "9"));
    unsetenv("LONGVK_TEST_STOP");
    expect_exit(p, 130, "the stopped latent run");
    expect_has(&p, "interrupted after block 1", "the stopped latent run");
    expect_has(&p, "resume with the same command and --resume", "the stopped latent run");
    expect_lacks(&p, "cannot resume", "the stopped latent run");
    cr_assert_eq(access(state, F_OK), 0, "the stopped latent run left no resume state %s", state);
    free(p.err);
    /* the VAE's tiles change the frames: other tiles are refused, naming the option */
    p = gen(LATENT(out, "--frames", "9", "--vae-tiles", "2x2", "--resume"));
    cr_assert(p.status != 0 && p.signal == 0, "resumed in other tiles:\n%s", p.err);
    expect_has(&p, "vae_tiles was \"auto\", now \"2x2\"", "--vae-tiles 2x2");
    expect_has(&p, "(--vae-tiles:", "--vae-tiles 2x2");
    free(p.err);
    p = gen(LATENT(out, "--frames", "9", "--resume"));
    expect_exit(p, 0, "the resumed latent run");
    free(p.err);
    int64_t resumed_frames;
    size_t resumed_bytes;
    free(ts_decode_all(out, &resumed_frames, &resumed_bytes));
    cr_assert_eq(resumed_frames, 9);
    cr_assert_eq(access(state, F_OK), -1, "the finished run left %s", state);

    /* --frames 6: a latent frame is 4 pixel frames (the first alone), so 9 are made, and said */
    ts_remove_output_and_state(out);
    p = gen(LATENT(out, "--frames", "6"));
    expect_exit(p, 0, "--frames 6");
    expect_has(&p, "generating 9 frames", "--frames 6");
    expect_has(&p, "6 asked", "--frames 6");
    expect_has(&p, "rounded up", "--frames 6");
    expect_has(&p, "with " SANA ": 48x32, sampler", "no --scale");
    free(p.err);
    int64_t frames;
    size_t fb;
    free(ts_decode_all(out, &frames, &fb));
    cr_assert_eq(frames, 9, "the line said 9 frames, the file holds %lld", (long long)frames);
    /* no --scale: a latent model's frames as the VAE makes them (the embedded model's 8 times
     * larger would make 384 x 256 here, 6656 x 3840 for SANA-Video's 832 x 480) */
    cr_assert_eq(fb, (size_t)48 * 32 * 3, "frames of %zu bytes, not 48 x 32 RGB", fb);
    ts_remove_output_and_state(out);
}

#define DEFAULT(out, ...)                                                                                         \
    (const char *[]) {                                                                                            \
        LONGVK_CLI, "generate", "-p", PROMPT, "--frames", "16", "--burn-in-blocks", "0", "--scale", "1", "-s", "3", \
            "--codec", "ffv1", "-q", "-o", out, __VA_ARGS__, NULL                                                 \
    }

/* A run stopped after block 2 at `precision`: 130, its state kept. */
static void stopped_run(const char *out, const char *precision) {
    ts_remove_output_and_state(out);
    setenv("LONGVK_TEST_STOP", "0:2", 1);
    ts_proc p = gen(DEFAULT(out, "--precision", precision));
    unsetenv("LONGVK_TEST_STOP");
    expect_exit(p, 130, "the stopped run");
    expect_has(&p, "resume with the same command and --resume", "the stopped run of the default model");
    free(p.err);
}

Test(run_identity, resume_refuses_what_changes_the_frames, .timeout = 600) {
    char out[1024];
    snprintf(out, sizeof out, "%s", ts_tmp("ident-default.mkv"));
    stopped_run(out, "f32");

    /* another precision, by the option or by the variable: refused, naming the option */
    ts_proc p = gen(DEFAULT(out, "--resume", "--precision", "bf16"));
    cr_assert(p.status != 0 && p.signal == 0, "resumed at bf16 what was made at f32:\n%s", p.err);
    expect_has(&p, "belongs to another run: precision was not set (the default), now \"bf16\"", "--precision bf16");
    expect_has(&p, "--precision", "--precision bf16");
    free(p.err);
    setenv("LONGVK_PRECISION", "bf16", 1);
    p = gen(DEFAULT(out, "--resume"));
    unsetenv("LONGVK_PRECISION");
    cr_assert(p.status != 0, "resumed with LONGVK_PRECISION=bf16 what was made at f32:\n%s", p.err);
    expect_has(&p, "precision was not set (the default), now \"bf16\"", "LONGVK_PRECISION=bf16");
    free(p.err);
    /* the weights' dtype on the device changes the products too */
    p = gen(DEFAULT(out, "--resume", "--precision", "f32", "--weights-dtype", "f16"));
    cr_assert(p.status != 0, "resumed with f16 weights what was made with the stored ones:\n%s", p.err);
    expect_has(&p, "weights_dtype was not set (the default), now \"f16\"", "--weights-dtype f16");
    expect_has(&p, "--weights-dtype", "--weights-dtype f16");
    free(p.err);
    /* the same options: resumed to the end */
    p = gen(DEFAULT(out, "--resume", "--precision", "f32"));
    expect_exit(p, 0, "resumed with the same options");
    free(p.err);
    int64_t frames;
    size_t fb;
    free(ts_decode_all(out, &frames, &fb));
    cr_assert_eq(frames, 16);

    /* the other way round: made at bf16, resumed at the default f32 */
    stopped_run(out, "bf16");
    p = gen(DEFAULT(out, "--resume"));
    cr_assert(p.status != 0, "resumed at f32 what was made at bf16:\n%s", p.err);
    expect_has(&p, "precision was \"bf16\", now not set (the default)", "made at bf16");
    free(p.err);
    ts_remove_output_and_state(out);
}

/* Prompt rows for the embedded model (caption 32, 20 tokens) and its negative, the values
 * shifted by `shift`: another file's content. */
static void write_default_embeds(const char *path, float shift) {
    static float y[20 * 32], mask[20], ny[20 * 32], nmask[20];
    for (int i = 0; i < 20 * 32; i++) y[i] = 0.5f * sinf(0.29f * (float)i) + shift, ny[i] = 0.3f * cosf(0.41f * (float)i);
    for (int i = 0; i < 20; i++) mask[i] = i < 7 ? 1.0f : 0.0f, nmask[i] = i < 3 ? 1.0f : 0.0f;
    lv_weight t[4] = {
        {.name = "y", .dtype = LV_F32, .ndim = 2, .shape = {20, 32}, .data = y, .nbytes = sizeof y},
        {.name = "mask", .dtype = LV_F32, .ndim = 1, .shape = {20}, .data = mask, .nbytes = sizeof mask},
        {.name = "negative_y", .dtype = LV_F32, .ndim = 2, .shape = {20, 32}, .data = ny, .nbytes = sizeof ny},
        {.name = "negative_mask", .dtype = LV_F32, .ndim = 1, .shape = {20}, .data = nmask, .nbytes = sizeof nmask}};
    cr_assert_eq(lv_safetensors_write(path, t, 4, NULL, 0), LV_OK, "%s", lv_last_error());
}

#define EMBEDS(out, embeds, ...)                                                                                 \
    (const char *[]) {                                                                                           \
        LONGVK_CLI, "generate", "--text-embeds", embeds, "--frames", "8", "--burn-in-blocks", "0", "--scale", "1", \
            "-s", "3", "--codec", "ffv1", "-q", "-o", out, __VA_ARGS__, NULL                                     \
    }

/* --text-embeds is recorded by its content (CRC-32), not its path (issue 53, item 15): the
 * file edited after the stop is refused naming --text-embeds; the same bytes under another
 * name resume to the end. */
Test(run_identity, text_embeds_are_recorded_by_content, .timeout = 600) {
    char out[1024], embeds[1024], moved[1024];
    snprintf(out, sizeof out, "%s", ts_tmp("ident-embeds.mkv"));
    snprintf(embeds, sizeof embeds, "%s", ts_tmp("ident-rows.safetensors"));
    snprintf(moved, sizeof moved, "%s", ts_tmp("ident-rows-moved.safetensors"));
    ts_remove_output_and_state(out);
    write_default_embeds(embeds, 0.0f);
    setenv("LONGVK_TEST_STOP", "0:1", 1);
    ts_proc p = gen(EMBEDS(out, embeds, "--precision", "f32"));
    unsetenv("LONGVK_TEST_STOP");
    expect_exit(p, 130, "the stopped run");
    free(p.err);
    /* edited in place: another run */
    write_default_embeds(embeds, 0.25f);
    p = gen(EMBEDS(out, embeds, "--resume"));
    cr_assert(p.status != 0 && p.signal == 0, "resumed with other rows:\n%s", p.err);
    expect_has(&p, "belongs to another run: text_embeds was \"crc32:", "edited rows");
    expect_has(&p, "(--text-embeds:", "edited rows");
    free(p.err);
    /* the first file's bytes, moved: the same run */
    write_default_embeds(moved, 0.0f);
    unlink(embeds);
    p = gen(EMBEDS(out, moved, "--resume"));
    expect_exit(p, 0, "resumed with the same rows under another name");
    free(p.err);
    int64_t frames;
    size_t fb;
    free(ts_decode_all(out, &frames, &fb));
    cr_assert_eq(frames, 8);
    ts_remove_output_and_state(out);
}

Test(run_identity, the_run_is_described_before_its_first_frame, .timeout = 300) {
    char out[1024];
    snprintf(out, sizeof out, "%s", ts_tmp("ident-plan.mkv"));
    ts_remove_output_and_state(out);
    const char *const argv[] = {LONGVK_CLI, "generate", "-p", PROMPT, "--frames", "8", "--burn-in-blocks", "1", "-s",
                                "11", "--codec", "ffv1", "-o", out, NULL};
    ts_proc p = gen(argv);
    expect_exit(p, 0, "generate");
    /* the line comes first, before any progress */
    const char *first = "generating 8 frames (0.5 s at 16 fps) with the default model: 32x32 upscaled x8 to 256x256, "
                        "sampler longsana, 2 steps per block, CFG ";
    cr_assert(strncmp(p.err, first, strlen(first)) == 0, "%s", p.err);
    const char *want[] = {", seed 11,", "precision f32", "; 3 blocks of 4 model frames, 1 of them burn-in\n"};
    for (int i = 0; i < 3; i++) expect_has(&p, want[i], "the run's line");
    free(p.err);
    ts_remove_output_and_state(out);
    const char *const quiet[] = {LONGVK_CLI, "generate", "-p", PROMPT, "--frames", "8", "--burn-in-blocks", "1", "-s",
                                 "11", "--codec", "ffv1", "-q", "-o", out, NULL};
    p = gen(quiet);
    expect_exit(p, 0, "generate -q");
    cr_assert_eq(p.err[0], '\0', "-q prints nothing:\n%s", p.err);
    free(p.err);
    ts_remove_output_and_state(out);
}

Test(run_identity, version_and_the_variables_for_users) {
    char *text;
    cr_assert_eq(ts_run(LONGVK_CLI " --version", &text), 0, "%s", text);
    int major, minor, patch;
    cr_assert_eq(sscanf(text, "longvk %d.%d.%d", &major, &minor, &patch), 3, "%s", text);
    free(text);
    char *help;
    cr_assert_eq(ts_run(LONGVK_CLI " --help", &help), 0, "%s", help);
    cr_assert_not_null(strstr(help, "--version"), "%s", help);
    /* every row of the table whose "for" column says users */
    size_t len;
    char *readme = (char *)ts_slurp(ENGINE_README, &len);
    char *table = strstr(readme, "## Environment variables");
    cr_assert_not_null(table);
    int users = 0;
    for (char *line = strtok(table, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "| `LONGVK_", 10) != 0) continue;
        char *end = strrchr(line, '|'); /* the row's closing bar; the "for" column is before it */
        *end = '\0';
        const bool for_users = strstr(strrchr(line, '|'), "users") != NULL;
        *end = '|';
        if (!for_users) continue;
        char name[64];
        size_t n = strcspn(line + 3, "=`");
        cr_assert_lt(n, sizeof name);
        memcpy(name, line + 3, n);
        name[n] = 0;
        cr_assert_not_null(strstr(help, name), "%s is for users (engine/README.md) but not in longvk --help:\n%s", name,
                           help);
        users++;
    }
    cr_assert_geq(users, 5, "the table's rows for users: %d", users);
    free(readme);
    free(help);
}
