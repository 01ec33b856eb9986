/* Opening input files only when they are regular files (see longvk/files.h). */
#include <errno.h>
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
