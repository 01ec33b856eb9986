/* `--sequence-parallel`: a command run by every rank of `mpirun`, one band of token rows per
 * rank (pipelines/parallel/README.md). Only a build with -DLONGVK_MPI=ON has MPI; elsewhere
 * the flag is a clear error. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_mpi.h"
#include "options.h"
#include "longvk.h"

int cli_mpi_check_launch(const char *command, bool sequence_parallel) {
    if (sequence_parallel) return 0;
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 1) {
            if (cli_launcher_rank() > 0) return cli_other_rank_fails(); /* the same on every rank: rank 0 says it */
            fprintf(stderr, "longvk %s: started as one of %d processes (%s) without --sequence-parallel: each would "
                    "make the whole output and write the same file; add --sequence-parallel to split the work "
                    "over them\n", command, atoi(v), names[i]);
            return 2;
        }
    }
    return 0;
}

#ifdef LONGVK_HAVE_MPI
#include <mpi.h>

#include "longvk/sp_comm_mpi.h"

static int started;

static MPI_Comm group = MPI_COMM_NULL; /* --cfg-parallel: this rank's group */

int cli_mpi_begin(const char *command, bool cfg_parallel, cli_mpi *m) {
    MPI_Init(NULL, NULL);
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->ranks);
    m->comm = NULL;
    m->partner = NULL;
    if (cfg_parallel && m->ranks % 2) { /* every rank sees the same count: all leave the same way */
        if (m->rank == 0)
            fprintf(stderr, "longvk %s: --cfg-parallel needs an even number of ranks (two groups of the same size: "
                    "the conditional and the unconditional passes), not %d\n", command, m->ranks);
        MPI_Finalize();
        started = 0;
        return 2;
    }
    lv_status s = cfg_parallel ? lv_cfg_split_mpi(MPI_COMM_WORLD, &group, &m->partner) : LV_OK;
    if (s == LV_OK) s = lv_sp_comm_mpi_create(cfg_parallel ? group : MPI_COMM_WORLD, &m->comm);
    if (s != LV_OK) {
        fprintf(stderr, "longvk %s (rank %d of %d): %s\n", command, m->rank, m->ranks, lv_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 0;
}

int cli_mpi_device(const cli_mpi *m, int requested) {
    if (requested >= 0 || lv_env_str("LONGVK_DEVICE")) return requested; /* the user's choice wins */
    int n = 0;
    if (lv_list_devices(NULL, 0, &n) != LV_OK || n < 1) return -1;
    return m->rank % n;
}

void cli_mpi_barrier(const cli_mpi *m) {
    (void)m;
    if (started) MPI_Barrier(MPI_COMM_WORLD);
}

void cli_mpi_end(cli_mpi *m, const char *command, int rc) {
    if (!started) return;
    lv_sp_comm_destroy(m->comm);
    m->comm = NULL;
    lv_cfg_partner_mpi_destroy(m->partner);
    m->partner = NULL;
    if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
    if (rc != 0) { /* the others may wait in a collective for this rank: stop them all */
        fprintf(stderr, "longvk %s: rank %d of %d failed (its message is above): stopping every rank\n", command,
                m->rank, m->ranks);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    /* every rank here before any leaves: a rank that exits with a status (130 after a stop)
     * makes mpirun end the job, which must not cut rank 0 short while it closes the video */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    started = 0;
}
#else
int cli_mpi_begin(const char *command, bool cfg_parallel, cli_mpi *m) {
    (void)m;
    fprintf(stderr, "longvk %s: %s needs a build with MPI (cmake -DLONGVK_MPI=ON, with Debian's "
            "openmpi-bin and libopenmpi-dev), run under mpirun; this one has none\n", command,
            cfg_parallel ? "--cfg-parallel" : "--sequence-parallel");
    return 2;
}

int cli_mpi_device(const cli_mpi *m, int requested) {
    (void)m;
    return requested;
}

void cli_mpi_barrier(const cli_mpi *m) { (void)m; }

void cli_mpi_end(cli_mpi *m, const char *command, int rc) {
    (void)m;
    (void)command;
    (void)rc;
}
#endif
