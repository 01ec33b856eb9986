/* `longvk generate --prompts-from` (issue 54): prompts typed while the video is made, on the
 * default model, 4 s at 16 fps (64 frames, blocks of 4), 8 burn-in blocks:
 *
 * - fifo_then_replay: a FIFO fed by the test with three lines at random moments (delays
 *   drawn from a logged seed); --schedule OUT.schedule with the same seed makes the same
 *   frames, bit for bit (ffv1).
 * - sigkill_then_resume: a run fed one prompt through a FIFO is SIGKILLed after block 14
 *   (LONGVK_TEST_KILL); a resume without --prompts-from is refused; with it (a second FIFO
 *   giving one more prompt) the run ends, and its video is the one an uninterrupted run with
 *   the switches applied makes (--schedule OUT.schedule).
 * - file_and_stdin: a regular file and stdin (-) with "@TIME" lines: the switches at the
 *   blocks holding those times, block-exact in OUT.schedule; a line past the end reported;
 *   the input's end said.
 * - bad_input: a missing path, a folder, with --sp-emulate: exit 2 before any work. */
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
#define PROMPT_B "three yellow squares on a dark background"
#define COMMON "--seconds", "4", "--burn-in-blocks", "8", "--codec", "ffv1", "--scale", "1", "-s", "7"
#define FRAME_BYTES (32 * 32 * 3)

static void clean(const char *out) {
    ts_remove_output(out, (const char *const[]){".schedule", ".longvk-state", ".longvk-lock", ".err", NULL});
}

static const char *fifo(const char *name) {
    const char *path = ts_tmp(name);
    remove(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s", path);
    return path;
}

/* `longvk generate` started with argv (after "generate"), its stderr to OUT.err */
static pid_t start(const char *out, const char *const *args) {
    const char *argv[64] = {LONGVK_CLI, "generate"};
    int n = 2;
    for (int i = 0; args[i]; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char err[600];
    snprintf(err, sizeof err, "%s.err", out);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_RDWR);
        if (fd >= 0) dup2(fd, STDERR_FILENO);
        if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDIN_FILENO);
        execv(LONGVK_CLI, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int finish(pid_t pid) {
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

static char *err_of(const char *out) {
    char err[600];
    size_t len;
    snprintf(err, sizeof err, "%s.err", out);
    return (char *)ts_slurp(err, &len);
}

static void put(int fd, const char *line) {
    size_t n = strlen(line);
    cr_assert_eq(write(fd, line, n), (ssize_t)n);
    cr_assert_eq(write(fd, "\n", 1), 1);
}

/* --schedule OUT.schedule into `again`, with CFG's twin (CTest turns it off by default): the
 * frames must be OUT's */
static void replay_equals(const char *out, const char *again) {
    char sched[600];
    snprintf(sched, sizeof sched, "%s.schedule", out);
    clean(again);
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", "--schedule", sched, COMMON, "--parallel-cfg", "on",
                                           "-q", "-o", again, NULL},
                         600);
    cr_assert(!p.timed_out && p.status == 0, "--schedule %s: exit %d\n%s", sched, p.status, p.err);
    free(p.err);
    uint8_t *a = ts_decode_frames(out, 64, FRAME_BYTES), *b = ts_decode_frames(again, 64, FRAME_BYTES);
    cr_assert(memcmp(a, b, (size_t)64 * FRAME_BYTES) == 0, "--schedule %s makes other frames than %s", sched, out);
    free(a), free(b);
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

Test(live_cli, fifo_then_replay, .timeout = 900) {
    const char *out = ts_tmp("live_fifo.mkv"), *again = ts_tmp("live_fifo_again.mkv");
    clean(out);
    const char *f = fifo("live_fifo.fifo");
    pid_t pid = start(out, (const char *[]){"-p", PROMPT_A, "--prompts-from", f, COMMON, "-o", out, NULL});
    int fd = open(f, O_WRONLY); /* waits for the run to open it */
    cr_assert_geq(fd, 0);
    unsigned seed = (unsigned)time(NULL);
    cr_log_info("delays from seed %u", seed);
    const char *lines[3] = {PROMPT_B, "+0.5 " PROMPT_A " | | 4f", PROMPT_B};
    for (int i = 0; i < 3; i++) {
        usleep(300000 + (useconds_t)(rand_r(&seed) % 1700) * 1000); /* 0.3 to 2 s */
        put(fd, lines[i]);
    }
    close(fd);
    int status = finish(pid);
    char *err = err_of(out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run: status %d\n%s", status, err);
    cr_log_info("%s", err);
    size_t len;
    char sched[600];
    snprintf(sched, sizeof sched, "%s.schedule", out);
    char *s = (char *)ts_slurp(sched, &len);
    cr_assert_geq(count(s, "\n# entry "), 2, "no switch applied:\n%s\n%s", s, err);
    cr_assert_eq(count(err, "\nswitch "), 2 * (count(s, "\n# entry ") - 1), "each switch applied is said, and "
                 "again in the summary:\n%s", err);
    free(s);
    free(err);
    replay_equals(out, again);
    remove(f);
}

Test(live_cli, sigkill_then_resume, .timeout = 900) {
    const char *out = ts_tmp("live_kill.mkv"), *again = ts_tmp("live_kill_again.mkv");
    clean(out);
    const char *f1 = fifo("live_kill1.fifo"), *f2 = fifo("live_kill2.fifo");
    setenv("LONGVK_TEST_KILL", "0:14", 1); /* SIGKILL once block 14 (6 of the video) is made */
    pid_t pid = start(out, (const char *[]){"-p", PROMPT_A, "--prompts-from", f1, COMMON, "-o", out, NULL});
    unsetenv("LONGVK_TEST_KILL");
    int fd = open(f1, O_WRONLY);
    cr_assert_geq(fd, 0);
    put(fd, "@0.25 " PROMPT_B); /* frame 4: block 2 of the video, long before block 6 */
    int status = finish(pid);
    close(fd);
    char *err = err_of(out);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the run: status %d\n%s", status, err);
    free(err);
    size_t len;
    char sched[600];
    snprintf(sched, sizeof sched, "%s.schedule", out);
    char *s = (char *)ts_slurp(sched, &len);
    cr_assert(strstr(s, "\n4f | " PROMPT_B " |  | 0f\n"), "the switch applied, in OUT.schedule at once:\n%s", s);
    free(s);

    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, COMMON, "-q", "--resume", "-o", out,
                                          NULL}, 600);
    cr_assert(p.status == 1 && strstr(p.err, "belongs to a run steered during it (--prompts-from): resume with "
                                      "--prompts-from too"), "exit %d\n%s", p.status, p.err);
    free(p.err);

    pid = start(out, (const char *[]){"-p", PROMPT_A, "--prompts-from", f2, COMMON, "--resume", "-o", out, NULL});
    fd = open(f2, O_WRONLY);
    cr_assert_geq(fd, 0);
    put(fd, "@3 " PROMPT_A); /* frame 48: block 13 of the video */
    close(fd);
    status = finish(pid);
    err = err_of(out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the resumed run: status %d\n%s", status, err);
    cr_assert(strstr(err, "64 frames, 24 kept from the interrupted run"), "%s", err);
    free(err);
    s = (char *)ts_slurp(sched, &len);
    cr_assert(strstr(s, "\n4f | " PROMPT_B " |  | 0f\n") && strstr(s, "\n48f | " PROMPT_A " |  | 0f\n"),
              "both switches in OUT.schedule:\n%s", s);
    free(s);
    replay_equals(out, again);
    remove(f1), remove(f2);
}

Test(live_cli, file_and_stdin, .timeout = 600) {
    const char *out = ts_tmp("live_file.mkv"), *in = ts_tmp("live_file.txt"), *out2 = ts_tmp("live_stdin.mkv");
    clean(out), clean(out2);
    const char *text = "# a comment\n\n@1 " PROMPT_B "\n@1:00 " PROMPT_A "\n@3 " PROMPT_A " | | 8f";
    ts_spit(in, text, strlen(text));
    ts_proc p = ts_spawn((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompts-from", in, COMMON, "-o",
                                          out, NULL}, 600);
    cr_assert(!p.timed_out && p.status == 0, "exit %d\n%s", p.status, p.err);
    cr_assert(strstr(p.err, "--prompts-from line 4: frame 960 is past the end of the video (64 frames): not applied"),
              "%s", p.err);
    cr_assert(strstr(p.err, "--prompts-from: the input ended after 5 lines: the run goes on with the last prompt"),
              "%s", p.err);
    free(p.err);
    size_t len;
    char sched[600], cmd[2000], *o = NULL;
    snprintf(sched, sizeof sched, "%s.schedule", out);
    char *s = (char *)ts_slurp(sched, &len);
    cr_assert(strstr(s, "\n16f | " PROMPT_B " |  | 0f\n") && strstr(s, "\n48f | " PROMPT_A " |  | 8f\n"), "%s", s);
    cr_assert_eq(count(s, "\n# entry "), 3, "%s", s);
    free(s);
    /* the same lines on stdin: the same video */
    snprintf(cmd, sizeof cmd, "%s generate -p '%s' --prompts-from - --seconds 4 --burn-in-blocks 8 --codec ffv1 "
             "--scale 1 -s 7 -q -o %s < %s 2>&1", LONGVK_CLI, PROMPT_A, out2, in);
    cr_assert_eq(ts_run(cmd, &o), 0, "%s", o);
    free(o);
    uint8_t *a = ts_decode_frames(out, 64, FRAME_BYTES), *b = ts_decode_frames(out2, 64, FRAME_BYTES);
    cr_assert(memcmp(a, b, (size_t)64 * FRAME_BYTES) == 0, "stdin and the file: other frames");
    free(a), free(b);
}

static void refused(const char *const *argv, const char *message) {
    ts_proc p = ts_spawn(argv, 120);
    cr_assert(p.status == 2 && strstr(p.err, message), "%s: exit %d, no '%s' in\n%s", ts_argv_text(argv), p.status,
              message, p.err);
    free(p.err);
}

Test(live_cli, bad_input, .timeout = 300) {
    const char *out = ts_tmp("live_bad.mkv");
    clean(out);
    refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompts-from", ts_tmp("live_none.fifo"),
                             "-o", out, NULL},
            "--prompts-from " LONGVK_TEST_TMP "/live_none.fifo does not exist (make a FIFO with mkfifo)");
    refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompts-from", LONGVK_TEST_TMP, "-o", out,
                             NULL},
            "is a folder: give a FIFO, a file, or - for stdin");
    refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompts-from", "-", "--sp-emulate", "2", "-o",
                             out, NULL},
            "--prompts-from: not with --sp-emulate (one process reads the prompts and makes the video)");
    refused((const char *[]){LONGVK_CLI, "generate", "-p", PROMPT_A, "--prompts-from", "-", "--sampler", "euler", "-o",
                             out, NULL},
            "--prompts-from: a schedule needs block-wise generation");
    struct stat st;
    cr_assert(stat(out, &st) != 0, "nothing written");
}
