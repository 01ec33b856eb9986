/* CFG parallelism (pipelines/parallel/README.md, section 5): two processes share each
 * guided step, this one running one of its two passes and a partner the other; they swap
 * predictions and both combine them the same way, so both hold the same x0 to the bit,
 * which is the x0 of one process running both passes. Unguided steps and every write pass
 * run on both, so their carried states stay equal.
 *
 * The partner is what the sampler (lv_chunk_options.cfg_partner, longvk/sampler.h) and
 * lv_generate (lv_generate_options.cfg_partner) are given; the swap is the transport's
 * (over MPI: lv_cfg_split_mpi in longvk/sp_comm_mpi.h; tests use threads). It lives in
 * the parallel layer, below the sampler, so that the transport needs nothing above it. */
#ifndef LONGVK_CFG_PARTNER_H
#define LONGVK_CFG_PARTNER_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lv_cfg_role { LV_CFG_COND = 0, LV_CFG_UNCOND } lv_cfg_role;
typedef struct lv_cfg_partner {
    lv_cfg_role role; /* the pass this process runs at a guided step */
    /* Sends mine [n] to the partner and receives its prediction into theirs [n]; on failure
     * returns the error with its message set. */
    lv_status (*swap)(void *user, const float *mine, float *theirs, size_t n);
    /* For lv_generate's block loop (lv_longsana_chunk needs neither): bytes of data from the
     * conditional process to the unconditional one (what the first read or encoded), and
     * *value becoming the larger of the two processes' (the stop flag, agreed). */
    lv_status (*share)(void *user, void *data, uint64_t bytes);
    lv_status (*agree_max)(void *user, int *value);
    void *user;
} lv_cfg_partner;

#ifdef __cplusplus
}
#endif
#endif
