/* `longvk metrics VIDEO --block-frames N [--json OUT.json] [--plot OUT.svg]`: temporal-
 * consistency metrics of a video (codec/metrics/README.md), in one streaming
 * pass: frames are decoded one at a time and only what the metrics need is kept. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: longvk metrics VIDEO --block-frames N [--json OUT.json] [--plot OUT.svg] [options]\n"
            "\n"
            "Measures how consistent a block-wise generated video is, in one streaming pass:\n"
            "seam ratio (frame change at block boundaries vs within blocks, by MAE and 1-SSIM),\n"
            "flicker (VBench temporal flickering, luma flicker), colour drift between blocks and\n"
            "histogram distance to block 0, freeze fraction, PSNR and SSIM per frame pair (as\n"
            "FFmpeg's psnr and ssim filters compute them, on the decoded luma plane), and SSIM\n"
            "between frames t and t + d. Prints a summary with a one-line verdict each.\n"
            "\n"
            "options:\n"
            "  --block-frames N        frames per block (required)\n"
            "  --first-block-frames M  frames in the first block (default: N). A latent block of\n"
            "                          L frames through the Wan VAE is 1 + 4(L-1) pixel frames\n"
            "                          first, 4L after\n"
            "  --distances LIST        long-range SSIM distances, comma separated, at most %d\n"
            "                          (default: 1,4,16,64,256). Memory: max(LIST) luma frames,\n"
            "                          e.g. 256 x 832 x 480 bytes = 102 MB; lower it for big videos\n"
            "  --freeze-mae X          a pair with MAE below X counts as frozen (default: 0.5)\n"
            "  --json OUT.json         write the summary, verdicts and every per-pair, long-range\n"
            "                          and per-block series\n"
            "  --plot OUT.svg          draw MAE and 1-SSIM per frame pair with the block\n"
            "                          boundaries marked, and the per-block colour means below\n"
            "  -h, --help              this text\n"
            "\n"
            "Exit status: 0 when measured, 1 when the video cannot be read or an output cannot\n"
            "be written, 2 on a usage error.\n",
            LV_METRICS_MAX_DISTANCES);
}

static int parse_distances(const char *text, lv_metrics_options *opt) {
    if (!text) {
        fprintf(stderr, "longvk: --distances needs a value\n");
        return 0;
    }
    opt->ndistances = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 1 || d > 100000 || (*end && *end != ',')) {
            fprintf(stderr, "longvk: --distances: '%s' is not a comma-separated list of integers in [1, 100000]\n", text);
            return 0;
        }
        if (opt->ndistances == LV_METRICS_MAX_DISTANCES) {
            fprintf(stderr, "longvk: --distances: at most %d distances\n", LV_METRICS_MAX_DISTANCES);
            return 0;
        }
        opt->distances[opt->ndistances++] = (int)d;
        p = *end ? end + 1 : end;
    }
    return 1;
}

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

int cmd_metrics(int argc, char **argv) {
    const char *video = NULL, *json = NULL, *plot = NULL;
    long block = 0, first = 0;
    lv_metrics_options opt;
    lv_metrics_options_default(&opt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--block-frames") == 0) {
            if (!cli_parse_int(a, next, 1, 1000000, &block)) return 2;
            i++;
        } else if (strcmp(a, "--first-block-frames") == 0) {
            if (!cli_parse_int(a, next, 1, 1000000, &first)) return 2;
            i++;
        } else if (strcmp(a, "--distances") == 0) {
            if (!parse_distances(next, &opt)) return 2;
            i++;
        } else if (strcmp(a, "--freeze-mae") == 0) {
            if (!cli_parse_double(a, next, &opt.freeze_mae)) return 2;
            i++;
        } else if (strcmp(a, "--json") == 0 || strcmp(a, "--plot") == 0) {
            if (!next) {
                fprintf(stderr, "longvk: %s needs a file name\n", a);
                return 2;
            }
            if (a[2] == 'j') json = next;
            else plot = next;
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "longvk metrics: unknown option '%s' (see longvk metrics --help)\n", a);
            return 2;
        } else if (!video) {
            video = a;
        } else {
            fprintf(stderr, "longvk metrics: one video at a time ('%s' and '%s')\n", video, a);
            return 2;
        }
    }
    if (!video || block == 0) {
        fprintf(stderr, "longvk metrics: %s\n\n", !video ? "no video given" : "--block-frames N is required");
        usage(stderr);
        return 2;
    }
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
        if (json && lv_metrics_write_json(m, json, video, info) != LV_OK) rc = cli_fail("metrics --json");
        if (plot && rc == 0 && lv_metrics_write_svg(m, plot, video) != LV_OK) rc = cli_fail("metrics --plot");
        if (rc == 0 && json) printf("wrote %s\n", json);
        if (rc == 0 && plot) printf("wrote %s\n", plot);
    }
    free(rgb);
    lv_metrics_free(m);
    lv_decoder_close(dec);
    return rc;
}
