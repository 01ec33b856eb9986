/* `--sequence-parallel`: a command run by every rank of `mpirun`, one band of token rows per
 * rank (pipelines/parallel/README.md). Only a build with -DLONGVK_MPI=ON has MPI; elsewhere
 * the flag is a clear error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_mpi.h"
#include "commands.h"
#include "options.h"
#include "longvk.h"

int cli_launcher_size(void) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

int cli_fail_before_ranks(const char *command, bool cfg_parallel, int rc) {
    if (cli_launcher_size() < 2) return rc;
    const char *kept = cli_deferred_errors();
    cli_mpi m = {.rank = 0, .ranks = 1};
    if (cli_mpi_begin(command, cfg_parallel, &m) != 0) { /* no MPI here: every rank says it */
        if (*kept) fprintf(stderr, "%s\n", kept);
        cli_defer_errors(false);
        return rc;
    }
    cli_mpi_end(&m, command, rc); /* says it once, and ends the job */
    return rc;
}

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
    if (m->ranks > 1) cli_defer_errors(true); /* said once by cli_mpi_end: see say_failure */
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

/* A failure of this rank, said once. Every rank runs the same command on the same files, so
 * most faults (a missing or broken weights file, a bad resume file) are found by every rank:
 * rank 0 alone says them. A rank other than 0 sends its message to rank 0 and waits for its
 * answer (rank 0 printed it, or had printed the same); without an answer (rank 0 is busy, or
 * waits in a collective: a fault only this rank found) it prints the message itself, with its
 * rank. Rank 0 waits a moment for the others' messages, prints its own and every different one
 * with the rank that found it (not one that only points at rank 0's: "rank 0: its message
 * says why"), and says when some ranks did not fail. Nothing is lost: a message is printed by
 * its rank unless rank 0 has printed it. */
#define FAIL_TAG 5301
#define ANSWER_TAG 5302
#define RANK0_WAITS_S 2.0 /* for the others' messages */
#define OTHER_WAITS_S 4.0 /* for rank 0's answer: longer, so that rank 0 answers first */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void say_failure(const cli_mpi *m, const char *command) {
    char mine[4096];
    snprintf(mine, sizeof mine, "%s", *cli_deferred_errors() ? cli_deferred_errors() : "longvk: failed");
    cli_defer_errors(false);
    if (m->rank != 0) {
        MPI_Request req;
        MPI_Isend(mine, (int)strlen(mine) + 1, MPI_CHAR, 0, FAIL_TAG, MPI_COMM_WORLD, &req);
        int answered = 0;
        for (double end = now_s() + OTHER_WAITS_S; !answered && now_s() < end;) {
            MPI_Iprobe(0, ANSWER_TAG, MPI_COMM_WORLD, &answered, MPI_STATUS_IGNORE);
            if (!answered) usleep(10000);
        }
        if (answered) { /* rank 0 said it: give it the moment to end the job itself */
            sleep(1);
            return;
        }
        fprintf(stderr, "longvk %s (rank %d of %d): %s\nlongvk %s: rank %d of %d failed (its message is above): "
                "stopping every rank\n", command, m->rank, m->ranks, mine, command, m->rank, m->ranks);
        return;
    }
    fprintf(stderr, "%s\n", mine);
    int heard = 0;
    for (double end = now_s() + RANK0_WAITS_S; heard < m->ranks - 1 && now_s() < end;) {
        int flag = 0, len = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, FAIL_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            usleep(10000);
            continue;
        }
        MPI_Get_count(&st, MPI_CHAR, &len);
        char *theirs = malloc(len > 0 ? (size_t)len + 1 : 1);
        if (!theirs) break;
        MPI_Recv(theirs, len, MPI_CHAR, st.MPI_SOURCE, FAIL_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        theirs[len > 0 ? len : 0] = '\0';
        if (strcmp(theirs, mine) != 0 && !strstr(theirs, "rank 0: its message says why"))
            fprintf(stderr, "longvk %s (rank %d of %d): %s\n", command, st.MPI_SOURCE, m->ranks, theirs);
        free(theirs);
        int printed = 1;
        MPI_Send(&printed, 1, MPI_INT, st.MPI_SOURCE, ANSWER_TAG, MPI_COMM_WORLD);
        heard++;
    }
    if (heard < m->ranks - 1)
        fprintf(stderr, "longvk %s: rank 0 of %d failed (its message is above): stopping every rank\n", command,
                m->ranks);
    else
        fprintf(stderr, "longvk %s: all %d ranks failed (the messages above): stopping every rank\n", command,
                m->ranks);
}

void cli_mpi_end(cli_mpi *m, const char *command, int rc) {
    if (!started) return;
    lv_sp_comm_destroy(m->comm);
    m->comm = NULL;
    lv_cfg_partner_mpi_destroy(m->partner);
    m->partner = NULL;
    if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
    if (rc == 0 && *cli_deferred_errors()) fprintf(stderr, "%s\n", cli_deferred_errors()); /* none: but never lost */
    if (rc == 0) cli_defer_errors(false);
    if (rc != 0) { /* the others may wait in a collective for this rank: stop them all */
        if (m->ranks > 1) say_failure(m, command);
        else fprintf(stderr, "longvk %s: rank %d of %d failed (its message is above): stopping every rank\n",
                     command, m->rank, m->ranks);
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
