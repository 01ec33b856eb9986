/* What a transport of longvk/sp_comm.h implements (sp_comm_emulated.c today; an MPI one
 * later). The public functions check the arguments, then call these. */
#ifndef LONGVK_SP_COMM_INTERNAL_H
#define LONGVK_SP_COMM_INTERNAL_H

#include "longvk/sp_comm.h"

typedef struct lv_sp_comm_ops {
    lv_status (*state_sum)(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials, const lv_tensor *sum);
    lv_status (*halo)(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *const *own, const lv_tensor *const *padded);
    /* NULL: every band is local (nothing to gather) */
    lv_status (*gather_rows)(lv_sp_comm *c, float *all, int F, int H, int64_t X);
    void (*destroy)(lv_sp_comm *c);

    /* between processes, outside the model (generate's block loop); NULL: one process
     * holds every band, nothing to do */
    lv_status (*broadcast)(lv_sp_comm *c, void *data, uint64_t bytes);
    lv_status (*agree_max)(lv_sp_comm *c, int *value);
} lv_sp_comm_ops;

struct lv_sp_comm {
    const lv_sp_comm_ops *ops;
    int bands;        /* R */
    int first, count; /* the bands held here */
    void *impl;
};

#endif
