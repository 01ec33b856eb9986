/* The device-memory plan as `generate --dry-run` and `info --plan` print it (plan_print.c). */
#ifndef LONGVK_CLI_PLAN_PRINT_H
#define LONGVK_CLI_PLAN_PRINT_H

#include <stdio.h>

#include "longvk/generate.h"

/* what: the text encoder and VAE named ("Gemma-2 2B, bf16, 300 tokens"; NULL: not part of the run) */
void cli_print_plan(FILE *out, const lv_generate_plan *p, const char *text_what, const char *vae_what);

#endif
