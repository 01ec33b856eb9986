/* Temporal-consistency metrics (codec/metrics/README.md): seam ratio on clips with and
 * without seams, a static clip, colour drift and block mapping on synthetic frames, and
 * SSIM / PSNR against FFmpeg's own ssim and psnr filters as the independent reference. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_clips.h"

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/metrics_%s", LONGVK_TEST_TMP, name); }

/* Decodes `path` into a new metrics object (the caller frees it). */
static lv_metrics *measure(const char *path, const lv_metrics_options *opt, int *native) {
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    lv_metrics *m;
    cr_assert_eq(lv_metrics_create(info->width, info->height, opt, &m), LV_OK, "%s", lv_last_error());
    uint8_t *rgb = malloc((size_t)info->width * info->height * 3);
    for (;;) {
        int end;
        cr_assert_eq(lv_decoder_next(dec, rgb, NULL, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        lv_yuv_planes planes;
        cr_assert_eq(lv_decoder_planes(dec, &planes), LV_OK, "%s", lv_last_error());
        if (native) *native = planes.native;
        cr_assert_eq(lv_metrics_push(m, rgb, &planes), LV_OK, "%s", lv_last_error());
    }
    free(rgb);
    lv_decoder_close(dec);
    return m;
}

static lv_metrics_options block_options(int block) {
    lv_metrics_options opt;
    lv_metrics_options_default(&opt);
    opt.block_frames = block;
    return opt;
}

/* A hard cut every 16 frames (new background, square jumps), measured with blocks of 16:
 * the boundary pairs carry the cuts, so the seam ratio is far above 1. */
Test(metrics, hard_cuts_give_a_high_seam_ratio) {
    char path[512];
    tmp_path(path, sizeof path, "cuts.mp4");
    cr_assert_eq(clip_write(path, NULL, CLIP_HARD_CUTS, 128, 96, 16, 64, 16, 16), LV_OK, "%s", lv_last_error());
    lv_metrics_options opt = block_options(16);
    lv_metrics *m = measure(path, &opt, NULL);
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    cr_log_info("hard cuts: seam ratio %.2f (MAE), %.2f (1-SSIM)", s.seam_ratio_mae, s.seam_ratio_ssim);
    cr_assert_eq(s.frames, 64);
    cr_assert_eq(s.blocks, 4);
    cr_assert_eq(s.boundary_pairs, 3);
    cr_assert_geq(s.seam_ratio_mae, 3.0, "seam ratio %.3f", s.seam_ratio_mae);
    cr_assert_geq(s.seam_ratio_ssim, 3.0, "seam ratio (1-SSIM) %.3f", s.seam_ratio_ssim);
    cr_assert_not_null(strstr(lv_metrics_verdict_seam(&s), "seam you can see"), "%s", lv_metrics_verdict_seam(&s));
    lv_metrics_free(m);
}

/* Smooth motion with no cut, written by libx264 in blocks of 16 (each block restarting the
 * encoder, the default): the seam ratio stays near 1. */
Test(metrics, smooth_motion_has_no_seam) {
    char path[512];
    tmp_path(path, sizeof path, "smooth.mp4");
    cr_assert_eq(clip_write(path, NULL, CLIP_SMOOTH, 128, 96, 16, 64, 16, 0), LV_OK, "%s", lv_last_error());
    lv_metrics_options opt = block_options(16);
    lv_metrics *m = measure(path, &opt, NULL);
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    cr_log_info("smooth: seam ratio %.3f (MAE), %.3f (1-SSIM)", s.seam_ratio_mae, s.seam_ratio_ssim);
    cr_assert(s.seam_ratio_mae >= 0.8 && s.seam_ratio_mae <= 1.25, "seam ratio %.3f", s.seam_ratio_mae);
    cr_assert_lt(s.freeze_fraction, 0.01);
    lv_metrics_free(m);
}

/* A static clip: every pair identical. Freeze fraction 1, temporal flickering exactly 1,
 * SSIM 1, PSNR infinite, and no seam (nothing moves, nothing jumps: ratio 1). */
Test(metrics, static_clip_is_frozen) {
    char path[512];
    tmp_path(path, sizeof path, "static.mkv");
    cr_assert_eq(clip_write(path, "ffv1", CLIP_STATIC, 64, 48, 16, 32, 8, 0), LV_OK, "%s", lv_last_error());
    lv_metrics_options opt = block_options(8);
    lv_metrics *m = measure(path, &opt, NULL);
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    cr_assert_eq(s.pairs, 31);
    cr_assert_eq(s.freeze_fraction, 1.0);
    cr_assert_eq(s.temporal_flickering, 1.0);
    cr_assert_eq(s.mean_ssim_y, 1.0);
    cr_assert(isinf(s.mean_psnr_y));
    cr_assert_eq(s.identical_pairs, 31);
    cr_assert_eq(s.seam_ratio_mae, 1.0);
    cr_assert_eq(s.luma_flicker, 0.0);
    for (int c = 0; c < 3; c++) cr_assert_eq(s.colour_drift[c], 0.0);
    cr_assert_not_null(strstr(lv_metrics_verdict_freeze(&s), "frozen"), "%s", lv_metrics_verdict_freeze(&s));
    lv_metrics_free(m);
}

/* Per-pair and per-block series on frames built here, with values known exactly: each
 * block is 10 levels brighter than the one before (a drift, and a luma jump at every
 * boundary), blocks follow the VAE mapping (first block 5 frames, then 8). */
Test(metrics, exact_values_on_synthetic_frames) {
    const int w = 32, h = 16;
    lv_metrics_options opt = block_options(8);
    opt.first_block_frames = 5;
    opt.ndistances = 2;
    opt.distances[0] = 1;
    opt.distances[1] = 3;
    lv_metrics *m;
    cr_assert_eq(lv_metrics_create(w, h, &opt, &m), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_metrics_frame_bytes(w, h, &opt), (size_t)(3 + 3 + 2) * w * h);
    uint8_t rgb[32 * 16 * 3], y[32 * 16];
    const int n = 21; /* blocks: 0-4, 5-12, 13-20 */
    for (int t = 0; t < n; t++) {
        int b = t < 5 ? 0 : 1 + (t - 5) / 8;
        uint8_t v = (uint8_t)(100 + 10 * b);
        memset(rgb, v, sizeof rgb);
        memset(y, v, sizeof y);
        lv_yuv_planes p = {.nplanes = 1, .data = {y}, .stride = {w}, .width = {w}, .height = {h}, .native = 1};
        cr_assert_eq(lv_metrics_push(m, rgb, &p), LV_OK, "%s", lv_last_error());
    }
    for (int64_t t = 0; t < n - 1; t++)
        cr_assert_eq(lv_metrics_is_boundary_pair(m, t), t == 4 || t == 12, "pair %lld", (long long)t);
    int64_t np;
    const double *mae = lv_metrics_pair_series(m, LV_SERIES_MAE, &np);
    const double *lf = lv_metrics_pair_series(m, LV_SERIES_LUMA_FLICKER, NULL);
    const double *psnr = lv_metrics_pair_series(m, LV_SERIES_PSNR_Y, NULL);
    cr_assert_eq(np, n - 1);
    for (int64_t t = 0; t < np; t++) {
        int boundary = t == 4 || t == 12;
        cr_assert_eq(mae[t], boundary ? 10.0 : 0.0, "pair %lld", (long long)t);
        cr_assert_eq(lf[t], boundary ? 10.0 : 0.0);
        if (boundary) cr_assert_float_eq(psnr[t], 10 * log10(255.0 * 255.0 / 100.0), 1e-9);
        else cr_assert(isinf(psnr[t]));
    }
    int64_t nl;
    lv_metrics_long_range_series(m, 1, &nl);
    cr_assert_eq(nl, n - 3);
    int64_t nb;
    const lv_metrics_block *b = lv_metrics_blocks(m, &nb);
    cr_assert_eq(nb, 3);
    cr_assert_eq(b[0].frames, 5);
    cr_assert_eq(b[1].first_frame, 5);
    cr_assert_eq(b[2].frames, 8);
    cr_assert_eq(b[2].mean_rgb[1], 120.0);
    cr_assert_float_eq(b[1].hist_chi2, 1.0, 1e-12); /* disjoint histograms */
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    cr_assert(isinf(s.seam_ratio_mae), "motion only at boundaries: infinite ratio");
    for (int c = 0; c < 3; c++) cr_assert_eq(s.colour_drift[c], 20.0);
    cr_assert_eq(s.colour_max_step, 10.0);
    cr_assert_eq(s.colour_max_step_block, 1);
    cr_assert_float_eq(s.luma_flicker_boundary, 10.0, 1e-12);
    cr_assert_eq(s.luma_flicker_within, 0.0);
    cr_assert_not_null(strstr(lv_metrics_verdict_flicker(&s), "flashes"), "%s", lv_metrics_verdict_flicker(&s));
    cr_assert_not_null(strstr(lv_metrics_verdict_colour(&s), "strong"), "%s", lv_metrics_verdict_colour(&s));
    cr_assert_float_eq(s.freeze_fraction, 18.0 / 20.0, 1e-12);
    lv_metrics_free(m);
}

/* Parses FFmpeg's stats files: "n:1 Y:0.98 ..." (ssim) and "n:1 mse_avg:... psnr_avg:..
 * psnr_y:.." (psnr); "inf" for identical frames. Returns the number of lines read. */
static int read_stats(const char *path, const char *key, double *out, int cap) {
    char *text = clip_read_text(path);
    cr_assert_not_null(text, "no stats file %s", path);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        char pattern[32];
        snprintf(pattern, sizeof pattern, " %s:", key);
        char *at = strstr(line, pattern);
        cr_assert_not_null(at, "%s has no %s: %s", path, key, line);
        at += strlen(pattern);
        out[n++] = strncmp(at, "inf", 3) == 0 ? INFINITY : strtod(at, NULL);
    }
    free(text);
    return n;
}

/* FFmpeg's ssim and psnr filters on frames (t + d, t) of the same video, as the
 * independent reference: our SSIM within 0.005 and PSNR within 0.05 dB on every pair (the
 * bounds of the issue; the two computations differ only in float vs double arithmetic).
 * A size that is not a multiple of 8 (or 4) checks the edge handling too. */
static void compare_with_ffmpeg(const char *path, const lv_metrics *m, int d, const double *ssim, int64_t n,
                                const double *psnr_y, const double *psnr_avg) {
    char ssim_log[512], psnr_log[512], cmd[4096];
    tmp_path(ssim_log, sizeof ssim_log, "ffmpeg_ssim.log");
    tmp_path(psnr_log, sizeof psnr_log, "ffmpeg_psnr.log");
    (void)m;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ffmpeg -v error -y -i '%s' -i '%s' -filter_complex "
             "\"[0:v]trim=start_frame=%d,setpts=PTS-STARTPTS,split[a1][a2];[1:v]setpts=PTS-STARTPTS,split[b1][b2];"
             "[a1][b1]ssim=stats_file=metrics_ffmpeg_ssim.log:shortest=1[s];"
             "[a2][b2]psnr=stats_file=metrics_ffmpeg_psnr.log:shortest=1[p]\" -map '[s]' -f null - -map '[p]' -f null -",
             LONGVK_TEST_TMP, path, path, d);
    cr_assert_eq(clip_run(cmd), 0, "%s", cmd);
    double *ref = malloc(sizeof(double) * (size_t)(n + 8));
    int got = read_stats(ssim_log, "Y", ref, (int)n + 8);
    cr_assert_eq(got, n, "ffmpeg compared %d pairs at distance %d, we %lld", got, d, (long long)n);
    double worst = 0;
    for (int64_t t = 0; t < n; t++) {
        double e = fabs(ssim[t] - ref[t]);
        if (e > worst) worst = e;
        cr_assert_leq(e, 0.005, "d=%d pair %lld: SSIM %.5f, ffmpeg %.5f", d, (long long)t, ssim[t], ref[t]);
    }
    cr_log_info("d=%d: largest SSIM difference to ffmpeg %.2g over %lld pairs", d, worst, (long long)n);
    if (psnr_y) {
        for (int pass = 0; pass < 2; pass++) {
            const double *ours = pass ? psnr_avg : psnr_y;
            got = read_stats(psnr_log, pass ? "psnr_avg" : "psnr_y", ref, (int)n + 8);
            cr_assert_eq(got, n);
            worst = 0;
            for (int64_t t = 0; t < n; t++) {
                if (isinf(ref[t]) || isinf(ours[t])) {
                    cr_assert(isinf(ref[t]) && isinf(ours[t]), "pair %lld: PSNR %g vs ffmpeg %g", (long long)t, ours[t], ref[t]);
                    continue;
                }
                double e = fabs(ours[t] - ref[t]);
                if (e > worst) worst = e;
                cr_assert_leq(e, 0.05, "%s pair %lld: %.4f dB, ffmpeg %.4f dB", pass ? "psnr_avg" : "psnr_y", (long long)t,
                              ours[t], ref[t]);
            }
            cr_log_info("%s: largest difference to ffmpeg %.2g dB", pass ? "psnr_avg" : "psnr_y", worst);
        }
    }
    free(ref);
}

Test(metrics, ssim_and_psnr_match_ffmpeg_filters) {
    char path[512];
    tmp_path(path, sizeof path, "noisy.mp4");
    const int w = 134, h = 102, n = 24; /* 134 = 4 * 33 + 2: partial 4x4 blocks at the edge */
    cr_assert_eq(clip_write(path, NULL, CLIP_NOISY, w, h, 25, n, 8, 0), LV_OK, "%s", lv_last_error());
    lv_metrics_options opt = block_options(8);
    opt.ndistances = 2;
    opt.distances[0] = 1;
    opt.distances[1] = 4;
    int native = 0;
    lv_metrics *m = measure(path, &opt, &native);
    cr_assert_eq(native, 1, "yuv420p video: metrics must use the decoded planes");
    int64_t np, n4;
    const double *ssim = lv_metrics_pair_series(m, LV_SERIES_SSIM_Y, &np);
    const double *psnr_y = lv_metrics_pair_series(m, LV_SERIES_PSNR_Y, NULL);
    const double *psnr_avg = lv_metrics_pair_series(m, LV_SERIES_PSNR_AVG, NULL);
    cr_assert_eq(np, n - 1);
    compare_with_ffmpeg(path, m, 1, ssim, np, psnr_y, psnr_avg);
    const double *ssim4 = lv_metrics_long_range_series(m, 1, &n4);
    cr_assert_eq(n4, n - 4);
    compare_with_ffmpeg(path, m, 4, ssim4, n4, NULL, NULL);
    lv_metrics_free(m);
}

/* The CLI end to end: summary on stdout, every series in the JSON, an SVG chart. */
Test(metrics, cli_writes_summary_json_and_svg) {
    char path[512], json[512], svg[512], out[512], cmd[2400];
    tmp_path(path, sizeof path, "cli_cuts.mkv");
    tmp_path(json, sizeof json, "cli.json");
    tmp_path(svg, sizeof svg, "cli.svg");
    tmp_path(out, sizeof out, "cli.stdout");
    cr_assert_eq(clip_write(path, "ffv1", CLIP_HARD_CUTS, 64, 48, 16, 40, 10, 10), LV_OK, "%s", lv_last_error());
    snprintf(cmd, sizeof cmd, "'%s' metrics '%s' --block-frames 10 --distances 1,4,16,64 --json '%s' --plot '%s' > '%s'",
             LONGVK_CLI, path, json, svg, out);
    cr_assert_eq(clip_run(cmd), 0, "%s", cmd);
    char *summary = clip_read_text(out);
    cr_assert_not_null(summary);
    for (const char *k = "seam ratio\0flicker\0colour drift\0freeze fraction\0"; *k; k += strlen(k) + 1)
        cr_assert_not_null(strstr(summary, k), "no '%s' in the summary:\n%s", k, summary);
    cr_assert_not_null(strstr(summary, "seam you can see"), "%s", summary);
    free(summary);

    char *text = clip_read_text(json);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root, "the JSON does not parse");
    cJSON *sum = cJSON_GetObjectItem(root, "summary");
    cr_assert_geq(cJSON_GetObjectItem(sum, "seam_ratio_mae")->valuedouble, 3.0);
    cr_assert_eq(cJSON_GetObjectItem(sum, "frames")->valueint, 40);
    cJSON *pairs = cJSON_GetObjectItem(root, "pairs");
    for (const char *k = "boundary\0mae\0luma_flicker\0psnr_y\0psnr_avg\0ssim_y\0"; *k; k += strlen(k) + 1)
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(pairs, k)), 39, "pairs.%s", k);
    cJSON *lr = cJSON_GetObjectItem(root, "long_range");
    cr_assert_eq(cJSON_GetArraySize(lr), 4);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(lr, 2), "ssim")), 40 - 16);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(lr, 3), "ssim")), 0);
    cJSON *blocks = cJSON_GetObjectItem(root, "blocks");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(blocks, "mean_r")), 4);
    cr_assert_not_null(cJSON_GetObjectItem(root, "verdicts"));
    cJSON_Delete(root);

    char *chart = clip_read_text(svg);
    cr_assert_not_null(chart);
    cr_assert_eq(strncmp(chart, "<svg", 4), 0);
    cr_assert_not_null(strstr(chart, "</svg>"));
    int dashed = 0;
    for (const char *p = chart; (p = strstr(p, "stroke-dasharray")); p++) dashed++;
    cr_assert_eq(dashed, 2 * 3, "3 boundaries in each of the two pair panels, got %d lines", dashed);
    free(chart);
}

/* SSIM of identical planes is 1, and of tiny planes (no whole 8x8 window) 1 or 0. */
Test(metrics, ssim_edge_cases) {
    uint8_t a[64 * 64], b[64 * 64];
    for (int i = 0; i < 64 * 64; i++) a[i] = b[i] = (uint8_t)(i * 37);
    cr_assert_float_eq(lv_ssim_plane(a, 64, b, 64, 64, 64), 1.0, 1e-12);
    cr_assert_eq(lv_ssim_plane(a, 64, b, 64, 7, 7), 1.0);
    b[0] ^= 1;
    cr_assert_eq(lv_ssim_plane(a, 64, b, 64, 7, 7), 0.0);
    cr_assert_lt(lv_ssim_plane(a, 64, b, 64, 64, 64), 1.0);
    cr_assert_eq(lv_sse_plane(a, 64, b, 64, 64, 64), 1u);
}

/* For an RGB source (ffv1) the metrics' luma is computed from RGB with BT.709 limited range.
 * Checked against the textbook formula (Y = 16 + 219 (0.2126 R + 0.7152 G + 0.0722 B), Cb and
 * Cr scaled to 224 levels) to within 1 level (rounding), and lv_metrics_push without planes
 * (its own conversion) gives the same series as with the decoder's planes. */
Test(metrics, luma_of_rgb_sources_is_bt709_limited) {
    char path[512];
    tmp_path(path, sizeof path, "rgb_source.mkv");
    const int w = 66, h = 50, n = 6;
    cr_assert_eq(clip_write(path, "ffv1", CLIP_NOISY, w, h, 16, n, 0, 0), LV_OK, "%s", lv_last_error());
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    lv_metrics_options opt = block_options(2);
    lv_metrics *with_planes, *without;
    cr_assert_eq(lv_metrics_create(w, h, &opt, &with_planes), LV_OK);
    cr_assert_eq(lv_metrics_create(w, h, &opt, &without), LV_OK);
    uint8_t rgb[66 * 50 * 3];
    int worst = 0;
    for (int t = 0; t < n; t++) {
        int end;
        cr_assert_eq(lv_decoder_next(dec, rgb, NULL, &end), LV_OK, "%s", lv_last_error());
        cr_assert_eq(end, 0);
        lv_yuv_planes p;
        cr_assert_eq(lv_decoder_planes(dec, &p), LV_OK, "%s", lv_last_error());
        cr_assert_eq(p.native, 0);
        cr_assert_eq(p.nplanes, 3);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const uint8_t *c = rgb + 3 * (y * w + x);
                double r = c[0] / 255.0, g = c[1] / 255.0, b = c[2] / 255.0;
                double ey = 0.2126 * r + 0.7152 * g + 0.0722 * b;
                double want[3] = {16 + 219 * ey, 128 + 224 * (b - ey) / 1.8556, 128 + 224 * (r - ey) / 1.5748};
                for (int k = 0; k < 3; k++) {
                    int d = abs((int)p.data[k][y * p.stride[k] + x] - (int)lrint(want[k]));
                    if (d > worst) worst = d;
                }
            }
        cr_assert_eq(lv_metrics_push(with_planes, rgb, &p), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_metrics_push(without, rgb, NULL), LV_OK, "%s", lv_last_error());
    }
    lv_decoder_close(dec);
    cr_log_info("RGB -> Y'CbCr (swscale, BT.709 limited) vs the formula: largest difference %d level(s)", worst);
    cr_assert_leq(worst, 1, "swscale's BT.709 limited conversion differs from the formula by %d levels", worst);
    int64_t na, nb;
    const double *a = lv_metrics_pair_series(with_planes, LV_SERIES_SSIM_Y, &na);
    const double *b = lv_metrics_pair_series(without, LV_SERIES_SSIM_Y, &nb);
    cr_assert_eq(na, nb);
    for (int64_t t = 0; t < na; t++) cr_assert_leq(fabs(a[t] - b[t]), 0.002, "pair %lld: %.5f vs %.5f", (long long)t, a[t], b[t]);
    const double *ma = lv_metrics_pair_series(with_planes, LV_SERIES_MAE, NULL);
    const double *mb = lv_metrics_pair_series(without, LV_SERIES_MAE, NULL);
    for (int64_t t = 0; t < na; t++) cr_assert_eq(ma[t], mb[t]);
    lv_metrics_free(with_planes);
    lv_metrics_free(without);
}
