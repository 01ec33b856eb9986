/* The option-table parser and --help printer (options.h), for the commands and the benchmarks. */
#include "options.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk/dit.h"
#include "longvk/engine.h"
#include "longvk/files.h"
#include "longvk/sana.h"

#define HELP_WIDTH 90 /* --help lines wrap at this column */
#define LABEL_MAX 28  /* longer option labels put their help on the next line */

int cli_launcher_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (int i = 0; i < 2; i++) {
        const char *v = lv_env_str(names[i]);
        if (v) return atoi(v);
    }
    return 0;
}

int cli_other_rank_fails(void) {
    /* the launcher ends the job as soon as one process fails (Open MPI 5's prterun drops the
     * others' output then): a silent rank that failed at once could end it before rank 0's
     * message is out, so it waits a moment first */
    sleep(1);
    return 2;
}

int cli_usage_error(const char *command, const char *fmt, ...) {
    /* every rank of mpirun parses the same command line and finds the same fault: rank 0 says it */
    if (cli_launcher_rank() > 0) return cli_other_rank_fails();
    fprintf(stderr, "longvk %s: ", command);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

/* ---- values ----------------------------------------------------------------------------- */

/* strtod and strtol skip leading white space and stop at the first character they cannot
 * read; a value must be all number, so both are checked here. */
static int number_start(const char *text) { return text && *text && !isspace((unsigned char)*text); }

int cli_parse_finite(const char *text, double *out) {
    if (!number_start(text)) return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* ERANGE with a finite result is an underflow to 0 or a subnormal: a fine value */
    if (end == text || *end || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

int cli_parse_long(const char *text, long min, long max, long *out) {
    if (!number_start(text)) return 0;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) return 0;
    *out = v;
    return 1;
}

int cli_parse_dims(const char *text, int n, long min, long max, long *out) {
    const char *p = text;
    for (int i = 0; i < n; i++) {
        if (!p || !isdigit((unsigned char)*p)) return 0; /* no sign, no space */
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v < min || v > max) return 0;
        out[i] = v;
        if (i + 1 < n && *end != 'x') return 0;
        p = i + 1 < n ? end + 1 : end;
    }
    return *p == '\0';
}

static const char *display_name(const cli_option *o) { return o->name ? o->name : o->metavar; }

static bool takes_value(const cli_option *o) { return o->kind != CLI_FLAG; }

/* the choices' names, "a, b or c" (sep ", ", last_sep " or ") or "a|b|c" */
static void choice_list(const cli_choice *c, const char *sep_, const char *last_sep, char *buf, size_t size) {
    int n = 0, total = 0;
    for (const cli_choice *k = c; k && k->name; k++) total++;
    size_t at = 0;
    buf[0] = '\0';
    for (const cli_choice *k = c; k && k->name && at < size; k++) {
        const char *sep = n == 0 ? "" : n == total - 1 ? last_sep : sep_;
        at += (size_t)snprintf(buf + at, size - at, "%s%s", sep, k->name);
        n++;
    }
}

static const cli_choice *find_choice(const cli_choice *c, const char *v) {
    for (const cli_choice *k = c; k && k->name; k++)
        if (strcmp(k->name, v) == 0) return k;
    return NULL;
}

/* "in (0, 86400]", "> 0", ... */
static void bounds_text(const cli_option *o, char *buf, size_t size) {
    bool lo = o->bounds & (CLI_ABOVE | CLI_AT_LEAST), hi = o->bounds & (CLI_BELOW | CLI_AT_MOST);
    if (lo && hi)
        snprintf(buf, size, "in %c%g, %g%c", o->bounds & CLI_ABOVE ? '(' : '[', o->lo, o->hi,
                 o->bounds & CLI_BELOW ? ')' : ']');
    else if (lo) snprintf(buf, size, "%s %g", o->bounds & CLI_ABOVE ? ">" : ">=", o->lo);
    else snprintf(buf, size, "%s %g", o->bounds & CLI_BELOW ? "<" : "<=", o->hi);
}

static bool within_bounds(const cli_option *o, double v) {
    if ((o->bounds & CLI_ABOVE) && !(v > o->lo)) return false;
    if ((o->bounds & CLI_AT_LEAST) && !(v >= o->lo)) return false;
    if ((o->bounds & CLI_BELOW) && !(v < o->hi)) return false;
    if ((o->bounds & CLI_AT_MOST) && !(v <= o->hi)) return false;
    return true;
}

/* Stores v for option o (spelled `flag` on the command line); 0 and a message if it is bad. */
static int set_value(const cli_spec *spec, cli_option *o, const char *flag, const char *v) {
    const char *cmd = spec->command;
    char list[256];
    switch (o->kind) {
    case CLI_FLAG:
        *(bool *)o->dest = true;
        return 1;
    case CLI_INT:
    case CLI_LONG: {
        const cli_choice *c = find_choice(o->choices, v);
        long l = c ? c->value : 0;
        if (!c && !cli_parse_long(v, o->min, o->max, &l)) {
            choice_list(o->choices, ", ", " or ", list, sizeof list);
            cli_usage_error(cmd, "%s: '%s' is not an integer in [%ld, %ld]%s%s", flag, v, o->min, o->max,
                            *list ? " or " : "", list);
            return 0;
        }
        if (o->kind == CLI_INT) *(int *)o->dest = (int)l;
        else *(long *)o->dest = l;
        return 1;
    }
    case CLI_DOUBLE: {
        double d;
        if (!cli_parse_finite(v, &d)) {
            cli_usage_error(cmd, "%s: '%s' is not a finite number", flag, v);
            return 0;
        }
        if (!within_bounds(o, d)) {
            bounds_text(o, list, sizeof list);
            cli_usage_error(cmd, "%s: '%s' is out of range: it must be %s", flag, v, list);
            return 0;
        }
        *(double *)o->dest = d;
        return 1;
    }
    case CLI_INPUT:
    case CLI_OUTPUT:
        if (!*v) {
            cli_usage_error(cmd, "%s needs a file name, not ''", flag);
            return 0;
        }
        *(const char **)o->dest = v;
        return 1;
    case CLI_STRING:
        *(const char **)o->dest = v;
        return 1;
    case CLI_CHOICE: {
        const cli_choice *c = find_choice(o->choices, v);
        if (!c) c = find_choice(o->aliases, v);
        if (!c) {
            choice_list(o->choices, ", ", " or ", list, sizeof list);
            cli_usage_error(cmd, "%s: '%s' is not %s", flag, v, list);
            return 0;
        }
        *(int *)o->dest = c->value;
        return 1;
    }
    case CLI_CUSTOM: {
        const char *expected = o->parse(v, o->dest);
        if (expected) {
            cli_usage_error(cmd, "%s: '%s' %s", flag, v, expected);
            return 0;
        }
        return 1;
    }
    }
    return 0;
}

/* ---- files ------------------------------------------------------------------------------ */

int cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static const char *path_of(const cli_option *o) {
    return (o->kind == CLI_INPUT || o->kind == CLI_OUTPUT) && o->dest ? *(const char *const *)o->dest : NULL;
}

/* ---- what an input reads: its folder's files ------------------------------------------- */

#define TREE_MAX_ENTRIES 20000 /* a folder given as a model is a model's, not a whole disk's */

/* 1 when a regular file under `dir` (to `depth` more levels of folders; links followed) is
 * `want`; its name in found. *budget bounds the entries looked at. */
static int tree_has(const char *dir, const struct stat *want, int depth, int *budget, char *found, size_t size) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int hit = 0;
    for (struct dirent *e; !hit && *budget > 0 && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        (*budget)--;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0) hit = tree_has(p, want, depth - 1, budget, found, size);
        } else if (st.st_dev == want->st_dev && st.st_ino == want->st_ino) {
            snprintf(found, size, "%s", p);
            hit = 1;
        }
    }
    closedir(d);
    return hit;
}

/* 1 when the input `input` (as given) may read the existing file `want`, named in found:
 * the input itself; a folder: every file under it (weights, shards, configs, tokenizer,
 * three levels deep: a diffusers pipeline's components) and the tokenizer/ beside it (a
 * pipeline's text_encoder/ finds its tokenizer there); a file: its config.json,
 * tokenizer.model, tokenizer/ and ../tokenizer/ beside it, and an index's shards (its
 * folder). Compared by device and inode, so any spelling or link of the file counts. */
static int input_reads(const char *input, const struct stat *want, char *found, size_t size) {
    struct stat st;
    if (!input || stat(input, &st) != 0) return 0;
    int budget = TREE_MAX_ENTRIES;
    char dir[4096], p[4200];
    if (S_ISDIR(st.st_mode)) {
        if (tree_has(input, want, 3, &budget, found, size)) return 1;
        snprintf(dir, sizeof dir, "%s", input);
    } else {
        if (st.st_dev == want->st_dev && st.st_ino == want->st_ino) {
            snprintf(found, size, "%s", input);
            return 1;
        }
        lv_path_dir(input, dir, sizeof dir);
        if (lv_path_ends_with(input, ".index.json") && tree_has(dir, want, 0, &budget, found, size)) return 1;
        static const char *const beside[] = {"config.json", "tokenizer.model"};
        for (int i = 0; i < 2; i++) {
            struct stat b;
            snprintf(p, sizeof p, "%s/%s", dir, beside[i]);
            if (stat(p, &b) == 0 && b.st_dev == want->st_dev && b.st_ino == want->st_ino) {
                snprintf(found, size, "%s", p);
                return 1;
            }
        }
        snprintf(p, sizeof p, "%s/tokenizer", dir);
        if (tree_has(p, want, 1, &budget, found, size)) return 1;
    }
    snprintf(p, sizeof p, "%s/../tokenizer", dir);
    return tree_has(p, want, 1, &budget, found, size);
}

int cli_check_output(const cli_spec *spec, const char *out, const char *what) {
    struct stat st;
    if (!out || stat(out, &st) != 0 || S_ISDIR(st.st_mode)) return 1; /* a new file is no input */
    for (int j = 0; j < spec->count; j++) {
        const cli_option *in = &spec->options[j];
        const char *p = path_of(in);
        char found[4200];
        if (in->kind != CLI_INPUT || !p || !input_reads(p, &st, found, sizeof found)) continue;
        if (strcmp(found, p) == 0)
            cli_usage_error(spec->command, "%s and %s name the same file ('%s' and '%s'): refusing to overwrite an "
                            "input", what, display_name(in), out, p);
        else
            cli_usage_error(spec->command, "%s '%s' is a file that %s '%s' reads (%s): refusing to overwrite an "
                            "input", what, out, display_name(in), p, found);
        return 0;
    }
    return 1;
}

/* Before anything is opened: writing an output that is also an input would destroy the
 * input (often while it is still being read). Device and inode catch "./x" for "x", hard
 * links and symbolic links alike; a file that does not exist yet is no input. An input
 * folder counts with the files in it (cli_check_output). */
int cli_check_files(const cli_spec *spec) {
    for (int i = 0; i < spec->count; i++) {
        const cli_option *out = &spec->options[i];
        const char *op = path_of(out);
        if (out->kind != CLI_OUTPUT || !op) continue;
        for (int j = 0; j < spec->count; j++) {
            const cli_option *other = &spec->options[j];
            const char *p = path_of(other);
            if (j == i || !p || (other->kind == CLI_OUTPUT && j < i)) continue;
            bool both_out = other->kind == CLI_OUTPUT;
            if (cli_same_file(op, p) || (both_out && strcmp(op, p) == 0)) {
                cli_usage_error(spec->command, "%s and %s name the same file ('%s' and '%s'): %s", display_name(out),
                                display_name(other), op, p,
                                both_out ? "two outputs cannot share a file" : "refusing to overwrite an input");
                return 0;
            }
        }
        if (!cli_check_output(spec, op, display_name(out))) return 0;
    }
    return 1;
}

/* ---- parsing ---------------------------------------------------------------------------- */

static cli_option *find_option(const cli_spec *spec, const char *arg) {
    for (int i = 0; i < spec->count; i++) {
        cli_option *o = &spec->options[i];
        if ((o->name && strcmp(o->name, arg) == 0) || (o->alias && strcmp(o->alias, arg) == 0)) return o;
    }
    return NULL;
}

bool cli_given(const cli_spec *spec, const char *name) {
    const cli_option *o = find_option(spec, name);
    return o && o->given;
}

static cli_option *positional(const cli_spec *spec, int index) {
    for (int i = 0; i < spec->count; i++)
        if (!spec->options[i].name && index-- == 0) return &spec->options[i];
    return NULL;
}

static const char *metavar(const cli_option *o, char *buf, size_t size) {
    if (o->metavar) return o->metavar;
    switch (o->kind) {
    case CLI_INT:
    case CLI_LONG: return "N";
    case CLI_DOUBLE: return "X";
    case CLI_STRING: return "TEXT";
    case CLI_INPUT:
    case CLI_OUTPUT: return "FILE";
    case CLI_CHOICE: choice_list(o->choices, "|", "|", buf, size); return buf;
    default: return "VALUE";
    }
}

int cli_parse(const cli_spec *spec, int argc, char **argv) {
    for (int i = 0; i < spec->count; i++) spec->options[i].given = false;
    int npos = 0;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && strcmp(a, "--") == 0) { /* what follows is positional, even "-x" */
            options_done = true;
            continue;
        }
        if (!options_done && a[0] == '-' && a[1]) {
            if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                cli_help(spec, stdout);
                return 0;
            }
            cli_option *o = find_option(spec, a);
            if (!o) return cli_usage_error(spec->command, "unknown option '%s' (see longvk %s --help)", a, spec->command);
            if (takes_value(o) && i + 1 >= argc) {
                char buf[128];
                return cli_usage_error(spec->command, "%s needs a value (%s)", a, metavar(o, buf, sizeof buf));
            }
            if (!set_value(spec, o, a, takes_value(o) ? argv[++i] : NULL)) return 2;
            o->given = true;
            continue;
        }
        cli_option *p = positional(spec, npos);
        if (!p) return cli_usage_error(spec->command, "unexpected argument '%s' (see longvk %s --help)", a, spec->command);
        if (!set_value(spec, p, p->metavar, a)) return 2;
        p->given = true;
        npos++;
    }
    /* every missing required option in one message */
    char missing[512] = "";
    int nmissing = 0;
    size_t at = 0;
    for (int i = 0; i < spec->count; i++) {
        const cli_option *o = &spec->options[i];
        if (!o->required || o->given) continue;
        if (at < sizeof missing)
            at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%s", nmissing ? ", " : "", display_name(o));
        nmissing++;
    }
    if (nmissing)
        return cli_usage_error(spec->command, "%s %s required (see longvk %s --help)", missing,
                               nmissing == 1 ? "is" : "are", spec->command);
    if (!cli_check_files(spec)) return 2;
    /* an existing output this user may not write (a write-protected file) is refused before
     * any work, exit 1 as `decode` always refused it: never replaced by a rename */
    for (int i = 0; i < spec->count; i++) {
        const char *op = path_of(&spec->options[i]);
        char target[4096];
        if (spec->options[i].kind == CLI_OUTPUT && op && lv_output_target(op, target, sizeof target, NULL) != LV_OK) {
            fprintf(stderr, "longvk %s: %s\n", spec->command, lv_last_error());
            return 1;
        }
    }
    return -1;
}

/* ---- --help ----------------------------------------------------------------------------- */

static void spaces(FILE *out, int n) {
    for (int i = 0; i < n; i++) fputc(' ', out);
}

#define KEEP_TOGETHER 36 /* a parenthesised phrase up to this long is not broken */

/* Where to break s (length len) to fit avail columns: the last space that fits outside a
 * short parenthesised phrase (so "(default: 4)" or "(10 Euler steps, CFG 3)" stays whole),
 * else the first space. -1: print it all. */
static int break_at(const char *s, int len, int avail) {
    if (len <= avail) return -1;
    int best = -1, protect_until = -1;
    for (int i = 0; i < len; i++) {
        if (s[i] == '(' && i > protect_until) {
            int depth = 0, j = i;
            for (; j < len; j++) {
                depth += s[j] == '(' ? 1 : s[j] == ')' ? -1 : 0;
                if (depth == 0) break;
            }
            if (j < len && j - i < KEEP_TOGETHER) protect_until = j;
        }
        if (s[i] != ' ' || i <= protect_until) continue;
        if (i > avail) return best >= 0 ? best : i;
        best = i;
    }
    return best;
}

/* Prints text from the current column `col` on, wrapped at HELP_WIDTH. */
static void print_wrapped(FILE *out, const char *text, int col) {
    bool first = true;
    const char *seg = text;
    for (;;) {
        const char *nl = strchr(seg, '\n');
        int seglen = nl ? (int)(nl - seg) : (int)strlen(seg);
        int extra = 0;
        while (extra < seglen && seg[extra] == ' ') extra++;
        const char *p = seg + extra;
        int len = seglen - extra;
        int avail = HELP_WIDTH - col - extra;
        if (avail < 24) avail = 24;
        do {
            if (!first) {
                fputc('\n', out);
                spaces(out, col + extra);
            } else {
                spaces(out, extra);
            }
            first = false;
            int cut = break_at(p, len, avail);
            if (cut < 0) cut = len;
            fprintf(out, "%.*s", cut, p);
            while (cut < len && p[cut] == ' ') cut++;
            p += cut;
            len -= cut;
        } while (len > 0);
        if (!nl) break;
        seg = nl + 1;
    }
    fputc('\n', out);
}

static int label(const cli_option *o, char *buf, size_t size) {
    char mv[256];
    const char *m = metavar(o, mv, sizeof mv);
    if (!o->name) return snprintf(buf, size, "  %s", m);
    return snprintf(buf, size, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                    takes_value(o) ? " " : "", takes_value(o) ? m : "");
}

static int help_column(const cli_spec *spec) {
    int col = 16;
    char buf[512];
    for (int i = 0; i < spec->count; i++) {
        int n = label(&spec->options[i], buf, sizeof buf);
        if (n <= LABEL_MAX && n + 2 > col) col = n + 2;
    }
    return col;
}

static void print_option(const cli_option *o, int col, FILE *out) {
    char buf[512], text[4096];
    int n = label(o, buf, sizeof buf);
    fputs(buf, out);
    if (n + 2 > col) {
        fputc('\n', out);
        spaces(out, col);
    } else {
        spaces(out, col - n);
    }
    const char *help = o->help ? o->help : "";
    if (o->def) { /* the default goes after the first line */
        const char *nl = strchr(help, '\n');
        int first = nl ? (int)(nl - help) : (int)strlen(help);
        snprintf(text, sizeof text, "%.*s%s(default: %s)%s", first, help, first ? " " : "", o->def, help + first);
    } else {
        snprintf(text, sizeof text, "%s", help);
    }
    print_wrapped(out, text, col);
}

void cli_help_options(const cli_spec *spec, FILE *out) {
    int col = help_column(spec);
    for (int i = 0; i < spec->count; i++) print_option(&spec->options[i], col, out);
}

static void print_block(FILE *out, const char *text) {
    fputs(text, out);
    size_t n = strlen(text);
    if (n && text[n - 1] != '\n') fputc('\n', out);
}

void cli_help(const cli_spec *spec, FILE *out) {
    if (spec->prepare_help) spec->prepare_help();
    const char *usage = spec->usage ? spec->usage : "[options]";
    fprintf(out, "usage: longvk %s%s%s\n", spec->command, *usage ? " " : "", usage);
    if (spec->about) {
        fputc('\n', out);
        print_block(out, spec->about);
    }
    int col = help_column(spec);
    if (col < 16) col = 16;
    bool any_positional = false;
    for (int i = 0; i < spec->count; i++) any_positional |= spec->options[i].name == NULL;
    if (any_positional) {
        fprintf(out, "\narguments:\n");
        for (int i = 0; i < spec->count; i++)
            if (!spec->options[i].name) print_option(&spec->options[i], col, out);
    }
    fprintf(out, "\noptions:\n");
    for (int i = 0; i < spec->count; i++)
        if (spec->options[i].name) print_option(&spec->options[i], col, out);
    cli_option help = {.name = "--help", .alias = "-h", .kind = CLI_FLAG, .help = "this text"};
    print_option(&help, col, out);
    if (spec->epilog) {
        fputc('\n', out);
        print_block(out, spec->epilog);
    }
}

int cli_check_preset(const char *command, const char *preset) {
    lv_sana_config cfg;
    if (!preset || lv_sana_config_preset(preset, &cfg) == LV_OK) return 1;
    cli_usage_error(command, "--preset: %s", lv_last_error());
    return 0;
}

const cli_choice cli_weight_dtypes[] = {{"as-stored", LV_DIT_WEIGHTS_AS_STORED}, {"f32", LV_DIT_WEIGHTS_F32},
                                        {"f16", LV_DIT_WEIGHTS_F16}, {"bf16", LV_DIT_WEIGHTS_BF16},
                                        {"q8_0", LV_DIT_WEIGHTS_Q8_0}, {"q4_K", LV_DIT_WEIGHTS_Q4_K}, {0}};
/* ggml names its types q8_0 and q4_K (GGML_TYPE_Q4_K); users also write them otherwise */
const cli_choice cli_weight_dtype_aliases[] = {{"q4_k", LV_DIT_WEIGHTS_Q4_K}, {"Q4_K", LV_DIT_WEIGHTS_Q4_K},
                                               {"Q8_0", LV_DIT_WEIGHTS_Q8_0}, {0}};
const cli_choice cli_precisions[] = {
    {"f32", LV_PRECISION_F32}, {"f16", LV_PRECISION_F16}, {"bf16", LV_PRECISION_BF16}, {0}};
