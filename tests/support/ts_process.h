/* Running a program the way the CLI tests need: an argv (no shell, so any byte string is
 * one argument), a time limit, its stderr kept, and how it ended (exit status or signal).
 * Also a hash of a file's bytes, to check that a run left its inputs alone. */
#ifndef LONGVK_TS_PROCESS_H
#define LONGVK_TS_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_proc {
    int status;     /* exit status when it exited, else -1 */
    int signal;     /* the signal that ended it, 0 if it exited */
    bool timed_out; /* killed (SIGKILL) after the time limit */
    double seconds; /* wall time */
    char *err;      /* its stderr, NUL-terminated, at most 64 KiB kept (malloc'd; free it) */
} ts_proc;

/* Runs argv[0] (a path) with argv (NULL-terminated), stdout to /dev/null, and waits for
 * it at most timeout_s seconds. */
ts_proc ts_spawn(const char *const *argv, double timeout_s);
/* A run of the program as the CLI tests make it: ts_spawn with a 600 s limit, failing the
 * test (naming the command) if it ran past it. */
ts_proc ts_spawn_cli(const char *const *argv);
/* Asserts that the run exited 0, else fails the test with `what`, the status and stderr. */
void ts_assert_exit0(const ts_proc *p, const char *what);
/* Runs `program` with the arguments `args` (NULL-terminated; at most 62 are passed) as
 * ts_spawn does, with a 600 s limit. TS_LONGVK("encode", ...) runs the built longvk
 * (LONGVK_CLI, defined for test executables). */
ts_proc ts_spawn_program(const char *program, const char *const *args);
#define TS_LONGVK(...) ts_spawn_program(LONGVK_CLI, (const char *const[]){__VA_ARGS__, NULL})
/* Asserts that the run exited (no signal, no timeout) with `status`; else fails the test
 * with `what` and the stderr. */
void ts_expect_exit(ts_proc p, int status, const char *what);
/* The argv as one shell-quoted line (for messages; malloc'd). */
char *ts_argv_text(const char *const *argv);
/* FNV-1a 64 of the file's bytes and its size; fails the test if it cannot be read. */
uint64_t ts_file_hash(const char *path, uint64_t *size);

#endif
