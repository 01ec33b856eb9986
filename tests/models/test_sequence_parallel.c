/* Sequence parallelism emulated in one process (lv_dit_options.sp_bands, `longvk forward
 * --sp-emulate R`; pipelines/parallel/README.md): the DiT's token rows in R bands, each
 * computed as one rank would, the partial linear-attention states summed in band order,
 * halo rows for the Mix-FFN's 3x3 conv.
 *
 * Bounds: against the unsplit pass NMSE <= 1e-10 (the bound between R ranks and
 * one; only the grouping of the state sums and the matmuls' row tiling differ, so fp32
 * rounding: 1e-14 to 3e-13 measured on lavapipe, 0 for one band); against the reference
 * vectors the DiT tests' 1e-8 (tests/models/test_sana_dit.c). Two runs at the same R are
 * bit-identical. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "longvk/dit.h"
#include "longvk/ops.h"
#include "longvk/sp_comm.h"
#include "longvk/weights.h"
#include "test_support.h"
#include "ts_files.h"

#define SPLIT_BOUND 1e-10
#define REF_BOUND 1e-8

static void check(const char *what, double bound, const float *got, const float *want, size_t n) {
    double e = ts_nmse(got, want, n);
    cr_log_info("%-36s nmse %.3g", what, e);
    cr_assert(e <= bound, "%s: nmse %.3g > %.0e", what, e, bound);
}

/* ---- band geometry ---- */

Test(sequence_parallel, bands_cover_the_rows_first_ones_taller) {
    int row0, rows;
    /* 30 rows (480p) in 8 bands: 30 % 8 = 6 bands of 4, then 2 of 3 */
    int want[8] = {4, 4, 4, 4, 4, 4, 3, 3}, next = 0;
    for (int r = 0; r < 8; r++) {
        cr_assert_eq(lv_sp_band(30, 8, r, &row0, &rows), LV_OK, "%s", lv_last_error());
        cr_assert_eq(row0, next, "band %d starts at %d", r, row0);
        cr_assert_eq(rows, want[r], "band %d has %d rows", r, rows);
        next += rows;
    }
    cr_assert_eq(next, 30);
    cr_assert_eq(lv_sp_band(4, 4, 3, &row0, &rows), LV_OK);
    cr_assert(row0 == 3 && rows == 1);
    cr_assert_eq(lv_sp_band(4, 5, 0, &row0, &rows), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "5 bands") && strstr(lv_last_error(), "4 token rows"), "%s", lv_last_error());
    cr_assert_eq(lv_sp_band(4, 0, 0, &row0, &rows), LV_ERR_INVALID);
}

/* ---- the linear-attention state fed an externally summed contribution ---- */

/* ---- bands stacked with their halo rows (the VAE's layout) ---- */

/* Stacked rows of 7 rows at scale 2 over 3 bands (4/3/... : 3/2/2 latent rows, so 6/4/4):
 * [6 own, 1 halo] [1 halo, 4 own, 1 halo] [1 halo, 4 own] = 18 rows; the emulation's halo
 * exchange fills each halo row with the neighbour's edge row, the gather puts every own row
 * back in place, the solo transport stands its own rows in for the neighbours'. */
Test(sequence_parallel, stacked_bands_halo_and_gather) {
    lv_ctx *ctx = ts_ctx();
    lv_sp_comm *c;
    cr_assert_eq(lv_sp_comm_emulated_create(3, &c), LV_OK);
    int64_t height;
    cr_assert_eq(lv_sp_stacked_height(c, 7, 2, &height), LV_OK);
    cr_assert_eq(height, 18);
    const int64_t want[3][5] = {{0, 0, 6, 1, 0}, {7, 1, 4, 1, 6}, {13, 1, 4, 0, 10}}; /* offset top rows bottom row0 */
    for (int i = 0; i < 3; i++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(c, 7, 2, i);
        cr_assert(g.offset == want[i][0] && g.top == want[i][1] && g.rows == want[i][2] && g.bottom == want[i][3] &&
                      g.row0 == want[i][4], "band %d: offset %lld top %lld rows %lld bottom %lld row0 %lld", i,
                  (long long)g.offset, (long long)g.top, (long long)g.rows, (long long)g.bottom, (long long)g.row0);
    }
    cr_assert_eq(lv_sp_stacked_height(c, 2, 1, &height), LV_ERR_INVALID); /* 3 bands over 2 rows */
    lv_sp_stacked_band whole = lv_sp_stacked_band_at(NULL, 7, 2, 0);
    cr_assert(whole.offset == 0 && whole.top == 0 && whole.rows == 14 && whole.bottom == 0);

    /* frame f, whole row y, element x: a value that names them; halo rows start as -1 */
    enum { F = 2, H = 14, WX = 3 };
    float full[F * H * WX], stacked[F * 18 * WX];
    for (int i = 0; i < F * H * WX; i++) full[i] = (float)i;
    for (int i = 0; i < F * 18 * WX; i++) stacked[i] = -1.0f;
    for (int b = 0; b < 3; b++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(c, 7, 2, b);
        for (int f = 0; f < F; f++)
            memcpy(stacked + ((size_t)f * 18 + g.offset + g.top) * WX, full + ((size_t)f * H + g.row0) * WX,
                   (size_t)g.rows * WX * sizeof(float));
    }
    int64_t shape[4] = {F, 18, 1, WX};
    lv_tensor t = ts_tensor(ctx, LV_F32, 4, shape, stacked);
    cr_assert_eq(lv_sp_comm_halo_stacked(c, ctx, &t, 7, 2), LV_OK, "%s", lv_last_error());
    float *got = ts_read(ctx, &t);
    for (int b = 0; b < 3; b++) {
        lv_sp_stacked_band g = lv_sp_stacked_band_at(c, 7, 2, b);
        for (int f = 0; f < F; f++)
            for (int64_t r = 0; r < g.top + g.rows + g.bottom; r++) {
                const int64_t y = g.row0 - g.top + r; /* the whole frame's row this stacked row shows */
                for (int x = 0; x < WX; x++)
                    cr_assert_eq(got[((size_t)f * 18 + g.offset + r) * WX + x], full[((size_t)f * H + y) * WX + x],
                                 "band %d frame %d stacked row %lld", b, f, (long long)r);
            }
    }
    float all[F * H * WX];
    memset(all, 0, sizeof all);
    cr_assert_eq(lv_sp_comm_gather_stacked(c, ctx, &t, 7, 2, all, true), LV_OK, "%s", lv_last_error());
    cr_assert_eq(memcmp(all, full, sizeof all), 0, "the gathered rows are not the whole frames");
    lv_sp_comm_stats st;
    lv_sp_comm_stats_get(c, &st);
    cr_assert_eq(st.bytes_sent[LV_SP_HALO], 4u * F * WX * sizeof(float)); /* 4 edge rows a frame */
    cr_assert_eq(st.bytes_sent[LV_SP_GATHER_ROWS], (4u + 4u) * F * WX * sizeof(float)); /* bands 1, 2 to band 0 */
    lv_sp_comm_destroy(c);

    /* solo, band 1 of 3: [1 halo, 4 own, 1 halo], its own edge rows in the halo rows */
    cr_assert_eq(lv_sp_comm_solo_create(3, 1, &c), LV_OK);
    cr_assert_eq(lv_sp_stacked_height(c, 7, 2, &height), LV_OK);
    cr_assert_eq(height, 6);
    float band[F * 6 * WX];
    for (int f = 0; f < F; f++)
        for (int r = 0; r < 6; r++)
            for (int x = 0; x < WX; x++) band[(f * 6 + r) * WX + x] = r == 0 || r == 5 ? -1.0f : full[(f * H + 6 + r - 1) * WX + x];
    int64_t bshape[4] = {F, 6, 1, WX};
    lv_tensor tb = ts_tensor(ctx, LV_F32, 4, bshape, band);
    cr_assert_eq(lv_sp_comm_halo_stacked(c, ctx, &tb, 7, 2), LV_OK, "%s", lv_last_error());
    float *gb = ts_read(ctx, &tb);
    for (int f = 0; f < F; f++)
        for (int x = 0; x < WX; x++) {
            cr_assert_eq(gb[(f * 6 + 0) * WX + x], full[(f * H + 9) * WX + x]); /* its last own row */
            cr_assert_eq(gb[(f * 6 + 5) * WX + x], full[(f * H + 6) * WX + x]); /* its first own row */
        }
    memset(all, 0, sizeof all);
    cr_assert_eq(lv_sp_comm_gather_stacked(c, ctx, &tb, 7, 2, all, false), LV_OK, "%s", lv_last_error());
    for (int f = 0; f < F; f++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < WX; x++)
                cr_assert_eq(all[(f * H + y) * WX + x], y >= 6 && y < 10 ? full[(f * H + y) * WX + x] : 0.0f,
                             "solo gather frame %d row %d", f, y);
    lv_sp_comm_destroy(c);
    free(got);
    free(gb);
    lv_tensor_free(ctx, &t);
    lv_tensor_free(ctx, &tb);
    ts_ctx_done(ctx);
}

/* Tokens split 3 ways, partials by lv_op_linattn_state, summed by the emulated transport,
 * read with begin/query/commit: the same as lv_linattn_block_read/write over all tokens,
 * for the additive and the window rule, over 3 blocks. */
static void external_sum_matches(lv_state_rule rule) {
    lv_ctx *ctx = ts_ctx();
    const int H = 2, D = 8, N = 23, C = H * D;
    lv_linattn_config cfg = {.heads = H, .head_dim = D, .phi = LV_PHI_RELU, .normalize = true, .eps = 1e-6f,
                             .rule = rule, .window = 2, .decay = 1.0f};
    lv_linattn_state *ref, *split;
    cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &ref), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_linattn_state_create(ctx, &cfg, &split), LV_OK, "%s", lv_last_error());
    const int64_t m = lv_linattn_state_slot_floats(split);
    cr_assert_eq(m, (int64_t)H * D * (D + 1));
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_emulated_create(3, &comm), LV_OK);
    int64_t pshape[2] = {3, m}, qshape[2] = {N, C}, rshape[2] = {N, D};
    lv_tensor partials = ts_empty(ctx, 2, pshape), own = ts_empty(ctx, 1, &m);
    lv_tensor out_ref = ts_empty(ctx, 2, qshape), out_split = ts_empty(ctx, 2, qshape);
    float *rope = malloc((size_t)N * D * sizeof *rope);
    lv_rope_table_3d(rope, 1, 1, N, 0, D, 2, 2, 4, 10000.0);
    lv_tensor rt = ts_tensor(ctx, LV_F32, 2, rshape, rope);
    const int cut[4] = {0, 9, 10, N}; /* uneven parts, one of a single token */
    for (int blk = 0; blk < 3; blk++) {
        float *q = ts_rand_alloc((size_t)N * C, 10 + blk, -1, 1), *k = ts_rand_alloc((size_t)N * C, 20 + blk, -1, 1);
        float *v = ts_rand_alloc((size_t)N * C, 30 + blk, -1, 1);
        lv_tensor qt = ts_tensor(ctx, LV_F32, 2, qshape, q), kt = ts_tensor(ctx, LV_F32, 2, qshape, k);
        lv_tensor vt = ts_tensor(ctx, LV_F32, 2, qshape, v);
        bool commit = blk < 2;
        lv_status st = commit ? lv_linattn_block_write(ctx, ref, &out_ref, &qt, &kt, &vt, &rt)
                              : lv_linattn_block_read(ctx, ref, &out_ref, &qt, &kt, &vt, &rt);
        cr_assert_eq(st, LV_OK, "%s", lv_last_error());
        for (int p = 0; p < 3; p++) {
            const int64_t n0 = cut[p], n = cut[p + 1] - cut[p];
            int64_t sshape[3] = {H, D, D}, zshape[2] = {H, D};
            lv_tensor S = lv_tensor_view(&partials, p * m, 3, sshape);
            lv_tensor z = lv_tensor_view(&partials, p * m + H * D * D, 2, zshape);
            lv_tensor kp = lv_tensor_rows(&kt, n0, n), vp = lv_tensor_rows(&vt, n0, n), rp = lv_tensor_rows(&rt, n0, n);
            cr_assert_eq(lv_op_linattn_state(ctx, &S, &z, &kp, &vp, &rp, LV_PHI_RELU, false), LV_OK, "%s",
                         lv_last_error());
        }
        cr_assert_eq(lv_sp_comm_state_sum(comm, ctx, &partials, &own), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_linattn_block_begin(ctx, split, &own), LV_OK, "%s", lv_last_error());
        for (int p = 2; p >= 0; p--) { /* any order of the parts' queries */
            const int64_t n0 = cut[p], n = cut[p + 1] - cut[p];
            lv_tensor qp = lv_tensor_rows(&qt, n0, n), op = lv_tensor_rows(&out_split, n0, n);
            lv_tensor rp = lv_tensor_rows(&rt, n0, n);
            cr_assert_eq(lv_linattn_block_query(ctx, split, &op, &qp, &rp), LV_OK, "%s", lv_last_error());
        }
        if (commit) {
            cr_assert_eq(lv_linattn_block_commit(ctx, split), LV_OK, "%s", lv_last_error());
            /* a block ends with its commit */
            cr_assert_eq(lv_linattn_block_commit(ctx, split), LV_ERR_INVALID);
            cr_assert_eq(lv_linattn_block_query(ctx, split, &out_split, &qt, &rt), LV_ERR_INVALID);
        }
        float *a = ts_read(ctx, &out_ref), *b = ts_read(ctx, &out_split);
        char what[64];
        snprintf(what, sizeof what, "rule %d block %d output", (int)rule, blk);
        check(what, 1e-12, b, a, (size_t)N * C);
        free(a);
        free(b);
        float *Sa = malloc((size_t)m * 4), *Sb = malloc((size_t)m * 4);
        cr_assert_eq(lv_linattn_state_read(ctx, ref, Sa, Sa + H * D * D), LV_OK);
        cr_assert_eq(lv_linattn_state_read(ctx, split, Sb, Sb + H * D * D), LV_OK);
        cr_assert_eq(lv_linattn_state_blocks(split), lv_linattn_state_blocks(ref));
        snprintf(what, sizeof what, "rule %d block %d carried", (int)rule, blk);
        check(what, 1e-12, Sb, Sa, (size_t)m);
        free(Sa);
        free(Sb);
        lv_tensor_free(ctx, &qt);
        lv_tensor_free(ctx, &kt);
        lv_tensor_free(ctx, &vt);
        free(q);
        free(k);
        free(v);
    }
    /* a contribution of the wrong size */
    lv_tensor small = lv_tensor_view(&own, 0, 1, (int64_t[]){m - 1});
    cr_assert_eq(lv_linattn_block_begin(ctx, split, &small), LV_ERR_INVALID);
    free(rope);
    lv_tensor_free(ctx, &rt);
    lv_tensor_free(ctx, &partials);
    lv_tensor_free(ctx, &own);
    lv_tensor_free(ctx, &out_ref);
    lv_tensor_free(ctx, &out_split);
    lv_sp_comm_destroy(comm);
    lv_linattn_state_destroy(ctx, ref);
    lv_linattn_state_destroy(ctx, split);
    ts_ctx_done(ctx);
}

Test(sequence_parallel, external_sum_additive) { external_sum_matches(LV_RULE_ADDITIVE); }
Test(sequence_parallel, external_sum_window) { external_sum_matches(LV_RULE_WINDOW); }

/* ---- the DiT in bands ---- */

typedef struct model {
    lv_ctx *ctx;
    lv_sana_file *file;
    lv_weights *vec;    /* assets/vectors/sana-video-NAME (the float64 reference) */
    lv_weights *orig;   /* assets/testdata/sana-video/NAME.vectors (the original modules) */
    int C, F, H, W, Hp, cf, chunks;
} model;

static const float *vec(const lv_weights *w, const char *name, int64_t numel) {
    const lv_weight *t = lv_weights_find(w, name);
    cr_assert_not_null(t, "vector '%s' missing", name);
    if (numel >= 0) cr_assert_eq((int64_t)lv_weight_numel(t), numel, "%s size", name);
    return t->data;
}

static void open_model(model *md, const char *name) {
    char path[1024];
    memset(md, 0, sizeof *md);
    md->ctx = ts_ctx();
    snprintf(path, sizeof path, "%s/testdata/sana-video/%s.weights.safetensors", LONGVK_ASSETS_DIR, name);
    cr_assert_eq(lv_sana_file_open(path, NULL, NULL, &md->file), LV_OK, "%s", lv_last_error());
    snprintf(path, sizeof path, "%s/vectors/sana-video-%s.safetensors", LONGVK_ASSETS_DIR, name);
    cr_assert_eq(lv_weights_open(path, &md->vec), LV_OK, "%s", lv_last_error());
    snprintf(path, sizeof path, "%s/testdata/sana-video/%s.vectors.safetensors", LONGVK_ASSETS_DIR, name);
    cr_assert_eq(lv_weights_open(path, &md->orig), LV_OK, "%s", lv_last_error());
    const lv_weight *x = lv_weights_find(md->vec, "x");
    md->C = (int)x->shape[0];
    md->F = (int)x->shape[1];
    md->H = (int)x->shape[2];
    md->W = (int)x->shape[3];
    md->Hp = md->H / lv_sana_file_config(md->file)->patch[1];
    md->cf = atoi(lv_weights_metadata(md->vec, "chunk_frames"));
    md->chunks = atoi(lv_weights_metadata(md->vec, "chunks"));
}

static void close_model(model *md) {
    lv_weights_close(md->orig);
    lv_weights_close(md->vec);
    lv_sana_file_close(md->file);
    ts_ctx_done(md->ctx);
}

static lv_dit *make_dit(model *md, int bands) {
    lv_dit_options opt = {.cached_blocks = LV_CACHED_ALL, .sp_bands = bands};
    lv_dit *dit;
    cr_assert_eq(lv_dit_create(md->ctx, md->file, &opt, &dit), LV_OK, "%s", lv_last_error());
    const lv_weight *y = lv_weights_find(md->vec, "y");
    cr_assert_eq(lv_dit_set_text(md->ctx, dit, 0, y->data, (int)y->shape[0], vec(md->vec, "mask", y->shape[0])),
                 LV_OK, "%s", lv_last_error());
    return dit;
}

/* Everything one run produces, in order: the one-shot forward, then per LongSANA chunk
 * the read pass at t = 727, the write pass of the clean latents and the carried state of
 * every layer (S, z, conv cache). */
typedef struct run {
    float *data;
    size_t n;
    size_t one_shot, chunk_out, state; /* sizes of the parts */
} run;

static void do_run(model *md, int bands, run *out) {
    const lv_sana_config *cfg = lv_sana_file_config(md->file);
    const int HW = md->H * md->W, Hd = cfg->heads, D = cfg->head_dim;
    const int64_t P = (int64_t)md->Hp * (md->W / cfg->patch[2]);
    out->one_shot = (size_t)md->C * md->F * HW;
    out->chunk_out = (size_t)md->C * md->cf * HW;
    out->state = (size_t)cfg->depth * ((size_t)Hd * D * (D + 1) + (size_t)P * cfg->hidden);
    out->n = out->one_shot + md->chunks * (2 * out->chunk_out + out->state);
    out->data = malloc(out->n * sizeof *out->data);
    float *p = out->data;
    lv_dit *dit = make_dit(md, bands);
    float ts[64];
    const float *x = vec(md->vec, "x", (int64_t)out->one_shot);
    lv_dit_pass pass = {.x = x, .frames = md->F, .height = md->H, .width = md->W,
                        .timesteps = vec(md->vec, "fwd_timesteps", md->F)};
    cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, p), LV_OK, "%s", lv_last_error());
    p += out->one_shot;
    float *xk = malloc(out->chunk_out * sizeof *xk);
    char name[64];
    for (int k = 0; k < md->chunks; k++) {
        for (int c = 0; c < md->C; c++)
            memcpy(xk + (size_t)c * md->cf * HW, x + ((size_t)c * md->F + k * md->cf) * HW, (size_t)md->cf * HW * 4);
        for (int f = 0; f < md->cf; f++) ts[f] = 727.0f;
        lv_dit_pass rp = {.x = xk, .frames = md->cf, .height = md->H, .width = md->W, .timesteps = ts,
                          .frame_offset = k * md->cf};
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &rp, p), LV_OK, "%s", lv_last_error());
        p += out->chunk_out;
        snprintf(name, sizeof name, "ls_chunk%d_clean", k);
        for (int f = 0; f < md->cf; f++) ts[f] = 0.0f;
        rp.x = vec(md->vec, name, (int64_t)out->chunk_out);
        rp.commit = true;
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &rp, p), LV_OK, "%s", lv_last_error());
        p += out->chunk_out;
        for (int b = 0; b < cfg->depth; b++) {
            float *S = p, *z = S + (size_t)Hd * D * D, *conv = z + (size_t)Hd * D;
            cr_assert_eq(lv_dit_layer_state(md->ctx, dit, b, S, z, conv, P * cfg->hidden), LV_OK, "%s", lv_last_error());
            p += (size_t)Hd * D * (D + 1) + (size_t)P * cfg->hidden;
        }
    }
    cr_assert_eq((size_t)(p - out->data), out->n);
    free(xk);
    lv_dit_destroy(md->ctx, dit);
}

/* The split run against the unsplit one, part by part, and against the reference vectors. */
static void compare_runs(model *md, int bands, const run *got, const run *want) {
    const lv_sana_config *cfg = lv_sana_file_config(md->file);
    const int Hd = cfg->heads, D = cfg->head_dim;
    const int64_t P = (int64_t)md->Hp * (md->W / cfg->patch[2]);
    char what[96], name[64];
    const float *g = got->data, *w = want->data;
    snprintf(what, sizeof what, "R=%d one-shot vs unsplit", bands);
    check(what, SPLIT_BOUND, g, w, got->one_shot);
    check("  one-shot vs reference fwd_out", REF_BOUND, g, vec(md->vec, "fwd_out", (int64_t)got->one_shot), got->one_shot);
    g += got->one_shot;
    w += got->one_shot;
    for (int k = 0; k < md->chunks; k++) {
        snprintf(what, sizeof what, "R=%d chunk %d read pass vs unsplit", bands, k);
        check(what, SPLIT_BOUND, g, w, got->chunk_out);
        snprintf(name, sizeof name, "ls_chunk%d_out_t727", k);
        check("  read pass vs reference", REF_BOUND, g, vec(md->vec, name, (int64_t)got->chunk_out), got->chunk_out);
        g += got->chunk_out;
        w += got->chunk_out;
        snprintf(what, sizeof what, "R=%d chunk %d write pass vs unsplit", bands, k);
        check(what, SPLIT_BOUND, g, w, got->chunk_out);
        snprintf(name, sizeof name, "ls_chunk%d_out_t0", k);
        check("  write pass vs reference", REF_BOUND, g, vec(md->vec, name, (int64_t)got->chunk_out), got->chunk_out);
        g += got->chunk_out;
        w += got->chunk_out;
        for (int b = 0; b < cfg->depth; b++) {
            size_t ns = (size_t)Hd * D * D, nz = (size_t)Hd * D, nc = (size_t)P * cfg->hidden;
            snprintf(what, sizeof what, "R=%d chunk %d layer %d S, z, conv", bands, k, b);
            check(what, SPLIT_BOUND, g, w, ns + nz + nc);
            snprintf(name, sizeof name, "ls_chunk%d_layer%d_S", k, b);
            check("  S vs reference", REF_BOUND, g, vec(md->vec, name, (int64_t)ns), ns);
            snprintf(name, sizeof name, "ls_chunk%d_layer%d_conv_last", k, b);
            check("  conv cache vs reference", REF_BOUND, g + ns + nz, vec(md->vec, name, (int64_t)nc), nc);
            g += ns + nz + nc;
            w += ns + nz + nc;
        }
    }
}

/* The original SANA-Video modules' outputs (assets/testdata, as tests/models/test_sana_dit.c's
 * original_outputs): one-shot at t = 500 with the full and the partial text mask, and the
 * LongSANA read passes at t = 727 over the carried state. */
static void compare_original(model *md, int bands) {
    lv_dit *dit;
    lv_dit_options opt = {.cached_blocks = LV_CACHED_ALL, .sp_bands = bands};
    cr_assert_eq(lv_dit_create(md->ctx, md->file, &opt, &dit), LV_OK, "%s", lv_last_error());
    const lv_weight *x = lv_weights_find(md->orig, "x"), *y = lv_weights_find(md->orig, "y");
    const float *mask = vec(md->orig, "mask_part", y->shape[0]);
    cr_assert_eq(lv_dit_set_text(md->ctx, dit, 0, y->data, (int)y->shape[0], NULL), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_set_text(md->ctx, dit, 1, y->data, (int)y->shape[0], mask), LV_OK, "%s", lv_last_error());
    int C = (int)x->shape[0], F = (int)x->shape[1], H = (int)x->shape[2], W = (int)x->shape[3];
    size_t n = (size_t)C * F * H * W;
    float *out = malloc(n * 4), ts[64];
    char what[96], name[64];
    const char *one_shot[2] = {"out_t500_full_mask", "out_t500_part_mask"};
    for (int slot = 0; slot < 2; slot++) {
        for (int f = 0; f < F; f++) ts[f] = 500.0f;
        lv_dit_pass pass = {.x = x->data, .frames = F, .height = H, .width = W, .timesteps = ts, .text_slot = slot};
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
        snprintf(what, sizeof what, "R=%d vs original %s", bands, one_shot[slot]);
        check(what, REF_BOUND, out, vec(md->orig, one_shot[slot], (int64_t)n), n);
    }
    int cf = atoi(lv_weights_metadata(md->orig, "chunk_frames")), chunks = atoi(lv_weights_metadata(md->orig, "chunks"));
    size_t cn = (size_t)C * cf * H * W;
    float *xk = malloc(cn * 4);
    for (int k = 0; k < chunks; k++) {
        for (int c = 0; c < C; c++)
            memcpy(xk + (size_t)c * cf * H * W, (const float *)x->data + ((size_t)c * F + k * cf) * H * W,
                   (size_t)cf * H * W * 4);
        for (int f = 0; f < cf; f++) ts[f] = 727.0f;
        lv_dit_pass pass = {.x = xk, .frames = cf, .height = H, .width = W, .timesteps = ts,
                            .frame_offset = k * cf, .text_slot = 1};
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
        snprintf(name, sizeof name, "chunk%d_out_t727", k);
        snprintf(what, sizeof what, "R=%d vs original %s", bands, name);
        check(what, REF_BOUND, out, vec(md->orig, name, (int64_t)cn), cn);
        snprintf(name, sizeof name, "chunk%d_clean", k);
        for (int f = 0; f < cf; f++) ts[f] = 0.0f;
        pass.x = vec(md->orig, name, (int64_t)cn);
        pass.commit = true;
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, NULL), LV_OK, "%s", lv_last_error());
    }
    free(xk);
    free(out);
    lv_dit_destroy(md->ctx, dit);
}

static void bands_match_unsplit(const char *name, const int *bands, int count) {
    model md;
    open_model(&md, name);
    run base;
    do_run(&md, 0, &base);
    for (int i = 0; i < count; i++) {
        cr_log_info("%s: %d bands over %d token rows", name, bands[i], md.Hp);
        run r;
        do_run(&md, bands[i], &r);
        compare_runs(&md, bands[i], &r, &base);
        compare_original(&md, bands[i]);
        free(r.data);
    }
    free(base.data);
    close_model(&md);
}

/* tiny-hd32: 4 token rows. 1 band (the band path alone), 2 (2/2), 3 (2/1/1: uneven),
 * 4 (single rows, both halos on the middle bands). */
Test(sequence_parallel, tiny_bands_match_unsplit, .timeout = 600) {
    const int bands[] = {1, 2, 3, 4};
    bands_match_unsplit("tiny-hd32", bands, 4);
}

/* hd112 (SANA-Video's head_dim 112): 2 token rows, so 2 single-row bands. */
Test(sequence_parallel, hd112_bands_match_unsplit, .timeout = 600) {
    const int bands[] = {2};
    bands_match_unsplit("hd112", bands, 1);
}

Test(sequence_parallel, emulation_is_deterministic, .timeout = 600) {
    model md;
    open_model(&md, "tiny-hd32");
    run a, b;
    do_run(&md, 3, &a);
    do_run(&md, 3, &b);
    cr_assert_eq(a.n, b.n);
    cr_assert(memcmp(a.data, b.data, a.n * sizeof *a.data) == 0, "two runs with 3 bands differ");
    free(a.data);
    free(b.data);
    close_model(&md);
}

/* The carried state is the same whichever R wrote it (the conv cache is one [P, C] tensor,
 * each band writing its rows): saved after two chunks at R = 3 and loaded into an
 * unsplit dit, the third chunk's read pass matches an unsplit run throughout. */
Test(sequence_parallel, state_saved_at_3_bands_continues_unsplit, .timeout = 600) {
    model md;
    open_model(&md, "tiny-hd32");
    const int HW = md.H * md.W;
    const size_t cn = (size_t)md.C * md.cf * HW;
    const int64_t P = (int64_t)md.Hp * (md.W / lv_sana_file_config(md.file)->patch[2]);
    const float *x = vec(md.vec, "x", -1);
    float *xk = malloc(cn * 4), *a = malloc(cn * 4), *b = malloc(cn * 4), ts[64];
    float *saved[2];
    int64_t count[2];
    for (int split = 0; split < 2; split++) {
        lv_dit *dit = make_dit(&md, split ? 3 : 0);
        for (int k = 0; k < 2; k++) {
            char name[64];
            snprintf(name, sizeof name, "ls_chunk%d_clean", k);
            for (int f = 0; f < md.cf; f++) ts[f] = 0.0f;
            lv_dit_pass wp = {.x = vec(md.vec, name, (int64_t)cn), .frames = md.cf, .height = md.H, .width = md.W,
                              .timesteps = ts, .frame_offset = k * md.cf, .commit = true};
            cr_assert_eq(lv_dit_forward(md.ctx, dit, &wp, NULL), LV_OK, "%s", lv_last_error());
        }
        cr_assert_eq(lv_dit_state_save(md.ctx, dit, &saved[split], &count[split]), LV_OK, "%s", lv_last_error());
        lv_dit_destroy(md.ctx, dit);
    }
    cr_assert_eq(count[0], count[1]);
    check("state saved at R=3 vs unsplit", SPLIT_BOUND, saved[1], saved[0], (size_t)count[0]);
    for (int c = 0; c < md.C; c++)
        memcpy(xk + (size_t)c * md.cf * HW, x + ((size_t)c * md.F + 2 * md.cf) * HW, (size_t)md.cf * HW * 4);
    for (int f = 0; f < md.cf; f++) ts[f] = 727.0f;
    lv_dit_pass rp = {.x = xk, .frames = md.cf, .height = md.H, .width = md.W, .timesteps = ts,
                      .frame_offset = 2 * md.cf};
    for (int split = 0; split < 2; split++) {
        lv_dit *dit = make_dit(&md, 0);
        cr_assert_eq(lv_dit_state_load(md.ctx, dit, saved[split], count[split], 2, P), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_dit_forward(md.ctx, dit, &rp, split ? b : a), LV_OK, "%s", lv_last_error());
        lv_dit_destroy(md.ctx, dit);
        free(saved[split]);
    }
    check("chunk 2 after the R=3 state vs unsplit", SPLIT_BOUND, b, a, cn);
    check("  vs reference ls_chunk2_out_t727", REF_BOUND, b, vec(md.vec, "ls_chunk2_out_t727", (int64_t)cn), cn);
    free(xk);
    free(a);
    free(b);
    close_model(&md);
}

/* ---- the two forward paths held together ----
 * The unsplit forward (sana_dit.c) and the band path (sana_dit_bands.c) are two codings of
 * one pass. At one band the band path runs the same kernels on the same rows in the same
 * order (no halo rows, a state sum of one partial, the band's rows the whole frame), so
 * every tapped activation, layer by layer, must equal the unsplit one bit for bit: a
 * change made to one path and not the other shows here, at the layer it touches. */

typedef struct tap_log {
    int n, cap;
    char (*name)[48];
    float **data;
    int64_t *numel;
} tap_log;

static void record_tap(void *user, const char *name, lv_ctx *ctx, const lv_tensor *t) {
    tap_log *log = user;
    if (log->n == log->cap) {
        log->cap = log->cap ? 2 * log->cap : 64;
        log->name = realloc(log->name, (size_t)log->cap * sizeof *log->name);
        log->data = realloc(log->data, (size_t)log->cap * sizeof *log->data);
        log->numel = realloc(log->numel, (size_t)log->cap * sizeof *log->numel);
        cr_assert(log->name && log->data && log->numel);
    }
    snprintf(log->name[log->n], sizeof log->name[log->n], "%s", name);
    log->numel[log->n] = lv_tensor_numel(t);
    log->data[log->n] = ts_read(ctx, t);
    log->n++;
}

static void tap_log_free(tap_log *log) {
    for (int i = 0; i < log->n; i++) free(log->data[i]);
    free(log->name);
    free(log->data);
    free(log->numel);
}

/* A one-shot pass, then two LongSANA chunks: the read pass at t = 727 and the write pass
 * (with its prediction) of each, the second chunk's over the state the first carried. */
static void passes_with_taps(model *md, int bands, tap_log *log) {
    const int HW = md->H * md->W;
    const size_t cn = (size_t)md->C * md->cf * HW;
    lv_dit *dit = make_dit(md, bands);
    lv_dit_set_tap(dit, record_tap, log);
    const float *x = vec(md->vec, "x", -1);
    float *out = malloc((size_t)md->C * md->F * HW * sizeof *out), *xk = malloc(cn * sizeof *xk), ts[64];
    lv_dit_pass pass = {.x = x, .frames = md->F, .height = md->H, .width = md->W,
                        .timesteps = vec(md->vec, "fwd_timesteps", md->F)};
    cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
    for (int k = 0; k < 2 && k < md->chunks; k++) {
        for (int c = 0; c < md->C; c++)
            memcpy(xk + (size_t)c * md->cf * HW, x + ((size_t)c * md->F + k * md->cf) * HW, (size_t)md->cf * HW * 4);
        for (int f = 0; f < md->cf; f++) ts[f] = 727.0f;
        lv_dit_pass rp = {.x = xk, .frames = md->cf, .height = md->H, .width = md->W, .timesteps = ts,
                          .frame_offset = k * md->cf};
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &rp, out), LV_OK, "%s", lv_last_error());
        char name[64];
        snprintf(name, sizeof name, "ls_chunk%d_clean", k);
        for (int f = 0; f < md->cf; f++) ts[f] = 0.0f;
        rp.x = vec(md->vec, name, (int64_t)cn);
        rp.commit = true;
        cr_assert_eq(lv_dit_forward(md->ctx, dit, &rp, out), LV_OK, "%s", lv_last_error());
    }
    free(out);
    free(xk);
    lv_dit_destroy(md->ctx, dit);
}

Test(sequence_parallel, one_band_equals_unsplit_layer_by_layer, .timeout = 600) {
    model md;
    open_model(&md, "tiny-hd32");
    const int depth = lv_sana_file_config(md.file)->depth;
    tap_log whole = {0}, band = {0}, split = {0};
    passes_with_taps(&md, 0, &whole);
    passes_with_taps(&md, 1, &band);
    /* per pass: patch_embed, temb, 5 per layer, final_tokens; 1 + 2 x 2 passes */
    cr_assert_eq(whole.n, 5 * (2 + 5 * depth + 1), "%d taps of the unsplit passes", whole.n);
    cr_assert_eq(band.n, whole.n, "the band path tapped %d activations, the unsplit %d", band.n, whole.n);
    for (int i = 0; i < whole.n; i++) {
        cr_assert_str_eq(band.name[i], whole.name[i], "tap %d", i);
        cr_assert_eq(band.numel[i], whole.numel[i], "tap %d (%s) size", i, whole.name[i]);
        cr_assert(memcmp(band.data[i], whole.data[i], (size_t)whole.numel[i] * sizeof(float)) == 0,
                  "tap %d (pass %d, %s): one band differs from the unsplit pass (nmse %.3g)", i,
                  i / (2 + 5 * depth + 1), whole.name[i],
                  ts_nmse(band.data[i], whole.data[i], (size_t)whole.numel[i]));
    }
    passes_with_taps(&md, 2, &split); /* a band's rows are not the named tensor: no taps */
    cr_assert_eq(split.n, 0, "%d taps at 2 bands", split.n);
    tap_log_free(&whole);
    tap_log_free(&band);
    tap_log_free(&split);
    close_model(&md);
}

Test(sequence_parallel, more_bands_than_rows_is_an_error) {
    model md;
    open_model(&md, "tiny-hd32");
    lv_dit *dit = make_dit(&md, md.Hp + 1);
    float ts[64];
    for (int f = 0; f < md.F; f++) ts[f] = 500.0f;
    size_t n = (size_t)md.C * md.F * md.H * md.W;
    float *out = malloc(n * 4);
    lv_dit_pass pass = {.x = vec(md.vec, "x", (int64_t)n), .frames = md.F, .height = md.H, .width = md.W,
                        .timesteps = ts};
    cr_assert_eq(lv_dit_forward(md.ctx, dit, &pass, out), LV_ERR_INVALID);
    char want_r[64], want_h[64];
    snprintf(want_r, sizeof want_r, "%d sequence-parallel bands", md.Hp + 1);
    snprintf(want_h, sizeof want_h, "%d token rows", md.Hp);
    cr_assert(strstr(lv_last_error(), want_r) && strstr(lv_last_error(), want_h), "%s", lv_last_error());
    /* the dit is still usable, and a negative count is refused at creation */
    lv_dit_destroy(md.ctx, dit);
    lv_dit_options bad = {.sp_bands = -2};
    cr_assert_eq(lv_dit_create(md.ctx, md.file, &bad, &dit), LV_ERR_INVALID);
    free(out);
    close_model(&md);
}

/* ---- what the bands send (lv_sp_comm_stats), and one rank measured alone ---- */

/* One read pass of the vectors' x (all frames) through `comm`, into out [C, F, H, W]. */
static void forward_through(model *md, lv_sp_comm *comm, float *out) {
    lv_dit *dit = make_dit(md, 0);
    cr_assert_eq(lv_dit_set_sp_comm(dit, comm), LV_OK, "%s", lv_last_error());
    float ts[64];
    for (int f = 0; f < md->F; f++) ts[f] = 500.0f;
    const size_t n = (size_t)md->C * md->F * md->H * md->W;
    lv_dit_pass pass = {.x = vec(md->vec, "x", (int64_t)n), .frames = md->F, .height = md->H, .width = md->W,
                        .timesteps = ts};
    cr_assert_eq(lv_dit_forward(md->ctx, dit, &pass, out), LV_OK, "%s", lv_last_error());
    lv_dit_destroy(md->ctx, dit);
}

/* The sizes the counts are checked against, from the config alone. */
typedef struct sizes {
    uint64_t state, row, pred_row; /* bytes: one partial state; one token row of h (all frames); of the output */
    int depth;
} sizes;

static sizes sizes_of(const model *md) {
    const lv_sana_config *c = lv_sana_file_config(md->file);
    const uint64_t Fp = (uint64_t)(md->F / c->patch[0]), Wp = (uint64_t)(md->W / c->patch[2]);
    const uint64_t Ko = (uint64_t)c->out_channels * c->patch[0] * c->patch[1] * c->patch[2];
    return (sizes){.state = (uint64_t)c->heads * c->head_dim * (c->head_dim + 1) * 4,
                   .row = Fp * Wp * (uint64_t)c->hidden * 4, .pred_row = Fp * Wp * Ko * 4, .depth = c->depth};
}

/* 3 bands of tiny-hd32's 4 token rows (2/1/1) in one process: the counts are what the
 * bands would send each other as ranks. */
Test(sequence_parallel, stats_count_what_the_bands_send, .timeout = 300) {
    model md;
    open_model(&md, "tiny-hd32");
    cr_assert_eq(md.Hp, 4);
    const sizes z = sizes_of(&md);
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_emulated_create(3, &comm), LV_OK);
    float *out = malloc((size_t)md.C * md.F * md.H * md.W * sizeof *out);
    forward_through(&md, comm, out);
    lv_sp_comm_stats st;
    lv_sp_comm_stats_get(comm, &st);
    const uint64_t L = (uint64_t)z.depth;
    /* per layer: each band's partial to the 2 others; edge rows: bands 0 and 2 one, band 1 two */
    cr_assert_eq(st.calls[LV_SP_STATE_SUM], L);
    cr_assert_eq(st.bytes_sent[LV_SP_STATE_SUM], L * 3 * 2 * z.state);
    cr_assert_eq(st.messages[LV_SP_STATE_SUM], L * 3 * 2);
    cr_assert_eq(st.calls[LV_SP_HALO], L);
    cr_assert_eq(st.bytes_sent[LV_SP_HALO], L * 4 * z.row);
    cr_assert_eq(st.messages[LV_SP_HALO], L * 4);
    /* the prediction once: every band's rows (4 in all) to the 2 others */
    cr_assert_eq(st.calls[LV_SP_GATHER_ROWS], 1);
    cr_assert_eq(st.bytes_sent[LV_SP_GATHER_ROWS], 2 * 4 * z.pred_row);
    cr_assert_eq(st.messages[LV_SP_GATHER_ROWS], 3 * 2);
    cr_assert_str_eq(lv_sp_op_name(LV_SP_HALO), "halo");
    lv_sp_comm_stats_reset(comm);
    lv_sp_comm_stats_get(comm, &st);
    for (int op = 0; op < LV_SP_OPS; op++) cr_assert(st.calls[op] == 0 && st.bytes_sent[op] == 0 && st.seconds[op] == 0);
    lv_sp_comm_destroy(comm);
    free(out);
    close_model(&md);
}

/* The solo transport (bench sp): band 1 of 3 alone, with both neighbours stood in for,
 * runs its rows and counts what that rank sends; the other bands' rows are zeros. */
Test(sequence_parallel, solo_rank_runs_its_band_alone, .timeout = 300) {
    model md;
    open_model(&md, "tiny-hd32");
    const sizes z = sizes_of(&md);
    const int ph = lv_sana_file_config(md.file)->patch[1];
    lv_sp_comm *comm;
    cr_assert_eq(lv_sp_comm_solo_create(3, 3, &comm), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "band 3 of 3"), "%s", lv_last_error());
    cr_assert_eq(lv_sp_comm_solo_create(3, 1, &comm), LV_OK, "%s", lv_last_error());
    cr_assert(lv_sp_comm_first(comm) == 1 && lv_sp_comm_count(comm) == 1 && lv_sp_comm_bands(comm) == 3);
    lv_sp_comm_set_timing(comm, true);
    const size_t n = (size_t)md.C * md.F * md.H * md.W;
    float *out = malloc(n * sizeof *out);
    forward_through(&md, comm, out);
    /* band 1 of 3 over 4 rows is token row 2: pixel rows [2 ph, 3 ph) */
    size_t inside = 0, nonzero_inside = 0;
    for (size_t i = 0; i < n; i++) {
        const int y = (int)(i / (size_t)md.W % (size_t)md.H);
        cr_assert(isfinite(out[i]), "value %zu is %g", i, out[i]);
        if (y >= 2 * ph && y < 3 * ph) {
            inside++;
            nonzero_inside += out[i] != 0;
        } else {
            cr_assert_eq(out[i], 0.0f, "value %zu (pixel row %d) outside the band is %g", i, y, out[i]);
        }
    }
    cr_assert(nonzero_inside > inside / 2, "%zu of %zu values of the band are zero", inside - nonzero_inside, inside);
    lv_sp_comm_stats st;
    lv_sp_comm_stats_get(comm, &st);
    const uint64_t L = (uint64_t)z.depth;
    cr_assert_eq(st.bytes_sent[LV_SP_STATE_SUM], L * 2 * z.state);
    cr_assert_eq(st.bytes_sent[LV_SP_HALO], L * 2 * z.row);
    cr_assert_eq(st.bytes_sent[LV_SP_GATHER_ROWS], 2 * z.pred_row);
    cr_assert(st.seconds[LV_SP_STATE_SUM] > 0 && st.seconds[LV_SP_HALO] > 0);
    lv_sp_comm_destroy(comm);
    free(out);
    close_model(&md);
}

/* ---- the CLI ---- */

#define WEIGHTS LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define VECTORS LONGVK_ASSETS_DIR "/vectors/sana-video-tiny-hd32.safetensors"

static int run_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s forward %s 2>%s/sp_forward.err", LONGVK_CLI, args, LONGVK_TEST_TMP);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Test(sequence_parallel, cli_sp_emulate_matches, .timeout = 300) {
    lv_weights *v;
    cr_assert_eq(lv_weights_open(VECTORS, &v), LV_OK, "%s", lv_last_error());
    ts_forward_inputs(v, LONGVK_TEST_TMP "/sp_x.npy", LONGVK_TEST_TMP "/sp_text.safetensors");
#define COMMON "--model " WEIGHTS " --latents " LONGVK_TEST_TMP "/sp_x.npy --timestep 727 --block-frames 2 " \
               "--text-embeds " LONGVK_TEST_TMP "/sp_text.safetensors "
    cr_assert_eq(run_cli(COMMON "-o " LONGVK_TEST_TMP "/sp_r1.npy"), 0);
    cr_assert_eq(run_cli(COMMON "--sp-emulate 2 -o " LONGVK_TEST_TMP "/sp_r2.npy"), 0);
    lv_npy a, b;
    cr_assert_eq(lv_npy_read(LONGVK_TEST_TMP "/sp_r1.npy", &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_npy_read(LONGVK_TEST_TMP "/sp_r2.npy", &b), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_npy_numel(&a), lv_npy_numel(&b));
    check("cli --sp-emulate 2 vs without", SPLIT_BOUND, b.data, a.data, (size_t)lv_npy_numel(&a));
    check("cli --sp-emulate 2 vs bc_out", REF_BOUND, b.data, vec(v, "bc_out", lv_npy_numel(&b)), (size_t)lv_npy_numel(&b));
    lv_npy_free(&a);
    lv_npy_free(&b);
    /* more bands than the 4 token rows: a clean error naming both, no output */
    remove(LONGVK_TEST_TMP "/sp_r5.npy");
    cr_assert_neq(run_cli(COMMON "--sp-emulate 5 -o " LONGVK_TEST_TMP "/sp_r5.npy"), 0);
    FILE *err = fopen(LONGVK_TEST_TMP "/sp_forward.err", "r");
    char msg[2048] = {0};
    cr_assert_not_null(err);
    size_t got = fread(msg, 1, sizeof msg - 1, err);
    fclose(err);
    cr_assert(got > 0 && strstr(msg, "5 sequence-parallel bands") && strstr(msg, "4 token rows"), "%s", msg);
    cr_assert_null(fopen(LONGVK_TEST_TMP "/sp_r5.npy", "r"), "no output may be left behind");
    lv_weights_close(v);
}

/* `longvk bench sp` on the 2B shape cut to one block and a 4 x 4 token grid: the bytes it
 * counts are the design's (pipelines/parallel/README.md, section 3): a partial state is
 * 20 heads x 112 x (112 + 1) floats = 1,012,480 B, sent to each of the R - 1 other ranks;
 * a halo row is 1 frame x 4 columns x 2240 channels x 4 B = 35,840 B per neighbour. */
/* `longvk bench sp OPTIONS --json` into LONGVK_TEST_TMP/NAME; every string of want[] in it. */
static void bench_sp_says(const char *options, const char *name, const char *const *want, size_t count) {
    char cmd[4096], path[1024];
    snprintf(path, sizeof path, "%s/%s", LONGVK_TEST_TMP, name);
    snprintf(cmd, sizeof cmd, "%s bench sp %s --json >%s 2>%s.err", LONGVK_CLI, options, path, path);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed", cmd);
    size_t len;
    char *json = (char *)ts_slurp(path, &len);
    cr_assert_not_null(json);
    for (size_t i = 0; i < count; i++) cr_assert(strstr(json, want[i]), "no %s in %s", want[i], json);
    free(json);
}

Test(sequence_parallel, bench_sp_counts_the_design_bytes, .timeout = 600) {
    const char *want[] = {
        "\"ranks\": 2, \"bands\": [{\"band\": 0, \"rows\": 2, \"halo_rows\": 1,",
        "\"state_sum_bytes_per_layer\": 1012480, \"halo_bytes_per_layer\": 35840,",
        "\"ranks\": 4,",
        "\"state_sum_bytes_per_layer\": 3037440, \"halo_bytes_per_layer\": 71680,", /* R = 4, inner band */
        "\"link\": \"InfiniBand 100 Gb/s\"",
    };
    bench_sp_says("--depth 1 --frames 1 --latent 8x8 --ranks 2,4", "bench_sp.json", want, sizeof want / sizeof *want);
}

/* --vae: the block's decode per rank over bands of latent rows, and the whole block modelled.
 * 4x4 latents in 2 bands of 2 rows, decoder width 8 (trunk 32): band 1 sends its attention
 * rows (2 x 4 pixels x 32 channels) to band 0 and its 16 pixel rows of 4 frames (32 wide,
 * RGB) to rank 0: 1,024 + 24,576 bytes a latent frame; band 0 only its attention rows. */
Test(sequence_parallel, bench_sp_vae_models_the_block, .timeout = 600) {
    const char *want[] = {
        "\"vae_dim\": 8,",
        "\"vae_bands\": [{\"band\": 0, \"latent_rows\": 2,",
        "\"gather_bytes\": 1024,",
        "{\"band\": 1, \"latent_rows\": 2,",
        "\"gather_bytes\": 25600,",
        "\"modelled_block\": [{\"link\": \"PCIe host-staged\", \"block_s\": ",
        "\"block_speedup_no_network\": ",
    };
    bench_sp_says("--depth 1 --frames 1 --latent 4x4 --text-tokens 8 --ranks 2 --vae --vae-dim 8", "bench_sp_vae.json",
                  want, sizeof want / sizeof *want);
}
