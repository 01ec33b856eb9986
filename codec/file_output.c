/* The encoder's output file: an AVIOContext over a file descriptor this module owns.
 *
 * Owning the descriptor lets a block be synced to the disk (fdatasync) and lets a write
 * error keep its errno, so a full disk is reported as such rather than as a generic I/O
 * failure. The file is written in place (not through a temporary name): a killed process
 * must leave the flushed blocks under the name the user asked for. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavformat/avio.h>
#include <libavutil/mem.h>

#include "codec_internal.h"

#define LV_AVIO_BUFFER (64 * 1024)

struct lv_file_output {
    int fd;
    AVIOContext *avio;
    int error;        /* first failure, as AVERROR(errno) */
    char path[4096]; /* the name messages give (the user's output, not a temporary file) */
};

#if defined(FF_API_AVIO_WRITE_NONCONST) && !FF_API_AVIO_WRITE_NONCONST
typedef const uint8_t lv_avio_byte;
#elif LIBAVFORMAT_VERSION_MAJOR >= 61
typedef const uint8_t lv_avio_byte;
#else
typedef uint8_t lv_avio_byte;
#endif

static int write_all(void *opaque, lv_avio_byte *buf, int size) {
    lv_file_output *f = opaque;
    if (f->error) return f->error;
    int done = 0;
    while (done < size) {
        ssize_t n = write(f->fd, buf + done, (size_t)(size - done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            f->error = AVERROR(n < 0 ? errno : EIO);
            return f->error;
        }
        done += (int)n;
    }
    return size;
}

static int64_t seek_fd(void *opaque, int64_t offset, int whence) {
    lv_file_output *f = opaque;
    if (whence == AVSEEK_SIZE) {
        struct stat st;
        if (fstat(f->fd, &st) != 0) return AVERROR(errno);
        return (int64_t)st.st_size;
    }
    whence &= ~AVSEEK_FORCE;
    off_t pos = lseek(f->fd, (off_t)offset, whence);
    return pos < 0 ? AVERROR(errno) : (int64_t)pos;
}

lv_status lv_file_output_open(const char *path, const char *name, lv_file_output **out) {
    *out = NULL;
    if (!name) name = path;
    const char *beside = strcmp(name, path) ? " (written under a temporary name beside it)" : "";
    lv_file_output *f = calloc(1, sizeof *f);
    if (!f) return lv_error(LV_ERR_NOMEM, "opening %s: out of memory", name);
    snprintf(f->path, sizeof f->path, "%s", name);
    f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int err = errno;
        free(f);
        return lv_error(LV_ERR_IO, "cannot write %s%s: %s", name, beside, strerror(err));
    }
    unsigned char *buffer = av_malloc(LV_AVIO_BUFFER);
    if (buffer) f->avio = avio_alloc_context(buffer, LV_AVIO_BUFFER, 1, f, NULL, write_all, seek_fd);
    if (!f->avio) {
        av_free(buffer);
        close(f->fd);
        free(f);
        return lv_error(LV_ERR_NOMEM, "opening %s: out of memory", name);
    }
    *out = f;
    return LV_OK;
}

AVIOContext *lv_file_output_avio(lv_file_output *f) { return f->avio; }

int lv_file_output_error(const lv_file_output *f) {
    if (!f) return 0; /* no file of its own: a muxer that writes its files itself (HLS) */
    if (f->error) return f->error;
    return f->avio && f->avio->error < 0 ? f->avio->error : 0;
}

static lv_status report(const lv_file_output *f) {
    int err = lv_file_output_error(f);
    if (err == AVERROR(ENOSPC) || err == AVERROR(EDQUOT))
        return lv_av_error(LV_ERR_IO, err, "writing %s: the disk is full", f->path);
    return lv_av_error(LV_ERR_IO, err, "writing %s", f->path);
}

lv_status lv_file_output_flush(lv_file_output *f, int sync) {
    if (!f) return LV_OK;
    avio_flush(f->avio);
    if (!lv_file_output_error(f) && sync && fdatasync(f->fd) != 0 && errno != EINVAL && errno != EROFS)
        f->error = AVERROR(errno); /* EINVAL/EROFS: a device such as a pipe that cannot sync */
    return lv_file_output_error(f) ? report(f) : LV_OK;
}

lv_status lv_file_output_close(lv_file_output *f) {
    if (!f) return LV_OK;
    avio_flush(f->avio);
    if (!lv_file_output_error(f) && close(f->fd) != 0) f->error = AVERROR(errno);
    else if (lv_file_output_error(f)) close(f->fd);
    lv_status st = lv_file_output_error(f) ? report(f) : LV_OK;
    av_freep(&f->avio->buffer);
    avio_context_free(&f->avio);
    free(f);
    return st;
}
