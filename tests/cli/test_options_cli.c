/* The CLI's option tables (pipelines/cli_options/options.h) through the binary (LONGVK_CLI) and
 * through the parser's value readers: non-finite and malformed numbers are usage errors
 * naming the flag, an output that is an input (by any name: ./x, a hard link, a symbolic
 * link) is refused before anything is written, unknown options are usage errors,
 * every command's --help names every option of its table, and `generate --model X --help`
 * shows model X's defaults. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"
#include "options.h"
#include "test_clips.h"
#include "ts_files.h"
#include "ts_process.h"

#define TINY LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VAE LONGVK_ASSETS_DIR "/testdata/wan-vae/wan-vae-tiny.weights.safetensors"
#define PTH LONGVK_ASSETS_DIR "/fixtures/pth-basic.pth"

/* "<tmp>/cliopt_<name>" (static rotating buffer) */
static const char *tmp(const char *name) {
    static char buf[16][512];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, 512, "%s/cliopt_%s", LONGVK_TEST_TMP, name);
    return p;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *data = ts_slurp(from, &n);
    ts_spit(to, data, n);
    free(data);
}

/* Runs `longvk ARGS...` (NULL-terminated) and returns how it ended; stderr in r->err. */
static ts_proc run(const char *first, ...) {
    const char *argv[64] = {LONGVK_CLI, first};
    va_list ap;
    va_start(ap, first);
    int n = 2;
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 63;) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return ts_spawn(argv, 300);
}

/* The run must be a usage error (exit 2) whose message names every string in `needles`
 * ('|'-separated). */
static void expect_usage_error(ts_proc r, const char *needles, const char *what) {
    cr_assert(!r.timed_out && r.signal == 0, "%s: ended by signal %d", what, r.signal);
    cr_assert_eq(r.status, 2, "%s: exit %d, want 2; stderr:\n%s", what, r.status, r.err);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", needles);
    for (char *save = NULL, *n = strtok_r(copy, "|", &save); n; n = strtok_r(NULL, "|", &save))
        cr_assert(strstr(r.err, n), "%s: the message does not name '%s':\n%s", what, n, r.err);
    free(r.err);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- the value readers ---------------------------------------------------------------------- */

Test(cli_options, finite_numbers_only) {
    double d = -7;
    cr_assert(cli_parse_finite("0.25", &d));
    cr_assert_eq(d, 0.25);
    cr_assert(cli_parse_finite("-3e2", &d));
    cr_assert_eq(d, -300.0);
    cr_assert(cli_parse_finite("1e-320", &d), "an underflow to a subnormal is a finite value");
    cr_assert(d > 0 && d < 1e-300);
    d = 42;
    const char *bad[] = {"nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "", " 1", "1 ",
                         "1x", "x", "0.5.5", "--1", "1e", "nan(0x1)"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(!cli_parse_finite(bad[i], &d), "'%s' was accepted", bad[i]);
        cr_assert_eq(d, 42, "'%s' changed the destination", bad[i]);
    }
}

Test(cli_options, integers_and_sizes) {
    long v = 5;
    cr_assert(cli_parse_long("-12", -100, 100, &v));
    cr_assert_eq(v, -12);
    cr_assert(cli_parse_long("100", -100, 100, &v));
    cr_assert_eq(v, 100);
    v = 5;
    const char *bad[] = {"101", "-101", "", " 1", "1 ", "1.0", "1e2", "0x10", "nan", "99999999999999999999", "+"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(!cli_parse_long(bad[i], -100, 100, &v), "'%s' was accepted", bad[i]);
        cr_assert_eq(v, 5);
    }
    long d[3] = {0};
    cr_assert(cli_parse_dims("4x60x104", 3, 1, 100000, d));
    cr_assert(d[0] == 4 && d[1] == 60 && d[2] == 104, "%ld %ld %ld", d[0], d[1], d[2]);
    const char *bad_dims[] = {"4x60", "4x60x104x1", "4x60x", "x4x60", "4 x60x104", "-4x60x104", "+4x60x104",
                              "0x60x104", "4x60x100001", "4x60x99999999999999999999", "", "4X60X104"};
    for (size_t i = 0; i < sizeof bad_dims / sizeof *bad_dims; i++)
        cr_assert(!cli_parse_dims(bad_dims[i], 3, 1, 100000, d), "'%s' was accepted", bad_dims[i]);
}

/* ggml's type names in other cases are taken (aliases, not listed): q4_k, Q4_K, Q8_0 */
Test(cli_options, weight_dtypes_in_other_cases) {
    const char *spellings[][2] = {{"q4_k", "weights q4_K"}, {"Q4_K", "weights q4_K"}, {"Q8_0", "weights q8_0"},
                                  {"q4_1", "--weights-dtype"}};
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++) {
        char cmd[1024], *out;
        snprintf(cmd, sizeof cmd, "%s info --plan --preset sana-video-2b-480p --weights-dtype %s 2>&1", LONGVK_CLI,
                 spellings[i][0]);
        int rc = ts_run(cmd, &out);
        cr_assert(rc == (i < 3 ? 0 : 2) && strstr(out, spellings[i][1]), "--weights-dtype %s: exit %d\n%s",
                  spellings[i][0], rc, out);
        free(out);
    }
}

/* ---- non-finite and malformed values on the command line ------------------------------------ */

Test(cli_options, non_finite_values_are_usage_errors, .timeout = 300) {
    const char *out = tmp("never.mp4"), *json = tmp("never.json");
    remove(out);
    remove(json);
    const char *video = tmp("clip.mkv");
    cr_assert_eq(clip_write(video, "ffv1", CLIP_GRADIENT_SQUARE, 32, 32, 16, 8, 4, 4), LV_OK, "%s", lv_last_error());
    const char *values[] = {"nan", "inf", "-inf", "1e999", "", "1.5x", " 2"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        const char *v = values[i];
        expect_usage_error(run("generate", "-p", "x", "-o", out, "--cfg-scale", v, NULL), "--cfg-scale", "--cfg-scale");
        expect_usage_error(run("generate", "-p", "x", "-o", out, "--shift", v, NULL), "--shift", "--shift");
        expect_usage_error(run("generate", "-p", "x", "-o", out, "--seconds", v, NULL), "--seconds", "--seconds");
        expect_usage_error(run("generate", "-p", "x", "-o", out, "--fps", v, NULL), "--fps", "--fps");
        expect_usage_error(run("generate", "-p", "x", "-o", out, "--frames", v, NULL), "--frames", "--frames");
        expect_usage_error(run("generate", "-p", "x", "-o", out, "-s", v, NULL), "-s", "-s");
        expect_usage_error(run("metrics", video, "--block-frames", "4", "--freeze-mae", v, "--json", json, NULL),
                           "--freeze-mae", "--freeze-mae");
        expect_usage_error(run("metrics", video, "--block-frames", v, NULL), "--block-frames", "metrics --block-frames");
        expect_usage_error(run("attn", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "-o", out, "--eps", v, NULL),
                           "--eps", "attn --eps");
        expect_usage_error(run("attn", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "-o", out, "--decay", v, NULL),
                           "--decay", "attn --decay");
        expect_usage_error(run("forward", "--model", TINY, "--latents", "x.npy", "--text-embeds", "t.safetensors",
                               "-o", out, "--timestep", v, NULL),
                           "--timestep", "forward --timestep");
        expect_usage_error(run("decode", "--vae", VAE, "--latents", "x.npy", "-o", out, "--fps", v, NULL), "--fps",
                           "decode --fps");
        expect_usage_error(run("info", "--text-tokens", v, NULL), "--text-tokens", "info --text-tokens");
        expect_usage_error(run("bench", "gemm", "--runs", v, NULL), "--runs", "bench gemm --runs");
        expect_usage_error(run("bench", "encode", "--frames", v, NULL), "--frames", "bench encode --frames");
        expect_usage_error(run("bench", "vae", "--dim", v, NULL), "--dim", "bench vae --dim");
    }
    /* a list with a non-finite member, and range errors naming the bound */
    expect_usage_error(run("forward", "--model", TINY, "--latents", "x.npy", "--text-embeds", "t", "-o", out,
                           "--timestep", "500,nan", NULL),
                       "--timestep", "forward --timestep 500,nan");
    expect_usage_error(run("generate", "-p", "x", "-o", out, "--shift", "0", NULL), "--shift|> 0", "--shift 0");
    expect_usage_error(run("generate", "-p", "x", "-o", out, "--seconds", "86401", NULL), "--seconds|(0, 86400]",
                       "--seconds 86401");
    expect_usage_error(run("attn", "--q", "q", "--k", "k", "--v", "v", "-o", out, "--decay", "1.5", NULL),
                       "--decay|[0, 1]", "--decay 1.5");
    cr_assert(!exists(out) && !exists(json), "a usage error left an output behind");
}

/* ---- an output that is an input -------------------------------------------------------------- */

typedef struct guarded {
    const char *path;
    uint64_t hash, size;
} guarded;

static guarded guard(const char *path) {
    guarded g = {.path = path};
    g.hash = ts_file_hash(path, &g.size);
    return g;
}

static void unchanged(const guarded *g, const char *what) {
    uint64_t size, h = ts_file_hash(g->path, &size);
    cr_assert(h == g->hash && size == g->size, "%s: %s changed (%llu bytes, was %llu)", what, g->path,
              (unsigned long long)size, (unsigned long long)g->size);
}

Test(cli_options, an_output_that_is_an_input_is_refused, .timeout = 300) {
    /* copies of real inputs, and other names for them */
    const char *video = tmp("same_video.mkv"), *pth = tmp("same.pth"), *model = tmp("same_model.safetensors");
    const char *vae = tmp("same_vae.safetensors"), *npy = tmp("same_x.npy");
    cr_assert_eq(clip_write(video, "ffv1", CLIP_GRADIENT_SQUARE, 32, 32, 16, 8, 4, 4), LV_OK, "%s", lv_last_error());
    copy_file(PTH, pth);
    copy_file(TINY, model);
    copy_file(VAE, vae);
    float x[2 * 3 * 4] = {1, 2, 3};
    int64_t shape[3] = {2, 3, 4};
    cr_assert_eq(lv_npy_write(npy, 3, shape, x), LV_OK, "%s", lv_last_error());
    const char *hard = tmp("same_hard.mkv"), *sym = tmp("same_sym.mkv"), *npy_sym = tmp("same_sym.npy");
    const char *model_hard = tmp("same_model_hard.safetensors");
    remove(hard);
    remove(sym);
    remove(npy_sym);
    remove(model_hard);
    cr_assert_eq(link(video, hard), 0);
    cr_assert_eq(symlink(video, sym), 0);
    cr_assert_eq(symlink(npy, npy_sym), 0);
    cr_assert_eq(link(model, model_hard), 0);
    char dotted[600]; /* the same file by another spelling: <tmp>/./cliopt_same_video.mkv */
    snprintf(dotted, sizeof dotted, "%s/./cliopt_same_video.mkv", LONGVK_TEST_TMP);
    guarded g[] = {guard(video), guard(pth), guard(model), guard(vae), guard(npy)};
    const char *json = tmp("same_ok.json");
    remove(json);

    expect_usage_error(run("metrics", video, "--block-frames", "4", "--json", video, NULL), "--json|VIDEO",
                       "metrics --json VIDEO");
    expect_usage_error(run("metrics", video, "--block-frames", "4", "--plot", dotted, NULL), "--plot|VIDEO",
                       "metrics --plot ./VIDEO");
    expect_usage_error(run("metrics", video, "--block-frames", "4", "--json", hard, NULL), "--json|VIDEO",
                       "metrics --json hard link");
    expect_usage_error(run("metrics", sym, "--block-frames", "4", "--json", json, "--plot", video, NULL),
                       "--plot|VIDEO", "metrics symlink VIDEO --plot VIDEO");
    expect_usage_error(run("metrics", video, "--block-frames", "4", "--json", json, "--plot", json, NULL),
                       "--json|--plot", "metrics --json X --plot X");
    expect_usage_error(run("convert", pth, pth, NULL), "IN|OUT.safetensors", "convert a a");
    expect_usage_error(run("convert", model, model_hard, NULL), "IN|OUT.safetensors", "convert a hardlink(a)");
    expect_usage_error(run("generate", "-p", "x", "--model", model, "-o", model, NULL), "--model|--output",
                       "generate --model m -o m");
    expect_usage_error(run("generate", "-p", "x", "--model", model, "-o", model_hard, NULL), "--model|--output",
                       "generate --model m -o hardlink(m)");
    expect_usage_error(run("generate", "-p", "x", "--model", model, "--text-embeds", video, "--vae", vae, "-o", sym,
                           NULL),
                       "--text-embeds|--output", "generate --text-embeds v -o symlink(v)");
    expect_usage_error(run("generate", "-p", "x", "--model", model, "--vae", vae, "-o", vae, NULL), "--vae|--output",
                       "generate --vae v -o v");
    expect_usage_error(run("decode", "--vae", vae, "--latents", npy, "-o", npy_sym, NULL), "--latents|--output",
                       "decode -o symlink(latents)");
    expect_usage_error(run("decode", "--vae", vae, "--latents", npy, "-o", vae, NULL), "--vae|--output",
                       "decode -o vae");
    expect_usage_error(run("forward", "--model", model, "--latents", npy, "--timestep", "500", "--text-embeds", model,
                           "-o", npy, NULL),
                       "--latents|--output", "forward -o latents");
    expect_usage_error(run("forward", "--model", model, "--latents", npy, "--timestep", "500", "--text-embeds", vae,
                           "-o", model_hard, NULL),
                       "--model|--output", "forward -o hardlink(model)");
    expect_usage_error(run("attn", "--q", npy, "--k", npy, "--v", npy, "-o", npy_sym, NULL), "--q|--output",
                       "attn -o symlink(q)");
    expect_usage_error(run("attn", "--q", npy, "--k", npy, "--v", npy, "--rope-positions", video, "-o", hard, NULL),
                       "--rope-positions|--output", "attn -o hardlink(positions)");
    /* generate's resume state, OUT.longvk-state, is written too: not onto an input */
    char state[600];
    snprintf(state, sizeof state, "%s.longvk-state", tmp("same_out.mkv"));
    remove(state);
    cr_assert_eq(symlink(model, state), 0);
    expect_usage_error(run("generate", "-p", "x", "--model", model, "-o", tmp("same_out.mkv"), NULL),
                       "longvk-state|--model", "generate: the state file is the model");
    remove(state);
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) unchanged(&g[i], "after the refused commands");
    cr_assert(!exists(json), "a refused command wrote %s", json);

    /* and a distinct output still works */
    ts_proc r = run("metrics", sym, "--block-frames", "4", "--json", json, NULL);
    cr_assert_eq(r.status, 0, "metrics with its own --json: %s", r.err);
    free(r.err);
    cr_assert(exists(json));
    unchanged(&g[0], "after metrics");
    remove(hard);
    remove(sym);
    remove(npy_sym);
    remove(model_hard);
}

/* ---- unknown options, --help -------------------------------------------------------------- */

/* text with every run of white space made one space (--help wraps long defaults) */
static char *flat(const char *text) {
    char *s = malloc(strlen(text) + 1), *p = s;
    cr_assert_not_null(s);
    for (const char *c = text; *c; c++) {
        if (*c == ' ' || *c == '\n') {
            if (p > s && p[-1] == ' ') continue;
            *p++ = ' ';
        } else {
            *p++ = *c;
        }
    }
    *p = '\0';
    return s;
}

/* The names --help must show for an option (its long name, its alias, or a positional's
 * name), its default, and that it has help at all. */
static void expect_mentions(const char *text, const cli_spec *spec, const char *what) {
    char *flat_text = flat(text);
    for (int i = 0; i < spec->count; i++) {
        const cli_option *o = &spec->options[i];
        const char *name = o->name ? o->name : o->metavar;
        cr_assert_not_null(name, "%s: option %d has neither a name nor a metavar", what, i);
        cr_assert(strstr(text, name), "%s --help does not mention '%s':\n%s", what, name, text);
        if (o->alias) cr_assert(strstr(text, o->alias), "%s --help does not mention '%s'", what, o->alias);
        if (o->def) {
            char want[512], *flat_want;
            snprintf(want, sizeof want, "(default: %s)", o->def);
            flat_want = flat(want);
            cr_assert(strstr(flat_text, flat_want), "%s --help does not state '%s'", what, want);
            free(flat_want);
        }
        cr_assert(o->help && *o->help, "%s: %s has no help text", what, name);
    }
    free(flat_text);
}

Test(cli_options, help_names_every_option, .timeout = 120) {
    for (int c = 0; c < cli_command_count; c++) {
        const cli_command *cmd = &cli_commands[c];
        ts_proc r = run(cmd->name, "--help", NULL);
        cr_assert(r.status == 0 && r.signal == 0, "longvk %s --help: exit %d", cmd->name, r.status);
        free(r.err);
        /* stdout went to /dev/null in ts_spawn: read it through a file */
        char command[1024], *text;
        snprintf(command, sizeof command, "%s %s --help 2>/dev/null", LONGVK_CLI, cmd->name);
        cr_assert_eq(ts_run(command, &text), 0, "%s", command);
        cr_assert(strncmp(text, "usage: longvk ", 14) == 0, "%s", text);
        if (cmd->spec) {
            if (cmd->spec->prepare_help) cmd->spec->prepare_help(); /* run-time defaults, as --help shows them */
            expect_mentions(text, cmd->spec, cmd->name);
        } else { /* bench: every benchmark's options */
            for (int b = 0; b < bench_count; b++) {
                cr_assert(strstr(text, bench_entries[b].name), "bench --help lacks %s", bench_entries[b].name);
                expect_mentions(text, bench_entries[b].spec, "bench");
            }
        }
        free(text);
    }
    for (int b = 0; b < bench_count; b++) {
        char command[1024], *text, what[64];
        snprintf(command, sizeof command, "%s bench %s --help 2>/dev/null", LONGVK_CLI, bench_entries[b].name);
        cr_assert_eq(ts_run(command, &text), 0, "%s", command);
        snprintf(what, sizeof what, "bench %s", bench_entries[b].name);
        expect_mentions(text, bench_entries[b].spec, what);
        free(text);
    }
}

/* `generate --model X --help` (either order) shows model X's defaults, read from its card
 * (issue 53, item 8): the tiny latent model's --scale 1, 16 fps, 832x480, blocks of 10 and 4
 * steps (lv_model_card_longsana), not the embedded model's --scale 8; without --model the
 * help says whose defaults it shows, and a model that cannot be read is named. */
static char *generate_help(const char *args) {
    char command[1024], *text;
    snprintf(command, sizeof command, "%s generate %s 2>&1", LONGVK_CLI, args);
    cr_assert_eq(ts_run(command, &text), 0, "%s:\n%s", command, text);
    char *f = flat(text);
    free(text);
    return f;
}

Test(cli_options, generate_help_shows_the_named_models_defaults, .timeout = 120) {
    const char *orders[] = {"--model " TINY " --help", "--help --model " TINY};
    for (int i = 0; i < 2; i++) {
        char *text = generate_help(orders[i]);
        cr_assert(strstr(text, "--scale K upscale K times when encoding (default: 1 for this latent model"), "%s", text);
        cr_assert(strstr(text, "(default: the model's, 16)"), "fps: %s", text);
        cr_assert(strstr(text, "(default: the model's, 832)"), "width: %s", text);
        cr_assert(strstr(text, "(default: the model's, 480)"), "height: %s", text);
        cr_assert(strstr(text, "frames per block (default: the model's, 10)"), "%s", text);
        cr_assert(strstr(text, "(default: the model's, 4, also the most"), "steps: %s", text);
        cr_assert(strstr(text, "The defaults above are those of --model " TINY " (a latent-space model)"), "%s", text);
        cr_assert_null(strstr(text, "8 for the embedded model"), "%s", text);
        free(text);
    }
    char *text = generate_help("--help");
    cr_assert(strstr(text, "(default: 8 for the embedded model (256x256), 1 for a latent model)"), "%s", text);
    cr_assert(strstr(text, "The defaults above are the embedded model's; `longvk generate --model X --help` shows "
                           "those of model X."), "%s", text);
    free(text);
    text = generate_help("--model " LONGVK_TEST_TMP "/no-such-model.safetensors --help");
    cr_assert(strstr(text, "--model " LONGVK_TEST_TMP "/no-such-model.safetensors could not be read"), "%s", text);
    cr_assert(strstr(text, "the defaults above are the embedded model's"), "%s", text);
    cr_assert(strstr(text, "(default: 8 for the embedded model (256x256)"), "%s", text);
    free(text);
}

Test(cli_options, unknown_options_are_usage_errors) {
    for (int c = 0; c < cli_command_count; c++) {
        const char *name = cli_commands[c].name;
        if (!cli_commands[c].spec) continue;
        expect_usage_error(run(name, "--no-such-option", NULL), "--no-such-option", name);
        expect_usage_error(run(name, "-Z", "1", NULL), "-Z", name);
    }
    for (int b = 0; b < bench_count; b++)
        expect_usage_error(run("bench", bench_entries[b].name, "--no-such-option", NULL), "--no-such-option",
                           bench_entries[b].name);
    expect_usage_error(run("bench", "no-such-benchmark", NULL), "no-such-benchmark", "bench no-such-benchmark");
    expect_usage_error(run("no-such-command", NULL), "no-such-command", "no-such-command");
    /* a value missing at the end names the option */
    expect_usage_error(run("generate", "-p", "x", "-o", tmp("never.mp4"), "--steps", NULL), "--steps", "--steps");
    expect_usage_error(run("metrics", "v.mkv", "--block-frames", NULL), "--block-frames", "--block-frames");
    /* a choice outside its list names the option and the choices */
    expect_usage_error(run("attn", "--q", "q", "--k", "k", "--v", "v", "-o", "o", "--mode", "sideways", NULL),
                       "--mode|full, causal or block", "--mode sideways");
    expect_usage_error(run("bench", "gemm", "--variant", "fast", NULL), "--variant|auto, register, tiled or coopmat",
                       "--variant fast");
}
