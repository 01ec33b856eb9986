/* Opening input files. Every reader of longvk (model weights, configs, .npy arrays, videos,
 * resume states) opens its file through lv_open_regular_file: a FIFO, socket, device or
 * directory given where a file is expected is refused with a message at once, instead of
 * blocking forever (a FIFO without a writer) or reading something that never ends. */
#ifndef LONGVK_FILES_H
#define LONGVK_FILES_H

#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
