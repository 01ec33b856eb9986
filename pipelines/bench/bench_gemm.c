/* `longvk bench gemm [--json] [--shapes default|dit|4096|quant] [--variant auto|register|tiled] [--runs N]
 *                    [--shape MxNxK[:dtype]] [--no-c]`
 *
 * GFLOP/s of lv_op_matmul (out = a w^T, a f32 [M, K], w [N, K]).
 *
 * --shapes default (for lavapipe): fp32 1024 x 1024 x 1024 and DiT-shaped products (512 tokens
 * x 2240 -> 6720, the SANA-Video FFN width, with f32 and bf16 weights), each beside a plain
 * one-thread C loop timed in the same run. The C loop is blocked over 16 rows of w so that
 * they stay in cache (16-bit weights are widened once per block), and built for AVX2+FMA when
 * the CPU has it (the compiler then vectorises its 8 partial sums), like a -O3 -march=native
 * triple loop. The machine is often shared: besides wall-clock GFLOP/s the table shows GFLOP
 * per CPU-second ("per core"), which contention barely changes.
 *
 * --shapes dit / 4096 (for a GPU): the products of a SANA-Video 2B forward over one 480p
 * LongSANA chunk (M = 15600 tokens; K x N = 2240 x 6720, 2240 x 13440, 6720 x 2240), or
 * 4096^3, each with f32, f16 and bf16 weights, in TFLOP/s and as a fraction of the device's
 * peak from a table of known GPUs (bench_peak.c); no C loop (it would take minutes). Every
 * fp32 kernel computes in fp32 whatever the weights' dtype, so its fraction is given of the
 * fp32 peak and of the fp16/bf16 tensor peak (the goal: half of the latter); the
 * cooperative-matrix column times the tensor-core kernel (LV_MATMUL_COOPMAT: fp16 inputs,
 * fp32 accumulation) on the same product where the context has it, else says why not.
 *
 * --shapes quant (for lavapipe): 512 tokens through the DiT's products with f32, bf16 and
 * q8_0 weights (and q4_k at K = 2304, the nearest multiple of its 256-weight block), each
 * beside the C loop on the same dequantised weights.
 *
 * Device times are medians of several runs after a warm-up (pipeline creation excluded),
 * measured from the first dispatch to the end of lv_flush. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "longvk.h"

typedef struct gemm_case {
    char name[64];
    int64_t M, N, K;
    lv_dtype wdtype;
    int runs, c_runs;
    /* results: wall milliseconds (medians), process CPU seconds per run (lavapipe's worker
     * threads belong to this process: on a busy machine GFLOP per CPU-second still shows
     * what each core achieves), largest |device - C| / max |C| */
    double ms, c_ms, cpu_s, c_cpu_s, max_rel_err;
} gemm_case;

/* ---- the C loop ----------------------------------------------------------------------- */

#define CLOOP_BLOCK 16

/* out[m, n] = sum_k a[m, k] w[n, k] (out rows ldo apart) */
#define CLOOP_BODY(WIDEN)                                                                      \
    for (int64_t n0 = 0; n0 < N; n0 += CLOOP_BLOCK) {                                          \
        int64_t n1 = n0 + CLOOP_BLOCK < N ? n0 + CLOOP_BLOCK : N;                              \
        for (int64_t m = 0; m < M; m++) {                                                      \
            const float *ar = a + m * K;                                                       \
            for (int64_t n = n0; n < n1; n++) {                                                \
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                       \
                int64_t k = 0;                                                                 \
                for (; k + 8 <= K; k += 8)                                                     \
                    for (int j = 0; j < 8; j++) acc[j] += ar[k + j] * WIDEN(n * K + k + j);    \
                float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                            \
                          ((acc[4] + acc[5]) + (acc[6] + acc[7]));                             \
                for (; k < K; k++) s += ar[k] * WIDEN(n * K + k);                              \
                out[m * ldo + n] = s;                                                          \
            }                                                                                  \
        }                                                                                      \
    }

#define WIDEN_F32(i) wf[i]

static inline float bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#define CLOOP_FUNCS(SUFFIX, ATTR)                                                              \
    ATTR static void cloop_f32_##SUFFIX(float *out, const float *a, const float *wf, int64_t M,   \
                                        int64_t N, int64_t K, int64_t ldo) {                   \
        CLOOP_BODY(WIDEN_F32)                                                                  \
    }

CLOOP_FUNCS(plain, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CLOOP_HAVE_AVX2 1
CLOOP_FUNCS(avx2, __attribute__((target("avx2,fma"))))
#endif

static bool cloop_avx2(void) {
#ifdef CLOOP_HAVE_AVX2
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static void cloop_f32(float *out, const float *a, const float *wf, int64_t M, int64_t N, int64_t K,
                      int64_t ldo) {
#ifdef CLOOP_HAVE_AVX2
    if (cloop_avx2()) {
        cloop_f32_avx2(out, a, wf, M, N, K, ldo);
        return;
    }
#endif
    cloop_f32_plain(out, a, wf, M, N, K, ldo);
}

/* 16-bit and quantized weights: widen (dequantise) each block of 16 rows of w once (scratch:
 * 16 * K floats), then run the f32 loop on it (cheaper than widening inside the inner loop,
 * which runs M times) */
static void cloop(float *out, const float *a, const float *wf, const void *wraw, float *scratch,
                  lv_dtype dt, int64_t M, int64_t N, int64_t K) {
    if (dt == LV_F32) {
        cloop_f32(out, a, wf, M, N, K, N);
    } else {
        for (int64_t n0 = 0; n0 < N; n0 += CLOOP_BLOCK) {
            int64_t nb = N - n0 < CLOOP_BLOCK ? N - n0 : CLOOP_BLOCK;
            const uint16_t *src = (const uint16_t *)wraw + n0 * K;
            if (lv_dtype_quantized(dt))
                lv_dequantize_row(dt, (const char *)wraw + lv_dtype_bytes(dt, n0 * K), nb * K, scratch);
            else if (dt == LV_F16)
                for (int64_t i = 0; i < nb * K; i++) scratch[i] = lv_half_to_float(src[i]);
            else
                for (int64_t i = 0; i < nb * K; i++) scratch[i] = bf16_widen(src[i]);
            cloop_f32(out + n0, a, scratch, M, nb, K, N);
        }
    }
}

/* ---- one case ------------------------------------------------------------------------- */

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_random(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
}

static int run_case(lv_ctx *ctx, gemm_case *c, lv_matmul_variant variant, bool do_c) {
    int64_t M = c->M, N = c->N, K = c->K;
    size_t na = (size_t)(M * K), nw = (size_t)(N * K), no = (size_t)(M * N);
    float *a = malloc(na * 4), *wf = malloc(nw * 4), *got = do_c ? malloc(no * 4) : NULL;
    float *want = do_c ? malloc(no * 4) : NULL;
    /* w as uploaded: 16-bit values or quantized blocks (f32: wf itself) */
    uint64_t w_bytes = lv_dtype_bytes(c->wdtype, (int64_t)nw);
    void *wraw = malloc((size_t)w_bytes);
    float *scratch = do_c ? malloc((size_t)(CLOOP_BLOCK * K) * 4) : NULL;
    int rc = 1;
    lv_tensor ta = {0}, tw = {0}, to = {0};
    if (!a || !wf || !wraw || (do_c && (!got || !want || !scratch))) {
        fprintf(stderr, "longvk bench gemm: out of host memory\n");
        goto done;
    }
    fill_random(a, na, 1);
    fill_random(wf, nw, 2);
    uint16_t *wh = wraw;
    for (size_t i = 0; i < nw && !lv_dtype_quantized(c->wdtype); i++) {
        if (c->wdtype == LV_F16) wh[i] = lv_float_to_half(wf[i]);
        if (c->wdtype == LV_BF16) wh[i] = lv_float_to_bf16(wf[i]);
    }
    lv_status qs = c->wdtype == LV_Q8_0   ? lv_quantize_row_q8_0(wf, (int64_t)nw, wraw)
                   : c->wdtype == LV_Q4_K ? lv_quantize_row_q4_k(wf, (int64_t)nw, wraw)
                                          : LV_OK;
    if (qs != LV_OK) {
        fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
        goto done;
    }
    if (lv_tensor_create(ctx, LV_F32, 2, (int64_t[]){M, K}, &ta) != LV_OK ||
        lv_tensor_create(ctx, c->wdtype, 2, (int64_t[]){N, K}, &tw) != LV_OK ||
        lv_tensor_create(ctx, LV_F32, 2, (int64_t[]){M, N}, &to) != LV_OK ||
        lv_tensor_write(ctx, &ta, a, na * 4) != LV_OK ||
        lv_tensor_write(ctx, &tw, c->wdtype == LV_F32 ? (void *)wf : wraw, w_bytes) != LV_OK) {
        fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
        goto done;
    }
    /* warm-up: creates the pipeline */
    if (lv_op_matmul_variant(ctx, &to, &ta, &tw, NULL, variant) != LV_OK || lv_flush(ctx) != LV_OK) {
        fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
        goto done;
    }
    double t[16], cpu[16];
    for (int r = 0; r < c->runs; r++) {
        double t0 = bench_now(), c0 = cpu_now();
        if (lv_op_matmul_variant(ctx, &to, &ta, &tw, NULL, variant) != LV_OK || lv_flush(ctx) != LV_OK) {
            fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
            goto done;
        }
        t[r] = bench_now() - t0;
        cpu[r] = cpu_now() - c0;
    }
    c->ms = 1e3 * bench_median(t, c->runs);
    c->cpu_s = bench_median(cpu, c->runs);
    c->c_ms = 0;
    c->max_rel_err = 0;
    if (do_c) {
        if (lv_tensor_read(ctx, &to, got, no * 4) != LV_OK) {
            fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
            goto done;
        }
        for (int r = 0; r < c->c_runs; r++) {
            double t0 = bench_now(), c0 = cpu_now();
            cloop(want, a, wf, wraw, scratch, c->wdtype, M, N, K);
            t[r] = bench_now() - t0;
            cpu[r] = cpu_now() - c0;
        }
        c->c_ms = 1e3 * bench_median(t, c->c_runs);
        c->c_cpu_s = bench_median(cpu, c->c_runs);
        /* sanity: both compute the same products in fp32 (different summation order) */
        double scale = 0;
        for (size_t i = 0; i < no; i++) scale = fmax(scale, fabs(want[i]));
        for (size_t i = 0; i < no; i++) {
            double e = fabs((double)got[i] - want[i]) / (scale > 0 ? scale : 1);
            if (!(e <= c->max_rel_err)) c->max_rel_err = e;
        }
    }
    rc = 0;
done:
    lv_tensor_free(ctx, &ta);
    lv_tensor_free(ctx, &tw);
    lv_tensor_free(ctx, &to);
    free(a);
    free(wf);
    free(wraw);
    free(scratch);
    free(got);
    free(want);
    return rc;
}

static double gflops(const gemm_case *c, double ms) {
    return ms > 0 ? 2.0 * (double)c->M * (double)c->N * (double)c->K / (ms * 1e6) : 0;
}

static double load_average(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

typedef enum gemm_set { SET_DEFAULT = 0, SET_DIT, SET_4096, SET_QUANT } gemm_set;

typedef struct gemm_args {
    int variant, runs, shapes, tokens;
    bool json, no_c, have_custom;
    gemm_case custom;
} gemm_args;

static gemm_args args;

/* MxNxK[:f32|f16|bf16|q8_0|q4_k], each size in [1, 65536] (larger products do not fit a
 * device, and M * K stays far from int64's range), K whole blocks of a quantized dtype */
static const char *parse_shape(const char *s, void *dest) {
    const char *expected = "is not MxNxK[:f32|f16|bf16|q8_0|q4_k] with sizes in [1, 65536]";
    gemm_args *a = dest;
    gemm_case *c = &a->custom;
    char dims[64];
    const char *colon = strchr(s, ':'), *dt = colon ? colon + 1 : "f32";
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    long v[3];
    if (n >= sizeof dims) return expected;
    memcpy(dims, s, n);
    dims[n] = '\0';
    if (!cli_parse_dims(dims, 3, 1, 65536, v)) return expected;
    if (strcmp(dt, "f32") == 0) c->wdtype = LV_F32;
    else if (strcmp(dt, "f16") == 0) c->wdtype = LV_F16;
    else if (strcmp(dt, "bf16") == 0) c->wdtype = LV_BF16;
    else if (strcmp(dt, "q8_0") == 0) c->wdtype = LV_Q8_0;
    else if (strcmp(dt, "q4_k") == 0 || strcmp(dt, "q4_K") == 0) c->wdtype = LV_Q4_K;
    else return expected;
    if (v[2] % lv_dtype_block(c->wdtype, NULL))
        return c->wdtype == LV_Q8_0 ? "has a K that is not a multiple of 32 (q8_0's block)"
                                    : "has a K that is not a multiple of 256 (q4_k's block)";
    c->M = v[0];
    c->N = v[1];
    c->K = v[2];
    snprintf(c->name, sizeof c->name, "%ldx%ldx%ld %s", v[0], v[1], v[2], dt);
    a->have_custom = true;
    return NULL;
}

static const cli_choice variants[] = {
    {"auto", LV_MATMUL_AUTO}, {"register", LV_MATMUL_REGISTER}, {"tiled", LV_MATMUL_TILED},
    {"coopmat", LV_MATMUL_COOPMAT}, {0}};
static const cli_choice shape_sets[] = {
    {"default", SET_DEFAULT}, {"dit", SET_DIT}, {"4096", SET_4096}, {"quant", SET_QUANT}, {0}};

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--shapes", .kind = CLI_CHOICE, .dest = &args.shapes, .choices = shape_sets, .def = "default",
     .help = "which products:\n"
             "  default: 1024^3 (f32 weights) and 512 x 2240 -> 6720 (f32, bf16 weights) beside a C loop\n"
             "  dit: M = 15600 (a 480p LongSANA chunk), K x N = 2240 x 6720, 2240 x 13440, 6720 x 2240\n"
             "  4096: 4096^3\n"
             "  quant: 512 tokens x the DiT's 2240 -> 6720 and 6720 -> 2240 with f32, bf16 and q8_0 weights,\n"
             "         and 2304 -> 6720 (q4_k needs K a multiple of 256: 2240 is not) with f32, q8_0 and q4_k,\n"
             "         beside the C loop (dequantising 16 rows at a time)\n"
             "dit and 4096 run each shape with f32, f16 and bf16 weights, report TFLOP/s and the fraction of "
             "the device's fp32 and fp16/bf16 tensor peaks, and skip the C loop"},
    {.name = "--tokens", .kind = CLI_INT, .dest = &args.tokens, .metavar = "M", .min = 1, .max = 65536,
     .def = "15600", .help = "M of --shapes dit (fewer for a CPU device)"},
    {.name = "--variant", .kind = CLI_CHOICE, .dest = &args.variant, .choices = variants, .def = "auto",
     .help = "the matmul kernel"},
    {.name = "--runs", .kind = CLI_INT, .dest = &args.runs, .min = 1, .max = 16,
     .def = "5 for 1024^3 (its C loop 3) and for --shapes dit and 4096, 3 for the others and --shape",
     .help = "timed runs of each product (and of the C loop)"},
    {.name = "--shape", .kind = CLI_CUSTOM, .dest = &args, .parse = parse_shape,
     .metavar = "MxNxK[:f32|f16|bf16|q8_0|q4_k]",
     .def = "those of --shapes", .help = "one product of this shape instead, weights of this dtype"},
    {.name = "--no-c", .kind = CLI_FLAG, .dest = &args.no_c, .help = "skip the C loop"},
};

const cli_spec bench_gemm_spec = {
    .command = "bench gemm",
    .usage = "[--json] [--shapes default|dit|4096|quant] [--tokens M] [--variant auto|register|tiled] [--runs N]\n"
             "       [--shape MxNxK[:f32|f16|bf16|q8_0|q4_k]] [--no-c]",
    .about = "GFLOP/s of lv_op_matmul. By default fp32 1024 x 1024 x 1024 and DiT-shaped products (512\n"
             "tokens x 2240 -> 6720, with f32 and bf16 weights), each beside a plain one-thread C loop timed\n"
             "in the same run. --shapes dit and 4096 give the GPU's figures: TFLOP/s and the fraction of\n"
             "the device's peak (a table of known GPUs; \"peak unknown\" elsewhere), and beside the fp32\n"
             "kernel the tensor-core one (fp16 inputs, fp32 accumulation) where the device has it.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* Why the context runs no tensor-core kernel (lv_device_info.coopmat). */
static const char *coopmat_absent(const lv_ctx *ctx) {
    switch (lv_ctx_device(ctx)->coopmat) {
    case LV_COOPMAT_NONE: return "n/a: none on this device";
    case LV_COOPMAT_DISABLED: return "n/a: LONGVK_COOPMAT=0";
    case LV_COOPMAT_UNBUILT: return "n/a: this build has no coopmat shaders (.ci/glslang)";
    case LV_COOPMAT_OLD_LAYER: return "n/a: off with this validation layer";
    case LV_COOPMAT_NO_F16: return "n/a: no fp16 or Vulkan memory model";
    default: return "n/a";
    }
}

/* "12.3%", or "-" when the peak is unknown (the table's header says so) */
static const char *percent(char *buf, size_t size, double fraction) {
    if (fraction < 0) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.1f%%", 100 * fraction);
    return buf;
}

/* --shapes dit | 4096: TFLOP/s and fractions of peak, no C loop. */
static int run_set(lv_ctx *ctx, lv_matmul_variant variant, const char *vname, gemm_case *cases, int ncases,
                   bool json) {
    const char *dev = lv_ctx_device(ctx)->name;
    const bench_peak *pk = bench_peak_of(dev);
    if (!json) {
        printf("matmul on %s (%s variant, fp32 compute; weights widened in the kernel); medians\n", dev, vname);
        if (pk)
            printf("peak: fp32 %.1f, fp16/bf16 tensor (dense, fp32 accumulate) %.1f TFLOP/s: %s, %s\n", pk->fp32,
                   pk->half, pk->label, pk->source);
        else
            printf("peak unknown: \"%s\" is not in the table of known devices (pipelines/bench/bench_peak.c)\n", dev);
        printf("%-22s %-5s %10s %9s %12s %12s  %s\n", "M x K -> N", "w", "ms", "TFLOP/s", "% fp32 peak",
               "% half peak", "coopmat");
    }
    int rc = 0;
    const bool cm = lv_ctx_coopmat(ctx) && variant != LV_MATMUL_COOPMAT;
    /* the tensor-core kernel runs at 16-bit precision only (its inputs are fp16): at f32 its
     * column comes from a second context at f16 on the same device */
    lv_ctx *cm_ctx = ctx;
    if (cm && lv_ctx_precision(ctx) == LV_PRECISION_F32) {
        lv_ctx_options o;
        lv_ctx_options_default(&o);
        o.precision = LV_PRECISION_F16;
        if (lv_ctx_create(&o, &cm_ctx) != LV_OK) {
            fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
            return 1;
        }
    }
    double cm_ms[9] = {0};
    for (int i = 0; i < ncases && rc == 0; i++) {
        gemm_case *c = &cases[i];
        rc = run_case(ctx, c, variant, false);
        if (rc == 0 && cm) { /* the same product on the tensor cores */
            gemm_case t = *c;
            rc = run_case(cm_ctx, &t, LV_MATMUL_COOPMAT, false);
            cm_ms[i] = t.ms;
        }
        if (rc == 0 && !json) {
            double tf = gflops(c, c->ms) / 1e3;
            char shape[32], p1[24], p2[24], col[96];
            snprintf(shape, sizeof shape, "%lld x %lld -> %lld", (long long)c->M, (long long)c->K, (long long)c->N);
            if (cm) {
                double ct = gflops(c, cm_ms[i]) / 1e3;
                snprintf(col, sizeof col, "%.3f TFLOP/s, %s of the half peak", ct,
                         percent(p2, sizeof p2, bench_peak_fraction(ct, pk ? pk->half : 0)));
            } else {
                snprintf(col, sizeof col, "%s", coopmat_absent(ctx));
            }
            printf("%-22s %-5s %10.2f %9.3f %12s %12s  %s\n", shape, lv_dtype_name(c->wdtype), c->ms, tf,
                   percent(p1, sizeof p1, bench_peak_fraction(tf, pk ? pk->fp32 : 0)),
                   percent(p2, sizeof p2, bench_peak_fraction(tf, pk ? pk->half : 0)), col);
        }
        fflush(stdout);
    }
    if (rc == 0 && json) {
        printf("{\"bench\": \"gemm\", \"device\": \"%s\", \"variant\": \"%s\", \"compute\": \"f32\", ", dev, vname);
        if (pk)
            printf("\"peak\": {\"part\": \"%s\", \"fp32_tflops\": %.2f, \"half_tflops\": %.2f, \"source\": \"%s\"}, ",
                   pk->label, pk->fp32, pk->half, pk->source);
        else
            printf("\"peak\": null, ");
        if (cm) printf("\"coopmat\": true, \"cases\": [");
        else printf("\"coopmat\": \"%s\", \"cases\": [", coopmat_absent(ctx));
        for (int i = 0; i < ncases; i++) {
            gemm_case *c = &cases[i];
            double tf = gflops(c, c->ms) / 1e3;
            char j1[16], j2[16], j3[24];
            printf("%s{\"M\": %lld, \"K\": %lld, \"N\": %lld, \"w_dtype\": \"%s\", \"runs\": %d, \"ms\": %.3f, "
                   "\"tflops\": %.4f, \"fraction_fp32_peak\": %s, \"fraction_half_peak\": %s, \"coopmat_tflops\": %s}",
                   i ? ", " : "", (long long)c->M, (long long)c->K, (long long)c->N, lv_dtype_name(c->wdtype), c->runs,
                   c->ms, tf, bench_json_fraction(j1, sizeof j1, bench_peak_fraction(tf, pk ? pk->fp32 : 0)),
                   bench_json_fraction(j2, sizeof j2, bench_peak_fraction(tf, pk ? pk->half : 0)),
                   cm ? (snprintf(j3, sizeof j3, "%.4f", gflops(c, cm_ms[i]) / 1e3), j3) : "null");
        }
        printf("]}\n");
    }
    if (cm_ctx != ctx) lv_ctx_destroy(cm_ctx);
    return rc;
}

int bench_gemm(int argc, char **argv) {
    args = (gemm_args){.variant = LV_MATMUL_AUTO, .shapes = SET_DEFAULT, .tokens = 15600};
    int r = cli_parse(&bench_gemm_spec, argc, argv);
    if (r >= 0) return r;
    lv_matmul_variant variant = (lv_matmul_variant)args.variant;
    int runs = args.runs;
    bool do_c = !args.no_c, json = args.json, have_custom = args.have_custom;
    gemm_set set = have_custom ? SET_DEFAULT : (gemm_set)args.shapes;
    gemm_case custom = args.custom;
    gemm_case cases[9];
    int ncases = 0;
    if (have_custom) {
        custom.runs = custom.c_runs = 3;
        cases[ncases++] = custom;
    } else if (set == SET_QUANT) {
        /* {K, N, dtype}: the DiT's products (qkv-sized, the point conv) and the nearest K
         * q4_k can take */
        static const struct { int64_t K, N; lv_dtype dt; } q[9] = {
            {2240, 6720, LV_F32}, {2240, 6720, LV_BF16}, {2240, 6720, LV_Q8_0},
            {6720, 2240, LV_F32}, {6720, 2240, LV_BF16}, {6720, 2240, LV_Q8_0},
            {2304, 6720, LV_F32}, {2304, 6720, LV_Q8_0}, {2304, 6720, LV_Q4_K}};
        for (int i = 0; i < 9; i++) {
            gemm_case *c = &cases[ncases++];
            *c = (gemm_case){.M = 512, .K = q[i].K, .N = q[i].N, .wdtype = q[i].dt, .runs = 3, .c_runs = 3};
            snprintf(c->name, sizeof c->name, "512 tok %lld->%lld %s w", (long long)q[i].K, (long long)q[i].N,
                     lv_dtype_name(q[i].dt));
        }
    } else if (set == SET_DEFAULT) {
        cases[ncases++] = (gemm_case){"fp32 1024x1024x1024", 1024, 1024, 1024, LV_F32, 5, 3, 0, 0, 0, 0, 0};
        cases[ncases++] = (gemm_case){"FFN 512 tok 2240->6720 f32 w", 512, 6720, 2240, LV_F32, 3, 3, 0, 0, 0, 0, 0};
        cases[ncases++] = (gemm_case){"FFN 512 tok 2240->6720 bf16 w", 512, 6720, 2240, LV_BF16, 3, 3, 0, 0, 0, 0, 0};
    } else {
        /* {K, N}: qkv-sized (and the FFN's point conv input width), the inverted conv, the point conv */
        static const int64_t dit[3][2] = {{2240, 6720}, {2240, 13440}, {6720, 2240}};
        static const lv_dtype dts[3] = {LV_F32, LV_F16, LV_BF16};
        int nshapes = set == SET_DIT ? 3 : 1;
        for (int s = 0; s < nshapes; s++)
            for (int d = 0; d < 3; d++) {
                gemm_case *c = &cases[ncases++];
                *c = (gemm_case){.M = set == SET_DIT ? args.tokens : 4096, .K = set == SET_DIT ? dit[s][0] : 4096,
                                 .N = set == SET_DIT ? dit[s][1] : 4096, .wdtype = dts[d], .runs = 5, .c_runs = 0};
                snprintf(c->name, sizeof c->name, "%lldx%lldx%lld %s", (long long)c->M, (long long)c->N,
                         (long long)c->K, lv_dtype_name(dts[d]));
            }
    }
    if (runs)
        for (int i = 0; i < ncases; i++) cases[i].runs = cases[i].c_runs = runs;

    lv_ctx *ctx;
    if (lv_ctx_create(NULL, &ctx) != LV_OK) {
        fprintf(stderr, "longvk bench gemm: %s\n", lv_last_error());
        return 1;
    }
    lv_matmul_variant used = variant == LV_MATMUL_AUTO ? lv_matmul_auto_variant(ctx) : variant;
    const char *vname = used == LV_MATMUL_TILED ? "tiled" : used == LV_MATMUL_COOPMAT ? "coopmat" : "register";
    if (set == SET_DIT || set == SET_4096) {
        int rc = run_set(ctx, variant, vname, cases, ncases, json);
        lv_ctx_destroy(ctx);
        return rc;
    }
    const char *cname = cloop_avx2() ? "C loop, 1 thread, AVX2+FMA" : "C loop, 1 thread";
    double load = load_average();
    if (!json)
        printf("matmul on %s (%s variant) vs %s; medians; load average %.1f\n"
               "(per core: GFLOP per CPU-second of this process, what each busy core achieves)\n"
               "%-31s %8s %8s %8s %8s %9s %8s %6s %8s\n",
               lv_ctx_device(ctx)->name, vname, cname, load, "case", "ms", "GFLOP/s", "per core", "C ms",
               "C GFLOP/s", "per core", "ratio", "rel.err");
    int rc = 0;
    for (int i = 0; i < ncases && rc == 0; i++) {
        gemm_case *c = &cases[i];
        rc = run_case(ctx, c, variant, do_c);
        if (rc == 0 && !json)
            printf("%-31s %8.1f %8.2f %8.2f %8.1f %9.2f %8.2f %6.2f %8.1e\n", c->name, c->ms, gflops(c, c->ms),
                   gflops(c, 1e3 * c->cpu_s), c->c_ms, gflops(c, c->c_ms), gflops(c, 1e3 * c->c_cpu_s),
                   c->c_ms > 0 ? c->c_ms / c->ms : 0, c->max_rel_err);
        fflush(stdout);
    }
    if (rc == 0 && json) {
        printf("{\"bench\": \"gemm\", \"device\": \"%s\", \"variant\": \"%s\", \"c_loop\": \"%s\", "
               "\"load_average\": %.2f, \"cases\": [",
               lv_ctx_device(ctx)->name, vname, cname, load);
        for (int i = 0; i < ncases; i++) {
            gemm_case *c = &cases[i];
            printf("%s{\"name\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"w_dtype\": \"%s\", "
                   "\"runs\": %d, \"ms\": %.3f, \"gflops\": %.3f, \"gflops_per_cpu_second\": %.3f, "
                   "\"c_ms\": %.3f, \"c_gflops\": %.3f, \"c_gflops_per_cpu_second\": %.3f, \"ratio\": %.3f, "
                   "\"max_rel_err\": %.3g}",
                   i ? ", " : "", c->name, (long long)c->M, (long long)c->N, (long long)c->K,
                   lv_dtype_name(c->wdtype), c->runs, c->ms, gflops(c, c->ms), gflops(c, 1e3 * c->cpu_s), c->c_ms,
                   gflops(c, c->c_ms), gflops(c, 1e3 * c->c_cpu_s), c->c_ms > 0 ? c->c_ms / c->ms : 0, c->max_rel_err);
        }
        printf("]}\n");
    }
    lv_ctx_destroy(ctx);
    return rc;
}
