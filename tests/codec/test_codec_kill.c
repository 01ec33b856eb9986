/* Interrupt safety: a process killed with SIGKILL while writing its fourth block leaves a
 * file that decodes and holds the three blocks it flushed (fragmented mp4 and mkv). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_clips.h"

#define W 96
#define H 64
#define BLOCK 8
#define BLOCKS 5

/* The child: writes up to 5 blocks, tells the parent after flushing the third, then writes
 * half of the fourth and waits to be killed. It never returns into the test runner. */
static void child(const char *path, int notify_fd, int low_delay) {
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.low_delay = low_delay;
    lv_encoder *enc;
    if (lv_encoder_open(path, W, H, 16, &opt, &enc) != LV_OK) _exit(10);
    uint8_t rgb[W * H * 3];
    for (int b = 0; b < BLOCKS; b++) {
        int frames = b == 3 ? BLOCK / 2 : BLOCK;
        for (int i = 0; i < frames; i++) {
            clip_frame(CLIP_GRADIENT_SQUARE, W, H, b * BLOCK + i, 0, rgb);
            if (lv_encoder_write_rgb(enc, rgb, 1) != LV_OK) _exit(11);
        }
        if (b == 3) {
            /* half a block in the encoder, unflushed: tell the parent, wait for the kill */
            char c = '3';
            if (write(notify_fd, &c, 1) != 1) _exit(12);
            for (;;) pause();
        }
        if (lv_encoder_flush_block(enc) != LV_OK) _exit(13);
    }
    _exit(14); /* not reached */
}

static void killed_writer_leaves_playable_file(const char *name, int low_delay) {
    char path[512];
    snprintf(path, sizeof path, "%s/kill_%s", LONGVK_TEST_TMP, name);
    unlink(path);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        child(path, fds[1], low_delay);
    }
    close(fds[1]);
    char c = 0;
    ssize_t got = read(fds[0], &c, 1);
    close(fds[0]);
    int status = 0;
    if (got != 1) {
        waitpid(pid, &status, 0);
        cr_assert_fail("the writer died before its third block: exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    cr_assert_eq(kill(pid, SIGKILL), 0);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the writer was not killed");

    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s: %s", name, lv_last_error());
    uint8_t got_rgb[W * H * 3], want[W * H * 3];
    int count = 0;
    for (;;) {
        int end;
        lv_frame_info fi;
        cr_assert_eq(lv_decoder_next(dec, got_rgb, &fi, &end), LV_OK, "%s: %s", name, lv_last_error());
        if (end) break;
        clip_frame(CLIP_GRADIENT_SQUARE, W, H, count, 0, want);
        double psnr = clip_psnr(got_rgb, want, sizeof want);
        cr_assert_geq(psnr, 35.0, "%s: frame %d is not the frame written (PSNR %.1f dB)", name, count, psnr);
        cr_assert_leq(fabs(fi.pts_seconds - count / 16.0), 0.001, "%s: frame %d at %.4f s", name, count, fi.pts_seconds);
        count++;
    }
    lv_decoder_close(dec);
    cr_log_info("%s: %d frames survived the kill (%d flushed)", name, count, 3 * BLOCK);
    cr_assert_geq(count, 3 * BLOCK, "%s: %d frames decoded, the 3 flushed blocks hold %d", name, count, 3 * BLOCK);
    cr_assert_leq(count, 3 * BLOCK + BLOCK / 2);

    /* ffmpeg, an independent reader, decodes it without error too */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -xerror -i '%s' -f null - 2>/dev/null", path);
    cr_assert_eq(clip_run(cmd), 0, "ffmpeg cannot decode %s", path);
}

Test(codec_kill, fragmented_mp4_survives_sigkill) { killed_writer_leaves_playable_file("killed.mp4", 0); }

Test(codec_kill, mkv_survives_sigkill) { killed_writer_leaves_playable_file("killed.mkv", 0); }

/* low_delay keeps one encoder across blocks instead of restarting it: the blocks must
 * reach the file all the same */
Test(codec_kill, low_delay_mp4_survives_sigkill) { killed_writer_leaves_playable_file("killed_low_delay.mp4", 1); }
