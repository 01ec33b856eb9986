/* The codec module: round trips through the encoder and decoder (lossless ffv1 bit-exact,
 * libx264 by PSNR), timestamps, frame counts and colour tags, float input. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_clips.h"

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/codec_%s", LONGVK_TEST_TMP, name); }

/* Decodes every frame of `path` and compares it with the clip that wrote it. Returns the
 * frame count; fills the overall PSNR and the largest timestamp error against t / fps. */
static int decode_and_compare(const char *path, clip_kind kind, int w, int h, int period, double fps, double *psnr,
                              double *max_pts_err, double mean_shift[3]) {
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    cr_assert_eq(info->width, w);
    cr_assert_eq(info->height, h);
    size_t n = (size_t)w * (size_t)h * 3;
    uint8_t *got = malloc(n), *want = malloc(n);
    double sse = 0, sum_got[3] = {0}, sum_want[3] = {0};
    int count = 0;
    *max_pts_err = 0;
    for (;;) {
        int end;
        lv_frame_info fi;
        cr_assert_eq(lv_decoder_next(dec, got, &fi, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        cr_assert_eq(fi.index, count);
        double err = fabs(fi.pts_seconds - count / fps);
        if (err > *max_pts_err) *max_pts_err = err;
        clip_frame(kind, w, h, count, period, want);
        for (size_t i = 0; i < n; i++) {
            double d = (double)got[i] - (double)want[i];
            sse += d * d;
            sum_got[i % 3] += got[i];
            sum_want[i % 3] += want[i];
        }
        count++;
    }
    *psnr = sse == 0 ? INFINITY : 10 * log10(255.0 * 255.0 * (double)n * count / sse);
    if (mean_shift)
        for (int c = 0; c < 3; c++) mean_shift[c] = (sum_got[c] - sum_want[c]) / ((double)count * (double)(n / 3));
    free(got);
    free(want);
    lv_decoder_close(dec);
    return count;
}

static size_t read_file(const char *path, char **out) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    cr_assert_eq(fread(*out, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return (size_t)n;
}

/* Occurrences of an mp4 box type; `first` gets the offset of the first (-1 if none). */
static int find_boxes(const char *data, size_t n, const char *type, long *first) {
    int count = 0;
    *first = -1;
    for (size_t i = 4; i + 4 <= n; i++)
        if (memcmp(data + i, type, 4) == 0) {
            if (*first < 0) *first = (long)i;
            count++;
        }
    return count;
}

static int count_boxes(const char *data, size_t n, const char *type) {
    long first;
    return find_boxes(data, n, type, &first);
}

/* ffv1 in mkv stores the RGB samples: every frame comes back bit-exact. An odd size and a
 * partial last block on purpose (ffv1 has no 4:2:0 restriction). */
Test(codec, ffv1_mkv_round_trip_is_bit_exact) {
    char path[512];
    tmp_path(path, sizeof path, "ffv1.mkv");
    const int w = 101, h = 67, n = 37, block = 8;
    cr_assert_eq(clip_write(path, "ffv1", CLIP_NOISY, w, h, 16, n, block, 0), LV_OK, "%s", lv_last_error());
    double psnr, pts_err;
    int count = decode_and_compare(path, CLIP_NOISY, w, h, 0, 16, &psnr, &pts_err, NULL);
    cr_assert_eq(count, n, "decoded %d frames, wrote %d", count, n);
    cr_assert(isinf(psnr), "ffv1 round trip is not exact: PSNR %.2f dB", psnr);
    /* mkv keeps milliseconds: 1/16 s = 62.5 ms is stored as 62 or 63 */
    cr_assert_leq(pts_err, 0.001, "timestamps off by %.4f s", pts_err);

    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    cr_assert_eq(info->fps_num, 16);
    cr_assert_eq(info->fps_den, 1);
    cr_assert_str_eq(info->codec, "ffv1");
    cr_assert_leq(fabs(info->duration - n / 16.0), 0.001, "duration %.4f, want %.4f", info->duration, n / 16.0);
    lv_decoder_close(dec);
}

/* libx264 in fragmented mp4 (the default): PSNR >= 40 dB over the clip, no colour shift,
 * exact frame count, fps and duration, BT.709 limited-range tags. */
Test(codec, x264_mp4_round_trip) {
    char path[512];
    tmp_path(path, sizeof path, "x264.mp4");
    const int w = 128, h = 96, n = 40, block = 16; /* blocks of 16, 16 and 8 */
    cr_assert_eq(clip_write(path, NULL, CLIP_GRADIENT_SQUARE, w, h, 25, n, block, 0), LV_OK, "%s", lv_last_error());
    double psnr, pts_err, shift[3];
    int count = decode_and_compare(path, CLIP_GRADIENT_SQUARE, w, h, 0, 25, &psnr, &pts_err, shift);
    cr_assert_eq(count, n, "decoded %d frames, wrote %d", count, n);
    cr_log_info("x264 mp4 round trip: PSNR %.2f dB, channel mean shifts %.3f %.3f %.3f", psnr, shift[0], shift[1], shift[2]);
    cr_assert_geq(psnr, 40.0, "PSNR %.2f dB < 40", psnr);
    /* a wrong matrix or range (BT.601, full range) shifts channel means by several levels */
    for (int c = 0; c < 3; c++) cr_assert_leq(fabs(shift[c]), 0.5, "channel %d mean shifted by %.3f", c, shift[c]);
    cr_assert_leq(pts_err, 1e-6, "timestamps off by %g s", pts_err);

    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    cr_assert_eq(info->fps_num, 25);
    cr_assert_eq(info->fps_den, 1);
    cr_assert_leq(fabs(info->duration - n / 25.0), 1e-6, "duration %.6f, want %.6f", info->duration, n / 25.0);
    cr_assert_str_eq(info->codec, "h264");
    cr_assert_str_eq(info->pix_fmt, "yuv420p");
    cr_assert_str_eq(info->color_primaries, "bt709");
    cr_assert_str_eq(info->color_trc, "bt709");
    cr_assert_str_eq(info->color_space, "bt709");
    cr_assert_str_eq(info->color_range, "tv");
    lv_decoder_close(dec);

    /* and ffprobe, an independent reader, agrees on count, rate and tags */
    char cmd[2400], out[600];
    tmp_path(out, sizeof out, "x264.probe");
    snprintf(cmd, sizeof cmd,
             "ffprobe -v error -count_frames -select_streams v -show_entries "
             "stream=nb_read_frames,r_frame_rate,avg_frame_rate,color_space,color_primaries,color_transfer,color_range "
             "-of default=nw=1 '%s' > '%s'",
             path, out);
    cr_assert_eq(clip_run(cmd), 0, "%s", cmd);
    char *probe = clip_read_text(out);
    cr_assert_not_null(probe);
    cr_assert_not_null(strstr(probe, "nb_read_frames=40"), "%s", probe);
    cr_assert_not_null(strstr(probe, "r_frame_rate=25/1"), "%s", probe);
    cr_assert_not_null(strstr(probe, "avg_frame_rate=25/1"), "%s", probe);
    cr_assert_not_null(strstr(probe, "color_space=bt709"), "%s", probe);
    cr_assert_not_null(strstr(probe, "color_primaries=bt709"), "%s", probe);
    cr_assert_not_null(strstr(probe, "color_transfer=bt709"), "%s", probe);
    cr_assert_not_null(strstr(probe, "color_range=tv"), "%s", probe);
    free(probe);

    /* a fragment per block: three moof boxes for blocks of 16, 16 and 8 frames */
    char *bytes = NULL;
    size_t nbytes = read_file(path, &bytes);
    cr_assert_eq(count_boxes(bytes, nbytes, "moof"), 3, "%d fragments", count_boxes(bytes, nbytes, "moof"));
    free(bytes);

    /* ffmpeg's own decoder and colour conversion, with the matrix and range it reads from the
     * tags, give back the source too: this checks the encoder's matrix and range
     * independently of lv_decoder, which shares the swscale set-up and could hide a matching
     * mistake. (Accurate rounding as lv_decoder uses: ffmpeg's default fast path is biased by
     * about -1 level; a BT.601 reading of this file gives 28.6 dB.) */
    char raw[600];
    tmp_path(raw, sizeof raw, "x264.rgb");
    snprintf(cmd, sizeof cmd,
             "ffmpeg -v error -y -i '%s' -sws_flags accurate_rnd+full_chroma_int+bicubic -f rawvideo -pix_fmt rgb24 '%s'",
             path, raw);
    cr_assert_eq(clip_run(cmd), 0, "%s", cmd);
    FILE *f = fopen(raw, "rb");
    cr_assert_not_null(f);
    size_t fb = (size_t)w * h * 3;
    uint8_t *got = malloc(fb), *want = malloc(fb);
    double sse = 0, sum_diff = 0;
    int frames = 0;
    while (fread(got, 1, fb, f) == fb) {
        clip_frame(CLIP_GRADIENT_SQUARE, w, h, frames, 0, want);
        for (size_t i = 0; i < fb; i++) {
            double d = (double)got[i] - (double)want[i];
            sse += d * d;
            sum_diff += d;
        }
        frames++;
    }
    fclose(f);
    free(got);
    free(want);
    cr_assert_eq(frames, n);
    double ff_psnr = 10 * log10(255.0 * 255.0 * (double)fb * n / sse), ff_shift = sum_diff / ((double)fb * n);
    cr_log_info("decoded by ffmpeg: PSNR %.2f dB, mean shift %.3f", ff_psnr, ff_shift);
    cr_assert_geq(ff_psnr, 40.0, "ffmpeg's decode: PSNR %.2f dB", ff_psnr);
    cr_assert_leq(fabs(ff_shift), 0.5, "ffmpeg's decode: mean shift %.3f", ff_shift);
}

/* Blocks shorter than x264's B-frame delay (1 and 2 frames) still give one steady clock:
 * exact duration and rate in mp4, where a gap would lengthen a sample. */
Test(codec, x264_short_blocks_keep_exact_timing) {
    char path[512];
    tmp_path(path, sizeof path, "short_blocks.mp4");
    const int n = 11;
    for (int block = 1; block <= 2; block++) {
        cr_assert_eq(clip_write(path, NULL, CLIP_GRADIENT_SQUARE, 64, 48, 16, n, block, 0), LV_OK, "%s", lv_last_error());
        double psnr, pts_err;
        int count = decode_and_compare(path, CLIP_GRADIENT_SQUARE, 64, 48, 0, 16, &psnr, &pts_err, NULL);
        cr_assert_eq(count, n);
        cr_assert_leq(pts_err, 1e-6);
        lv_decoder *dec;
        cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
        cr_assert_leq(fabs(lv_decoder_info(dec)->duration - n / 16.0), 1e-6, "block %d: duration %.6f", block,
                      lv_decoder_info(dec)->duration);
        cr_assert_eq(lv_decoder_info(dec)->fps_num, 16);
        lv_decoder_close(dec);
    }
}

/* Float frames in [-1, 1] become round(127.5 x + 127.5) after clamping, in both layouts;
 * ffv1 keeps them exactly, so the decoded bytes are the conversion itself. */
Test(codec, float_frames_in_both_layouts) {
    const int w = 20, h = 12, nf = 3;
    size_t hw = (size_t)w * h;
    float *x = malloc(hw * 3 * nf * sizeof *x);
    uint64_t state = 12345;
    for (size_t i = 0; i < hw * 3 * nf; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.6 - 1.3); /* some outside [-1, 1] */
    }
    /* the special values in frame 0, pixel 0..5, channel 0 (interleaved layout) */
    const float special[6] = {-1.0f, 1.0f, 0.0f, NAN, 2.0f, -0.5f};
    const uint8_t expect_special[6] = {0, 255, 128, 0, 255, 64};
    for (int i = 0; i < 6; i++) x[3 * i] = special[i];

    char path[2][512];
    tmp_path(path[0], sizeof path[0], "float_fhwc.mkv");
    tmp_path(path[1], sizeof path[1], "float_cfhw.mkv");
    float *planar = malloc(hw * 3 * nf * sizeof *planar);
    for (int f = 0; f < nf; f++)
        for (size_t p = 0; p < hw; p++)
            for (int c = 0; c < 3; c++) planar[((size_t)c * nf + f) * hw + p] = x[((size_t)f * hw + p) * 3 + c];
    for (int layout = 0; layout < 2; layout++) {
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = "ffv1";
        lv_encoder *enc;
        cr_assert_eq(lv_encoder_open(path[layout], w, h, 8, &opt, &enc), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_encoder_write_float(enc, layout ? planar : x, nf, layout ? LV_LAYOUT_CFHW : LV_LAYOUT_FHWC), LV_OK,
                     "%s", lv_last_error());
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());

        lv_decoder *dec;
        cr_assert_eq(lv_decoder_open(path[layout], &dec), LV_OK, "%s", lv_last_error());
        uint8_t *rgb = malloc(hw * 3);
        for (int f = 0; f < nf; f++) {
            int end;
            cr_assert_eq(lv_decoder_next(dec, rgb, NULL, &end), LV_OK, "%s", lv_last_error());
            cr_assert_eq(end, 0);
            for (size_t i = 0; i < hw * 3; i++) {
                float v = x[(size_t)f * hw * 3 + i];
                double c = isnan(v) ? -1.0 : v < -1 ? -1.0 : v > 1 ? 1.0 : v;
                int want = (int)floor(127.5 * c + 127.5 + 0.5);
                cr_assert_eq(rgb[i], want, "layout %d frame %d value %zu: %g -> %d, want %d", layout, f, i, v, rgb[i], want);
            }
            if (f == 0)
                for (int i = 0; i < 6; i++) cr_assert_eq(rgb[3 * i], expect_special[i], "special value %g", special[i]);
        }
        int end;
        cr_assert_eq(lv_decoder_next(dec, rgb, NULL, &end), LV_OK);
        cr_assert_eq(end, 1, "more frames than written");
        free(rgb);
        lv_decoder_close(dec);
    }
    free(x);
    free(planar);
}

/* The other containers and codecs the issue names: webm (vp9), av1 through --codec av1,
 * mp4 with faststart, and libx264 in mkv. Each decodes to the frames written with the tags. */
Test(codec, other_containers_and_codecs) {
    static const struct {
        const char *name, *codec;
        int faststart;
        double min_psnr;
    } cases[] = {
        {"vp9.webm", NULL, 0, 35}, {"av1.mkv", "av1", 0, 35}, {"faststart.mp4", NULL, 1, 40}, {"x264.mkv", "h264", 0, 40},
    };
    const int w = 96, h = 64, n = 12;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[512];
        tmp_path(path, sizeof path, cases[k].name);
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = cases[k].codec;
        opt.faststart = cases[k].faststart;
        opt.sync_blocks = 0;
        if (cases[k].codec && strcmp(cases[k].codec, "av1") == 0) opt.preset = "12"; /* svt-av1's fastest */
        lv_encoder *enc;
        cr_assert_eq(lv_encoder_open(path, w, h, 24, &opt, &enc), LV_OK, "%s: %s", cases[k].name, lv_last_error());
        uint8_t *rgb = malloc((size_t)w * h * 3);
        for (int t = 0; t < n; t++) {
            clip_frame(CLIP_GRADIENT_SQUARE, w, h, t, 0, rgb);
            cr_assert_eq(lv_encoder_write_rgb(enc, rgb, 1), LV_OK, "%s", lv_last_error());
            if (t == 5) cr_assert_eq(lv_encoder_flush_block(enc), LV_OK, "%s", lv_last_error());
        }
        free(rgb);
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s: %s", cases[k].name, lv_last_error());
        double psnr, pts_err;
        int count = decode_and_compare(path, CLIP_GRADIENT_SQUARE, w, h, 0, 24, &psnr, &pts_err, NULL);
        cr_assert_eq(count, n, "%s: %d frames", cases[k].name, count);
        cr_log_info("%s: PSNR %.2f dB", cases[k].name, psnr);
        cr_assert_geq(psnr, cases[k].min_psnr, "%s: PSNR %.2f dB", cases[k].name, psnr);
        cr_assert_leq(pts_err, 0.001, "%s: timestamps off by %g s", cases[k].name, pts_err);
        lv_decoder *dec;
        cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
        cr_assert_str_eq(lv_decoder_info(dec)->color_space, "bt709", "%s", cases[k].name);
        cr_assert_str_eq(lv_decoder_info(dec)->color_range, "tv", "%s", cases[k].name);
        lv_decoder_close(dec);
        if (cases[k].faststart) { /* finalised: the index in front of the data, no fragments */
            char *bytes = NULL;
            size_t nbytes = read_file(path, &bytes);
            long moov, mdat, moof;
            find_boxes(bytes, nbytes, "moov", &moov);
            find_boxes(bytes, nbytes, "mdat", &mdat);
            find_boxes(bytes, nbytes, "moof", &moof);
            free(bytes);
            cr_assert(moov >= 0 && mdat > moov && moof < 0, "moov at %ld, mdat at %ld, moof at %ld", moov, mdat, moof);
        }
    }
}

/* Encoders that hold frames back are restarted at every block boundary (a keyframe per
 * block); with low_delay, and for ffv1, one encoder runs through all blocks. Either way
 * every frame arrives. */
Test(codec, encoder_instances_per_block) {
    static const struct {
        const char *name, *codec;
        int low_delay;
        int64_t instances;
    } cases[] = {{"inst_x264.mp4", NULL, 0, 4}, {"inst_low_delay.mp4", NULL, 1, 1}, {"inst_ffv1.mkv", "ffv1", 0, 1}};
    const int w = 64, h = 48, n = 30, block = 8; /* blocks 8, 8, 8, 6 */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[512];
        tmp_path(path, sizeof path, cases[k].name);
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = cases[k].codec;
        opt.low_delay = cases[k].low_delay;
        lv_encoder *enc;
        cr_assert_eq(lv_encoder_open(path, w, h, 16, &opt, &enc), LV_OK, "%s", lv_last_error());
        uint8_t rgb[64 * 48 * 3];
        for (int t = 0; t < n; t++) {
            clip_frame(CLIP_GRADIENT_SQUARE, w, h, t, 0, rgb);
            cr_assert_eq(lv_encoder_write_rgb(enc, rgb, 1), LV_OK, "%s", lv_last_error());
            if ((t + 1) % block == 0) {
                cr_assert_eq(lv_encoder_flush_block(enc), LV_OK, "%s", lv_last_error());
                cr_assert_eq(lv_encoder_frames_flushed(enc), t + 1);
            }
        }
        cr_assert_eq(lv_encoder_frames_written(enc), n);
        cr_assert_eq(lv_encoder_flush_block(enc), LV_OK);
        cr_assert_eq(lv_encoder_instances(enc), cases[k].instances, "%s: %lld encoder instances", cases[k].name,
                     (long long)lv_encoder_instances(enc));
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
        double psnr, pts_err;
        cr_assert_eq(decode_and_compare(path, CLIP_GRADIENT_SQUARE, w, h, 0, 16, &psnr, &pts_err, NULL), n);
        /* the frames written, in order (not a quality test: 64x48 with sharp edges gives x264
         * about 38 dB, while a wrong or repeated frame is below 25 dB) */
        cr_assert_geq(psnr, 35.0, "%s: PSNR %.2f", cases[k].name, psnr);
        cr_assert_leq(pts_err, strstr(cases[k].name, ".mkv") ? 0.001 : 1e-6, "%s: %g s", cases[k].name, pts_err); /* mkv: ms */
    }
}
