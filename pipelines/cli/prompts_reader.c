/* The reader thread behind `longvk generate --prompts-from` (prompts_reader.h). It polls
 * the descriptor with a 0.1 s timeout, so that it notices a stop even while a FIFO has no
 * writer or a terminal no input. A FIFO is opened without waiting for a writer (O_NONBLOCK);
 * on Linux poll reports nothing on it until a writer has come, and its hang-up once the last
 * writer has gone: that is the input's end. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prompts_reader.h"

struct prompts_reader {
    pthread_t thread;
    atomic_int stop;
    int fd;
    bool own_fd;
    lv_gen_live *live;
    char path[4096];
};

const char *prompts_reader_check(const char *path) {
    if (!path || !*path) return "is empty: give a FIFO, a file, or - for stdin";
    if (!strcmp(path, "-")) return NULL;
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT ? "does not exist (make a FIFO with mkfifo)" : "cannot be read";
    if (S_ISDIR(st.st_mode)) return "is a folder: give a FIFO, a file, or - for stdin";
    if (access(path, R_OK) != 0) return "cannot be read (permission)";
    return NULL;
}

/* Each complete line of buf[0, *len) pushed; the rest kept at the front. */
static void push_lines(prompts_reader *r, char *buf, size_t *len, bool all) {
    size_t start = 0;
    for (size_t i = 0; i < *len; i++) {
        if (buf[i] != '\n') continue;
        buf[i] = '\0';
        if (i > start && buf[i - 1] == '\r') buf[i - 1] = '\0';
        if (lv_generate_push_prompt(r->live, buf + start) != LV_OK)
            fprintf(stderr, "longvk generate: warning: --prompts-from %s: a line not taken: %s\n", r->path,
                    lv_last_error());
        start = i + 1;
    }
    if (all && start < *len) { /* the last line without its newline */
        buf[*len] = '\0';
        if (lv_generate_push_prompt(r->live, buf + start) != LV_OK)
            fprintf(stderr, "longvk generate: warning: --prompts-from %s: a line not taken: %s\n", r->path,
                    lv_last_error());
        start = *len;
    }
    memmove(buf, buf + start, *len - start);
    *len -= start;
}

static void *reader_main(void *arg) {
    prompts_reader *r = arg;
    enum { CAP = LV_GEN_LIVE_MAX_LINE + 2 };
    char *buf = malloc(CAP + 1);
    size_t len = 0;
    bool skipping = false; /* in a line too long to take */
    const char *why = NULL;
    char message[600];
    if (!buf) why = "out of memory";
    while (buf && !atomic_load(&r->stop)) {
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        int n = poll(&p, 1, 100);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(message, sizeof message, "reading it failed: %s", strerror(errno));
            why = message;
            break;
        }
        if (n == 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t got = read(r->fd, buf + len, CAP - len);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got < 0) {
            snprintf(message, sizeof message, "reading it failed: %s", strerror(errno));
            why = message;
            break;
        }
        if (got == 0) { /* the end: a file's, or the last writer of a FIFO gone */
            if (!skipping) push_lines(r, buf, &len, true);
            break;
        }
        len += (size_t)got;
        if (skipping) { /* drop up to the end of the overlong line */
            char *nl = memchr(buf, '\n', len);
            if (!nl) {
                len = 0;
                continue;
            }
            size_t rest = len - (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, rest);
            len = rest;
            skipping = false;
        }
        push_lines(r, buf, &len, false);
        if (len == CAP) {
            fprintf(stderr, "longvk generate: warning: --prompts-from %s: a line longer than %d bytes: skipped\n",
                    r->path, LV_GEN_LIVE_MAX_LINE);
            len = 0;
            skipping = true;
        }
    }
    if (!atomic_load(&r->stop)) lv_gen_live_end(r->live, why);
    free(buf);
    return NULL;
}

int prompts_reader_start(const char *path, lv_gen_live *live, prompts_reader **out) {
    prompts_reader *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "longvk generate: out of memory\n");
        return -1;
    }
    r->live = live;
    snprintf(r->path, sizeof r->path, "%s", strcmp(path, "-") ? path : "stdin");
    if (!strcmp(path, "-")) r->fd = STDIN_FILENO;
    else if ((r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        fprintf(stderr, "longvk generate: --prompts-from %s: %s\n", path, strerror(errno));
        free(r);
        return -1;
    } else r->own_fd = true;
    atomic_init(&r->stop, 0);
    if (pthread_create(&r->thread, NULL, reader_main, r) != 0) {
        fprintf(stderr, "longvk generate: --prompts-from: cannot start the reader thread\n");
        if (r->own_fd) close(r->fd);
        free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void prompts_reader_stop(prompts_reader *r) {
    if (!r) return;
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    if (r->own_fd) close(r->fd);
    free(r);
}
