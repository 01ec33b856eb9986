/* The carried linear-attention state of one layer (longvk/ops_linear_attention.h).
 *
 * Every buffer is allocated at creation and the set never changes, so the device memory
 * a state holds does not depend on how many blocks it has seen. Each buffer holds one
 * "state slot" of M = H*D*D + H*D floats: S [H, D, D] followed by z [H, D], so that one
 * combine dispatch handles S and z together.
 *
 *   own      the current block's contribution C_b
 *   eff      what the block's queries read: carried (+) own
 *   carried  additive / decay: everything committed so far under the rule
 *   ring     window K: the last K committed contributions (K slots, zero until filled);
 *            the carried state is their sum, re-summed every block, never subtracted
 *   partial  GPUs only: token-split partial contributions, summed into own
 *
 * The buffers are separate allocations so the stream's per-allocation barrier tracking
 * only orders the dispatches that really depend on each other. */
#include <stdlib.h>
#include <string.h>

#include "linattn_internal.h"

struct lv_linattn_state {
    lv_linattn_config cfg;
    int64_t m;        /* floats per state slot */
    uint32_t splits;  /* token splits of the contribution kernel */
    int64_t blocks;   /* blocks committed */
    bool begun;       /* lv_linattn_block_begin set own and eff; no commit since */
    lv_tensor own, eff, carried, ring, partial;
    uint64_t bytes;
};

static lv_tensor slot_S(const lv_linattn_state *st, const lv_tensor *slot) {
    int64_t shape[3] = {st->cfg.heads, st->cfg.head_dim, st->cfg.head_dim};
    return lv_tensor_view(slot, 0, 3, shape);
}

static lv_tensor slot_z(const lv_linattn_state *st, const lv_tensor *slot) {
    int64_t shape[2] = {st->cfg.heads, st->cfg.head_dim};
    return lv_tensor_view(slot, (int64_t)st->cfg.heads * st->cfg.head_dim * st->cfg.head_dim, 2, shape);
}

static lv_status make_slots(lv_ctx *ctx, lv_linattn_state *st, int64_t count, lv_tensor *t) {
    int64_t shape[2] = {count, st->m};
    LV_TRY(lv_tensor_create(ctx, LV_F32, 2, shape, t));
    st->bytes += t->alloc->size;
    return lv_tensor_zero(ctx, t);
}

void lv_linattn_state_destroy(lv_ctx *ctx, lv_linattn_state *st) {
    if (!st) return;
    lv_tensor_free(ctx, &st->own);
    lv_tensor_free(ctx, &st->eff);
    lv_tensor_free(ctx, &st->carried);
    lv_tensor_free(ctx, &st->ring);
    lv_tensor_free(ctx, &st->partial);
    free(st);
}

lv_status lv_linattn_state_create(lv_ctx *ctx, const lv_linattn_config *cfg, lv_linattn_state **out) {
    *out = NULL;
    if (cfg->heads < 1 || cfg->head_dim < 1 || cfg->head_dim > 4096)
        return lv_error(LV_ERR_INVALID, "linear attention state: %d heads of %d dims", cfg->heads,
                        cfg->head_dim);
    if ((unsigned)cfg->phi > LV_PHI_ELU1)
        return lv_error(LV_ERR_INVALID, "linear attention state: unknown feature map %d", (int)cfg->phi);
    if (cfg->rule == LV_RULE_WINDOW && (cfg->window < 1 || cfg->window > 4096))
        return lv_error(LV_ERR_INVALID, "linear attention state: window of %d blocks (1 to 4096)",
                        cfg->window);
    if (cfg->rule == LV_RULE_DECAY && !(cfg->decay >= 0.0f && cfg->decay <= 1.0f))
        return lv_error(LV_ERR_INVALID, "linear attention state: decay %g outside [0, 1]",
                        (double)cfg->decay);
    if (cfg->rule != LV_RULE_ADDITIVE && cfg->rule != LV_RULE_WINDOW && cfg->rule != LV_RULE_DECAY)
        return lv_error(LV_ERR_INVALID, "linear attention state: unknown rule %d", (int)cfg->rule);
    lv_linattn_state *st = calloc(1, sizeof *st);
    if (!st) return lv_error(LV_ERR_NOMEM, "out of host memory");
    st->cfg = *cfg;
    st->m = (int64_t)cfg->heads * cfg->head_dim * (cfg->head_dim + 1);
    if ((uint64_t)st->m * 4 + 256 > lv_ctx_max_binding(ctx)) {
        unsigned long long need = (unsigned long long)st->m * 4;
        free(st);
        return lv_error(LV_ERR_LIMIT,
                        "linear attention state of %d heads x %d dims needs %llu bytes in one "
                        "binding; the device allows %llu (maxStorageBufferRange of '%s')",
                        cfg->heads, cfg->head_dim, need,
                        (unsigned long long)lv_ctx_max_binding(ctx), lv_ctx_device(ctx)->name);
    }
    lv_linattn_tiles tl;
    lv_linattn_tiles_choose(ctx, &tl);
    st->splits = tl.splits;
    lv_status s = make_slots(ctx, st, 1, &st->own);
    if (s == LV_OK) s = make_slots(ctx, st, 1, &st->eff);
    if (s == LV_OK) {
        if (cfg->rule == LV_RULE_WINDOW) s = make_slots(ctx, st, cfg->window, &st->ring);
        else s = make_slots(ctx, st, 1, &st->carried);
    }
    if (s == LV_OK && st->splits > 1) s = make_slots(ctx, st, st->splits, &st->partial);
    if (s != LV_OK) {
        lv_linattn_state_destroy(ctx, st);
        return s;
    }
    *out = st;
    return LV_OK;
}

uint64_t lv_linattn_state_bytes(const lv_linattn_state *st) { return st->bytes; }

uint32_t lv_linattn_splits(const lv_ctx *ctx) {
    lv_linattn_tiles tl;
    lv_linattn_tiles_choose(ctx, &tl);
    return tl.splits;
}
int64_t lv_linattn_state_blocks(const lv_linattn_state *st) { return st->blocks; }

static lv_status check_block(lv_linattn_state *st, const lv_tensor *out, const lv_tensor *q,
                             const lv_tensor *k, const lv_tensor *rope, int64_t *n) {
    const int H = st->cfg.heads, D = st->cfg.head_dim;
    LV_TRY(lv_linattn_tokens("k", k, H, D, n));
    if (out) {
        int64_t nq, no;
        LV_TRY(lv_linattn_tokens("q", q, H, D, &nq));
        LV_TRY(lv_linattn_tokens("out", out, H, D, &no));
        if (nq != *n || no != *n)
            return lv_error(LV_ERR_INVALID,
                            "linear attention block: q, k and out have %lld, %lld and %lld tokens",
                            (long long)nq, (long long)*n, (long long)no);
    }
    if (rope) LV_TRY(lv_linattn_check_rope(rope, *n, D));
    return LV_OK;
}

/* own = contribution of the block's k, v */
static lv_status contribution(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *k,
                              const lv_tensor *v, const lv_tensor *rope) {
    const int H = st->cfg.heads, D = st->cfg.head_dim;
    if (st->splits <= 1) {
        lv_tensor S = slot_S(st, &st->own), z = slot_z(st, &st->own);
        return lv_linattn_contribution(ctx, H, D, &S, &z, 1, 0, 0, k, v, rope, st->cfg.phi, false);
    }
    /* partial slot p at p * m: S first, z after it */
    int64_t sspan = (int64_t)(st->splits - 1) * st->m + (int64_t)H * D * D;
    int64_t zspan = (int64_t)(st->splits - 1) * st->m + (int64_t)H * D;
    lv_tensor S = lv_tensor_view(&st->partial, 0, 1, &sspan);
    lv_tensor z = lv_tensor_view(&st->partial, (int64_t)H * D * D, 1, &zspan);
    LV_TRY(lv_linattn_contribution(ctx, H, D, &S, &z, st->splits, (uint32_t)st->m,
                                   (uint32_t)st->m, k, v, rope, st->cfg.phi, false));
    return lv_linattn_combine(ctx, &st->own, &st->partial, (int)st->splits, 1.0f, NULL, 0.0f);
}

/* eff = carried (+) own, as the block's queries read it */
static lv_status effective(lv_ctx *ctx, lv_linattn_state *st) {
    switch (st->cfg.rule) {
    case LV_RULE_WINDOW:
        return lv_linattn_combine(ctx, &st->eff, &st->ring, st->cfg.window, 1.0f, &st->own, 1.0f);
    case LV_RULE_DECAY:
        return lv_linattn_combine(ctx, &st->eff, &st->own, 1, 1.0f, &st->carried, st->cfg.decay);
    default:
        return lv_linattn_combine(ctx, &st->eff, &st->own, 1, 1.0f, &st->carried, 1.0f);
    }
}

static lv_status query(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                       const lv_tensor *q, const lv_tensor *rope) {
    lv_tensor S = slot_S(st, &st->eff), z = slot_z(st, &st->eff);
    return lv_op_linattn_query(ctx, out, q, &S, &z, rope, st->cfg.phi, st->cfg.normalize, st->cfg.eps);
}

lv_status lv_linattn_block_read(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                const lv_tensor *rope) {
    if (!out) return lv_error(LV_ERR_INVALID, "linear attention read pass: no output tensor");
    int64_t n;
    LV_TRY(check_block(st, out, q, k, rope, &n));
    st->begun = false;
    LV_TRY(contribution(ctx, st, k, v, rope));
    LV_TRY(effective(ctx, st));
    return query(ctx, st, out, q, rope);
}

lv_status lv_linattn_block_write(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                 const lv_tensor *q, const lv_tensor *k, const lv_tensor *v,
                                 const lv_tensor *rope) {
    int64_t n;
    LV_TRY(check_block(st, out, q, k, rope, &n));
    st->begun = false;
    LV_TRY(contribution(ctx, st, k, v, rope));
    if (out) {
        LV_TRY(effective(ctx, st));
        LV_TRY(query(ctx, st, out, q, rope));
    }
    if (st->cfg.rule == LV_RULE_WINDOW) {
        /* the newest contribution replaces the oldest slot of the ring */
        lv_tensor slot = lv_tensor_rows(&st->ring, st->blocks % st->cfg.window, 1);
        LV_TRY(lv_tensor_copy(ctx, &slot, &st->own));
    } else if (out) {
        /* eff already is the new carried state: swap the buffers' roles */
        lv_tensor t = st->carried;
        st->carried = st->eff;
        st->eff = t;
    } else {
        float lambda = st->cfg.rule == LV_RULE_DECAY ? st->cfg.decay : 1.0f;
        LV_TRY(lv_linattn_combine(ctx, &st->carried, &st->own, 1, 1.0f, &st->carried, lambda));
    }
    st->blocks++;
    return LV_OK;
}

/* ---- a contribution summed elsewhere (the bands of sequence parallelism) ---- */

int64_t lv_linattn_state_slot_floats(const lv_linattn_state *st) { return st ? st->m : 0; }
const lv_linattn_config *lv_linattn_state_config(const lv_linattn_state *st) { return st ? &st->cfg : NULL; }

lv_status lv_linattn_block_begin(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *own) {
    if (!ctx || !st || !own)
        return lv_error(LV_ERR_INVALID, "linear attention block begin: %s is NULL",
                        !ctx ? "the context" : !st ? "the state" : "the contribution");
    if (own->dtype != LV_F32 || lv_tensor_numel(own) != st->m)
        return lv_error(LV_ERR_INVALID, "linear attention block begin: the contribution has %lld values "
                        "(%s), a state slot of %d heads x %d dims needs %lld f32", (long long)lv_tensor_numel(own),
                        lv_dtype_name(own->dtype), st->cfg.heads, st->cfg.head_dim, (long long)st->m);
    /* the same buffers and kernels as a read pass, so begin + query is lv_linattn_block_read */
    LV_TRY(lv_tensor_copy(ctx, &st->own, own));
    LV_TRY(effective(ctx, st));
    st->begun = true;
    return LV_OK;
}

lv_status lv_linattn_block_query(lv_ctx *ctx, lv_linattn_state *st, const lv_tensor *out,
                                 const lv_tensor *q, const lv_tensor *rope) {
    if (!ctx || !st || !out || !q)
        return lv_error(LV_ERR_INVALID, "linear attention block query: %s is NULL",
                        !ctx ? "the context" : !st ? "the state" : !out ? "the output" : "q");
    if (!st->begun)
        return lv_error(LV_ERR_INVALID, "linear attention block query: no block begun "
                        "(lv_linattn_block_begin first; a commit ends the block)");
    const int H = st->cfg.heads, D = st->cfg.head_dim;
    int64_t n, no;
    LV_TRY(lv_linattn_tokens("q", q, H, D, &n));
    LV_TRY(lv_linattn_tokens("out", out, H, D, &no));
    if (no != n)
        return lv_error(LV_ERR_INVALID, "linear attention block query: q has %lld tokens but out has %lld",
                        (long long)n, (long long)no);
    if (rope) LV_TRY(lv_linattn_check_rope(rope, n, D));
    return query(ctx, st, out, q, rope);
}

lv_status lv_linattn_block_commit(lv_ctx *ctx, lv_linattn_state *st) {
    if (!ctx || !st)
        return lv_error(LV_ERR_INVALID, "linear attention block commit: %s is NULL", !ctx ? "the context" : "the state");
    if (!st->begun)
        return lv_error(LV_ERR_INVALID, "linear attention block commit: no block begun (lv_linattn_block_begin first)");
    if (st->cfg.rule == LV_RULE_WINDOW) {
        lv_tensor slot = lv_tensor_rows(&st->ring, st->blocks % st->cfg.window, 1);
        LV_TRY(lv_tensor_copy(ctx, &slot, &st->own));
    } else {
        /* eff (carried (+) own) is the new carried state, as in lv_linattn_block_write */
        lv_tensor t = st->carried;
        st->carried = st->eff;
        st->eff = t;
    }
    st->begun = false;
    st->blocks++;
    return LV_OK;
}

lv_status lv_linattn_state_read(lv_ctx *ctx, lv_linattn_state *st, float *S, float *z) {
    const lv_tensor *src = &st->carried;
    if (st->cfg.rule == LV_RULE_WINDOW) {
        /* the carried state is the ring's sum; eff is scratch between blocks */
        st->begun = false;
        LV_TRY(lv_linattn_combine(ctx, &st->eff, &st->ring, st->cfg.window, 1.0f, NULL, 0.0f));
        src = &st->eff;
    }
    lv_tensor Sv = slot_S(st, src), zv = slot_z(st, src);
    if (S) LV_TRY(lv_tensor_read(ctx, &Sv, S, lv_tensor_nbytes(&Sv)));
    if (z) LV_TRY(lv_tensor_read(ctx, &zv, z, lv_tensor_nbytes(&zv)));
    return LV_OK;
}

/* What carries the state between blocks: the ring (window rule) or the carried slot. The
 * other buffers are per-block scratch, rebuilt by the next block. */
static const lv_tensor *persistent(const lv_linattn_state *st) {
    return st->cfg.rule == LV_RULE_WINDOW ? &st->ring : &st->carried;
}

const lv_tensor *lv_linattn_state_tensor(const lv_linattn_state *st) { return st ? persistent(st) : NULL; }

int64_t lv_linattn_state_saved_floats(const lv_linattn_state *st) {
    return lv_tensor_numel(persistent(st));
}

lv_status lv_linattn_state_save(lv_ctx *ctx, lv_linattn_state *st, float *data) {
    const lv_tensor *t = persistent(st);
    return lv_tensor_read(ctx, t, data, lv_tensor_nbytes(t));
}

lv_status lv_linattn_state_load(lv_ctx *ctx, lv_linattn_state *st, const float *data, int64_t blocks) {
    if (blocks < 0) return lv_error(LV_ERR_INVALID, "linear attention state: %lld blocks", (long long)blocks);
    const lv_tensor *t = persistent(st);
    LV_TRY(lv_tensor_write(ctx, t, data, lv_tensor_nbytes(t)));
    st->begun = false;
    st->blocks = blocks; /* the window ring's next slot is blocks % K, as when it was saved */
    return LV_OK;
}
