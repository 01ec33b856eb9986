/* SANA-Video tensor names and shapes (sana-video.md, "Checkpoint names") and the diffusers
 * names of the same tensors (as convert_sana_video_to_diffusers.py in NVlabs/Sana maps them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sana_names.h"

/* Original top-level name -> diffusers name. */
static const char *const top_names[][2] = {
    {"x_embedder.proj.weight", "patch_embedding.weight"},
    {"x_embedder.proj.bias", "patch_embedding.bias"},
    {"t_embedder.mlp.0.weight", "time_embed.emb.timestep_embedder.linear_1.weight"},
    {"t_embedder.mlp.0.bias", "time_embed.emb.timestep_embedder.linear_1.bias"},
    {"t_embedder.mlp.2.weight", "time_embed.emb.timestep_embedder.linear_2.weight"},
    {"t_embedder.mlp.2.bias", "time_embed.emb.timestep_embedder.linear_2.bias"},
    {"t_block.1.weight", "time_embed.linear.weight"},
    {"t_block.1.bias", "time_embed.linear.bias"},
    {"y_embedder.y_proj.fc1.weight", "caption_projection.linear_1.weight"},
    {"y_embedder.y_proj.fc1.bias", "caption_projection.linear_1.bias"},
    {"y_embedder.y_proj.fc2.weight", "caption_projection.linear_2.weight"},
    {"y_embedder.y_proj.fc2.bias", "caption_projection.linear_2.bias"},
    {"attention_y_norm.weight", "caption_norm.weight"},
    {"final_layer.linear.weight", "proj_out.weight"},
    {"final_layer.linear.bias", "proj_out.bias"},
    {"final_layer.scale_shift_table", "scale_shift_table"},
};
#define NTOP (sizeof top_names / sizeof top_names[0])

/* Per block: original suffix -> diffusers suffixes (several: concatenated along dim 0). */
static const struct {
    const char *original;
    const char *diffusers[3];
} block_names[] = {
    {"scale_shift_table", {"scale_shift_table"}},
    {"attn.qkv.weight", {"attn1.to_q.weight", "attn1.to_k.weight", "attn1.to_v.weight"}},
    {"attn.q_norm.weight", {"attn1.norm_q.weight"}},
    {"attn.k_norm.weight", {"attn1.norm_k.weight"}},
    {"attn.proj.weight", {"attn1.to_out.0.weight"}},
    {"attn.proj.bias", {"attn1.to_out.0.bias"}},
    {"cross_attn.q_linear.weight", {"attn2.to_q.weight"}},
    {"cross_attn.q_linear.bias", {"attn2.to_q.bias"}},
    {"cross_attn.kv_linear.weight", {"attn2.to_k.weight", "attn2.to_v.weight"}},
    {"cross_attn.kv_linear.bias", {"attn2.to_k.bias", "attn2.to_v.bias"}},
    {"cross_attn.q_norm.weight", {"attn2.norm_q.weight"}},
    {"cross_attn.k_norm.weight", {"attn2.norm_k.weight"}},
    {"cross_attn.proj.weight", {"attn2.to_out.0.weight"}},
    {"cross_attn.proj.bias", {"attn2.to_out.0.bias"}},
    {"mlp.inverted_conv.conv.weight", {"ff.conv_inverted.weight"}},
    {"mlp.inverted_conv.conv.bias", {"ff.conv_inverted.bias"}},
    {"mlp.depth_conv.conv.weight", {"ff.conv_depth.weight"}},
    {"mlp.depth_conv.conv.bias", {"ff.conv_depth.bias"}},
    {"mlp.point_conv.conv.weight", {"ff.conv_point.weight"}},
    {"mlp.t_conv.weight", {"ff.conv_temp.weight"}},
};
#define NBLOCK (sizeof block_names / sizeof block_names[0])

typedef struct spec_list {
    lv_sana_tensor_spec *items;
    int n;
} spec_list;

static void add(spec_list *l, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                int64_t d4) {
    lv_sana_tensor_spec *s = &l->items[l->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    int64_t d[5] = {d0, d1, d2, d3, d4};
    for (int i = 0; i < LV_MAX_DIMS; i++) s->shape[i] = i < ndim ? d[i] : 0;
}

#define ADD1(n, a) add(&l, n, 1, a, 0, 0, 0, 0)
#define ADD2(n, a, b) add(&l, n, 2, a, b, 0, 0, 0)
#define ADD4(n, a, b, c, d) add(&l, n, 4, a, b, c, d, 0)

lv_status lv_sana_expected_tensors(const lv_sana_config *c, lv_sana_tensor_spec **out, int *count) {
    *out = NULL;
    *count = 0;
    int total = 16 + (int)NBLOCK * c->depth;
    spec_list l = {calloc((size_t)total, sizeof *l.items), 0};
    if (!l.items) return lv_error(LV_ERR_NOMEM, "out of memory for %d tensor descriptions", total);
    const int64_t C = c->hidden, F = c->ffn_hidden, P = (int64_t)c->patch[0] * c->patch[1] * c->patch[2];
    add(&l, "x_embedder.proj.weight", 5, C, c->in_channels, c->patch[0], c->patch[1], c->patch[2]);
    ADD1("x_embedder.proj.bias", C);
    ADD2("t_embedder.mlp.0.weight", C, 256); /* 256-dim sinusoidal timestep features */
    ADD1("t_embedder.mlp.0.bias", C);
    ADD2("t_embedder.mlp.2.weight", C, C);
    ADD1("t_embedder.mlp.2.bias", C);
    ADD2("t_block.1.weight", 6 * C, C);
    ADD1("t_block.1.bias", 6 * C);
    ADD2("y_embedder.y_proj.fc1.weight", C, c->caption_channels);
    ADD1("y_embedder.y_proj.fc1.bias", C);
    ADD2("y_embedder.y_proj.fc2.weight", C, C);
    ADD1("y_embedder.y_proj.fc2.bias", C);
    ADD1("attention_y_norm.weight", C);
    for (int b = 0; b < c->depth; b++) {
        char n[SANA_NAME_MAX];
#define BN(suffix) (snprintf(n, sizeof n, "blocks.%d.%s", b, suffix), n)
        ADD2(BN("scale_shift_table"), 6, C);
        ADD2(BN("attn.qkv.weight"), 3 * C, C);
        ADD1(BN("attn.q_norm.weight"), C);
        ADD1(BN("attn.k_norm.weight"), C);
        ADD2(BN("attn.proj.weight"), C, C);
        ADD1(BN("attn.proj.bias"), C);
        ADD2(BN("cross_attn.q_linear.weight"), C, C);
        ADD1(BN("cross_attn.q_linear.bias"), C);
        ADD2(BN("cross_attn.kv_linear.weight"), 2 * C, C);
        ADD1(BN("cross_attn.kv_linear.bias"), 2 * C);
        ADD1(BN("cross_attn.q_norm.weight"), C);
        ADD1(BN("cross_attn.k_norm.weight"), C);
        ADD2(BN("cross_attn.proj.weight"), C, C);
        ADD1(BN("cross_attn.proj.bias"), C);
        ADD4(BN("mlp.inverted_conv.conv.weight"), 2 * F, C, 1, 1);
        ADD1(BN("mlp.inverted_conv.conv.bias"), 2 * F);
        ADD4(BN("mlp.depth_conv.conv.weight"), 2 * F, 1, 3, 3);
        ADD1(BN("mlp.depth_conv.conv.bias"), 2 * F);
        ADD4(BN("mlp.point_conv.conv.weight"), C, F, 1, 1);
        ADD4(BN("mlp.t_conv.weight"), C, C, 3, 1);
#undef BN
    }
    ADD2("final_layer.linear.weight", c->out_channels * P, C);
    ADD1("final_layer.linear.bias", c->out_channels * P);
    ADD2("final_layer.scale_shift_table", 2, C);
    *out = l.items;
    *count = l.n;
    return LV_OK;
}

int sana_diffusers_parts(const char *original, char parts[3][SANA_NAME_MAX]) {
    for (size_t i = 0; i < NTOP; i++)
        if (strcmp(original, top_names[i][0]) == 0) {
            snprintf(parts[0], SANA_NAME_MAX, "%s", top_names[i][1]);
            return 1;
        }
    int b, at = 0;
    if (sscanf(original, "blocks.%d.%n", &b, &at) != 1 || at == 0 || b < 0) return 0;
    const char *suffix = original + at;
    for (size_t i = 0; i < NBLOCK; i++) {
        if (strcmp(suffix, block_names[i].original) != 0) continue;
        int n = 0;
        for (; n < 3 && block_names[i].diffusers[n]; n++)
            snprintf(parts[n], SANA_NAME_MAX, "transformer_blocks.%d.%s", b, block_names[i].diffusers[n]);
        return n;
    }
    return 0;
}

int sana_is_known_unused(const char *name) {
    return strcmp(name, "y_embedder.y_embedding") == 0 || strcmp(name, "pos_embed") == 0 ||
           strncmp(name, "logvar_linear.", 14) == 0;
}

int sana_block_index(const char *name, lv_sana_naming naming) {
    const char *prefix = naming == LV_SANA_NAMES_DIFFUSERS ? "transformer_blocks." : "blocks.";
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0) return -1;
    const char *p = name + n;
    if (*p < '0' || *p > '9') return -1;
    long v = 0;
    while (*p >= '0' && *p <= '9' && v < 1000000) v = v * 10 + (*p++ - '0');
    return *p == '.' ? (int)v : -1;
}

int sana_is_top_level_name(const char *name, lv_sana_naming naming) {
    int column = naming == LV_SANA_NAMES_DIFFUSERS ? 1 : 0;
    for (size_t i = 0; i < NTOP; i++)
        if (strcmp(name, top_names[i][column]) == 0) return 1;
    return 0;
}

int sana_is_model_name(const char *name, lv_sana_naming naming) {
    if (sana_is_top_level_name(name, naming)) return 1;
    if (sana_block_index(name, naming) < 0) return 0;
    const char *suffix = strchr(strchr(name, '.') + 1, '.') + 1; /* after "<prefix>.N." */
    for (size_t i = 0; i < NBLOCK; i++) {
        if (naming == LV_SANA_NAMES_ORIGINAL && strcmp(suffix, block_names[i].original) == 0) return 1;
        for (int k = 0; naming == LV_SANA_NAMES_DIFFUSERS && k < 3 && block_names[i].diffusers[k]; k++)
            if (strcmp(suffix, block_names[i].diffusers[k]) == 0) return 1;
    }
    return 0;
}

int lv_sana_weights_recognised(const lv_weights *w) {
    for (int i = 0; i < lv_weights_count(w); i++) {
        const char *n = lv_weights_at(w, i)->name;
        if (sana_is_model_name(n, LV_SANA_NAMES_ORIGINAL) || sana_is_model_name(n, LV_SANA_NAMES_DIFFUSERS))
            return 1;
    }
    return 0;
}
