/* `longvk`: the command-line program. Dispatches to one subcommand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"generate", cmd_generate, "generate a video from a prompt (default: the embedded model)"},
    {"devices", cmd_devices, "list Vulkan devices and the limits longvk uses"},
    {"attn", cmd_attn, "block-wise linear attention on .npy inputs"},
    {"forward", cmd_forward, "one DiT forward pass on latents (.npy) for checking a model"},
    {"info", cmd_info, "describe a model file: architecture, parameters, memory"},
    {"decode", cmd_decode, "decode latents to a video with a VAE"},
    {"convert", cmd_convert, "convert a PyTorch checkpoint to safetensors"},
    {"metrics", cmd_metrics, "temporal-consistency metrics of a video"},
    {"bench", cmd_bench, "benchmarks: gemm, attn, encode, chunks, vae"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fprintf(out, "usage: longvk <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n`longvk <command> --help` describes a command's options.\n"
            "\nenvironment:\n"
            "  LONGVK_DEVICE=N     use Vulkan device N (see `longvk devices`)\n"
            "  LONGVK_VALIDATE=1   enable the Vulkan validation layer\n"
            "  LONGVK_PROFILE=1    print device time per op at exit\n");
}

const char *cli_sampler_name(lv_chunk_sampler sampler) {
    return sampler == LV_CHUNK_EULER ? "Euler" : "re-noise";
}

void cli_cfg_where(const lv_block_recipe *r, char *buf, size_t size) {
    if (r->cfg_scale != 1.0 && r->cfg_last_steps == 1) snprintf(buf, size, " at the last step");
    else if (r->cfg_scale != 1.0 && r->cfg_last_steps > 1) snprintf(buf, size, " at the last %d steps", r->cfg_last_steps);
    else if (size) buf[0] = '\0';
}

int cli_fail(const char *context) {
    const char *msg = lv_last_error();
    if (context) fprintf(stderr, "longvk: %s: %s\n", context, *msg ? msg : "failed");
    else fprintf(stderr, "longvk: %s\n", *msg ? msg : "failed");
    return 1;
}

int cli_parse_int(const char *flag, const char *value, long min, long max, long *out) {
    if (!value) {
        fprintf(stderr, "longvk: %s needs a value\n", flag);
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || *end || end == value || v < min || v > max) {
        fprintf(stderr, "longvk: %s: '%s' is not an integer in [%ld, %ld]\n", flag, value, min, max);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_double(const char *flag, const char *value, double *out) {
    if (!value) {
        fprintf(stderr, "longvk: %s needs a value\n", flag);
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || *end || end == value) {
        fprintf(stderr, "longvk: %s: '%s' is not a number\n", flag, value);
        return 0;
    }
    *out = v;
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("longvk 0.1.0\n");
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = commands[i].run(argc - 1, argv + 1);
            /* with LONGVK_VALIDATE=1 a validation message is a failure, whatever the command */
            unsigned long long v = (unsigned long long)lv_validation_messages_total();
            if (v) {
                fprintf(stderr, "longvk: the Vulkan validation layer reported %llu message(s)\n", v);
                if (rc == 0) rc = 3;
            }
            return rc;
        }
    fprintf(stderr, "longvk: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
