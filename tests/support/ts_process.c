#include "ts_process.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ERR_KEEP (64 * 1024)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ts_proc ts_spawn(const char *const *argv, double timeout_s) {
    ts_proc r = {.status = -1};
    int fds[2];
    cr_assert_eq(pipe(fds), 0, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    double t0 = now();
    /* posix_spawn's argv is char *const[]; it does not write to the strings */
    int e = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    cr_assert_eq(e, 0, "cannot run %s: %s", argv[0], strerror(e));
    r.err = malloc(ERR_KEEP + 1);
    cr_assert_not_null(r.err);
    size_t kept = 0;
    bool open_pipe = true, exited = false;
    int ws = 0;
    /* read stderr as it comes (a full pipe would block the child) until it exits */
    while (!exited) {
        if (open_pipe) {
            struct pollfd p = {.fd = fds[0], .events = POLLIN};
            if (poll(&p, 1, 20) > 0) {
                char buf[4096];
                ssize_t n = read(fds[0], buf, sizeof buf);
                if (n <= 0) open_pipe = false;
                for (ssize_t i = 0; i < n && kept < ERR_KEEP; i++) r.err[kept++] = buf[i];
            }
        } else {
            struct timespec ms = {0, 20 * 1000 * 1000};
            nanosleep(&ms, NULL);
        }
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid) exited = true;
        else if (!r.timed_out && now() - t0 > timeout_s) {
            kill(pid, SIGKILL); /* our own child, by its pid */
            r.timed_out = true;
        }
    }
    /* what is left, without waiting: a grandchild may still hold the pipe open */
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; open_pipe && kept < ERR_KEEP && (n = read(fds[0], r.err + kept, ERR_KEEP - kept)) > 0;)
        kept += (size_t)n;
    close(fds[0]);
    r.err[kept] = '\0';
    r.seconds = now() - t0;
    if (WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
    else if (WIFSIGNALED(ws)) r.signal = WTERMSIG(ws);
    return r;
}

ts_proc ts_spawn_cli(const char *const *argv) {
    ts_proc p = ts_spawn(argv, 600);
    cr_assert(!p.timed_out, "%s timed out", ts_argv_text(argv));
    return p;
}

void ts_assert_exit0(const ts_proc *p, const char *what) {
    cr_assert(p->status == 0, "%s: exit %d, stderr:\n%s", what, p->status, p->err);
}

ts_proc ts_spawn_program(const char *program, const char *const *args) {
    const char *full[64] = {program};
    int n = 1;
    for (int i = 0; args[i] && n < 63; i++) full[n++] = args[i];
    full[n] = NULL;
    return ts_spawn(full, 600);
}

void ts_expect_exit(ts_proc p, int status, const char *what) {
    cr_assert(!p.timed_out && p.signal == 0, "%s: ended by signal %d / timed out; stderr:\n%s", what, p.signal, p.err);
    cr_assert_eq(p.status, status, "%s: exit %d, want %d; stderr:\n%s", what, p.status, status, p.err);
}

char *ts_argv_text(const char *const *argv) {
    size_t cap = 64;
    for (int i = 0; argv[i]; i++) cap += 4 * strlen(argv[i]) + 3;
    char *s = malloc(cap), *p = s;
    cr_assert_not_null(s);
    for (int i = 0; argv[i]; i++) {
        if (i) *p++ = ' ';
        *p++ = '\'';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *c;
            }
        }
        *p++ = '\'';
    }
    *p = '\0';
    return s;
}

uint64_t ts_file_hash(const char *path, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s", path);
    uint64_t h = 1469598103934665603ull, n = 0;
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++) h = (h ^ buf[i]) * 1099511628211ull;
        n += got;
    }
    fclose(f);
    if (size) *size = n;
    return h;
}
