/* Opening input files. Every reader of longvk (model weights, configs, .npy arrays, videos,
 * resume states) opens its file through lv_open_regular_file: a FIFO, socket, device or
 * directory given where a file is expected is refused with a message at once, instead of
 * blocking forever (a FIFO without a writer) or reading something that never ends. */
#ifndef LONGVK_FILES_H
#define LONGVK_FILES_H

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

#ifdef __cplusplus
}
#endif
#endif
