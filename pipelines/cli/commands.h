/* The subcommands of the `longvk` program, one file each (pipelines/cli/cmd_<name>.c).
 * Each returns the process exit status (0 done, 1 failed, 2 usage error); on failure it
 * has printed the library's message. Each parses its arguments with one option table
 * (options.h), published here as cmd_<name>_spec so that tests can read the tables. */
#ifndef LONGVK_CLI_COMMANDS_H
#define LONGVK_CLI_COMMANDS_H

#include <stddef.h>

#include "longvk/generate.h"
#include "options.h"

int cmd_devices(int argc, char **argv);
int cmd_attn(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_encode_text(int argc, char **argv);

extern const cli_spec cmd_devices_spec, cmd_attn_spec, cmd_metrics_spec, cmd_info_spec, cmd_forward_spec,
    cmd_generate_spec, cmd_decode_spec, cmd_convert_spec, cmd_encode_text_spec;
extern const cli_spec cmd_encode_spec;

/* Every command, in the order `longvk --help` lists them (commands.c). `bench` (cmd_bench,
 * pipelines/bench/bench.h) has no spec of its own: each benchmark has one. */
typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const cli_spec *spec;
    const char *summary;
} cli_command;
extern const cli_command cli_commands[];
extern const int cli_command_count;

/* Print "longvk: <message>" for the library's last error and return 1. */
int cli_fail(const char *context);
/* An error line (no newline needed) on stderr, or kept while errors are deferred. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Under MPI ranks (cli_mpi_begin turns it on): cli_fail and cli_error keep their lines for
 * cli_mpi_end, which says a failure once when every rank found the same (rank 0 says it).
 * Turned off, what was kept is dropped: print it first. */
void cli_defer_errors(bool on);
const char *cli_deferred_errors(void);

/* --vae-tiles auto|off|HxW (generate, info --plan): *mode an lv_gen_vae_tiles, and the tile's
 * latent pixels for HxW; NULL, or what is wrong with the value (shared_options.c). */
const char *cli_parse_vae_tiles(const char *value, int *mode, int *tile_h, int *tile_w);

/* How a block recipe samples, in --help and `info`: its sampler's name ("re-noise" or
 * "Euler"), and where its CFG applies (" at the last step", " at the last N steps", or ""
 * for every step or no CFG). */
const char *cli_sampler_name(lv_chunk_sampler sampler);
void cli_cfg_where(const lv_block_recipe *r, char *buf, size_t size);

#endif
