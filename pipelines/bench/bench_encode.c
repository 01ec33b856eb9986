/* `longvk bench encode [--json]`: how fast the encoder takes 832x480 frames with libx264
 * (mp4, preset medium, crf 18) and with ffv1 (mkv, lossless RGB), and whether its memory
 * stays constant: the peak resident memory of a process encoding 10 frames against one
 * encoding 1000 frames (goal: ratio <= 1.1).
 *
 * Content: a smooth colour texture with light grain, panning 2 px a frame, under a moving
 * square: motion everywhere, like generated video, and compressible by motion search.
 * Frames are cut from a precomputed texture, so making them costs a memcpy per row and is
 * not timed. Blocks of 16 frames are flushed as the generator would.
 *
 * Memory method: each frame count runs in a fresh process (`longvk bench encode --child N`,
 * started from /proc/self/exe) so neither inherits the other's heap; the child reports its
 * peak resident set (VmHWM from /proc/self/status) at the end and its resident set just
 * before opening the encoder (the baseline: program and libraries). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "longvk.h"

#define BW 832
#define BH 480
#define BLOCK 16
#define PAN 2
#define TEXTURE_PAD 256
#define STRINGIFY(x) #x
#define NUMBER_TEXT(x) STRINGIFY(x) /* a number macro as text, inside string literals */ /* the texture is this much wider than a frame; the pan wraps */

typedef struct texture {
    uint8_t *rgb; /* (BW + TEXTURE_PAD) x BH x 3 */
    int tw;
} texture;

static uint32_t grain(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

static int texture_make(texture *t) {
    t->tw = BW + TEXTURE_PAD;
    t->rgb = malloc((size_t)t->tw * BH * 3);
    if (!t->rgb) return 0;
    for (int y = 0; y < BH; y++)
        for (int x = 0; x < t->tw; x++) {
            /* periodic in x with period TEXTURE_PAD so the pan wraps without a jump */
            double u = 2 * M_PI * x / TEXTURE_PAD, v = 2 * M_PI * y / 160.0;
            uint32_t g = grain((uint32_t)((x % TEXTURE_PAD) * 7919 + y * 104729));
            uint8_t *p = t->rgb + 3 * ((size_t)y * t->tw + x);
            p[0] = (uint8_t)lrint(128 + 80 * sin(u) * cos(v) + (double)(g & 7) - 3.5);
            p[1] = (uint8_t)lrint(128 + 80 * sin(2 * u + v) + (double)((g >> 8) & 7) - 3.5);
            p[2] = (uint8_t)lrint(128 + 60 * cos(u - 2 * v) + (double)((g >> 16) & 7) - 3.5);
        }
    return 1;
}

static void texture_frame(const texture *t, int n, uint8_t *out) {
    int off = (n * PAN) % TEXTURE_PAD;
    for (int y = 0; y < BH; y++)
        memcpy(out + (size_t)y * BW * 3, t->rgb + 3 * ((size_t)y * t->tw + off), (size_t)BW * 3);
    int s = 64, x0 = (40 + 3 * n) % (BW - s), y0 = (30 + n) % (BH - s);
    for (int y = y0; y < y0 + s; y++) memset(out + 3 * ((size_t)y * BW + x0), 235, (size_t)s * 3);
}


/* Encodes n frames to path; *seconds gets the time spent in encoder calls. */
static int encode(const char *path, const char *codec, int n, double *seconds) {
    texture t;
    uint8_t *frame = malloc((size_t)BW * BH * 3);
    if (!frame || !texture_make(&t)) {
        free(frame);
        fprintf(stderr, "longvk bench encode: out of memory\n");
        return 0;
    }
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = codec;
    lv_encoder *enc;
    double spent = 0, t0 = bench_now();
    lv_status st = lv_encoder_open(path, BW, BH, 16, &opt, &enc);
    spent += bench_now() - t0;
    for (int i = 0; i < n && st == LV_OK; i++) {
        texture_frame(&t, i, frame);
        t0 = bench_now();
        st = lv_encoder_write_rgb(enc, frame, 1);
        if (st == LV_OK && (i + 1) % BLOCK == 0) st = lv_encoder_flush_block(enc);
        spent += bench_now() - t0;
    }
    t0 = bench_now();
    if (st == LV_OK) st = lv_encoder_close(enc);
    else lv_encoder_abort(enc);
    spent += bench_now() - t0;
    free(frame);
    free(t.rgb);
    if (st != LV_OK) {
        bench_fail("bench encode");
        return 0;
    }
    if (seconds) *seconds = spent;
    return 1;
}

/* The child process of the memory measurement. */
static int child(int frames, const char *codec, const char *path) {
    long long baseline = bench_rss();
    if (!encode(path, codec, frames, NULL)) return 1;
    printf("%lld %lld\n", bench_peak_rss(), baseline);
    return 0;
}

/* Runs a child for `frames`; returns 1 and its peak and baseline on success. */
static int measure_memory(const char *dir, const char *codec, const char *ext, int frames, long long *peak,
                          long long *baseline) {
    char self[4096], cmd[8800], path[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "longvk bench encode: cannot find this program (/proc/self/exe): %s\n", strerror(errno));
        return 0;
    }
    self[len] = '\0';
    snprintf(path, sizeof path, "%s/memory_%d.%s", dir, frames, ext);
    snprintf(cmd, sizeof cmd, "'%s' bench encode --child %d --codec %s --out '%s'", self, frames, codec, path);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int ok = fscanf(p, "%lld %lld", peak, baseline) == 2;
    int rc = pclose(p);
    unlink(path);
    if (!ok || rc != 0) fprintf(stderr, "longvk bench encode: the %d-frame child failed (%s)\n", frames, cmd);
    return ok && rc == 0;
}

static double fps_median(const char *dir, const char *codec, const char *ext, int frames, int runs) {
    double v[16];
    char path[4200];
    snprintf(path, sizeof path, "%s/timing.%s", dir, ext);
    for (int r = 0; r < runs; r++) {
        double s;
        if (!encode(path, codec, frames, &s)) return -1;
        v[r] = frames / s;
    }
    unlink(path);
    return bench_median(v, runs);
}

typedef struct encode_args {
    bool json;
    long frames, runs, mem_frames, child_frames;
    const char *mem_codec, *child_codec, *child_out;
} encode_args;

static encode_args args;

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    {.name = "--frames", .kind = CLI_LONG, .dest = &args.frames, .min = 1, .max = 100000, .def = "48",
     .help = "frames per timed run"},
    {.name = "--runs", .kind = CLI_LONG, .dest = &args.runs, .metavar = "R", .min = 1, .max = 16, .def = "3",
     .help = "timed runs (the median is reported)"},
    {.name = "--memory-frames", .kind = CLI_LONG, .dest = &args.mem_frames, .metavar = "M", .min = 10,
     .max = 1000000, .def = "1000", .help = "frames of the large memory measurement"},
    {.name = "--memory-codec", .kind = CLI_STRING, .dest = &args.mem_codec, .metavar = "C",
     .def = "libx264, into mp4", .help = "codec of the memory measurement"},
    /* the child process of a memory measurement (measure_memory starts it) */
    {.name = "--child", .kind = CLI_LONG, .dest = &args.child_frames, .min = 1, .max = 10000000,
     .help = "internal: be the child that encodes N frames (with --codec and --out) for a memory measurement"},
    {.name = "--codec", .kind = CLI_STRING, .dest = &args.child_codec, .metavar = "NAME",
     .help = "internal: the child's codec"},
    {.name = "--out", .kind = CLI_OUTPUT, .dest = &args.child_out, .help = "internal: the child's output file"},
};

const cli_spec bench_encode_spec = {
    .command = "bench encode",
    .usage = "[--json] [--frames N] [--runs R] [--memory-frames M] [--memory-codec C]",
    .about = "Frames/s of the encoder at " NUMBER_TEXT(BW) "x" NUMBER_TEXT(BH) " (panning texture, blocks of "
             NUMBER_TEXT(BLOCK) " frames) with libx264\n"
             "(mp4, preset medium, crf 18) and ffv1 (mkv, lossless), the median of R runs of N\n"
             "frames (short, to keep the benchmark under two minutes on a small machine). Then the\n"
             "peak memory of fresh processes encoding 10 and M frames with codec C and their ratio\n"
             "(goal <= 1.1).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

int bench_encode(int argc, char **argv) {
    args = (encode_args){.frames = 48, .runs = 3, .mem_frames = 1000, .child_frames = -1, .mem_codec = "libx264"};
    int r = cli_parse(&bench_encode_spec, argc, argv);
    if (r >= 0) return r;
    const bool json = args.json;
    const long frames = args.frames, runs = args.runs, mem_frames = args.mem_frames;
    const char *mem_codec = args.mem_codec;
    if (args.child_frames > 0) {
        if (!args.child_codec || !args.child_out) return cli_usage_error("bench encode", "--child needs --codec and --out");
        return child((int)args.child_frames, args.child_codec, args.child_out);
    }

    char dir[] = "/tmp/longvk-bench-encode-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "longvk bench encode: cannot make a scratch directory in /tmp: %s\n", strerror(errno));
        return 1;
    }
    const char *mem_ext = strcmp(mem_codec, "ffv1") == 0 ? "mkv" : strcmp(mem_codec, "libvpx-vp9") == 0 ? "webm" : "mp4";
    if (!json)
        printf("encoder at %dx%d, panning texture with grain and a moving square, blocks of %d frames\n", BW, BH, BLOCK);
    double x264 = fps_median(dir, "libx264", "mp4", (int)frames, (int)runs);
    if (!json && x264 > 0)
        printf("  libx264 (mp4, preset medium, crf 18): %6.1f frames/s  (median of %ld runs of %ld frames)\n", x264, runs,
               frames);
    double ffv1 = x264 > 0 ? fps_median(dir, "ffv1", "mkv", (int)frames, (int)runs) : -1;
    if (!json && ffv1 > 0)
        printf("  ffv1 (mkv, lossless RGB):             %6.1f frames/s  (median of %ld runs of %ld frames)\n", ffv1, runs,
               frames);
    long long peak_small = 0, peak_large = 0, peak_block = 0, base_small = 0, base_large = 0, base_block = 0;
    int ok = x264 > 0 && ffv1 > 0 && measure_memory(dir, mem_codec, mem_ext, 10, &peak_small, &base_small) &&
             measure_memory(dir, mem_codec, mem_ext, BLOCK, &peak_block, &base_block) &&
             measure_memory(dir, mem_codec, mem_ext, (int)mem_frames, &peak_large, &base_large);
    rmdir(dir);
    if (!ok) return 1;
    double ratio = (double)peak_large / (double)peak_small;
    double growth = (double)(peak_large - base_large) / (double)(peak_small - base_small);
    /* 10 frames do not fill the first block, so an encoder that buffers a block (x264's
     * look-ahead) has not reached its working size yet; one full block has */
    double ratio_block = (double)peak_large / (double)peak_block;
    if (json) {
        printf("{\"width\": %d, \"height\": %d, \"block_frames\": %d, \"timing_frames\": %ld, \"runs\": %ld, "
               "\"libx264_fps\": %.2f, \"ffv1_fps\": %.2f, \"memory\": {\"codec\": \"%s\", \"frames_small\": 10, "
               "\"frames_large\": %ld, \"peak_small_bytes\": %lld, \"peak_large_bytes\": %lld, \"baseline_small_bytes\": "
               "%lld, \"baseline_large_bytes\": %lld, \"peak_ratio\": %.4f, \"growth_ratio\": %.4f, \"goal\": 1.1, "
               "\"frames_one_block\": %d, \"peak_one_block_bytes\": %lld, \"peak_ratio_to_one_block\": %.4f, "
               "\"method\": \"peak VmHWM of a fresh process per frame count; baseline VmRSS before the encoder opens\"}}\n",
               BW, BH, BLOCK, frames, runs, x264, ffv1, mem_codec, mem_frames, peak_small, peak_large, base_small,
               base_large, ratio, growth, BLOCK, peak_block, ratio_block);
    } else {
        printf("memory, %s into %s, blocks of %d (peak resident set of a fresh process per count):\n", mem_codec, mem_ext,
               BLOCK);
        printf("  %5d frames: peak %7.1f MB  (%.1f MB before the encoder opened)\n", 10, peak_small / 1e6, base_small / 1e6);
        printf("  %5d frames: peak %7.1f MB  (one block)\n", BLOCK, peak_block / 1e6);
        printf("  %5ld frames: peak %7.1f MB  (%.1f MB before the encoder opened)\n", mem_frames, peak_large / 1e6,
               base_large / 1e6);
        printf("  ratio %ld/10: %.3f (goal <= 1.1; above the baseline: %.3f)\n", mem_frames, ratio, growth);
        printf("  ratio %ld/%d: %.3f (after the first block: %s)\n", mem_frames, BLOCK, ratio_block,
               ratio_block <= 1.1 ? "constant" : "GROWS");
        if (ratio > 1.1 && ratio_block <= 1.1)
            printf("  (10 frames do not fill a %d-frame block: the encoder's look-ahead has not reached its\n"
                   "   working size; from one block on the peak does not grow with the frame count)\n", BLOCK);
    }
    return 0;
}
