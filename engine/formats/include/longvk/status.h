/* Status codes and the last error message.
 *
 * Library code never exits or aborts on bad input: a function that fails returns a
 * status other than LV_OK and leaves a message (what was wrong and where: file, tensor
 * name, offset, device limit) that lv_last_error() returns. Messages are per thread. */
#ifndef LONGVK_STATUS_H
#define LONGVK_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lv_status {
    LV_OK = 0,
    LV_ERR_INVALID,     /* bad argument, wrong shape or dtype */
    LV_ERR_IO,          /* a file could not be opened, read or written */
    LV_ERR_FORMAT,      /* a malformed or truncated file */
    LV_ERR_DEVICE,      /* no Vulkan device, or a Vulkan call failed */
    LV_ERR_NOMEM,       /* host or device memory exhausted */
    LV_ERR_LIMIT,       /* a device limit would be exceeded */
    LV_ERR_UNSUPPORTED, /* a feature, codec or dtype this build cannot handle */
    LV_ERR_INTERRUPTED  /* stopped on request (Ctrl-C) after a clean close */
} lv_status;

/* The message of the most recent failure on this thread ("" if none). */
const char *lv_last_error(void);
/* A short name for a status code ("invalid argument", ...). */
const char *lv_status_name(lv_status status);
/* Record a printf-style message for `status` and return `status`. */
lv_status lv_error(lv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Many problems with one input, for one message: the first in full, then the names of the
 * others ("tensor 'a' is missing ...; 3 more problems: b, c, d"). Zero-initialise it. */
typedef struct lv_problems {
    int n;
    char first[700];
    char others[400];
    size_t others_len;
} lv_problems;
/* Count one more problem about `name`: the first keeps its message, later ones their name. */
void lv_problem(lv_problems *p, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prefix the current message with more context ("loading model.safetensors: ..."). */
lv_status lv_error_prefix(lv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void lv_clear_error(void);

/* Evaluate an lv_status expression and return it from the enclosing function on failure. */
#define LV_TRY(expr)                                                                              \
    do {                                                                                          \
        lv_status lv_try_status_ = (expr);                                                        \
        if (lv_try_status_ != LV_OK) return lv_try_status_;                                       \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
