/* `longvk bench attn [--json] [--device N]`
 *
 * Block-wise linear attention with a carried state (2 heads x 64 dims, 256 tokens per
 * block, relu, normalised, RoPE, additive rule), committed block after block up to block
 * 1000. At blocks 1, 10, 100 and 1000 the time of one block is measured: the median of
 * several read passes (exactly the work of a write pass without the commit), each
 * submitted and waited for on its own. From it: tokens/s, GFLOP/s and effective GB/s
 * (q, k, v read once, o written once, the state slots read and written once each).
 * Sustained tokens/s covers the untimed blocks between the measurements, recorded in one
 * stream. Linear attention's cost per block must not grow: the ratio time(block 1000) /
 * time(block 1) should stay at or under 1.05. Also printed: the fastest of the passes and
 * their median process CPU time, both far less sensitive than the median wall time to
 * other work on a shared machine.
 *
 * For contrast, in this benchmark only, softmax attention with a growing key/value cache
 * at the same positions (block b's queries attend to the b * 256 keys so far), as a plain
 * one-thread C loop: its time per block and cache grow with b. At large b it is timed on
 * a subset of the block's queries and scaled to the whole block (each query costs the
 * same), which the output states. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "longvk.h"

#define BA_HEADS 2
#define BA_DIM 64
#define BA_TOKENS 256
#define BA_BLOCKS 1000
#define BA_REPEATS 31

static const int ba_points[4] = {1, 10, 100, 1000};

typedef struct ba_point {
    int index;
    double ms, min_ms, cpu_ms;
    /* softmax with a KV cache */
    int64_t keys;
    int queries_timed;
    double softmax_ms;
    uint64_t cache_bytes;
} ba_point;

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_random(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

/* Softmax attention of nq queries [nq, H*D] over `keys` cached keys and values
 * [keys, H*D], scale 1/sqrt(D); scores is scratch of `keys` floats. */
static void softmax_attention(float *out, const float *q, const float *K, const float *V,
                              int64_t keys, int nq, float *scores) {
    const int row = BA_HEADS * BA_DIM;
    const float scale = 1.0f / sqrtf((float)BA_DIM);
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < BA_HEADS; h++) {
            const float *qi = q + (size_t)i * row + h * BA_DIM;
            float mx = -INFINITY;
            for (int64_t j = 0; j < keys; j++) {
                const float *kj = K + (size_t)j * row + h * BA_DIM;
                float s = 0;
                for (int d = 0; d < BA_DIM; d++) s += qi[d] * kj[d];
                scores[j] = s * scale;
                if (scores[j] > mx) mx = scores[j];
            }
            float acc[BA_DIM] = {0}, sum = 0;
            for (int64_t j = 0; j < keys; j++) {
                float w = expf(scores[j] - mx);
                sum += w;
                const float *vj = V + (size_t)j * row + h * BA_DIM;
                for (int d = 0; d < BA_DIM; d++) acc[d] += w * vj[d];
            }
            for (int d = 0; d < BA_DIM; d++) out[(size_t)i * row + h * BA_DIM + d] = acc[d] / sum;
        }
}

static int fail(const char *what) {
    fprintf(stderr, "longvk bench attn: %s: %s\n", what, lv_last_error());
    return 1;
}

static struct {
    bool json;
    long device;
} args;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--device", .kind = CLI_LONG, .dest = &args.device, .min = 0, .max = 64,
     .help = "Vulkan device (see `longvk devices`)"},
};

const cli_spec bench_attn_spec = {
    .command = "bench attn",
    .usage = "[--json] [--device N]",
    .about = "Linear attention with a carried state (2 heads x 64 dims, 256 tokens per block), time per\n"
             "block at blocks 1, 10, 100 and 1000, beside softmax attention with a growing KV cache.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

int bench_attn(int argc, char **argv) {
    args.json = false;
    args.device = -1;
    int r = cli_parse(&bench_attn_spec, argc, argv);
    if (r >= 0) return r;
    const bool json = args.json;
    const long device = args.device;
    const int H = BA_HEADS, D = BA_DIM, n = BA_TOKENS, row = H * D;
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    if (device >= 0) opt.device_index = (int)device;
    lv_ctx *ctx;
    if (lv_ctx_create(&opt, &ctx) != LV_OK) return fail("context");

    /* inputs of one block (their values do not change the cost) */
    float *host = malloc((size_t)n * row * sizeof *host), *table = malloc((size_t)n * D * sizeof *table);
    if (!host || !table) return fail("host memory");
    int64_t sh[2] = {n, row}, shr[2] = {n, D};
    lv_tensor tq, tk, tv, to, tr;
    if (lv_tensor_create(ctx, LV_F32, 2, sh, &tq) || lv_tensor_create(ctx, LV_F32, 2, sh, &tk) ||
        lv_tensor_create(ctx, LV_F32, 2, sh, &tv) || lv_tensor_create(ctx, LV_F32, 2, sh, &to) ||
        lv_tensor_create(ctx, LV_F32, 2, shr, &tr))
        return fail("tensors");
    const lv_tensor *inputs[3] = {&tq, &tk, &tv};
    for (int i = 0; i < 3; i++) {
        fill_random(host, (size_t)n * row, 11u + (uint32_t)i);
        if (lv_tensor_write(ctx, inputs[i], host, (uint64_t)n * row * 4) != LV_OK) return fail("upload");
    }
    for (int t = 0; t < n; t++)
        for (int j = 0; j < D / 2; j++) {
            double a = (double)t * pow(10000.0, -2.0 * j / D);
            table[t * D + 2 * j] = (float)cos(a);
            table[t * D + 2 * j + 1] = (float)sin(a);
        }
    if (lv_tensor_write(ctx, &tr, table, (uint64_t)n * D * 4) != LV_OK) return fail("upload");

    lv_linattn_config cfg = {.heads = H, .head_dim = D, .phi = LV_PHI_RELU, .normalize = true,
                             .eps = 1e-6f, .rule = LV_RULE_ADDITIVE};
    lv_linattn_state *st;
    if (lv_linattn_state_create(ctx, &cfg, &st) != LV_OK) return fail("state");
    /* warm-up: pipelines are created on first use, and lavapipe's worker threads and caches
     * settle over the first passes */
    for (int r = 0; r < 2 * BA_REPEATS; r++)
        if (lv_linattn_block_read(ctx, st, &to, &tq, &tk, &tv, &tr) != LV_OK || lv_flush(ctx) != LV_OK)
            return fail("warm-up");
    const uint64_t state_bytes = lv_linattn_state_bytes(st);
    uint64_t mem_first = 0, mem_last = 0;

    ba_point pts[4];
    int np = 0;
    double sustained_s = 0;
    int64_t sustained_blocks = 0;
    double t_run = bench_now();
    for (int b = 1; b <= BA_BLOCKS; b++) {
        if (np < 4 && b == ba_points[np]) {
            if (lv_flush(ctx) != LV_OK) return fail("flush");
            if (np > 0) {
                sustained_s += bench_now() - t_run;
                sustained_blocks += b - 1 - ba_points[np - 1];
            }
            double wall[BA_REPEATS], cpu[BA_REPEATS];
            for (int r = 0; r < BA_REPEATS; r++) {
                double t0 = bench_now(), c0 = cpu_now();
                if (lv_linattn_block_read(ctx, st, &to, &tq, &tk, &tv, &tr) != LV_OK || lv_flush(ctx) != LV_OK)
                    return fail("read pass");
                wall[r] = bench_now() - t0;
                cpu[r] = cpu_now() - c0;
            }
            pts[np].index = b;
            pts[np].ms = 1e3 * bench_median(wall, BA_REPEATS);
            pts[np].min_ms = 1e3 * wall[0]; /* bench_median sorted it */
            pts[np].cpu_ms = 1e3 * bench_median(cpu, BA_REPEATS);
            if (b == 1) mem_first = lv_ctx_memory_in_use(ctx);
            if (b == BA_BLOCKS) mem_last = lv_ctx_memory_in_use(ctx);
            np++;
            if (lv_linattn_block_write(ctx, st, &to, &tq, &tk, &tv, &tr) != LV_OK || lv_flush(ctx) != LV_OK)
                return fail("write pass");
            t_run = bench_now();
            continue;
        }
        if (lv_linattn_block_write(ctx, st, &to, &tq, &tk, &tv, &tr) != LV_OK) return fail("write pass");
    }
    if (lv_flush(ctx) != LV_OK) return fail("flush");

    /* softmax attention with a growing KV cache, plain C, one thread */
    const int64_t max_keys = (int64_t)BA_BLOCKS * n;
    float *Kc = malloc((size_t)max_keys * row * sizeof *Kc), *Vc = malloc((size_t)max_keys * row * sizeof *Vc);
    float *scores = malloc((size_t)max_keys * sizeof *scores), *sout = malloc((size_t)n * row * sizeof *sout);
    if (!Kc || !Vc || !scores || !sout) return fail("host memory for the KV cache");
    fill_random(Kc, (size_t)max_keys * row, 21u);
    fill_random(Vc, (size_t)max_keys * row, 22u);
    fill_random(host, (size_t)n * row, 23u);
    for (int i = 0; i < 4; i++) {
        ba_point *p = &pts[i];
        p->keys = (int64_t)p->index * n;
        p->cache_bytes = (uint64_t)p->keys * row * 2 * 4;
        int nq = n * 10 / p->index;
        if (nq < 8) nq = 8;
        if (nq > n) nq = n;
        p->queries_timed = nq;
        int reps = p->index >= 1000 ? 1 : 3;
        double t[3];
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            softmax_attention(sout, host, Kc, Vc, p->keys, nq, scores);
            t[r] = (bench_now() - t0) * (double)n / nq;
        }
        p->softmax_ms = 1e3 * bench_median(t, reps);
    }

    const double flop = 4.0 * n * H * D * D;                     /* state + query */
    const double bytes = 4.0 * n * row * 4 + 5.0 * H * D * (D + 1) * 4; /* see the header */
    const lv_device_info *dev = lv_ctx_device(ctx);
    double ratio = pts[3].ms / pts[0].ms, sratio = pts[3].softmax_ms / pts[0].softmax_ms;
    double cpu_ratio = pts[3].cpu_ms / pts[0].cpu_ms, min_ratio = pts[3].min_ms / pts[0].min_ms;
    double sustained = sustained_s > 0 ? (double)sustained_blocks * n / sustained_s : 0;
    if (json) {
        printf("{\"bench\": \"attn\", \"device\": \"%s\", \"heads\": %d, \"head_dim\": %d, "
               "\"block_tokens\": %d, \"feature\": \"relu\", \"normalize\": true, \"rope\": true, "
               "\"rule\": \"additive\", \"points\": [", dev->name, H, D, n);
        for (int i = 0; i < 4; i++) {
            const ba_point *p = &pts[i];
            printf("%s{\"block\": %d, \"ms\": %.4f, \"min_ms\": %.4f, \"cpu_ms\": %.4f, \"tokens_per_s\": %.1f, "
                   "\"gflops\": %.3f, \"gbps\": %.3f, \"softmax_keys\": %lld, \"softmax_ms\": %.3f, "
                   "\"softmax_queries_timed\": %d, \"kv_cache_bytes\": %llu}",
                   i ? ", " : "", p->index, p->ms, p->min_ms, p->cpu_ms, n / (p->ms * 1e-3),
                   flop / (p->ms * 1e-3) * 1e-9, bytes / (p->ms * 1e-3) * 1e-9, (long long)p->keys,
                   p->softmax_ms, p->queries_timed, (unsigned long long)p->cache_bytes);
        }
        printf("], \"ratio_last_first\": %.4f, \"min_ratio_last_first\": %.4f, "
               "\"cpu_ratio_last_first\": %.4f, "
               "\"softmax_ratio_last_first\": %.2f, "
               "\"sustained_tokens_per_s\": %.1f, \"state_bytes\": %llu, "
               "\"memory_in_use_block_1\": %llu, \"memory_in_use_block_1000\": %llu}\n",
               ratio, min_ratio, cpu_ratio, sratio, sustained, (unsigned long long)state_bytes,
               (unsigned long long)mem_first, (unsigned long long)mem_last);
    } else {
        printf("linear attention with a carried state on %s\n", dev->name);
        printf("%d heads x %d dims, %d tokens per block, relu, normalised, RoPE, additive rule;\n"
               "time of one block = median of %d read passes, each submitted and waited for\n\n",
               H, D, n, BA_REPEATS);
        printf("%6s %10s %8s %8s %11s %8s %8s | %10s %13s %10s\n", "block", "ms/block", "min ms", "cpu ms",
               "tokens/s", "GFLOP/s", "GB/s", "KV keys", "softmax ms", "cache MiB");
        for (int i = 0; i < 4; i++) {
            const ba_point *p = &pts[i];
            char sm[32];
            snprintf(sm, sizeof sm, "%.2f%s", p->softmax_ms, p->queries_timed < n ? "*" : "");
            printf("%6d %10.3f %8.3f %8.3f %11.0f %8.2f %8.3f | %10lld %13s %10.1f\n", p->index, p->ms,
                   p->min_ms, p->cpu_ms, n / (p->ms * 1e-3), flop / (p->ms * 1e-3) * 1e-9,
                   bytes / (p->ms * 1e-3) * 1e-9, (long long)p->keys, sm,
                   (double)p->cache_bytes / (1 << 20));
        }
        printf("\n* timed on %d of the %d queries and scaled (every query costs the same)\n",
               pts[3].queries_timed, n);
        printf("ratio time(block 1000) / time(block 1): linear attention %.3f (goal <= 1.05: %s; "
               "fastest pass %.3f, process CPU time %.3f), softmax with KV cache %.0f\n", ratio,
               ratio <= 1.05 ? "met" : "NOT met", min_ratio, cpu_ratio, sratio);
        printf("sustained, blocks between the measurements in one stream: %.0f tokens/s\n", sustained);
        printf("state: %llu bytes on the device, whatever the block; device memory in use at block 1 "
               "%llu, at block 1000 %llu\n", (unsigned long long)state_bytes,
               (unsigned long long)mem_first, (unsigned long long)mem_last);
        printf("softmax's KV cache at block 1000: %.1f MiB and growing by %.2f MiB per block\n",
               (double)pts[3].cache_bytes / (1 << 20), (double)n * row * 8 / (1 << 20));
    }
    free(Kc), free(Vc), free(scores), free(sout), free(host), free(table);
    lv_linattn_state_destroy(ctx, st);
    lv_tensor_free(ctx, &tq), lv_tensor_free(ctx, &tk), lv_tensor_free(ctx, &tv);
    lv_tensor_free(ctx, &to), lv_tensor_free(ctx, &tr);
    lv_ctx_destroy(ctx);
    return 0;
}
