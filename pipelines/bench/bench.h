/* `longvk bench NAME [--json] [options]`: one benchmark per file (pipelines/bench/bench_<name>.c).
 * Each prints its figures, or with --json one JSON object on stdout, and returns the exit
 * status. Timings are medians of repeated runs measured in one process. Each parses its
 * options with one table (pipelines/cli_options/options.h), bench_<name>_spec. The
 * benchmarks use the library's public API only; the program (pipelines/cli) calls cmd_bench. */
#ifndef LONGVK_BENCH_H
#define LONGVK_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "options.h"

/* `longvk bench ARGS...` (argv[0] "bench"): runs the benchmark argv[1] names, or lists them
 * all with their options; returns the exit status (2: usage). */
int cmd_bench(int argc, char **argv);

int bench_gemm(int argc, char **argv);
int bench_attn(int argc, char **argv);
int bench_encode(int argc, char **argv);
int bench_chunks(int argc, char **argv);
int bench_vae(int argc, char **argv);
int bench_text(int argc, char **argv);
int bench_dit(int argc, char **argv);
int bench_sp(int argc, char **argv);
int bench_generate(int argc, char **argv);

extern const cli_spec bench_gemm_spec, bench_attn_spec, bench_encode_spec, bench_chunks_spec, bench_vae_spec,
    bench_text_spec, bench_dit_spec, bench_sp_spec, bench_generate_spec;

/* Every benchmark, in the order `longvk bench --help` lists them (bench_main.c). */
typedef struct bench_entry {
    const char *name;
    int (*run)(int argc, char **argv);
    const cli_spec *spec;
    const char *summary;
} bench_entry;
extern const bench_entry bench_entries[];
extern const int bench_count;

/* Print "longvk: <context>: <message>" for the library's last error on stderr; returns 1. */
int bench_fail(const char *context);

/* Monotonic seconds. */
double bench_now(void);
/* Median of n values (sorts them). */
double bench_median(double *values, int n);
/* The quality figure of --nmse: sum (got - want)^2 / sum want^2 over n values (0 when both are
 * zero, -1 when only `want` is). */
double bench_nmse(const float *got, const float *want, size_t n);
/* The weight rule a bench reports (--weights-dtype, --text-weights-dtype: lv_dit_weights'
 * values): its name, "bf16" for as-stored (the benches make their random weights in bf16). */
const char *bench_weights_name(int weights);
/* Peak and current resident set size of this process in bytes (VmHWM, VmRSS), 0 if unknown. */
long long bench_peak_rss(void);
long long bench_rss(void);

/* A known device's dense arithmetic peaks in TFLOP/s (bench_peak.c, each with its source). */
typedef struct bench_peak {
    const char *match; /* a substring of the Vulkan device name */
    const char *label; /* the part it stands for */
    double fp32;       /* plain fp32 FMA rate */
    double half;       /* fp16 / bf16 tensor cores, fp32 accumulation, dense */
    const char *source;
} bench_peak;
/* NULL when the device is not in the table (then print "peak unknown"). */
const bench_peak *bench_peak_of(const char *device_name);
/* tflops / peak, or -1 when the peak is unknown (peak <= 0). */
double bench_peak_fraction(double tflops, double peak_tflops);
/* A fraction for JSON: "0.1234", or "null" when negative (unknown); buf of 16 bytes or more. */
const char *bench_json_fraction(char *buf, unsigned size, double fraction);

#endif
