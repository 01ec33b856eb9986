/* Every encoder longvk offers (`longvk generate --help`, lv_encoder_options.codec) in every
 * container that can hold it: several blocks written through the codec API, one of them
 * shorter than any encoder's reordering delay, then decoded back: every frame, in order,
 * with increasing timestamps on the 1/fps grid, close to the frame written. Then the same
 * file cut after two blocks and resumed (what `longvk generate --resume` does) gives the
 * same frame count and timestamps. Combinations a container cannot hold, and FFmpeg
 * encoders longvk does not offer, are refused with a message that says what to use.
 *
 * (Issue 44: libx265 failed at its second block with "writing a frame: Invalid argument":
 * FFmpeg 5.1's wrapper announces no reordering delay, so the decode times went backwards.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_clips.h"

#define W 64 /* libsvtav1's smallest */
#define H 64
#define FPS 16

/* Block lengths: a 1-frame block shorter than x264's and x265's reordering delay, and a
 * partial last block. */
static const int blocks[] = {6, 1, 6, 4};
#define NBLOCKS (int)(sizeof blocks / sizeof blocks[0])

static const char *const containers[] = {"mp4", "mkv", "webm"};

static const struct {
    const char *codec;
    const char *containers; /* those that can hold it */
    const char *extra;      /* speed only: the slowest encoders' fastest settings */
    double min_psnr;
} offered[] = {
    {"libx264", "mp4 mkv", NULL, 35},
    {"libx265", "mp4 mkv", NULL, 30},
    {"ffv1", "mkv", NULL, INFINITY},
    {"libvpx-vp9", "mp4 mkv webm", NULL, 30},
    {"libsvtav1", "mp4 mkv webm", "preset=12", 30},
    {"libaom-av1", "mp4 mkv webm", "cpu-used=8", 30},
};
#define NOFFERED (sizeof offered / sizeof offered[0])

static void tmp_path(char *buf, size_t cap, const char *codec, const char *tag, const char *ext) {
    snprintf(buf, cap, "%s/matrix_%s%s.%s", LONGVK_TEST_TMP, codec, tag, ext);
}

static lv_encoder_options options_for(size_t k) {
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = offered[k].codec;
    opt.extra = offered[k].extra;
    opt.sync_blocks = 0;
    return opt;
}

/* Writes frames [from, to) of the clip, ending a block where `blocks` says. */
static lv_status write_frames(lv_encoder *enc, int from, int to) {
    uint8_t rgb[W * H * 3];
    int end = 0;
    for (int b = 0; b < NBLOCKS; b++) {
        int start = end;
        end += blocks[b];
        for (int t = start; t < end; t++) {
            if (t < from || t >= to) continue;
            clip_frame(CLIP_GRADIENT_SQUARE, W, H, t, 0, rgb);
            LV_TRY(lv_encoder_write_rgb(enc, rgb, 1));
        }
        if (end > from && end <= to) LV_TRY(lv_encoder_flush_block(enc));
    }
    return LV_OK;
}

static int total_frames(void) {
    int n = 0;
    for (int b = 0; b < NBLOCKS; b++) n += blocks[b];
    return n;
}

/* Decodes `path`: `n` frames, indices 0.., timestamps strictly increasing and within half a
 * millisecond of t / FPS (mkv keeps milliseconds), each frame at least min_psnr from the
 * frame written. */
static void check_video(const char *path, int n, double min_psnr) {
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_decoder_info(dec)->width, W, "%s", path);
    cr_assert_eq(lv_decoder_info(dec)->height, H, "%s", path);
    uint8_t got[W * H * 3], want[W * H * 3];
    int count = 0;
    double last = -INFINITY, lowest = INFINITY;
    for (;;) {
        int end;
        lv_frame_info fi;
        cr_assert_eq(lv_decoder_next(dec, got, &fi, &end), LV_OK, "%s: %s", path, lv_last_error());
        if (end) break;
        cr_assert_lt(count, n, "%s: more than the %d frames written", path, n);
        cr_assert_eq(fi.index, count, "%s", path);
        cr_assert_gt(fi.pts_seconds, last, "%s: frame %d at %.6f s, not after frame %d at %.6f s", path, count,
                     fi.pts_seconds, count - 1, last);
        cr_assert_leq(fabs(fi.pts_seconds - (double)count / FPS), 0.0005 + 1e-9, "%s: frame %d at %.6f s", path, count,
                      fi.pts_seconds);
        last = fi.pts_seconds;
        clip_frame(CLIP_GRADIENT_SQUARE, W, H, count, 0, want);
        double p = clip_psnr(got, want, sizeof got);
        if (p < lowest) lowest = p;
        cr_assert_geq(p, min_psnr, "%s: frame %d is %.2f dB from the frame written", path, count, p);
        count++;
    }
    lv_decoder_close(dec);
    cr_assert_eq(count, n, "%s: decoded %d frames, wrote %d", path, count, n);
    cr_log_info("%s: %d frames, lowest PSNR %.2f dB", path, count, lowest);
    /* and FFmpeg itself reads it without an error */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -xerror -i '%s' -f null - 2>/dev/null", path);
    cr_assert_eq(clip_run(cmd), 0, "ffmpeg cannot decode %s", path);
}

static int holds(size_t k, const char *ext) {
    char list[64];
    snprintf(list, sizeof list, " %s ", offered[k].containers);
    char word[16];
    snprintf(word, sizeof word, " %s ", ext);
    return strstr(list, word) != NULL;
}

static void whole_video(size_t k) {
    const int n = total_frames();
    for (size_t c = 0; c < sizeof containers / sizeof containers[0]; c++) {
        const char *ext = containers[c];
        char path[512];
        tmp_path(path, sizeof path, offered[k].codec, "", ext);
        unlink(path);
        lv_encoder_options opt = options_for(k);
        lv_encoder *enc = NULL;
        lv_status st = lv_encoder_open(path, W, H, FPS, &opt, &enc);
        if (!holds(k, ext)) {
            cr_assert_eq(st, LV_ERR_UNSUPPORTED, "%s in .%s: not refused", offered[k].codec, ext);
            char want[32];
            snprintf(want, sizeof want, ".%s takes ", ext);
            cr_assert_not_null(strstr(lv_last_error(), want), "%s", lv_last_error());
            cr_assert_eq(access(path, F_OK), -1, "%s was created", path);
            continue;
        }
        cr_assert_eq(st, LV_OK, "%s in .%s: %s", offered[k].codec, ext, lv_last_error());
        cr_assert_eq(write_frames(enc, 0, n), LV_OK, "%s in .%s: %s", offered[k].codec, ext, lv_last_error());
        cr_assert_eq(lv_encoder_frames_flushed(enc), n);
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s in .%s: %s", offered[k].codec, ext, lv_last_error());
        check_video(path, n, offered[k].min_psnr);

        /* interrupted after two blocks and a part of the third (closed cleanly), resumed
         * from the two blocks */
        char cut[512];
        tmp_path(cut, sizeof cut, offered[k].codec, "_resumed", ext);
        unlink(cut);
        const int keep = blocks[0] + blocks[1];
        cr_assert_eq(lv_encoder_open(cut, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
        cr_assert_eq(write_frames(enc, 0, keep), LV_OK, "%s", lv_last_error());
        uint8_t rgb[W * H * 3];
        clip_frame(CLIP_GRADIENT_SQUARE, W, H, keep, 0, rgb);
        cr_assert_eq(lv_encoder_write_rgb(enc, rgb, 1), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_encoder_open_resume(cut, W, H, FPS, &opt, keep, &enc), LV_OK, "%s in .%s: resume: %s",
                     offered[k].codec, ext, lv_last_error());
        cr_assert_eq(write_frames(enc, keep, n), LV_OK, "%s in .%s: resumed: %s", offered[k].codec, ext, lv_last_error());
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s in .%s: resumed: %s", offered[k].codec, ext, lv_last_error());
        check_video(cut, n, offered[k].min_psnr);
    }
}

Test(codec_matrix, libx264) { whole_video(0); }
Test(codec_matrix, libx265) { whole_video(1); }
Test(codec_matrix, ffv1) { whole_video(2); }
Test(codec_matrix, libvpx_vp9) { whole_video(3); }
Test(codec_matrix, libsvtav1) { whole_video(4); }
Test(codec_matrix, libaom_av1) { whole_video(5); }

/* low_delay with libx265 (tune zerolatency): one encoder instance across all blocks. */
Test(codec_matrix, libx265_low_delay_keeps_one_encoder) {
    char path[512];
    tmp_path(path, sizeof path, "libx265", "_low_delay", "mp4");
    lv_encoder_options opt = options_for(1);
    opt.low_delay = 1;
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, 0, total_frames()), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_instances(enc), 1, "%lld encoder instances", (long long)lv_encoder_instances(enc));
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
    check_video(path, total_frames(), offered[1].min_psnr);
}

/* The short names, and FFmpeg encoders that are not offered. */
Test(codec_matrix, names, .timeout = 120) {
    static const char *const aliases[][2] = {{"h264", "libx264"}, {"hevc", "libx265"}, {"h265", "libx265"},
                                             {"vp9", "libvpx-vp9"}, {"av1", "libsvtav1"}};
    char path[512];
    tmp_path(path, sizeof path, "alias", "", "mkv");
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = aliases[i][0];
        lv_encoder *enc;
        cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s: %s", aliases[i][0], lv_last_error());
        cr_assert_str_eq(lv_encoder_codec_name(enc), aliases[i][1]);
        lv_encoder_abort(enc);
    }
    /* real FFmpeg encoders, untested with blocks: refused, and the message lists the offered */
    static const char *const others[] = {"mpeg4", "libvpx", "librav1e"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = others[i];
        lv_encoder *enc = NULL;
        unlink(path);
        cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_ERR_UNSUPPORTED, "%s accepted", others[i]);
        const char *msg = lv_last_error();
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", others[i]);
        cr_assert_not_null(strstr(msg, quoted), "%s", msg);
        cr_assert_not_null(strstr(msg, "libx265"), "%s", msg);
        cr_assert_not_null(strstr(msg, "libaom-av1"), "%s", msg);
        cr_assert_eq(access(path, F_OK), -1, "%s was created", path);
    }
    /* svt-av1's size limit is named instead of "Invalid argument" */
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = "av1";
    lv_encoder *enc = NULL;
    cr_assert_eq(lv_encoder_open(path, 64, 48, FPS, &opt, &enc), LV_ERR_INVALID);
    cr_assert_not_null(strstr(lv_last_error(), "at least 64x64"), "%s", lv_last_error());
}

/* An encoder stopped before its first frame (an error right after lv_encoder_open, or a run
 * with nothing to write): libsvtav1 hung in its close waiting for an end of stream. Every
 * offered encoder stops at once, and an empty video closes cleanly. */
Test(codec_matrix, stop_before_the_first_frame, .timeout = 120) {
    for (size_t k = 0; k < NOFFERED; k++) {
        char path[512];
        tmp_path(path, sizeof path, offered[k].codec, "_empty", "mkv");
        lv_encoder_options opt = options_for(k);
        lv_encoder *enc;
        cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        lv_encoder_abort(enc);
        cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        cr_assert_eq(lv_encoder_flush_block(enc), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        /* and after a block, stopped before the next block's first frame */
        cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        cr_assert_eq(write_frames(enc, 0, blocks[0]), LV_OK, "%s: %s", offered[k].codec, lv_last_error());
        lv_encoder_abort(enc);
        check_video(path, blocks[0], offered[k].min_psnr);
    }
}
