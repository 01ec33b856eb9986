/* `longvk generate` through the binary, interrupted (issue 44):
 *
 * - progress_eta_and_ctrl_c: with stderr not a terminal the burn-in prints progress lines
 *   too (throttled, not one per block); the first ETA is within a factor 2 of the time the
 *   run really took after it (the first block takes five times the passes of a later one
 *   and compiles every kernel: counted per block it was 10-15 times too long); Ctrl-C in
 *   the burn-in is answered at once ("stopping ...") and the run stops after that block,
 *   not after the burn-in, leaving no video and a resume file that --resume completes with
 *   the uninterrupted run's frames.
 * - sigkill_anywhere: SIGKILL at 20 moments spread over the start, the burn-in and the
 *   written blocks (anchored to the run's own progress, so the phases are hit whatever the
 *   machine's speed): after every kill the output path holds nothing or a playable video
 *   that is a prefix of the uninterrupted run (decoded frames compared), with a resume
 *   file beside it; --resume completes the video bit for bit (ffv1). The moments come in
 *   5 chains of 4, which saves a process start (2-5 s here) per moment: a fresh run killed
 *   in its start or burn-in, its --resume killed in its own start or first blocks, two
 *   more --resume runs killed among the blocks left, then a --resume to the end, which
 *   must equal the uninterrupted run; so every kill is followed by resumes that complete
 *   the video, and kills of resumed runs are covered too. The resumed runs' summaries must
 *   count this run's frames and time apart from the kept ones. Under AddressSanitizer
 *   (about 3 times slower) 3 chains, 12 moments. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
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

#define PROMPT "two red balls bouncing on a blue background"

#define KILLS_PER_CHAIN 4
#if defined(__SANITIZE_ADDRESS__)
#define KILL_CHAINS 3
#else
#define KILL_CHAINS 5
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

/* A running `longvk generate`: its stderr read as it comes, each line's arrival time kept. */
#define MAX_LINES 256
typedef struct proc {
    pid_t pid;
    int fd;
    double t0;
    char text[65536];
    size_t len;
    size_t line_begin; /* where the line being read starts in text */
    double line_time[MAX_LINES];
    int lines;
    int status; /* waitpid's, once finished */
    bool done;
} proc;

static void proc_start(proc *p, const char *out, const char *const *extra) {
    memset(p, 0, sizeof *p);
    const char *argv[64] = {LONGVK_CLI, "generate", "-p", PROMPT, "-o", out, "--codec", "ffv1", "--scale", "1", "-s",
                            "5", "--parallel-cfg", "off"};
    int n = 14;
    for (int i = 0; extra[i]; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    p->t0 = now();
    p->pid = fork();
    cr_assert_geq(p->pid, 0);
    if (p->pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(LONGVK_CLI, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
}

/* Reads what stderr has until `deadline` (absolute), or until a line count is reached, or
 * end of file. Returns false at end of file. */
static bool proc_read(proc *p, double deadline, int until_lines) {
    while (p->lines < until_lines || until_lines < 0) {
        double left = deadline - now();
        if (left <= 0) return true;
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char buf[4096];
        ssize_t got = read(p->fd, buf, sizeof buf);
        if (got <= 0) return false;
        double t = now();
        for (ssize_t i = 0; i < got; i++) {
            if (p->len + 1 < sizeof p->text) p->text[p->len++] = buf[i];
            if (buf[i] != '\n') continue;
            /* the line that says what the run will do, before any work, is no progress line: dropped */
            if (strncmp(p->text + p->line_begin, "generating ", 11) == 0) {
                p->len = p->line_begin;
                continue;
            }
            p->line_begin = p->len;
            if (p->lines < MAX_LINES) p->line_time[p->lines++] = t - p->t0;
        }
        p->text[p->len] = 0;
    }
    return true;
}

/* Reads to the end and waits for the process. */
static void proc_finish(proc *p) {
    while (proc_read(p, now() + 600, -1)) {
    }
    close(p->fd);
    cr_assert_eq(waitpid(p->pid, &p->status, 0), p->pid);
    p->done = true;
}

static int exit_code(const proc *p) { return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 128 + WTERMSIG(p->status); }

/* The i-th line of stderr (0-based) into buf. */
static const char *line_at(const proc *p, int i, char *buf, size_t size) {
    const char *s = p->text;
    for (int k = 0; k < i && s; k++) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return "";
    size_t n = strcspn(s, "\n");
    if (n >= size) n = size - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

/* The video, its resume file, and what a kill can leave beside them: the temporary video
 * (OUT.resume-part) and a resume file's temporary copy (OUT.longvk-state.tmp-XXXXXX,
 * lv_safetensors_write's, left by a kill while it was written). */
static void remove_outputs(const char *out) {
    char path[1200];
    unlink(out);
    snprintf(path, sizeof path, "%s.longvk-state", out);
    unlink(path);
    snprintf(path, sizeof path, "%s.resume-part", out);
    unlink(path);
    const char *slash = strrchr(out, '/');
    char dir[600], prefix[600];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
    snprintf(prefix, sizeof prefix, "%s.longvk-state.tmp-", slash + 1);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
}

/* The video at `out` must equal the first `want` frames of the reference (all of them
 * when want < 0). */
static void expect_frames(const char *out, const uint8_t *ref, int64_t ref_frames, int64_t want, const char *what) {
    int64_t n;
    size_t fb;
    uint8_t *got = ts_decode_all(out, &n, &fb);
    if (want >= 0) cr_assert_eq(n, want, "%s: %lld frames, %lld expected", what, (long long)n, (long long)want);
    cr_assert(n >= 1 && n <= ref_frames, "%s: %lld frames (the run makes %lld)", what, (long long)n,
              (long long)ref_frames);
    for (int64_t f = 0; f < n; f++)
        cr_assert(memcmp(got + (size_t)f * fb, ref + (size_t)f * fb, fb) == 0,
                  "%s: frame %lld differs from the uninterrupted run's", what, (long long)f);
    free(got);
}

/* A summary line of a resumed run: this run's frames and speed, apart from the kept ones. */
static int resumed_summaries;
static void check_summary(const proc *p, int64_t total) {
    const char *w = strstr(p->text, "wrote ");
    cr_assert_not_null(w, "no summary:\n%s", p->text);
    const char *r = strstr(w, " kept from the interrupted run and ");
    long long frames, kept, made;
    double secs, fps;
    if (!r) { /* nothing was kept: the plain summary, which must be consistent too */
        cr_assert_eq(sscanf(strstr(w, ": ") + 2, "%lld frames in %lf s (%lf frames/s", &frames, &secs, &fps), 3,
                     "%s", w);
        cr_assert_eq(frames, total);
        made = frames;
    } else {
        cr_assert_eq(sscanf(strstr(w, ": ") + 2, "%lld frames, %lld kept from the interrupted run and %lld made in "
                            "%lf s (%lf frames/s", &frames, &kept, &made, &secs, &fps), 5, "%s", w);
        cr_assert_eq(frames, total, "%s", w);
        cr_assert(kept > 0 && kept + made == frames, "%s", w);
        resumed_summaries++;
    }
    if (made == 0) return; /* resumed with nothing left to make: no speed to check */
    /* frames/s is this run's frames over this run's time (both printed to 0.1) */
    cr_assert(secs > 0, "%s", w);
    double bound = 0.05 + (double)made * 0.05 / (secs * (secs - 0.05 > 0.01 ? secs - 0.05 : 0.01)) + 1e-9;
    cr_assert(fabs(fps - (double)made / secs) <= bound, "%s: %lld frames in %.1f s is not %.1f frames/s", w, made,
              secs, fps);
}

/* ------------------------------------------------------------------------------------------ */

Test(generate_cli, progress_eta_and_ctrl_c, .timeout = 600) {
    const char *out = LONGVK_TEST_TMP "/gcli_eta.mkv";
    const char *const args[] = {"--frames", "8", "--burn-in-blocks", "30", NULL};
    const char *const resume[] = {"--frames", "8", "--burn-in-blocks", "30", "--resume", NULL};
    const int blocks = 32; /* 30 burn-in blocks, then 2 of 4 frames */
    remove_outputs(out);
    proc p;
    proc_start(&p, out, args);
    proc_finish(&p);
    cr_assert_eq(exit_code(&p), 0, "%s", p.text);
    double end = now() - p.t0;

    /* progress in the burn-in, not a line per block */
    char line[512];
    int burn_lines = 0;
    for (int i = 0; i < p.lines; i++)
        if (strncmp(line_at(&p, i, line, sizeof line), "burn-in block ", 14) == 0) burn_lines++;
    cr_log_info("%d burn-in progress lines; stderr:\n%s", burn_lines, p.text);
    double burn_seconds = 0;
    for (int i = 0; i < p.lines; i++) /* when the first written block's line came */
        if (strncmp(line_at(&p, i, line, sizeof line), "block ", 6) == 0) {
            burn_seconds = p.line_time[i] - p.line_time[0];
            break;
        }
    cr_assert_gt(burn_seconds, 0, "%s", p.text);
    double block = burn_seconds / 29; /* blocks 2 .. 30 of the burn-in, then block 31 */
    /* a line at the first block, then one at the end of a block once 3 s have passed */
    cr_assert_geq(burn_lines, (int)((burn_seconds - block) / (3.0 + block)), "%.1f s of burn-in with %d lines",
                  burn_seconds, burn_lines);
    cr_assert_geq(burn_lines, 2, "the burn-in (%.1f s) must show progress after its first block", burn_seconds);
    cr_assert_lt(burn_lines, blocks - 2, "burn-in progress is throttled, not a line per block");

    /* the first ETA against the time the run took after it */
    const char *first = line_at(&p, 0, line, sizeof line);
    const char *e = strstr(first, "ETA ");
    cr_assert_not_null(e, "%s", first);
    int m, s;
    cr_assert_eq(sscanf(e, "ETA %d:%d", &m, &s), 2, "%s", first);
    double eta = 60.0 * m + s, actual = end - p.line_time[0];
    cr_log_info("first ETA %.0f s, the run took %.1f s more", eta, actual);
    cr_assert(eta >= 0.5 * actual - 1 && eta <= 2 * actual + 1,
              "first ETA %.0f s, but the run took %.1f s after it (\"%s\")", eta, actual, first);
    check_summary(&p, 8);
    int64_t ref_frames;
    size_t fb;
    uint8_t *ref = ts_decode_all(out, &ref_frames, &fb);
    cr_assert_eq(ref_frames, 8);

    /* Ctrl-C after the first burn-in block: answered at once, stopped within a block */
    remove_outputs(out);
    proc_start(&p, out, args);
    proc_read(&p, now() + 300, 1);
    cr_assert_geq(p.lines, 1, "no progress line: %s", p.text);
    double sent = now();
    cr_assert_eq(kill(p.pid, SIGINT), 0);
    proc_finish(&p);
    double took = now() - sent;
    cr_assert_eq(exit_code(&p), 130, "%s", p.text);
    cr_assert_not_null(strstr(p.text, "stopping after the current block"), "%s", p.text);
    cr_assert_not_null(strstr(p.text, "interrupted in the burn-in after block"), "%s", p.text);
    cr_assert_not_null(strstr(p.text, "--resume"), "%s", p.text);
    /* the current block, then closing: a few blocks' time at most, where the rest of the
     * burn-in (28 blocks) would take 28 */
    cr_assert_lt(took, 5 * block + 1.0, "Ctrl-C took %.1f s to stop the run (a block takes %.2f s)", took, block);
    cr_assert(!exists(out), "no frame was written: no video at %s", out);
    cr_assert(exists(LONGVK_TEST_TMP "/gcli_eta.mkv.longvk-state"), "the resume file holds the burn-in made");
    proc_start(&p, out, resume);
    proc_finish(&p);
    cr_assert_eq(exit_code(&p), 0, "%s", p.text);
    check_summary(&p, 8);
    expect_frames(out, ref, ref_frames, ref_frames, "resumed after Ctrl-C in the burn-in");
    cr_assert(!exists(LONGVK_TEST_TMP "/gcli_eta.mkv.longvk-state"), "a finished run leaves no resume file");
    free(ref);
}

/* Where a kill lands, anchored to the run's own progress: `at_start` seconds after the
 * process started (when > 0), else `delay` seconds after the first progress line that
 * shows at least `frames` frames written (frames 0: the first line, the first block made
 * with every kernel compiled; a written block prints a line each here). */
typedef struct moment {
    double at_start;
    int frames;
    double delay;
} moment;

/* Reads lines until one shows at least `frames` frames; false at end of file. */
static bool wait_frames(proc *p, int frames) {
    char line[512];
    for (int seen = 0;;) {
        while (seen < p->lines) {
            const char *f = strstr(line_at(p, seen++, line, sizeof line), " frames ");
            long long n;
            if (f && sscanf(f, " frames %lld/", &n) == 1 && n >= frames) return true;
        }
        if (!proc_read(p, now() + 300, p->lines + 1)) return false;
    }
}

/* Starts a run and kills it at the moment, unless it finishes first (then it must have
 * succeeded); returns whether it was killed. */
static bool run_and_kill(proc *p, const char *out, const char *const *args, moment m) {
    proc_start(p, out, args);
    if (m.at_start > 0) proc_read(p, p->t0 + m.at_start, -1);
    else if (wait_frames(p, m.frames)) proc_read(p, now() + m.delay, -1);
    bool killed = kill(p->pid, SIGKILL) == 0;
    proc_finish(p);
    killed = killed && WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGKILL;
    if (!killed) cr_assert_eq(exit_code(p), 0, "a run not killed must succeed: %s", p->text);
    return killed;
}

/* What a killed run left: nothing at `out`, or a playable prefix of the reference with a
 * resume file. Returns the frames there (0: nothing). */
static int64_t check_left(const char *out, const uint8_t *ref, int64_t ref_frames, const char *what) {
    char state[600];
    snprintf(state, sizeof state, "%s.longvk-state", out);
    if (!exists(out)) return 0;
    int64_t n;
    size_t fb;
    free(ts_decode_all(out, &n, &fb));
    cr_assert_geq(n, 1, "%s: %s exists but holds no frame", what, out);
    expect_frames(out, ref, ref_frames, n, what);
    cr_assert(exists(state) || n == ref_frames, "%s: a video of %lld frames without a resume file", what,
              (long long)n);
    return n;
}

Test(generate_cli, sigkill_anywhere, .timeout = 900) {
    const char *out = LONGVK_TEST_TMP "/gcli_kill.mkv";
    const char *const args[] = {"--seconds", "2", "--burn-in-blocks", "4", NULL};
    const char *const resume[] = {"--seconds", "2", "--burn-in-blocks", "4", "--resume", NULL};
    remove_outputs(out);
    proc p;
    proc_start(&p, out, args);
    proc_finish(&p);
    cr_assert_eq(exit_code(&p), 0, "%s", p.text);
    /* the phases of the uninterrupted run, from its progress lines: the first block (the
     * burn-in's first), the first written block, the end */
    char line[512];
    double t_first = p.line_time[0], t_written = 0, t_end = now() - p.t0;
    for (int i = 0; i < p.lines; i++)
        if (strncmp(line_at(&p, i, line, sizeof line), "block ", 6) == 0) {
            t_written = p.line_time[i];
            break;
        }
    cr_assert_gt(t_written, t_first, "%s", p.text);
    int64_t ref_frames;
    size_t fb;
    uint8_t *ref = ts_decode_all(out, &ref_frames, &fb);
    cr_assert_eq(ref_frames, 32);
    cr_log_info("uninterrupted: first block at %.2f s, first written block at %.2f s, end at %.2f s", t_first,
                t_written, t_end);

    /* Each chain: a fresh run killed in its start (model, device, kernels: before any block)
     * or its burn-in; its --resume killed in its own start (reading the resume file, copying
     * the kept frames) or just after its first block; two more --resume runs killed while
     * writing, at a block and a fraction of a block spread over the video; then a --resume
     * to the end. */
    double burn = t_written - t_first, block = (t_end - t_written) / 7; /* 8 written blocks */
    int nothing = 0, partial = 0, kills = 0;
    for (int c = 0; c < KILL_CHAINS; c++) {
        double f = (c + 0.5) / KILL_CHAINS;
        int target = 4 * (1 + c * 5 / KILL_CHAINS); /* 4 .. 20 frames */
        moment at[KILLS_PER_CHAIN] = {
            c < 2 ? (moment){.at_start = t_first * (0.3 + 0.45 * c)}
                  : (moment){.delay = burn * (c - 2 + 0.5) / (KILL_CHAINS - 2)},
            c % 2 == 0 ? (moment){.at_start = 0.1 + 0.6 * f} : (moment){.delay = block * f},
            {.frames = target, .delay = block * f},
            {.frames = target + 8, .delay = block * (1 - f)}};
        remove_outputs(out);
        bool finished = false;
        for (int k = 0; k < KILLS_PER_CHAIN && !finished; k++) {
            char what[160];
            snprintf(what, sizeof what, "chain %d, kill %d (%.2f s after the start, or %.2f s after %d frames, of %s)",
                     c, k + 1, at[k].at_start, at[k].delay, at[k].frames, k ? "a --resume" : "a fresh run");
            if (run_and_kill(&p, out, k ? resume : args, at[k])) {
                kills++;
                int64_t n = check_left(out, ref, ref_frames, what);
                if (n == 0) nothing++;
                else if (n < ref_frames) partial++;
            } else {
                finished = true; /* it ran to the end before the moment */
                check_summary(&p, ref_frames);
            }
        }
        if (!finished) {
            proc_start(&p, out, resume);
            proc_finish(&p);
            cr_assert_eq(exit_code(&p), 0, "chain %d: --resume after the kills: %s", c, p.text);
            check_summary(&p, ref_frames);
        }
        char what[64];
        snprintf(what, sizeof what, "chain %d, resumed to the end", c);
        expect_frames(out, ref, ref_frames, ref_frames, what);
    }
    cr_log_info("%d kills: %d left nothing, %d a playable prefix; %d resumed summaries with kept frames", kills,
                nothing, partial, resumed_summaries);
    /* the moments hit every phase */
    cr_assert_geq(kills, KILLS_PER_CHAIN * KILL_CHAINS - 2, "most moments must fall inside the runs");
    cr_assert_gt(nothing, 0, "no kill fell before the first written block");
    cr_assert_gt(partial, 0, "no kill fell among the written blocks");
    cr_assert_gt(resumed_summaries, 0, "no resumed run kept frames");
    free(ref);
}
