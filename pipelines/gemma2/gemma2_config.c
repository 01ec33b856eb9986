/* The Gemma-2 config: google/gemma-2-2b-it's values (transformers' Gemma2Config defaults),
 * and a Hugging Face config.json (or a safetensors __metadata__.config) read over them. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma2_internal.h"
#include "longvk/files.h"
#include "longvk/json.h"

void lv_gemma2_config_default(lv_gemma2_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 256000;
    c->hidden_size = 2304;
    c->intermediate_size = 9216;
    c->num_layers = 26;
    c->num_heads = 8;
    c->num_kv_heads = 4;
    c->head_dim = 256;
    c->query_pre_attn_scalar = 256;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000.0;
    c->attn_logit_softcapping = 50.0;
    c->final_logit_softcapping = 30.0;
    c->sliding_window = 4096;
    c->max_position_embeddings = 8192;
    c->pad_token_id = 0;
    c->eos_token_id = 1;
    c->bos_token_id = 2;
    for (int i = 0; i < LV_GEMMA2_MAX_LAYERS; i++) c->sliding[i] = (unsigned char)(i % 2 == 0);
}

/* Generous bounds: they stop absurd configs from asking for absurd allocations. */
typedef struct int_key {
    const char *name;
    int *dst;
    int min, max;
    int nullable; /* JSON null means 0 */
} int_key;

/* absent: the default stays; null, where allowed: 0 */
static lv_status read_int(const lv_json_obj *config, const int_key *k) {
    lv_json_obj j = *config;
    j.nullable = k->nullable;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j.obj, k->name);
    if (cJSON_IsNull(v) && k->nullable) {
        *k->dst = 0;
        return LV_OK;
    }
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 && strstr(k->name, "token_id"))
        return lv_json_int_value(&j, k->name, v->child, k->min, k->max, k->dst); /* "eos_token_id": [1, 107]: the first */
    return lv_json_int(&j, k->name, k->min, k->max, false, k->dst, NULL);
}

typedef struct real_key {
    const char *name;
    double *dst;
    double min, max; /* open at min when min_open */
    int min_open;
    int nullable;
} real_key;

static lv_status read_real(const lv_json_obj *config, const real_key *k) {
    lv_json_obj j = *config;
    j.nullable = k->nullable;
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j.obj, k->name)) && k->nullable) {
        *k->dst = 0;
        return LV_OK;
    }
    return lv_json_number(&j, k->name, k->min, k->max, k->min_open, false, k->dst, NULL);
}

static lv_status from_json(const cJSON *root, const char *source, lv_gemma2_config *c) {
    if (!cJSON_IsObject(root)) return lv_error(LV_ERR_INVALID, "%s: the config is not a JSON object", source);
    const cJSON *obj = root;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (cJSON_IsObject(text)) obj = text;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "model_type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "gemma2") != 0))
        return lv_error(LV_ERR_UNSUPPORTED, "%s: config model_type is %s%s%s, not \"gemma2\"", source,
                        cJSON_IsString(type) ? "\"" : "", cJSON_IsString(type) ? type->valuestring : "not a string",
                        cJSON_IsString(type) ? "\"" : "");
    lv_gemma2_config_default(c);
    const int_key ints[] = {
        {"vocab_size", &c->vocab_size, 1, 1 << 24, 0},
        {"hidden_size", &c->hidden_size, 1, 65536, 0},
        {"intermediate_size", &c->intermediate_size, 1, 1 << 20, 0},
        {"num_hidden_layers", &c->num_layers, 1, LV_GEMMA2_MAX_LAYERS, 0},
        {"num_attention_heads", &c->num_heads, 1, 1024, 0},
        {"num_key_value_heads", &c->num_kv_heads, 1, 1024, 0},
        {"head_dim", &c->head_dim, 2, 65536, 0},
        {"sliding_window", &c->sliding_window, 0, 1 << 30, 1},
        {"max_position_embeddings", &c->max_position_embeddings, 1, 1 << 30, 0},
        {"pad_token_id", &c->pad_token_id, 0, 1 << 24, 0},
        {"eos_token_id", &c->eos_token_id, 0, 1 << 24, 0},
        {"bos_token_id", &c->bos_token_id, 0, 1 << 24, 0},
    };
    const lv_json_obj config = {.obj = obj, .source = source, .key_format = "config %s", .status = LV_ERR_INVALID};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) LV_TRY(read_int(&config, &ints[i]));
    const real_key reals[] = {
        {"query_pre_attn_scalar", &c->query_pre_attn_scalar, 0, 1e9, 1, 0},
        {"rms_norm_eps", &c->rms_norm_eps, 0, 1, 1, 0},
        {"rope_theta", &c->rope_theta, 1, 1e12, 1, 0},
        {"attn_logit_softcapping", &c->attn_logit_softcapping, 0, 1e9, 0, 1},
        {"final_logit_softcapping", &c->final_logit_softcapping, 0, 1e9, 0, 1},
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) LV_TRY(read_real(&config, &reals[i]));
    if (c->num_heads % c->num_kv_heads != 0)
        return lv_error(LV_ERR_INVALID, "%s: config num_key_value_heads %d does not divide num_attention_heads %d",
                        source, c->num_kv_heads, c->num_heads);
    if (c->head_dim % 2 != 0)
        return lv_error(LV_ERR_INVALID, "%s: config head_dim %d must be even (rotary pairs)", source, c->head_dim);
    if ((long)c->num_heads * c->head_dim > 65536)
        return lv_error(LV_ERR_INVALID, "%s: config num_attention_heads x head_dim = %d x %d is too large", source,
                        c->num_heads, c->head_dim);
    const char *act_keys[] = {"hidden_activation", "hidden_act"};
    for (int i = 0; i < 2; i++) {
        const cJSON *act = cJSON_GetObjectItemCaseSensitive(obj, act_keys[i]);
        if (!act || cJSON_IsNull(act)) continue;
        const char *a = cJSON_IsString(act) ? act->valuestring : "";
        if (strcmp(a, "gelu_pytorch_tanh") && strcmp(a, "gelu_tanh") && strcmp(a, "gelu_new"))
            return lv_error(LV_ERR_UNSUPPORTED, "%s: config %s \"%s\": only the tanh GELU (gelu_pytorch_tanh) is "
                            "implemented", source, act_keys[i], a);
        break; /* hidden_activation wins over hidden_act, as in transformers */
    }
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(obj, "attention_bias");
    if (cJSON_IsTrue(bias))
        return lv_error(LV_ERR_UNSUPPORTED, "%s: config attention_bias is true: biases are not implemented", source);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(obj, "layer_types");
    if (types && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->num_layers)
            return lv_error(LV_ERR_INVALID, "%s: config layer_types must be an array of num_hidden_layers = %d "
                            "entries", source, c->num_layers);
        int i = 0;
        for (const cJSON *e = types->child; e; e = e->next, i++) {
            const char *t = cJSON_IsString(e) ? e->valuestring : "";
            if (!strcmp(t, "sliding_attention")) c->sliding[i] = 1;
            else if (!strcmp(t, "full_attention")) c->sliding[i] = 0;
            else
                return lv_error(LV_ERR_INVALID, "%s: config layer_types[%d] is not \"sliding_attention\" or "
                                "\"full_attention\"", source, i);
        }
    }
    for (int i = c->num_layers; i < LV_GEMMA2_MAX_LAYERS; i++) c->sliding[i] = 0;
    return LV_OK;
}

lv_status lv_gemma2_config_parse(const char *json, size_t len, const char *source, lv_gemma2_config *out) {
    if (!source) source = "config";
    if (!json || !out) return lv_error(LV_ERR_INVALID, "lv_gemma2_config_parse: no text or no output");
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return lv_error(LV_ERR_FORMAT, "%s: not valid JSON", source);
    lv_gemma2_config c;
    lv_status s = from_json(root, source, &c);
    cJSON_Delete(root);
    if (s == LV_OK) *out = c;
    return s;
}

lv_status lv_gemma2_config_load(const char *path, lv_gemma2_config *out) {
    if (!path) return lv_error(LV_ERR_INVALID, "lv_gemma2_config_load: no path");
    size_t len = 0;
    char *text = lv_read_text_file(path, &len);
    if (!text) return LV_ERR_IO; /* the message says why */
    lv_status s = lv_gemma2_config_parse(text, len, path, out);
    free(text);
    return s;
}

const char *lv_gemma2_config_describe(const lv_gemma2_config *c, char *buf, size_t size) {
    int sliding = 0;
    for (int i = 0; i < c->num_layers && i < LV_GEMMA2_MAX_LAYERS; i++) sliding += c->sliding[i];
    snprintf(buf, size,
             "hidden %d, %d layers, %d heads (%d kv) x %d, MLP %d, vocab %d, window %d on %d layers, "
             "soft-cap %g",
             c->hidden_size, c->num_layers, c->num_heads, c->num_kv_heads, c->head_dim, c->intermediate_size,
             c->vocab_size, c->sliding_window, sliding, c->attn_logit_softcapping);
    return buf;
}
