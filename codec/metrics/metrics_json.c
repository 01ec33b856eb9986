/* `longvk metrics --json`: the summary, its verdicts and every series, as one JSON object.
 *
 *   video:   path, size, fps, codec, pixel format, luma source
 *   options: block_frames, first_block_frames, distances, freeze_mae
 *   summary: the numbers of lv_metrics_summary, verdicts: one line each
 *   pairs:   per frame pair t (frames t, t + 1): boundary (0/1), mae, luma_flicker,
 *            psnr_y, psnr_avg, ssim_y
 *   long_range: [{d, ssim: [SSIM(t, t + d) for t = 0 ..]}]
 *   blocks:  per block: first_frame, frames, mean_r/g/b/y, hist_chi2 (to block 0)
 * Infinite values (PSNR of identical frames, a seam ratio with no change inside blocks)
 * and undefined ones are null. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec_internal.h"
#include "longvk/metrics.h"

static cJSON *number(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static void add_number(cJSON *obj, const char *key, double v) { cJSON_AddItemToObject(obj, key, number(v)); }

static cJSON *array(const double *v, int64_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, number(v[i]));
    return a;
}

static cJSON *summary_json(const lv_metrics_summary *s) {
    cJSON *o = cJSON_CreateObject();
    add_number(o, "frames", (double)s->frames);
    add_number(o, "pairs", (double)s->pairs);
    add_number(o, "blocks", (double)s->blocks);
    add_number(o, "boundary_pairs", (double)s->boundary_pairs);
    add_number(o, "within_pairs", (double)s->within_pairs);
    /* null when infinite (change only at boundaries) or undefined: boundary_mae and
     * within_mae below tell which */
    add_number(o, "seam_ratio_mae", s->seam_ratio_mae);
    add_number(o, "seam_ratio_ssim", s->seam_ratio_ssim);
    add_number(o, "boundary_mae", s->boundary_mae);
    add_number(o, "within_mae", s->within_mae);
    add_number(o, "temporal_flickering", s->temporal_flickering);
    add_number(o, "luma_flicker", s->luma_flicker);
    add_number(o, "luma_flicker_boundary", s->luma_flicker_boundary);
    add_number(o, "luma_flicker_within", s->luma_flicker_within);
    add_number(o, "mean_mae", s->mean_mae);
    add_number(o, "mean_ssim_y", s->mean_ssim_y);
    add_number(o, "mean_psnr_y", s->mean_psnr_y);
    add_number(o, "identical_pairs", (double)s->identical_pairs);
    add_number(o, "freeze_fraction", s->freeze_fraction);
    add_number(o, "frozen_pairs", (double)s->frozen_pairs);
    cJSON_AddItemToObject(o, "colour_drift_rgb", array(s->colour_drift, 3));
    add_number(o, "colour_max_step", s->colour_max_step);
    add_number(o, "colour_max_step_block", (double)s->colour_max_step_block);
    add_number(o, "hist_chi2_last", s->hist_last);
    add_number(o, "hist_chi2_max", s->hist_max);
    cJSON *lr = cJSON_CreateArray();
    for (int k = 0; k < s->ndistances; k++) {
        cJSON *e = cJSON_CreateObject();
        add_number(e, "d", s->distances[k]);
        add_number(e, "mean_ssim", s->long_range_ssim[k]);
        add_number(e, "pairs", (double)s->long_range_pairs[k]);
        cJSON_AddItemToArray(lr, e);
    }
    cJSON_AddItemToObject(o, "long_range_ssim", lr);
    return o;
}

static cJSON *build(const lv_metrics *m, const char *video_path, const lv_video_info *info) {
    lv_metrics_summary s;
    lv_metrics_summarize(m, &s);
    const lv_metrics_options *opt = lv_metrics_options_used(m);
    cJSON *root = cJSON_CreateObject();

    cJSON *video = cJSON_CreateObject();
    if (video_path) cJSON_AddStringToObject(video, "path", video_path);
    add_number(video, "width", s.width);
    add_number(video, "height", s.height);
    if (info) {
        add_number(video, "fps", info->fps);
        cJSON_AddStringToObject(video, "container", info->container);
        cJSON_AddStringToObject(video, "codec", info->codec);
        cJSON_AddStringToObject(video, "pix_fmt", info->pix_fmt);
        cJSON_AddStringToObject(video, "color_space", info->color_space);
        cJSON_AddStringToObject(video, "color_range", info->color_range);
    }
    cJSON_AddItemToObject(root, "video", video);

    cJSON *o = cJSON_CreateObject();
    add_number(o, "block_frames", opt->block_frames);
    add_number(o, "first_block_frames", opt->first_block_frames);
    cJSON *d = cJSON_CreateArray();
    for (int k = 0; k < opt->ndistances; k++) cJSON_AddItemToArray(d, cJSON_CreateNumber(opt->distances[k]));
    cJSON_AddItemToObject(o, "distances", d);
    add_number(o, "freeze_mae", opt->freeze_mae);
    cJSON_AddItemToObject(root, "options", o);

    cJSON_AddItemToObject(root, "summary", summary_json(&s));
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "seam", lv_metrics_verdict_seam(&s));
    cJSON_AddStringToObject(v, "flicker", lv_metrics_verdict_flicker(&s));
    cJSON_AddStringToObject(v, "colour", lv_metrics_verdict_colour(&s));
    cJSON_AddStringToObject(v, "freeze", lv_metrics_verdict_freeze(&s));
    cJSON_AddItemToObject(root, "verdicts", v);

    cJSON *pairs = cJSON_CreateObject();
    int64_t n;
    lv_metrics_pair_series(m, LV_SERIES_MAE, &n);
    cJSON *boundary = cJSON_CreateArray();
    for (int64_t t = 0; t < n; t++) cJSON_AddItemToArray(boundary, cJSON_CreateNumber(lv_metrics_is_boundary_pair(m, t)));
    cJSON_AddItemToObject(pairs, "boundary", boundary);
    static const char *const names[LV_SERIES_COUNT] = {"mae", "luma_flicker", "psnr_y", "psnr_avg", "ssim_y"};
    for (int k = 0; k < LV_SERIES_COUNT; k++) {
        const double *x = lv_metrics_pair_series(m, (lv_metrics_series)k, &n);
        cJSON_AddItemToObject(pairs, names[k], array(x, n));
    }
    cJSON_AddItemToObject(root, "pairs", pairs);

    cJSON *lr = cJSON_CreateArray();
    for (int k = 0; k < opt->ndistances; k++) {
        cJSON *e = cJSON_CreateObject();
        add_number(e, "d", opt->distances[k]);
        const double *x = lv_metrics_long_range_series(m, k, &n);
        cJSON_AddItemToObject(e, "ssim", array(x, n));
        cJSON_AddItemToArray(lr, e);
    }
    cJSON_AddItemToObject(root, "long_range", lr);

    int64_t nb;
    const lv_metrics_block *b = lv_metrics_blocks(m, &nb);
    cJSON *blocks = cJSON_CreateObject();
    double *col = malloc((size_t)(nb ? nb : 1) * sizeof *col);
    if (!col) {
        cJSON_Delete(root);
        return NULL;
    }
    static const char *const bnames[] = {"first_frame", "frames", "mean_r", "mean_g", "mean_b", "mean_y", "hist_chi2"};
    for (int k = 0; k < 7; k++) {
        for (int64_t i = 0; i < nb; i++) {
            const lv_metrics_block *x = &b[i];
            col[i] = k == 0 ? (double)x->first_frame : k == 1 ? (double)x->frames : k < 5 ? x->mean_rgb[k - 2]
                     : k == 5 ? x->mean_y : x->hist_chi2;
        }
        cJSON_AddItemToObject(blocks, bnames[k], array(col, nb));
    }
    free(col);
    cJSON_AddItemToObject(root, "blocks", blocks);
    return root;
}

lv_status lv_metrics_write_json(const lv_metrics *m, const char *path, const char *video_path,
                                const lv_video_info *info) {
    if (!m || !path) return lv_error(LV_ERR_INVALID, "lv_metrics_write_json: NULL argument");
    cJSON *root = build(m, video_path, info);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return lv_error(LV_ERR_NOMEM, "writing %s: out of memory building the JSON", path);
    lv_atomic_file f;
    lv_status st = lv_atomic_open(&f, path);
    if (st == LV_OK) {
        fputs(text, f.fp);
        fputc('\n', f.fp);
        st = lv_atomic_commit(&f);
    }
    cJSON_free(text);
    return st;
}
