/* How the tests start `mpirun` (tests/models/test_sp_mpi.c, tests/generate/test_sp_generate.c). */
#ifndef LONGVK_TS_MPI_H
#define LONGVK_TS_MPI_H

/* root (in containers) needs the first two; more ranks than cores, oversubscribed, and a
 * waiting rank yields its core (else it spins in MPI while rank 0 works alone, the text
 * encoder or the VAE: a 6 s run took 52 s on 2 cores); the ranks talk through shared memory
 * only, without the single-copy mechanism that a container's ptrace rules may forbid:
 * nothing depends on the network */
#define TS_MPIRUN "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " \
                  "OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader "                                   \
                  "OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun "

#endif
