/* What several commands print: the library's last error, and how a block recipe samples. */
#include <stdio.h>

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

int cli_fail(const char *context) {
    const char *msg = lv_last_error();
    if (context) fprintf(stderr, "longvk: %s: %s\n", context, *msg ? msg : "failed");
    else fprintf(stderr, "longvk: %s\n", *msg ? msg : "failed");
    return 1;
}
