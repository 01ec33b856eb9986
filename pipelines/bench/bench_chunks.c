/* `longvk bench chunks`: LongSANA block-wise generation for 200 chunks of a small random
 * model, with time and memory per chunk at chunks 2, 20 and 200. The carried state has a
 * fixed size, so neither may grow with the chunk index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "longvk.h"
#include "longvk/dit.h"
#include "longvk/sampler.h"

#define CHUNKS 200
#define WINDOW 9 /* chunks around each measuring point, for a median */

typedef struct bench_model {
    int hidden, depth, heads, head_dim, in_channels, caption, text_len;
    int frames, height, width; /* one chunk, latent */
} bench_model;

static const bench_model model = {
    .hidden = 128, .depth = 2, .heads = 2, .head_dim = 64, .in_channels = 4, .caption = 32,
    .text_len = 8, .frames = 2, .height = 8, .width = 8,
};

/* CPU seconds of this process, every thread (lavapipe's workers included): steadier
 * than wall time on a shared machine, since other processes' load does not count. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


/* Random weights (N(0, 0.02)-ish uniform) under the original names, written to `path`. */
static lv_status write_random_model(const char *path) {
    const int C = model.hidden, Fh = 3 * C, K = model.in_channels * 4;
    char names[64][96];
    lv_weight w[64];
    float *data[64];
    int n = 0;
#define ADD(nm, ...)                                                                          \
    do {                                                                                      \
        int64_t shp[] = {__VA_ARGS__};                                                        \
        int nd = (int)(sizeof shp / sizeof shp[0]);                                           \
        snprintf(names[n], sizeof names[n], "%s", nm);                                        \
        memset(&w[n], 0, sizeof w[n]);                                                        \
        w[n].name = names[n];                                                                 \
        w[n].dtype = LV_F32;                                                                  \
        w[n].ndim = nd;                                                                       \
        int64_t cnt = 1;                                                                      \
        for (int d = 0; d < nd; d++) cnt *= (w[n].shape[d] = shp[d]);                         \
        data[n] = malloc((size_t)cnt * 4);                                                    \
        for (int64_t i = 0; i < cnt; i++)                                                     \
            data[n][i] = 0.04f * ((float)((i * 2654435761u + (uint64_t)n * 40503u) % 1000) / 1000.0f - 0.5f); \
        w[n].data = data[n];                                                                  \
        w[n].nbytes = (uint64_t)cnt * 4;                                                      \
        n++;                                                                                  \
    } while (0)
    ADD("x_embedder.proj.weight", C, model.in_channels, 1, 2, 2);
    ADD("x_embedder.proj.bias", C);
    ADD("t_embedder.mlp.0.weight", C, 256);
    ADD("t_embedder.mlp.0.bias", C);
    ADD("t_embedder.mlp.2.weight", C, C);
    ADD("t_embedder.mlp.2.bias", C);
    ADD("t_block.1.weight", 6 * C, C);
    ADD("t_block.1.bias", 6 * C);
    ADD("y_embedder.y_proj.fc1.weight", C, model.caption);
    ADD("y_embedder.y_proj.fc1.bias", C);
    ADD("y_embedder.y_proj.fc2.weight", C, C);
    ADD("y_embedder.y_proj.fc2.bias", C);
    ADD("attention_y_norm.weight", C);
    ADD("final_layer.linear.weight", K, C);
    ADD("final_layer.linear.bias", K);
    ADD("final_layer.scale_shift_table", 2, C);
    for (int b = 0; b < model.depth; b++) {
        char p[96];
#define BLK(suffix, ...)                                                                          \
    do {                                                                                          \
        snprintf(p, sizeof p, "blocks.%d.%s", b, suffix);                                         \
        ADD(p, __VA_ARGS__);                                                                      \
    } while (0)
        BLK("scale_shift_table", 6, C);
        BLK("attn.qkv.weight", 3 * C, C);
        BLK("attn.q_norm.weight", C);
        BLK("attn.k_norm.weight", C);
        BLK("attn.proj.weight", C, C);
        BLK("attn.proj.bias", C);
        BLK("cross_attn.q_linear.weight", C, C);
        BLK("cross_attn.q_linear.bias", C);
        BLK("cross_attn.kv_linear.weight", 2 * C, C);
        BLK("cross_attn.kv_linear.bias", 2 * C);
        BLK("cross_attn.proj.weight", C, C);
        BLK("cross_attn.proj.bias", C);
        BLK("cross_attn.q_norm.weight", C);
        BLK("cross_attn.k_norm.weight", C);
        BLK("mlp.inverted_conv.conv.weight", 2 * Fh, C, 1, 1);
        BLK("mlp.inverted_conv.conv.bias", 2 * Fh);
        BLK("mlp.depth_conv.conv.weight", 2 * Fh, 1, 3, 3);
        BLK("mlp.depth_conv.conv.bias", 2 * Fh);
        BLK("mlp.point_conv.conv.weight", C, Fh, 1, 1);
        BLK("mlp.t_conv.weight", C, C, 3, 1);
#undef BLK
    }
#undef ADD
    char config[512];
    snprintf(config, sizeof config,
             "{\"hidden_size\": %d, \"depth\": %d, \"num_heads\": %d, \"head_dim\": %d, "
             "\"patch_size\": [1, 2, 2], \"in_channels\": %d, \"out_channels\": %d, "
             "\"caption_channels\": %d, \"mlp_ratio\": 3.0}",
             C, model.depth, model.heads, model.head_dim, model.in_channels, model.in_channels,
             model.caption);
    const char *meta[2] = {"config", config};
    lv_status s = lv_safetensors_write(path, w, n, meta, 1);
    for (int i = 0; i < n; i++) free(data[i]);
    return s;
}

static bool json_flag;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &json_flag, .help = "one JSON object with the same figures"},
};

const cli_spec bench_chunks_spec = {
    .command = "bench chunks",
    .usage = "[--json]",
    .about = "LongSANA block-wise generation for 200 chunks of a small random model: time and memory per\n"
             "chunk at chunks 2, 20 and 200 (neither may grow with the chunk index).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

int bench_chunks(int argc, char **argv) {
    json_flag = false;
    int r = cli_parse(&bench_chunks_spec, argc, argv);
    if (r >= 0) return r;
    const bool json = json_flag;
    char path[256];
    snprintf(path, sizeof path, "/tmp/longvk-bench-chunks-%d.safetensors", (int)getpid());
    lv_sana_file *file = NULL;
    lv_ctx *ctx = NULL;
    lv_dit *dit = NULL;
    float *x0 = NULL, *y = NULL;
    int rc = 1;
    if (write_random_model(path) != LV_OK || lv_sana_file_open(path, NULL, NULL, &file) != LV_OK) {
        fprintf(stderr, "longvk bench chunks: %s\n", lv_last_error());
        goto done;
    }
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    if (lv_ctx_create(&opt, &ctx) != LV_OK) {
        fprintf(stderr, "longvk bench chunks: %s\n", lv_last_error());
        goto done;
    }
    lv_dit_options dopt = {.cached_blocks = LV_CACHED_ALL};
    y = malloc((size_t)model.text_len * model.caption * sizeof *y);
    for (int i = 0; i < model.text_len * model.caption; i++) y[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    if (lv_dit_create(ctx, file, &dopt, &dit) != LV_OK ||
        lv_dit_set_text(ctx, dit, 0, y, model.text_len, NULL) != LV_OK) {
        fprintf(stderr, "longvk bench chunks: %s\n", lv_last_error());
        goto done;
    }
    const float steps[4] = {1000, 960, 889, 727};
    lv_chunk_options copt = {.timesteps = steps, .steps = 4, .seed = 1, .cfg_scale = 1.0};
    size_t n = (size_t)model.in_channels * model.frames * model.height * model.width;
    x0 = malloc(n * sizeof *x0);
    static double seconds[CHUNKS + 1], cpu[CHUNKS + 1];
    static long long rss[CHUNKS + 1];
    static uint64_t device[CHUNKS + 1];
    if (!json)
        fprintf(stderr, "running %d chunks (hidden %d, depth %d, %d frames of %dx%d latents, 4 steps + write pass)...\n",
                CHUNKS, model.hidden, model.depth, model.frames, model.height, model.width);
    for (int c = 1; c <= CHUNKS; c++) {
        double t0 = bench_now(), c0 = cpu_now();
        if (lv_longsana_chunk(ctx, dit, &copt, c - 1, (c - 1) * model.frames, model.frames,
                              model.height, model.width, x0) != LV_OK) {
            fprintf(stderr, "longvk bench chunks: chunk %d: %s\n", c, lv_last_error());
            goto done;
        }
        seconds[c] = bench_now() - t0;
        cpu[c] = cpu_now() - c0;
        rss[c] = bench_rss();
        device[c] = lv_ctx_memory_in_use(ctx);
    }
    const int points[3] = {2, 20, 200};
    double med[3], cmed[3];
    for (int p = 0; p < 3; p++) {
        double win[WINDOW], cwin[WINDOW];
        int lo = points[p] - WINDOW / 2;
        if (lo < 1) lo = 1;
        if (lo + WINDOW - 1 > CHUNKS) lo = CHUNKS - WINDOW + 1;
        for (int i = 0; i < WINDOW; i++) {
            win[i] = seconds[lo + i];
            cwin[i] = cpu[lo + i];
        }
        med[p] = bench_median(win, WINDOW);
        cmed[p] = bench_median(cwin, WINDOW);
    }
    double time_ratio = med[2] / med[0], cpu_ratio = cmed[2] / cmed[0];
    double rss_ratio = (double)rss[200] / (double)rss[2];
    double dev_ratio = (double)device[200] / (double)device[2];
    if (json) {
        printf("{\"bench\": \"chunks\", \"chunks\": %d, \"frames_per_chunk\": %d, "
               "\"ms_per_chunk\": {\"2\": %.3f, \"20\": %.3f, \"200\": %.3f}, "
               "\"cpu_ms_per_chunk\": {\"2\": %.3f, \"20\": %.3f, \"200\": %.3f}, "
               "\"rss_bytes\": {\"2\": %lld, \"20\": %lld, \"200\": %lld}, "
               "\"device_bytes\": {\"2\": %llu, \"20\": %llu, \"200\": %llu}, "
               "\"state_bytes\": %llu, \"time_ratio_200_2\": %.4f, \"cpu_ratio_200_2\": %.4f, "
               "\"rss_ratio_200_2\": %.4f, "
               "\"device_ratio_200_2\": %.4f}\n",
               CHUNKS, model.frames, med[0] * 1e3, med[1] * 1e3, med[2] * 1e3, cmed[0] * 1e3,
               cmed[1] * 1e3, cmed[2] * 1e3, rss[2], rss[20],
               rss[200], (unsigned long long)device[2], (unsigned long long)device[20],
               (unsigned long long)device[200], (unsigned long long)lv_dit_state_bytes(dit),
               time_ratio, cpu_ratio, rss_ratio, dev_ratio);
    } else {
        printf("device: %s\n", lv_ctx_device(ctx)->name);
        printf("%-8s %12s %14s %14s %16s\n", "chunk", "ms/chunk", "CPU ms/chunk", "process RSS", "device memory");
        for (int p = 0; p < 3; p++)
            printf("%-8d %12.2f %14.2f %11.1f MiB %13.2f MiB\n", points[p], med[p] * 1e3, cmed[p] * 1e3,
                   (double)rss[points[p]] / (1 << 20), (double)device[points[p]] / (1 << 20));
        printf("carried state: %.1f KiB (all layers)\n", (double)lv_dit_state_bytes(dit) / 1024);
        printf("ratios chunk 200 / chunk 2: wall time %.3f, CPU time %.3f, RSS %.3f, device memory %.3f "
               "(goal <= 1.05)\n", time_ratio, cpu_ratio, rss_ratio, dev_ratio);
        printf("(medians of %d chunks around each point; CPU time counts every thread of this process "
               "and is the steadier figure on a shared machine)\n", WINDOW);
    }
    rc = 0;
done:
    if (dit) lv_dit_destroy(ctx, dit);
    if (ctx) lv_ctx_destroy(ctx);
    lv_sana_file_close(file);
    unlink(path);
    free(x0);
    free(y);
    return rc;
}
