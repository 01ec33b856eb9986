/* Typed keys of a JSON object (cJSON), read with errors that name the file and the key: the
 * readers of model configs and cards (Gemma-2's config.json, SANA-Video's, the "longvk" card)
 * share these instead of a copy of the checks each.
 *
 * A lv_json_obj says where the object came from and how messages name its keys: `source`
 * (the file) and `key_format`, a printf format with one %s for the key ("config %s",
 * "config key '%s'", "\"%s\""), so a message reads "SOURCE: config key 'depth' must be an
 * integer in [0, 1000000000]". A key that is absent, or JSON null when `nullable`, is
 * not an error unless `required` ("... is missing"); *out is then left as it is, and
 * *present (when not NULL) says which. */
#ifndef LONGVK_JSON_H
#define LONGVK_JSON_H

#include <stdbool.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef struct lv_json_obj {
    const struct cJSON *obj;
    const char *source;     /* the file, or what the text came from */
    const char *key_format; /* how a key is named: a format with one %s */
    lv_status status;       /* of every error: LV_ERR_INVALID or LV_ERR_FORMAT */
    bool nullable;          /* JSON null is accepted: it counts as absent ("... or null") */
} lv_json_obj;

/* The key's value, or NULL (absent, or null when null_is_absent). */
const struct cJSON *lv_json_get(const lv_json_obj *o, const char *key);
/* An integer in [lo, hi]. */
lv_status lv_json_int(const lv_json_obj *o, const char *key, int lo, int hi, bool required, int *out,
                      bool *present);
/* The same check of a value found otherwise (an array's element), named as `key`. */
lv_status lv_json_int_value(const lv_json_obj *o, const char *key, const struct cJSON *v, int lo, int hi, int *out);
/* A finite number in [lo, hi] (in (lo, hi] when lo_open). */
lv_status lv_json_number(const lv_json_obj *o, const char *key, double lo, double hi, bool lo_open,
                         bool required, double *out, bool *present);
/* The error "SOURCE: <key> " + the rest, for checks of the caller's own (status o->status). */
lv_status lv_json_error(const lv_json_obj *o, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
