/* Inputs that are not regular files: a FIFO given as a model, config, .npy, video or resume
 * state used to block forever (`longvk info FIFO` hung: the open waited for a writer).
 * Every reader refuses them at once with a message naming the path and what it is. The
 * timeouts turn a hang back into a failure. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk.h"
#include "test_clips.h"
#include "weights_internal.h"

static void make_fifo(char *path, size_t cap, const char *name) {
    snprintf(path, cap, "%s/special_%s", LONGVK_TEST_TMP, name);
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s", path);
}

static void expect_refused(lv_status st, const char *path, const char *kind, const char *what) {
    cr_assert_eq(st, LV_ERR_IO, "%s: %s accepted (%s)", what, path, lv_last_error());
    const char *msg = lv_last_error();
    cr_assert_not_null(strstr(msg, path), "%s: the message does not name %s: %s", what, path, msg);
    cr_assert_not_null(strstr(msg, "not a regular file"), "%s: %s", what, msg);
    cr_assert_not_null(strstr(msg, kind), "%s: the message does not say it is %s: %s", what, kind, msg);
}

Test(special_files, fifo_is_refused_by_every_reader, .timeout = 60) {
    char fifo[512];
    make_fifo(fifo, sizeof fifo, "fifo.safetensors");
    int fd = 99;
    int64_t size = 0;
    expect_refused(lv_open_regular_file(fifo, &fd, &size), fifo, "FIFO", "lv_open_regular_file");
    cr_assert_eq(fd, -1);
    expect_refused(lv_check_regular_file(fifo), fifo, "FIFO", "lv_check_regular_file");

    lv_weights *w = NULL;
    expect_refused(lv_weights_open(fifo, &w), fifo, "FIFO", "lv_weights_open");
    cr_assert_null(w);
    expect_refused(lv_safetensors_open(fifo, &w), fifo, "FIFO", "lv_safetensors_open");
    expect_refused(lv_pth_open(fifo, &w), fifo, "FIFO", "lv_pth_open");

    lv_npy a;
    expect_refused(lv_npy_read(fifo, &a), fifo, "FIFO", "lv_npy_read");
    cr_assert_null(a.data);

    lv_sana_config cfg;
    expect_refused(lv_sana_config_load(fifo, &cfg), fifo, "FIFO", "lv_sana_config_load");
    lv_sana_file *sf = NULL;
    expect_refused(lv_sana_file_open(fifo, NULL, NULL, &sf), fifo, "FIFO", "lv_sana_file_open");
    char index[512];
    make_fifo(index, sizeof index, "model.safetensors.index.json");
    expect_refused(lv_sana_file_open(index, NULL, NULL, &sf), index, "FIFO", "lv_sana_file_open (index)");

    char video[512];
    make_fifo(video, sizeof video, "fifo.mkv");
    lv_decoder *dec = NULL;
    expect_refused(lv_decoder_open(video, &dec), video, "FIFO", "lv_decoder_open");
    cr_assert_null(dec);
    lv_encoder *enc = NULL;
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = "ffv1";
    expect_refused(lv_encoder_open_resume(video, 64, 48, 16, &opt, 8, &enc), video, "FIFO", "lv_encoder_open_resume");
    cr_assert_null(enc);
}

Test(special_files, devices_and_directories_are_refused, .timeout = 60) {
    lv_weights *w = NULL;
    expect_refused(lv_weights_open("/dev/zero", &w), "/dev/zero", "character device", "lv_weights_open");
    lv_npy a;
    expect_refused(lv_npy_read("/dev/zero", &a), "/dev/zero", "character device", "lv_npy_read");
    expect_refused(lv_npy_read(LONGVK_TEST_TMP, &a), LONGVK_TEST_TMP, "directory", "lv_npy_read");
    lv_decoder *dec = NULL;
    expect_refused(lv_decoder_open("/dev/zero", &dec), "/dev/zero", "character device", "lv_decoder_open");
    /* a regular file still opens, and a missing one says so */
    int fd = -1;
    int64_t size = -1;
    char path[512];
    snprintf(path, sizeof path, "%s/special_regular.bin", LONGVK_TEST_TMP);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs("12345", f);
    fclose(f);
    cr_assert_eq(lv_open_regular_file(path, &fd, &size), LV_OK, "%s", lv_last_error());
    cr_assert_geq(fd, 0);
    cr_assert_eq(size, 5);
    char buf[8];
    cr_assert_eq(read(fd, buf, sizeof buf), 5, "the descriptor does not read (left non-blocking?)");
    close(fd);
    snprintf(path, sizeof path, "%s/special_missing.bin", LONGVK_TEST_TMP);
    unlink(path);
    cr_assert_eq(lv_open_regular_file(path, &fd, &size), LV_ERR_IO);
    cr_assert_not_null(strstr(lv_last_error(), "No such file or directory"), "%s", lv_last_error());
}

/* The CLI: `longvk info FIFO` (and `decode --latents FIFO`, `metrics FIFO`) end with the
 * message and exit status 1 instead of hanging; `timeout` makes a hang exit 124. */
Test(special_files, cli_refuses_a_fifo, .timeout = 120) {
    char fifo[512], cmd[2048], out[600];
    make_fifo(fifo, sizeof fifo, "cli_fifo");
    snprintf(out, sizeof out, "%s/special_cli.txt", LONGVK_TEST_TMP);
    const char *forms[] = {"info '%s'", "decode --vae '%s' --latents '%s' -o " LONGVK_TEST_TMP "/special_out.mkv",
                           "metrics '%s' --block-frames 4"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char args[1200];
        snprintf(args, sizeof args, forms[i], fifo, fifo);
        snprintf(cmd, sizeof cmd, "timeout 30 %s %s >'%s' 2>&1", LONGVK_CLI, args, out);
        int rc = clip_run(cmd);
        char *text = clip_read_text(out);
        cr_assert_not_null(text);
        cr_assert_eq(rc, 1, "`longvk %s` exited %d (124: it hung): %s", args, rc, text);
        cr_assert_not_null(strstr(text, "FIFO"), "`longvk %s`: %s", args, text);
        cr_assert_not_null(strstr(text, fifo), "`longvk %s`: %s", args, text);
        free(text);
    }
}
