/* Sequence parallelism: the communication between the bands of a video (pipelines/parallel/).
 *
 * A chunk's token grid [F, Hp, Wp] is split into R bands of contiguous token rows over all
 * frames (lv_sp_band). Each band computes what one rank would; they exchange only
 *   state_sum  the per-layer sum of their linear-attention partial states (S_r, z_r), in
 *              band order: ((p_0 + p_1) + ...) + p_{R-1}, so the result never depends on
 *              timing or on how many processes hold the bands;
 *   halo       one token row above and below each band for the Mix-FFN's 3x3 conv;
 *   gather_rows the prediction's rows, to every process (the sampler is replicated).
 * A communicator holds some of the R bands: the in-process emulation all of them
 * (`longvk forward --sp-emulate R`), an MPI rank one (longvk/sp_comm_mpi.h), the solo
 * transport one without peers (for measuring a rank: `longvk bench sp`). They only move
 * data, apart from the ordered sum, which every process computes with the same kernel on
 * the same bits. */
#ifndef LONGVK_SP_COMM_H
#define LONGVK_SP_COMM_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Band r of R over Hp token rows: rows [*row0, *row0 + *rows). The first Hp % R bands get
 * one row more than the others. LV_ERR_INVALID (naming both) when R > Hp or R < 1. */
lv_status lv_sp_band(int Hp, int R, int r, int *row0, int *rows);

/* Rows [r0, r0 + n) of every frame of src [F, Rs, W, X] into rows [d0, d0 + n) of dst
 * [F, Rd, W, X] (recorded: one copy per frame): how bands, halos and their transfers move
 * rows. */
lv_status lv_sp_copy_rows(lv_ctx *ctx, const lv_tensor *dst, int64_t d0, const lv_tensor *src, int64_t r0, int64_t n);

typedef struct lv_sp_comm lv_sp_comm;

/* The in-process emulation: one communicator holds all R bands. */
lv_status lv_sp_comm_emulated_create(int bands, lv_sp_comm **out);
/* One rank's work alone, for measuring it (`longvk bench sp`): band `band` of R, with the
 * same device work and host staging as an MPI rank (sp_comm_mpi.c) but no peer: its own
 * partial state stands in for every other band's, its own edge rows for the neighbours'
 * halo rows, zeros for the other bands' prediction rows. The time is a rank's; the values
 * are not a video's. */
lv_status lv_sp_comm_solo_create(int bands, int band, lv_sp_comm **out);
void lv_sp_comm_destroy(lv_sp_comm *c);

/* R, and the bands this process holds: [first, first + count). */
int lv_sp_comm_bands(const lv_sp_comm *c);
int lv_sp_comm_first(const lv_sp_comm *c);
int lv_sp_comm_count(const lv_sp_comm *c);

/* partials [count, M] f32: row i is local band first + i's partial state (one state slot:
 * S then z). sum [M] (or [1, M]): the band-ordered sum of all R partials, the same bits on
 * every process. sum must not overlap partials. */
lv_status lv_sp_comm_state_sum(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *partials,
                               const lv_tensor *sum);

/* own[i] [F, rows_i, Wp, X] f32: local band i's rows. padded[i] [F, top + rows_i + bottom,
 * Wp, X] with top = 1 when the band has a band above it (first + i > 0) and bottom = 1 when
 * it has one below: their halo rows receive the neighbours' edge rows (the last row of the
 * band above, the first row of the band below) of every frame. The rows in between are the
 * caller's. */
lv_status lv_sp_comm_halo(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *const *own,
                          const lv_tensor *const *padded);

/* all [F, H, X] f32 on the host, H token rows of X values, with the rows of this process's
 * bands filled: on return every band's rows are there, on every process (the prediction,
 * which the replicated sampler needs whole). Nothing to do when one process holds every
 * band. */
lv_status lv_sp_comm_gather_rows(lv_sp_comm *c, float *all, int F, int H, int64_t X);

/* ---- bands stacked with their halo rows (the VAE decoder over the bands) ----
 *
 * A stacked tensor [F, height, W, X] f32 holds this process's bands one above the other,
 * each between its halo rows: band r (of R, over H0 rows at `scale`: scale times the rows
 * lv_sp_band(H0, R, r) gives) has a halo row above when r > 0 and one below when r < R - 1.
 * For the one band of a process it is [top, rows, bottom]; for the emulation, which holds
 * every band, the whole frame with each band boundary's two rows doubled. A kernel run over
 * the stacked tensor computes every band's own rows as separate ranks would, as long as
 * what it reads across a band boundary is one row deep and the halo rows are fresh; what it
 * writes into the halo rows is not used. A NULL communicator is one band: the whole frame. */
typedef struct lv_sp_stacked_band {
    int64_t offset;       /* the band's first row in the stacked tensor (its halo row, if any) */
    int64_t top, rows, bottom; /* halo rows above (0 or 1), own rows, halo rows below */
    int64_t row0;         /* the first own row's row in the whole frame */
} lv_sp_stacked_band;

/* Rows of the stacked tensor; LV_ERR_INVALID when there are more bands than H0 rows. */
lv_status lv_sp_stacked_height(const lv_sp_comm *c, int H0, int scale, int64_t *height);
/* Local band i's place (0 <= i < lv_sp_comm_count, or 0 with c NULL). */
lv_sp_stacked_band lv_sp_stacked_band_at(const lv_sp_comm *c, int H0, int scale, int i);
/* Every halo row of t receives its neighbour's edge row (the last own row of the band
 * above, the first of the band below), in every frame. */
lv_status lv_sp_comm_halo_stacked(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *t, int H0, int scale);
/* all [F, H0 * scale, W, X] on the host: every band's own rows of t, on every process, or
 * (to_first) on the process holding band 0 only (the others then get their own rows). */
lv_status lv_sp_comm_gather_stacked(lv_sp_comm *c, lv_ctx *ctx, const lv_tensor *t, int H0, int scale, float *all,
                                    bool to_first);

/* Between the processes of a run, outside the model's arithmetic (`longvk generate`'s
 * block loop): nothing to do when one process holds every band. */

/* bytes of data from the process holding band 0 to every other process (a resume file's
 * state, which only that process reads). */
lv_status lv_sp_comm_broadcast(lv_sp_comm *c, void *data, uint64_t bytes);

/* *value becomes the largest of every process's *value: an exact integer maximum, so every
 * process gets the same answer (the stop flag agreed at a block boundary). */
lv_status lv_sp_comm_agree_max(lv_sp_comm *c, int *value);

/* LV_OK when every process passed the same text (up to 511 bytes), else LV_ERR_INVALID on
 * every process, naming `what`, band 0's text and the first band whose text differs (the
 * design's D4: ranks on different kinds of device would not make the same bits). */
lv_status lv_sp_comm_check_same(lv_sp_comm *c, const char *what, const char *mine);

/* ---- what the communication costs (longvk bench sp) ---- */

typedef enum lv_sp_op { LV_SP_STATE_SUM = 0, LV_SP_HALO, LV_SP_GATHER_ROWS, LV_SP_OPS } lv_sp_op;

/* Per operation since creation or the last reset: the calls; the bytes this process's
 * bands send to other bands, as separate ranks would (whichever transport: the emulation
 * counts what its R bands would send each other), with MPI_Allgather(v) counted as each
 * band's payload sent to each of the R - 1 others (the ring and pairwise algorithms), a
 * halo as the edge rows sent to each neighbour; and the wall time spent in the operation.
 * With timing on (lv_sp_comm_set_timing), the device work recorded before an operation is
 * finished before its clock starts, and its own device work before it stops, so the time
 * is the operation's alone; off (the default), nothing is waited for that the transport
 * does not wait for itself, and the seconds include whatever the operation waits on. */
typedef struct lv_sp_comm_stats {
    uint64_t calls[LV_SP_OPS];
    uint64_t bytes_sent[LV_SP_OPS];
    uint64_t messages[LV_SP_OPS]; /* the sends behind those bytes, counted the same way */
    double seconds[LV_SP_OPS];
} lv_sp_comm_stats;

/* "state sum", "halo", "gather rows" */
const char *lv_sp_op_name(lv_sp_op op);
void lv_sp_comm_stats_get(const lv_sp_comm *c, lv_sp_comm_stats *out);
void lv_sp_comm_stats_reset(lv_sp_comm *c);
void lv_sp_comm_set_timing(lv_sp_comm *c, bool on);

#ifdef __cplusplus
}
#endif
#endif
