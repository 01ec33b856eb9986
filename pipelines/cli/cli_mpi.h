/* `--sequence-parallel` under mpirun (pipelines/cli/cli_mpi.c). */
#ifndef LONGVK_CLI_MPI_H
#define LONGVK_CLI_MPI_H

#include <stdbool.h>

#include "longvk/sampler.h"
#include "longvk/sp_comm.h"

typedef struct cli_mpi {
    int rank, ranks;          /* in the whole job */
    lv_sp_comm *comm;         /* one band per rank: of this rank's group with --cfg-parallel */
    lv_cfg_partner *partner;  /* --cfg-parallel: the same band of the other group; else NULL */
} cli_mpi;

/* 0, or 2 after a message when this process is one of several that mpirun (or another
 * launcher: PMI_SIZE) started but --sequence-parallel was not given: each would write the
 * same output. */
int cli_mpi_check_launch(const char *command, bool sequence_parallel);
/* MPI_Init and the communicator; with cfg_parallel the ranks in two groups (the first half
 * conditional, the second unconditional: lv_cfg_split_mpi), each its own bands. 2 (after a
 * message) in a build without MPI or, with cfg_parallel, for an odd number of ranks. */
int cli_mpi_begin(const char *command, bool cfg_parallel, cli_mpi *m);
/* The Vulkan device of this rank: `requested` (>= 0) or LONGVK_DEVICE when set (-1 then),
 * else rank modulo the devices this process sees. */
int cli_mpi_device(const cli_mpi *m, int requested);
/* Every rank waits for every other (nothing without MPI). */
void cli_mpi_barrier(const cli_mpi *m);
/* The number of processes the launcher started (OMPI_COMM_WORLD_SIZE or PMI_SIZE), 1 without one. */
int cli_launcher_size(void);
/* A failure under --sequence-parallel / --cfg-parallel before cli_mpi_begin (the model cannot
 * be read): with its message kept (cli_defer_errors on before cli_fail), MPI is started so
 * that cli_mpi_end says it once when every rank found it; returns rc (the job ends there). */
int cli_fail_before_ranks(const char *command, bool cfg_parallel, int rc);
/* The communicator freed; rc != 0: every rank stopped (MPI_Abort) after saying which failed
 * (a failure every rank found said once, by rank 0; one only some found, by each of them);
 * else a barrier (rank 0 has closed its output) and MPI_Finalize. Nothing when cli_mpi_begin did not start MPI. */
void cli_mpi_end(cli_mpi *m, const char *command, int rc);

#endif
