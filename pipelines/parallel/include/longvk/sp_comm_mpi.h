/* The MPI transport of longvk/sp_comm.h (pipelines/parallel/sp_comm_mpi.c): one band per
 * rank, R = the communicator's size. Only in builds with -DLONGVK_MPI=ON (Open MPI from
 * Debian: openmpi-bin libopenmpi-dev); the rest of longvk never includes <mpi.h>.
 *
 *   MPI_Init(&argc, &argv);
 *   lv_sp_comm *comm;
 *   lv_sp_comm_mpi_create(MPI_COMM_WORLD, &comm);   band = rank
 *   ... lv_dit_options.sp = comm ...
 *   lv_sp_comm_destroy(comm); MPI_Finalize();
 *
 * The ordered sum gathers every rank's partial state (MPI_Allgather: bytes only, no
 * arithmetic in MPI, whose reduction order is unspecified) and adds them on the device in
 * band order with the kernel the emulation uses, so R ranks give the bits of
 * `--sp-emulate R` on the same kind of device. Halos go to the neighbours with
 * MPI_Sendrecv. An MPI error is LV_ERR_IO naming the call and the rank. */
#ifndef LONGVK_SP_COMM_MPI_H
#define LONGVK_SP_COMM_MPI_H

#include <mpi.h>

#include "longvk/cfg_partner.h"
#include "longvk/sp_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `comm` is duplicated (the transport's messages never mix with the caller's) and set to
 * return errors instead of aborting. */
lv_status lv_sp_comm_mpi_create(MPI_Comm comm, lv_sp_comm **out);

/* CFG parallelism (`--cfg-parallel`): the ranks of `world` (an even number W) in two groups,
 * ranks [0, W/2) running the conditional passes of the guided steps and [W/2, W) the
 * unconditional ones. *bands: this rank's group as a new communicator (band rank = world
 * rank modulo W/2; give it to lv_sp_comm_mpi_create; MPI_Comm_free it), *partner: the
 * swap with the same band of the other group (lv_chunk_options.cfg_partner;
 * lv_cfg_partner_mpi_destroy it). An odd W is LV_ERR_INVALID. */
lv_status lv_cfg_split_mpi(MPI_Comm world, MPI_Comm *bands, lv_cfg_partner **partner);
void lv_cfg_partner_mpi_destroy(lv_cfg_partner *partner);

#ifdef __cplusplus
}
#endif
#endif
