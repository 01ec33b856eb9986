/* Whole-file outputs (JSON, SVG) written to a temporary name and renamed when complete, so a
 * reader never sees half a file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "codec_internal.h"

lv_status lv_atomic_open(lv_atomic_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "output path is empty");
    if (strlen(path) >= sizeof f->path) return lv_error(LV_ERR_INVALID, "output path too long: %s", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp%d", path, (int)getpid());
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp) return lv_error(LV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return LV_OK;
}

lv_status lv_atomic_commit(lv_atomic_file *f) {
    if (!f->fp) return lv_error(LV_ERR_INVALID, "%s: not open", f->path);
    int bad = ferror(f->fp);
    int err = bad ? errno : 0;
    if (fclose(f->fp) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    f->fp = NULL;
    if (bad) {
        unlink(f->tmp);
        return lv_error(LV_ERR_IO, "writing %s: %s", f->path, err ? strerror(err) : "write error");
    }
    if (rename(f->tmp, f->path) != 0) {
        err = errno;
        unlink(f->tmp);
        return lv_error(LV_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->path, strerror(err));
    }
    return LV_OK;
}

void lv_atomic_discard(lv_atomic_file *f) {
    if (f->fp) {
        fclose(f->fp);
        f->fp = NULL;
        unlink(f->tmp);
    }
}
