/* What a transport of longvk/sp_comm.h implements (sp_comm_emulated.c, sp_comm_mpi.c,
 * sp_comm_solo.c). The public functions check the arguments, count and time the call,
 * then call these. */
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
    /* every process's `bytes` bytes of mine into all [processes][bytes], in band order */
    lv_status (*gather_bytes)(lv_sp_comm *c, const void *mine, void *all, uint64_t bytes);
} lv_sp_comm_ops;

struct lv_sp_comm {
    const lv_sp_comm_ops *ops;
    int bands;        /* R */
    int first, count; /* the bands held here */
    void *impl;
    lv_sp_comm_stats stats;
    bool timing;      /* lv_sp_comm_set_timing */
};

/* Host staging shared by the transports that move data through host memory (MPI, solo). */

/* Row `row` of every frame of t [F, rows, W, X] f32 to host [F, W, X] (read) or from it
 * (write), through one contiguous [F, 1, W, X] tensor: one transfer whatever F. */
lv_status lv_sp_stage_row(lv_ctx *ctx, const lv_tensor *t, int64_t row, float *host, bool read);

/* sum [n] = ((all_0 + all_1) + ...) + all_{R-1} from the host partials all [R, n], on the
 * device with the emulation's kernel and order (sp_comm_emulated.c): the same bits. */
lv_status lv_sp_sum_host_partials(lv_ctx *ctx, const float *all, int R, int64_t n, const lv_tensor *sum);

#endif
