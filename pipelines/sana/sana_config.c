/* The SANA-Video architecture config: presets for the released models, JSON in the keys of
 * the test weights' __metadata__.config or of a diffusers config.json, and the derived
 * fields (FFN width, RoPE split, epsilons) that sana-video.md fixes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk/files.h"
#include "longvk/json.h"
#include "sana_config.h"

/* Generous bounds: they only stop absurd configs from asking for absurd allocations. */
#define MAX_CHANNELS 65536
#define MAX_DEPTH 1024
#define MAX_PATCH 64

typedef struct preset {
    const char *name;
    int in_channels, out_channels, hidden, depth, heads, head_dim, caption, patch[3];
    double mlp_ratio;
} preset;

/* SanaMSVideo_2000M_P2_D20 (pipelines/sana/README.md); the 720p release works in LTX-2
 * latents with patch 1x1x1 (convert_sana_video_to_diffusers.py). */
static const preset presets[] = {
    {"sana-video-2b-480p", 16, 16, 2240, 20, 20, 112, 2304, {1, 2, 2}, 3.0},
    {"sana-video-2b-720p", 128, 128, 2240, 20, 20, 112, 2304, {1, 1, 1}, 3.0},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *lv_sana_preset_name(int i) { return i >= 0 && i < NPRESETS ? presets[i].name : NULL; }

lv_status lv_sana_config_finish(lv_sana_config *c, const char *source) {
    struct { const char *name; int value, max; } ints[] = {
        {"in_channels", c->in_channels, MAX_CHANNELS}, {"out_channels", c->out_channels, MAX_CHANNELS},
        {"depth", c->depth, MAX_DEPTH},                {"num_heads", c->heads, MAX_CHANNELS},
        {"head_dim", c->head_dim, MAX_CHANNELS},       {"caption_channels", c->caption_channels, MAX_CHANNELS},
        {"patch_size[0]", c->patch[0], MAX_PATCH},     {"patch_size[1]", c->patch[1], MAX_PATCH},
        {"patch_size[2]", c->patch[2], MAX_PATCH},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].value < 1 || ints[i].value > ints[i].max)
            return lv_error(LV_ERR_INVALID, "%s: config %s = %d is out of range [1, %d]", source, ints[i].name,
                            ints[i].value, ints[i].max);
    if ((long)c->heads * c->head_dim > MAX_CHANNELS)
        return lv_error(LV_ERR_INVALID, "%s: config num_heads x head_dim = %d x %d is too large", source,
                        c->heads, c->head_dim);
    if (c->hidden == 0) c->hidden = c->heads * c->head_dim;
    if (c->hidden != c->heads * c->head_dim)
        return lv_error(LV_ERR_INVALID, "%s: config hidden_size %d is not num_heads x head_dim = %d x %d", source,
                        c->hidden, c->heads, c->head_dim);
    /* RoPE: h = w = 2 (head_dim / 6) real dims, t the rest; every axis needs whole pairs. */
    if (c->head_dim < 6 || c->head_dim % 2)
        return lv_error(LV_ERR_INVALID, "%s: config head_dim %d must be even and at least 6 (3D RoPE)", source,
                        c->head_dim);
    if (!(c->mlp_ratio > 0) || !isfinite(c->mlp_ratio) || c->mlp_ratio > 64)
        return lv_error(LV_ERR_INVALID, "%s: config mlp_ratio %g is out of range (0, 64]", source, c->mlp_ratio);
    c->ffn_hidden = (int)(c->hidden * c->mlp_ratio);
    if (c->ffn_hidden < 1)
        return lv_error(LV_ERR_INVALID, "%s: config hidden_size x mlp_ratio = %d x %g gives no FFN channels", source,
                        c->hidden, c->mlp_ratio);
    c->rope_dims[1] = c->rope_dims[2] = 2 * (c->head_dim / 6);
    c->rope_dims[0] = c->head_dim - c->rope_dims[1] - c->rope_dims[2];
    if (c->rope_theta == 0.0f) c->rope_theta = 10000.0f; /* SANA-Video's; a config may set "rope_theta" */
    c->qk_norm_eps = 1e-5f;
    c->cross_norm_eps = 1e-6f;
    c->caption_norm_eps = 1e-5f;
    c->ln_eps = 1e-6f;
    c->attn_eps = 1e-8f;
    return LV_OK;
}

lv_status lv_sana_config_preset(const char *name, lv_sana_config *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < NPRESETS; i++) {
        const preset *p = &presets[i];
        if (!name || strcmp(name, p->name) != 0) continue;
        out->in_channels = p->in_channels;
        out->out_channels = p->out_channels;
        out->hidden = p->hidden;
        out->depth = p->depth;
        out->heads = p->heads;
        out->head_dim = p->head_dim;
        out->caption_channels = p->caption;
        memcpy(out->patch, p->patch, sizeof out->patch);
        out->mlp_ratio = p->mlp_ratio;
        return lv_sana_config_finish(out, p->name);
    }
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < NPRESETS && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", presets[i].name);
    return lv_error(LV_ERR_INVALID, "unknown preset '%s' (presets: %s)", name ? name : "(null)", list);
}

/* The first of `keys` present in `obj`; *used names it. */
static const cJSON *find_key(const cJSON *obj, const char *const *keys, const char **used) {
    for (; *keys; keys++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, *keys);
        if (v) {
            *used = *keys;
            return v;
        }
    }
    return NULL;
}

/* The first of `keys` present (null counts as absent unless required). */
static lv_status get_int(const lv_json_obj *config, const char *const *keys, int required, int *out) {
    const char *used = keys[0];
    const cJSON *v = find_key(config->obj, keys, &used);
    if (!v || (cJSON_IsNull(v) && !required)) {
        if (!required) return LV_OK;
        if (keys[1]) return lv_json_error(config, keys[0], "(or '%s') is missing", keys[1]);
        return lv_json_error(config, keys[0], "is missing");
    }
    return lv_json_int_value(config, used, v, 0, 1000000000, out);
}

lv_status lv_sana_config_from_json(const cJSON *obj, const char *source, lv_sana_config *out) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(obj)) return lv_error(LV_ERR_INVALID, "%s: the config is not a JSON object", source);
    static const char *const k_hidden[] = {"hidden_size", "cross_attention_dim", NULL};
    static const char *const k_depth[] = {"depth", "num_layers", NULL};
    static const char *const k_heads[] = {"num_heads", "num_attention_heads", NULL};
    static const char *const k_head_dim[] = {"head_dim", "attention_head_dim", NULL};
    static const char *const k_in[] = {"in_channels", NULL};
    static const char *const k_out[] = {"out_channels", NULL};
    static const char *const k_caption[] = {"caption_channels", NULL};
    const lv_json_obj config = {.obj = obj, .source = source, .key_format = "config key '%s'",
                                .status = LV_ERR_INVALID};
    LV_TRY(get_int(&config, k_depth, 1, &out->depth));
    LV_TRY(get_int(&config, k_heads, 1, &out->heads));
    LV_TRY(get_int(&config, k_head_dim, 1, &out->head_dim));
    LV_TRY(get_int(&config, k_in, 1, &out->in_channels));
    LV_TRY(get_int(&config, k_caption, 1, &out->caption_channels));
    LV_TRY(get_int(&config, k_hidden, 0, &out->hidden));
    LV_TRY(get_int(&config, k_out, 0, &out->out_channels));
    if (!out->out_channels) out->out_channels = out->in_channels;
    if (out->hidden == 0 && cJSON_GetObjectItemCaseSensitive(obj, "hidden_size"))
        return lv_error(LV_ERR_INVALID, "%s: config hidden_size is 0", source);

    const cJSON *patch = cJSON_GetObjectItemCaseSensitive(obj, "patch_size");
    if (!patch) return lv_error(LV_ERR_INVALID, "%s: config key 'patch_size' is missing", source);
    if (!cJSON_IsArray(patch) || cJSON_GetArraySize(patch) != 3)
        return lv_error(LV_ERR_INVALID, "%s: config patch_size must be a list of 3 positive integers [t, h, w]",
                        source);
    int i = 0;
    for (const cJSON *e = patch->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || floor(e->valuedouble) != e->valuedouble || e->valuedouble < 1 ||
            e->valuedouble > MAX_PATCH)
            return lv_error(LV_ERR_INVALID, "%s: config patch_size[%d] is not an integer in [1, %d]", source, i,
                            MAX_PATCH);
        out->patch[i] = (int)e->valuedouble;
    }
    const cJSON *ratio = cJSON_GetObjectItemCaseSensitive(obj, "mlp_ratio");
    if (!ratio) return lv_error(LV_ERR_INVALID, "%s: config key 'mlp_ratio' is missing", source);
    if (!cJSON_IsNumber(ratio)) return lv_error(LV_ERR_INVALID, "%s: config mlp_ratio is not a number", source);
    out->mlp_ratio = ratio->valuedouble;
    const cJSON *theta = cJSON_GetObjectItemCaseSensitive(obj, "rope_theta");
    if (theta) {
        if (!cJSON_IsNumber(theta) || !(theta->valuedouble >= 2.0 && theta->valuedouble <= 1e9))
            return lv_error(LV_ERR_INVALID, "%s: config rope_theta must be a number in [2, 1e9]", source);
        out->rope_theta = (float)theta->valuedouble;
    }
    return lv_sana_config_finish(out, source);
}

lv_status lv_sana_config_parse(const char *json, size_t len, const char *source, lv_sana_config *out) {
    memset(out, 0, sizeof *out);
    if (!source) source = "config";
    if (!json) return lv_error(LV_ERR_INVALID, "%s: no config text", source);
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!obj) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return lv_error(LV_ERR_INVALID, "%s: config is not valid JSON (near byte %zu)", source, at);
    }
    lv_status s = lv_sana_config_from_json(obj, source, out);
    cJSON_Delete(obj);
    return s;
}

lv_status lv_sana_config_load(const char *path, lv_sana_config *out) {
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *text = lv_read_text_file(path, &len); /* a FIFO or a device is refused before any read */
    if (!text) return LV_ERR_IO;
    lv_status s = lv_sana_config_parse(text, len, path, out);
    free(text);
    return s;
}

lv_status lv_sana_config_to_json(const lv_sana_config *c, char *buf, size_t size) {
    int n = snprintf(buf, size,
                     "{\"hidden_size\": %d, \"depth\": %d, \"num_heads\": %d, \"head_dim\": %d, "
                     "\"patch_size\": [%d, %d, %d], \"in_channels\": %d, \"out_channels\": %d, "
                     "\"caption_channels\": %d, \"mlp_ratio\": %.17g",
                     c->hidden, c->depth, c->heads, c->head_dim, c->patch[0], c->patch[1], c->patch[2],
                     c->in_channels, c->out_channels, c->caption_channels, c->mlp_ratio);
    /* rope_theta only where it is not SANA-Video's 10000, as model.py writes it */
    if (n >= 0 && (size_t)n < size)
        n += c->rope_theta != 10000.0f ? snprintf(buf + n, size - (size_t)n, ", \"rope_theta\": %.9g}", (double)c->rope_theta)
                                       : snprintf(buf + n, size - (size_t)n, "}");
    if (n < 0 || (size_t)n >= size) return lv_error(LV_ERR_INVALID, "config JSON needs %d bytes", n + 1);
    return LV_OK;
}

const char *lv_sana_config_describe(const lv_sana_config *c, char *buf, size_t size) {
    snprintf(buf, size,
             "hidden %d, depth %d, %d heads x %d, FFN %d (mlp ratio %g), patch (%d, %d, %d), "
             "%d -> %d latent channels, caption %d",
             c->hidden, c->depth, c->heads, c->head_dim, c->ffn_hidden, c->mlp_ratio, c->patch[0], c->patch[1],
             c->patch[2], c->in_channels, c->out_channels, c->caption_channels);
    return buf;
}

int lv_sana_config_same(const lv_sana_config *a, const lv_sana_config *b) {
    return a->in_channels == b->in_channels && a->out_channels == b->out_channels && a->hidden == b->hidden &&
           a->depth == b->depth && a->heads == b->heads && a->head_dim == b->head_dim &&
           a->caption_channels == b->caption_channels && a->patch[0] == b->patch[0] &&
           a->patch[1] == b->patch[1] && a->patch[2] == b->patch[2] && a->ffn_hidden == b->ffn_hidden &&
           a->rope_theta == b->rope_theta;
}
