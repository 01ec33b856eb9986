/* The subcommands of the `longvk` program, one file each (pipelines/cli/cmd_<name>.c).
 * Each returns the process exit status; on failure it has printed the library's message. */
#ifndef LONGVK_CLI_COMMANDS_H
#define LONGVK_CLI_COMMANDS_H

#include <stddef.h>

#include "longvk/generate.h"

int cmd_devices(int argc, char **argv);
int cmd_attn(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_convert(int argc, char **argv);

/* Print "longvk: <message>" for the library's last error and return 1. */
int cli_fail(const char *context);
/* Parse helpers: return 0 and print an error naming the flag when the value is bad. */
int cli_parse_int(const char *flag, const char *value, long min, long max, long *out);
int cli_parse_double(const char *flag, const char *value, double *out);

/* How a block recipe samples, in --help and `info`: its sampler's name ("re-noise" or
 * "Euler"), and where its CFG applies (" at the last step", " at the last N steps", or ""
 * for every step or no CFG). */
const char *cli_sampler_name(lv_chunk_sampler sampler);
void cli_cfg_where(const lv_block_recipe *r, char *buf, size_t size);

#endif
