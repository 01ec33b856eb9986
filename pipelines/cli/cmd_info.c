/* `longvk info MODEL`: what a model file holds and what running it needs: architecture,
 * parameters, dtypes, device memory (weights as stored + activations of one block for one
 * chunk + the carried state), extra tensors. Any other weights file gets a plain summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/gemma2.h"
#include "longvk/generate.h"
#include "longvk/sana.h"
#include "longvk/tokenizer.h"
#include "longvk/vae.h"
#include "longvk/weights.h"
#include "plan_print.h"

typedef struct info_args {
    const char *model, *config, *preset;
    long latent[3], text_tokens;
    bool list;
    bool plan;
    int weights_dtype, text_weights_dtype, precision, cfg;
    int vae_tiles, vae_tile_h, vae_tile_w; /* lv_gen_vae_tiles, as generate's --vae-tiles */
} info_args;

static info_args args = {.text_tokens = 300, .precision = LV_PRECISION_F32, .cfg = 1,
                         .vae_tiles = LV_GEN_VAE_TILES_AUTO};
static const cli_choice info_on_off[] = {{"on", 1}, {"off", 0}, {0}};

static const char *parse_latent(const char *value, void *dest) {
    return cli_parse_dims(value, 3, 1, 100000, dest) ? NULL : "is not FxHxW with integers in [1, 100000]";
}

/* --vae-tiles auto|off|HxW, as generate's */
static const char *parse_vae_tiles(const char *value, void *dest) {
    info_args *a = dest;
    return cli_parse_vae_tiles(value, &a->vae_tiles, &a->vae_tile_h, &a->vae_tile_w);
}

static cli_option options[] = {
    {.kind = CLI_INPUT, .dest = &args.model, .metavar = "MODEL",
     .help = "a .safetensors file, a PyTorch checkpoint (.pth/.pt), a GGUF file, a diffusers model directory or its "
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
    {.name = "--plan", .kind = CLI_FLAG, .dest = &args.plan,
     .help = "the device-memory plan of a run on this device, as `generate --dry-run` prints it, for one chunk "
             "of --latent and --text-tokens: the text encoder's phase (a latent model's Gemma-2 2B, bf16, a "
             "600-token pass: the instruction and the prompt at most), the DiT's, the Wan2.1 VAE decoder's "
             "(16-channel models; in tiles as --vae-tiles says). With --preset or --config and no MODEL, from the "
             "architecture alone (matrix weights bf16, as released)"},
    {.name = "--weights-dtype", .kind = CLI_CHOICE, .dest = &args.weights_dtype, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .def = "as-stored", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K", .help = "with --plan: generate's --weights-dtype"},
    {.name = "--text-weights-dtype", .kind = CLI_CHOICE, .dest = &args.text_weights_dtype,
     .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases, .def = "as-stored (bf16)", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "with --plan: generate's --text-weights-dtype, for the text encoder's phase"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.precision, .choices = cli_precisions, .def = "f32",
     .help = "with --plan: generate's --precision"},
    {.name = "--cfg", .kind = CLI_CHOICE, .dest = &args.cfg, .choices = info_on_off, .metavar = "on|off", .def = "on",
     .help = "with --plan: CFG's second text slot (the negative prompt)"},
    {.name = "--vae-tiles", .kind = CLI_CUSTOM, .dest = &args, .parse = parse_vae_tiles, .metavar = "auto|off|HxW",
     .def = "auto",
     .help = "with --plan: generate's --vae-tiles. auto plans the largest square tiles whose decoder fits what "
             "the DiT's phase leaves of the budget, when the untiled one does not (LONGVK_DEVICE_BUDGET=BYTES "
             "sets the budget); off the untiled decoder; HxW tiles of that many latent pixels"},
};

const cli_spec cmd_info_spec = {
    .command = "info",
    .usage = "[MODEL] [--config C.json | --preset P] [--latent FxHxW] [--text-tokens L] [--tensors]\n"
             "       [--plan [--weights-dtype D] [--text-weights-dtype D] [--precision P] [--cfg on|off]\n"
             "              [--vae-tiles auto|off|HxW]]",
    .about = "A folder: a diffusers pipeline (model_index.json: each of text_encoder/, tokenizer/,\n"
             "transformer/, vae/ found), a SANA-Video transformer, or a Gemma-2 text encoder (Hugging\n"
             "Face folder: config.json + model.safetensors or its index; tokenizer.model beside it).\n"
             "The architecture comes from --config or --preset, else the file's __metadata__.config,\n"
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

/* A tensor's name, dtype and shape; its bytes too when `bytes` is set or its dtype is
 * block-quantized (GGUF's q8_0, q4_k: the bytes say how tightly it packs). */
static void print_tensor_bytes(const lv_weight *t, const char *indent, int bytes) {
    char s[128];
    shape_text(t, s, sizeof s);
    if (bytes || lv_dtype_quantized(t->dtype))
        printf("%s%s %s %s %llu bytes\n", indent, t->name, lv_dtype_name(t->dtype), s, (unsigned long long)t->nbytes);
    else
        printf("%s%s %s %s\n", indent, t->name, lv_dtype_name(t->dtype), s);
}

static void print_tensor(const lv_weight *t, const char *indent) { print_tensor_bytes(t, indent, 0); }

/* Counts and bytes per dtype over `n` tensors given by `at`. */
static void print_dtypes(const char *label, int width, int n, const lv_weight *(*at)(const void *, int), const void *ctx) {
    int count[LV_DTYPE_COUNT] = {0};
    double bytes[LV_DTYPE_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        const lv_weight *t = at(ctx, i);
        if ((unsigned)t->dtype < LV_DTYPE_COUNT) {
            count[t->dtype]++;
            bytes[t->dtype] += (double)t->nbytes;
        }
    }
    printf("%-*s", width, label);
    int first = 1;
    for (int d = 0; d < LV_DTYPE_COUNT; d++) {
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

/* A Wan VAE's two halves: each present or not, with its parameters (labels `width` wide). */
static void print_vae_halves(const lv_weights *w, int width) {
    lv_vae_halves h;
    lv_vae_weights_halves(w, &h);
    printf("%-*s%s", width, "decoder:", h.decoder_tensors ? "" : "absent (`longvk decode` and --vae need it)\n");
    if (h.decoder_tensors)
        printf("%llu parameters in %d tensors\n", (unsigned long long)h.decoder_params, h.decoder_tensors);
    printf("%-*s%s", width, "encoder:",
           h.encoder_tensors ? "" : "absent: a decoder-only file (`longvk encode` needs the whole VAE)\n");
    if (h.encoder_tensors)
        printf("%llu parameters in %d tensors\n", (unsigned long long)h.encoder_params, h.encoder_tensors);
}

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
    lv_vae_halves halves;
    lv_vae_weights_halves(w, &halves);
    printf("model:        not a SANA-Video model (no SANA-Video tensor names)\n");
    if (halves.decoder_tensors || halves.encoder_tensors) print_vae_halves(w, 14); /* a Wan VAE file given alone */
    printf("tensors:      %d, %llu parameters, %s\n", lv_weights_count(w), (unsigned long long)params,
           human((double)bytes, b, sizeof b));
    print_dtypes("dtypes:", 14, lv_weights_count(w), weights_at, w);
    for (int i = 0; i < lv_weights_metadata_count(w); i++) {
        const char *v = lv_weights_metadata_value(w, i);
        printf("metadata:     %s = %.*s%s\n", lv_weights_metadata_key(w, i), 100, v, strlen(v) > 100 ? "..." : "");
    }
    /* a GGUF file's tensors with their bytes: its types pack very differently */
    int gguf = strcmp(lv_weights_format(w), "gguf") == 0;
    if (list)
        for (int i = 0; i < lv_weights_count(w); i++) print_tensor_bytes(lv_weights_at(w, i), "  ", gguf);
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

/* A SANA-Video DiT: architecture, parameters, memory, the generation card, extra tensors.
 * Closes f. */
static int describe_sana(lv_sana_file *f, const char *model, long *latent, long text_tokens, int text_tokens_given,
                         int list) {
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

static int path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int path_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void print_count(const char *label, uint64_t params) {
    double p = (double)params;
    printf("%-15s%llu (%.*f %s)\n", label, (unsigned long long)params, p >= 1e9 ? 3 : 2,
           p >= 1e9 ? p / 1e9 : p >= 1e6 ? p / 1e6 : p / 1e3, p >= 1e9 ? "B" : p >= 1e6 ? "M" : "K");
}


/* A Gemma-2 text encoder: architecture, parameters, dtype, the device memory of
 * lv_gemma2_create (matmul weights as stored, norms as f32, work buffers for `tokens`) and
 * the embedding table left on the host. */
static void describe_gemma2(const lv_gemma2_file *g, const char *path, long tokens, int list) {
    const lv_gemma2_config *c = lv_gemma2_file_config(g);
    char desc[300], b1[32], b2[32], b3[32], b4[32];
    printf("file:          %s\n", path);
    printf("config:        %s\n", lv_gemma2_file_config_source(g));
    printf("architecture:  Gemma-2 text encoder (SANA-Video's): %s\n", lv_gemma2_config_describe(c, desc, sizeof desc));
    printf("               attention soft-cap %g in the config (SANA-Video runs it off), RMSNorm eps %g, RoPE "
           "theta %g\n",
           c->attn_logit_softcapping, c->rms_norm_eps, c->rope_theta);
    print_count("parameters:", lv_gemma2_file_param_count(g));
    printf("dtypes:        matmul weights %s; %s as stored\n", lv_dtype_name(lv_gemma2_file_dtype(g)),
           human((double)lv_gemma2_file_param_bytes(g), b1, sizeof b1));
    static const char *const per_layer[] = {
        "input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
        "post_feedforward_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
        "mlp.down_proj.weight"};
    double weights = 0, host = 0;
    const lv_weight *t = lv_gemma2_file_tensor(g, "embed_tokens.weight");
    if (t) host = (double)t->nbytes;
    if ((t = lv_gemma2_file_tensor(g, "norm.weight"))) weights += 4.0 * (double)lv_weight_numel(t);
    if (list && (t = lv_gemma2_file_tensor(g, "embed_tokens.weight"))) print_tensor(t, "  ");
    for (int l = 0; l < c->num_layers; l++)
        for (int i = 0; i < 11; i++) {
            char name[128];
            snprintf(name, sizeof name, "layers.%d.%s", l, per_layer[i]);
            if (!(t = lv_gemma2_file_tensor(g, name))) continue;
            weights += i < 4 ? 4.0 * (double)lv_weight_numel(t) : (double)t->nbytes;
            if (list) print_tensor(t, "  ");
        }
    if (list && (t = lv_gemma2_file_tensor(g, "norm.weight"))) print_tensor(t, "  ");
    double H = c->hidden_size, I = c->intermediate_size, QW = (double)c->num_heads * c->head_dim,
           KW = (double)c->num_kv_heads * c->head_dim;
    double per_token = 4.0 * (3 * H + 2 * QW + 2 * KW + 2 * I + c->head_dim);
    double work = per_token * (double)tokens;
    printf("memory:        %-26s %11s  (matmul weights as stored, norms f32)\n", "weights on the device",
           human(weights, b1, sizeof b1));
    printf("               %-26s %11s  (%ld tokens x %s: fp32 activations of one layer)\n", "work buffers",
           human(work, b2, sizeof b2), tokens, human(per_token, b3, sizeof b3));
    printf("               %-26s %11s\n", "total on the device", human(weights + work, b4, sizeof b4));
    printf("               %-26s %11s  (memory-mapped; the rows of a prompt's tokens are read)\n",
           "embedding table, host", human(host, b1, sizeof b1));
}

static void describe_tokenizer(const lv_tokenizer *tok) {
    printf("tokenizer:     %s (SentencePiece, %d pieces; <bos> %d, <eos> %d, <pad> %d)\n", lv_tokenizer_path(tok),
           lv_tokenizer_vocab_size(tok), lv_tokenizer_bos_id(tok), lv_tokenizer_eos_id(tok), lv_tokenizer_pad_id(tok));
}

/* 1 when the weights file at `path` holds a Wan VAE decoder longvk can read. */
static int is_vae_file(const char *path) {
    lv_weights *w;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", lv_last_error());
    uint64_t memory;
    int yes = lv_weights_open(path, &w) == LV_OK && lv_vae_weights_memory(w, 60, 104, LV_PRECISION_F32, &memory) == LV_OK;
    lv_weights_close(w);
    lv_error(LV_ERR_INVALID, "%s", saved); /* a probe: the caller's messages stand */
    return yes;
}

/* The device memory a decode at 480x832 needs, from the file's own widths and modules (not
 * the real Wan2.1's figure for any file), or why it cannot be said; `width`: the label's. */
static void print_vae_memory(const lv_weights *w, int width) {
    uint64_t memory = 0;
    char b[32];
    if (lv_vae_weights_memory(w, 60, 104, LV_PRECISION_F32, &memory) != LV_OK)
        printf("%-*s unknown: not a decoder longvk can read (%s)\n", width - 1, "memory:", lv_last_error());
    else
        printf("%-*s this decoder at 480x832 (latent 60x104) needs about %s on the device\n", width - 1, "memory:",
               human((double)memory, b, sizeof b));
}

/* A Wan VAE's weights file: its tensors, and the device memory of a decode at 480x832
 * computed from its own widths (not the real Wan2.1's figure for any file), or why it
 * cannot be. 1: the file cannot be read (lv_last_error says why). */
static int describe_vae(const char *wpath, int list) {
    lv_weights *w;
    if (lv_weights_open(wpath, &w) != LV_OK) return 1;
    uint64_t params = 0, bytes = 0;
    for (int k = 0; k < lv_weights_count(w); k++) {
        params += lv_weight_numel(lv_weights_at(w, k));
        bytes += lv_weights_at(w, k)->nbytes;
    }
    char b1[32];
    printf("file:          %s (%s)\n", wpath, lv_weights_format(w));
    print_count("parameters:", params);
    printf("tensors:       %d, %s as stored\n", lv_weights_count(w), human((double)bytes, b1, sizeof b1));
    print_dtypes("dtypes:", 15, lv_weights_count(w), weights_at, w);
    print_vae_memory(w, 15);
    print_vae_halves(w, 15);
    if (list)
        for (int k = 0; k < lv_weights_count(w); k++) print_tensor(lv_weights_at(w, k), "  ");
    lv_weights_close(w);
    return 0;
}

/* A folder that is one component of a pipeline: a VAE (vae/) or a tokenizer (tokenizer/).
 * -1: neither (lv_last_error untouched). */
static int describe_component(const char *dir, int list) {
    char path[4200];
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    if (path_is_file(path) && is_vae_file(path)) return describe_vae(path, list) ? cli_fail("info") : 0;
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    if (path_is_file(path)) {
        lv_tokenizer *tok;
        if (lv_tokenizer_open(dir, &tok) != LV_OK) return cli_fail("info");
        describe_tokenizer(tok);
        lv_tokenizer_close(tok);
        return 0;
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (path_is_file(path)) {
        fprintf(stderr, "longvk: info: %s holds tokenizer.json but no tokenizer.model: longvk reads SentencePiece's "
                "tokenizer.model only (tokenizer.json, Hugging Face's fast tokenizer, is not read); copy "
                "tokenizer.model from the same release beside it\n", dir);
        return 1;
    }
    return -1;
}

/* A diffusers pipeline folder (model_index.json): each component found. */
static int describe_pipeline(const char *dir, long *latent, long text_tokens, int text_tokens_given, int list) {
    char path[4096];
    int failures = 0;
    printf("pipeline:      %s (diffusers folder: model_index.json)\n", dir);
    static const char *const parts[] = {"text_encoder", "tokenizer", "transformer", "vae"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, parts[i]);
        printf("\n== %s/ ==\n", parts[i]);
        if (!path_is_dir(path)) {
            printf("(absent)\n");
            continue;
        }
        if (i == 0) {
            lv_gemma2_file *g;
            if (lv_gemma2_file_open(path, NULL, &g) != LV_OK) {
                failures += cli_fail("text_encoder");
                continue;
            }
            describe_gemma2(g, path, text_tokens, list);
            lv_gemma2_file_close(g);
        } else if (i == 1) {
            lv_tokenizer *tok;
            if (lv_tokenizer_open(path, &tok) != LV_OK) {
                failures += cli_fail("tokenizer");
                continue;
            }
            describe_tokenizer(tok);
            lv_tokenizer_close(tok);
        } else if (i == 2) {
            lv_sana_file *f;
            long lat[3] = {latent[0], latent[1], latent[2]};
            if (lv_sana_file_open(path, NULL, NULL, &f) != LV_OK) {
                failures += cli_fail("transformer");
                continue;
            }
            describe_sana(f, path, lat, text_tokens, text_tokens_given, list);
        } else {
            char wpath[4200];
            if (lv_vae_weights_file(path, wpath, sizeof wpath) != LV_OK || describe_vae(wpath, list) != 0)
                failures += cli_fail("vae");
        }
    }
    return failures ? 1 : 0;
}

/* --plan: the run's plan on this device (plan_print.c prints it). The text encoder is the
 * released Gemma-2 2B's config in bf16; the VAE the Wan2.1 decoder's estimate. */
static int print_plan(const lv_sana_config *c, lv_dtype stored, const char *what, long *latent, long text_tokens) {
    if (!latent[0]) {
        latent[0] = 10;
        latent[1] = c->in_channels == 128 ? 22 : 60;
        latent[2] = c->in_channels == 128 ? 40 : 104;
    }
    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.precision = args.precision;
    lv_ctx *ctx = NULL;
    if (lv_ctx_create(&copt, &ctx) != LV_OK) return cli_fail("info");
    lv_generate_plan p = {.budget = lv_ctx_memory_budget(ctx), .chunk_frames = (int)latent[0],
                          .grid_h = (int)latent[1], .grid_w = (int)latent[2], .text_tokens = (int)text_tokens,
                          .text_slots = args.cfg ? 2 : 1, .weights_dtype = args.weights_dtype, .stored = stored,
                          .precision = lv_ctx_precision(ctx)};
    snprintf(p.device, sizeof p.device, "%s", lv_ctx_device(ctx)->name);
    lv_dit_plan_input in = {.weights = (lv_dit_weights)args.weights_dtype, .stored = stored, .precision = p.precision,
                            .frames = p.chunk_frames, .height = p.grid_h, .width = p.grid_w,
                            .text_tokens = p.text_tokens, .text_slots = p.text_slots, .cached_blocks = LV_CACHED_ALL};
    lv_dit_plan_device(ctx, &in);
    const bool latent_model = c->in_channels == 16 || c->in_channels == 128;
    lv_status s = lv_dit_memory_plan_of(c, &in, &p.dit);
    if (s == LV_OK && latent_model) {
        lv_gemma2_config g;
        lv_gemma2_config_default(&g);
        lv_gemma2_memory m;
        static const int text_dtypes[] = {-1, LV_F32, LV_F16, LV_BF16, LV_Q8_0, LV_Q4_K}; /* lv_dit_weights' order */
        s = lv_gemma2_memory_plan(&g, LV_BF16, text_dtypes[args.text_weights_dtype], 600, in.alignment, &m);
        p.text = m.weights + m.work;
    }
    lv_vae_tiling tiles = {0, 0, 0}; /* the tiles planned (tile_h 0: untiled) */
    bool auto_tiled = false;
    if (c->in_channels == 16) {
        const int h = p.grid_h, w = p.grid_w;
        if (args.vae_tiles == LV_GEN_VAE_TILES_FIXED) {
            tiles = (lv_vae_tiling){args.vae_tile_h < h ? args.vae_tile_h : h, args.vae_tile_w < w ? args.vae_tile_w : w, 0};
            p.vae = lv_vae_memory_estimate_at(tiles.tile_h, tiles.tile_w, p.precision);
        } else {
            p.vae = lv_vae_memory_estimate_at(h, w, p.precision);
            /* auto, as generate_vae_tiles.c decides at the first block (lv_vae_choose_tiling): the
             * untiled decoder when it fits beside the DiT's phase, else the largest square tiles
             * whose one-tile decoder does */
            lv_generate_plan without = p;
            without.vae = 0;
            const uint64_t dit = lv_gen_plan_dit_phase(&without);
            if (args.vae_tiles == LV_GEN_VAE_TILES_AUTO && dit < p.budget &&
                lv_vae_choose_tiling_estimate(h, w, p.precision, p.budget - dit, &tiles) == 1) {
                p.vae = lv_vae_memory_estimate_at(tiles.tile_h, tiles.tile_w, p.precision);
                auto_tiled = true;
            }
        }
    }
    lv_ctx_destroy(ctx);
    if (s != LV_OK) return cli_fail("info");
    const uint64_t with_dit = lv_gen_plan_dit_phase(&p);
    p.peak = p.text > with_dit ? p.text : with_dit;
    printf("model:         %s\n", what);
    static const char *const text_what[] = {"Gemma-2 2B, bf16, 600 tokens", "Gemma-2 2B, f32, 600 tokens",
                                            "Gemma-2 2B, f16, 600 tokens", "Gemma-2 2B, bf16, 600 tokens",
                                            "Gemma-2 2B, q8_0, 600 tokens", "Gemma-2 2B, q4_K, 600 tokens"};
    char vae_what[160];
    const char *acts = lv_vae_activation_dtype(p.precision) == LV_F16 ? "f16" : "f32";
    if (tiles.tile_h)
        snprintf(vae_what, sizeof vae_what, "Wan2.1, tiles of %d x %d latent pixels%s, %s activations, one tile's",
                 tiles.tile_h, tiles.tile_w,
                 auto_tiled ? " (--vae-tiles auto: the largest that fit what the DiT leaves)" : "", acts);
    else
        snprintf(vae_what, sizeof vae_what, "Wan2.1, untiled, %s activations", acts);
    cli_print_plan(stdout, &p, latent_model ? text_what[args.text_weights_dtype] : NULL,
                   c->in_channels != 16 ? NULL : vae_what);
    return 0;
}

/* A SANA-Video DiT described, or with --plan its run's plan. Closes f. */
static int describe_or_plan(lv_sana_file *f, const char *model, long *latent, long text_tokens, int text_tokens_given,
                            int list) {
    if (!args.plan) return describe_sana(f, model, latent, text_tokens, text_tokens_given, list);
    const lv_weight *qkv = lv_sana_file_tensor(f, "blocks.0.attn.qkv.weight");
    int rc = print_plan(lv_sana_file_config(f), qkv ? qkv->dtype : LV_F32, model, latent, text_tokens);
    lv_sana_file_close(f);
    return rc;
}

int cmd_info(int argc, char **argv) {
    int r = cli_parse(&cmd_info_spec, argc, argv);
    if (r >= 0) return r;
    const char *model = args.model, *config = args.config, *preset = args.preset;
    if (!cli_check_preset("info", preset)) return 2;
    long *latent = args.latent, text_tokens = args.text_tokens;
    int list = args.list, text_tokens_given = cli_given(&cmd_info_spec, "--text-tokens");
    lv_sana_file *f = NULL;
    if (args.plan && !model && (preset || config)) {
        lv_sana_config c;
        if ((preset ? lv_sana_config_preset(preset, &c) : lv_sana_config_load(config, &c)) != LV_OK)
            return cli_fail("info");
        char what[4200];
        snprintf(what, sizeof what, "%s %s (no weights: bf16 matrices as released)", preset ? "the preset" : "the config",
                 preset ? preset : config);
        return print_plan(&c, LV_BF16, what, latent, text_tokens);
    }
    if (!model) { /* the default model compiled into longvk */
        model = "the default model (embedded in longvk)";
        if (lv_sana_file_open_memory(lv_default_model_data(), lv_default_model_size(), "default model", &f) != LV_OK)
            return cli_fail("info");
    } else if (!config && !preset && path_is_dir(model)) {
        /* a folder: a diffusers pipeline, a SANA-Video transformer, or a Gemma-2 encoder */
        char index[4096];
        snprintf(index, sizeof index, "%s/model_index.json", model);
        if (path_is_file(index)) return describe_pipeline(model, latent, text_tokens, text_tokens_given, list);
        if (lv_sana_file_open(model, NULL, NULL, &f) == LV_OK)
            return describe_or_plan(f, model, latent, text_tokens, text_tokens_given, list);
        char sana_error[1024];
        snprintf(sana_error, sizeof sana_error, "%s", lv_last_error());
        lv_gemma2_file *g;
        if (lv_gemma2_file_open(model, NULL, &g) != LV_OK) {
            /* one component of a pipeline: its vae/ or tokenizer/ */
            int component = describe_component(model, list);
            if (component >= 0) return component;
            fprintf(stderr, "longvk: info: %s is neither a SANA-Video model (%s), a Gemma-2 encoder (%s), nor a "
                    "pipeline's vae/ or tokenizer/ folder (no Wan VAE in diffusion_pytorch_model.safetensors, no "
                    "tokenizer.model)\n", model, sana_error, lv_last_error());
            return 1;
        }
        describe_gemma2(g, model, text_tokens, list);
        lv_gemma2_file_close(g);
        lv_tokenizer *tok;
        if (lv_tokenizer_open(model, &tok) == LV_OK) {
            describe_tokenizer(tok);
            lv_tokenizer_close(tok);
        }
        return 0;
    } else if (lv_sana_file_open(model, config, preset, &f) != LV_OK) {
        /* A weights file without any SANA-Video name gets a plain summary instead. */
        struct stat st;
        lv_weights *w = NULL;
        if (!config && !preset && stat(model, &st) == 0 && S_ISREG(st.st_mode)) {
            char saved[1024];
            snprintf(saved, sizeof saved, "%s", lv_last_error());
            if (lv_weights_open(model, &w) == LV_OK && !lv_sana_weights_recognised(w)) {
                const char *arch = lv_weights_metadata(w, "general.architecture");
                if (!strcmp(lv_weights_format(w), "gguf") && arch && !strcmp(arch, "gemma2") &&
                    lv_weights_find(w, "token_embd.weight")) {
                    /* llama.cpp's Gemma-2 GGUF (gemma-2-2b-it-Q8_0.gguf) */
                    lv_weights_close(w);
                    lv_gemma2_file *g;
                    if (lv_gemma2_file_open(model, NULL, &g) != LV_OK) return cli_fail("info");
                    describe_gemma2(g, model, text_tokens, list);
                    lv_gemma2_file_close(g);
                    return 0;
                }
                int rc = plain_summary(w, list);
                if (is_vae_file(model)) print_vae_memory(w, 14);
                lv_weights_close(w);
                return rc;
            }
            lv_weights_close(w);
            lv_error(LV_ERR_INVALID, "%s", saved);
        }
        return cli_fail("info");
    }
    return describe_or_plan(f, model, latent, text_tokens, text_tokens_given, list);
}
