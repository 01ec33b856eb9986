/* Gemma-2 GGUF files as llama.cpp writes them (gemma-2-2b-it-Q8_0.gguf and the like): its
 * tensor names, and the config from the file's gemma2.* metadata.
 *
 * Names (llama.cpp src/llama-arch.cpp, LLM_ARCH_GEMMA2; gguf-py's tensor_mapping.py maps
 * Hugging Face's to them): token_embd, output_norm, and per layer blk.N.attn_norm (input_layernorm),
 * attn_q/k/v, attn_output (o_proj), post_attention_norm, ffn_norm (pre_feedforward_layernorm),
 * ffn_gate/up/down, post_ffw_norm (post_feedforward_layernorm). llama.cpp's converter
 * (convert_hf_to_gguf.py, Gemma2Model.modify_tensors) stores every *norm.weight as w + 1, and
 * writes no query_pre_attn_scalar and no rope base: llama.cpp scales by head_dim^-0.5 (n_embd /
 * n_head for the 27B, 46 layers) and uses theta 10000; the sliding layers are the even ones. */
#include <stdio.h>
#include <string.h>

#include "gemma2_internal.h"

/* Hugging Face's name in a layer (g2_layer_names' order) -> llama.cpp's */
static const char *const llama_layer_names[G2_LAYER_TENSORS] = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight",   "attn_v.weight",   "attn_output.weight",
    "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
    "post_ffw_norm.weight",
};

int g2_gguf_has_llama_names(const lv_weight_set *set) {
    return set->count == 1 && !strcmp(lv_weights_format(set->files[0]), "gguf") &&
           lv_weights_find(set->files[0], "token_embd.weight") != NULL;
}

const char *g2_gguf_name(const char *name, char *buf, size_t size) {
    if (!strcmp(name, "embed_tokens.weight")) return "token_embd.weight";
    if (!strcmp(name, "norm.weight")) return "output_norm.weight";
    int layer = -1, used = 0;
    if (sscanf(name, "layers.%d.%n", &layer, &used) == 1 && used > 0)
        for (int t = 0; t < G2_LAYER_TENSORS; t++)
            if (!strcmp(name + used, g2_layer_names[t])) {
                snprintf(buf, size, "blk.%d.%s", layer, llama_layer_names[t]);
                return buf;
            }
    return name;
}

/* ---- the config ------------------------------------------------------------------------- */

typedef struct gguf_int {
    const char *key; /* after "gemma2." */
    int *dst;
    int min, max;
    int required;
} gguf_int;

static lv_status read_ints(const lv_weights *w, const char *path, const gguf_int *k, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char key[96];
        snprintf(key, sizeof key, "gemma2.%s", k[i].key);
        int64_t v;
        if (!lv_weights_metadata_int(w, key, &v)) {
            if (!lv_weights_metadata(w, key) && !k[i].required) continue;
            return lv_error(LV_ERR_INVALID, "%s: GGUF metadata %s is %s: a Gemma-2 GGUF needs it as an integer", path,
                            key, lv_weights_metadata(w, key) ? "not an integer" : "missing");
        }
        if (v < k[i].min || v > k[i].max)
            return lv_error(LV_ERR_INVALID, "%s: GGUF metadata %s = %lld is outside %d..%d", path, key, (long long)v,
                            k[i].min, k[i].max);
        *k[i].dst = (int)v;
    }
    return LV_OK;
}

/* a float key when present: absent leaves *dst */
static lv_status read_real(const lv_weights *w, const char *path, const char *name, double min, double max,
                           double *dst) {
    char key[96];
    snprintf(key, sizeof key, "gemma2.%s", name);
    double v;
    if (!lv_weights_metadata_float(w, key, &v)) {
        if (!lv_weights_metadata(w, key)) return LV_OK;
        return lv_error(LV_ERR_INVALID, "%s: GGUF metadata %s is not a number", path, key);
    }
    if (!(v >= min && v <= max))
        return lv_error(LV_ERR_INVALID, "%s: GGUF metadata %s = %g is outside %g..%g", path, key, v, min, max);
    *dst = v;
    return LV_OK;
}

lv_status g2_gguf_config(const lv_weights *w, const char *path, lv_gemma2_config *c) {
    const char *arch = lv_weights_metadata(w, "general.architecture");
    if (!arch || strcmp(arch, "gemma2") != 0)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: a GGUF of general.architecture %s%s%s, not \"gemma2\": only Gemma-2 "
                        "is read from llama.cpp's GGUF files", path, arch ? "\"" : "", arch ? arch : "(none)",
                        arch ? "\"" : "");
    lv_gemma2_config_default(c);
    c->head_dim = 0;
    c->num_kv_heads = 0;
    const gguf_int ints[] = {
        {"block_count", &c->num_layers, 1, LV_GEMMA2_MAX_LAYERS, 1},
        {"embedding_length", &c->hidden_size, 1, 65536, 1},
        {"feed_forward_length", &c->intermediate_size, 1, 1 << 20, 1},
        {"attention.head_count", &c->num_heads, 1, 1024, 1},
        {"attention.head_count_kv", &c->num_kv_heads, 1, 1024, 0},
        {"attention.key_length", &c->head_dim, 2, 65536, 0},
        {"attention.sliding_window", &c->sliding_window, 0, 1 << 30, 0},
        {"context_length", &c->max_position_embeddings, 1, 1 << 30, 0},
    };
    LV_TRY(read_ints(w, path, ints, sizeof ints / sizeof ints[0]));
    if (!c->num_kv_heads) c->num_kv_heads = c->num_heads;
    if (!c->head_dim) c->head_dim = c->hidden_size / c->num_heads;
    int value_length = c->head_dim;
    const gguf_int value[] = {{"attention.value_length", &value_length, 1, 65536, 0}};
    LV_TRY(read_ints(w, path, value, 1));
    if (value_length != c->head_dim)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: GGUF metadata gemma2.attention.value_length %d differs from "
                        "key_length %d: Gemma-2 has one head size", path, value_length, c->head_dim);
    LV_TRY(read_real(w, path, "attention.layer_norm_rms_epsilon", 1e-30, 1, &c->rms_norm_eps));
    c->attn_logit_softcapping = c->final_logit_softcapping = 0; /* absent: none */
    LV_TRY(read_real(w, path, "attn_logit_softcapping", 0, 1e9, &c->attn_logit_softcapping));
    LV_TRY(read_real(w, path, "final_logit_softcapping", 0, 1e9, &c->final_logit_softcapping));
    LV_TRY(read_real(w, path, "rope.freq_base", 1, 1e12, &c->rope_theta));
    /* llama.cpp's attention scale (llama-model.cpp, LLM_ARCH_GEMMA2) */
    c->query_pre_attn_scalar = c->num_layers == 46 ? (double)c->hidden_size / c->num_heads : (double)c->head_dim;
    const char *ids[3][2] = {{"tokenizer.ggml.bos_token_id", NULL}, {"tokenizer.ggml.eos_token_id", NULL},
                             {"tokenizer.ggml.padding_token_id", NULL}};
    int *id_dst[3] = {&c->bos_token_id, &c->eos_token_id, &c->pad_token_id};
    for (int i = 0; i < 3; i++) {
        int64_t v;
        if (lv_weights_metadata_int(w, ids[i][0], &v) && v >= 0 && v < (1 << 24)) *id_dst[i] = (int)v;
    }
    const lv_weight *embed = lv_weights_find(w, "token_embd.weight");
    if (embed && embed->ndim == 2 && embed->shape[0] >= 1 && embed->shape[0] <= (1 << 24))
        c->vocab_size = (int)embed->shape[0];
    if (c->num_heads % c->num_kv_heads != 0)
        return lv_error(LV_ERR_INVALID, "%s: GGUF metadata gemma2.attention.head_count_kv %d does not divide "
                        "head_count %d", path, c->num_kv_heads, c->num_heads);
    if (c->head_dim < 2 || c->head_dim % 2 != 0 || (long)c->num_heads * c->head_dim > 65536)
        return lv_error(LV_ERR_INVALID, "%s: GGUF metadata gemma2.attention.key_length %d (x %d heads): even and at "
                        "most 65536 wide", path, c->head_dim, c->num_heads);
    for (int i = 0; i < LV_GEMMA2_MAX_LAYERS; i++) c->sliding[i] = (unsigned char)(i < c->num_layers && i % 2 == 0);
    return LV_OK;
}
