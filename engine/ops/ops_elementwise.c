/* Element-wise ops (shaders/elementwise.comp: add, mul, scale_add, silu, gelu_tanh, relu,
 * mul_silu, mul_gelu_tanh;
 * shaders/modulate.comp: modulate, add_gated). Tensors are viewed as [R, C] rows (leading
 * dims flattened); work is split over rows so every binding stays within the device's
 * binding limit. A broadcast operand [G, C] is bound as the groups a split covers. */
#include "longvk/ops.h"
#include "lv_internal.h"
#include "op_helpers.h"
#include "push_elementwise.h"
#include "push_modulate.h"

/* How one operand maps onto the rows of the output. */
typedef struct operand {
    const lv_tensor *t;
    int mode;            /* LV_BCAST_* */
    int64_t per_group;   /* rows of the output per operand row (LV_BCAST_GROUPS) */
} operand;

/* The part of an operand that rows [r0, r0 + nr) of the output read, and the broadcast
 * fields of the push constants for it. */
typedef struct operand_part {
    lv_tensor view;
    uint32_t mode, phase, magic, shift;
} operand_part;

/* Output and first operand: same shape, f32, rows small enough for the dispatch math. */
static lv_status check_main(const char *op, const lv_tensor *out, const char *a_name,
                            const lv_tensor *a, int64_t *R, int64_t *C) {
    /* each may be a 16-bit activation (f16 / bf16, read and written as 32-bit words); in
     * place needs equal dtypes (lv_check_alias: the same byte range) */
    LV_TRY(lv_check_act(op, "out", out));
    LV_TRY(lv_check_act(op, a_name, a));
    if (!lv_tensor_same_shape(out, a)) {
        char d1[96], d2[96];
        return lv_error(LV_ERR_INVALID, "%s: out %s and %s %s must have the same shape", op,
                        lv_tensor_describe(out, d1, sizeof d1), a_name,
                        lv_tensor_describe(a, d2, sizeof d2));
    }
    lv_rows_cols(a, R, C);
    /* the shader's row arithmetic (row + phase) stays below 2^30 */
    if (*R >= ((int64_t)1 << 29)) {
        char d[96];
        return lv_error(LV_ERR_LIMIT, "%s: %s %s has %lld rows; at most 2^29 are supported", op,
                        a_name, lv_tensor_describe(a, d, sizeof d), (long long)*R);
    }
    return LV_OK;
}

/* Classify operand b of an op whose rows are [R, C] (a is the tensor named a_name). */
static lv_status check_operand(const char *op, const char *a_name, const lv_tensor *a,
                               int64_t R, int64_t C, const char *b_name, const lv_tensor *b,
                               const lv_tensor *out, operand *o) {
    LV_TRY(lv_check_act(op, b_name, b));
    int64_t bn = lv_tensor_numel(b);
    int64_t bc = b->ndim > 0 ? b->shape[b->ndim - 1] : 1;
    int64_t G = bc == C && C > 0 ? bn / C : 0;
    if (bc != C || G < 1 || R % G != 0) {
        char d1[96], d2[96];
        return lv_error(LV_ERR_INVALID,
                        "%s: %s %s does not broadcast to %s %s: it must have the same shape, "
                        "or be [G, %lld] with G dividing the %lld rows",
                        op, b_name, lv_tensor_describe(b, d1, sizeof d1), a_name,
                        lv_tensor_describe(a, d2, sizeof d2), (long long)C, (long long)R);
    }
    o->t = b;
    o->per_group = R / G;
    o->mode = G == R ? LV_BCAST_FULL : G == 1 ? LV_BCAST_CHANNEL : LV_BCAST_GROUPS;
    /* out may be b itself when b is not broadcast; a broadcast b read by many rows may not
     * share memory with out at all */
    return lv_check_alias(op, out, b_name, b, o->mode == LV_BCAST_FULL);
}

static operand_part operand_rows(const operand *o, int64_t r0, int64_t nr, int64_t C) {
    operand_part p = {.mode = (uint32_t)o->mode};
    if (o->mode == LV_BCAST_FULL) {
        p.view = lv_rows_view(o->t, r0, nr, C);
    } else if (o->mode == LV_BCAST_CHANNEL) {
        p.view = lv_rows_view(o->t, 0, 1, C);
    } else {
        int64_t g0 = r0 / o->per_group, g1 = (r0 + nr - 1) / o->per_group;
        p.view = lv_rows_view(o->t, g0, g1 - g0 + 1, C);
        p.phase = (uint32_t)(r0 - g0 * o->per_group);
        lv_fastdiv f = lv_fastdiv_make((uint32_t)o->per_group);
        p.magic = f.magic;
        p.shift = f.shift;
    }
    return p;
}

/* Workgroups of 256 invocations over `count` elements, `per` elements per invocation. */
static void grid_for(lv_ctx *ctx, uint64_t count, uint32_t per, uint32_t *gx, uint32_t *gy) {
    uint64_t invocations = (count + per - 1) / per;
    lv_grid_1d(ctx, (invocations + 255) / 256, gx, gy);
}

/* The shaders' VEC4 path (four consecutive elements per invocation, vec4 access) needs
 * every bound offset to be a multiple of 4 elements and, when an operand broadcasts, rows
 * of a multiple of 4 so that the four elements share a row. */
static uint32_t use_vec4(const lv_binding *b, uint32_t n, int64_t C, bool broadcast) {
    if (broadcast && C % 4 != 0) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (b[i].elem_offset % 4 != 0) return 0;
    return 1;
}

/* out = kind(a, b); b unused by the unary kinds. */
static lv_status elementwise(lv_ctx *ctx, const char *op, uint32_t kind, const lv_tensor *out,
                             const lv_tensor *a, const lv_tensor *b, float alpha, float beta) {
    bool binary = kind == LV_ELT_ADD || kind == LV_ELT_MUL || kind == LV_ELT_SCALE_ADD ||
                  kind == LV_ELT_MUL_SILU || kind == LV_ELT_MUL_GELU_TANH;
    const char *a_name = binary ? "a" : "x";
    int64_t R, C;
    LV_TRY(check_main(op, out, a_name, a, &R, &C));
    LV_TRY(lv_check_alias(op, out, a_name, a, true));
    operand ob = {a, LV_BCAST_FULL, 1};
    if (binary) LV_TRY(check_operand(op, "a", a, R, C, "b", b, out, &ob));
    if (R == 0 || C == 0) return LV_OK;
    int64_t per;
    LV_TRY(lv_rows_per_binding(ctx, op, a, (uint64_t)C * 4, &per));
    lv_fastdiv cdiv = lv_fastdiv_make((uint32_t)C);
    for (int64_t r0 = 0; r0 < R; r0 += per) {
        int64_t nr = R - r0 < per ? R - r0 : per;
        lv_tensor vo = lv_rows_view(out, r0, nr, C), va = lv_rows_view(a, r0, nr, C);
        /* unary kinds bind a in b's place; the shader never reads it */
        operand_part pb = operand_rows(&ob, r0, nr, C);
        lv_binding bind[3] = {{&vo, true, 0}, {&va, false, 0}, {&pb.view, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_ELEMENTWISE, bind, 3));
        lv_push_elementwise pc = {
            .out_offset = bind[0].elem_offset,
            .a_offset = bind[1].elem_offset,
            .b_offset = bind[2].elem_offset,
            .count = (uint32_t)(nr * C),
            .cols = (uint32_t)C,
            .cols_magic = cdiv.magic,
            .cols_shift = cdiv.shift,
            .b_mode = pb.mode,
            .b_phase = pb.phase,
            .b_magic = pb.magic,
            .b_shift = pb.shift,
            .alpha = alpha,
            .beta = beta,
        };
        uint32_t spec[5] = {kind, use_vec4(bind, 3, C, ob.mode != LV_BCAST_FULL), (uint32_t)out->dtype,
                            (uint32_t)a->dtype, binary ? (uint32_t)b->dtype : LV_F32};
        uint32_t gx, gy;
        grid_for(ctx, (uint64_t)(nr * C), spec[1] ? 4 : 1, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_ELEMENTWISE, spec, 5, bind, 3, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b) {
    return elementwise(ctx, "lv_op_add", LV_ELT_ADD, out, a, b, 1.0f, 1.0f);
}

lv_status lv_op_mul(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b) {
    return elementwise(ctx, "lv_op_mul", LV_ELT_MUL, out, a, b, 1.0f, 1.0f);
}

lv_status lv_op_scale_add(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, float alpha,
                          const lv_tensor *b, float beta) {
    return elementwise(ctx, "lv_op_scale_add", LV_ELT_SCALE_ADD, out, a, b, alpha, beta);
}

lv_status lv_op_silu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x) {
    return elementwise(ctx, "lv_op_silu", LV_ELT_SILU, out, x, NULL, 0.0f, 0.0f);
}

lv_status lv_op_mul_silu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b) {
    return elementwise(ctx, "lv_op_mul_silu", LV_ELT_MUL_SILU, out, a, b, 1.0f, 1.0f);
}

lv_status lv_op_mul_gelu_tanh(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *a, const lv_tensor *b) {
    return elementwise(ctx, "lv_op_mul_gelu_tanh", LV_ELT_MUL_GELU_TANH, out, a, b, 1.0f, 1.0f);
}

lv_status lv_op_gelu_tanh(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x) {
    return elementwise(ctx, "lv_op_gelu_tanh", LV_ELT_GELU_TANH, out, x, NULL, 0.0f, 0.0f);
}

lv_status lv_op_relu(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x) {
    return elementwise(ctx, "lv_op_relu", LV_ELT_RELU, out, x, NULL, 0.0f, 0.0f);
}

/* out = kind(x, p, q) with p, q broadcast (push_modulate.h). */
static lv_status modulate(lv_ctx *ctx, const char *op, uint32_t kind, const lv_tensor *out,
                          const lv_tensor *x, const char *p_name, const lv_tensor *p,
                          const char *q_name, const lv_tensor *q) {
    int64_t R, C;
    /* f32 only (the residual stream and its modulation): modulate.comp reads and writes fp32 */
    LV_TRY(lv_check_f32(op, "out", out));
    LV_TRY(lv_check_f32(op, "x", x));
    LV_TRY(lv_check_f32(op, p_name, p));
    LV_TRY(lv_check_f32(op, q_name, q));
    LV_TRY(check_main(op, out, "x", x, &R, &C));
    LV_TRY(lv_check_alias(op, out, "x", x, true));
    operand op_p, op_q;
    LV_TRY(check_operand(op, "x", x, R, C, p_name, p, out, &op_p));
    LV_TRY(check_operand(op, "x", x, R, C, q_name, q, out, &op_q));
    if (R == 0 || C == 0) return LV_OK;
    int64_t per;
    LV_TRY(lv_rows_per_binding(ctx, op, x, (uint64_t)C * 4, &per));
    lv_fastdiv cdiv = lv_fastdiv_make((uint32_t)C);
    for (int64_t r0 = 0; r0 < R; r0 += per) {
        int64_t nr = R - r0 < per ? R - r0 : per;
        lv_tensor vo = lv_rows_view(out, r0, nr, C), vx = lv_rows_view(x, r0, nr, C);
        operand_part pp = operand_rows(&op_p, r0, nr, C), pq = operand_rows(&op_q, r0, nr, C);
        lv_binding bind[4] = {
            {&vo, true, 0}, {&vx, false, 0}, {&pp.view, false, 0}, {&pq.view, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_MODULATE, bind, 4));
        lv_push_modulate pc = {
            .out_offset = bind[0].elem_offset,
            .x_offset = bind[1].elem_offset,
            .p_offset = bind[2].elem_offset,
            .q_offset = bind[3].elem_offset,
            .count = (uint32_t)(nr * C),
            .cols = (uint32_t)C,
            .cols_magic = cdiv.magic,
            .cols_shift = cdiv.shift,
            .p_mode = pp.mode,
            .p_phase = pp.phase,
            .p_magic = pp.magic,
            .p_shift = pp.shift,
            .q_mode = pq.mode,
            .q_phase = pq.phase,
            .q_magic = pq.magic,
            .q_shift = pq.shift,
        };
        bool broadcast = op_p.mode != LV_BCAST_FULL || op_q.mode != LV_BCAST_FULL;
        uint32_t spec[2] = {kind, use_vec4(bind, 4, C, broadcast)};
        uint32_t gx, gy;
        grid_for(ctx, (uint64_t)(nr * C), spec[1] ? 4 : 1, &gx, &gy);
        LV_TRY(lv_dispatch(ctx, LV_OP_MODULATE, spec, 2, bind, 4, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_modulate(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                         const lv_tensor *shift, const lv_tensor *scale) {
    return modulate(ctx, "lv_op_modulate", LV_MOD_MODULATE, out, x, "shift", shift, "scale", scale);
}

lv_status lv_op_add_gated(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *y, const lv_tensor *gate) {
    return modulate(ctx, "lv_op_add_gated", LV_MOD_ADD_GATED, out, x, "y", y, "gate", gate);
}
