/* `longvk`: the command-line program. Dispatches to one subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

static void usage(FILE *out) {
    fprintf(out, "usage: longvk <command> [options]\n       longvk --version\n\ncommands:\n");
    for (int i = 0; i < cli_command_count; i++)
        fprintf(out, "  %-12s %s\n", cli_commands[i].name, cli_commands[i].summary);
    fprintf(out,
            "\n`longvk <command> --help` describes a command's options.\n"
            "\nenvironment (every command; the options of a command win over them):\n"
            "  LONGVK_DEVICE=N          use Vulkan device N (see `longvk devices`; default: the best one)\n"
            "  LONGVK_VALIDATE=1        enable the Vulkan validation layer; a validation message fails the run\n"
            "  LONGVK_PROFILE=1         print device time per op at exit\n"
            "  LONGVK_PRECISION=P       activations f32 (default), f16 or bf16, where --precision is not given\n"
            "  LONGVK_PARALLEL_CFG=on|off  generate's --parallel-cfg where it is not given (default: on for a\n"
            "                           CPU device with 2+ cores; off when other programs use the cores)\n"
            "  LONGVK_COOPMAT=0         never use cooperative matrices (tensor cores)\n"
            "  LONGVK_VAE_BUDGET=BYTES  generate --vae-tiles auto: the device bytes the VAE may hold; above, tiles\n"
            "  LONGVK_DEVICE_BUDGET=BYTES  the device memory a run may plan to hold (default: the largest heap)\n"
            "The variables for tests and tuning: engine/README.md, \"Environment variables\".\n");
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
        if (*LONGVK_GIT_DESCRIBE) printf("longvk %s (git %s)\n", LONGVK_VERSION, LONGVK_GIT_DESCRIBE);
        else printf("longvk %s\n", LONGVK_VERSION);
        return 0;
    }
    /* the environment's values are checked as the options are: a bad one is a usage error */
    const char *precision = lv_env_str("LONGVK_PRECISION");
    if (precision && *precision && strcmp(precision, "f32") && strcmp(precision, "f16") && strcmp(precision, "bf16")) {
        fprintf(stderr, "longvk: LONGVK_PRECISION='%s': f32, f16 or bf16\n", precision);
        return 2;
    }
    for (int i = 0; i < cli_command_count; i++)
        if (strcmp(argv[1], cli_commands[i].name) == 0) {
            int rc = cli_commands[i].run(argc - 1, argv + 1);
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
