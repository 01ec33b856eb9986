/* An MPI error code as a longvk status (pipelines/parallel/sp_comm_mpi.c): LV_ERR_IO naming
 * the feature, the call, the rank and MPI's own words. MPI_SUCCESS is LV_OK. Only in builds
 * with -DLONGVK_MPI=ON (sp_comm_mpi.c, cfg_partner_mpi.c). */
#ifndef LONGVK_MPI_STATUS_H
#define LONGVK_MPI_STATUS_H

#include "longvk/status.h"

lv_status lv_mpi_status(int err, const char *feature, const char *call, int rank);

#endif
