/* `longvk metrics VIDEO --block-frames N [--json OUT.json] [--plot OUT.svg]`: temporal-
 * consistency metrics of a video (codec/metrics/README.md), in one streaming
 * pass: frames are decoded one at a time and only what the metrics need is kept. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/generate.h"

typedef struct metrics_args {
    const char *video, *json, *plot, *switches;
    long block, first;
    lv_metrics_options opt;
} metrics_args;

static metrics_args args;

#define STRINGIFY(x) #x
#define NUMBER_TEXT(x) STRINGIFY(x) /* LV_METRICS_MAX_DISTANCES as text, inside string literals */

static const char *parse_distances(const char *text, void *dest) {
    lv_metrics_options *opt = dest;
    const char *expected = "is not a comma-separated list of at most " NUMBER_TEXT(LV_METRICS_MAX_DISTANCES)
                           " integers in [1, 100000]";
    int n = 0, d[LV_METRICS_MAX_DISTANCES];
    const char *p = text;
    do {
        const char *comma = strchr(p, ',');
        char buf[16];
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        long v;
        if (n == LV_METRICS_MAX_DISTANCES || len >= sizeof buf) return expected;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (!cli_parse_long(buf, 1, 100000, &v)) return expected;
        d[n++] = (int)v;
        p = comma ? comma + 1 : NULL;
    } while (p);
    opt->ndistances = n;
    memcpy(opt->distances, d, (size_t)n * sizeof *d);
    return NULL;
}

static cli_option options[] = {
    {.kind = CLI_INPUT, .dest = &args.video, .metavar = "VIDEO", .required = true, .help = "the video to measure"},
    {.name = "--block-frames", .kind = CLI_LONG, .dest = &args.block, .min = 1, .max = 1000000, .required = true,
     .help = "frames per block (required)"},
    {.name = "--first-block-frames", .kind = CLI_LONG, .dest = &args.first, .metavar = "M", .min = 1, .max = 1000000,
     .help = "frames in the first block (default: N). A latent block of L frames through the Wan VAE is "
             "1 + 4(L-1) pixel frames first, 4L after"},
    {.name = "--distances", .kind = CLI_CUSTOM, .dest = &args.opt, .parse = parse_distances, .metavar = "LIST",
     .def = "1,4,16,64,256",
     .help = "long-range SSIM distances, comma separated, at most " NUMBER_TEXT(LV_METRICS_MAX_DISTANCES)
             "\nMemory: max(LIST) luma frames (256 x 832 x 480 bytes = 102 MB); lower it for big videos"},
    {.name = "--freeze-mae", .kind = CLI_DOUBLE, .dest = &args.opt.freeze_mae, .def = "0.5",
     .help = "a pair with MAE below X counts as frozen"},
    {.name = "--json", .kind = CLI_OUTPUT, .dest = &args.json, .metavar = "OUT.json",
     .help = "write the summary, verdicts and every per-pair, long-range and per-block series"},
    {.name = "--switches", .kind = CLI_INPUT, .dest = &args.switches, .metavar = "OUT.schedule",
     .help = "a prompt schedule (what `longvk generate` writes beside its video): the seam (MAE of the frame pair "
             "across it) at each switch and the largest over its transition, beside the median seam of the "
             "video's block boundaries"},
    {.name = "--plot", .kind = CLI_OUTPUT, .dest = &args.plot, .metavar = "OUT.svg",
     .help = "draw MAE and 1-SSIM per frame pair with the block boundaries marked, and the per-block colour "
             "means below"},
};

const cli_spec cmd_metrics_spec = {
    .command = "metrics",
    .usage = "VIDEO --block-frames N [--json OUT.json] [--plot OUT.svg] [options]",
    .about = "Measures how consistent a block-wise generated video is, in one streaming pass:\n"
             "seam ratio (frame change at block boundaries vs within blocks, by MAE and 1-SSIM),\n"
             "flicker (VBench temporal flickering, luma flicker), colour drift between blocks and\n"
             "histogram distance to block 0, freeze fraction, PSNR and SSIM per frame pair (as\n"
             "FFmpeg's psnr and ssim filters compute them, on the decoded luma plane), and SSIM\n"
             "between frames t and t + d. Prints a summary with a one-line verdict each.\n",
    .epilog = "Exit status: 0 when measured, 1 when the video cannot be read or an output cannot\n"
              "be written, 2 on a usage error.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* A value of the summary as text: "n/a" where it is undefined (NaN: no pair to measure). */
static const char *val(char *buf, size_t size, const char *format, double v) {
    if (isnan(v)) snprintf(buf, size, "n/a");
    else snprintf(buf, size, format, v);
    return buf;
}

static void print_summary(const char *path, const lv_video_info *info, const lv_yuv_planes *planes,
                          const lv_metrics_summary *s, const lv_metrics_options *opt, size_t frame_bytes) {
    char v1[32], v2[32], v3[32], v4[32];
    /* one frame: no pair of frames, so nothing but the colour line has a value */
    const char *one = s->pairs == 0 ? (s->frames == 1 ? "n/a (one frame)" : "n/a (no frames)") : NULL;
    printf("video            %s: %dx%d, %.4g fps, %s %s, %lld frames in %lld block(s) (%d first, then %d)\n", path,
           info->width, info->height, info->fps, info->codec, info->pix_fmt, (long long)s->frames,
           (long long)s->blocks, opt->first_block_frames, opt->block_frames);
    printf("                 luma: %s\n", planes->native ? "the decoded Y plane"
                                                         : "Y computed from RGB (BT.709, limited range)");
    if (one) printf("seam ratio       %s\n", one);
    else
        printf("seam ratio       %s by MAE (boundary %s / within %s), %s by 1-SSIM, over %lld boundary pairs\n",
               val(v1, sizeof v1, "%.3f", s->seam_ratio_mae), val(v2, sizeof v2, "%.3f", s->boundary_mae),
               val(v3, sizeof v3, "%.3f", s->within_mae), val(v4, sizeof v4, "%.3f", s->seam_ratio_ssim),
               (long long)s->boundary_pairs);
    printf("                 -> %s\n", lv_metrics_verdict_seam(s));
    if (one) printf("flicker          %s\n", one);
    else
        printf("flicker          temporal flickering %s; luma flicker %s (boundary %s, within %s)\n",
               val(v1, sizeof v1, "%.4f", s->temporal_flickering), val(v2, sizeof v2, "%.3f", s->luma_flicker),
               val(v3, sizeof v3, "%.3f", s->luma_flicker_boundary), val(v4, sizeof v4, "%.3f", s->luma_flicker_within));
    printf("                 -> %s\n", lv_metrics_verdict_flicker(s));
    printf("colour drift     last - first block: R %+.2f G %+.2f B %+.2f; largest step %.2f", s->colour_drift[0],
           s->colour_drift[1], s->colour_drift[2], s->colour_max_step);
    if (s->colour_max_step_block > 0)
        printf(" (block %lld -> %lld)", (long long)s->colour_max_step_block - 1, (long long)s->colour_max_step_block);
    printf("; histogram distance to block 0: last %.4f, max %.4f\n", s->hist_last, s->hist_max);
    printf("                 -> %s\n", lv_metrics_verdict_colour(s));
    if (one) printf("freeze fraction  %s\n", one);
    else
        printf("freeze fraction  %s (%lld of %lld pairs with MAE < %g)\n", val(v1, sizeof v1, "%.3f", s->freeze_fraction),
               (long long)s->frozen_pairs, (long long)s->pairs, opt->freeze_mae);
    printf("                 -> %s\n", lv_metrics_verdict_freeze(s));
    if (one) printf("similarity       %s\n", one);
    else
        printf("similarity       mean SSIM(Y) %s, mean PSNR(Y) %s dB over %lld changing pairs (%lld identical)\n",
               val(v1, sizeof v1, "%.4f", s->mean_ssim_y), val(v2, sizeof v2, "%.2f", s->mean_psnr_y),
               (long long)(s->pairs - s->identical_pairs), (long long)s->identical_pairs);
    printf("long-range SSIM ");
    for (int k = 0; k < s->ndistances; k++) {
        if (s->long_range_pairs[k] > 0) printf(" d=%d %.4f", s->distances[k], s->long_range_ssim[k]);
        else printf(" d=%d -", s->distances[k]);
    }
    int max_d = 1;
    for (int k = 0; k < opt->ndistances; k++)
        if (opt->distances[k] > max_d) max_d = opt->distances[k];
    printf("\nmemory           %.1f MB of frames kept (%d luma frames for SSIM at distance up to %d)\n",
           (double)frame_bytes / 1e6, max_d, max_d);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --switches: each switch's seam, MAE of the pair (f - 1, f) at its first frame f, and the
 * largest boundary seam from f to the end of its transition, against the median MAE over
 * the video's block boundaries. */
static int print_switches(const lv_metrics *m, const char *path, double fps) {
    lv_gen_switch *e;
    char *text;
    int n;
    if (lv_gen_schedule_read(path, &e, &n, &text) != LV_OK) return cli_fail("metrics --switches");
    int64_t pairs;
    const double *mae = lv_metrics_pair_series(m, LV_SERIES_MAE, &pairs);
    double *b = malloc((size_t)(pairs > 0 ? pairs : 1) * sizeof *b);
    int64_t nb = 0;
    for (int64_t t = 0; b && t < pairs; t++)
        if (lv_metrics_is_boundary_pair(m, t)) b[nb++] = mae[t];
    double median = NAN;
    if (nb > 0) {
        qsort(b, (size_t)nb, sizeof *b, cmp_double);
        median = nb % 2 ? b[nb / 2] : 0.5 * (b[nb / 2 - 1] + b[nb / 2]);
    }
    free(b);
    printf("switches         median seam (MAE across a block boundary) %.3f over %lld boundaries\n", median,
           (long long)nb);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        double sec, tsec = 0;
        int64_t f, tf = 0;
        if (!lv_gen_parse_time(e[i].time, &sec, &f) ||
            (e[i].transition && !lv_gen_parse_time(e[i].transition, &tsec, &tf))) {
            lv_error(LV_ERR_FORMAT, "%s: entry %d: bad time '%s'", path, i + 1, e[i].time);
            rc = cli_fail("metrics --switches");
            break;
        }
        if (f < 0) f = (int64_t)floor(sec * fps + 1e-6);
        if (tf < 0) tf = (int64_t)floor(tsec * fps + 1e-6);
        if (f == 0) continue; /* the start: no seam */
        if (f - 1 >= pairs) {
            printf("                 frame %lld: past the video's %lld frames\n", (long long)f, (long long)pairs + 1);
            continue;
        }
        double at = mae[f - 1], most = at;
        for (int64_t t = f - 1; t < pairs && t <= f - 1 + tf; t++)
            if (lv_metrics_is_boundary_pair(m, t) && mae[t] > most) most = mae[t];
        printf("                 frame %lld (%.3f s): seam %.3f = %.2fx the median; largest over its transition "
               "(%lld frames) %.3f = %.2fx\n", (long long)f, (double)f / fps, at, at / median, (long long)tf, most,
               most / median);
    }
    lv_gen_schedule_free(e, text);
    return rc;
}

int cmd_metrics(int argc, char **argv) {
    lv_metrics_options_default(&args.opt);
    int r = cli_parse(&cmd_metrics_spec, argc, argv);
    if (r >= 0) return r;
    const char *video = args.video, *json = args.json, *plot = args.plot;
    long block = args.block, first = args.first;
    lv_metrics_options opt = args.opt;
    opt.block_frames = (int)block;
    opt.first_block_frames = (int)first;

    lv_decoder *dec;
    if (lv_decoder_open(video, &dec) != LV_OK) return cli_fail("metrics");
    const lv_video_info *info = lv_decoder_info(dec);
    lv_metrics *m;
    if (lv_metrics_create(info->width, info->height, &opt, &m) != LV_OK) {
        lv_decoder_close(dec);
        return cli_fail("metrics");
    }
    uint8_t *rgb = malloc((size_t)info->width * (size_t)info->height * 3);
    lv_yuv_planes planes = {0};
    lv_status st = rgb ? LV_OK : lv_error(LV_ERR_NOMEM, "out of memory for a %dx%d frame", info->width, info->height);
    for (;;) {
        int end = 0;
        if (st == LV_OK) st = lv_decoder_next(dec, rgb, NULL, &end);
        if (st != LV_OK || end) break;
        st = lv_decoder_planes(dec, &planes);
        if (st == LV_OK) st = lv_metrics_push(m, rgb, &planes);
    }
    int rc = 0;
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    if (st != LV_OK) {
        rc = cli_fail("metrics");
    } else if (s.frames == 0) {
        lv_error(LV_ERR_FORMAT, "%s holds no decodable frame", video);
        rc = cli_fail("metrics");
    } else {
        print_summary(video, info, &planes, &s, lv_metrics_options_used(m), lv_metrics_frame_bytes(info->width, info->height, &opt));
        if (args.switches) rc = print_switches(m, args.switches, info->fps);
        if (rc == 0 && json && lv_metrics_write_json(m, json, video, info) != LV_OK) rc = cli_fail("metrics --json");
        if (plot && rc == 0 && lv_metrics_write_svg(m, plot, video) != LV_OK) rc = cli_fail("metrics --plot");
        if (rc == 0 && json) printf("wrote %s\n", json);
        if (rc == 0 && plot) printf("wrote %s\n", plot);
    }
    free(rgb);
    lv_metrics_free(m);
    lv_decoder_close(dec);
    return rc;
}
