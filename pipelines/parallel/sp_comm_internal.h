/* What a transport of longvk/sp_comm.h implements (sp_comm_emulated.c, sp_comm_mpi.c,
 * sp_comm_solo.c). The public functions check the arguments, count and time the call,
 * then call these. */
#ifndef LONGVK_SP_COMM_INTERNAL_H
#define LONGVK_SP_COMM_INTERNAL_H

#include "longvk/sp_comm.h"

/* One local band in a halo exchange: its first and last own rows in src [F, rows, W, X],
 * and the rows of dst [F, rows', W, X] that receive the last row of the band above (above)
 * and the first row of the band below (below); -1 where there is no such band. src and
 * dst may be the same tensor (bands stacked with their halo rows). */
typedef struct sp_halo_band {
    const lv_tensor *src, *dst;
    int64_t first, last, above, below;
} sp_halo_band;

typedef struct lv_sp_comm_ops {
    lv_status (*state_sum)(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials, const lv_tensor *sum);
    /* bands[i]: local band first + i */
    lv_status (*halo)(lv_sp_comm *c, lv_ctx *ctx, const sp_halo_band *bands);
    /* all [F, H0 * scale, X] on the host with this process's bands' rows filled (band r's:
     * scale times those lv_sp_band(H0, R, r) gives); the other bands' rows arrive on every
     * process, or (to_first) on the process holding band 0 only. NULL: every band is local. */
    lv_status (*gather_rows)(lv_sp_comm *c, float *all, int F, int H0, int scale, int64_t X, bool to_first);
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
