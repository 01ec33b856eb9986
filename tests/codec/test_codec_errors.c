/* Bad input to the codec: each is refused with a message that names the problem, and
 * nothing is left half-written. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_clips.h"

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/err_%s", LONGVK_TEST_TMP, name); }

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static lv_status open_with(const char *path, int w, int h, const char *codec, int crf, const char *extra) {
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = codec;
    opt.crf = crf;
    opt.extra = extra;
    lv_encoder *enc = NULL;
    lv_status st = lv_encoder_open(path, w, h, 16, &opt, &enc);
    if (st == LV_OK) lv_encoder_abort(enc);
    return st;
}

Test(codec_errors, odd_size_for_420_suggests_even_sizes) {
    char path[512];
    tmp_path(path, sizeof path, "odd.mp4");
    unlink(path);
    cr_assert_eq(open_with(path, 833, 480, NULL, -1, NULL), LV_ERR_INVALID);
    const char *msg = lv_last_error();
    cr_assert_not_null(strstr(msg, "833x480"), "%s", msg);
    cr_assert_not_null(strstr(msg, "even"), "%s", msg);
    cr_assert_not_null(strstr(msg, "832x480"), "%s", msg);
    cr_assert_not_null(strstr(msg, "834x480"), "%s", msg);
    cr_assert(!exists(path), "the file was created although the size was refused");
    cr_assert_eq(open_with(path, 832, 481, NULL, -1, NULL), LV_ERR_INVALID);
    cr_assert_not_null(strstr(lv_last_error(), "832x480"), "%s", lv_last_error());
}

Test(codec_errors, unknown_codec_container_and_option_are_named) {
    char path[512], avi[512];
    tmp_path(path, sizeof path, "bad.mkv");
    tmp_path(avi, sizeof avi, "bad.avi");
    unlink(path);
    cr_assert_eq(open_with(path, 64, 48, "nosuchcodec", -1, NULL), LV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(lv_last_error(), "'nosuchcodec'"), "%s", lv_last_error());
    cr_assert(!exists(path), "the file was created although the codec is unknown");

    cr_assert_eq(open_with(avi, 64, 48, NULL, -1, NULL), LV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(lv_last_error(), ".avi"), "%s", lv_last_error());

    cr_assert_eq(open_with(path, 64, 48, NULL, -1, "bogus_opt=3"), LV_ERR_INVALID);
    cr_assert_not_null(strstr(lv_last_error(), "'bogus_opt'"), "%s", lv_last_error());
    cr_assert(!exists(path));

    /* ffv1 is lossless: it has no crf, and says so */
    cr_assert_eq(open_with(path, 64, 48, "ffv1", 20, NULL), LV_ERR_INVALID);
    cr_assert_not_null(strstr(lv_last_error(), "'crf'"), "%s", lv_last_error());

    /* webm holds only vp8/vp9/av1 */
    char webm[512];
    tmp_path(webm, sizeof webm, "bad.webm");
    cr_assert_eq(open_with(webm, 64, 48, "libx264", -1, NULL), LV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(lv_last_error(), "h264"), "%s", lv_last_error());
}

Test(codec_errors, unwritable_path) {
    cr_assert_eq(open_with("/nonexistent-dir/x.mp4", 64, 48, NULL, -1, NULL), LV_ERR_IO);
    cr_assert_not_null(strstr(lv_last_error(), "/nonexistent-dir/x.mp4"), "%s", lv_last_error());
    cr_assert_not_null(strstr(lv_last_error(), "No such file or directory"), "%s", lv_last_error());
    /* a directory where the file should be */
    cr_assert_eq(open_with(LONGVK_TEST_TMP "/", 64, 48, NULL, -1, NULL), LV_ERR_UNSUPPORTED); /* no extension */
    char dir[512];
    tmp_path(dir, sizeof dir, "dir.mkv");
    mkdir(dir, 0755);
    cr_assert_eq(open_with(dir, 64, 48, NULL, -1, NULL), LV_ERR_IO);
    cr_assert_not_null(strstr(lv_last_error(), "directory"), "%s", lv_last_error());
}

/* A full disk: /dev/full fails every write with ENOSPC. */
Test(codec_errors, full_disk_is_reported) {
    char path[512];
    tmp_path(path, sizeof path, "full.mkv");
    unlink(path);
    cr_assert_eq(symlink("/dev/full", path), 0);
    lv_status st = open_with(path, 64, 48, "ffv1", -1, NULL);
    cr_assert_eq(st, LV_ERR_IO, "status %d: %s", st, lv_last_error());
    cr_assert_not_null(strstr(lv_last_error(), "disk is full"), "%s", lv_last_error());
    cr_assert_not_null(strstr(lv_last_error(), path), "%s", lv_last_error());
    unlink(path);
}

/* The disk fills up in the middle of the video (here: a file size limit, EFBIG): the write
 * that meets it fails with the reason, later calls report the same error, close returns
 * it and closes the file, and the blocks flushed before it still decode. */
Test(codec_errors, write_error_mid_video_closes_cleanly) {
    char path[512];
    tmp_path(path, sizeof path, "limit.mkv");
    unlink(path);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* result: flushed frames, status of the failing call, status of close, message */
        struct {
            long long flushed;
            int failed_at, st_write, st_again, st_close;
            char msg[512];
        } r;
        memset(&r, 0, sizeof r);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {200 * 1024, 200 * 1024};
        setrlimit(RLIMIT_FSIZE, &lim);
        lv_encoder_options opt;
        lv_encoder_options_default(&opt);
        opt.codec = "ffv1";
        lv_encoder *enc;
        const int w = 96, h = 64;
        uint8_t rgb[96 * 64 * 3];
        if (lv_encoder_open(path, w, h, 16, &opt, &enc) != LV_OK) _exit(20);
        r.failed_at = -1;
        for (int t = 0; t < 400 && r.failed_at < 0; t++) {
            clip_frame(CLIP_NOISY, w, h, t, 0, rgb);
            lv_status st = lv_encoder_write_rgb(enc, rgb, 1);
            if (st == LV_OK && (t + 1) % 4 == 0) st = lv_encoder_flush_block(enc);
            if (st != LV_OK) {
                r.failed_at = t;
                r.st_write = st;
                snprintf(r.msg, sizeof r.msg, "%s", lv_last_error());
                r.st_again = lv_encoder_write_rgb(enc, rgb, 1);
            }
        }
        r.flushed = lv_encoder_frames_flushed(enc);
        r.st_close = lv_encoder_close(enc);
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(21);
        _exit(0);
    }
    close(fds[1]);
    struct {
        long long flushed;
        int failed_at, st_write, st_again, st_close;
        char msg[512];
    } r;
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_assert_eq(got, (ssize_t)sizeof r, "the writer crashed (status %d)", status);
    cr_assert_geq(r.failed_at, 0, "the size limit was never hit");
    cr_assert_eq(r.st_write, LV_ERR_IO, "%s", r.msg);
    cr_assert_not_null(strstr(r.msg, "File too large"), "%s", r.msg);
    cr_assert_not_null(strstr(r.msg, path), "%s", r.msg);
    cr_assert_eq(r.st_again, LV_ERR_IO);
    cr_assert_eq(r.st_close, LV_ERR_IO);
    cr_assert_gt(r.flushed, 0);

    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    int count = 0, end = 0;
    while (lv_decoder_next(dec, NULL, NULL, &end) == LV_OK && !end) count++;
    lv_decoder_close(dec);
    cr_log_info("size limit hit at frame %d; %lld frames flushed before, %d decode", r.failed_at, r.flushed, count);
    cr_assert_geq(count, r.flushed, "%d frames decode, %lld were flushed", count, r.flushed);
}

Test(codec_errors, decoder_refuses_what_is_not_video) {
    char text[512], audio[512], cmd[1200];
    tmp_path(text, sizeof text, "text.mp4");
    FILE *f = fopen(text, "w");
    cr_assert_not_null(f);
    fputs("this is not a video\n", f);
    fclose(f);
    lv_decoder *dec = NULL;
    cr_assert_eq(lv_decoder_open(text, &dec), LV_ERR_FORMAT);
    cr_assert_not_null(strstr(lv_last_error(), "not a video"), "%s", lv_last_error());
    cr_assert_null(dec);

    cr_assert_eq(lv_decoder_open(LONGVK_TEST_TMP "/no_such_file.mkv", &dec), LV_ERR_IO);
    cr_assert_not_null(strstr(lv_last_error(), "No such file"), "%s", lv_last_error());

    tmp_path(audio, sizeof audio, "tone.wav");
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -y -f lavfi -i sine=d=0.1 '%s'", audio);
    cr_assert_eq(clip_run(cmd), 0, "%s", cmd);
    cr_assert_eq(lv_decoder_open(audio, &dec), LV_ERR_FORMAT);
    cr_assert_not_null(strstr(lv_last_error(), "no video stream"), "%s", lv_last_error());
}

/* The CLI reports a non-video input and usage errors with an exit status. */
Test(codec_errors, metrics_cli_refuses_non_video) {
    char text[512], err[512], cmd[2400];
    tmp_path(text, sizeof text, "notvideo.mkv");
    tmp_path(err, sizeof err, "metrics.stderr");
    FILE *f = fopen(text, "w");
    cr_assert_not_null(f);
    fputs("plain text, no frames\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' metrics '%s' --block-frames 16 > /dev/null 2> '%s'", LONGVK_CLI, text, err);
    cr_assert_eq(clip_run(cmd), 1, "%s", cmd);
    char *msg = clip_read_text(err);
    cr_assert_not_null(msg);
    cr_assert_not_null(strstr(msg, "not a video"), "%s", msg);
    cr_assert_not_null(strstr(msg, text), "%s", msg);
    free(msg);

    snprintf(cmd, sizeof cmd, "'%s' metrics '%s' > /dev/null 2> '%s'", LONGVK_CLI, text, err);
    cr_assert_eq(clip_run(cmd), 2, "missing --block-frames must be a usage error");
    msg = clip_read_text(err);
    cr_assert_not_null(strstr(msg, "--block-frames"), "%s", msg);
    free(msg);
}
