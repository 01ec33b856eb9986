/* `longvk convert IN OUT.safetensors`: a safetensors copy of a PyTorch checkpoint (or of
 * another safetensors file), same names and dtypes, written atomically. With --preset or
 * --config the architecture goes into __metadata__.config so the copy needs no flags.
 * OUT.gguf: a GGUF file instead (the metadata as string pairs); with --quantize q8_0|q4_K its
 * matrix weights quantized on the way (ggml's blocks, what --weights-dtype does on load). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/sana.h"
#include "longvk/quant.h"
#include "longvk/weights.h"

typedef struct convert_args {
    const char *in, *out, *preset, *config;
    int quantize;
} convert_args;

enum { QUANT_NONE = 0, QUANT_Q8_0, QUANT_Q4_K };
static const cli_choice quant_choices[] = {{"q8_0", QUANT_Q8_0}, {"q4_K", QUANT_Q4_K}, {0}};
static const cli_choice quant_aliases[] = {{"q4_k", QUANT_Q4_K}, {"Q4_K", QUANT_Q4_K}, {"Q8_0", QUANT_Q8_0}, {0}};

static convert_args args;

static cli_option options[] = {
    {.kind = CLI_INPUT, .dest = &args.in, .metavar = "IN", .required = true,
     .help = "a PyTorch checkpoint (.pth/.pt: the state dict at the top level or under 'state_dict', "
             "'generator', 'model' or 'ema'; a 'model.' prefix on every name is removed) or a safetensors file"},
    {.kind = CLI_OUTPUT, .dest = &args.out, .metavar = "OUT.safetensors|OUT.gguf", .required = true,
     .help = "keeps every tensor's name, dtype and shape and IN's metadata; it is written to a temporary file "
             "and renamed into place when complete. A name ending in .gguf writes GGUF (version 3)"},
    {.name = "--quantize", .kind = CLI_CHOICE, .dest = &args.quantize, .choices = quant_choices, .aliases = quant_aliases, .metavar = "q8_0|q4_K",
     .help = "OUT.gguf only: the matrix weights (a name ending in .weight, 2 dims, or more that are all 1: "
             "linear layers and 1x1 convs; not embedding tables) quantized as ggml's q8_0 or q4_K; a row not whole blocks (32, 256) "
             "falls back, q4_K to q8_0, q8_0 to its dtype; every other tensor as it is"},
    {.name = "--preset", .kind = CLI_STRING, .dest = &args.preset, .metavar = "P",
     .help = "store SANA-Video preset P (sana-video-2b-480p, sana-video-2b-720p) as __metadata__.config"},
    {.name = "--config", .kind = CLI_INPUT, .dest = &args.config, .metavar = "C.json",
     .help = "store the SANA-Video config of C.json as __metadata__.config"},
};

const cli_spec cmd_convert_spec = {
    .command = "convert",
    .usage = "IN OUT.safetensors|OUT.gguf [--preset P | --config C.json] [--quantize q8_0|q4_K]",
    .options = options,
    .count = CLI_COUNT(options),
};

/* A matrix weight: named *.weight, [N, K] or [N, K, 1, ...] (linear layers, 1x1 convs), not
 * an embedding table (its rows are looked up, not multiplied: "embedding", "embed_tokens"). */
static bool is_matrix(const lv_weight *t) {
    size_t len = strlen(t->name);
    if (len < 7 || strcmp(t->name + len - 7, ".weight") != 0 || t->ndim < 2) return false;
    if (strstr(t->name, "embedding") || strstr(t->name, "embed_tokens")) return false;
    for (int d = 2; d < t->ndim; d++)
        if (t->shape[d] != 1) return false;
    return t->dtype == LV_F32 || t->dtype == LV_F16 || t->dtype == LV_BF16;
}

/* t quantized to dtype into *buf (t then describes it) where it is a matrix whose rows are
 * whole blocks (q4_k falling back to q8_0); left as it is otherwise (*buf NULL) */
static lv_status quantize(lv_weight *t, lv_dtype dtype, void **buf) {
    *buf = NULL;
    if (!is_matrix(t)) return LV_OK;
    int64_t rows = t->shape[0], k = (int64_t)lv_weight_numel(t) / rows;
    if (dtype == LV_Q4_K && k % lv_dtype_block(LV_Q4_K, NULL)) dtype = LV_Q8_0;
    if (k % lv_dtype_block(dtype, NULL)) return LV_OK;
    uint64_t nbytes = lv_dtype_bytes(dtype, rows * k);
    *buf = malloc((size_t)nbytes);
    if (!*buf) return lv_error(LV_ERR_NOMEM, "out of memory quantizing '%s'", t->name);
    lv_status s = lv_quantize_rows(dtype, t->data, t->dtype, rows, k, *buf);
    if (s != LV_OK) return lv_error_prefix(s, "'%s'", t->name);
    t->dtype = dtype;
    t->data = *buf;
    t->nbytes = nbytes;
    t->ndim = 2; /* rows of whole blocks: GGUF's ne[0] must be the row */
    t->shape[1] = k;
    return LV_OK;
}

int cmd_convert(int argc, char **argv) {
    int r = cli_parse(&cmd_convert_spec, argc, argv);
    if (r >= 0) return r;
    const char *in = args.in, *out = args.out, *preset = args.preset, *config = args.config;
    if (preset && config) return cli_usage_error("convert", "give --preset or --config, not both");
    size_t out_len = strlen(out);
    bool gguf = out_len >= 5 && strcmp(out + out_len - 5, ".gguf") == 0;
    if (args.quantize && !gguf)
        return cli_usage_error("convert", "--quantize writes GGUF: OUT must end in .gguf, not '%s'", out);
    if (!cli_check_preset("convert", preset)) return 2;
    char config_json[512] = "";
    if (preset || config) {
        lv_sana_config cfg;
        if ((preset ? lv_sana_config_preset(preset, &cfg) : lv_sana_config_load(config, &cfg)) != LV_OK)
            return cli_fail("convert");
        if (lv_sana_config_to_json(&cfg, config_json, sizeof config_json) != LV_OK) return cli_fail("convert");
    }

    lv_weights *w = NULL;
    if (lv_weights_open(in, &w) != LV_OK) return cli_fail("convert");
    int n = lv_weights_count(w), nm = lv_weights_metadata_count(w);
    lv_weight *tensors = malloc(((size_t)n + 1) * sizeof *tensors);
    const char **meta = malloc(((size_t)nm + 2) * 2 * sizeof *meta);
    if (!tensors || !meta) {
        free(tensors);
        free(meta);
        lv_weights_close(w);
        fprintf(stderr, "longvk convert: out of memory\n");
        return 1;
    }
    uint64_t bytes = 0;
    int quantized = 0;
    void **qbuf = calloc((size_t)n + 1, sizeof *qbuf);
    lv_status s = qbuf ? LV_OK : lv_error(LV_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && s == LV_OK; i++) {
        tensors[i] = *lv_weights_at(w, i);
        if (args.quantize) s = quantize(&tensors[i], args.quantize == QUANT_Q8_0 ? LV_Q8_0 : LV_Q4_K, &qbuf[i]);
        quantized += qbuf[i] != NULL;
        bytes += tensors[i].nbytes;
    }
    int k = 0;
    for (int i = 0; i < nm; i++) {
        if (*config_json && strcmp(lv_weights_metadata_key(w, i), "config") == 0) continue;
        meta[2 * k] = lv_weights_metadata_key(w, i);
        meta[2 * k + 1] = lv_weights_metadata_value(w, i);
        k++;
    }
    if (*config_json) {
        meta[2 * k] = "config";
        meta[2 * k + 1] = config_json;
        k++;
    }
    if (s == LV_OK) s = gguf ? lv_gguf_write(out, tensors, n, meta, k) : lv_safetensors_write(out, tensors, n, meta, k);
    if (s == LV_OK)
        printf("%s: %d tensors%s%s%s, %.1f MiB from %s (%s%s%s)%s\n", out, n, quantized ? " (" : "",
               quantized ? (args.quantize == QUANT_Q8_0 ? "matrices q8_0" : "matrices q4_K or q8_0") : "",
               quantized ? ")" : "", (double)bytes / (1024.0 * 1024.0), in, lv_weights_format(w),
               *lv_weights_note(w) ? ", " : "", lv_weights_note(w),
               *config_json ? (gguf ? ", config stored as metadata 'config'" : ", config stored in __metadata__") : "");
    for (int i = 0; qbuf && i < n; i++) free(qbuf[i]);
    free(qbuf);
    free(tensors);
    free(meta);
    lv_weights_close(w);
    return s == LV_OK ? 0 : cli_fail("convert");
}
