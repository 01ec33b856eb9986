/* `longvk attn` end to end through the binary (LONGVK_CLI): results against the C reference's
 * masked double sum in every mode, the worked example of linear-attention.md exactly, and
 * bad input (malformed, truncated, wrong dtype, mismatched shapes, bad options): a clear
 * message, a non-zero exit and no output file. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ref_linear_attention.h"
#include "test_support.h"

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/attn_cli_%d_%s", LONGVK_TEST_TMP, (int)getpid(), name);
    return p;
}

static int exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

/* Run `longvk attn ARGS`; stderr goes to err (if not NULL, up to size bytes). Returns the
 * exit status. */
static int run_cli(const char *args, char *err, size_t size) {
    const char *err_path = tmp_path("stderr.txt");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' attn %s > /dev/null 2> '%s'", LONGVK_CLI, args, err_path);
    int st = system(cmd);
    cr_assert(st != -1 && WIFEXITED(st), "could not run: %s", cmd);
    if (err) {
        FILE *f = fopen(err_path, "rb");
        size_t n = f ? fread(err, 1, size - 1, f) : 0;
        err[n] = 0;
        if (f) fclose(f);
    }
    unlink(err_path);
    return WEXITSTATUS(st);
}

static void write_npy(const char *path, int ndim, const int64_t *shape, const float *data) {
    cr_assert_eq(lv_npy_write(path, ndim, shape, data), LV_OK, "%s", lv_last_error());
}

/* [H, N, D] (CLI layout) <-> [N, H*D] (engine and reference layout) */
static void to_tokens(float *dst, const float *src, int H, int N, int D) {
    for (int h = 0; h < H; h++)
        for (int n = 0; n < N; n++)
            memcpy(dst + ((size_t)n * H + h) * D, src + ((size_t)h * N + n) * D, (size_t)D * 4);
}

typedef struct cli_case {
    int heads3d; /* 0: [N, d] input; else H of an [H, N, d] input */
    int N, D;
    const char *mode;
    int block; /* block size the mode means (N for full, 1 for causal) */
    int phi, normalize, rope;
    int window;
    float decay;
} cli_case;

static void cli_vs_reference(const cli_case *c, uint64_t seed) {
    const int H = c->heads3d ? c->heads3d : 1, N = c->N, D = c->D;
    const size_t total = (size_t)H * N * D;
    const float lo = (c->phi == 0 && c->normalize) ? 0.0f : -1.0f;
    float *q = ts_rand_alloc(total, seed, lo, 1), *k = ts_rand_alloc(total, seed + 1, lo, 1);
    float *v = ts_rand_alloc(total, seed + 2, -1, 1);
    float *pos = ts_rand_alloc((size_t)N, seed + 3, 0, 200);
    int64_t shape3[3] = {H, N, D}, shape2[2] = {N, D}, pshape[1] = {N};
    const int64_t *shape = c->heads3d ? shape3 : shape2;
    int ndim = c->heads3d ? 3 : 2;
    const char *pq = tmp_path("q.npy"), *pk = tmp_path("k.npy"), *pv = tmp_path("v.npy");
    const char *pp = tmp_path("p.npy"), *po = tmp_path("o.npy");
    write_npy(pq, ndim, shape, q);
    write_npy(pk, ndim, shape, k);
    write_npy(pv, ndim, shape, v);
    write_npy(pp, 1, pshape, pos);
    unlink(po);
    const char *feat = c->phi == 0 ? "identity" : c->phi == 1 ? "relu" : "elu1";
    char args[2048];
    int len = snprintf(args, sizeof args, "--q '%s' --k '%s' --v '%s' -o '%s' --mode %s --feature %s",
                       pq, pk, pv, po, c->mode, feat);
    if (strcmp(c->mode, "block") == 0) len += snprintf(args + len, sizeof args - len, " --block %d", c->block);
    if (c->normalize) len += snprintf(args + len, sizeof args - len, " --normalize");
    if (c->rope) len += snprintf(args + len, sizeof args - len, " --rope-positions '%s'", pp);
    if (c->window) len += snprintf(args + len, sizeof args - len, " --window %d", c->window);
    if (c->decay != 1.0f) snprintf(args + len, sizeof args - len, " --decay %.9g", (double)c->decay);
    char err[2048];
    int rc = run_cli(args, err, sizeof err);
    cr_assert_eq(rc, 0, "longvk attn %s failed (%d): %s", args, rc, err);
    lv_npy out;
    cr_assert_eq(lv_npy_read(po, &out), LV_OK, "%s", lv_last_error());
    cr_assert_eq(out.ndim, ndim);
    for (int i = 0; i < ndim; i++) cr_assert_eq(out.shape[i], shape[i]);

    /* the reference in token layout; the rope table from the positions, independently */
    float *tq = malloc(total * 4), *tk = malloc(total * 4), *tv = malloc(total * 4), *got = malloc(total * 4);
    to_tokens(tq, q, H, N, D);
    to_tokens(tk, k, H, N, D);
    to_tokens(tv, v, H, N, D);
    to_tokens(got, out.data, H, N, D);
    float *table = NULL;
    if (c->rope) {
        table = malloc((size_t)N * D * 4);
        ref_rope_table_1d(table, pos, N, D, 10000.0);
    }
    double *want = malloc(total * sizeof *want), *mag = malloc(total * sizeof *mag);
    int rule = c->window ? REF_RULE_WINDOW : c->decay != 1.0f ? REF_RULE_DECAY : REF_RULE_ADDITIVE;
    ref_linattn_masked(want, mag, tq, tk, tv, table, N, H, D, c->block, c->phi, c->normalize, 1e-6f,
                       rule, c->window, c->decay);
    /* bound: see tests/engine/test_linear_attention.c (m roundings along each term's path); the
     * rope table is computed separately in the CLI and the reference (float cos/sin of the
     * same double angles, which may differ in the last bit): 4 more roundings */
    double gamma = (2.0 * N + D + 20) * ldexp(1.0, -24);
    for (size_t i = 0; i < total; i++)
        cr_assert(fabs(got[i] - want[i]) <= gamma * mag[i] + 1e-30,
                  "mode %s: element %zu is %.9g, reference %.9g", c->mode, i, (double)got[i], want[i]);
    free(tq), free(tk), free(tv), free(got), free(table), free(want), free(mag);
    free(q), free(k), free(v), free(pos);
    lv_npy_free(&out);
    unlink(pq), unlink(pk), unlink(pv), unlink(pp), unlink(po);
}

Test(attn_cli, modes_match_reference) {
    cli_case cases[] = {
        {.heads3d = 2, .N = 19, .D = 8, .mode = "full", .block = 19, .phi = 1, .normalize = 1, .rope = 1, .decay = 1},
        {.heads3d = 2, .N = 19, .D = 8, .mode = "causal", .block = 1, .phi = 1, .normalize = 1, .rope = 1, .decay = 1},
        {.heads3d = 2, .N = 19, .D = 8, .mode = "block", .block = 4, .phi = 1, .normalize = 1, .rope = 1, .decay = 1},
        {.heads3d = 0, .N = 13, .D = 5, .mode = "block", .block = 3, .phi = 0, .normalize = 0, .rope = 0, .decay = 1},
        {.heads3d = 3, .N = 11, .D = 6, .mode = "causal", .block = 1, .phi = 2, .normalize = 0, .rope = 1, .decay = 1},
        {.heads3d = 1, .N = 17, .D = 4, .mode = "block", .block = 2, .phi = 2, .normalize = 1, .rope = 0, .window = 2, .decay = 1},
        {.heads3d = 0, .N = 17, .D = 4, .mode = "block", .block = 3, .phi = 1, .normalize = 1, .rope = 1, .decay = 0.75f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) cli_vs_reference(&cases[i], 100 + 10 * i);
}

Test(attn_cli, worked_example_exactly) {
    /* linear-attention.md: one head, d = 2, identity, unnormalised */
    const float k[6] = {1, 0, 0, 2, 1, 1}, v[6] = {1, 2, 3, 0, 0, 1}, q[6] = {2, 0, 0, 1, 1, 1};
    int64_t shape[2] = {3, 2};
    const char *pq = tmp_path("wq.npy"), *pk = tmp_path("wk.npy"), *pv = tmp_path("wv.npy"), *po = tmp_path("wo.npy");
    write_npy(pq, 2, shape, q);
    write_npy(pk, 2, shape, k);
    write_npy(pv, 2, shape, v);
    struct {
        const char *mode;
        float want[6];
    } modes[3] = {
        {"causal", {2, 4, 6, 0, 7, 4}},
        {"full", {2, 6, 6, 1, 7, 4}},
        {"block --block 2", {2, 4, 6, 0, 7, 4}},
    };
    for (int m = 0; m < 3; m++) {
        char args[2048], err[1024];
        snprintf(args, sizeof args, "--q '%s' --k '%s' --v '%s' -o '%s' --feature identity --mode %s",
                 pq, pk, pv, po, modes[m].mode);
        cr_assert_eq(run_cli(args, err, sizeof err), 0, "%s", err);
        lv_npy out;
        cr_assert_eq(lv_npy_read(po, &out), LV_OK, "%s", lv_last_error());
        for (int i = 0; i < 6; i++)
            cr_assert_eq(out.data[i], modes[m].want[i], "mode %s: o[%d][%d] = %g, the note says %g",
                         modes[m].mode, i / 2, i % 2, (double)out.data[i], (double)modes[m].want[i]);
        lv_npy_free(&out);
    }
    unlink(pq), unlink(pk), unlink(pv), unlink(po);
}

/* ---- bad input ---------------------------------------------------------------------------- */

typedef struct bad_files {
    const char *q, *k, *v, *p, *o;
} bad_files;

static bad_files good_files(void) {
    bad_files f = {tmp_path("bq.npy"), tmp_path("bk.npy"), tmp_path("bv.npy"), tmp_path("bp.npy"), tmp_path("bo.npy")};
    float *x = ts_rand_alloc(2 * 5 * 4, 1, -1, 1);
    int64_t shape[3] = {2, 5, 4}, ps[1] = {5};
    write_npy(f.q, 3, shape, x);
    write_npy(f.k, 3, shape, x);
    write_npy(f.v, 3, shape, x);
    write_npy(f.p, 1, ps, x);
    free(x);
    unlink(f.o);
    return f;
}

static void remove_files(const bad_files *f) {
    unlink(f->q), unlink(f->k), unlink(f->v), unlink(f->p), unlink(f->o);
}

/* Runs with the given extra arguments and expects failure with `needle` in the message and
 * no output file. */
static void expect_failure(const bad_files *f, const char *extra, const char *needle, int want_rc) {
    char args[2048], err[2048];
    snprintf(args, sizeof args, "--q '%s' --k '%s' --v '%s' -o '%s' %s", f->q, f->k, f->v, f->o, extra);
    int rc = run_cli(args, err, sizeof err);
    if (want_rc) cr_assert_eq(rc, want_rc, "longvk attn %s: exit %d (wanted %d): %s", extra, rc, want_rc, err);
    else cr_assert_neq(rc, 0, "longvk attn %s succeeded on bad input", extra);
    cr_assert(strstr(err, needle), "longvk attn %s: message '%s' does not mention '%s'", extra, err, needle);
    cr_assert(!exists(f->o), "longvk attn %s wrote an output despite the error", extra);
}

Test(attn_cli, malformed_npy) {
    bad_files f = good_files();
    FILE *fp = fopen(f.k, "wb");
    fputs("this is not a numpy file at all", fp);
    fclose(fp);
    expect_failure(&f, "", "not a .npy file", 1);
    /* a header that is not a dict */
    fp = fopen(f.k, "wb");
    const char hdr[] = "\x93NUMPY\x01\x00\x10\x00garbage header\n";
    fwrite(hdr, 1, sizeof hdr - 1, fp);
    fclose(fp);
    expect_failure(&f, "", f.k, 1);
    remove_files(&f);
}

Test(attn_cli, truncated_npy) {
    bad_files f = good_files();
    struct stat s;
    cr_assert_eq(stat(f.v, &s), 0);
    cr_assert_eq(truncate(f.v, s.st_size - 12), 0);
    expect_failure(&f, "", "truncated", 1);
    /* truncated inside the header */
    cr_assert_eq(truncate(f.v, 20), 0);
    expect_failure(&f, "", "truncated", 1);
    remove_files(&f);
}

Test(attn_cli, wrong_dtype) {
    bad_files f = good_files();
    FILE *fp = fopen(f.q, "wb");
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 5, 4), }");
    int pad = 64 - (10 + n + 1) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n + pad + 1), 0};
    fwrite(pre, 1, 10, fp);
    fwrite(dict, 1, (size_t)n, fp);
    for (int i = 0; i < pad; i++) fputc(' ', fp);
    fputc('\n', fp);
    double zeros[40] = {0};
    fwrite(zeros, 8, 40, fp);
    fclose(fp);
    expect_failure(&f, "", "float32", 1);
    remove_files(&f);
}

Test(attn_cli, mismatched_shapes) {
    bad_files f = good_files();
    float x[2 * 6 * 4] = {0};
    int64_t shape[3] = {2, 6, 4};
    write_npy(f.k, 3, shape, x); /* 6 tokens where q has 5 */
    expect_failure(&f, "", "shape mismatch", 1);
    int64_t shape2[2] = {5, 4};
    write_npy(f.k, 2, shape2, x);
    expect_failure(&f, "", "shape mismatch", 1);
    remove_files(&f);
    f = good_files();
    int64_t ps[1] = {4};
    write_npy(f.p, 1, ps, x); /* 4 positions for 5 tokens */
    char extra[600];
    snprintf(extra, sizeof extra, "--rope-positions '%s'", f.p);
    expect_failure(&f, extra, "shape mismatch", 1);
    remove_files(&f);
}

Test(attn_cli, bad_options) {
    bad_files f = good_files();
    expect_failure(&f, "--mode block", "--block", 2);
    expect_failure(&f, "--mode sideways", "--mode", 2);
    expect_failure(&f, "--feature softmax", "--feature", 2);
    expect_failure(&f, "--block 0 --mode block", "--block", 2);
    expect_failure(&f, "--eps", "--eps", 2);
    expect_failure(&f, "--frobnicate", "unknown option", 2);
    remove_files(&f);
    char args[1024], err[1024];
    snprintf(args, sizeof args, "--q '%s' --k x.npy --v y.npy -o z.npy", tmp_path("missing.npy"));
    cr_assert_eq(run_cli(args, err, sizeof err), 1);
    cr_assert(strstr(err, "cannot open"), "%s", err);
}

Test(attn_cli, help) {
    char err[256];
    const char *out = tmp_path("help.txt");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' attn --help > '%s' 2> /dev/null", LONGVK_CLI, out);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    FILE *fp = fopen(out, "rb");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    text[n] = 0;
    fclose(fp);
    unlink(out);
    const char *must[] = {"--mode full|causal|block", "default: full", "--block N", "default: relu",
                          "--normalize", "default: 1e-6", "--rope-positions", "theta 10000", "--device N"};
    for (size_t i = 0; i < sizeof must / sizeof *must; i++)
        cr_assert(strstr(text, must[i]), "--help does not mention '%s'", must[i]);
    (void)err;
}
