/* Typed keys of a JSON object with errors that name the file and the key (longvk/json.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "longvk/json.h"

/* "config key 'depth'": the key as the reader names it */
static void key_name(const lv_json_obj *o, const char *key, char *out, size_t size) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
    snprintf(out, size, o->key_format ? o->key_format : "%s", key);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

lv_status lv_json_error(const lv_json_obj *o, const char *key, const char *fmt, ...) {
    char name[256], rest[512];
    key_name(o, key, name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    return lv_error(o->status, "%s: %s %s", o->source ? o->source : "JSON", name, rest);
}

const cJSON *lv_json_get(const lv_json_obj *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o->obj, key);
    return v && o->nullable && cJSON_IsNull(v) ? NULL : v;
}

/* Absent: an error when required; else LV_OK with *present false. */
static lv_status absent(const lv_json_obj *o, const char *key, bool required, bool *present) {
    if (present) *present = false;
    return required ? lv_json_error(o, key, "is missing") : LV_OK;
}

lv_status lv_json_int_value(const lv_json_obj *o, const char *key, const cJSON *v, int lo, int hi, int *out) {
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble || v->valuedouble < lo || v->valuedouble > hi)
        return lv_json_error(o, key, "must be an integer in [%d, %d]%s", lo, hi, o->nullable ? " or null" : "");
    *out = (int)v->valuedouble;
    return LV_OK;
}

lv_status lv_json_int(const lv_json_obj *o, const char *key, int lo, int hi, bool required, int *out,
                      bool *present) {
    const cJSON *v = lv_json_get(o, key);
    if (!v) return absent(o, key, required, present);
    LV_TRY(lv_json_int_value(o, key, v, lo, hi, out));
    if (present) *present = true;
    return LV_OK;
}

lv_status lv_json_number(const lv_json_obj *o, const char *key, double lo, double hi, bool lo_open,
                         bool required, double *out, bool *present) {
    const cJSON *v = lv_json_get(o, key);
    if (!v) return absent(o, key, required, present);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
        return lv_json_error(o, key, "must be a number in %c%g, %g]%s", lo_open ? '(' : '[', lo, hi,
                             o->nullable ? " or null" : "");
    *out = x;
    if (present) *present = true;
    return LV_OK;
}
