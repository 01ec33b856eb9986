/* What several commands print: the library's last error, and how a block recipe samples. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

const char *cli_sampler_name(lv_chunk_sampler sampler) {
    return sampler == LV_CHUNK_EULER ? "Euler" : "re-noise";
}

void cli_cfg_where(const lv_block_recipe *r, char *buf, size_t size) {
    if (r->cfg_scale != 1.0 && r->cfg_last_steps == 1) snprintf(buf, size, " at the last step");
    else if (r->cfg_scale != 1.0 && r->cfg_last_steps > 1) snprintf(buf, size, " at the last %d steps", r->cfg_last_steps);
    else if (size) buf[0] = '\0';
}

/* Under MPI ranks a failure is kept, not printed: cli_mpi_end says it once for the ranks that
 * found the same (cli_mpi.c) */
static bool deferring;
static char deferred[4096];

void cli_defer_errors(bool on) {
    deferring = on;
    if (!on) deferred[0] = '\0';
}

const char *cli_deferred_errors(void) { return deferred; }

void cli_error(const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!deferring) {
        fprintf(stderr, "%s\n", line);
        return;
    }
    size_t at = strlen(deferred);
    snprintf(deferred + at, sizeof deferred - at, "%s%s", at ? "\n" : "", line);
}

int cli_fail(const char *context) {
    const char *msg = lv_last_error();
    if (context) cli_error("longvk: %s: %s", context, *msg ? msg : "failed");
    else cli_error("longvk: %s", *msg ? msg : "failed");
    return 1;
}
