/* `longvk generate -o out.m3u8`: HLS (codec/hls.c; issue 54), on the default model, 8 s at
 * 16 fps (128 frames, blocks of 4, segments of 2 s = 32 frames), 8 burn-in blocks, libx264
 * at --crf 0: lossless in 8 bits, so every decoded frame is the encoder's input (the
 * frames in Y'CbCr 4:2:0) whatever choices x264's threads make, and equals the same run
 * written to .mkv with the same settings (libx264 alone is not deterministic run to run here).
 *
 * - while_generating_killed_and_resumed: the playlist read every 0.2 s while the run goes:
 *   at every moment it has changed, the segments it names (after its init segment) decode,
 *   and their frames are the .mkv's first frames; it is read at two moments at least with
 *   segments named. SIGKILL after block 28 (20 of the video, 80 frames): the playlist names
 *   the 2 complete segments (64 frames), all play, no EXT-X-ENDLIST. --resume (from frame
 *   64, the playlist's, not 80, the resume file's) killed after block 37: 3 segments named,
 *   the .mkv's 96 frames, each segment decoding alone to its 32. Refused, naming why, the
 *   stream untouched: --resume without the playlist, with a segment renamed in it, with a
 *   segment deleted. --resume again: EXT-X-ENDLIST, segments 00000..00003, 128 frames
 *   through the playlist, the .mkv's; the first run's init segment unchanged, no
 *   EXT-X-DISCONTINUITY, EXT-X-VERSION, EXT-X-MAP, EXT-X-TARGETDURATION >= every EXTINF;
 *   no resume file or side file left.
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
    char *raw;  /* as read */
    char *text; /* cut into lines */
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
    p->raw = strdup(p->text);
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

static void free_playlist(playlist *p) {
    free(p->text);
    free(p->raw);
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
    cr_assert(!ref || (n <= FRAMES && memcmp(v, ref, (size_t)n * FRAME_BYTES) == 0),
              "%s: the %lld frames of the %d segments named are not the .mkv's", moment, (long long)n, p->segments);
    free(v);
    return n;
}

static void clean(const char *out) {
    ts_remove_output(out, (const char *const[]){".longvk-state", ".longvk-lock", ".init.mp4", ".err", NULL});
}

/* The run with LONGVK_TEST_KILL=0:BLOCK (SIGKILL after that block), --overwrite or --resume;
 * `watch`: the playlist read every 0.2 s while it goes, checked at every change (returns
 * the moments it named segments). Ends killed, or the test fails. */
static int run_killed(const char *m3u8, const char *mode, const char *block, const uint8_t *ref, bool watch) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setenv("LONGVK_TEST_KILL", block, 1);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
        execv(LONGVK_CLI, (char *const[]){(char *)LONGVK_CLI, "generate", COMMON, (char *)mode, "-o", (char *)m3u8,
                                          NULL});
        _exit(127);
    }
    int status = 0, moments = 0, last = 0;
    const double t0 = now();
    while (waitpid(pid, &status, WNOHANG) == 0 && now() - t0 < 600) {
        playlist pl;
        if (watch && read_playlist(m3u8, &pl) && pl.segments > last) { /* a new segment named */
            last = pl.segments;
            char moment[64];
            snprintf(moment, sizeof moment, "at %.1f s, %d segments named", now() - t0, pl.segments);
            int64_t frames = check_segments(&pl, LONGVK_TEST_TMP, ref, moment);
            cr_log_info("%s: %lld frames, the .mkv's", moment, (long long)frames);
            cr_assert_eq(frames, 32 * pl.segments, "%s: each segment is 2 s (32 frames)", moment);
            cr_assert(!pl.ended, "%s: EXT-X-ENDLIST while generating", moment);
            moments++;
        }
        if (watch) free_playlist(&pl);
        usleep(200000);
    }
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the run (%s, killed after block %s): status %d",
              mode, block, status);
    return moments;
}

/* What a player needs of the playlist, and each segment on its own after the init segment:
 * it decodes to its 32 frames of the .mkv. */
static void check_playlist_properties(const playlist *p, const char *moment, const uint8_t *ref) {
    int version = 0, target = 0;
    const char *v = strstr(p->raw, "#EXT-X-VERSION:"), *t = strstr(p->raw, "#EXT-X-TARGETDURATION:");
    cr_assert(v && sscanf(v, "#EXT-X-VERSION:%d", &version) == 1 && version >= 6,
              "%s: EXT-X-VERSION (>= 6 for EXT-X-MAP)\n%s", moment, p->raw);
    cr_assert(t && sscanf(t, "#EXT-X-TARGETDURATION:%d", &target) == 1, "%s: EXT-X-TARGETDURATION\n%s", moment, p->raw);
    cr_assert(strstr(p->raw, "#EXT-X-MAP:URI=\""), "%s: EXT-X-MAP (fragmented MP4)", moment);
    cr_assert(!strstr(p->raw, "#EXT-X-DISCONTINUITY"), "%s: a discontinuity\n%s", moment, p->raw);
    for (const char *e = strstr(p->raw, "#EXTINF:"); e; e = strstr(e + 1, "#EXTINF:"))
        cr_assert_leq(atof(e + 8), (double)target, "%s: a segment longer than EXT-X-TARGETDURATION %d", moment, target);
    for (int i = 0; i < p->segments; i++) {
        playlist one = *p;
        one.segments = 1;
        one.segment[0] = p->segment[i];
        char what[96];
        snprintf(what, sizeof what, "%s, segment %d alone", moment, i);
        int64_t n;
        size_t fb;
        check_segments(&one, LONGVK_TEST_TMP, NULL, what);
        uint8_t *frames = ts_decode_all(ts_tmp("hls_joined.mp4"), &n, &fb);
        cr_assert_eq(n, 32, "%s: %lld frames", what, (long long)n);
        cr_assert(memcmp(frames, ref + (size_t)32 * i * FRAME_BYTES, (size_t)32 * FRAME_BYTES) == 0,
                  "%s: not the .mkv's frames %d..%d", what, 32 * i, 32 * i + 31);
        free(frames);
    }
}

/* --resume refused, with `message`, leaving the playlist and its files as they were. */
static void refused(const char *m3u8, const char *what, const char *message) {
    uint64_t before = ts_file_hash(m3u8, NULL);
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--resume", "-o", m3u8, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 1 && strstr(p.err, message), "%s: exit %d, expected \"%s\":\n%s", what,
              p.status, message, p.err);
    free(p.err);
    cr_assert_eq(ts_file_hash(m3u8, NULL), before, "%s: the playlist changed", what);
}

Test(hls_cli, while_generating_killed_and_resumed, .timeout = 900) {
    char mkv[700], m3u8[700]; /* (ts_tmp's buffers are reused) */
    snprintf(mkv, sizeof mkv, "%s", ts_tmp("hls_ref.mkv"));
    snprintf(m3u8, sizeof m3u8, "%s", ts_tmp("hls_live.m3u8"));
    clean(mkv), clean(m3u8);
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--codec", "libx264", "-q", "--overwrite",
                                          "-o", mkv, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 0, "the .mkv: exit %d\n%s", p.status, p.err);
    free(p.err);
    int64_t n;
    size_t fb;
    uint8_t *ref = ts_decode_all(mkv, &n, &fb);
    cr_assert_eq(n, FRAMES);

    /* killed after block 28 (20 of the video, 80 frames): 2 complete segments named (64) */
    int moments = run_killed(m3u8, "--overwrite", "0:28", ref, true);
    cr_assert_geq(moments, 2, "the playlist was read with segments at %d moments only", moments);
    playlist pl;
    cr_assert(read_playlist(m3u8, &pl));
    cr_assert(pl.segments == 2 && !pl.ended, "after SIGKILL:\n%s", pl.raw);
    cr_assert_eq(check_segments(&pl, LONGVK_TEST_TMP, ref, "after SIGKILL"), 64);
    free_playlist(&pl);
    char init[700];
    snprintf(init, sizeof init, "%s/hls_live.init.mp4", LONGVK_TEST_TMP);
    const uint64_t init_hash = ts_file_hash(init, NULL);

    /* --resume, continuing from frame 64, killed after block 37 (116 frames): the segment it
     * completed (frames 64..95) is named after the old ones */
    run_killed(m3u8, "--resume", "0:37", ref, false);
    cr_assert(read_playlist(m3u8, &pl));
    cr_assert(pl.segments == 3 && !pl.ended, "after the resumed run's SIGKILL:\n%s", pl.raw);
    cr_assert_eq(check_segments(&pl, LONGVK_TEST_TMP, ref, "after the resumed run's SIGKILL"), 96);
    check_playlist_properties(&pl, "after the resumed run's SIGKILL", ref);
    free_playlist(&pl);

    /* bad cases: each refused, naming why, the stream left as it was */
    char aside[800], seg1[700], text[700];
    snprintf(aside, sizeof aside, "%s.aside", m3u8);
    snprintf(seg1, sizeof seg1, "%s/hls_live.00001.m4s", LONGVK_TEST_TMP);
    cr_assert_eq(rename(m3u8, aside), 0);
    p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--resume", "-o", m3u8, NULL}, 600);
    cr_assert(p.status == 1 && strstr(p.err, "its playlist is not there, but its segments are"),
              "no playlist: exit %d\n%s", p.status, p.err);
    free(p.err);
    cr_assert_eq(rename(aside, m3u8), 0);
    size_t len;
    char *original = (char *)ts_slurp(m3u8, &len);
    snprintf(text, sizeof text, "%s", original);
    char *second = strstr(text, "hls_live.00001.m4s");
    cr_assert(second);
    memcpy(second, "hls_live.00009", 14); /* another segment named */
    FILE *f = fopen(m3u8, "wb");
    cr_assert(f && fputs(text, f) >= 0 && fclose(f) == 0);
    refused(m3u8, "an edited playlist", "names hls_live.00009.m4s where longvk wrote hls_live.00001.m4s");
    f = fopen(m3u8, "wb");
    cr_assert(f && fwrite(original, 1, len, f) == len && fclose(f) == 0);
    free(original);
    snprintf(aside, sizeof aside, "%s.aside", seg1);
    cr_assert_eq(rename(seg1, aside), 0);
    refused(m3u8, "a segment deleted", "hls_live.00001.m4s, which is not there");
    cr_assert_eq(rename(aside, seg1), 0);

    /* --resume again: the whole stream, the .mkv's frames, the first run's init segment */
    p = ts_spawn((const char *[]){LONGVK_CLI, "generate", COMMON, "--resume", "-q", "-o", m3u8, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 0, "--resume: exit %d\n%s", p.status, p.err);
    free(p.err);
    cr_assert(read_playlist(m3u8, &pl));
    cr_assert(pl.ended && pl.segments == 4, "the whole stream:\n%s", pl.raw);
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "hls_live.%05d.m4s", i);
        cr_assert_str_eq(pl.segment[i], want);
    }
    check_playlist_properties(&pl, "at the end", ref);
    free_playlist(&pl);
    cr_assert_eq(ts_file_hash(init, NULL), init_hash, "the init segment was rewritten");
    uint8_t *v = ts_decode_all(m3u8, &n, &fb); /* through the playlist, as a player reads it */
    cr_assert_eq(n, FRAMES, "frames through the playlist");
    cr_assert(memcmp(v, ref, (size_t)FRAMES * FRAME_BYTES) == 0, "the stream's frames are not the .mkv's");
    free(v);
    free(ref);
    const char *left[] = {".longvk-state", ".longvk-state-segment", ".resume-part"};
    for (int i = 0; i < 3; i++) {
        char b[700];
        snprintf(b, sizeof b, "%s%s", m3u8, left[i]);
        cr_assert(access(b, F_OK) != 0, "%s is left behind", b);
    }
    snprintf(init, sizeof init, "%s/hls_live.init.mp4.resume-part", LONGVK_TEST_TMP);
    cr_assert(access(init, F_OK) != 0, "%s is left behind", init);
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
