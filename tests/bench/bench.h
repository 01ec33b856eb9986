/* `longvk bench NAME [--json]`: one benchmark per file (tests/bench/bench_<name>.c).
 * Each prints its figures, or with json one JSON object on stdout, and returns the exit
 * status. Timings are medians of repeated runs measured in one process. */
#ifndef LONGVK_BENCH_H
#define LONGVK_BENCH_H

#include <stdbool.h>

int bench_gemm(int argc, char **argv, bool json);
int bench_attn(int argc, char **argv, bool json);
int bench_encode(int argc, char **argv, bool json);
int bench_chunks(int argc, char **argv, bool json);
int bench_vae(int argc, char **argv, bool json);

/* Monotonic seconds. */
double bench_now(void);
/* Median of n values (sorts them). */
double bench_median(double *values, int n);
/* Peak and current resident set size of this process in bytes (VmHWM, VmRSS), 0 if unknown. */
long long bench_peak_rss(void);
long long bench_rss(void);

#endif
