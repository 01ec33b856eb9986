/* Inside the SANA-Video config code (sana_config.c) and its users in pipelines/: the config
 * from an already parsed JSON object, the derived fields, and shape comparison. The public
 * part is in longvk/sana.h. */
#ifndef LONGVK_SANA_CONFIG_H
#define LONGVK_SANA_CONFIG_H

#include <cjson/cJSON.h>

#include "longvk/sana.h"

/* Fill `out` from a JSON object (original or diffusers keys); `source` names it in messages. */
lv_status lv_sana_config_from_json(const cJSON *obj, const char *source, lv_sana_config *out);
/* Check the primary fields and compute ffn_hidden, rope_dims, theta and eps. */
lv_status lv_sana_config_finish(lv_sana_config *cfg, const char *source);
/* 1 when two configs describe the same tensor shapes and attention layout. */
int lv_sana_config_same(const lv_sana_config *a, const lv_sana_config *b);

#endif
