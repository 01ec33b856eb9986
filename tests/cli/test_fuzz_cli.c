/* A bounded fuzz of the CLI: every subcommand (and every benchmark of `longvk bench`) run
 * with random combinations of the options of its table (pipelines/cli_options/options.h) and
 * values that are good, at the edge, zero, negative, huge, non-finite, empty or garbage,
 * on small input files made here. Each run must end with exit status 0, 1 or 2 (not a
 * signal, not a sanitizer report: under the ASan+UBSan build a report aborts the process
 * or prints "runtime error"), and leave every input file as it was (an output that names
 * an input, by any name, must be refused).
 *
 * Two sorts of runs per command:
 *   - usage runs: random options plus one that is certainly wrong (an unknown option, a
 *     non-finite or malformed number, a value missing at the end, an output that is an
 *     input): exit 2 exactly, since a usage error must be found before any work;
 *   - free runs: a cheap valid command line with random options on top, whose costly ones
 *     are then pinned to cheap values (frames, steps, sizes), so that what runs is small.
 * The sequence is fixed by a seed (LONGVK_FUZZ_SEED overrides it; LONGVK_FUZZ_SCALE=K runs
 * K times as many cases, LONGVK_FUZZ_VERBOSE=1 logs every run), and a failure prints the
 * exact command line. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"
#include "longvk/weights.h"
#include "options.h"
#include "test_clips.h"
#include "ts_files.h"
#include "ts_process.h"

#define FUZZ_DIR LONGVK_TEST_TMP "/fuzz"
#define OUT_DIR LONGVK_TEST_TMP "/fuzz/out"
/* Outputs that are not plain new files (issue 53): a FIFO (read by a thread), a file only
 * root may write, and the files of a model folder (a diffusers transformer/), an input. */
#define SPECIAL_DIR LONGVK_TEST_TMP "/fuzz/special"
#define OUT_FIFO SPECIAL_DIR "/out.fifo"
#define OUT_READONLY SPECIAL_DIR "/read-only.bin"
#define MODEL_DIR LONGVK_TEST_TMP "/fuzz/model-dir"
#define RUN_TIMEOUT 240.0 /* seconds; a free run is small, so more is a hang */

/* ---- random ------------------------------------------------------------------------------- */

static uint64_t rng;

static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
static bool chance(int percent) { return pick(100) < percent; }
#define PICK(array) ((array)[pick((int)(sizeof(array) / sizeof((array)[0])))])

/* ---- strings that live until the end of a run ------------------------------------------------- */

static char arena[1 << 16];
static size_t arena_used;

static const char *keep(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(arena + arena_used, sizeof arena - arena_used, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < sizeof arena - arena_used, "fuzz arena full");
    const char *s = arena + arena_used;
    arena_used += (size_t)n + 1;
    return s;
}

/* ---- fixtures ----------------------------------------------------------------------------- */

/* Every file a run may read; its hard link, symbolic link and a "/./" spelling are other
 * names for it. Hashed before and after every run. */
typedef struct fixture {
    const char *key;  /* what it is, for the option map below */
    char path[512], hard[512], sym[512], dotted[512];
    uint64_t hash, size;
} fixture;

static fixture fixtures[16];
static int nfixtures;

static void add_fixture(const char *key, const char *name) {
    fixture *f = &fixtures[nfixtures++];
    f->key = key;
    snprintf(f->path, sizeof f->path, "%s/%s", FUZZ_DIR, name);
    snprintf(f->hard, sizeof f->hard, "%s/hard-%s", FUZZ_DIR, name);
    snprintf(f->sym, sizeof f->sym, "%s/sym-%s", FUZZ_DIR, name);
    snprintf(f->dotted, sizeof f->dotted, "%s/./%s", FUZZ_DIR, name);
    remove(f->hard);
    remove(f->sym);
    cr_assert_eq(link(f->path, f->hard), 0, "link %s: %s", f->path, strerror(errno));
    cr_assert_eq(symlink(f->path, f->sym), 0, "symlink %s: %s", f->path, strerror(errno));
    f->hash = ts_file_hash(f->path, &f->size);
}

static const fixture *fixture_of(const char *key) {
    for (int i = 0; i < nfixtures; i++)
        if (strcmp(fixtures[i].key, key) == 0) return &fixtures[i];
    return NULL;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *data = ts_slurp(from, &n);
    ts_spit(to, data, n);
    free(data);
}

static void write_npy_of(const lv_weight *w, int frames, const char *path) {
    /* the first `frames` latent frames of a [C, F, H, W] tensor */
    int64_t shape[4] = {w->shape[0], frames, w->shape[2], w->shape[3]};
    size_t plane = (size_t)(w->shape[2] * w->shape[3]), n = (size_t)(shape[0] * frames) * plane;
    float *x = malloc(n * sizeof *x);
    const float *src = w->data;
    for (int64_t c = 0; c < shape[0]; c++)
        memcpy(x + (size_t)c * frames * plane, src + (size_t)c * w->shape[1] * plane, frames * plane * sizeof *x);
    cr_assert_eq(lv_npy_write(path, 4, shape, x), LV_OK, "%s", lv_last_error());
    free(x);
}

static void make_fixtures(void) {
    mkdir(FUZZ_DIR, 0755);
    mkdir(OUT_DIR, 0755);
    nfixtures = 0;
    float q[2 * 6 * 4], pos[6];
    for (int i = 0; i < 48; i++) q[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < 6; i++) pos[i] = (float)i;
    int64_t qs[3] = {2, 6, 4}, ps[1] = {6};
    cr_assert_eq(lv_npy_write(FUZZ_DIR "/q.npy", 3, qs, q), LV_OK);
    cr_assert_eq(lv_npy_write(FUZZ_DIR "/pos.npy", 1, ps, pos), LV_OK);
    lv_weights *v;
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors", &v), LV_OK);
    write_npy_of(lv_weights_find(v, "x"), 2, FUZZ_DIR "/latents.npy");
    lv_weight text[2] = {*lv_weights_find(v, "y"), *lv_weights_find(v, "mask")};
    text[0].name = "y";
    text[1].name = "mask";
    cr_assert_eq(lv_safetensors_write(FUZZ_DIR "/text.safetensors", text, 2, NULL, 0), LV_OK, "%s", lv_last_error());
    lv_weights_close(v);
    cr_assert_eq(lv_weights_open(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.vectors.safetensors", &v), LV_OK);
    write_npy_of(lv_weights_find(v, "latents"), 2, FUZZ_DIR "/vae-latents.npy");
    lv_weights_close(v);
    copy_file(LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors", FUZZ_DIR "/model.safetensors");
    copy_file(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors", FUZZ_DIR "/vae.safetensors");
    copy_file(LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny-full.weights.safetensors", FUZZ_DIR "/vae-full.safetensors");
    copy_file(LONGVK_ASSETS_DIR "/fixtures/pth-basic.pth", FUZZ_DIR "/ckpt.pth");
    copy_file(LONGVK_ASSETS_DIR "/testdata/gemma2/tiny.weights.safetensors", FUZZ_DIR "/gemma2.safetensors");
    copy_file(LONGVK_ASSETS_DIR "/testdata/gemma2/tokenizer.model", FUZZ_DIR "/tokenizer.model");
    copy_file(LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers/config.json", FUZZ_DIR "/config.json");
    cr_assert_eq(clip_write(FUZZ_DIR "/clip.mkv", "ffv1", CLIP_GRADIENT_SQUARE, 32, 32, 16, 8, 4, 4), LV_OK, "%s",
                 lv_last_error());
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)next();
    ts_spit(FUZZ_DIR "/junk.bin", junk, sizeof junk);
    add_fixture("q", "q.npy");
    add_fixture("pos", "pos.npy");
    add_fixture("latents", "latents.npy");
    add_fixture("text", "text.safetensors");
    add_fixture("vae-latents", "vae-latents.npy");
    add_fixture("model", "model.safetensors");
    add_fixture("vae", "vae.safetensors");
    add_fixture("vae-full", "vae-full.safetensors");
    add_fixture("ckpt", "ckpt.pth");
    add_fixture("gemma2", "gemma2.safetensors");
    add_fixture("tokenizer", "tokenizer.model");
    add_fixture("config", "config.json");
    add_fixture("video", "clip.mkv");
    add_fixture("junk", "junk.bin");
}

/* The model folder's files: inputs too when the folder is given (never written: an output
 * naming one is refused), hashed like the fixtures. */
static const char *const folder_names[] = {"config.json", "diffusion_pytorch_model.safetensors"};
static char folder_files[2][512];
static uint64_t folder_hash[2], folder_size[2];

static void make_special_outputs(void) {
    mkdir(SPECIAL_DIR, 0755);
    mkdir(MODEL_DIR, 0755);
    const char *from[] = {LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers/config.json",
                          LONGVK_ASSETS_DIR "/fixtures/tiny-hd32-diffusers/diffusion_pytorch_model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(folder_files[i], sizeof folder_files[i], "%s/%s", MODEL_DIR, folder_names[i]);
        copy_file(from[i], folder_files[i]);
        folder_hash[i] = ts_file_hash(folder_files[i], &folder_size[i]);
    }
    unlink(OUT_FIFO);
    cr_assert_eq(mkfifo(OUT_FIFO, 0600), 0, "mkfifo %s: %s", OUT_FIFO, strerror(errno));
}

/* A read-only file (mode 444) before every run: root may replace it, another user not. */
static void reset_read_only(void) {
    chmod(OUT_READONLY, 0644);
    ts_spit(OUT_READONLY, "read-only", 9);
    chmod(OUT_READONLY, 0444);
}

/* The FIFO's reader: every run that writes into it finds it there. */
static volatile int fifo_stop;
static void *fifo_reader(void *arg) {
    (void)arg;
    char buf[65536];
    while (!fifo_stop) {
        int fd = open(OUT_FIFO, O_RDONLY); /* waits for a writer */
        if (fd < 0) break;
        while (read(fd, buf, sizeof buf) > 0) {}
        close(fd);
    }
    return NULL;
}

static void check_fixtures(const char *cmdline) {
    for (int i = 0; i < 2; i++) {
        uint64_t size, h = ts_file_hash(folder_files[i], &size);
        cr_assert(h == folder_hash[i] && size == folder_size[i], "a model folder's file changed: %s after\n  %s",
                  folder_files[i], cmdline);
    }
    struct stat st;
    cr_assert(stat(OUT_FIFO, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO output %s was replaced after\n  %s",
              OUT_FIFO, cmdline);
    for (int i = 0; i < nfixtures; i++) {
        uint64_t size, h = ts_file_hash(fixtures[i].path, &size);
        cr_assert(h == fixtures[i].hash && size == fixtures[i].size, "an input changed: %s after\n  %s",
                  fixtures[i].path, cmdline);
    }
}

static void clear_outputs(void) {
    DIR *d = opendir(OUT_DIR);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", OUT_DIR, e->d_name);
        remove(p);
    }
    closedir(d);
}

/* ---- what each command is given ---------------------------------------------------------- */

/* An option's (or positional's) fixture, and the extension of an output's fresh name. */
typedef struct file_role {
    const char *option; /* long name, or a positional's metavar */
    const char *fixture_or_ext;
} file_role;

/* Values an option of kind CLI_CUSTOM (or a string option) is tried with, besides garbage. */
typedef struct samples {
    const char *option;
    const char *values[10];
} samples;

/* Pinned in free runs: the option always gets one of these (they keep the run cheap). */
typedef struct pinned {
    const char *option;
    const char *values[6];
} pinned;

typedef struct run_state run_state;

typedef struct fuzz_target {
    const char *argv0[3]; /* "attn" or "bench", "gemm" */
    const cli_spec *spec;
    file_role files[8];
    samples samples[6];
    const char *base[16]; /* a cheap, valid command line (option, value, ...) */
    pinned pins[12];
    void (*fixup)(run_state *r); /* after the pins, in free runs: rules between options */
    int usage_runs, free_runs;
} fuzz_target;

static void generate_fixup(run_state *r);

static fuzz_target targets[] = {
    {.argv0 = {"devices"}, .spec = &cmd_devices_spec, .usage_runs = 3, .free_runs = 1},
    {.argv0 = {"info"},
     .spec = &cmd_info_spec,
     .files = {{"MODEL", "model"}, {"--config", "config"}},
     .samples = {{"--latent", {"1x1x1", "4x8x8", "0x1x1", "100001x1x1", "4x8", "4x8x8x8", "-1x2x3",
                               "99999999999999999999x1x1", "4x8x8 "}},
                 {"--preset", {"sana-video-2b-480p", "sana-video-2b-720p", "nope"}}},
     .usage_runs = 11, .free_runs = 8},
    {.argv0 = {"convert"},
     .spec = &cmd_convert_spec,
     .files = {{"IN", "ckpt"}, {"--config", "config"}, {"OUT.safetensors|OUT.gguf", ".safetensors"}},
     .samples = {{"--preset", {"sana-video-2b-480p", "sana-video-2b-720p", "nope"}}, {"--quantize", {"q8_0", "q4_K", "q5_0"}}},
     .base = {"IN", "", "OUT.safetensors|OUT.gguf", ""},
     .usage_runs = 11, .free_runs = 6},
    {.argv0 = {"metrics"},
     .spec = &cmd_metrics_spec,
     .files = {{"VIDEO", "video"}, {"--json", ".json"}, {"--plot", ".svg"}},
     .samples = {{"--distances", {"1", "1,4", "1,2,3,4,5,6,7,8", "1,2,3,4,5,6,7,8,9", "0", "1,,2", ",1", "100001",
                                  "3,"}}},
     .base = {"VIDEO", "", "--block-frames", "4"},
     .usage_runs = 11, .free_runs = 6},
    {.argv0 = {"attn"},
     .spec = &cmd_attn_spec,
     .files = {{"--q", "q"}, {"--k", "q"}, {"--v", "q"}, {"--rope-positions", "pos"}, {"--output", ".npy"}},
     .base = {"--q", "", "--k", "", "--v", "", "--output", ""},
     .usage_runs = 11, .free_runs = 4},
    {.argv0 = {"forward"},
     .spec = &cmd_forward_spec,
     .files = {{"--model", "model"}, {"--config", "config"}, {"--latents", "latents"}, {"--text-embeds", "text"},
               {"--output", ".npy"}},
     .samples = {{"--timestep", {"500", "0", "1000", "1001", "-1", "500,500", "500,nan", "1,2,3", "727"}},
                 {"--preset", {"sana-video-2b-480p", "nope"}}},
     .base = {"--model", "", "--latents", "", "--timestep", "500", "--text-embeds", "", "--output", ""},
     .usage_runs = 11, .free_runs = 3},
    {.argv0 = {"decode"},
     .spec = &cmd_decode_spec,
     .files = {{"--vae", "vae"}, {"--latents", "vae-latents"}, {"--output", ".mkv"}},
     .samples = {{"--tile", {"4x4", "2x2", "4096x4096", "0x4", "4x", "4x4x4", "2x3"}},
                 {"--codec", {"ffv1", "libx264", "nope"}}},
     .base = {"--vae", "", "--latents", "", "--output", "", "--codec", "ffv1"},
     /* 2x2 tiles are the smallest cheap ones; an overlap must stay below them */
     .pins = {{"--tile", {"2x2", "4x4", "4x6"}}, {"--tile-overlap", {"0", "1"}}},
     .usage_runs = 11, .free_runs = 3},
    {.argv0 = {"encode"},
     .spec = &cmd_encode_spec,
     .files = {{"IN", "video"}, {"--vae", "vae-full"}, {"--output", ".npy"}},
     .samples = {{"--tile", {"4x4", "2x2", "4096x4096", "0x4", "4x", "4x4x4", "2x3"}}},
     .base = {"IN", "", "--vae", "", "--output", "", "--width", "32", "--height", "32"},
     /* the clip is 32 x 32: sizes up to twice that, a chunk or two of frames, small tiles */
     .pins = {{"--width", {"32", "16", "64"}}, {"--height", {"32", "8", "48"}}, {"--frames", {"1", "5", "8"}},
              {"--tile", {"2x2", "4x4"}}, {"--tile-overlap", {"0", "1"}}},
     .usage_runs = 11, .free_runs = 4},
    {.argv0 = {"generate"},
     .spec = &cmd_generate_spec,
     .files = {{"--model", "model"}, {"--text-embeds", "text"}, {"--vae", "vae"}, {"--output", ".mkv"}},
     .samples = {{"--codec", {"ffv1", "libx264", "nope", "h264"}},
                 {"--preset", {"ultrafast", "medium", "nope"}},
                 {"--prompt", {"two red balls bouncing on a blue background", "zebras", "", "red red red"}},
                 {"--prompts-from", {"/dev/null", "-", "", "no-such-fifo", "/"}}},
     .base = {"--prompt", "two red balls bouncing on a blue background", "--output", "", "--codec", "ffv1",
              "--frames", "4", "--steps", "1", "--burn-in-blocks", "0"},
     /* --frames at least a block (4 frames, the most --block-frames gets here): a video
      * shorter than one block with a burn-in crashes generate today (being fixed apart;
      * e.g. `generate -p x -o x.mkv --frames 3 --burn-in-blocks 1`) */
     .pins = {{"--frames", {"4", "5", "8"}},
              {"--steps", {"1", "2"}},
              {"--width", {"32", "16"}},
              {"--height", {"32", "16"}},
              {"--scale", {"1", "2"}},
              {"--burn-in-blocks", {"0", "1"}},
              {"--block-frames", {"1", "2", "4"}},
              {"--cpu-threads", {"0", "1"}},
              {"--seconds", {"0.25"}}},
     .fixup = generate_fixup,
     .usage_runs = 14, .free_runs = 5},
    {.argv0 = {"encode-text"},
     .spec = &cmd_encode_text_spec,
     .files = {{"--text-encoder", "gemma2"}, {"--tokenizer", "tokenizer"}, {"--output", ".npy"}},
     .samples = {{"--ids", {"2,3", "2", "2,512", "0", ",", "2,,3", "-1", "99999999999", "2, 3"}},
                 {"--prompt", {"a red ball", "", "<eos>", " leading space ", "\xff\xfe"}}},
     .base = {"--text-encoder", "", "--prompt", "a red ball", "--output", ""},
     .usage_runs = 12, .free_runs = 5},
    {.argv0 = {"bench", "gemm"},
     .spec = &bench_gemm_spec,
     .samples = {{"--shape", {"8x8x8", "4x4x4:bf16", "2x2x2:f16", "8x8x8:f64", "65537x1x1", "0x1x1", "1x1"}},
                 {"--shapes", {"default", "dit", "4096", "nope"}}},
     .base = {"--shape", "8x8x8", "--runs", "1"},
     .pins = {{"--shape", {"8x8x8", "16x8x4:bf16", "4x4x4:f16"}}, {"--runs", {"1", "2"}}},
     .usage_runs = 6, .free_runs = 2},
    {.argv0 = {"bench", "attn"}, .spec = &bench_attn_spec, .usage_runs = 5},
    {.argv0 = {"bench", "chunks"}, .spec = &bench_chunks_spec, .usage_runs = 3},
    {.argv0 = {"bench", "text"}, .spec = &bench_text_spec, .usage_runs = 5}, /* a free run writes 156 MB+ */
    /* no free runs: one block of the 2B model is 0.2 GB of weights */
    {.argv0 = {"bench", "dit"},
     .spec = &bench_dit_spec,
     .samples = {{"--latent", {"4x4", "60x104", "3x4", "0x4", "4x4x4", "4097x1"}},
                 {"--preset", {"sana-video-2b-480p", "sana-video-2b-720p", "nope"}}},
     .usage_runs = 5},
    /* no free runs: a model file of 0.2 GB or more */
    {.argv0 = {"bench", "generate"},
     .spec = &bench_generate_spec,
     .samples = {{"--latent", {"8x8", "3x4", "0x4"}}, {"--codec", {"ffv1", "nope", ""}}, {"--vae-dim", {"8", "6"}}},
     .usage_runs = 5},
    /* no free runs either: the same weights, once per rank */
    {.argv0 = {"bench", "sp"},
     .spec = &bench_sp_spec,
     .samples = {{"--ranks", {"2,4", "1", "2,,4", "65", "2,4,", "x"}},
                 {"--link", {"12.5,5", "0,5", "5", "a,b", "1,-1", "1,inf"}},
                 {"--latent", {"4x4", "3x4", "0x4"}}},
     .usage_runs = 5},
    {.argv0 = {"bench", "encode"},
     .spec = &bench_encode_spec,
     .files = {{"--out", ".mp4"}},
     .samples = {{"--memory-codec", {"libx264", "ffv1", "nope"}}, {"--codec", {"libx264", "ffv1", "nope"}}},
     .usage_runs = 6},
    {.argv0 = {"bench", "vae"},
     .spec = &bench_vae_spec,
     .files = {{"--vae", "vae"}},
     .samples = {{"--latent", {"1x1", "2x3", "513x1", "0x1", "4x6x1"}}},
     .base = {"--dim", "4", "--latent", "1x1", "--frames", "2"},
     .pins = {{"--dim", {"4", "8"}}, {"--latent", {"1x1", "2x2"}}, {"--frames", {"2", "3"}}},
     .usage_runs = 6, .free_runs = 2},
};

static const char *name_of(const cli_option *o) { return o->name ? o->name : o->metavar; }

static const char *role_of(const fuzz_target *t, const cli_option *o) {
    for (int i = 0; i < 8 && t->files[i].option; i++)
        if (strcmp(t->files[i].option, name_of(o)) == 0) return t->files[i].fixture_or_ext;
    return NULL;
}

static const samples *samples_of(const fuzz_target *t, const cli_option *o) {
    for (int i = 0; i < 6 && t->samples[i].option; i++)
        if (strcmp(t->samples[i].option, name_of(o)) == 0) return &t->samples[i];
    return NULL;
}

static const pinned *pin_of(const fuzz_target *t, const cli_option *o) {
    for (int i = 0; i < 12 && t->pins[i].option; i++)
        if (strcmp(t->pins[i].option, name_of(o)) == 0) return &t->pins[i];
    return NULL;
}

/* ---- values ------------------------------------------------------------------------------- */

static const char *const bad_numbers[] = {"nan", "inf", "-inf", "1e999", "-1e999", "", "12abc", " 1", "1 ",
                                          "NaN", "0x", "--1"};

static const char *garbage(void) {
    static const char *const fixed[] = {"", "x", "-", "--", "%s%s%n%n", "\xff\xfe\x80", "-p", "a b c", "\t",
                                        "../../../../../../etc/passwd"};
    switch (pick(3)) {
    case 0: return PICK(fixed);
    case 1: { /* random printable characters */
        char s[48];
        int n = 1 + pick(40);
        for (int i = 0; i < n; i++) s[i] = (char)(33 + pick(94));
        s[n] = '\0';
        return keep("%s", s);
    }
    default: { /* a long value */
        static char s[3001];
        memset(s, 'A' + pick(26), 3000);
        s[3000] = '\0';
        return s;
    }
    }
}

static const char *int_value(const cli_option *o) {
    long lo = o->min, hi = o->max;
    switch (pick(12)) {
    case 0: return keep("%ld", lo);
    case 1: return keep("%ld", hi);
    case 2: return keep("%ld", lo + (hi > lo ? (long)(next() % (uint64_t)((hi - lo) < 8 ? hi - lo + 1 : 8)) : 0));
    case 3: return lo > LONG_MIN ? keep("%ld", lo - 1) : "-1";
    case 4: return hi < LONG_MAX ? keep("%ld", hi + 1) : "99999999999999999999";
    case 5: return "0";
    case 6: return "-1";
    case 7: return PICK(((const char *const[]){"99999999999999999999", "-99999999999999999999", "9223372036854775807",
                                               "2147483648", "4294967296"}));
    case 8: return PICK(bad_numbers);
    case 9: return PICK(((const char *const[]){"1.0", "1e3", "0x10", "+3", "-0", "007"}));
    case 10:
        if (o->choices) return o->choices[pick(1)].name;
        return keep("%ld", lo + 1 <= hi ? lo + 1 : lo);
    default: return garbage();
    }
}

static const char *double_value(const cli_option *o) {
    switch (pick(10)) {
    case 0: return (o->bounds & (CLI_ABOVE | CLI_AT_LEAST)) ? keep("%.17g", o->lo) : "-3.5";
    case 1: return (o->bounds & (CLI_BELOW | CLI_AT_MOST)) ? keep("%.17g", o->hi) : "1e300";
    case 2: return PICK(((const char *const[]){"0.5", "1", "2", "0.25", "7"}));
    case 3: return "0";
    case 4: return PICK(((const char *const[]){"-1", "-0", "-1e-300"}));
    case 5: return PICK(((const char *const[]){"1e308", "-1e308", "1e-320", "0x1p-1074", "1.7976931348623157e308"}));
    case 6:
    case 7: return PICK(bad_numbers);
    case 8: return (o->bounds & (CLI_BELOW | CLI_AT_MOST)) ? keep("%.17g", o->hi * 1.0000001 + 1e-9) : "123456789";
    default: return garbage();
    }
}

struct run_state {
    const fuzz_target *t;
    const char *value[64]; /* per table entry: its value ("" for a flag), NULL: not given */
    bool given[64];
    int fresh;
};

/* The latent test model (--model) counts --frames in pixels but blocks in latent frames,
 * so 4 to 8 frames may be shorter than one of its blocks: no burn-in there (the crash of
 * a short video with a burn-in, see the pins) */
static void generate_fixup(run_state *r) {
    const cli_spec *s = r->t->spec;
    for (int i = 0; i < s->count; i++)
        if (r->given[i] && s->options[i].name && !strcmp(s->options[i].name, "--model"))
            for (int k = 0; k < s->count; k++)
                if (s->options[k].name && !strcmp(s->options[k].name, "--burn-in-blocks")) r->value[k] = "0";
}

static const char *fresh_output(run_state *r, const char *ext, int run) {
    return keep("%s/out-%d-%d%s", OUT_DIR, run, r->fresh++, ext ? ext : "");
}

/* Another name for an input this run gives (so the run must refuse to write it), or NULL. */
static const char *input_alias(const run_state *r) {
    const cli_spec *s = r->t->spec;
    int candidates[64], n = 0;
    for (int i = 0; i < s->count; i++) /* a file the model folder holds, by its name or a link's */
        if (s->options[i].kind == CLI_INPUT && r->given[i] && !strcmp(r->value[i], MODEL_DIR) && chance(60)) {
            const char *f = folder_files[pick(2)];
            if (chance(50)) return f;
            const char *link = keep("%s/link-%d", OUT_DIR, pick(1000));
            unlink(link);
            cr_assert_eq(symlink(f, link), 0);
            return link;
        }
    for (int i = 0; i < s->count; i++)
        if (s->options[i].kind == CLI_INPUT && r->given[i]) {
            const fixture *f = NULL;
            for (int k = 0; k < nfixtures && !f; k++) {
                const fixture *g = &fixtures[k];
                const char *v = r->value[i];
                if (!strcmp(v, g->path) || !strcmp(v, g->hard) || !strcmp(v, g->sym) || !strcmp(v, g->dotted)) f = g;
            }
            if (f) candidates[n++] = (int)(f - fixtures);
        }
    if (!n) return NULL;
    const fixture *f = &fixtures[candidates[pick(n)]];
    switch (pick(4)) {
    case 0: return f->path;
    case 1: return f->hard;
    case 2: return f->sym;
    default: return f->dotted;
    }
}

static const char *input_value(const run_state *r, const cli_option *o) {
    const char *key = role_of(r->t, o);
    const fixture *f = key ? fixture_of(key) : NULL;
    int roll = pick(100);
    if (f && roll < 60) return f->path;
    if (f && !strcmp(f->key, "model") && roll < 65) return MODEL_DIR; /* a diffusers transformer folder */
    if (f && roll < 70) return PICK(((const char *const[]){f->hard, f->sym, f->dotted}));
    if (roll < 80) return fixtures[pick(nfixtures)].path; /* another input file: the wrong kind */
    switch (pick(4)) {
    case 0: return FUZZ_DIR "/no-such-file";
    case 1: return "";
    case 2: return FUZZ_DIR;
    default: return "/dev/null";
    }
}

static const char *output_value(run_state *r, const cli_option *o, int run) {
    int roll = pick(100);
    if (roll < 63) return fresh_output(r, role_of(r->t, o), run);
    if (roll < 75) {
        switch (pick(3)) {
        case 0: return OUT_FIFO;     /* written through, or refused */
        case 1: return OUT_READONLY; /* root may replace it; another user is refused */
        default: {                   /* a link to a fresh name: written at its target */
            const char *link = fresh_output(r, ".link", run);
            unlink(link);
            cr_assert_eq(symlink(fresh_output(r, role_of(r->t, o), run), link), 0);
            return link;
        }
        }
    }
    if (roll < 88) {
        const char *a = input_alias(r);
        if (a) return a;
        return fresh_output(r, role_of(r->t, o), run);
    }
    switch (pick(3)) {
    case 0: return "";
    case 1: return OUT_DIR;
    default: return FUZZ_DIR "/no-such-dir/out.bin";
    }
}

/* A value the option accepts (as far as its table says): free runs are mostly these, so
 * that they get past the parser and run. */
static const char *tame_value(run_state *r, const cli_option *o, int run) {
    const samples *sm = samples_of(r->t, o);
    switch (o->kind) {
    case CLI_INT:
    case CLI_LONG: {
        if (o->choices && chance(20)) return o->choices[0].name;
        if (chance(15)) return keep("%ld", o->max);
        long span = o->max - o->min + 1 < 8 ? o->max - o->min + 1 : 8;
        return keep("%ld", o->min + (long)(next() % (uint64_t)span));
    }
    case CLI_DOUBLE: {
        bool lo = o->bounds & (CLI_ABOVE | CLI_AT_LEAST), hi = o->bounds & (CLI_BELOW | CLI_AT_MOST);
        double u = (double)(1 + pick(99)) / 100.0; /* in (0, 1): inside open bounds too */
        if (lo && hi) return keep("%.6g", o->lo + u * (o->hi - o->lo));
        if (lo) return keep("%.6g", o->lo + 4 * u);
        if (hi) return keep("%.6g", o->hi - 4 * u);
        return keep("%.6g", 8 * u - 2);
    }
    case CLI_CHOICE: {
        int n = 0;
        while (o->choices[n].name) n++;
        return o->choices[pick(n)].name;
    }
    case CLI_INPUT: {
        const char *key = role_of(r->t, o);
        const fixture *f = key ? fixture_of(key) : NULL;
        if (!f) return fixtures[pick(nfixtures)].path;
        return chance(75) ? f->path : PICK(((const char *const[]){f->hard, f->sym, f->dotted}));
    }
    case CLI_OUTPUT: {
        const char *a = chance(10) ? input_alias(r) : NULL;
        return a ? a : fresh_output(r, role_of(r->t, o), run);
    }
    default:
        if (sm) {
            int n = 0;
            while (n < 10 && sm->values[n]) n++;
            return sm->values[pick(n)];
        }
        return o->kind == CLI_FLAG ? "" : "x";
    }
}

/* Anything: good, at the edge, zero, negative, huge, non-finite, empty or garbage. */
static const char *wild_value(run_state *r, const cli_option *o, int run) {
    const samples *sm = samples_of(r->t, o);
    if (sm && chance(60)) {
        int n = 0;
        while (n < 10 && sm->values[n]) n++;
        return sm->values[pick(n)];
    }
    switch (o->kind) {
    case CLI_FLAG: return "";
    case CLI_INT:
    case CLI_LONG: return int_value(o);
    case CLI_DOUBLE: return double_value(o);
    case CLI_CHOICE: {
        int n = 0;
        while (o->choices[n].name) n++;
        if (chance(70)) return o->choices[pick(n)].name;
        return PICK(((const char *const[]){"", "X", "ALL", "on off", "nope"}));
    }
    case CLI_INPUT: return input_value(r, o);
    case CLI_OUTPUT: return output_value(r, o, run);
    default: return garbage();
    }
}

/* ---- one run ------------------------------------------------------------------------------ */

typedef struct stats {
    int runs, by_status[3];
    double seconds;
} stats;

static int option_index(const cli_spec *s, const char *name) {
    for (int i = 0; i < s->count; i++)
        if (!strcmp(name_of(&s->options[i]), name)) return i;
    return -1;
}

/* Emits the command line: positionals in order, the options in random order. `tail` (if
 * not NULL) goes last. */
static int build_argv(const run_state *r, const char **argv, const char *const *tail) {
    const fuzz_target *t = r->t;
    const cli_spec *s = t->spec;
    int n = 0;
    argv[n++] = LONGVK_CLI;
    for (int i = 0; i < 3 && t->argv0[i]; i++) argv[n++] = t->argv0[i];
    int order[64], no = 0;
    for (int i = 0; i < s->count; i++) {
        if (!r->given[i]) continue;
        if (!s->options[i].name) argv[n++] = r->value[i];
        else order[no++] = i;
    }
    for (int i = no - 1; i > 0; i--) { /* shuffle */
        int j = pick(i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    for (int k = 0; k < no; k++) {
        const cli_option *o = &s->options[order[k]];
        argv[n++] = o->alias && chance(50) ? o->alias : o->name;
        if (o->kind != CLI_FLAG) argv[n++] = r->value[order[k]];
    }
    for (int i = 0; tail && tail[i]; i++) argv[n++] = tail[i];
    argv[n] = NULL;
    return n;
}

static bool verbose; /* LONGVK_FUZZ_VERBOSE=1: every command line, its exit status and message */

static void execute(const char **argv, bool must_be_usage_error, stats *st) {
    char *line = ts_argv_text(argv);
    ts_proc p = ts_spawn(argv, RUN_TIMEOUT);
    st->runs++;
    st->seconds += p.seconds;
    cr_assert(!p.timed_out, "timed out after %.0f s:\n  %s", RUN_TIMEOUT, line);
    cr_assert(p.signal == 0, "killed by signal %d:\n  %s\nstderr:\n%s", p.signal, line, p.err);
    cr_assert(!strstr(p.err, "runtime error") && !strstr(p.err, "Sanitizer"), "sanitizer report:\n  %s\n%s", line,
              p.err);
    cr_assert(p.status >= 0 && p.status <= 2, "exit status %d (0, 1 or 2 only):\n  %s\nstderr:\n%s", p.status, line,
              p.err);
    if (must_be_usage_error)
        cr_assert_eq(p.status, 2, "a usage error must be exit 2, before any work; got %d:\n  %s\nstderr:\n%s",
                     p.status, line, p.err);
    st->by_status[p.status]++;
    if (verbose) {
        char *nl = strchr(p.err, '\n');
        if (nl) *nl = '\0';
        cr_log_info("exit %d in %.1f s: %s\n    %s", p.status, p.seconds, line, p.err);
    }
    check_fixtures(line);
    clear_outputs();
    reset_read_only();
    free(p.err);
    free(line);
}

/* Random options on top of what r already holds: each table entry with probability pct,
 * with a wild value (else a tame one) with probability wild_pct. */
static void add_random(run_state *r, int pct, int wild_pct, int run) {
    const cli_spec *s = r->t->spec;
    /* inputs first, so that outputs can name them */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->count; i++) {
            bool out = s->options[i].kind == CLI_OUTPUT;
            if (out != (pass == 1) || !chance(pct)) continue;
            const cli_option *o = &s->options[i];
            r->value[i] = chance(wild_pct) ? wild_value(r, o, run) : tame_value(r, o, run);
            r->given[i] = true;
        }
}

static void usage_run(const fuzz_target *t, int run, stats *st) {
    run_state r = {.t = t};
    const cli_spec *s = t->spec;
    add_random(&r, 35, 70, run);
    /* then one certain usage error */
    const char *tail[3] = {NULL};
    int kinds[64], nk = 0; /* options that can take a wrong value */
    for (int i = 0; i < s->count; i++)
        if (s->options[i].kind != CLI_FLAG && s->options[i].kind != CLI_STRING) kinds[nk++] = i;
    const char *alias = input_alias(&r);
    int outputs[64], nout = 0;
    for (int i = 0; i < s->count; i++)
        if (s->options[i].kind == CLI_OUTPUT) outputs[nout++] = i;
    int what = pick(4);
    if (what == 1 && nk) {
        int i = kinds[pick(nk)];
        const cli_option *o = &s->options[i];
        r.given[i] = true;
        if (o->kind == CLI_INPUT || o->kind == CLI_OUTPUT) r.value[i] = "";
        else if (o->kind == CLI_CHOICE) r.value[i] = "no-such-choice";
        else if (o->kind == CLI_CUSTOM) r.value[i] = PICK(((const char *const[]){"", "nan", "garbage"}));
        else r.value[i] = PICK(bad_numbers);
    } else if (what == 2 && nk) {
        /* a value missing at the end: only for named options (a positional takes none) */
        int i = kinds[pick(nk)];
        if (s->options[i].name) {
            r.given[i] = false;
            tail[0] = s->options[i].name;
        } else {
            tail[0] = "--no-such-option";
        }
    } else if (what == 3 && nout && alias) {
        int i = outputs[pick(nout)];
        r.given[i] = true;
        r.value[i] = alias;
    } else {
        tail[0] = PICK(((const char *const[]){"--no-such-option", "-Z", "--json=1", "---", "--help-me"}));
    }
    const char *argv[160];
    build_argv(&r, argv, tail);
    execute(argv, true, st);
}

static void free_run(const fuzz_target *t, int run, stats *st) {
    run_state r = {.t = t};
    const cli_spec *s = t->spec;
    for (int i = 0; i < 16 && t->base[i]; i += 2) { /* the cheap valid line; "" is its fixture or a fresh output */
        int k = option_index(s, t->base[i]);
        cr_assert(k >= 0, "%s: no option %s", s->command, t->base[i]);
        const cli_option *o = &s->options[k];
        const char *v = t->base[i + 1];
        if (!*v && o->kind == CLI_INPUT) v = fixture_of(role_of(t, o))->path;
        if (!*v && o->kind == CLI_OUTPUT) v = fresh_output(&r, role_of(t, o), run);
        r.value[k] = v;
        r.given[k] = true;
    }
    add_random(&r, 20, 8, run);
    for (int i = 0; i < s->count; i++) { /* the costly ones back to cheap values */
        const pinned *p = pin_of(t, &s->options[i]);
        if (!p) continue;
        int n = 0;
        while (n < 6 && p->values[n]) n++;
        r.value[i] = p->values[pick(n)];
        r.given[i] = true;
    }
    if (t->fixup) t->fixup(&r);
    const char *argv[160];
    build_argv(&r, argv, NULL);
    execute(argv, false, st);
}

/* Each output of a command's cheap valid line made, in turn, a FIFO, a read-only file, a
 * link to a fresh name, and (with --model the model folder) a file of that folder or a
 * link to one: the last must be refused (exit 2); every input stays as it was, the FIFO a
 * FIFO. Random sampling alone reaches these rarely. */
static void special_output_runs(const fuzz_target *t, int run, stats *st) {
    const cli_spec *s = t->spec;
    int model = option_index(s, "--model");
    for (int i = 0; i < s->count; i++) {
        if (s->options[i].kind != CLI_OUTPUT) continue;
        for (int kind = 0; kind < 4; kind++) {
            if (kind == 3 && (model < 0 || s->options[model].kind != CLI_INPUT)) continue;
            arena_used = 0;
            run_state r = {.t = t};
            for (int k = 0; k < 16 && t->base[k]; k += 2) {
                int j = option_index(s, t->base[k]);
                const cli_option *o = &s->options[j];
                const char *v = t->base[k + 1];
                if (!*v && o->kind == CLI_INPUT) v = fixture_of(role_of(t, o))->path;
                if (!*v && o->kind == CLI_OUTPUT) v = fresh_output(&r, role_of(t, o), run);
                r.value[j] = v;
                r.given[j] = true;
            }
            const char *v = NULL;
            if (kind == 0) v = OUT_FIFO;
            else if (kind == 1) v = OUT_READONLY;
            else if (kind == 2 || kind == 3) {
                const char *to = kind == 2 ? fresh_output(&r, role_of(t, &s->options[i]), run) : folder_files[pick(2)];
                v = to;
                if (kind == 2 || chance(50)) {
                    v = fresh_output(&r, ".link", run);
                    unlink(v);
                    cr_assert_eq(symlink(to, v), 0);
                }
            }
            if (kind == 3) {
                r.value[model] = MODEL_DIR;
                r.given[model] = true;
            }
            r.value[i] = v;
            r.given[i] = true;
            if (t->fixup) t->fixup(&r);
            const char *argv[160];
            build_argv(&r, argv, NULL);
            execute(argv, kind == 3, st);
        }
    }
}

Test(cli_fuzz, random_command_lines, .timeout = 900) {
    const char *seed_env = getenv("LONGVK_FUZZ_SEED"), *scale_env = getenv("LONGVK_FUZZ_SCALE");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 0x10c11f022ull;
    int scale = scale_env ? atoi(scale_env) : 1;
    if (scale < 1) scale = 1;
    verbose = getenv("LONGVK_FUZZ_VERBOSE") != NULL;
    rng = seed;
    make_fixtures();
    make_special_outputs();
    reset_read_only();
    clear_outputs();
    pthread_t reader;
    cr_assert_eq(pthread_create(&reader, NULL, fifo_reader, NULL), 0);
    cr_log_info("seed 0x%llx, scale %d", (unsigned long long)seed, scale);
    for (size_t k = 0; k < sizeof targets / sizeof *targets; k++) {
        const fuzz_target *t = &targets[k];
        stats st = {0};
        for (int i = 0; i < t->usage_runs * scale; i++) {
            arena_used = 0;
            usage_run(t, i, &st);
        }
        for (int i = 0; i < t->free_runs * scale; i++) {
            arena_used = 0;
            free_run(t, 1000 + i, &st);
        }
        if (t->free_runs) special_output_runs(t, 2000, &st);
        cr_log_info("%-13s %3d runs in %5.1f s: exit 0 x%d, 1 x%d, 2 x%d", t->spec->command, st.runs, st.seconds,
                    st.by_status[0], st.by_status[1], st.by_status[2]);
    }
    fifo_stop = 1; /* the reader waits in open: a writer that closes at once ends it */
    for (int i = 0; i < 300; i++) {
        int fd = open(OUT_FIFO, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            break;
        }
        usleep(10000);
    }
    pthread_join(reader, NULL);
}
