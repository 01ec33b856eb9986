/* Per-thread last-error message (see longvk/status.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "longvk/status.h"

#define LV_ERROR_CAPACITY 1024
static _Thread_local char lv_error_message[LV_ERROR_CAPACITY];

const char *lv_last_error(void) { return lv_error_message; }

void lv_clear_error(void) { lv_error_message[0] = '\0'; }

const char *lv_status_name(lv_status status) {
    switch (status) {
    case LV_OK: return "ok";
    case LV_ERR_INVALID: return "invalid argument";
    case LV_ERR_IO: return "i/o error";
    case LV_ERR_FORMAT: return "malformed file";
    case LV_ERR_DEVICE: return "device error";
    case LV_ERR_NOMEM: return "out of memory";
    case LV_ERR_LIMIT: return "device limit exceeded";
    case LV_ERR_UNSUPPORTED: return "unsupported";
    case LV_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

lv_status lv_error(lv_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lv_error_message, sizeof lv_error_message, fmt, ap);
    va_end(ap);
    return status;
}

lv_status lv_error_prefix(lv_status status, const char *fmt, ...) {
    char prefix[LV_ERROR_CAPACITY];
    char old[LV_ERROR_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, lv_error_message, sizeof old);
    size_t n = strlen(prefix);
    if (n > LV_ERROR_CAPACITY / 2) n = LV_ERROR_CAPACITY / 2;
    memcpy(lv_error_message, prefix, n);
    memcpy(lv_error_message + n, ": ", 2);
    size_t rest = strlen(old);
    if (rest > LV_ERROR_CAPACITY - n - 3) rest = LV_ERROR_CAPACITY - n - 3;
    memcpy(lv_error_message + n + 2, old, rest);
    lv_error_message[n + 2 + rest] = '\0';
    return status;
}

void lv_problem(lv_problems *p, const char *name, const char *fmt, ...) {
    if (p->n++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->first, sizeof p->first, fmt, ap);
        va_end(ap);
        return;
    }
    if (p->others_len + strlen(name) + 8 < sizeof p->others)
        p->others_len += (size_t)snprintf(p->others + p->others_len, sizeof p->others - p->others_len, "%s%s",
                                          p->n > 2 ? ", " : "", name);
    else if (p->others_len + 5 < sizeof p->others && !strstr(p->others, ", ..."))
        p->others_len += (size_t)snprintf(p->others + p->others_len, sizeof p->others - p->others_len, ", ...");
}
