/* The LONGVK_* environment variables, read in one place (the table of them all:
 * engine/README.md, "Environment variables"). */
#include <stdlib.h>
#include <string.h>

#include "longvk/engine.h"

const char *lv_env_str(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

bool lv_env_flag(const char *name) {
    const char *v = lv_env_str(name);
    return v && strcmp(v, "0") != 0;
}

uint64_t lv_env_u64(const char *name, uint64_t fallback, uint64_t lo, uint64_t hi) {
    const char *v = lv_env_str(name);
    if (!v || *v < '0' || *v > '9') return fallback;   /* no sign, no blank */
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return *end || x < lo || x > hi ? fallback : (uint64_t)x;
}
