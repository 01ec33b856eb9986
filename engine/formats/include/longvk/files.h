/* Opening input files. Every reader of longvk (model weights, configs, .npy arrays, videos,
 * resume states) opens its file through lv_open_regular_file: a FIFO, socket, device or
 * directory given where a file is expected is refused with a message at once, instead of
 * blocking forever (a FIFO without a writer) or reading something that never ends. */
#ifndef LONGVK_FILES_H
#define LONGVK_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens `path` read-only if it is a regular file (symbolic links are followed): *fd gets a
 * blocking, close-on-exec descriptor and, when size is not NULL, *size the file's length.
 * Otherwise nothing is read and the result is LV_ERR_IO with a message naming the path and
 * what it is ("not a regular file: a FIFO (named pipe)"); opening a FIFO does not wait for
 * a writer. A missing or unreadable file is LV_ERR_IO with the system's reason. */
lv_status lv_open_regular_file(const char *path, int *fd, int64_t *size);

/* The same check without keeping the file open, for readers that open it themselves
 * (libzip, FFmpeg). */
lv_status lv_check_regular_file(const char *path);

/* The whole of a small text file (a config, a shard index), NUL-terminated, through
 * lv_open_regular_file; free() it. NULL with a message in lv_last_error() when it cannot
 * be read or is larger than 64 MiB. */
char *lv_read_text_file(const char *path, size_t *len);

/* 1 when `path` is a directory / a regular file (links followed), else 0. */
int lv_path_is_dir(const char *path);
int lv_path_is_file(const char *path);
/* 1 when `s` ends with `suffix`. */
int lv_path_ends_with(const char *s, const char *suffix);
/* The directory part of `path` ("." when it has none, "/" for a file in the root). */
void lv_path_dir(const char *path, char *dir, size_t size);

/* ---- outputs ----------------------------------------------------------------------------
 * Where an output goes. Symbolic links are followed, so that a link is written through and
 * never replaced by a file: `target` gets the name of the file itself (the last link's
 * target, which need not exist yet). *special is 1 when it exists and is not a regular file
 * (a character device such as /dev/null, a FIFO): such a file cannot be replaced by a
 * rename, so it is written through, as FFmpeg does. LV_ERR_IO, naming the path, when it is
 * a directory, when a link cannot be read, or when an existing regular file may not be
 * written by this user ("Permission denied": a write-protected file is never replaced, as
 * opening it for writing would refuse). `special` may be NULL. */
lv_status lv_output_target(const char *path, char *target, size_t size, int *special);

/* A whole-file output (an .npy, a safetensors file, JSON, SVG): written to a temporary
 * name beside its target and renamed into place when complete, so that a reader or a
 * killed process never leaves half a file under the name; the replaced file's mode is
 * kept. A device or FIFO (lv_output_target) is written through instead (`direct`). */
typedef struct lv_output_file {
    FILE *fp;
    int direct;          /* a device or FIFO, written through: no temporary, no rename */
    char path[4096];     /* as given, for messages */
    char target[4096];   /* links resolved: what is written or renamed into */
    char tmp[4200];      /* the temporary name; "" when direct */
} lv_output_file;

lv_status lv_output_open(lv_output_file *f, const char *path);
/* n bytes straight to the file's descriptor, past the FILE's buffer (for large blocks: a
 * writer uses either this or the FILE, not both), retried on EINTR, in pieces of at most
 * 1 GiB; an error names the file being written. */
lv_status lv_output_write(lv_output_file *f, const void *data, uint64_t n);
/* The written bytes on the disk before lv_output_commit renames the file into place (a
 * device or FIFO: nothing to do). */
lv_status lv_output_sync(lv_output_file *f);
/* Flushes and closes, then renames into place; on a write error removes the temporary file
 * and reports it (naming the output). */
lv_status lv_output_commit(lv_output_file *f);
/* Closes and removes the temporary file: the target is left as it was. */
void lv_output_discard(lv_output_file *f);

#ifdef __cplusplus
}
#endif
#endif
