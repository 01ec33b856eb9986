/* `longvk bench`: dispatch to one benchmark, plus the timing helpers they share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "longvk/dit.h"
#include "longvk/status.h"

const bench_entry bench_entries[] = {
    {"gemm", bench_gemm, &bench_gemm_spec, "matrix multiply GFLOP/s vs a C loop; TFLOP/s and % of peak at the DiT's shapes"},
    {"attn", bench_attn, &bench_attn_spec, "linear attention time per block at block 1, 10, 100, 1000"},
    {"encode", bench_encode, &bench_encode_spec, "encoder frames/s (libx264, ffv1) and memory for 10 vs 1000 frames"},
    {"chunks", bench_chunks, &bench_chunks_spec, "DiT chunks: time and memory per chunk at chunk 2, 20, 200"},
    {"vae", bench_vae, &bench_vae_spec, "VAE decode time per latent frame and memory"},
    {"text", bench_text, &bench_text_spec, "Gemma-2 text encoder seconds per 300-token prompt and per layer"},
    {"dit", bench_dit, &bench_dit_spec, "one LongSANA chunk of SANA-Video 2B: s/forward, frames/s, TFLOP/s, memory"},
    {"generate", bench_generate, &bench_generate_spec, "the whole block loop at 480p (DiT, VAE, encoder): frames/s end to end"},
    {"sp", bench_sp, &bench_sp_spec, "sequence parallelism: bytes, compute and communication per rank; modelled speed-up"},
};
const int bench_count = (int)(sizeof bench_entries / sizeof bench_entries[0]);

int bench_fail(const char *context) {
    const char *msg = lv_last_error();
    fprintf(stderr, "longvk: %s: %s\n", context, *msg ? msg : "failed");
    return 1;
}

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, cmp_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

const char *bench_weights_name(int weights) {
    return weights == LV_DIT_WEIGHTS_AS_STORED ? "bf16" : lv_dit_weights_name((lv_dit_weights)weights);
}

double bench_nmse(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        num += d * d;
        den += (double)want[i] * (double)want[i];
    }
    return den > 0 ? num / den : num == 0 ? 0 : -1;
}

static long long status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) kb = atoll(line + n);
    fclose(f);
    return kb * 1024;
}

long long bench_peak_rss(void) { return status_bytes("VmHWM:"); }
long long bench_rss(void) { return status_bytes("VmRSS:"); }

/* The list of benchmarks, then every benchmark's options. */
static void usage(FILE *out) {
    fprintf(out, "usage: longvk bench <name> [--json] [options]\n\nbenchmarks:\n");
    for (int i = 0; i < bench_count; i++) fprintf(out, "  %-8s %s\n", bench_entries[i].name, bench_entries[i].summary);
    fprintf(out, "\n--json prints one JSON object with the same figures. `longvk bench <name> --help`\n"
                 "describes one benchmark.\n");
    for (int i = 0; i < bench_count; i++) {
        const cli_spec *spec = bench_entries[i].spec;
        fprintf(out, "\nlongvk %s %s\n", spec->command, spec->usage);
        cli_help_options(spec, out);
    }
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < bench_count; i++)
        if (strcmp(argv[1], bench_entries[i].name) == 0) return bench_entries[i].run(argc - 1, argv + 1);
    fprintf(stderr, "longvk bench: unknown benchmark '%s' (", argv[1]);
    for (int i = 0; i < bench_count; i++) fprintf(stderr, "%s%s", i ? ", " : "", bench_entries[i].name);
    fprintf(stderr, ")\n");
    return 2;
}
