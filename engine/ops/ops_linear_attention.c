/* Linear attention kernels: the state contribution of a run of tokens, queries reading a
 * state, and linear combinations of states (see longvk/ops_linear_attention.h and
 * engine/linear-attention.md). The carried state across blocks is in
 * linattn_state.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linattn_internal.h"
#include "push_linattn_combine.h"
#include "push_linattn_query.h"
#include "push_linattn_state.h"

/* Bytes a binding may need beyond its tensor: the shift down to the device's storage
 * offset alignment (at most 256 bytes by the Vulkan spec). */
#define LV_BINDING_SLACK 256

int lv_feature_map_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "identity") == 0) return LV_PHI_IDENTITY;
    if (strcmp(name, "relu") == 0) return LV_PHI_RELU;
    if (strcmp(name, "elu1") == 0) return LV_PHI_ELU1;
    return -1;
}

const char *lv_feature_map_name(lv_feature_map phi) {
    switch (phi) {
    case LV_PHI_IDENTITY: return "identity";
    case LV_PHI_RELU: return "relu";
    case LV_PHI_ELU1: return "elu1";
    }
    return "?";
}


void lv_linattn_tiles_choose(const lv_ctx *ctx, lv_linattn_tiles *t) {
    const lv_device_info *dev = lv_ctx_device(ctx);
    if (dev->type == LV_DEVICE_CPU) {
        /* lavapipe: every buffer load is a loop over the 8 SIMD lanes, so loads are shared
         * through subgroup broadcasts and each loaded value feeds as many FMAs as the
         * register tiles allow; a few cores need no token splitting */
        *t = (lv_linattn_tiles){.local = 64, .state_tr = 56, .state_pp = 4,
                                .query_tt = 8, .query_tr = 56, .splits = 1, .bcast = 1};
    } else {
        *t = (lv_linattn_tiles){.local = 64, .state_tr = 16, .state_pp = 1,
                                .query_tt = 1, .query_tr = 16, .splits = 4, .bcast = 0};
    }
    if (dev->subgroup_size != 8) t->bcast = 0;
    const char *tiles = lv_env_str("LONGVK_LINATTN_TILES");
    if (tiles) {
        unsigned a, b, c, d;
        if (sscanf(tiles, "%u,%u,%u,%u", &a, &b, &c, &d) == 4 && a && b && c && d && a <= 128 &&
            b <= 8 && c <= 8 && d <= 128) {
            t->state_tr = a;
            t->state_pp = b;
            t->query_tt = c;
            t->query_tr = d;
        }
    }
    t->splits = (uint32_t)lv_env_u64("LONGVK_LINATTN_SPLITS", t->splits, 1, 64);
    const char *bcast = lv_env_str("LONGVK_LINATTN_BCAST");
    if (bcast && (strcmp(bcast, "0") == 0 || strcmp(bcast, "1") == 0))
        t->bcast = bcast[0] == '1' && dev->subgroup_size == 8;
}

/* ---- shape checks ------------------------------------------------------------------- */

static lv_status check_f32(const char *what, const lv_tensor *t) {
    if (!t || !t->alloc) return lv_error(LV_ERR_INVALID, "linear attention: %s is missing", what);
    if (t->dtype != LV_F32)
        return lv_error(LV_ERR_INVALID, "linear attention: %s must be f32, not %s", what,
                        lv_dtype_name(t->dtype));
    return LV_OK;
}

lv_status lv_linattn_tokens(const char *what, const lv_tensor *t, int heads, int dim, int64_t *n) {
    LV_TRY(check_f32(what, t));
    int64_t row = (int64_t)heads * dim;
    char d[96];
    if (t->ndim < 2 || lv_tensor_numel(t) != t->shape[0] * row)
        return lv_error(LV_ERR_INVALID,
                        "linear attention: %s is %s; expected [tokens, %lld] (%d heads x %d dims)",
                        what, lv_tensor_describe(t, d, sizeof d), (long long)row, heads, dim);
    *n = t->shape[0];
    return LV_OK;
}

lv_status lv_linattn_check_rope(const lv_tensor *rope, int64_t n, int dim) {
    LV_TRY(check_f32("rope table", rope));
    char d[96];
    if (dim % 2)
        return lv_error(LV_ERR_INVALID, "linear attention: RoPE needs an even head dim, not %d", dim);
    if (rope->ndim < 2 || rope->shape[0] != n || lv_tensor_numel(rope) != n * dim)
        return lv_error(LV_ERR_INVALID, "linear attention: rope table is %s; expected [%lld, %d]",
                        lv_tensor_describe(rope, d, sizeof d), (long long)n, dim);
    return LV_OK;
}

static lv_status state_dims(const lv_tensor *S, const lv_tensor *z, bool need_z, int *heads,
                            int *dim) {
    LV_TRY(check_f32("S", S));
    char d[96];
    if (S->ndim != 3 || S->shape[1] != S->shape[2])
        return lv_error(LV_ERR_INVALID, "linear attention: S is %s; expected [heads, D, D]",
                        lv_tensor_describe(S, d, sizeof d));
    *heads = (int)S->shape[0];
    *dim = (int)S->shape[1];
    if (need_z) {
        LV_TRY(check_f32("z", z));
        if (lv_tensor_numel(z) != S->shape[0] * S->shape[1])
            return lv_error(LV_ERR_INVALID, "linear attention: z is %s; expected [%d, %d]",
                            lv_tensor_describe(z, d, sizeof d), *heads, *dim);
    }
    return LV_OK;
}

/* Tokens per dispatch so that every per-token tensor (row_bytes[i] bytes per token) fits in
 * one binding. */
static lv_status tokens_per_dispatch(lv_ctx *ctx, const char *op, const uint64_t *row_bytes,
                                     int count, int64_t *out) {
    uint64_t maxb = lv_ctx_max_binding(ctx);
    uint64_t widest = 0;
    for (int i = 0; i < count; i++)
        if (row_bytes[i] > widest) widest = row_bytes[i];
    if (maxb <= LV_BINDING_SLACK || widest > maxb - LV_BINDING_SLACK)
        return lv_error(LV_ERR_LIMIT,
                        "%s: one token needs %llu bytes in one binding but the device allows "
                        "%llu (maxStorageBufferRange of '%s')",
                        op, (unsigned long long)widest, (unsigned long long)maxb,
                        lv_ctx_device(ctx)->name);
    int64_t n = (int64_t)((maxb - LV_BINDING_SLACK) / widest);
    /* keep element indices inside the shaders' 32-bit range */
    if (n > (1 << 24)) n = 1 << 24;
    *out = n;
    return LV_OK;
}

static lv_status state_fits(lv_ctx *ctx, const char *op, const lv_tensor *t) {
    uint64_t maxb = lv_ctx_max_binding(ctx);
    if (lv_tensor_nbytes(t) + LV_BINDING_SLACK > maxb) {
        char d[96];
        return lv_error(LV_ERR_LIMIT,
                        "%s: the state %s needs one binding but exceeds the device's %llu bytes "
                        "(maxStorageBufferRange of '%s')",
                        op, lv_tensor_describe(t, d, sizeof d), (unsigned long long)maxb,
                        lv_ctx_device(ctx)->name);
    }
    return LV_OK;
}

static lv_tensor token_rows(const lv_tensor *t, int64_t n0, int64_t count, int64_t row) {
    int64_t shape[2] = {count, row};
    return lv_tensor_view(t, n0 * row, 2, shape);
}

static uint32_t ceil_div(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Value rows per workgroup: the D rows cut into as few tiles of at most `most` rows as
 * possible, each a multiple of 8 (the broadcast groups of the CPU kernels). */
static void row_tile(int dim, uint32_t most, uint32_t *tiles, uint32_t *rows) {
    *tiles = ceil_div((uint64_t)dim, most);
    *rows = (ceil_div((uint64_t)dim, *tiles) + 7u) / 8u * 8u;
}

/* Query workgroup size: a power of two from 8 (one lavapipe SIMD register) up to the
 * device's choice, the one that pads `tokens` the least to whole tiles of local * tt
 * tokens (larger on ties), so that short or odd blocks leave few lanes idle and only a
 * few pipeline variants exist. */
static uint32_t query_local_size(uint64_t tokens, uint32_t tt, uint32_t most) {
    uint32_t best = 8;
    uint64_t best_pad = UINT64_MAX;
    for (uint32_t l = 8; l <= most; l *= 2) {
        uint64_t tile = (uint64_t)l * tt, padded = (tokens + tile - 1) / tile * tile;
        if (padded <= best_pad) {
            best = l;
            best_pad = padded;
        }
    }
    return best;
}

/* ---- state contribution ------------------------------------------------------------- */

lv_status lv_linattn_contribution(lv_ctx *ctx, int heads, int dim, const lv_tensor *S,
                                  const lv_tensor *z, uint32_t splits, uint32_t s_slot,
                                  uint32_t z_slot, const lv_tensor *k, const lv_tensor *v,
                                  const lv_tensor *rope, lv_feature_map phi, bool accumulate) {
    const char *op = "linear attention state";
    int64_t n = 0, nv = 0;
    LV_TRY(lv_linattn_tokens("k", k, heads, dim, &n));
    LV_TRY(lv_linattn_tokens("v", v, heads, dim, &nv));
    if (nv != n)
        return lv_error(LV_ERR_INVALID, "%s: k has %lld tokens but v has %lld", op, (long long)n,
                        (long long)nv);
    if (rope) LV_TRY(lv_linattn_check_rope(rope, n, dim));
    if ((unsigned)phi > LV_PHI_ELU1) return lv_error(LV_ERR_INVALID, "%s: unknown feature map %d", op, (int)phi);
    if (splits < 1) splits = 1;
    LV_TRY(state_fits(ctx, op, S));
    LV_TRY(state_fits(ctx, op, z));

    lv_linattn_tiles tl;
    lv_linattn_tiles_choose(ctx, &tl);
    const int64_t row = (int64_t)heads * dim;
    uint64_t row_bytes[2] = {(uint64_t)row * 4, (uint64_t)dim * 4};
    int64_t per = 0; /* set by tokens_per_dispatch; initialised for -O3 -Wmaybe-uninitialized */
    LV_TRY(tokens_per_dispatch(ctx, op, row_bytes, rope ? 2 : 1, &per));

    const uint32_t pairs = ceil_div((uint64_t)dim, 2);
    /* lanes for all column pairs, in multiples of 8 (D is fixed per model: few variants) */
    uint32_t local = (ceil_div(pairs, tl.state_pp) + 7u) / 8u * 8u;
    if (local > tl.local) local = tl.local;
    uint32_t row_tiles, tr;
    row_tile(dim, tl.state_tr, &row_tiles, &tr);
    uint32_t spec[6] = {local, tr, tl.state_pp, (uint32_t)phi, rope ? 1u : 0u, tl.bcast};
    uint32_t col_tiles = ceil_div(pairs, (uint64_t)local * tl.state_pp);
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        int64_t cnt = n - n0 < per ? n - n0 : per;
        lv_tensor kc = token_rows(k, n0, cnt, row), vc = token_rows(v, n0, cnt, row);
        lv_tensor rc = rope ? token_rows(rope, n0, cnt, dim) : kc; /* unused when !rope */
        lv_binding b[5] = {{S, true, 0}, {z, true, 0}, {&kc, false, 0}, {&vc, false, 0}, {&rc, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_LINATTN_STATE, b, 5));
        uint32_t split_tokens = ceil_div((uint64_t)cnt, splits);
        lv_push_linattn_state pc = {
            .s_off = b[0].elem_offset,
            .z_off = b[1].elem_offset,
            .k_off = b[2].elem_offset,
            .v_off = b[3].elem_offset,
            .rope_off = b[4].elem_offset,
            .tokens = (uint32_t)cnt,
            .heads = (uint32_t)heads,
            .dim = (uint32_t)dim,
            .row_stride = (uint32_t)row,
            .splits = splits,
            .split_tokens = split_tokens,
            .s_slot = s_slot,
            .z_slot = z_slot,
            .accumulate = (accumulate || n0 > 0) ? 1u : 0u,
            .row_tiles = row_tiles,
            .col_tiles = col_tiles,
        };
        uint64_t groups = (uint64_t)splits * (uint64_t)heads * row_tiles * col_tiles;
        uint32_t gx, gy;
        lv_grid_1d(ctx, groups, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_LINATTN_STATE, spec, 6, b, 5, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_linattn_state(lv_ctx *ctx, const lv_tensor *S, const lv_tensor *z,
                              const lv_tensor *k, const lv_tensor *v, const lv_tensor *rope,
                              lv_feature_map phi, bool accumulate) {
    int heads = 0, dim = 0;
    LV_TRY(state_dims(S, z, true, &heads, &dim));
    return lv_linattn_contribution(ctx, heads, dim, S, z, 1, 0, 0, k, v, rope, phi, accumulate);
}

/* ---- queries ------------------------------------------------------------------------ */

lv_status lv_op_linattn_query(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *q,
                              const lv_tensor *S, const lv_tensor *z, const lv_tensor *rope,
                              lv_feature_map phi, bool normalize, float eps) {
    const char *op = "linear attention query";
    int heads = 0, dim = 0;
    LV_TRY(state_dims(S, z, normalize, &heads, &dim));
    int64_t n, no;
    LV_TRY(lv_linattn_tokens("q", q, heads, dim, &n));
    LV_TRY(lv_linattn_tokens("out", out, heads, dim, &no));
    if (no != n)
        return lv_error(LV_ERR_INVALID, "%s: q has %lld tokens but out has %lld", op, (long long)n,
                        (long long)no);
    if (rope) LV_TRY(lv_linattn_check_rope(rope, n, dim));
    if ((unsigned)phi > LV_PHI_ELU1) return lv_error(LV_ERR_INVALID, "%s: unknown feature map %d", op, (int)phi);
    LV_TRY(state_fits(ctx, op, S));

    lv_linattn_tiles tl;
    lv_linattn_tiles_choose(ctx, &tl);
    const int64_t row = (int64_t)heads * dim;
    uint64_t row_bytes[2] = {(uint64_t)row * 4, (uint64_t)dim * 4};
    int64_t per = 0;
    LV_TRY(tokens_per_dispatch(ctx, op, row_bytes, rope ? 2 : 1, &per));

    const uint32_t local = query_local_size((uint64_t)(n < per ? n : per), tl.query_tt, tl.local);
    uint32_t row_tiles, tr;
    row_tile(dim, tl.query_tr, &row_tiles, &tr);
    uint32_t spec[7] = {local, tl.query_tt, tr, (uint32_t)phi, rope ? 1u : 0u,
                        normalize ? 1u : 0u, tl.bcast};
    const lv_tensor *zb = normalize ? z : S; /* bound but unread when !normalize */
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        int64_t cnt = n - n0 < per ? n - n0 : per;
        lv_tensor oc = token_rows(out, n0, cnt, row), qc = token_rows(q, n0, cnt, row);
        lv_tensor rc = rope ? token_rows(rope, n0, cnt, dim) : qc;
        lv_binding b[5] = {{&oc, true, 0}, {&qc, false, 0}, {S, false, 0}, {zb, false, 0}, {&rc, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_LINATTN_QUERY, b, 5));
        uint32_t token_tiles = ceil_div((uint64_t)cnt, (uint64_t)local * tl.query_tt);
        lv_push_linattn_query pc = {
            .o_off = b[0].elem_offset,
            .q_off = b[1].elem_offset,
            .s_off = b[2].elem_offset,
            .z_off = b[3].elem_offset,
            .rope_off = b[4].elem_offset,
            .tokens = (uint32_t)cnt,
            .heads = (uint32_t)heads,
            .dim = (uint32_t)dim,
            .row_stride = (uint32_t)row,
            .token_tiles = token_tiles,
            .row_tiles = row_tiles,
            .eps = eps,
        };
        uint64_t groups = (uint64_t)token_tiles * (uint64_t)heads * row_tiles;
        uint32_t gx, gy;
        lv_grid_1d(ctx, groups, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_LINATTN_QUERY, spec, 7, b, 5, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

/* ---- combinations of states --------------------------------------------------------- */

lv_status lv_linattn_combine(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, int na,
                             float alpha, const lv_tensor *b, float beta) {
    const char *op = "linear attention combine";
    const int64_t m = lv_tensor_numel(out);
    if (na < 1 || lv_tensor_numel(a) != (int64_t)na * m || (b && lv_tensor_numel(b) != m))
        return lv_error(LV_ERR_INVALID, "%s: %d slots of %lld elements do not match", op, na,
                        (long long)m);
    uint64_t maxb = lv_ctx_max_binding(ctx);
    if (maxb <= LV_BINDING_SLACK + 4)
        return lv_error(LV_ERR_LIMIT, "%s: binding limit of %llu bytes is too small", op,
                        (unsigned long long)maxb);
    const int64_t maxel = (int64_t)((maxb - LV_BINDING_SLACK) / 4);
    /* element chunks of at most maxel; as many slots per dispatch as fit in one binding */
    const int64_t chunk = m < maxel ? m : maxel;
    int64_t group = 1 + (maxel - chunk) / m;
    if (group > na) group = na;
    if (!b) beta = 0.0f;
    for (int64_t e0 = 0; e0 < m; e0 += chunk) {
        int64_t cnt = m - e0 < chunk ? m - e0 : chunk;
        int64_t one = cnt;
        lv_tensor oc = lv_tensor_view(out, e0, 1, &one);
        lv_tensor bc = b ? lv_tensor_view(b, e0, 1, &one) : oc;
        for (int64_t s0 = 0; s0 < na; s0 += group) {
            int64_t ns = na - s0 < group ? na - s0 : group;
            int64_t span = (ns - 1) * m + cnt;
            lv_tensor ac = lv_tensor_view(a, s0 * m + e0, 1, &span);
            /* later slot groups add to what the earlier ones wrote */
            const lv_tensor *bb = s0 == 0 ? &bc : &oc;
            float bw = s0 == 0 ? beta : 1.0f;
            lv_binding bind[3] = {{&oc, true, 0}, {&ac, false, 0}, {bb, false, 0}};
            LV_TRY(lv_bindings_prepare(ctx, LV_OP_LINATTN_COMBINE, bind, 3));
            lv_push_linattn_combine pc = {
                .out_off = bind[0].elem_offset,
                .a_off = bind[1].elem_offset,
                .b_off = bind[2].elem_offset,
                .count = (uint32_t)cnt,
                .na = (uint32_t)ns,
                .a_stride = (uint32_t)m,
                .alpha = alpha,
                .beta = bw,
            };
            uint32_t gx, gy;
            lv_grid_1d(ctx, ((uint64_t)cnt + 255) / 256, &gx, &gy);
            /* a non-NULL (empty) spec list: lv_pipeline_get memcmp()s it */
            static const uint32_t no_spec[1] = {0};
            LV_TRY(lv_dispatch(ctx, LV_OP_LINATTN_COMBINE, no_spec, 0, bind, 3, &pc, sizeof pc, gx, gy, 1));
        }
    }
    return LV_OK;
}
