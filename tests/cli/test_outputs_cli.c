/* What the CLI does with its outputs (issue 53, "no lost file"), through the built longvk:
 *   - an output that is a device or a FIFO is written through, never replaced by a file
 *     (convert, metrics --json/--plot, encode-text, generate --save-text-embeds); where the
 *     output cannot be written through (generate's video, renamed into place beside its
 *     resume state; encode-text's mask beside -o) it is refused, exit 2; a symbolic link is
 *     written through too (the file at its target changes, the link stays a link);
 *   - an output that is a file an input folder holds (a pipeline's transformer weights, its
 *     VAE, Gemma-2's weights, a tokenizer) is refused, exit 2, naming both, and left alone;
 *   - an existing output the user may not write is refused, exit 1 (as decode refuses it),
 *     and left as it was: run under an unprivileged uid (root may write anything);
 *   - two generate runs on one output: the second is refused (exit 1) while the first runs;
 *   - a generate over an interrupted run's output without --resume or --overwrite is
 *     refused (exit 2), its video and state kept; --overwrite starts again;
 *   - decode of non-finite latents fails naming the file, the tensor and the index;
 *   - bad values found after the parser (-W 33, --steps 64, info --preset nope,
 *     LONGVK_PRECISION=garbage) are usage errors, exit 2.
 * Device outputs are a null device (1, 3) made in the temporary folder (/dev/null only where
 * none can be made), checked to stay a character device. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "longvk/npy.h"
#include "longvk/weights.h"
#include "ts_files.h"
#include "ts_process.h"

#define PTH LONGVK_ASSETS_DIR "/fixtures/pth-basic.pth"
#define GEMMA LONGVK_ASSETS_DIR "/testdata/gemma2/tiny.weights.safetensors"
#define TOKENIZER LONGVK_ASSETS_DIR "/testdata/gemma2/tokenizer.model"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define DIT LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers/diffusion_pytorch_model.safetensors"
#define DIT_CONFIG LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers/config.json"

/* "<tmp>/out53_<name>" (rotating buffers) */
static const char *tmp(const char *name) {
    static char buf[16][512];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, 512, "%s/out53_%s", LONGVK_TEST_TMP, name);
    return p;
}

static void expect_says(ts_proc p, const char *needle, const char *what) {
    cr_assert_not_null(strstr(p.err, needle), "%s: the message does not say '%s':\n%s", what, needle, p.err);
}

static void expect_char_device(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "%s is no longer a character device", path);
}

/* A character device to write into: a null device (1, 3) made in the temporary folder, so
 * that a longvk that replaced it (the tree before issue 53 did) destroys nothing shared;
 * /dev/null only where no device node can be made here (not root). */
static const char *null_device(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/out53_null", LONGVK_TEST_TMP);
    unlink(path);
    if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) return path;
    cr_log_warn("mknod %s: %s: writing into /dev/null instead", path, strerror(errno));
    return "/dev/null";
}

static void expect_absent(const char *path) {
    cr_assert_neq(access(path, F_OK), 0, "%s was created", path);
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *data = ts_slurp(from, &n);
    ts_spit(to, data, n);
    free(data);
}

/* ---- a FIFO read to its end by a thread ----------------------------------------------- */

typedef struct fifo_reader {
    const char *path;
    size_t bytes;
    volatile int done;
    pthread_t thread;
} fifo_reader;

static void *read_fifo(void *arg) {
    fifo_reader *r = arg;
    int fd = open(r->path, O_RDONLY); /* waits for the writer */
    if (fd < 0) return NULL;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        r->bytes += (size_t)n;
    }
    close(fd);
    r->done = 1;
    return NULL;
}

static void fifo_start(fifo_reader *r, const char *path) {
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
    r->path = path;
    r->bytes = 0;
    r->done = 0;
    cr_assert_eq(pthread_create(&r->thread, NULL, read_fifo, r), 0);
}

/* Joins the reader; a run that never opened the FIFO is answered by opening it here. */
static size_t fifo_finish(fifo_reader *r) {
    /* the reader, if still waiting for a writer, is given one that closes at once (a
     * non-blocking open for writing fails while no reader has opened it yet: retried) */
    for (int i = 0; i < 3000 && !r->done; i++) {
        int fd = open(r->path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            break;
        }
        usleep(10000);
    }
    pthread_join(r->thread, NULL);
    struct stat st;
    cr_assert_eq(stat(r->path, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "%s is no longer a FIFO", r->path);
    unlink(r->path);
    return r->bytes;
}

static off_t file_size(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
    return st.st_size;
}

/* ---- 1. devices, FIFOs and links are written through ----------------------------------- */

Test(cli_outputs, devices_and_fifos_are_written_through, .timeout = 600) {
    const char *dev = null_device();
    char dev_mask[600], dev_state[600], dev_part[600];
    snprintf(dev_mask, sizeof dev_mask, "%s.mask.npy", dev);
    snprintf(dev_state, sizeof dev_state, "%s.longvk-state", dev);
    snprintf(dev_part, sizeof dev_part, "%s.resume-part", dev);
    /* convert: the reference bytes first */
    const char *ref = tmp("convert_ref.safetensors");
    unlink(ref);
    ts_expect_exit(TS_LONGVK("convert", PTH, ref), 0, "convert to a file");
    off_t ref_size = file_size(ref);
    ts_expect_exit(TS_LONGVK("convert", PTH, dev), 0, "convert to /dev/null");
    expect_char_device(dev);
    fifo_reader r;
    fifo_start(&r, tmp("convert.fifo"));
    ts_proc p = TS_LONGVK("convert", PTH, tmp("convert.fifo"));
    size_t got = fifo_finish(&r);
    ts_expect_exit(p, 0, "convert to a FIFO");
    cr_assert_eq((off_t)got, ref_size, "convert wrote %zu bytes into the FIFO, %lld into a file", got,
                 (long long)ref_size);

    /* metrics --json to /dev/null and --plot into a FIFO */
    const char *video = tmp("clip.mkv");
    unlink(video);
    ts_expect_exit(TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "--codec",
                             "ffv1", "-q", "-o", video),
                   0, "a clip to measure");
    fifo_start(&r, tmp("plot.fifo"));
    p = TS_LONGVK("metrics", video, "--block-frames", "2", "--json", dev, "--plot", tmp("plot.fifo"));
    got = fifo_finish(&r);
    ts_expect_exit(p, 0, "metrics --json /dev/null --plot FIFO");
    expect_char_device(dev);
    cr_assert_gt(got, 100, "metrics wrote %zu bytes of SVG into the FIFO", got);

    /* encode-text --template none -o /dev/null: written through; the sana-video template's
     * mask would go beside -o: refused, exit 2, nothing created in /dev */
    ts_expect_exit(
        TS_LONGVK("encode-text", "--text-encoder", GEMMA, "--template", "none", "--ids", "2,65,432", "-o", dev), 0,
        "encode-text -o /dev/null");
    expect_char_device(dev);
    p = TS_LONGVK("encode-text", "--text-encoder", GEMMA, "--tokenizer", TOKENIZER, "-p", "a cat", "-o", dev);
    ts_expect_exit(p, 2, "encode-text (sana-video) -o /dev/null");
    expect_says(p, dev, "encode-text -o /dev/null");
    expect_absent(dev_mask);
    expect_char_device(dev);

    /* generate: the video cannot be written through (renamed into place, a resume state
     * beside it): refused, exit 2; --save-text-embeds is written through */
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "-q", "-o", dev);
    ts_expect_exit(p, 2, "generate -o /dev/null");
    expect_says(p, "not a regular file", "generate -o /dev/null");
    expect_char_device(dev);
    expect_absent(dev_state);
    expect_absent(dev_part);
    fifo_start(&r, tmp("gen.fifo"));
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "-q", "-o",
                  tmp("gen.fifo"));
    fifo_finish(&r);
    ts_expect_exit(p, 2, "generate -o FIFO");
    unlink(video);
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "--codec", "ffv1", "-q",
                  "-o", video, "--save-text-embeds", dev);
    ts_expect_exit(p, 0, "generate --save-text-embeds /dev/null");
    expect_char_device(dev);
}

Test(cli_outputs, symbolic_links_are_written_through, .timeout = 600) {
    const char *target = tmp("link_target.safetensors"), *link = tmp("link.safetensors");
    unlink(link);
    ts_spit(target, "old", 3);
    cr_assert_eq(symlink(target, link), 0);
    ts_expect_exit(TS_LONGVK("convert", PTH, link), 0, "convert to a link");
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "convert replaced the link %s by a file", link);
    cr_assert_gt(file_size(target), 3, "the link's target was not written");
    /* a link to a file not there yet: created at the target */
    const char *dangling = tmp("dangling.npy"), *later = tmp("dangling_target.npy");
    unlink(dangling);
    unlink(later);
    cr_assert_eq(symlink("out53_dangling_target.npy", dangling), 0); /* relative to the link's folder */
    ts_expect_exit(
        TS_LONGVK("encode-text", "--text-encoder", GEMMA, "--template", "none", "--ids", "2,65", "-o", dangling), 0,
        "encode-text to a dangling link");
    cr_assert_eq(lstat(dangling, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "encode-text replaced the link %s", dangling);
    lv_npy a;
    cr_assert_eq(lv_npy_read(later, &a), LV_OK, "%s", lv_last_error());
    lv_npy_free(&a);
    /* generate's video: at the link's target, its state beside the target */
    const char *vlink = tmp("video_link.mkv"), *vtarget = tmp("video_target.mkv");
    unlink(vlink);
    unlink(vtarget);
    cr_assert_eq(symlink(vtarget, vlink), 0);
    ts_expect_exit(TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "--codec",
                             "ffv1", "-q", "-o", vlink),
                   0, "generate to a link");
    cr_assert_eq(lstat(vlink, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "generate replaced the link %s by a file", vlink);
    cr_assert_gt(file_size(vtarget), 100, "the video is not at the link's target");
}

/* ---- 2. an output inside an input folder --------------------------------------------------- */

static void make_pipeline(const char *dir) {
    char p[1024];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/model_index.json", dir);
    ts_spit(p, "{}", 2);
    const char *parts[] = {"transformer", "vae", "text_encoder", "tokenizer"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, parts[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", dir);
    copy_file(DIT, p);
    snprintf(p, sizeof p, "%s/transformer/config.json", dir);
    copy_file(DIT_CONFIG, p);
    snprintf(p, sizeof p, "%s/vae/diffusion_pytorch_model.safetensors", dir);
    copy_file(VAE, p);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    copy_file(GEMMA, p);
    snprintf(p, sizeof p, "%s/tokenizer/tokenizer.model", dir);
    copy_file(TOKENIZER, p);
}

static void expect_refused_unchanged(ts_proc p, const char *file, uint64_t hash, const char *what) {
    ts_expect_exit(p, 2, what);
    expect_says(p, "refusing to overwrite an input", what);
    uint64_t size, h = ts_file_hash(file, &size);
    cr_assert_eq(h, hash, "%s: %s changed", what, file);
}

Test(cli_outputs, outputs_inside_input_folders_are_refused, .timeout = 300) {
    const char *pipe = tmp("pipe");
    make_pipeline(pipe);
    char dit[1024], vae[1024], te[1024], gemma[1024], tok[1024], cfg[1024];
    snprintf(dit, sizeof dit, "%s/transformer/diffusion_pytorch_model.safetensors", pipe);
    snprintf(vae, sizeof vae, "%s/vae/diffusion_pytorch_model.safetensors", pipe);
    snprintf(te, sizeof te, "%s/text_encoder", pipe);
    snprintf(gemma, sizeof gemma, "%s/text_encoder/model.safetensors", pipe);
    snprintf(tok, sizeof tok, "%s/tokenizer/tokenizer.model", pipe);
    snprintf(cfg, sizeof cfg, "%s/transformer/config.json", pipe);
    uint64_t size, h_dit = ts_file_hash(dit, &size), h_vae = ts_file_hash(vae, &size),
                   h_gemma = ts_file_hash(gemma, &size), h_tok = ts_file_hash(tok, &size),
                   h_cfg = ts_file_hash(cfg, &size);
    const char *video = tmp("pipe_out.mkv");
    ts_proc p =
        TS_LONGVK("generate", "--model", pipe, "-p", "x", "--frames", "1", "-o", video, "--save-text-embeds", dit);
    expect_refused_unchanged(p, dit, h_dit, "--save-text-embeds onto the pipeline's DiT");
    expect_says(p, "--model", "--save-text-embeds onto the DiT");
    expect_says(p, "--save-text-embeds", "--save-text-embeds onto the DiT");
    p = TS_LONGVK("generate", "--model", pipe, "-p", "x", "--frames", "1", "-o", video, "--save-text-embeds", vae);
    expect_refused_unchanged(p, vae, h_vae, "--save-text-embeds onto the pipeline's VAE");
    p = TS_LONGVK("generate", "--model", dit, "--text-encoder", te, "-p", "x", "--frames", "1", "-o", video,
                  "--save-text-embeds", gemma);
    expect_refused_unchanged(p, gemma, h_gemma, "--save-text-embeds onto Gemma-2");
    p = TS_LONGVK("encode-text", "--text-encoder", te, "-p", "x", "-o", gemma);
    expect_refused_unchanged(p, gemma, h_gemma, "encode-text -o onto Gemma-2");
    /* the tokenizer beside text_encoder/ (../tokenizer), and a file input's config.json */
    p = TS_LONGVK("encode-text", "--text-encoder", te, "--template", "none", "--ids", "2", "-o", tok);
    expect_refused_unchanged(p, tok, h_tok, "encode-text -o onto the tokenizer");
    p = TS_LONGVK("generate", "--model", dit, "-p", "x", "--frames", "1", "-o", video, "--save-text-embeds", cfg);
    expect_refused_unchanged(p, cfg, h_cfg, "--save-text-embeds onto the DiT's config.json");
    /* derived outputs: encode-text's mask and generate's state, as links into the folder */
    const char *mask = tmp("derived.mask.npy"), *state = tmp("derived.mkv.longvk-state");
    unlink(mask);
    unlink(state);
    cr_assert_eq(link(gemma, mask), 0);
    p = TS_LONGVK("encode-text", "--text-encoder", te, "-p", "x", "-o", tmp("derived.npy"));
    expect_refused_unchanged(p, gemma, h_gemma, "encode-text's mask onto Gemma-2");
    unlink(mask);
    cr_assert_eq(link(dit, state), 0);
    p = TS_LONGVK("generate", "--model", pipe, "-p", "x", "--frames", "1", "-o", tmp("derived.mkv"));
    ts_expect_exit(p, 2, "generate's state onto the DiT");
    expect_says(p, "longvk-state", "generate's state onto the DiT");
    unlink(state);
    cr_assert_eq(ts_file_hash(dit, &size), h_dit, "the DiT changed");
}

/* ---- 3. a write-protected output -------------------------------------------------------- */

/* Runs argv as an unprivileged user when this process is root (setpriv), else as is.
 * Returns false (and logs why) when no unprivileged user can be had. */
static bool run_unprivileged(const char *const *args, ts_proc *out) {
    const char *full[64];
    int n = 0;
    if (geteuid() == 0) {
        if (access("/usr/bin/setpriv", X_OK) != 0) {
            cr_log_warn("running as root without setpriv: the write-protection check is not exercised here");
            return false;
        }
        full[n++] = "/usr/bin/setpriv";
        full[n++] = "--reuid=65534";
        full[n++] = "--regid=65534";
        full[n++] = "--clear-groups";
        full[n++] = "--";
    }
    full[n++] = LONGVK_CLI;
    for (int i = 0; args[i]; i++) full[n++] = args[i];
    full[n] = NULL;
    *out = ts_spawn(full, 300);
    if (geteuid() == 0 && out->status != 0 && out->status != 1 && out->status != 2) {
        cr_log_warn("setpriv to uid 65534 did not run longvk (exit %d: %s): the check is skipped", out->status,
                    out->err);
        free(out->err);
        return false;
    }
    return true;
}

Test(cli_outputs, write_protected_outputs_are_refused, .timeout = 300) {
    /* a folder anyone may write, a file nobody but root may: a rename would replace it */
    const char *dir = tmp("ro_dir");
    mkdir(dir, 0777);
    chmod(dir, 0777);
    char in[1024], ro[1024], ro_npy[1024], ro_mkv[1024];
    snprintf(in, sizeof in, "%s/in.pth", dir);
    copy_file(PTH, in);
    chmod(in, 0644);
    snprintf(ro, sizeof ro, "%s/ro.safetensors", dir);
    snprintf(ro_npy, sizeof ro_npy, "%s/ro.npy", dir);
    snprintf(ro_mkv, sizeof ro_mkv, "%s/ro.mkv", dir);
    const char *files[] = {ro, ro_npy, ro_mkv};
    for (int i = 0; i < 3; i++) {
        unlink(files[i]); /* made afresh: root's */
        ts_spit(files[i], "keep", 4);
        cr_assert_eq(chmod(files[i], 0444), 0);
    }
    const char *const convert[] = {"convert", in, ro, NULL};
    const char *const encode[] = {"encode-text", "--text-encoder", GEMMA, "--template", "none", "--ids", "2,65",
                                  "-o", ro_npy, NULL};
    const char *const generate[] = {"generate", "-p", "a red ball", "--frames", "4", "--burn-in-blocks", "0", "-q",
                                    "-o", ro_mkv, NULL};
    const char *const *runs[] = {convert, encode, generate};
    for (int i = 0; i < 3; i++) {
        ts_proc p;
        if (!run_unprivileged(runs[i], &p)) return;
        ts_expect_exit(p, 1, runs[i][0]);
        expect_says(p, "Permission denied", runs[i][0]);
        free(p.err);
        struct stat st;
        cr_assert_eq(stat(files[i], &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0444, "%s: the mode of %s changed", runs[i][0], files[i]);
        cr_assert_eq(st.st_uid, geteuid(), "%s: the owner of %s changed", runs[i][0], files[i]);
        cr_assert_eq(st.st_size, 4, "%s: %s was replaced", runs[i][0], files[i]);
    }
}

/* ---- 4. two writers of one output ------------------------------------------------------- */

typedef struct bg_run {
    const char *const *argv;
    ts_proc result;
    pthread_t thread;
} bg_run;

static void *bg_main(void *arg) {
    bg_run *b = arg;
    b->result = ts_spawn_program(LONGVK_CLI, b->argv);
    return NULL;
}

Test(cli_outputs, a_second_writer_is_refused, .timeout = 600) {
    const char *out = tmp("two_writers.mkv");
    char state[600], lock[600];
    snprintf(state, sizeof state, "%s.longvk-state", out);
    snprintf(lock, sizeof lock, "%s.longvk-lock", out);
    unlink(out);
    unlink(state);
    const char *const first[] = {"generate", "-p", "a red ball", "--frames", "64", "--burn-in-blocks", "0", "--codec",
                                 "ffv1", "-q", "-o", out, NULL};
    bg_run b = {.argv = first};
    cr_assert_eq(pthread_create(&b.thread, NULL, bg_main, &b), 0);
    /* the first run has started writing once its resume state is there */
    for (int i = 0; i < 6000 && access(state, F_OK) != 0; i++) usleep(10000);
    cr_assert_eq(access(state, F_OK), 0, "the first run wrote no state");
    ts_proc p = TS_LONGVK("generate", "-p", "a blue ball", "--frames", "4", "--burn-in-blocks", "0", "--codec", "ffv1",
                          "-q", "-o", out);
    pthread_join(b.thread, NULL);
    ts_expect_exit(b.result, 0, "the first writer");
    ts_expect_exit(p, 1, "a second writer of the same output");
    expect_says(p, "another longvk run", "the second writer");
    expect_absent(state);
    expect_absent(lock);
    /* the first run's video is whole: 64 frames */
    int64_t frames;
    size_t fb;
    free(ts_decode_all(out, &frames, &fb));
    cr_assert_eq(frames, 64);
    free(p.err);
    free(b.result.err);
}

/* ---- 5. an interrupted run's output ------------------------------------------------------- */

Test(cli_outputs, an_interrupted_output_needs_resume_or_overwrite, .timeout = 600) {
    const char *out = tmp("interrupted.mkv");
    char state[600];
    snprintf(state, sizeof state, "%s.longvk-state", out);
    unlink(out);
    unlink(state);
    /* stopped after block 2 (LONGVK_TEST_STOP: a SIGUSR1 then): a partial video and its state */
    setenv("LONGVK_TEST_STOP", "0:2", 1);
    ts_proc p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "16", "--block-frames", "4", "--burn-in-blocks",
                          "0", "--codec", "ffv1", "-q", "-o", out);
    unsetenv("LONGVK_TEST_STOP");
    ts_expect_exit(p, 130, "the interrupted run");
    cr_assert_eq(access(state, F_OK), 0, "no state after the interruption");
    uint64_t size, h_video = ts_file_hash(out, &size), h_state = ts_file_hash(state, &size);
    /* the same command again, without --resume: refused, both files kept */
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--block-frames", "4", "--burn-in-blocks", "0",
                  "--codec", "ffv1", "-q", "-o", out);
    ts_expect_exit(p, 2, "a re-run without --resume");
    expect_says(p, "--resume", "a re-run without --resume");
    expect_says(p, "--overwrite", "a re-run without --resume");
    cr_assert_eq(ts_file_hash(out, &size), h_video, "the partial video changed");
    cr_assert_eq(ts_file_hash(state, &size), h_state, "the state changed");
    /* --overwrite starts again */
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--block-frames", "4", "--burn-in-blocks", "0",
                  "--codec", "ffv1", "-q", "-o", out, "--overwrite");
    ts_expect_exit(p, 0, "--overwrite");
    expect_absent(state);
    int64_t frames;
    size_t fb;
    free(ts_decode_all(out, &frames, &fb));
    cr_assert_eq(frames, 4);
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "-o", out, "--overwrite", "--resume");
    ts_expect_exit(p, 2, "--resume with --overwrite");
}

/* ---- 9. non-finite latents ------------------------------------------------------------------ */

Test(cli_outputs, decode_refuses_non_finite_latents, .timeout = 300) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.vectors.safetensors", &v), LV_OK);
    const lv_weight *w = lv_weights_find(v, "latents");
    cr_assert_not_null(w);
    int64_t shape[4] = {w->shape[0], 1, w->shape[2], w->shape[3]};
    size_t plane = (size_t)(shape[2] * shape[3]), n = (size_t)shape[0] * plane;
    float *x = malloc(n * sizeof *x);
    for (int64_t c = 0; c < shape[0]; c++)
        memcpy(x + (size_t)c * plane, (const float *)w->data + (size_t)c * w->shape[1] * plane, plane * sizeof *x);
    lv_weights_close(v);
    x[2 * plane + 3] = NAN; /* channel 2, frame 0, row 0, column 3 */
    const char *latents = tmp("nan_latents.npy"), *out = tmp("nan_latents.mkv");
    cr_assert_eq(lv_npy_write(latents, 4, shape, x), LV_OK);
    free(x);
    unlink(out);
    ts_proc p = TS_LONGVK("decode", "--vae", VAE, "--latents", latents, "--codec", "ffv1", "-o", out);
    ts_expect_exit(p, 1, "decode of NaN latents");
    expect_says(p, latents, "decode of NaN latents");
    expect_says(p, "'latents'", "decode of NaN latents");
    expect_says(p, "[2, 0, 0, 3]", "decode of NaN latents");
    expect_absent(out);
}

/* ---- 14. bad values found after the parser are usage errors ------------------------------------ */

Test(cli_outputs, bad_values_are_usage_errors, .timeout = 300) {
    const char *out = tmp("bad_values.mkv");
    unlink(out);
    ts_proc p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "-W", "33", "-o", out);
    ts_expect_exit(p, 2, "generate -W 33");
    expect_says(p, "-W/-H", "generate -W 33");
    p = TS_LONGVK("generate", "-p", "a red ball", "--frames", "4", "--steps", "64", "-o", out);
    ts_expect_exit(p, 2, "generate --steps 64");
    expect_says(p, "--steps", "generate --steps 64");
    expect_absent(out);
    p = TS_LONGVK("info", "--preset", "nope");
    ts_expect_exit(p, 2, "info --preset nope");
    expect_says(p, "nope", "info --preset nope");
    setenv("LONGVK_PRECISION", "garbage", 1);
    p = TS_LONGVK("info");
    unsetenv("LONGVK_PRECISION");
    ts_expect_exit(p, 2, "LONGVK_PRECISION=garbage");
    expect_says(p, "LONGVK_PRECISION", "LONGVK_PRECISION=garbage");
}
