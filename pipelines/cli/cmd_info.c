/* `longvk info MODEL`: what a model file holds and what running it needs: architecture,
 * parameters, dtypes, device memory (weights as stored + activations of one block for one
 * chunk + the carried state), extra tensors. Any other weights file gets a plain summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/generate.h"
#include "longvk/sana.h"
#include "longvk/weights.h"

typedef struct info_args {
    const char *model, *config, *preset;
    long latent[3], text_tokens;
    bool list;
} info_args;

static info_args args = {.text_tokens = 300};

static const char *parse_latent(const char *value, void *dest) {
    return cli_parse_dims(value, 3, 1, 100000, dest) ? NULL : "is not FxHxW with integers in [1, 100000]";
}

static cli_option options[] = {
    {.kind = CLI_INPUT, .dest = &args.model, .metavar = "MODEL",
     .help = "a .safetensors file, a PyTorch checkpoint (.pth/.pt), a diffusers model directory or its "
             "*.safetensors.index.json; without it, the default model embedded in longvk (its generation "
             "recipe and vocabulary are listed)"},
    {.name = "--config", .kind = CLI_INPUT, .dest = &args.config, .metavar = "C.json",
     .help = "the architecture, as a SANA-Video config.json"},
    {.name = "--preset", .kind = CLI_STRING, .dest = &args.preset, .metavar = "P",
     .help = "the architecture of a preset: sana-video-2b-480p or sana-video-2b-720p"},
    {.name = "--latent", .kind = CLI_CUSTOM, .dest = args.latent, .parse = parse_latent, .metavar = "FxHxW",
     .def = "10x60x104: a LongSANA chunk at 480x832 in Wan2.1 latents; 10x22x40 for 128-channel models, "
            "704x1280 in LTX-2 latents",
     .help = "latent frames x height x width of one chunk for the memory estimate"},
    {.name = "--text-tokens", .kind = CLI_LONG, .dest = &args.text_tokens, .metavar = "L", .min = 0, .max = 1000000,
     .def = "300", .help = "text tokens"},
    {.name = "--tensors", .kind = CLI_FLAG, .dest = &args.list, .help = "list every tensor of the file"},
};

const cli_spec cmd_info_spec = {
    .command = "info",
    .usage = "[MODEL] [--config C.json | --preset P] [--latent FxHxW] [--text-tokens L] [--tensors]",
    .about = "The architecture comes from --config or --preset, else the file's __metadata__.config,\n"
             "else a diffusers config.json beside it, else the preset whose shapes the tensors match\n"
             "(presets: sana-video-2b-480p, sana-video-2b-720p).\n",
    .epilog = "Device memory = weights as stored + activations + state memory, where for N tokens per\n"
              "chunk (F/pt x H/ph x W/pw), hidden C, FFN width F, L text tokens, fp32 activations of one\n"
              "block at a time:\n"
              "  activations = 4 B x (N x max(6C, 2C + 5F) + 3 L C)\n"
              "    (attention: x, modulated x, q/k/v, output = 6C per token; Mix-FFN: x, modulated x,\n"
              "     2F expanded, 2F after the depthwise conv, F gated = 2C + 5F per token; text: y, K, V)\n"
              "  carried state = 4 B x depth x (K x heads d (d + 1) + C x H/ph x W/pw)\n"
              "    (LongSANA: sum v k^T and sum k per head for each of the K cached blocks, K = 1 when\n"
              "     every earlier block is read, and the last frame before the temporal conv: what goes\n"
              "     from block to block and into a resume file)\n"
              "  state memory = carried state + 4 B x depth x 2 heads d (d + 1)\n"
              "    (the block's own sums and the sums its queries read: what `longvk generate` reports)\n",
    .options = options,
    .count = CLI_COUNT(options),
};

static const char *human(double bytes, char *buf, size_t size) {
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, size, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(buf, size, "%.1f MiB", bytes / (1024.0 * 1024));
    else if (bytes >= 1024.0) snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, size, "%.0f B", bytes);
    return buf;
}

static void shape_text(const lv_weight *t, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
}

static void print_tensor(const lv_weight *t, const char *indent) {
    char s[128];
    shape_text(t, s, sizeof s);
    printf("%s%s %s %s\n", indent, t->name, lv_dtype_name(t->dtype), s);
}

/* Counts and bytes per dtype over `n` tensors given by `at`. */
static void print_dtypes(const char *label, int width, int n, const lv_weight *(*at)(const void *, int), const void *ctx) {
    int count[4] = {0};
    double bytes[4] = {0};
    for (int i = 0; i < n; i++) {
        const lv_weight *t = at(ctx, i);
        if ((unsigned)t->dtype < 4) {
            count[t->dtype]++;
            bytes[t->dtype] += (double)t->nbytes;
        }
    }
    printf("%-*s", width, label);
    int first = 1;
    for (int d = 0; d < 4; d++) {
        if (!count[d]) continue;
        char b[32];
        printf("%s%s: %d tensor%s (%s)", first ? "" : ", ", lv_dtype_name((lv_dtype)d), count[d],
               count[d] == 1 ? "" : "s", human(bytes[d], b, sizeof b));
        first = 0;
    }
    printf("%s\n", first ? "none" : "");
}

static const lv_weight *weights_at(const void *w, int i) { return lv_weights_at(w, i); }
static const lv_weight *model_at(const void *f, int i) { return lv_sana_file_tensor_at(f, i); }

/* Not a SANA-Video model: a summary of the file. */
static int plain_summary(const lv_weights *w, int list) {
    uint64_t params = 0, bytes = 0;
    for (int i = 0; i < lv_weights_count(w); i++) {
        params += lv_weight_numel(lv_weights_at(w, i));
        bytes += lv_weights_at(w, i)->nbytes;
    }
    char b[32];
    printf("file:         %s (%s%s%s)\n", lv_weights_path(w), lv_weights_format(w), *lv_weights_note(w) ? ", " : "",
           lv_weights_note(w));
    printf("model:        not a SANA-Video model (no SANA-Video tensor names)\n");
    printf("tensors:      %d, %llu parameters, %s\n", lv_weights_count(w), (unsigned long long)params,
           human((double)bytes, b, sizeof b));
    print_dtypes("dtypes:", 14, lv_weights_count(w), weights_at, w);
    for (int i = 0; i < lv_weights_metadata_count(w); i++) {
        const char *v = lv_weights_metadata_value(w, i);
        printf("metadata:     %s = %.*s%s\n", lv_weights_metadata_key(w, i), 100, v, strlen(v) > 100 ? "..." : "");
    }
    if (list)
        for (int i = 0; i < lv_weights_count(w); i++) print_tensor(lv_weights_at(w, i), "  ");
    return 0;
}

static void print_recipe(const char *which, const lv_block_recipe *r) {
    printf("               %s: %d %s steps at t = ", which, r->steps, cli_sampler_name(r->sampler));
    for (int i = 0; i < r->steps; i++) printf("%s%g", i ? ", " : "", (double)r->timesteps[i]);
    char guided[64];
    cli_cfg_where(r, guided, sizeof guided);
    printf(", CFG %g%s", r->cfg_scale, guided);
    if (r->warm_start) printf(", starting from the previous block's last frame");
    printf("\n");
}

/* What `longvk generate` reads from the file's "longvk" card. */
static void print_card(const lv_model_card *c) {
    printf("generation:    %s model, %dx%d pixels at %g fps, blocks of %d frames, ", c->pixel ? "pixel-space" : "latent",
           c->width, c->height, c->fps, c->block_frames);
    if (c->cached_blocks < 0) printf("attends to every earlier block\n");
    else printf("attends to the last %d blocks\n", c->cached_blocks);
    print_recipe("first block", &c->first_block);
    print_recipe("later blocks", &c->later_blocks);
    printf("               then a t = 0 write pass commits each block to the carried state\n");
    if (c->burn_in_blocks)
        printf("               the first %d blocks are made and dropped (burn-in: the blocks after the\n"
               "               first settle what it drew from the text alone)\n", c->burn_in_blocks);
    if (!c->vocab_size) return;
    printf("vocabulary:    %d words, %d tokens per prompt (others are ignored with a warning):\n              ",
           c->vocab_size, c->text_len);
    int col = 14;
    for (int i = 0; i < c->vocab_size; i++) {
        int len = (int)strlen(c->vocab[i]) + 1;
        if (col + len > 96) {
            printf("\n              ");
            col = 14;
        }
        printf(" %s", c->vocab[i]);
        col += len;
    }
    printf("\n");
}

int cmd_info(int argc, char **argv) {
    int r = cli_parse(&cmd_info_spec, argc, argv);
    if (r >= 0) return r;
    const char *model = args.model, *config = args.config, *preset = args.preset;
    long *latent = args.latent, text_tokens = args.text_tokens;
    int list = args.list, text_tokens_given = cli_given(&cmd_info_spec, "--text-tokens");
    lv_sana_file *f = NULL;
    if (!model) { /* the default model compiled into longvk */
        model = "the default model (embedded in longvk)";
        if (lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default model", &f) != LV_OK)
            return cli_fail("info");
    } else if (lv_sana_file_open(model, config, preset, &f) != LV_OK) {
        /* A weights file without any SANA-Video name gets a plain summary instead. */
        struct stat st;
        lv_weights *w = NULL;
        if (!config && !preset && stat(model, &st) == 0 && S_ISREG(st.st_mode)) {
            char saved[1024];
            snprintf(saved, sizeof saved, "%s", lv_last_error());
            if (lv_weights_open(model, &w) == LV_OK && !lv_sana_weights_recognised(w)) {
                int rc = plain_summary(w, list);
                lv_weights_close(w);
                return rc;
            }
            lv_weights_close(w);
            lv_error(LV_ERR_INVALID, "%s", saved);
        }
        return cli_fail("info");
    }
    const lv_sana_config *c = lv_sana_file_config(f);
    const lv_weights *w = lv_sana_file_weights(f);
    char desc[300], b1[32], b2[32], b3[32], b4[32];
    printf("file:          %s (%s%s%s; %s names%s)\n", model, lv_weights_format(w), *lv_weights_note(w) ? ", " : "",
           lv_weights_note(w), lv_sana_file_naming(f) == LV_SANA_NAMES_DIFFUSERS ? "diffusers" : "original SANA-Video",
           lv_sana_file_naming(f) == LV_SANA_NAMES_DIFFUSERS ? ", q/k/v merged" : "");
    printf("config:        %s\n", lv_sana_file_config_source(f));
    printf("architecture:  SANA-Video DiT: %s\n", lv_sana_config_describe(c, desc, sizeof desc));
    printf("               RoPE per head: t %d, h %d, w %d dims (theta %g); eps: qk norm %g, cross qk norm %g, "
           "caption norm %g, LayerNorm %g, linear attention %g\n",
           c->rope_dims[0], c->rope_dims[1], c->rope_dims[2], (double)c->rope_theta, (double)c->qk_norm_eps,
           (double)c->cross_norm_eps, (double)c->caption_norm_eps, (double)c->ln_eps, (double)c->attn_eps);
    uint64_t params = lv_sana_file_param_count(f);
    double p = (double)params;
    printf("parameters:    %llu (%.*f %s) in %d tensors\n", (unsigned long long)params, p >= 1e9 ? 3 : 2,
           p >= 1e9 ? p / 1e9 : p >= 1e6 ? p / 1e6 : p / 1e3, p >= 1e9 ? "B" : p >= 1e6 ? "M" : "K",
           lv_sana_file_tensor_count(f));
    print_dtypes("dtypes:", 15, lv_sana_file_tensor_count(f), model_at, f);

    /* the generation card, if any: its block is the default chunk of the memory estimate */
    const char *card_json = lv_weights_metadata(w, "longvk");
    lv_model_card card;
    char card_error[512] = "";
    int has_card = card_json && lv_model_card_parse(card_json, model, &card) == LV_OK;
    if (card_json && !has_card) snprintf(card_error, sizeof card_error, "%s", lv_last_error());
    if (has_card && card.pixel && !latent[0]) {
        latent[0] = card.block_frames;
        latent[1] = card.height;
        latent[2] = card.width;
        if (!text_tokens_given) text_tokens = card.text_len;
    }

    /* Memory (see usage() for the formula). */
    if (!latent[0]) {
        latent[0] = 10;
        latent[1] = c->in_channels == 128 ? 22 : 60;
        latent[2] = c->in_channels == 128 ? 40 : 104;
    }
    double weights = 0;
    for (int i = 0; i < lv_sana_file_tensor_count(f); i++) weights += (double)lv_sana_file_tensor_at(f, i)->nbytes;
    double C = c->hidden, F = c->ffn_hidden, L = (double)text_tokens;
    double hp = (double)(latent[1] / c->patch[1]), wp = (double)(latent[2] / c->patch[2]);
    double N = (double)(latent[0] / c->patch[0]) * hp * wp;
    double per_token = 6 * C > 2 * C + 5 * F ? 6 * C : 2 * C + 5 * F;
    double act = 4.0 * (N * per_token + 3 * L * C);
    /* the state of the model card's window (else every earlier block: the dit's default) */
    int cached = has_card ? card.cached_blocks : LV_CACHED_ALL;
    lv_dit_state_size state = lv_dit_state_size_of(c, cached, (int64_t)(hp * wp));
    char cached_text[64];
    if (cached > 0) snprintf(cached_text, sizeof cached_text, "%d cached blocks", cached);
    else snprintf(cached_text, sizeof cached_text, "%s", cached == 0 ? "nothing cached" : "every earlier block");
    printf("memory:        %-32s %11s\n", "weights as stored", human(weights, b1, sizeof b1));
    printf("               %-32s %11s  (%.0f tokens = %ld/%d x %ld/%d x %ld/%d %s, %ld text tokens; %s per "
           "token)\n",
           "activations, one block", human(act, b2, sizeof b2), N, latent[0], c->patch[0], latent[1], c->patch[1],
           latent[2], c->patch[2], has_card && card.pixel ? "pixels" : "latent", text_tokens,
           human(4.0 * per_token, b4, sizeof b4));
    printf("               %-32s %11s  (LongSANA, %d layers, %s: what goes from block to block and into a "
           "resume file)\n",
           "carried state (S, z, conv cache)", human((double)state.carried, b3, sizeof b3), c->depth, cached_text);
    printf("               %-32s %11s  (what `longvk generate` reports as state memory)\n",
           "state memory incl. working slots", human((double)state.memory, b3, sizeof b3));
    printf("               %-32s %11s  (fp32 activations; `longvk info --help` has the formula)\n",
           "total on the device", human(weights + act + (double)state.memory, b1, sizeof b1));
    if (card_json && !has_card) printf("generation:    the \"longvk\" metadata is invalid: %s\n", card_error);
    if (has_card) print_card(&card);
    int n_extra = lv_sana_file_extra_count(f);
    printf("extra tensors: %d%s\n", n_extra, n_extra ? " (in the file, not part of the DiT):" : "");
    for (int i = 0; i < n_extra; i++) {
        char s[128];
        const lv_weight *t = lv_sana_file_extra(f, i);
        shape_text(t, s, sizeof s);
        int text = has_card && card.vocab_size && strncmp(t->name, "text_", 5) == 0;
        const char *role = !text                                  ? ""
                           : strstr(t->name, "_prev_")            ? "  (the text encoder's previous-word table)"
                           : strstr(t->name, "_next_")            ? "  (the text encoder's next-word table)"
                                                                  : "  (the text encoder's word table)";
        printf("  %s %s %s%s\n", t->name, lv_dtype_name(t->dtype), s,
               text ? role : lv_sana_file_extra_known(f, i) ? "  (known: SANA-Video never reads it)" : "");
    }
    if (has_card) lv_model_card_free(&card);
    if (list) {
        printf("tensors (original names):\n");
        for (int i = 0; i < lv_sana_file_tensor_count(f); i++) print_tensor(lv_sana_file_tensor_at(f, i), "  ");
    }
    lv_sana_file_close(f);
    return 0;
}
