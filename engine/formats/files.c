/* Opening input files only when they are regular files (see longvk/files.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk/files.h"

static const char *kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a file";
}

lv_status lv_open_regular_file(const char *path, int *fd, int64_t *size) {
    *fd = -1;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "no file name given");
    /* O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer
     * (it has no effect on a regular file, and is cleared below anyway) */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) return lv_error(LV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return lv_error(LV_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return lv_error(LV_ERR_IO,
                        "%s: not a regular file but %s: longvk reads its inputs from regular files only (copy "
                        "the data into a file first)",
                        path, kind_of(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(f);
        return lv_error(LV_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    *fd = f;
    if (size) *size = (int64_t)st.st_size;
    return LV_OK;
}

lv_status lv_check_regular_file(const char *path) {
    int fd;
    LV_TRY(lv_open_regular_file(path, &fd, NULL));
    close(fd);
    return LV_OK;
}

char *lv_read_text_file(const char *path, size_t *len) {
    int fd;
    int64_t size = 0;
    if (lv_open_regular_file(path, &fd, &size) != LV_OK) return NULL;
    if (size > (64 << 20)) {
        close(fd);
        lv_error(LV_ERR_FORMAT, "%s: %lld bytes: too large for a text file (64 MiB at most)", path, (long long)size);
        return NULL;
    }
    char *text = malloc((size_t)size + 1);
    if (!text) {
        close(fd);
        lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    size_t n = 0;
    while (n < (size_t)size) {
        ssize_t k = read(fd, text + n, (size_t)size - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            free(text);
            lv_error(LV_ERR_IO, "%s: cannot read: %s", path, strerror(e));
            return NULL;
        }
        n += (size_t)k;
    }
    close(fd);
    text[n] = '\0';
    *len = n;
    return text;
}

int lv_path_is_dir(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int lv_path_is_file(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int lv_path_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void lv_path_dir(const char *path, char *dir, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, size, ".");
    else if (slash == path) snprintf(dir, size, "/");
    else snprintf(dir, size, "%.*s", (int)(slash - path), path);
}
