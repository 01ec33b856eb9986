/* `longvk encode-text` end to end on the tiny Gemma-2 model and tokenizer of
 * assets/testdata/gemma2/: --ids of the vectors' row 0 against transformers' fp32 output
 * (eager, soft-cap 50: the file's config, which --template none follows; sdpa with
 * --softcap off), NMSE <= 1e-8; --print-ids against Python sentencepiece's ids for every
 * case of tokenizer-cases.json; the sana-video template's rows and mask against the same
 * ids run with --template none; the truncation warning in the prompt's own tokens;
 * malformed inputs (an id outside the encoder's vocabulary
 * blames --ids, or with -p the tokenizer). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"

#define DIR LONGVK_ASSETS_DIR "/testdata/gemma2"
#define WEIGHTS DIR "/tiny.weights.safetensors"
#define VECTORS DIR "/tiny.vectors.safetensors"
#define T 11
#define H 96

/* Runs longvk with argv (no shell); stdout and stderr into malloc'd strings. Returns the
 * exit status (-1 for a signal). */
static int run(const char *const *argv, char **out, char **err) {
    const char *fo = ts_tmp("et_stdout.txt"), *fe = ts_tmp("et_stderr.txt");
    char fo_path[1024], fe_path[1024];
    snprintf(fo_path, sizeof fo_path, "%s", fo);
    snprintf(fe_path, sizeof fe_path, "%s", fe);
    const char *full[64] = {LONGVK_CLI, "encode-text"};
    int n = 2;
    for (int i = 0; argv[i]; i++) full[n++] = argv[i];
    full[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int o = open(fo_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(fe_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execv(LONGVK_CLI, (char *const *)full);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    size_t len;
    char *so = (char *)ts_slurp(fo_path, &len), *se = (char *)ts_slurp(fe_path, &len);
    if (out) *out = so;
    else free(so);
    if (err) *err = se;
    else free(se);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the vectors (F32 and I64 tensors: read here, lv_weights reads no I64) ------------ */

static uint8_t *vbytes;
static cJSON *vheader;
static size_t vdata0;

static const uint8_t *vec_get(const char *name, size_t bytes) {
    if (!vbytes) {
        size_t len;
        vbytes = ts_slurp(VECTORS, &len);
        uint64_t n;
        memcpy(&n, vbytes, 8);
        vheader = cJSON_ParseWithLength((const char *)vbytes + 8, (size_t)n);
        cr_assert_not_null(vheader);
        vdata0 = 8 + (size_t)n;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(vheader, name);
    cr_assert_not_null(t, "no tensor %s", name);
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    size_t a = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, b = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    cr_assert_eq(b - a, bytes, "%s: %zu bytes", name, b - a);
    return vbytes + vdata0 + a;
}

/* row 0's valid tokens as "2,x,y,..." (returns the count) */
static int row0_ids(char *buf, size_t size, int32_t *ids) {
    const int64_t *v = (const int64_t *)vec_get("input_ids", 2 * T * 8);
    const int64_t *m = (const int64_t *)vec_get("attention_mask", 2 * T * 8);
    size_t at = 0;
    int n = 0;
    for (int i = 0; i < T && m[i]; i++, n++) {
        at += (size_t)snprintf(buf + at, size - at, n ? ",%lld" : "%lld", (long long)v[i]);
        ids[n] = (int32_t)v[i];
    }
    return n;
}

static lv_npy load(const char *path) {
    lv_npy a;
    cr_assert_eq(lv_npy_read(path, &a), LV_OK, "%s", lv_last_error());
    return a;
}

Test(encode_text_cli, ids_match_transformers_f32, .timeout = 300) {
    char list[256];
    int32_t ids[T];
    int n = row0_ids(list, sizeof list, ids);
    cr_assert_eq(n, 11);
    struct {
        const char *softcap, *ref;
    } runs[] = {{NULL, "eager_f32_last_hidden_state"}, /* the default: the config's cap (50) */
                {"on", "eager_f32_last_hidden_state"},
                {"off", "sdpa_f32_last_hidden_state"}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        char *err;
        const char *argv[] = {"--text-encoder", WEIGHTS, "--template", "none", "--ids", list, "-o",
                              ts_tmp("et_ids.npy"), runs[r].softcap ? "--softcap" : NULL, runs[r].softcap, NULL};
        cr_assert_eq(run(argv, NULL, &err), 0, "%s", err);
        free(err);
        lv_npy got = load(ts_tmp("et_ids.npy"));
        cr_assert_eq(got.ndim, 2);
        cr_assert_eq(got.shape[0], n);
        cr_assert_eq(got.shape[1], H);
        const float *want = (const float *)vec_get(runs[r].ref, 2 * T * H * 4); /* row 0: the first T x H */
        double e = ts_nmse(got.data, want, (size_t)n * H);
        cr_log_info("softcap %s vs %s: nmse %.3g", runs[r].softcap ? runs[r].softcap : "(config)", runs[r].ref, e);
        cr_assert(e <= 1e-8, "%s: nmse %.3g", runs[r].ref, e);
        lv_npy_free(&got);
    }
    /* the other reference is far: the soft-cap setting is really applied */
    char *err;
    const char *argv[] = {"--text-encoder", WEIGHTS, "--template", "none", "--ids", list, "--softcap", "off",
                          "-o", ts_tmp("et_ids.npy"), NULL};
    cr_assert_eq(run(argv, NULL, &err), 0, "%s", err);
    free(err);
    lv_npy got = load(ts_tmp("et_ids.npy"));
    cr_assert_gt(ts_nmse(got.data, (const float *)vec_get("eager_f32_last_hidden_state", 2 * T * H * 4), (size_t)n * H),
                 1e-7);
    lv_npy_free(&got);
}

/* --text-weights-dtype q8_0 (issue 56): the library's encoder with q8_0 matrices, bit for bit
 * (test_gemma2's quantized_weights bounds it against f32); beside --dtype it is refused. */
Test(encode_text_cli, text_weights_dtype_q8_0, .timeout = 300) {
    char list[256];
    int32_t ids[T];
    int n = row0_ids(list, sizeof list, ids);
    char *err;
    const char *argv[] = {"--text-encoder", WEIGHTS, "--template", "none", "--ids", list, "--softcap", "off",
                          "--text-weights-dtype", "q8_0", "-o", ts_tmp("et_q8.npy"), NULL};
    cr_assert_eq(run(argv, NULL, &err), 0, "%s", err);
    free(err);
    lv_npy got = load(ts_tmp("et_q8.npy"));
    lv_gemma2_file *f = NULL;
    cr_assert_eq(lv_gemma2_file_open(WEIGHTS, NULL, &f), LV_OK, "%s", lv_last_error());
    lv_ctx *ctx = ts_ctx();
    lv_gemma2_options opt;
    lv_gemma2_options_default(&opt);
    opt.weight_dtype = LV_Q8_0;
    lv_gemma2 *enc = NULL;
    cr_assert_eq(lv_gemma2_create(ctx, f, &opt, &enc), LV_OK, "%s", lv_last_error());
    static float want[T * H];
    cr_assert_eq(lv_gemma2_encode(enc, ids, n, want), LV_OK, "%s", lv_last_error());
    cr_assert_eq(memcmp(got.data, want, (size_t)n * H * sizeof *want), 0, "not the library's q8_0 encoder");
    double e = ts_nmse(got.data, (const float *)vec_get("sdpa_f32_last_hidden_state", 2 * T * H * 4), (size_t)n * H);
    cr_assert_gt(e, 1e-9, "q8_0 gave f32's output");
    lv_gemma2_destroy(enc);
    ts_ctx_done(ctx);
    lv_gemma2_file_close(f);
    lv_npy_free(&got);
    const char *both[] = {"--text-encoder", WEIGHTS, "--ids", list, "--template", "none", "--dtype", "f32",
                          "--text-weights-dtype", "q4_K", "-o", ts_tmp("et_q8.npy"), NULL};
    cr_assert_eq(run(both, NULL, &err), 2, "%s", err);
    cr_assert(strstr(err, "--dtype") && strstr(err, "--text-weights-dtype"), "%s", err);
    free(err);
}

Test(encode_text_cli, print_ids_match_python, .timeout = 300) {
    size_t len;
    char *json = (char *)ts_slurp(DIR "/tokenizer-cases.json", &len);
    cJSON *root = cJSON_Parse(json);
    cr_assert_not_null(root);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int count = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids"), *id;
        char want[4096] = "2";
        size_t at = 1;
        cJSON_ArrayForEach(id, ids) at += (size_t)snprintf(want + at, sizeof want - at, ",%d", id->valueint);
        snprintf(want + at, sizeof want - at, "\n");
        char *out, *err;
        const char *argv[] = {"--text-encoder", WEIGHTS, "--template", "none", "-p", text, "--print-ids",
                              "-o", ts_tmp("et_p.npy"), NULL};
        cr_assert_eq(run(argv, &out, &err), 0, "'%s': %s", text, err);
        cr_assert_str_eq(out, want, "'%s'", text);
        lv_npy got = load(ts_tmp("et_p.npy"));
        cr_assert_eq(got.shape[0], cJSON_GetArraySize(ids) + 1);
        lv_npy_free(&got);
        free(out);
        free(err);
        count++;
    }
    cr_assert_eq(count, 17);
    cJSON_Delete(root);
    free(json);
}

/* Parses "a,b,c\n" */
static int parse_list(const char *s, int32_t *ids, int max) {
    int n = 0;
    while (*s && *s != '\n' && n < max) {
        ids[n++] = (int32_t)strtol(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
    return n;
}

Test(encode_text_cli, sana_video_rows_and_mask, .timeout = 300) {
    char *out, *err;
    const char *argv[] = {"--text-encoder", WEIGHTS, "--tokenizer", DIR "/tokenizer.model", "-p", " A cat sleeping ",
                          "--print-ids", "-o", ts_tmp("et_sana.npy"), NULL};
    cr_assert_eq(run(argv, &out, &err), 0, "%s", err);
    free(err);
    int32_t *ids = malloc(8192 * sizeof *ids);
    int n = parse_list(out, ids, 8192);
    free(out);
    /* the ids are the library's assembly (test_sana_prompt checks it against the Python) */
    lv_tokenizer *tok;
    cr_assert_eq(lv_tokenizer_open(DIR, &tok), LV_OK);
    lv_sana_prompt p;
    cr_assert_eq(lv_sana_prompt_build(tok, "A cat sleeping", NULL, &p), LV_OK, "%s", lv_last_error());
    cr_assert_eq(n, p.n_ids);
    for (int i = 0; i < n; i++) cr_assert_eq(ids[i], p.ids[i], "id %d", i);
    /* the same ids with --template none, the soft-cap off as sana-video's default */
    size_t cap = (size_t)n * 12 + 1, at = 0;
    char *list = malloc(cap);
    for (int i = 0; i < n; i++) at += (size_t)snprintf(list + at, cap - at, i ? ",%d" : "%d", ids[i]);
    const char *argv2[] = {"--text-encoder", WEIGHTS, "--template", "none", "--softcap", "off", "--ids", list,
                           "-o", ts_tmp("et_all.npy"), NULL};
    cr_assert_eq(run(argv2, NULL, &err), 0, "%s", err);
    free(err);
    lv_npy y = load(ts_tmp("et_sana.npy")), mask = load(ts_tmp("et_sana.mask.npy")), all = load(ts_tmp("et_all.npy"));
    cr_assert_eq(y.ndim, 2);
    cr_assert_eq(y.shape[0], 300);
    cr_assert_eq(y.shape[1], H);
    cr_assert_eq(mask.ndim, 1);
    cr_assert_eq(mask.shape[0], 300);
    cr_assert_eq(all.shape[0], n);
    int L = p.length, valid = 0;
    for (int r = 0; r < 300; r++) {
        int pos = r == 0 ? 0 : L - 300 + r; /* Python's [0] + range(-299, 0) on length L */
        cr_assert_eq(mask.data[r], pos < n ? 1.0f : 0.0f, "mask row %d", r);
        valid += pos < n;
        for (int j = 0; j < H; j++)
            cr_assert_eq(y.data[(size_t)r * H + j], pos < n ? all.data[(size_t)pos * H + j] : 0.0f, "row %d", r);
    }
    cr_assert_gt(valid, 5);
    cr_assert_lt(valid, 300);
    lv_npy_free(&y);
    lv_npy_free(&mask);
    lv_npy_free(&all);
    /* the negative prompt: 300 tokens at most, no instruction; SANA-Video's by default */
    const char *argv3[] = {"--text-encoder", WEIGHTS, "--negative", "--print-ids", "-o", ts_tmp("et_neg.npy"), NULL};
    cr_assert_eq(run(argv3, &out, &err), 0, "%s", err);
    lv_sana_prompt_options opt;
    lv_sana_prompt_options_default(&opt);
    opt.negative = 1;
    lv_sana_prompt q;
    cr_assert_eq(lv_sana_prompt_build(tok, lv_sana_video_negative_prompt, &opt, &q), LV_OK);
    cr_assert_eq(parse_list(out, ids, 8192), q.n_ids);
    for (int i = 0; i < q.n_ids; i++) cr_assert_eq(ids[i], q.ids[i]);
    lv_npy m = load(ts_tmp("et_neg.mask.npy"));
    for (int r = 0; r < 300; r++) cr_assert_eq(m.data[r], r < q.n_ids ? 1.0f : 0.0f);
    lv_npy_free(&m);
    free(out);
    free(err);
    lv_sana_prompt_free(&q);
    lv_sana_prompt_free(&p);
    lv_tokenizer_close(tok);
    free(list);
    free(ids);
}

static void expect_failure(const char *const *argv, int status, const char *message) {
    char *err;
    int rc = run(argv, NULL, &err);
    cr_assert_eq(rc, status, "exit %d, want %d: %s", rc, status, err);
    cr_assert(strstr(err, message), "message '%s' lacks '%s'", err, message);
    free(err);
}

Test(encode_text_cli, malformed_inputs_are_clean_errors, .timeout = 300) {
    const char *none = ts_tmp("et_none.npy");
    char none_path[1024];
    snprintf(none_path, sizeof none_path, "%s", none);
    remove(none_path);
    /* a missing folder */
    const char *a1[] = {"--text-encoder", "/nonexistent/gemma", "-p", "x", "-o", none_path, NULL};
    expect_failure(a1, 1, "/nonexistent/gemma");
    /* a tokenizer that is not SentencePiece */
    const char *a2[] = {"--text-encoder", WEIGHTS, "--tokenizer", DIR "/README.md", "-p", "x", "-o", none_path, NULL};
    expect_failure(a2, 1, "README.md");
    /* a 100 KB prompt: more tokens than the encoder's positions (--template none truncates nothing) */
    size_t len = 100 * 1024;
    char *big = malloc(len + 1);
    for (size_t i = 0; i < len; i++) big[i] = "a red ball "[i % 11];
    big[len] = '\0';
    const char *a3[] = {"--text-encoder", WEIGHTS, "--template", "none", "-p", big, "-o", none_path, NULL};
    expect_failure(a3, 1, "at most 8192");
    /* the same with sana-video is truncated as SANA-Video does: 300 valid rows */
    const char *a3b[] = {"--text-encoder", WEIGHTS, "-p", big, "-o", ts_tmp("et_big.npy"), NULL};
    expect_failure(a3b, 0, "truncated");
    lv_npy m = load(ts_tmp("et_big.mask.npy"));
    for (int r = 0; r < 300; r++) cr_assert_eq(m.data[r], 1.0f);
    lv_npy_free(&m);
    free(big);
    /* the warning counts the prompt's own tokens, not the instruction's: "a red ball" 100
     * times is N tokens alone (--template none: <bos> + N ids), of which SANA-Video's rows
     * hold the first 299 (300 rows: <bos> and the prompt's last 299 positions) */
    char words[2048] = "";
    for (int i = 0; i < 100; i++) strcat(words, i ? " a red ball" : "a red ball");
    const char *a3c[] = {"--text-encoder", WEIGHTS, "--template", "none", "-p", words, "--print-ids", "-o",
                         ts_tmp("et_words.npy"), NULL};
    char *ids_out;
    cr_assert_eq(run(a3c, &ids_out, NULL), 0);
    int alone = 1;
    for (const char *c = ids_out; *c && *c != '\n'; c++) alone += *c == ',';
    free(ids_out);
    int own = alone - 1;
    cr_assert_gt(own, 299, "%d tokens: not truncated", own);
    char want[256];
    snprintf(want, sizeof want, "the prompt is %d tokens, truncated: the model reads its first 299, the last %d are "
             "dropped", own, own - 299);
    const char *a3d[] = {"--text-encoder", WEIGHTS, "--motion-score", "0", "-p", words, "-o", ts_tmp("et_words.npy"),
                         NULL};
    expect_failure(a3d, 0, want);
    /* a tensor of the wrong shape */
    lv_weights *w;
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    int n = lv_weights_count(w);
    lv_weight *ts = malloc((size_t)n * sizeof *ts);
    for (int i = 0; i < n; i++) {
        ts[i] = *lv_weights_at(w, i);
        if (strcmp(ts[i].name, "model.layers.1.self_attn.q_proj.weight") == 0) ts[i].shape[0] = 96, ts[i].shape[1] = 128;
    }
    const char *kv[] = {"config", lv_weights_metadata(w, "config")};
    char bad[1024];
    snprintf(bad, sizeof bad, "%s", ts_tmp("et_badshape.safetensors"));
    cr_assert_eq(lv_safetensors_write(bad, ts, n, kv, 1), LV_OK, "%s", lv_last_error());
    free(ts);
    lv_weights_close(w);
    const char *a4[] = {"--text-encoder", bad, "--tokenizer", DIR, "-p", "x", "-o", none_path, NULL};
    expect_failure(a4, 1, "layers.1.self_attn.q_proj.weight");
    /* an id outside the vocabulary, a malformed id list */
    const char *a5[] = {"--text-encoder", WEIGHTS, "--template", "none", "--ids", "2,512", "-o", none_path, NULL};
    expect_failure(a5, 1, "512");
    /* with -p the ids are the tokenizer's: an encoder of 256 ids (the tiny one cut) given the
     * tiny tokenizer (512: "a red ball" is 2,460,362,274,421) names the tokenizer, not --ids */
    cr_assert_eq(lv_weights_open(WEIGHTS, &w), LV_OK);
    n = lv_weights_count(w);
    ts = malloc((size_t)n * sizeof *ts);
    for (int i = 0; i < n; i++) {
        ts[i] = *lv_weights_at(w, i);
        if (strcmp(ts[i].name, "model.embed_tokens.weight") == 0) ts[i].shape[0] = 256, ts[i].nbytes /= 2;
    }
    char small_config[4096];
    const char *config = lv_weights_metadata(w, "config"), *at = strstr(config, "\"vocab_size\": 512");
    cr_assert_not_null(at, "%s", config);
    snprintf(small_config, sizeof small_config, "%.*s\"vocab_size\": 256%s", (int)(at - config), config,
             at + strlen("\"vocab_size\": 512"));
    const char *kv_small[] = {"config", small_config};
    char small[1024];
    snprintf(small, sizeof small, "%s", ts_tmp("et_vocab256.safetensors"));
    cr_assert_eq(lv_safetensors_write(small, ts, n, kv_small, 1), LV_OK, "%s", lv_last_error());
    free(ts);
    lv_weights_close(w);
    const char *a5b[] = {"--text-encoder", small, "--tokenizer", DIR "/tokenizer.model", "--template", "none", "-p",
                         "a red ball", "-o", none_path, NULL};
    char *err5b;
    cr_assert_eq(run(a5b, NULL, &err5b), 1, "%s", err5b);
    cr_assert_null(strstr(err5b, "--ids"), "no --ids was given: %s", err5b);
    cr_assert(strstr(err5b, "the tokenizer " DIR "/tokenizer.model gave id 460 (at position 1)"), "%s", err5b);
    cr_assert(strstr(err5b, "vocabulary (256 ids)"), "%s", err5b);
    free(err5b);
    const char *a6[] = {"--text-encoder", WEIGHTS, "--template", "none", "--ids", "2,,3", "-o", none_path, NULL};
    expect_failure(a6, 2, "--ids");
    /* --ids with the sana-video template, no prompt at all */
    const char *a7[] = {"--text-encoder", WEIGHTS, "--ids", "2,3", "-o", none_path, NULL};
    expect_failure(a7, 2, "--template none");
    const char *a8[] = {"--text-encoder", WEIGHTS, "-o", none_path, NULL};
    expect_failure(a8, 2, "-p TEXT");
    /* the output is an input: refused before anything runs */
    const char *a9[] = {"--text-encoder", WEIGHTS, "-p", "x", "-o", WEIGHTS, NULL};
    expect_failure(a9, 2, "");
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", ts_tmp("et_tok.mask.npy"));
    size_t tl;
    uint8_t *tokbytes = ts_slurp(DIR "/tokenizer.model", &tl);
    ts_spit(copy, tokbytes, tl);
    free(tokbytes);
    char out_for_mask[1024];
    snprintf(out_for_mask, sizeof out_for_mask, "%s", ts_tmp("et_tok.npy"));
    const char *a10[] = {"--text-encoder", WEIGHTS, "--tokenizer", copy, "-p", "x", "-o", out_for_mask, NULL};
    expect_failure(a10, 2, "mask output");
    struct stat st;
    cr_assert_neq(stat(none_path, &st), 0, "no output may be left behind");
    cr_assert_eq(stat(WEIGHTS, &st), 0);
    cr_assert_eq(st.st_size, 1533176, "the input is untouched");
}
