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

/* ---- outputs ---------------------------------------------------------------------------- */

lv_status lv_output_target(const char *path, char *target, size_t size, int *special) {
    if (special) *special = 0;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "output path is empty");
    char cur[4096];
    if (strlen(path) >= sizeof cur || strlen(path) >= size)
        return lv_error(LV_ERR_INVALID, "output path too long: %s", path);
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0;; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode)) break; /* missing: created under that name */
        if (hops == 40) return lv_error(LV_ERR_IO, "%s: too many levels of symbolic links", path);
        char link[4096];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return lv_error(LV_ERR_IO, "%s: cannot read the link %s: %s", path, cur, strerror(errno));
        link[n] = '\0';
        if (link[0] == '/') {
            snprintf(cur, sizeof cur, "%s", link);
        } else { /* relative to the link's own folder */
            char dir[4096];
            lv_path_dir(cur, dir, sizeof dir);
            size_t nd = strlen(dir), nl = strlen(link);
            if (nd + 1 + nl >= sizeof cur) return lv_error(LV_ERR_INVALID, "%s: the link's target is too long", path);
            memcpy(cur, dir, nd);
            cur[nd] = '/';
            memcpy(cur + nd + 1, link, nl + 1);
        }
    }
    if (strlen(cur) >= size) return lv_error(LV_ERR_INVALID, "output path too long: %s", cur);
    snprintf(target, size, "%s", cur);
    struct stat st;
    if (stat(cur, &st) != 0) return LV_OK; /* a new file (a missing folder fails when it is opened) */
    if (S_ISDIR(st.st_mode)) return lv_error(LV_ERR_IO, "%s: is a directory, not a file to write", path);
    if (!S_ISREG(st.st_mode)) {
        if (special) *special = 1;
        return LV_OK;
    }
    /* the user's right to write the file, as opening it would check (root may: as `decode`) */
    if (access(cur, W_OK) != 0)
        return lv_error(LV_ERR_IO, "cannot write %s: %s (the file exists and may not be written by this user; "
                        "longvk does not replace it)", path, strerror(errno));
    return LV_OK;
}

lv_status lv_output_open(lv_output_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "output path is empty");
    if (strlen(path) >= sizeof f->path) return lv_error(LV_ERR_INVALID, "output path too long: %s", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    int special = 0;
    LV_TRY(lv_output_target(path, f->target, sizeof f->target, &special));
    if (special) { /* a device or FIFO: written through (a FIFO's open waits for its reader) */
        f->direct = 1;
        f->fp = fopen(f->target, "wb");
        if (!f->fp) return lv_error(LV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return LV_OK;
    }
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp-XXXXXX", f->target);
    int fd = mkstemp(f->tmp);
    if (fd < 0) {
        int e = errno;
        f->tmp[0] = '\0';
        return lv_error(LV_ERR_IO, "cannot write %s: cannot create a temporary file beside it: %s", path, strerror(e));
    }
    struct stat st; /* the replaced file's mode, else rw-r--r-- */
    mode_t mode = stat(f->target, &st) == 0 ? (st.st_mode & 07777) : 0644;
    if (fchmod(fd, mode) != 0 || !(f->fp = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(f->tmp);
        f->tmp[0] = '\0';
        return lv_error(LV_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return LV_OK;
}

/* The name being written: the temporary file, or the output itself when written through. */
static const char *written_name(const lv_output_file *f) { return f->direct ? f->path : f->tmp; }

lv_status lv_output_write(lv_output_file *f, const void *data, uint64_t n) {
    if (!f->fp) return lv_error(LV_ERR_INVALID, "%s: not open", f->path);
    const int fd = fileno(f->fp);
    const uint8_t *p = data;
    while (n) {
        size_t piece = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
        ssize_t k = write(fd, p, piece);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return lv_error(LV_ERR_IO, "%s: write failed: %s", written_name(f), k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (uint64_t)k;
    }
    return LV_OK;
}

lv_status lv_output_sync(lv_output_file *f) {
    if (!f->fp) return lv_error(LV_ERR_INVALID, "%s: not open", f->path);
    if (f->direct || fsync(fileno(f->fp)) == 0) return LV_OK;
    return lv_error(LV_ERR_IO, "%s: cannot finish the file: %s", written_name(f), strerror(errno));
}

lv_status lv_output_commit(lv_output_file *f) {
    if (!f->fp) return lv_error(LV_ERR_INVALID, "%s: not open", f->path);
    int bad = fflush(f->fp) != 0 || ferror(f->fp);
    int err = bad ? errno : 0;
    if (fclose(f->fp) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    f->fp = NULL;
    if (bad) {
        if (!f->direct) unlink(f->tmp);
        return lv_error(LV_ERR_IO, "writing %s: %s", f->path, err ? strerror(err) : "write error");
    }
    if (f->direct) return LV_OK;
    if (rename(f->tmp, f->target) != 0) {
        err = errno;
        unlink(f->tmp);
        return lv_error(LV_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->target, strerror(err));
    }
    return LV_OK;
}

void lv_output_discard(lv_output_file *f) {
    if (f->fp) {
        fclose(f->fp);
        f->fp = NULL;
        if (!f->direct) unlink(f->tmp);
    }
}
