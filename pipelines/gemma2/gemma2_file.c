/* Opening a Gemma-2 model: the weights (one safetensors file, a sharded index, or a model
 * directory), the config, and every tensor checked before any device work. Problems are
 * collected so that one message names the first in full and lists the others. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gemma2_internal.h"
#include "longvk/files.h"

#define PREFIX_MAX 128

const char *const g2_layer_names[G2_LAYER_TENSORS] = {
    "input_layernorm.weight",    "self_attn.q_proj.weight",        "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",   "self_attn.o_proj.weight",        "post_attention_layernorm.weight",
    "pre_feedforward_layernorm.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",      "post_feedforward_layernorm.weight",
};
const int g2_layer_is_matmul[G2_LAYER_TENSORS] = {0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};

void g2_layer_shape(const lv_gemma2_config *c, int t, int64_t shape[2], int *ndim) {
    int64_t H = c->hidden_size, I = c->intermediate_size, QW = (int64_t)c->num_heads * c->head_dim,
            KW = (int64_t)c->num_kv_heads * c->head_dim;
    *ndim = 2;
    switch (t) {
    case G2_Q: shape[0] = QW, shape[1] = H; break;
    case G2_K:
    case G2_V: shape[0] = KW, shape[1] = H; break;
    case G2_O: shape[0] = H, shape[1] = QW; break;
    case G2_GATE:
    case G2_UP: shape[0] = I, shape[1] = H; break;
    case G2_DOWN: shape[0] = H, shape[1] = I; break;
    default: shape[0] = H, shape[1] = 0, *ndim = 1; break;
    }
}

struct lv_gemma2_file {
    lv_weight_set set; /* the file, or its shards */
    char path[4096];
    char prefix[PREFIX_MAX];
    lv_gemma2_config cfg;
    char config_source[700];
    const lv_weight *embed, *norm;
    const lv_weight *(*layers)[G2_LAYER_TENSORS];
    uint64_t params, bytes;
    int llama_names; /* a GGUF from llama.cpp: its names, its config, norms stored as 1 + w */
};

/* ---- the weights ----------------------------------------------------------------------- */

/* Opens the weights; *config_dir receives the directory where config.json may be. */
static lv_status open_weights(lv_gemma2_file *f, const char *path, char *config_dir, size_t size) {
    char candidate[4200], dir[4200], sub[4200];
    if (lv_path_is_dir(path)) {
        snprintf(dir, sizeof dir, "%.4000s", path);
        /* a diffusers pipeline folder: its text_encoder/ */
        snprintf(candidate, sizeof candidate, "%.4000s/model.safetensors", path);
        snprintf(sub, sizeof sub, "%.4000s/model.safetensors.index.json", path);
        int here = lv_path_is_file(candidate) || lv_path_is_file(sub);
        snprintf(sub, sizeof sub, "%.4000s/text_encoder", path);
        if (!here && lv_path_is_dir(sub)) snprintf(dir, sizeof dir, "%.4000s", sub);
        snprintf(config_dir, size, "%.4000s", dir);
        snprintf(candidate, sizeof candidate, "%.4000s/model.safetensors.index.json", dir);
        if (lv_path_is_file(candidate)) return lv_weight_set_add_index(&f->set, candidate, dir);
        snprintf(candidate, sizeof candidate, "%.4000s/model.safetensors", dir);
        if (lv_path_is_file(candidate)) return lv_weight_set_add(&f->set, candidate, NULL, 0);
        return lv_error(LV_ERR_IO,
                        "%s: a directory without model.safetensors or model.safetensors.index.json (nor a "
                        "text_encoder/ folder holding them): give the weights file itself",
                        path);
    }
    lv_path_dir(path, config_dir, size);
    if (lv_path_ends_with(path, ".index.json")) return lv_weight_set_add_index(&f->set, path, config_dir);
    return lv_weight_set_add(&f->set, path, NULL, 0);
}

/* The name `name` (Hugging Face's, without "model.") has in the file. */
static const char *file_name(const lv_gemma2_file *f, const char *name, char *buf, size_t size) {
    if (f->llama_names) return g2_gguf_name(name, buf, size);
    snprintf(buf, size, "%s%s", f->prefix, name);
    return buf;
}

static const lv_weight *find(const lv_gemma2_file *f, const char *name) {
    char full[PREFIX_MAX + 256];
    return lv_weight_set_find(&f->set, file_name(f, name, full, sizeof full), NULL);
}

/* The prefix before "embed_tokens.weight" ("model." for Gemma2ForCausalLM, "" for
 * Gemma2Model). */
static lv_status detect_prefix(lv_gemma2_file *f) {
    static const char key[] = "embed_tokens.weight";
    int total = 0;
    if ((f->llama_names = g2_gguf_has_llama_names(&f->set))) return LV_OK;
    for (int s = 0; s < f->set.count; s++)
        for (int i = 0; i < lv_weights_count(f->set.files[s]); i++) {
            const char *n = lv_weights_at(f->set.files[s], i)->name;
            total++;
            size_t len = strlen(n), k = sizeof key - 1;
            if (len < k || strcmp(n + len - k, key) != 0 || len - k >= PREFIX_MAX) continue;
            if (len > k && n[len - k - 1] != '.') continue;
            snprintf(f->prefix, sizeof f->prefix, "%.*s", (int)(len - k), n);
            return LV_OK;
        }
    return lv_error(LV_ERR_FORMAT,
                    "%s: not a Gemma-2 model: none of its %d tensors is embed_tokens.weight (or "
                    "model.embed_tokens.weight, or llama.cpp's token_embd.weight)",
                    f->path, total);
}

/* ---- the config ------------------------------------------------------------------------- */

static lv_status choose_config(lv_gemma2_file *f, const char *config_path, const char *config_dir) {
    if (config_path) {
        LV_TRY(lv_gemma2_config_load(config_path, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "config file %.600s", config_path);
        return LV_OK;
    }
    if (f->llama_names) {
        LV_TRY(g2_gguf_config(f->set.files[0], f->path, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "the GGUF metadata of %.600s", f->path);
        return LV_OK;
    }
    for (int s = 0; s < f->set.count; s++) {
        const char *json = lv_weights_metadata(f->set.files[s], "config");
        if (!json) continue;
        char source[700];
        snprintf(source, sizeof source, "%.600s (__metadata__.config)", lv_weights_path(f->set.files[s]));
        LV_TRY(lv_gemma2_config_parse(json, strlen(json), source, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "__metadata__.config of %.600s",
                 lv_weights_path(f->set.files[s]));
        return LV_OK;
    }
    char candidate[4200];
    snprintf(candidate, sizeof candidate, "%.4000s/config.json", config_dir);
    if (lv_path_is_file(candidate)) {
        LV_TRY(lv_gemma2_config_load(candidate, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "%.690s", candidate);
        return LV_OK;
    }
    return lv_error(LV_ERR_INVALID,
                    "%s: no config: the weights have no __metadata__.config and there is no %s: give the model's "
                    "config.json",
                    f->path, candidate);
}

/* ---- the tensors ------------------------------------------------------------------------ */

static int is_float(lv_dtype d) { return d == LV_F32 || d == LV_F16 || d == LV_BF16; }

/* `quantized`: q8_0 / q4_k are fine too (the matrices and the embedding table of a GGUF) */
static const lv_weight *check_one(lv_gemma2_file *f, lv_problems *pb, const char *name, int ndim,
                                  const int64_t *shape, int quantized) {
    char want[96], got[96], buf[PREFIX_MAX + 256];
    const char *full = file_name(f, name, buf, sizeof buf);
    lv_shape_format(shape, ndim, want, sizeof want);
    const lv_weight *t = find(f, name);
    if (!t) {
        lv_problem(pb, full, "tensor '%s' is missing (expected shape %s)", full, want);
        return NULL;
    }
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        lv_shape_format(t->shape, t->ndim, got, sizeof got);
        lv_problem(pb, full, "tensor '%s' has shape %s in the file, the config needs %s", full, got, want);
        return NULL;
    }
    if (!is_float(t->dtype) && !(quantized && lv_dtype_quantized(t->dtype))) {
        lv_problem(pb, full, "tensor '%s' has dtype %s, not a float type (f32, f16, bf16%s)", full,
                lv_dtype_name(t->dtype), quantized ? ", q8_0, q4_k" : ": a norm is read as a float");
        return NULL;
    }
    f->params += lv_weight_numel(t);
    f->bytes += t->nbytes;
    return t;
}

/* "layers.N." right after the prefix (llama.cpp's "blk.N."): N, else -1. */
static int layer_index(const lv_gemma2_file *f, const char *name) {
    size_t p = strlen(f->prefix);
    const char *layers = f->llama_names ? "blk." : "layers.";
    size_t k = strlen(layers);
    if (strncmp(name, f->prefix, p) != 0 || strncmp(name + p, layers, k) != 0) return -1;
    char *end = NULL;
    long v = strtol(name + p + k, &end, 10);
    return end && *end == '.' && v >= 0 && v < (1L << 20) ? (int)v : -1;
}

static lv_status check_tensors(lv_gemma2_file *f) {
    const lv_gemma2_config *c = &f->cfg;
    lv_problems pb = {0};
    int64_t shape[2] = {c->vocab_size, c->hidden_size};
    f->embed = check_one(f, &pb, "embed_tokens.weight", 2, shape, 1);
    shape[0] = c->hidden_size;
    f->norm = check_one(f, &pb, "norm.weight", 1, shape, 0);
    f->layers = calloc((size_t)c->num_layers, sizeof *f->layers);
    if (!f->layers) return lv_error(LV_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->num_layers; l++)
        for (int t = 0; t < G2_LAYER_TENSORS; t++) {
            char name[256];
            int ndim;
            snprintf(name, sizeof name, "layers.%d.%s", l, g2_layer_names[t]);
            g2_layer_shape(c, t, shape, &ndim);
            f->layers[l][t] = check_one(f, &pb, name, ndim, shape, g2_layer_is_matmul[t]);
        }
    /* a layer past the config's count means the config is wrong */
    for (int s = 0; s < f->set.count; s++)
        for (int i = 0; i < lv_weights_count(f->set.files[s]); i++) {
            const char *n = lv_weights_at(f->set.files[s], i)->name;
            int l = layer_index(f, n);
            if (l >= c->num_layers)
                lv_problem(&pb, n, "tensor '%s' belongs to layer %d but the config has %d layers: wrong config?", n, l,
                        c->num_layers);
        }
    if (pb.n) {
        char cfg[300];
        lv_gemma2_config_describe(c, cfg, sizeof cfg);
        if (pb.n == 1)
            return lv_error(LV_ERR_INVALID, "%s: %s [config from %s: %s]", f->path, pb.first, f->config_source, cfg);
        return lv_error(LV_ERR_INVALID, "%s: %s; %d more problem%s: %s [config from %s: %s]", f->path, pb.first,
                        pb.n - 1, pb.n > 2 ? "s" : "", pb.others, f->config_source, cfg);
    }
    return LV_OK;
}

lv_status lv_gemma2_file_open(const char *path, const char *config_path, lv_gemma2_file **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_gemma2_file_open: no output pointer");
    *out = NULL;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "lv_gemma2_file_open: no path");
    if (strlen(path) > 4000) return lv_error(LV_ERR_INVALID, "lv_gemma2_file_open: a path of %zu bytes", strlen(path));
    lv_gemma2_file *f = calloc(1, sizeof *f);
    if (!f) return lv_error(LV_ERR_NOMEM, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    char config_dir[4200];
    lv_status s = open_weights(f, path, config_dir, sizeof config_dir);
    if (s == LV_OK) s = detect_prefix(f);
    if (s == LV_OK) s = choose_config(f, config_path, config_dir);
    if (s == LV_OK) s = check_tensors(f);
    if (s != LV_OK) {
        lv_gemma2_file_close(f);
        return s;
    }
    *out = f;
    return LV_OK;
}

void lv_gemma2_file_close(lv_gemma2_file *f) {
    if (!f) return;
    lv_weight_set_close(&f->set);
    free(f->layers);
    free(f);
}

const lv_gemma2_config *lv_gemma2_file_config(const lv_gemma2_file *f) { return f ? &f->cfg : NULL; }
const char *lv_gemma2_file_config_source(const lv_gemma2_file *f) { return f ? f->config_source : ""; }
uint64_t lv_gemma2_file_param_count(const lv_gemma2_file *f) { return f ? f->params : 0; }
uint64_t lv_gemma2_file_param_bytes(const lv_gemma2_file *f) { return f ? f->bytes : 0; }
lv_dtype lv_gemma2_file_dtype(const lv_gemma2_file *f) {
    return f && f->layers ? f->layers[0][G2_Q]->dtype : LV_F32;
}

const lv_weight *lv_gemma2_file_tensor(const lv_gemma2_file *f, const char *name) {
    if (!f || !name) return NULL;
    if (!strcmp(name, "embed_tokens.weight")) return f->embed;
    if (!strcmp(name, "norm.weight")) return f->norm;
    if (strncmp(name, "layers.", 7) != 0) return NULL;
    char *end = NULL;
    long l = strtol(name + 7, &end, 10);
    if (!end || *end != '.' || l < 0 || l >= f->cfg.num_layers) return NULL;
    for (int t = 0; t < G2_LAYER_TENSORS; t++)
        if (!strcmp(end + 1, g2_layer_names[t])) return f->layers[l][t];
    return NULL;
}

const lv_weight *const *g2_file_layer(const lv_gemma2_file *f, int layer) { return f->layers[layer]; }
const lv_weight *g2_file_embed(const lv_gemma2_file *f) { return f->embed; }
const lv_weight *g2_file_norm(const lv_gemma2_file *f) { return f->norm; }
int g2_file_norms_hold_one(const lv_gemma2_file *f) { return f->llama_names; }
