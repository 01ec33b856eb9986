/* Opening a SANA-Video model: the weights (one file, a diffusers directory or a sharded
 * index), the config, and every check before any device work (see longvk/sana.h). Problems
 * are collected so that one message names the first in full and lists the others. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk/files.h"
#include "sana_config.h"
#include "sana_names.h"

struct lv_sana_file {
    lv_weight_set set; /* the weights file, or its shards */
    lv_sana_config cfg;
    char config_source[600];
    lv_sana_naming naming;
    lv_sana_tensor_spec *specs; /* expected tensors; owns their names */
    lv_weight *tensors;      /* one per spec, carrying the original name */
    int n_tensors;
    int *by_name;            /* tensor indices sorted by name */
    lv_weight *extras;
    unsigned char *extra_known;
    int n_extras;
    void **merged;           /* q/k/v concatenations (diffusers naming) */
    int n_merged;
    uint64_t params;
};

/* The same shape but for dims of 1 (the same row-major layout): a GGUF file stores a 1x1
 * conv's [N, K, 1, 1] as [N, K] (ggml's rows, its last dim, are whole blocks) and has at most
 * 4 dims (the patch embedding's [C, c, 1, 2, 2] becomes [C, c, 2, 2]). */
static int same_shape(const lv_weight *t, int ndim, const int64_t *shape) {
    int64_t a[LV_MAX_DIMS], b[LV_MAX_DIMS];
    int na = 0, nb = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) a[na++] = t->shape[i];
    for (int i = 0; i < ndim; i++)
        if (shape[i] != 1) b[nb++] = shape[i];
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* f32, f16, bf16, or ggml's q8_0 / q4_k (a quantized GGUF: the DiT reads matrices as blocks
 * and dequantises any other tensor on upload) */
static int is_float(lv_dtype d) { return d == LV_F32 || d == LV_F16 || d == LV_BF16 || lv_dtype_quantized(d); }

/* The tensor `name` in any shard; *src (if given) receives the shard's index. */
static const lv_weight *find_in(const lv_sana_file *f, const char *name, int *src) {
    return lv_weight_set_find(&f->set, name, src);
}

static const lv_weight *find_any(const lv_sana_file *f, const char *name) { return find_in(f, name, NULL); }

/* ---- locating the weights -------------------------------------------------------------- */

/* Opens the weights; *config_dir receives the directory where a diffusers config.json may be. */
static lv_status open_weights(lv_sana_file *f, const char *path, char *config_dir, size_t size) {
    char candidate[4096];
    if (lv_path_is_dir(path)) {
        snprintf(config_dir, size, "%s", path);
        snprintf(candidate, sizeof candidate, "%s/diffusion_pytorch_model.safetensors.index.json", path);
        if (lv_path_is_file(candidate)) return lv_weight_set_add_index(&f->set, candidate, path);
        snprintf(candidate, sizeof candidate, "%s/diffusion_pytorch_model.safetensors", path);
        if (lv_path_is_file(candidate)) return lv_weight_set_add(&f->set, candidate, NULL, 0);
        return lv_error(LV_ERR_IO,
                        "%s: a directory without diffusion_pytorch_model.safetensors or its .index.json: "
                        "give the weights file itself",
                        path);
    }
    lv_path_dir(path, config_dir, size);
    if (lv_path_ends_with(path, ".index.json")) return lv_weight_set_add_index(&f->set, path, config_dir);
    return lv_weight_set_add(&f->set, path, NULL, 0);
}

/* ---- naming and config ---------------------------------------------------------------- */

static lv_status detect_naming(lv_sana_file *f, const char *path) {
    const char *orig = NULL, *diff = NULL;
    int total = 0;
    for (int s = 0; s < f->set.count; s++)
        for (int i = 0; i < lv_weights_count(f->set.files[s]); i++) {
            const char *n = lv_weights_at(f->set.files[s], i)->name;
            total++;
            if (!orig && sana_is_model_name(n, LV_SANA_NAMES_ORIGINAL)) orig = n;
            if (!diff && sana_is_model_name(n, LV_SANA_NAMES_DIFFUSERS)) diff = n;
        }
    if (orig && diff)
        return lv_error(LV_ERR_FORMAT,
                        "%s: mixes original SANA-Video names ('%s') and diffusers names ('%s'): use one naming",
                        path, orig, diff);
    if (!orig && !diff)
        return lv_error(LV_ERR_FORMAT,
                        "%s: not a SANA-Video model: none of its %d tensors has a SANA-Video name "
                        "(x_embedder.proj.weight, blocks.N.*, or the diffusers patch_embedding.weight, "
                        "transformer_blocks.N.*)",
                        path, total);
    f->naming = orig ? LV_SANA_NAMES_ORIGINAL : LV_SANA_NAMES_DIFFUSERS;
    return LV_OK;
}

/* The file's tensor for an original single-part name, whatever the naming. */
static const lv_weight *find_mapped(const lv_sana_file *f, const char *original) {
    if (f->naming == LV_SANA_NAMES_ORIGINAL) return find_any(f, original);
    char parts[3][SANA_NAME_MAX];
    return sana_diffusers_parts(original, parts) == 1 ? find_any(f, parts[0]) : NULL;
}

/* With no config anywhere: read what the shapes tell and accept a preset that matches them.
 * The number of heads cannot be read from shapes, hence the preset. */
static lv_status infer_config(lv_sana_file *f, const char *path) {
    const lv_weight *x = find_mapped(f, "x_embedder.proj.weight");
    const lv_weight *fl = find_mapped(f, "final_layer.linear.weight");
    const lv_weight *fc1 = find_mapped(f, "y_embedder.y_proj.fc1.weight");
    const lv_weight *inv = find_mapped(f, "blocks.0.mlp.inverted_conv.conv.weight");
    int depth = 0;
    for (int s = 0; s < f->set.count; s++)
        for (int i = 0; i < lv_weights_count(f->set.files[s]); i++) {
            int b = sana_block_index(lv_weights_at(f->set.files[s], i)->name, f->naming);
            if (b + 1 > depth) depth = b + 1;
        }
    char presets[200] = "";
    size_t at = 0;
    for (int i = 0; lv_sana_preset_name(i) && at < sizeof presets; i++)
        at += (size_t)snprintf(presets + at, sizeof presets - at, "%s%s", i ? ", " : "", lv_sana_preset_name(i));
    if (!x || x->ndim != 5 || !fl || fl->ndim != 2 || !fc1 || fc1->ndim != 2 || !inv || inv->ndim != 4)
        return lv_error(LV_ERR_INVALID,
                        "%s: no config: the file has no __metadata__.config and none was given, and its "
                        "embedder tensors are missing or odd, so none can be inferred: pass --config FILE.json "
                        "or --preset NAME (%s)",
                        path, presets);
    int64_t P = x->shape[2] * x->shape[3] * x->shape[4];
    char seen[400];
    snprintf(seen, sizeof seen,
             "hidden %lld, depth %d, patch (%lld, %lld, %lld), %lld -> %lld channels, caption %lld, FFN %lld",
             (long long)x->shape[0], depth, (long long)x->shape[2], (long long)x->shape[3], (long long)x->shape[4],
             (long long)x->shape[1], (long long)(P ? fl->shape[0] / P : 0), (long long)fc1->shape[1],
             (long long)(inv->shape[0] / 2));
    for (int i = 0; lv_sana_preset_name(i); i++) {
        lv_sana_config c;
        if (lv_sana_config_preset(lv_sana_preset_name(i), &c) != LV_OK) continue;
        if (c.hidden == x->shape[0] && c.in_channels == x->shape[1] && c.patch[0] == x->shape[2] &&
            c.patch[1] == x->shape[3] && c.patch[2] == x->shape[4] && c.out_channels * P == fl->shape[0] &&
            c.caption_channels == fc1->shape[1] && 2 * (int64_t)c.ffn_hidden == inv->shape[0] && c.depth == depth) {
            f->cfg = c;
            snprintf(f->config_source, sizeof f->config_source, "preset %s (inferred: the tensor shapes match it)",
                     lv_sana_preset_name(i));
            return LV_OK;
        }
    }
    return lv_error(LV_ERR_INVALID,
                    "%s: no config: the file has no __metadata__.config and none was given; its tensors say %s, "
                    "which matches no preset, and the number of heads cannot be read from shapes: pass "
                    "--config FILE.json (keys: hidden_size, depth, num_heads, head_dim, patch_size, in_channels, "
                    "out_channels, caption_channels, mlp_ratio) or --preset NAME (%s)",
                    path, seen, presets);
}

static lv_status choose_config(lv_sana_file *f, const char *path, const char *config_path, const char *preset,
                               const char *config_dir) {
    if (config_path && preset)
        return lv_error(LV_ERR_INVALID, "give either a config file (%s) or a preset (%s), not both", config_path,
                        preset);
    if (config_path) {
        LV_TRY(lv_sana_config_load(config_path, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "config file %s", config_path);
        return LV_OK;
    }
    if (preset) {
        LV_TRY(lv_sana_config_preset(preset, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "preset %s", preset);
        return LV_OK;
    }
    for (int s = 0; s < f->set.count; s++) {
        const char *json = lv_weights_metadata(f->set.files[s], "config");
        if (!json) continue;
        char source[600];
        snprintf(source, sizeof source, "%s (__metadata__.config)", lv_weights_path(f->set.files[s]));
        LV_TRY(lv_sana_config_parse(json, strlen(json), source, &f->cfg));
        snprintf(f->config_source, sizeof f->config_source, "__metadata__.config of %s", lv_weights_path(f->set.files[s]));
        return LV_OK;
    }
    /* diffusers keeps the config in config.json beside the weights. */
    char candidate[4096];
    snprintf(candidate, sizeof candidate, "%.4000s/config.json", config_dir ? config_dir : "");
    if (config_dir && lv_path_is_file(candidate)) {
        size_t len = 0;
        char *text = lv_read_text_file(candidate, &len);
        cJSON *obj = text ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        const cJSON *cls = obj ? cJSON_GetObjectItemCaseSensitive(obj, "_class_name") : NULL;
        int sana = cJSON_IsString(cls) && cls->valuestring && strstr(cls->valuestring, "Sana");
        lv_status s = sana ? lv_sana_config_from_json(obj, candidate, &f->cfg) : LV_OK;
        cJSON_Delete(obj);
        if (sana) {
            LV_TRY(s);
            snprintf(f->config_source, sizeof f->config_source, "%.590s", candidate);
            return LV_OK;
        }
    }
    return infer_config(f, path);
}

/* ---- checking and collecting the tensors ----------------------------------------------- */

/* lv_weights_find hands out pointers into the shard's array of tensors: their index. */
static void mark_used(const lv_sana_file *f, const lv_weight *t, int src, unsigned char **used) {
    used[src][t - lv_weights_at(f->set.files[src], 0)] = 1;
}

/* Checks every expected tensor; when all are right, fills f->tensors (merging parts). */
static lv_status check_tensors(lv_sana_file *f, const char *path, unsigned char **used, lv_problems *pb) {
    char want[96], got[96];
    for (int i = 0; i < f->n_tensors; i++) {
        const lv_sana_tensor_spec *sp = &f->specs[i];
        char parts[3][SANA_NAME_MAX];
        int n = 1;
        if (f->naming == LV_SANA_NAMES_ORIGINAL) snprintf(parts[0], SANA_NAME_MAX, "%s", sp->name);
        else n = sana_diffusers_parts(sp->name, parts);
        int64_t part_shape[LV_MAX_DIMS];
        memcpy(part_shape, sp->shape, sizeof part_shape);
        part_shape[0] /= n;
        const lv_weight *t[3] = {NULL, NULL, NULL};
        int ok = 1;
        for (int k = 0; k < n; k++) {
            char also[SANA_NAME_MAX + 40] = "";
            if (f->naming == LV_SANA_NAMES_DIFFUSERS)
                snprintf(also, sizeof also, " (%s %s)", n > 1 ? "part of" : "original name", sp->name);
            int src = 0;
            t[k] = find_in(f, parts[k], &src);
            lv_shape_format(part_shape, sp->ndim, want, sizeof want);
            if (!t[k]) {
                lv_problem(pb, parts[k], "tensor '%s'%s is missing (expected shape %s)", parts[k], also, want);
                ok = 0;
                continue;
            }
            mark_used(f, t[k], src, used);
            if (!same_shape(t[k], sp->ndim, part_shape)) {
                lv_shape_format(t[k]->shape, t[k]->ndim, got, sizeof got);
                lv_problem(pb, parts[k], "tensor '%s'%s has shape %s in the file, the config needs %s", parts[k], also,
                        got, want);
                ok = 0;
            } else if (!is_float(t[k]->dtype)) {
                lv_problem(pb, parts[k], "tensor '%s'%s has dtype %s, not a weight type (f32, f16, bf16, q8_0, q4_k)", parts[k],
                        also, lv_dtype_name(t[k]->dtype));
                ok = 0;
            } else if (k > 0 && t[0] && t[k]->dtype != t[0]->dtype) {
                lv_problem(pb, parts[k], "tensors '%s' (%s) and '%s' (%s) are parts of %s but differ in dtype",
                        parts[0], lv_dtype_name(t[0]->dtype), parts[k], lv_dtype_name(t[k]->dtype),
                        sp->name);
                ok = 0;
            }
        }
        if (!ok || pb->n) continue; /* nothing is built once something is wrong */
        lv_weight *dst = &f->tensors[i];
        *dst = *t[0];
        dst->name = sp->name;
        if (n > 1) {
            uint64_t bytes = 0;
            for (int k = 0; k < n; k++) bytes += t[k]->nbytes;
            uint8_t *buf = malloc(bytes ? (size_t)bytes : 1);
            if (!buf) return lv_error(LV_ERR_NOMEM, "%s: out of memory merging %s (%llu bytes)", path, sp->name,
                                      (unsigned long long)bytes);
            f->merged[f->n_merged++] = buf;
            uint64_t at = 0;
            for (int k = 0; k < n; k++) {
                memcpy(buf + at, t[k]->data, t[k]->nbytes);
                at += t[k]->nbytes;
            }
            dst->data = buf;
            dst->nbytes = bytes;
            memcpy(dst->shape, sp->shape, sizeof dst->shape);
        }
        f->params += lv_weight_numel(dst);
    }
    return LV_OK;
}

static lv_status collect_extras(lv_sana_file *f, unsigned char **used, lv_problems *pb) {
    int total = 0;
    for (int s = 0; s < f->set.count; s++) total += lv_weights_count(f->set.files[s]);
    f->extras = calloc((size_t)total + 1, sizeof *f->extras);
    f->extra_known = calloc((size_t)total + 1, 1);
    if (!f->extras || !f->extra_known) return lv_error(LV_ERR_NOMEM, "out of memory");
    for (int s = 0; s < f->set.count; s++)
        for (int i = 0; i < lv_weights_count(f->set.files[s]); i++) {
            if (used[s][i]) continue;
            const lv_weight *t = lv_weights_at(f->set.files[s], i);
            int b = sana_block_index(t->name, f->naming);
            /* A block past the config's depth means the config is wrong, not an extra. */
            if (b >= f->cfg.depth)
                lv_problem(pb, t->name, "tensor '%s' belongs to block %d but the config has depth %d: wrong config?",
                        t->name, b, f->cfg.depth);
            f->extra_known[f->n_extras] = (unsigned char)sana_is_known_unused(t->name);
            f->extras[f->n_extras++] = *t;
        }
    return LV_OK;
}

static _Thread_local const lv_weight *sort_base;
static int by_name(const void *a, const void *b) {
    return strcmp(sort_base[*(const int *)a].name, sort_base[*(const int *)b].name);
}

/* After the weights are open: naming, config, then every check. No config.json without a
 * config_dir. */
static lv_status check_model(lv_sana_file *f, const char *path, const char *config_path, const char *preset,
                             const char *config_dir) {
    LV_TRY(detect_naming(f, path));
    LV_TRY(choose_config(f, path, config_path, preset, config_dir));
    LV_TRY(lv_sana_expected_tensors(&f->cfg, &f->specs, &f->n_tensors));
    f->tensors = calloc((size_t)f->n_tensors, sizeof *f->tensors);
    f->merged = calloc((size_t)f->n_tensors, sizeof *f->merged);
    f->by_name = malloc((size_t)f->n_tensors * sizeof *f->by_name);
    unsigned char **used = calloc((size_t)f->set.count, sizeof *used);
    lv_status s = (f->tensors && f->merged && f->by_name && used) ? LV_OK : lv_error(LV_ERR_NOMEM, "out of memory");
    for (int i = 0; i < f->set.count && s == LV_OK; i++) {
        used[i] = calloc((size_t)lv_weights_count(f->set.files[i]) + 1, 1);
        if (!used[i]) s = lv_error(LV_ERR_NOMEM, "out of memory");
    }
    lv_problems pb = {0};
    if (s == LV_OK) s = check_tensors(f, path, used, &pb);
    if (s == LV_OK) s = collect_extras(f, used, &pb);
    for (int i = 0; used && i < f->set.count; i++) free(used[i]);
    free(used);
    LV_TRY(s);
    if (pb.n) {
        char cfg[300];
        lv_sana_config_describe(&f->cfg, cfg, sizeof cfg);
        if (pb.n == 1)
            return lv_error(LV_ERR_INVALID, "%s: %s [config from %s: %s]", path, pb.first, f->config_source, cfg);
        return lv_error(LV_ERR_INVALID, "%s: %s; %d more problem%s: %s [config from %s: %s]", path, pb.first,
                        pb.n - 1, pb.n > 2 ? "s" : "", pb.others, f->config_source, cfg);
    }
    for (int i = 0; i < f->n_tensors; i++) f->by_name[i] = i;
    sort_base = f->tensors;
    qsort(f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, by_name);
    return LV_OK;
}

lv_status lv_sana_file_open(const char *path, const char *config_path, const char *preset, lv_sana_file **out) {
    *out = NULL;
    if (!path) return lv_error(LV_ERR_INVALID, "lv_sana_file_open: no path");
    lv_sana_file *f = calloc(1, sizeof *f);
    if (!f) return lv_error(LV_ERR_NOMEM, "out of memory");
    char config_dir[4096];
    lv_status s = open_weights(f, path, config_dir, sizeof config_dir);
    if (s == LV_OK) s = check_model(f, path, config_path, preset, config_dir);
    if (s != LV_OK) {
        lv_sana_file_close(f);
        return s;
    }
    *out = f;
    return LV_OK;
}

lv_status lv_sana_file_open_memory(const void *data, size_t size, const char *name, lv_sana_file **out) {
    *out = NULL;
    if (!name) name = "(memory)";
    if (!data) return lv_error(LV_ERR_INVALID, "%s: no model data", name);
    lv_sana_file *f = calloc(1, sizeof *f);
    if (!f) return lv_error(LV_ERR_NOMEM, "out of memory");
    lv_status s = lv_weight_set_add(&f->set, name, data, size);
    if (s == LV_OK) s = check_model(f, name, NULL, NULL, NULL);
    if (s != LV_OK) {
        lv_sana_file_close(f);
        return s;
    }
    *out = f;
    return LV_OK;
}

void lv_sana_file_close(lv_sana_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_merged; i++) free(f->merged[i]);
    free(f->merged);
    free(f->tensors);
    free(f->specs);
    free(f->by_name);
    free(f->extras);
    free(f->extra_known);
    lv_weight_set_close(&f->set);
    free(f);
}

const lv_sana_config *lv_sana_file_config(const lv_sana_file *f) { return f ? &f->cfg : NULL; }
const char *lv_sana_file_config_source(const lv_sana_file *f) { return f ? f->config_source : ""; }
lv_sana_naming lv_sana_file_naming(const lv_sana_file *f) { return f ? f->naming : LV_SANA_NAMES_ORIGINAL; }
const lv_weights *lv_sana_file_weights(const lv_sana_file *f) { return f && f->set.count ? f->set.files[0] : NULL; }

const lv_weight *lv_sana_file_tensor(const lv_sana_file *f, const char *name) {
    if (!f || !name) return NULL;
    int lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const lv_weight *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int lv_sana_file_tensor_count(const lv_sana_file *f) { return f ? f->n_tensors : 0; }
const lv_weight *lv_sana_file_tensor_at(const lv_sana_file *f, int i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}
int lv_sana_file_extra_count(const lv_sana_file *f) { return f ? f->n_extras : 0; }
const lv_weight *lv_sana_file_extra(const lv_sana_file *f, int i) {
    return f && i >= 0 && i < f->n_extras ? &f->extras[i] : NULL;
}
const char *lv_sana_file_extra_name(const lv_sana_file *f, int i) {
    const lv_weight *t = lv_sana_file_extra(f, i);
    return t ? t->name : NULL;
}
int lv_sana_file_extra_known(const lv_sana_file *f, int i) {
    return f && i >= 0 && i < f->n_extras ? f->extra_known[i] : 0;
}
uint64_t lv_sana_file_param_count(const lv_sana_file *f) { return f ? f->params : 0; }
