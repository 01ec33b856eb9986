/* Resuming an interrupted video (lv_encoder_open_resume): a run stopped after its second
 * block (SIGKILL, or a clean close that also flushed part of a third block) and continued
 * from 2 blocks gives the same video as a run that never stopped: the same decoded frames
 * bit for bit with ffv1, the same packets with libx264, frames within the encoder's loss of
 * the uninterrupted ones with low_delay; the same count and timestamps in every case. The
 * old file survives every failure, including a resume that is itself killed. An HLS stream
 * continues from the segments its playlist names (hls_continues_the_named_segments). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libavformat/avformat.h>

#include "test_clips.h"

#define W 96
#define H 64
#define FPS 16
#define BLOCK 8
#define BLOCKS 5
#define FRAMES (BLOCK * BLOCKS)
#define KEEP (2 * BLOCK)
#define FRAME_BYTES ((size_t)W * H * 3)

typedef struct run_opts {
    const char *codec;
    int low_delay;
    int faststart;
    const char *extra;
    /* the frames: CLIP_NOISY where every bit must match (ffv1, packets), the smoother
     * CLIP_GRADIENT_SQUARE where a lossy encode is compared with another (x264 keeps it near
     * 40 dB from the source; CLIP_NOISY only about 30 dB, too close to a neighbouring frame) */
    clip_kind clip;
} run_opts;

/* x264 without its assembly: its output is then a function of its input alone. With the
 * AVX-512 code this machine's x264 runs by default, the output also depends on the heap's
 * previous contents (it changes with MALLOC_PERTURB_, and between two encoders of one process;
 * not with asm=AVX2 or no-asm), so two uninterrupted runs can already differ. */
#define X264_DETERMINISTIC "x264-params=no-asm=1"

static lv_encoder_options encoder_options(const run_opts *r) {
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = r->codec;
    opt.low_delay = r->low_delay;
    opt.faststart = r->faststart;
    opt.extra = r->extra;
    opt.sync_blocks = 0; /* the kills here are of processes, not of the machine */
    return opt;
}

static void tmp_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/resume_%s", LONGVK_TEST_TMP, name); }

static int exists(const char *path) { return access(path, F_OK) == 0; }

static int part_exists(const char *path) {
    char part[600];
    snprintf(part, sizeof part, "%s.resume-part", path);
    return exists(part);
}

/* Writes frames [from, to) of the test clip, flushing a block after every frame t with
 * (t + 1) % BLOCK == 0. Returns the first failing status. */
static lv_status write_frames(lv_encoder *enc, const run_opts *r, int from, int to) {
    uint8_t rgb[FRAME_BYTES];
    for (int t = from; t < to; t++) {
        clip_frame(r->clip, W, H, t, 0, rgb);
        LV_TRY(lv_encoder_write_rgb(enc, rgb, 1));
        if ((t + 1) % BLOCK == 0) LV_TRY(lv_encoder_flush_block(enc));
    }
    return LV_OK;
}

/* The uninterrupted run: every block, then close. */
static void write_uninterrupted(const char *path, const run_opts *r) {
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    unlink(path);
    cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, r, 0, FRAMES), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
}

/* An interrupted run that closed cleanly: `frames` frames, the last block partial. */
static void write_closed(const char *path, const run_opts *r, int frames) {
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    unlink(path);
    cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, r, 0, frames), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
}

/* Forks a writer, lets `work` run in it until it reports on the pipe, then SIGKILLs it. */
typedef void (*child_work)(const char *path, const run_opts *r, int notify_fd);

static void run_and_kill(child_work work, const char *path, const run_opts *r) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        work(path, r, fds[1]);
        _exit(99); /* not reached */
    }
    close(fds[1]);
    char c = 0;
    ssize_t got = read(fds[0], &c, 1);
    close(fds[0]);
    int status = 0;
    if (got != 1) {
        waitpid(pid, &status, 0);
        cr_assert_fail("the writer died before it was killed: exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    cr_assert_eq(kill(pid, SIGKILL), 0);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the writer was not killed");
}

static void notify_and_wait(int fd) {
    char c = 'k';
    if (write(fd, &c, 1) != 1) _exit(12);
    for (;;) pause();
}

/* The child of a killed first run: 2 blocks flushed, then 4 frames flushed as a partial block
 * (frames past keep_frames that the resume must drop), then 2 more unflushed. */
static void killed_first_run(const char *path, const run_opts *r, int notify_fd) {
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    if (lv_encoder_open(path, W, H, FPS, &opt, &enc) != LV_OK) _exit(10);
    if (write_frames(enc, r, 0, KEEP + 4) != LV_OK || lv_encoder_flush_block(enc) != LV_OK) _exit(11);
    if (write_frames(enc, r, KEEP + 4, KEEP + 6) != LV_OK) _exit(11);
    notify_and_wait(notify_fd);
}

/* The child of a killed resume: resumes from KEEP, writes half a block, never flushes. */
static void killed_resume(const char *path, const run_opts *r, int notify_fd) {
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    if (lv_encoder_open_resume(path, W, H, FPS, &opt, KEEP, &enc) != LV_OK) _exit(20);
    if (write_frames(enc, r, KEEP, KEEP + BLOCK / 2) != LV_OK) _exit(21);
    notify_and_wait(notify_fd);
}

/* Resumes `path` from `keep` frames and writes the rest of the clip. */
static void resume_and_finish(const char *path, const run_opts *r, int64_t keep) {
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open_resume(path, W, H, FPS, &opt, keep, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_frames_written(enc), keep);
    cr_assert_eq(lv_encoder_frames_flushed(enc), keep);
    cr_assert(part_exists(path), "the resumed file is not written beside %s", path);
    int next_boundary = (int)((keep / BLOCK + 1) * BLOCK);
    cr_assert_eq(write_frames(enc, r, (int)keep, next_boundary), LV_OK, "%s", lv_last_error());
    /* faststart plays only once finalised: it replaces the old file at close */
    cr_assert(part_exists(path) == r->faststart, "the resumed file did not replace %s at its first block", path);
    cr_assert_eq(lv_encoder_frames_flushed(enc), next_boundary);
    cr_assert_eq(write_frames(enc, r, next_boundary, FRAMES), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_frames_written(enc), FRAMES);
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
    cr_assert(!part_exists(path), "the resumed file did not replace %s at close", path);
}

/* ------------------------------------------------------------------------------------------
 * Reading results back */

typedef struct decoded {
    int n;
    uint8_t *rgb;   /* n frames */
    double pts[FRAMES + 8];
    int fps_num, fps_den;
} decoded;

static void decode_all(const char *path, decoded *d) {
    memset(d, 0, sizeof *d);
    d->rgb = malloc(FRAME_BYTES * (FRAMES + 8));
    cr_assert_not_null(d->rgb);
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    d->fps_num = lv_decoder_info(dec)->fps_num;
    d->fps_den = lv_decoder_info(dec)->fps_den;
    for (;;) {
        int end;
        lv_frame_info fi;
        cr_assert_lt(d->n, FRAMES + 8, "%s: too many frames", path);
        cr_assert_eq(lv_decoder_next(dec, d->rgb + (size_t)d->n * FRAME_BYTES, &fi, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        cr_assert_eq(fi.index, d->n);
        d->pts[d->n++] = fi.pts_seconds;
    }
    lv_decoder_close(dec);
}

/* Same count, frame rate and timestamps as the uninterrupted run, timestamps on the 1/FPS
 * grid (mkv stores whole milliseconds: 0.5 ms, plus rounding of the seconds), and frames either identical (min_psnr
 * INFINITY) or at least min_psnr dB from the uninterrupted ones from `first_lossy` on.
 * Returns the lowest PSNR met. */
static double compare_decoded(const char *name, const run_opts *r, const decoded *got, const decoded *want, int first_lossy,
                              double min_psnr) {
    cr_assert_eq(got->n, FRAMES, "%s: %d frames, the uninterrupted run has %d", name, got->n, want->n);
    cr_assert_eq(want->n, FRAMES);
    cr_assert_eq(got->fps_num, FPS, "%s: %d/%d fps", name, got->fps_num, got->fps_den);
    cr_assert_eq(got->fps_den, 1);
    cr_assert_eq(want->fps_num, FPS);
    double lowest = INFINITY;
    uint8_t source[FRAME_BYTES];
    for (int t = 0; t < FRAMES; t++) {
        cr_assert_eq(got->pts[t], want->pts[t], "%s: frame %d at %.6f s, uninterrupted at %.6f s", name, t, got->pts[t],
                     want->pts[t]);
        cr_assert_leq(fabs(got->pts[t] - (double)t / FPS), 0.0005 + 1e-9, "%s: frame %d at %.6f s", name, t, got->pts[t]);
        const uint8_t *g = got->rgb + (size_t)t * FRAME_BYTES, *w = want->rgb + (size_t)t * FRAME_BYTES;
        if (t < first_lossy || isinf(min_psnr)) {
            cr_assert(memcmp(g, w, FRAME_BYTES) == 0, "%s: frame %d differs from the uninterrupted run's", name, t);
        } else {
            double p = clip_psnr(g, w, FRAME_BYTES);
            if (p < lowest) lowest = p;
            cr_assert_geq(p, min_psnr, "%s: frame %d is %.2f dB from the uninterrupted run's", name, t, p);
        }
        /* and it is the frame that was written: closer to it than to its neighbours (the
         * clip's noise changes every frame), and within the codec's loss (x264 at crf 18
         * keeps this noisy RGB clip about 30 dB from the source, 4:2:0 losing much of the
         * chroma noise; neighbouring source frames are about 25 dB apart) */
        clip_frame(r->clip, W, H, t, 0, source);
        double ps = clip_psnr(g, source, FRAME_BYTES);
        cr_assert_geq(ps, 28.0, "%s: frame %d is %.2f dB from the frame written", name, t, ps);
        for (int n = t - 1; n <= t + 1; n += 2) {
            if (n < 0 || n >= FRAMES) continue;
            clip_frame(r->clip, W, H, n, 0, source);
            double pn = clip_psnr(g, source, FRAME_BYTES);
            cr_assert_gt(ps, pn + 2.0, "%s: frame %d is as close to frame %d (%.2f dB) as to itself (%.2f dB)", name, t, n,
                         pn, ps);
        }
    }
    return lowest;
}

static void free_decoded(decoded *d) { free(d->rgb); }

/* Demuxes both files and compares their video packets in decode order (the first `limit`,
 * or all with limit < 0): timestamps, key flag and bytes. Returns the number of packets
 * that differ; *n gets the number compared. */
static int compare_packets(const char *a, const char *b, int limit, int *n) {
    AVFormatContext *fa = NULL, *fb = NULL;
    cr_assert_eq(avformat_open_input(&fa, a, NULL, NULL), 0);
    cr_assert_eq(avformat_open_input(&fb, b, NULL, NULL), 0);
    cr_assert_geq(avformat_find_stream_info(fa, NULL), 0);
    cr_assert_geq(avformat_find_stream_info(fb, NULL), 0);
    AVPacket *pa = av_packet_alloc(), *pb = av_packet_alloc();
    int count = 0, differ = 0;
    while (limit < 0 || count < limit) {
        int ra = av_read_frame(fa, pa), rb = av_read_frame(fb, pb);
        if (ra < 0 || rb < 0) {
            cr_assert(ra < 0 && rb < 0, "%s and %s hold different numbers of packets (%d and more)", a, b, count);
            break;
        }
        count++;
        int64_t ta = av_rescale_q(pa->pts, fa->streams[0]->time_base, (AVRational){1, 90000});
        int64_t tb = av_rescale_q(pb->pts, fb->streams[0]->time_base, (AVRational){1, 90000});
        int64_t da = av_rescale_q(pa->dts, fa->streams[0]->time_base, (AVRational){1, 90000});
        int64_t db = av_rescale_q(pb->dts, fb->streams[0]->time_base, (AVRational){1, 90000});
        if (ta != tb || da != db || (pa->flags & AV_PKT_FLAG_KEY) != (pb->flags & AV_PKT_FLAG_KEY) ||
            pa->size != pb->size || memcmp(pa->data, pb->data, (size_t)pa->size) != 0)
            differ++;
        av_packet_unref(pa);
        av_packet_unref(pb);
    }
    av_packet_free(&pa);
    av_packet_free(&pb);
    avformat_close_input(&fa);
    avformat_close_input(&fb);
    *n = count;
    return differ;
}

typedef struct file_bytes {
    size_t size;
    uint8_t *data;
} file_bytes;

static file_bytes read_bytes(const char *path) {
    file_bytes f = {0, NULL};
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "cannot read %s", path);
    fseek(fp, 0, SEEK_END);
    f.size = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f.data = malloc(f.size + 1);
    cr_assert_eq(fread(f.data, 1, f.size, fp), f.size);
    fclose(fp);
    return f;
}

static void assert_unchanged(const char *path, const file_bytes *before, const char *what) {
    file_bytes now = read_bytes(path);
    cr_assert(now.size == before->size && memcmp(now.data, before->data, now.size) == 0,
              "%s changed %s (%zu bytes, was %zu)", what, path, now.size, before->size);
    free(now.data);
}

/* ------------------------------------------------------------------------------------------
 * Resume equals an uninterrupted run */

Test(codec_resume, ffv1_mkv_after_sigkill_is_bit_exact) {
    run_opts r = {"ffv1", 0, 0, NULL, CLIP_NOISY};
    char ref[512], path[512];
    tmp_path(ref, sizeof ref, "ffv1_ref.mkv");
    tmp_path(path, sizeof path, "ffv1.mkv");
    write_uninterrupted(ref, &r);
    unlink(path);
    run_and_kill(killed_first_run, path, &r);
    resume_and_finish(path, &r, KEEP);

    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    compare_decoded("ffv1", &r, &got, &want, FRAMES, INFINITY);
    /* lossless: the frames are the clip's own */
    uint8_t source[FRAME_BYTES];
    for (int t = 0; t < FRAMES; t++) {
        clip_frame(r.clip, W, H, t, 0, source);
        cr_assert(memcmp(got.rgb + (size_t)t * FRAME_BYTES, source, FRAME_BYTES) == 0, "frame %d", t);
    }
    free_decoded(&got);
    free_decoded(&want);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -xerror -i '%s' -f null - 2>/dev/null", path);
    cr_assert_eq(clip_run(cmd), 0, "ffmpeg cannot decode %s", path);
}

/* libx264 restarts its encoder at every block boundary, so the resumed blocks are encoded
 * exactly as in the uninterrupted run: the same packets, not only the same frames (with x264
 * deterministic: X264_DETERMINISTIC). */
static void x264_same_packets(const char *name, int faststart) {
    run_opts r = {NULL, 0, faststart, X264_DETERMINISTIC, CLIP_NOISY};
    char ref[512], path[512], file[256];
    snprintf(file, sizeof file, "%s_ref.mp4", name);
    tmp_path(ref, sizeof ref, file);
    snprintf(file, sizeof file, "%s.mp4", name);
    tmp_path(path, sizeof path, file);
    write_uninterrupted(ref, &r);
    write_closed(path, &r, KEEP + 4); /* closed with 4 frames of a third block flushed: dropped */
    resume_and_finish(path, &r, KEEP);

    int n = 0;
    int differ = compare_packets(path, ref, -1, &n);
    cr_log_info("%s: %d of %d packets differ from the uninterrupted run's", name, differ, n);
    cr_assert_eq(n, FRAMES);
    cr_assert_eq(differ, 0, "%s: %d of %d packets differ from the uninterrupted run's", name, differ, n);
    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    compare_decoded(name, &r, &got, &want, FRAMES, INFINITY);
    free_decoded(&got);
    free_decoded(&want);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ffmpeg -v error -xerror -i '%s' -f null - 2>/dev/null", path);
    cr_assert_eq(clip_run(cmd), 0, "ffmpeg cannot decode %s", path);
}

Test(codec_resume, x264_mp4_after_close_has_the_same_packets) { x264_same_packets("x264", 0); }

Test(codec_resume, x264_faststart_mp4_has_the_same_packets) { x264_same_packets("x264_faststart", 1); }

/* x264 as configured by default (its AVX-512 code here): the kept packets are the
 * interrupted file's own, bit for bit; the blocks encoded after the resume differ from the
 * uninterrupted run's only as much as two uninterrupted runs differ from each other. */
Test(codec_resume, x264_default_settings) {
    run_opts r = {NULL, 0, 0, NULL, CLIP_GRADIENT_SQUARE};
    char ref[512], ref2[512], path[512], copy[512];
    tmp_path(ref, sizeof ref, "x264_asm_ref.mp4");
    tmp_path(ref2, sizeof ref2, "x264_asm_ref2.mp4");
    tmp_path(path, sizeof path, "x264_asm.mp4");
    tmp_path(copy, sizeof copy, "x264_asm_interrupted.mp4");
    write_uninterrupted(ref, &r);
    write_uninterrupted(ref2, &r);
    write_closed(path, &r, KEEP + 4);
    file_bytes interrupted = read_bytes(path);
    FILE *fp = fopen(copy, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(interrupted.data, 1, interrupted.size, fp), interrupted.size);
    cr_assert_eq(fclose(fp), 0);
    free(interrupted.data);
    resume_and_finish(path, &r, KEEP);

    int n = 0;
    cr_assert_eq(compare_packets(path, copy, KEEP, &n), 0, "the kept packets are not the interrupted file's");
    cr_assert_eq(n, KEEP);
    int differ = compare_packets(path, ref, -1, &n);
    int differ_runs = compare_packets(ref2, ref, -1, &n);
    decoded got, want, want2;
    decode_all(path, &got);
    decode_all(ref, &want);
    decode_all(ref2, &want2);
    double lowest_runs = INFINITY;
    for (int t = 0; t < FRAMES; t++) {
        double p = clip_psnr(want2.rgb + (size_t)t * FRAME_BYTES, want.rgb + (size_t)t * FRAME_BYTES, FRAME_BYTES);
        if (p < lowest_runs) lowest_runs = p;
    }
    /* Bound: 40 dB. Measured here: identical, or about 55 dB (YUV) where x264 differs from
     * run to run; a neighbouring frame is under 25 dB away */
    double lowest = compare_decoded("x264 default", &r, &got, &want, 0, 40.0);
    cr_log_info("x264 default: resumed vs uninterrupted: %d of %d packets differ, lowest PSNR %.2f dB; two "
                "uninterrupted runs: %d packets differ, lowest PSNR %.2f dB",
                differ, n, lowest, differ_runs, lowest_runs);
    free_decoded(&got);
    free_decoded(&want);
    free_decoded(&want2);
}

/* low_delay keeps one encoder across blocks; the resumed one starts with a keyframe the
 * uninterrupted run does not have, so frames from KEEP on are another encode of the same
 * source. Bound: 40 dB from the uninterrupted frames (crf 18 on this noisy clip keeps each
 * encode about 40-45 dB from the source; the two encodes differ by less). */
Test(codec_resume, low_delay_mp4_after_sigkill) {
    run_opts r = {NULL, 1, 0, NULL, CLIP_GRADIENT_SQUARE};
    char ref[512], path[512];
    tmp_path(ref, sizeof ref, "low_delay_ref.mp4");
    tmp_path(path, sizeof path, "low_delay.mp4");
    write_uninterrupted(ref, &r);
    unlink(path);
    run_and_kill(killed_first_run, path, &r);
    resume_and_finish(path, &r, KEEP);
    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    double lowest = compare_decoded("low_delay", &r, &got, &want, KEEP, 40.0);
    cr_log_info("low_delay: frames from %d on are at least %.2f dB from the uninterrupted run's", KEEP, lowest);
    free_decoded(&got);
    free_decoded(&want);
}

/* With low_delay nothing is reordered, so a resume may cut after any frame. */
Test(codec_resume, low_delay_resumes_inside_a_block) {
    run_opts r = {NULL, 1, 0, NULL, CLIP_GRADIENT_SQUARE};
    char ref[512], path[512];
    tmp_path(ref, sizeof ref, "low_delay_mid_ref.mp4");
    tmp_path(path, sizeof path, "low_delay_mid.mp4");
    write_uninterrupted(ref, &r);
    write_closed(path, &r, KEEP + 6);
    resume_and_finish(path, &r, KEEP + 3);
    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    double lowest = compare_decoded("low_delay_mid", &r, &got, &want, KEEP + 3, 40.0);
    cr_log_info("low_delay, resumed at frame %d: at least %.2f dB from the uninterrupted run's", KEEP + 3, lowest);
    free_decoded(&got);
    free_decoded(&want);
}

/* A resume killed before its first block leaves the old file as it was, resumable again. */
Test(codec_resume, killed_resume_loses_nothing) {
    run_opts r = {"ffv1", 0, 0, NULL, CLIP_NOISY};
    char ref[512], path[512];
    tmp_path(ref, sizeof ref, "again_ref.mkv");
    tmp_path(path, sizeof path, "again.mkv");
    write_uninterrupted(ref, &r);
    write_closed(path, &r, KEEP + 4);
    file_bytes before = read_bytes(path);
    run_and_kill(killed_resume, path, &r);
    assert_unchanged(path, &before, "a killed resume");
    cr_assert(part_exists(path), "the killed resume left no partial file (was it written elsewhere?)");

    /* and one that gives up (lv_encoder_abort) removes its partial file */
    lv_encoder_options opt = encoder_options(&r);
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open_resume(path, W, H, FPS, &opt, KEEP, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, &r, KEEP, KEEP + 3), LV_OK, "%s", lv_last_error());
    lv_encoder_abort(enc);
    assert_unchanged(path, &before, "an aborted resume");
    cr_assert(!part_exists(path), "an aborted resume left its partial file");
    free(before.data);

    resume_and_finish(path, &r, KEEP);
    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    compare_decoded("resumed twice", &r, &got, &want, FRAMES, INFINITY);
    free_decoded(&got);
    free_decoded(&want);
}

/* Closing right after the resume keeps exactly keep_frames frames. */
Test(codec_resume, close_without_new_frames_truncates_to_keep) {
    run_opts r = {"ffv1", 0, 0, NULL, CLIP_NOISY};
    char path[512];
    tmp_path(path, sizeof path, "truncate.mkv");
    write_closed(path, &r, KEEP + 4);
    lv_encoder_options opt = encoder_options(&r);
    opt.sync_blocks = 1; /* the commit syncs the file and its directory */
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open_resume(path, W, H, FPS, &opt, KEEP, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
    cr_assert(!part_exists(path));
    decoded got;
    decode_all(path, &got);
    cr_assert_eq(got.n, KEEP);
    free_decoded(&got);
}

/* Byte offset of the `index`-th video packet (decode order) in `path`, and its size. */
static int64_t packet_offset(const char *path, int index, int *size) {
    AVFormatContext *f = NULL;
    cr_assert_eq(avformat_open_input(&f, path, NULL, NULL), 0);
    cr_assert_geq(avformat_find_stream_info(f, NULL), 0);
    AVPacket *p = av_packet_alloc();
    int64_t pos = -1;
    for (int i = 0; pos < 0 && av_read_frame(f, p) >= 0; i++) {
        if (i == index) {
            pos = p->pos;
            *size = p->size;
        }
        av_packet_unref(p);
    }
    av_packet_free(&p);
    avformat_close_input(&f);
    cr_assert_geq(pos, 0, "%s has no packet %d", path, index);
    return pos;
}

/* A writer killed while its file was half way through writing a block leaves a truncated
 * packet: dropped with the rest of that block; if it is one of the frames to keep, refused. */
static void truncated(const char *name, const run_opts *r) {
    char ref[512], path[512], file[256];
    snprintf(file, sizeof file, "trunc_ref_%s", name);
    tmp_path(ref, sizeof ref, file);
    snprintf(file, sizeof file, "trunc_%s", name);
    tmp_path(path, sizeof path, file);
    write_uninterrupted(ref, r);
    /* cut in the middle of packet KEEP + 1 (the partial third block) */
    write_closed(path, r, KEEP + 4);
    int size = 0;
    int64_t pos = packet_offset(path, KEEP + 1, &size);
    cr_assert_eq(truncate(path, pos + size / 2), 0);
    resume_and_finish(path, r, KEEP);
    decoded got, want;
    decode_all(path, &got);
    decode_all(ref, &want);
    compare_decoded(name, r, &got, &want, FRAMES, INFINITY);
    free_decoded(&got);
    free_decoded(&want);
    /* cut in the middle of packet 5: fewer whole frames than the 16 to keep */
    write_closed(path, r, KEEP + 4);
    pos = packet_offset(path, 5, &size);
    cr_assert_eq(truncate(path, pos + size / 2), 0);
    file_bytes before = read_bytes(path);
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc;
    lv_status st = lv_encoder_open_resume(path, W, H, FPS, &opt, KEEP, &enc);
    cr_log_info("%s cut in frame 5: %s", name, lv_last_error());
    cr_assert_neq(st, LV_OK, "%s: resumed from a file cut in frame 5", name);
    assert_unchanged(path, &before, "a refused resume");
    cr_assert(!part_exists(path));
    free(before.data);
}

Test(codec_resume, truncated_ffv1_mkv) {
    run_opts r = {"ffv1", 0, 0, NULL, CLIP_NOISY};
    truncated("ffv1.mkv", &r);
}

Test(codec_resume, truncated_x264_mp4) {
    run_opts r = {NULL, 0, 0, X264_DETERMINISTIC, CLIP_NOISY};
    truncated("x264.mp4", &r);
}

/* ------------------------------------------------------------------------------------------
 * Refusals: each leaves the old file as it was and no partial file */

static void expect_refusal(const char *path, const run_opts *r, int w, int h, double fps, int64_t keep,
                           lv_status want, const char *needle1, const char *needle2) {
    file_bytes before = {0, NULL};
    int had_file = exists(path);
    if (had_file) before = read_bytes(path);
    lv_encoder_options opt = encoder_options(r);
    lv_encoder *enc = (lv_encoder *)&opt; /* must be set to NULL */
    lv_status st = lv_encoder_open_resume(path, w, h, fps, &opt, keep, &enc);
    const char *msg = lv_last_error();
    cr_log_info("refused: %s", msg);
    cr_assert_eq(st, want, "status %d, expected %d: %s", st, want, msg);
    cr_assert_null(enc);
    cr_assert(strstr(msg, path), "the message does not name the file: %s", msg);
    if (needle1) cr_assert(strstr(msg, needle1), "the message does not say '%s': %s", needle1, msg);
    if (needle2) cr_assert(strstr(msg, needle2), "the message does not say '%s': %s", needle2, msg);
    cr_assert(!part_exists(path), "a refused resume left a partial file");
    if (had_file) {
        assert_unchanged(path, &before, "a refused resume");
        free(before.data);
    } else {
        cr_assert(!exists(path), "a refused resume created %s", path);
    }
}

Test(codec_resume, refuses_what_does_not_match) {
    char path[512], mp4[512], missing[512];
    tmp_path(path, sizeof path, "err.mkv");
    tmp_path(mp4, sizeof mp4, "err.mp4");
    tmp_path(missing, sizeof missing, "err_missing.mkv");
    run_opts ffv1 = {"ffv1", 0, 0, NULL, CLIP_NOISY}, x264 = {NULL, 0, 0, NULL, CLIP_NOISY},
             x264_mkv = {"libx264", 0, 0, NULL, CLIP_NOISY}, low_delay = {NULL, 1, 0, NULL, CLIP_NOISY};
    write_closed(path, &ffv1, KEEP + 4);
    write_closed(mp4, &x264, KEEP);
    unlink(missing);

    expect_refusal(missing, &ffv1, W, H, FPS, KEEP, LV_ERR_IO, "no video", NULL);
    expect_refusal(path, &ffv1, 64, 64, FPS, KEEP, LV_ERR_INVALID, "96x64", "64x64");
    expect_refusal(path, &x264_mkv, W, H, FPS, KEEP, LV_ERR_INVALID, "ffv1", "h264");
    expect_refusal(path, &ffv1, W, H, 24, KEEP, LV_ERR_INVALID, "16 fps", "24 fps");
    expect_refusal(path, &ffv1, W, H, FPS, KEEP + 5, LV_ERR_INVALID, "holds 20 frames", "21");
    expect_refusal(mp4, &low_delay, W, H, FPS, KEEP, LV_ERR_INVALID, "other settings", NULL);
    expect_refusal(mp4, &x264, W, H, FPS, KEEP + 1, LV_ERR_INVALID, "holds 16 frames", "17");
}

/* libx264 reorders frames inside a block: a cut that separates a frame from one it needs is
 * refused. Where such cuts are is found independently, from the packets' decode order. */
Test(codec_resume, x264_refuses_a_cut_inside_a_group_of_pictures) {
    run_opts r = {NULL, 0, 0, NULL, CLIP_NOISY};
    char path[512];
    tmp_path(path, sizeof path, "gop.mp4");
    write_closed(path, &r, 3 * BLOCK);
    /* frame index of every packet, in decode order */
    int64_t frame[3 * BLOCK];
    int n = 0;
    AVFormatContext *f = NULL;
    cr_assert_eq(avformat_open_input(&f, path, NULL, NULL), 0);
    cr_assert_geq(avformat_find_stream_info(f, NULL), 0);
    AVPacket *p = av_packet_alloc();
    AVStream *st = f->streams[0];
    while (av_read_frame(f, p) >= 0) {
        cr_assert_lt(n, 3 * BLOCK);
        frame[n++] = av_rescale_q(p->pts - st->start_time, st->time_base, (AVRational){1, FPS});
        av_packet_unref(p);
    }
    av_packet_free(&p);
    avformat_close_input(&f);
    cr_assert_eq(n, 3 * BLOCK);
    int refused = 0;
    for (int keep = KEEP + 1; keep < 3 * BLOCK; keep++) {
        int bad = 0, past = 0;
        for (int i = 0; i < n; i++) {
            if (frame[i] >= keep) past = 1;
            else if (past) bad = 1;
        }
        if (!bad) continue;
        expect_refusal(path, &r, W, H, FPS, keep, LV_ERR_INVALID, "not where a block", NULL);
        refused++;
    }
    cr_log_info("x264: %d of %d cuts inside the third block are refused", refused, BLOCK - 1);
    cr_assert_gt(refused, 0, "x264 reordered no frame in the third block: the test shows nothing");
}

/* HLS (.m3u8): 96 frames, blocks of 8, segments of 2 s (32 frames), libx264 at crf 0
 * (lossless: the decoded frames are the 4:2:0 input's whatever the encoder's choices). A
 * writer aborted after 80 frames (no trailer, as a kill) leaves a playlist naming 2
 * segments, 64 frames; a playlist whose EXTINF says 1 s for a 32-frame segment is refused,
 * naming the segment; --resume from 64 gives 3 segments numbered on, EXT-X-ENDLIST, no
 * EXT-X-DISCONTINUITY, the first run's init segment, and the uninterrupted stream's frames
 * and timestamps. */
enum { HLS_FRAMES = 96 };

/* Every frame through the playlist (FFmpeg's hls reader), each at its index's time. */
static uint8_t *decode_hls(const char *path) {
    uint8_t *rgb = malloc(FRAME_BYTES * (HLS_FRAMES + 1));
    cr_assert_not_null(rgb);
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    int n = 0;
    for (;;) {
        int end;
        lv_frame_info fi;
        cr_assert_leq(n, HLS_FRAMES, "%s: too many frames", path);
        cr_assert_eq(lv_decoder_next(dec, rgb + (size_t)n * FRAME_BYTES, &fi, &end), LV_OK, "%s", lv_last_error());
        if (end) break;
        cr_assert_eq(fi.index, n);
        cr_assert_float_eq(fi.pts_seconds, (double)n / FPS, 1e-6, "%s: frame %d at %.6f s", path, n, fi.pts_seconds);
        n++;
    }
    lv_decoder_close(dec);
    cr_assert_eq(n, HLS_FRAMES, "%s: %d frames", path, n);
    return rgb;
}

Test(codec_resume, hls_continues_the_named_segments) {
    const run_opts r = {.codec = "libx264", .clip = CLIP_NOISY};
    lv_encoder_options opt = encoder_options(&r);
    opt.crf = 0;
    char ref[400], path[400], init[700];
    tmp_path(ref, sizeof ref, "hls_ref.m3u8");
    tmp_path(path, sizeof path, "hls.m3u8");
    snprintf(init, sizeof init, "%s/resume_hls.init.mp4", LONGVK_TEST_TMP);
    lv_encoder *enc;
    cr_assert_eq(lv_encoder_open(ref, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, &r, 0, HLS_FRAMES), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());

    unlink(path);
    cr_assert_eq(lv_encoder_open(path, W, H, FPS, &opt, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, &r, 0, 80), LV_OK, "%s", lv_last_error());
    lv_encoder_abort(enc);
    int64_t named = -1;
    cr_assert_eq(lv_hls_named_frames(path, FPS, &named), LV_OK, "%s", lv_last_error());
    cr_assert_eq(named, 64);
    file_bytes before = read_bytes(path), init_before = read_bytes(init);

    /* an edited playlist: refused, nothing written */
    char *edited = malloc(before.size + 1);
    cr_assert_not_null(edited);
    memcpy(edited, before.data, before.size);
    edited[before.size] = 0;
    char *second = strstr(strstr(edited, "#EXTINF:2.000000,") + 1, "#EXTINF:2.000000,");
    cr_assert_not_null(second);
    memcpy(second, "#EXTINF:1.000000,", 17);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(edited, 1, before.size, f) == before.size && fclose(f) == 0);
    cr_assert_eq(lv_hls_named_frames(path, FPS, &named), LV_OK, "%s", lv_last_error());
    cr_assert_eq(named, 48);
    cr_assert_neq(lv_encoder_open_resume(path, W, H, FPS, &opt, 48, &enc), LV_OK);
    cr_assert(strstr(lv_last_error(), "segment resume_hls.00001.m4s holds 32 frames, its playlist says 16"), "%s",
              lv_last_error());
    f = fopen(path, "wb");
    cr_assert(f && fwrite(before.data, 1, before.size, f) == before.size && fclose(f) == 0);
    free(edited);
    /* keep_frames other than the frames named: refused */
    cr_assert_neq(lv_encoder_open_resume(path, W, H, FPS, &opt, 72, &enc), LV_OK);
    cr_assert(strstr(lv_last_error(), "its playlist names 64 frames (2 segments), the resume state holds 72"), "%s",
              lv_last_error());
    assert_unchanged(path, &before, "after the refusals");

    cr_assert_eq(lv_encoder_open_resume(path, W, H, FPS, &opt, 64, &enc), LV_OK, "%s", lv_last_error());
    cr_assert_eq(write_frames(enc, &r, 64, HLS_FRAMES), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_encoder_close(enc), LV_OK, "%s", lv_last_error());
    assert_unchanged(init, &init_before, "the init segment");
    file_bytes after = read_bytes(path);
    char *text = strndup((const char *)after.data, after.size);
    cr_assert(strstr(text, "resume_hls.00002.m4s\n#EXT-X-ENDLIST\n") && !strstr(text, "DISCONTINUITY") &&
              strstr(text, "#EXT-X-MAP:URI=\"resume_hls.init.mp4\""), "%s", text);
    free(text);
    cr_assert(!part_exists(path), "the muxer's own playlist is left");

    uint8_t *got = decode_hls(path), *want = decode_hls(ref);
    cr_assert(memcmp(got, want, FRAME_BYTES * HLS_FRAMES) == 0, "the continued stream's frames differ");
    free(got);
    free(want);
    free(before.data);
    free(init_before.data);
    free(after.data);
}
