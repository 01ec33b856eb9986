/* `longvk generate -o out.m3u8`: HLS (codec/hls.c; issue 54), on the default model, 8 s at
 * 16 fps (128 frames, blocks of 4, segments of 2 s = 32 frames), 8 burn-in blocks, libx264
 * at --crf 0: lossless in 8 bits, so every decoded frame is the encoder's input (the
 * frames in Y'CbCr 4:2:0) whatever choices x264's threads make, and equals the same run
 * written to .mkv with the same settings (libx264 alone is not deterministic run to run here).
 *
 * - while_generating_and_killed: the playlist read every 0.2 s while the run goes: at every
 *   moment it has changed, the segments it names (after its init segment) decode, and their
 *   frames are the .mkv's first frames; it is read at two moments at least with segments
 *   named. SIGKILL after block 36 (28 of the video, 112 frames): the playlist names the 3
 *   complete segments (96 frames), all play, no EXT-X-ENDLIST. --resume is refused, saying
 *   why; --overwrite makes the whole stream: EXT-X-ENDLIST, 128 frames through the playlist,
 *   the .mkv's.
 * - bad_codec: ffv1 (which fragmented MP4 cannot hold) is refused before any work. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "longvk.h"
#include "test_support.h"
#include "ts_files.h"
#include "ts_process.h"

#define PROMPT_A "two red balls bouncing on a blue background"
#define COMMON "-p", PROMPT_A, "--seconds", "8", "--burn-in-blocks", "8", "--crf", "0", "--scale", "1", "-s", "7"
#define FRAME_BYTES (32 * 32 * 3)
#define FRAMES 128

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The playlist's segments (names in order) and init segment; its text in *text (malloc'd). */
typedef struct playlist {
    char *text;
    char *init;
    char *segment[64];
    int segments;
    bool ended;
} playlist;

static bool read_playlist(const char *path, playlist *p) {
    memset(p, 0, sizeof *p);
    struct stat st;
    if (stat(path, &st) != 0) return false;
    size_t len;
    p->text = (char *)ts_slurp(path, &len);
    p->ended = strstr(p->text, "#EXT-X-ENDLIST") != NULL;
    for (char *line = strtok(p->text, "\n"); line; line = strtok(NULL, "\n")) {
        char *uri = strstr(line, "#EXT-X-MAP:URI=\"");
        if (uri) {
            p->init = uri + 16;
            *strchr(p->init, '"') = '\0';
        } else if (line[0] != '#' && line[0] && p->segments < 64)
            p->segment[p->segments++] = line;
    }
    return true;
}

/* The init segment and the named segments, concatenated (a fragmented MP4), decoded; the
 * frames must be the reference's first ones. Returns the frame count. */
static int64_t check_segments(const playlist *p, const char *dir, const uint8_t *ref, const char *moment) {
    cr_assert(p->init, "%s: no EXT-X-MAP in the playlist:\n%s", moment, p->text);
    const char *joined = ts_tmp("hls_joined.mp4");
    FILE *out = fopen(joined, "wb");
    cr_assert(out);
    for (int i = -1; i < p->segments; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, i < 0 ? p->init : p->segment[i]);
        size_t len;
        struct stat st;
        cr_assert(stat(path, &st) == 0, "%s: the playlist names %s, which is not there", moment, path);
        uint8_t *b = ts_slurp(path, &len);
        cr_assert_eq(fwrite(b, 1, len, out), len);
        free(b);
    }
    fclose(out);
    int64_t n;
    size_t fb;
    uint8_t *v = ts_decode_all(joined, &n, &fb);
    cr_assert_eq(fb, (size_t)FRAME_BYTES);
    cr_assert(n <= FRAMES && memcmp(v, ref, (size_t)n * FRAME_BYTES) == 0,
              "%s: the %lld frames of the %d segments named are not the .mkv's", moment, (long long)n, p->segments);
    free(v);
    return n;
}

static void clean(const char *out) {
    char b[700];
    remove(out);
    const char *ext[] = {".longvk-state", ".longvk-lock", ".init.mp4", ".err"};
    for (int i = 0; i < 4; i++) {
        snprintf(b, sizeof b, "%s%s", out, ext[i]);
        remove(b);
    }
}

Test(hls_cli, while_generating_and_killed, .timeout = 900) {
    const char *mkv = ts_tmp("hls_ref.mkv"), *m3u8 = ts_tmp("hls_live.m3u8");
    clean(mkv), clean(m3u8);
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--codec", "libx264", "-q", "--overwrite",
                                          "-o", mkv, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 0, "the .mkv: exit %d\n%s", p.status, p.err);
    free(p.err);
    int64_t n;
    size_t fb;
    uint8_t *ref = ts_decode_all(mkv, &n, &fb);
    cr_assert_eq(n, FRAMES);

    /* the run, killed after block 36 */
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setenv("LONGVK_TEST_KILL", "0:36", 1);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
        execv(LONGVK_CLI, (char *const[]){(char *)LONGVK_CLI, "generate", COMMON, "--overwrite", "-o", (char *)m3u8,
                                          NULL});
        _exit(127);
    }
    int status = 0, moments = 0, last = 0;
    const double t0 = now();
    while (waitpid(pid, &status, WNOHANG) == 0 && now() - t0 < 600) {
        playlist pl;
        if (read_playlist(m3u8, &pl) && pl.segments > last) { /* a new segment named */
            last = pl.segments;
            char moment[64];
            snprintf(moment, sizeof moment, "at %.1f s, %d segments named", now() - t0, pl.segments);
            int64_t frames = check_segments(&pl, LONGVK_TEST_TMP, ref, moment);
            cr_log_info("%s: %lld frames, the .mkv's", moment, (long long)frames);
            cr_assert_eq(frames, 32 * pl.segments, "%s: each segment is 2 s (32 frames)", moment);
            cr_assert(!pl.ended, "%s: EXT-X-ENDLIST while generating", moment);
            moments++;
        }
        free(pl.text);
        usleep(200000);
    }
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the run: status %d", status);
    cr_assert_geq(moments, 2, "the playlist was read with segments at %d moments only", moments);

    /* after the kill: 28 blocks of the video, 112 frames: 3 complete segments named */
    playlist pl;
    cr_assert(read_playlist(m3u8, &pl));
    cr_assert_eq(pl.segments, 3, "after SIGKILL:\n%s", pl.text);
    cr_assert(!pl.ended);
    cr_assert_eq(check_segments(&pl, LONGVK_TEST_TMP, ref, "after SIGKILL"), 96);
    free(pl.text);

    p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--resume", "-o", m3u8, NULL}, 600);
    cr_assert(p.status == 1 && strstr(p.err, "resuming an HLS stream (" LONGVK_TEST_TMP "/hls_live.m3u8) is not "
                                      "supported"), "--resume: exit %d\n%s", p.status, p.err);
    free(p.err);
    p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--overwrite", "-q", "-o", m3u8, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 0, "--overwrite: exit %d\n%s", p.status, p.err);
    free(p.err);
    cr_assert(read_playlist(m3u8, &pl));
    cr_assert(pl.ended && pl.segments == 4, "the whole stream:\n%s", pl.text);
    free(pl.text);
    uint8_t *v = ts_decode_all(m3u8, &n, &fb); /* through the playlist, as a player reads it */
    cr_assert_eq(n, FRAMES, "frames through the playlist");
    cr_assert(memcmp(v, ref, (size_t)FRAMES * FRAME_BYTES) == 0, "the stream's frames are not the .mkv's");
    free(v);
    free(ref);
}

Test(hls_cli, bad_codec, .timeout = 120) {
    const char *m3u8 = ts_tmp("hls_bad.m3u8");
    clean(m3u8);
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--codec", "ffv1", "-o", m3u8, NULL}, 120);
    cr_assert(p.status != 0 && strstr(p.err, "a .m3u8 file cannot hold ffv1 video (ffv1): choose another codec or "
                                      "container (.m3u8 takes libx264"), "exit %d\n%s", p.status, p.err);
    free(p.err);
    struct stat st;
    cr_assert(stat(m3u8, &st) != 0, "nothing written");
}
