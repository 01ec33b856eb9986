/* `longvk convert IN OUT.safetensors`: a safetensors copy of a PyTorch checkpoint (or of
 * another safetensors file), same names and dtypes, written atomically. With --preset or
 * --config the architecture goes into __metadata__.config so the copy needs no flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/sana.h"
#include "longvk/weights.h"

typedef struct convert_args {
    const char *in, *out, *preset, *config;
} convert_args;

static convert_args args;

static cli_option options[] = {
    {.kind = CLI_INPUT, .dest = &args.in, .metavar = "IN", .required = true,
     .help = "a PyTorch checkpoint (.pth/.pt: the state dict at the top level or under 'state_dict', "
             "'generator', 'model' or 'ema'; a 'model.' prefix on every name is removed) or a safetensors file"},
    {.kind = CLI_OUTPUT, .dest = &args.out, .metavar = "OUT.safetensors", .required = true,
     .help = "keeps every tensor's name, dtype and shape and IN's metadata; it is written to a temporary file "
             "and renamed into place when complete"},
    {.name = "--preset", .kind = CLI_STRING, .dest = &args.preset, .metavar = "P",
     .help = "store SANA-Video preset P (sana-video-2b-480p, sana-video-2b-720p) as __metadata__.config"},
    {.name = "--config", .kind = CLI_INPUT, .dest = &args.config, .metavar = "C.json",
     .help = "store the SANA-Video config of C.json as __metadata__.config"},
};

const cli_spec cmd_convert_spec = {
    .command = "convert",
    .usage = "IN OUT.safetensors [--preset P | --config C.json]",
    .options = options,
    .count = CLI_COUNT(options),
};

int cmd_convert(int argc, char **argv) {
    int r = cli_parse(&cmd_convert_spec, argc, argv);
    if (r >= 0) return r;
    const char *in = args.in, *out = args.out, *preset = args.preset, *config = args.config;
    if (preset && config) return cli_usage_error("convert", "give --preset or --config, not both");
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
    for (int i = 0; i < n; i++) {
        tensors[i] = *lv_weights_at(w, i);
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
    lv_status s = lv_safetensors_write(out, tensors, n, meta, k);
    if (s == LV_OK)
        printf("%s: %d tensors, %.1f MiB from %s (%s%s%s)%s\n", out, n, (double)bytes / (1024.0 * 1024.0), in,
               lv_weights_format(w), *lv_weights_note(w) ? ", " : "", lv_weights_note(w),
               *config_json ? ", config stored in __metadata__" : "");
    free(tensors);
    free(meta);
    lv_weights_close(w);
    return s == LV_OK ? 0 : cli_fail("convert");
}
