/* `longvk bench text`: the Gemma-2 text encoder's time per 300-token prompt at the real
 * Gemma-2-2B shape (lv_gemma2_config_default: hidden 2304, 8 heads (4 kv) x 256, MLP 9216)
 * with random bf16 weights, as the released model stores them.
 *
 * The weights are written to a temporary safetensors file (removed once open) and loaded
 * through lv_gemma2_file_open like a real model. All layers' matmul weights point at one
 * random buffer (42 MB of host memory whatever --layers is); the embedding table is an
 * untouched anonymous mapping (zero pages) where only the rows of the prompt's tokens are
 * made random. The file itself is full size: 156 MB per layer plus 4.6 KB per vocabulary
 * entry (the default, 26 layers and 256000 entries: 5.2 GB), and the device holds the
 * layers' weights (156 MB each, 4.05 GB for 26).
 *
 * Timed: lv_gemma2_encode of the prompt (after one warm-up), median of --runs; and the same
 * with no layer (embedding lookup, upload, final norm, read back), so that per layer =
 * (full - no layer) / layers.
 *
 * --nmse (issue 56's quality figure): after the timing, a second encoder is made from the
 * same file with the matrices as stored (bf16) and encodes the same tokens; the NMSE of the
 * timed encoder's last hidden state (--text-weights-dtype, quantized on load by
 * lv_gemma2_create as generate's) against it is reported. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "longvk.h"

typedef struct text_bench_args {
    bool json, nmse;
    int layers, vocab, tokens, runs, weights;
    long device;
} text_bench_args;

static text_bench_args args;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--layers", .kind = CLI_INT, .dest = &args.layers, .metavar = "N", .min = 1, .max = 26,
     .def = "26, Gemma-2-2B's: a 5.2 GB temporary file (with the default vocabulary) and 4.05 GB of device memory",
     .help = "decoder layers (156 MB of bf16 weights each); fewer for a small device such as lavapipe"},
    {.name = "--vocab", .kind = CLI_INT, .dest = &args.vocab, .metavar = "N", .min = 512, .max = 256000,
     .def = "256000, Gemma-2's: 1.18 GB of the temporary file", .help = "embedding rows (read on the host)"},
    {.name = "--tokens", .kind = CLI_INT, .dest = &args.tokens, .metavar = "N", .min = 1, .max = 8192,
     .def = "300, SANA-Video's text length", .help = "prompt tokens"},
    {.name = "--runs", .kind = CLI_INT, .dest = &args.runs, .metavar = "N", .min = 1, .max = 100, .def = "3",
     .help = "timed runs after a warm-up (the median is reported)"},
    {.name = "--text-weights-dtype", .kind = CLI_CHOICE, .dest = &args.weights, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .def = "as-stored (bf16)", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "the matrices on the device, as generate's --text-weights-dtype (q8_0 / q4_K: quantized on load)"},
    {.name = "--nmse", .kind = CLI_FLAG, .dest = &args.nmse,
     .help = "also the quality: the NMSE of the last hidden state against the same random weights as stored (bf16)"},
    {.name = "--device", .kind = CLI_LONG, .dest = &args.device, .min = 0, .max = 64,
     .help = "Vulkan device (see `longvk devices`)"},
};

const cli_spec bench_text_spec = {
    .command = "bench text",
    .usage = "[--json] [--layers N] [--vocab N] [--tokens N] [--runs N] [--text-weights-dtype D] [--nmse]",
    .about = "The Gemma-2 text encoder's seconds per 300-token prompt and per layer at the Gemma-2-2B\n"
             "shape with random bf16 weights. The default (all 26 layers) writes a 5.2 GB temporary\n"
             "file in $TMPDIR (else /tmp) and needs 4.05 GB of device memory; --layers 2 --vocab 4096\n"
             "needs 0.33 GB of each. Fewer layers give the per-layer time to extrapolate from. --nmse: what\n"
             "--text-weights-dtype costs in quality against bf16.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint16_t rand_bf16(float scale) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    float f = scale * (2.0f * (float)((rng >> 40) & 0xffffff) / 16777216.0f - 1.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static int write_model(const char *path, const lv_gemma2_config *c, uint16_t *shared, void *embed,
                       const int32_t *ids, int n) {
    int64_t Hd = c->hidden_size, I = c->intermediate_size, QW = (int64_t)c->num_heads * c->head_dim,
            KW = (int64_t)c->num_kv_heads * c->head_dim;
    /* the rows the prompt reads get random values; the rest of the table stays zero pages */
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < Hd; j++) ((uint16_t *)embed)[(int64_t)ids[i] * Hd + j] = rand_bf16(1.0f);
    int count = 2 + 11 * c->num_layers, k = 0;
    lv_weight *t = calloc((size_t)count, sizeof *t);
    char (*names)[80] = calloc((size_t)count, sizeof *names);
    if (!t || !names) {
        free(t);
        free(names);
        return -1;
    }
#define ADD(nm, rows, cols, src)                                                         \
    do {                                                                                 \
        snprintf(names[k], sizeof names[k], "%s", nm);                                  \
        t[k] = (lv_weight){.name = names[k], .dtype = LV_BF16, .ndim = (cols) ? 2 : 1,   \
                           .shape = {(rows), (cols)}, .data = (src)};                     \
        t[k].nbytes = 2 * (uint64_t)(rows) * (uint64_t)((cols) ? (cols) : 1);          \
        k++;                                                                             \
    } while (0)
    ADD("model.embed_tokens.weight", (int64_t)c->vocab_size, Hd, embed);
    ADD("model.norm.weight", Hd, 0, shared);
    static const char *const norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                        "post_feedforward_layernorm"};
    for (int l = 0; l < c->num_layers; l++) {
        char nm[80];
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, norms[i]);
            ADD(nm, Hd, 0, shared);
        }
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(nm, QW, Hd, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(nm, KW, Hd, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.v_proj.weight", l);
        ADD(nm, KW, Hd, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(nm, Hd, QW, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(nm, I, Hd, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(nm, I, Hd, shared);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.down_proj.weight", l);
        ADD(nm, Hd, I, shared);
    }
#undef ADD
    char config[512];
    snprintf(config, sizeof config,
             "{\"model_type\": \"gemma2\", \"vocab_size\": %d, \"num_hidden_layers\": %d, \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d}",
             c->vocab_size, c->num_layers, c->hidden_size, c->intermediate_size, c->num_heads, c->num_kv_heads,
             c->head_dim);
    const char *kv[] = {"config", config};
    lv_status s = lv_safetensors_write(path, t, k, kv, 1);
    free(t);
    free(names);
    return s == LV_OK ? 0 : -1;
}

#define FAIL()                                                          \
    do {                                                                \
        fprintf(stderr, "longvk bench text: %s\n", lv_last_error());    \
        goto done;                                                      \
    } while (0)

int bench_text(int argc, char **argv) {
    args = (text_bench_args){.layers = 26, .vocab = 256000, .tokens = 300, .runs = 3, .device = -1};
    int r = cli_parse(&bench_text_spec, argc, argv);
    if (r >= 0) return r;
    lv_gemma2_config cfg;
    lv_gemma2_config_default(&cfg);
    cfg.num_layers = args.layers;
    cfg.vocab_size = args.vocab;
    const int n = args.tokens, runs = args.runs;
    int64_t Hd = cfg.hidden_size;
    size_t shared_n = (size_t)cfg.intermediate_size * (size_t)Hd, embed_bytes = (size_t)cfg.vocab_size * Hd * 2;

    int rc = 1;
    uint16_t *shared = malloc(shared_n * sizeof *shared);
    void *embed = mmap(NULL, embed_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float *out = malloc((size_t)n * Hd * sizeof *out), *ref = NULL;
    double *times = calloc((size_t)runs, sizeof *times), *times0 = calloc((size_t)runs, sizeof *times0);
    lv_gemma2_file *file = NULL;
    lv_ctx *ctx = NULL;
    lv_gemma2 *enc = NULL, *ref_enc = NULL;
    char path[4096] = "";
    if (!shared || embed == MAP_FAILED || !ids || !out || !times || !times0) {
        fprintf(stderr, "longvk bench text: out of host memory\n");
        if (embed == MAP_FAILED) embed = NULL;
        goto done;
    }
    /* 0.02: the spread of trained projection weights; norms are offsets around 1 + w */
    for (size_t i = 0; i < shared_n; i++) shared[i] = rand_bf16(0.02f);
    ids[0] = cfg.bos_token_id;
    for (int i = 1; i < n; i++) ids[i] = 4 + (int32_t)((uint64_t)i * 2654435761u % (uint64_t)(cfg.vocab_size - 4));
    const char *tmpdir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/longvk-bench-text-%ld.safetensors", tmpdir && *tmpdir ? tmpdir : "/tmp",
             (long)getpid());
    double t0 = bench_now();
    if (write_model(path, &cfg, shared, embed, ids, n) != 0) FAIL();
    double t_write = bench_now() - t0;
    lv_status s = lv_gemma2_file_open(path, NULL, &file);
    remove(path); /* mapped: the data stays until closed */
    if (s != LV_OK) FAIL();
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.device_index = (int)args.device;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) FAIL();
    t0 = bench_now();
    lv_gemma2_options gopt;
    lv_gemma2_options_default(&gopt);
    static const int dtypes[] = {-1, LV_F32, LV_F16, LV_BF16, LV_Q8_0, LV_Q4_K}; /* lv_dit_weights' order */
    gopt.weight_dtype = dtypes[args.weights];
    if (lv_gemma2_create(ctx, file, &gopt, &enc) != LV_OK) FAIL();
    double t_upload = bench_now() - t0;
    /* warm-up (pipelines, work buffers), then the timed runs */
    if (lv_gemma2_encode(enc, ids, n, out) != LV_OK) FAIL();
    for (int i = 0; i < runs; i++) {
        /* the run with no layer first, so that `out` ends with the full encoder's (checked
         * below, and --nmse's) */
        t0 = bench_now();
        if (lv_gemma2_encode_layers(enc, ids, n, 0, 1, out) != LV_OK) FAIL();
        times0[i] = bench_now() - t0;
        t0 = bench_now();
        if (lv_gemma2_encode(enc, ids, n, out) != LV_OK) FAIL();
        times[i] = bench_now() - t0;
    }
    int finite = 1;
    for (size_t i = 0; i < (size_t)n * Hd; i++) finite &= isfinite(out[i]) != 0;
    double full = bench_median(times, runs), none = bench_median(times0, runs);
    double per_layer = (full - none) / cfg.num_layers, full26 = none + 26 * per_layer;
    lv_gemma2_memory mem;
    lv_gemma2_memory_usage(enc, &mem);
    char nmse[32] = "null";
    double nmse_s = 0;
    if (args.nmse) {
        /* the same file and tokens, the matrices as stored */
        t0 = bench_now();
        gopt.weight_dtype = -1;
        if (!(ref = malloc((size_t)n * Hd * sizeof *ref))) {
            fprintf(stderr, "longvk bench text: out of host memory\n");
            goto done;
        }
        if (lv_gemma2_create(ctx, file, &gopt, &ref_enc) != LV_OK || lv_gemma2_encode(ref_enc, ids, n, ref) != LV_OK)
            FAIL();
        snprintf(nmse, sizeof nmse, "%.6g", bench_nmse(out, ref, (size_t)n * Hd));
        nmse_s = bench_now() - t0;
    }
    const lv_device_info *dev = lv_ctx_device(ctx);
    const char *dtype_name = bench_weights_name(args.weights);
    if (args.json) {
        printf("{\"device\": \"%s\", \"layers\": %d, \"vocab\": %d, \"tokens\": %d, \"runs\": %d, "
               "\"seconds_per_prompt\": %.6g, \"seconds_no_layer\": %.6g, \"seconds_per_layer\": %.6g, "
               "\"seconds_per_prompt_26_layers\": %.6g, \"extrapolated\": %s, \"device_weight_bytes\": %llu, "
               "\"device_work_bytes\": %llu, \"write_seconds\": %.3f, \"upload_seconds\": %.3f, "
               "\"weights_dtype\": \"%s\", \"nmse_vs_bf16\": %s}\n",
               dev->name, cfg.num_layers, cfg.vocab_size, n, runs, full, none, per_layer, full26,
               cfg.num_layers == 26 ? "false" : "true", (unsigned long long)mem.weights,
               (unsigned long long)mem.work, t_write, t_upload, dtype_name, nmse);
    } else {
        printf("bench text on %s: Gemma-2-2B shape, %d of 26 layers, random bf16 weights (matrices %s on the "
               "device), vocab %d, %d tokens, median of %d\n",
               dev->name, cfg.num_layers, dtype_name, cfg.vocab_size, n, runs);
        printf("  %.3f s per %d-token prompt (%d layers); %.3f s with no layer (lookup, norm, transfers)\n", full, n,
               cfg.num_layers, none);
        printf("  %.3f s per layer\n", per_layer);
        printf("  26 layers: %.2f s per prompt%s\n", full26, cfg.num_layers == 26 ? " (measured)" : " (extrapolated)");
        printf("  device memory: weights %.1f MiB, work %.1f MiB; file written in %.1f s, uploaded in %.1f s\n",
               (double)mem.weights / 1048576.0, (double)mem.work / 1048576.0, t_write, t_upload);
        if (args.nmse)
            printf("  quality: NMSE %s of the last hidden state with %s matrices against bf16 (%.1f s)\n", nmse,
                   dtype_name, nmse_s);
    }
    if (!finite) {
        fprintf(stderr, "longvk bench text: the output is not finite\n");
        goto done;
    }
    rc = 0;
done:
    if (ref_enc) lv_gemma2_destroy(ref_enc);
    if (enc) lv_gemma2_destroy(enc);
    if (ctx) lv_ctx_destroy(ctx);
    lv_gemma2_file_close(file);
    if (embed) munmap(embed, embed_bytes);
    free(shared);
    free(ids);
    free(out);
    free(ref);
    free(times);
    free(times0);
    return rc;
}
