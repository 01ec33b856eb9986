/* Rotary embedding on adjacent pairs, or on rotate-half pairs (j, j + D/2), from a (cos, sin)
 * table (shaders/rope3d.comp); the tables come from lv_rope_table_3d / lv_rope_table_1d
 * (rope_table.c). */
#include "longvk/ops.h"
#include "lv_internal.h"
#include "op_helpers.h"
#include "push_rope3d.h"

static lv_status rope(lv_ctx *ctx, const char *op, bool half, const lv_tensor *out, const lv_tensor *x,
                      const lv_tensor *table) {
    LV_TRY(lv_check_f32(op, "out", out));
    LV_TRY(lv_check_f32(op, "x", x));
    LV_TRY(lv_check_f32(op, "table", table));
    char d1[96], d2[96];
    if (!lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "%s: out %s and x %s must have the same shape", op,
                        lv_tensor_describe(out, d1, sizeof d1), lv_tensor_describe(x, d2, sizeof d2));
    LV_TRY(lv_check_alias(op, out, "x", x, true));
    LV_TRY(lv_check_alias(op, out, "table", table, false));
    int64_t N, HD, TN, D;
    lv_rows_cols(x, &N, &HD);
    lv_rows_cols(table, &TN, &D);
    if (table->ndim < 2 || D < 2 || D % 2 != 0 || HD % D != 0 || TN != N)
        return lv_error(LV_ERR_INVALID,
                        "%s: table %s must be [N, D] with D even, N the %lld tokens (rows) of "
                        "x %s and D dividing its last dimension (H heads of D dims)",
                        op, lv_tensor_describe(table, d1, sizeof d1), (long long)N,
                        lv_tensor_describe(x, d2, sizeof d2));
    if (N == 0) return LV_OK;
    int64_t per;
    LV_TRY(lv_rows_per_binding(ctx, op, x, (uint64_t)HD * 4, &per));
    for (int64_t r0 = 0; r0 < N; r0 += per) {
        int64_t nr = N - r0 < per ? N - r0 : per;
        lv_tensor vo = lv_rows_view(out, r0, nr, HD), vx = lv_rows_view(x, r0, nr, HD);
        lv_tensor vt = lv_rows_view(table, r0, nr, D);
        lv_binding bind[3] = {{&vo, true, 0}, {&vx, false, 0}, {&vt, false, 0}};
        LV_TRY(lv_bindings_prepare(ctx, LV_OP_ROPE3D, bind, 3));
        /* two pairs per invocation as one vec4 when D and every offset allow it */
        uint32_t vec4 = !half && D % 4 == 0 && bind[0].elem_offset % 4 == 0 &&
                        bind[1].elem_offset % 4 == 0 && bind[2].elem_offset % 4 == 0;
        uint32_t head_units = (uint32_t)(vec4 ? D / 4 : D / 2);
        lv_fastdiv udiv = lv_fastdiv_make(head_units);
        lv_push_rope3d pc = {
            .out_offset = bind[0].elem_offset,
            .x_offset = bind[1].elem_offset,
            .t_offset = bind[2].elem_offset,
            .units = (uint32_t)nr * head_units,
            .head_units = head_units,
            .unit_magic = udiv.magic,
            .unit_shift = udiv.shift,
            .half_dim = (uint32_t)(D / 2),
            .heads = (uint32_t)(HD / D),
        };
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)pc.units + 255) / 256, &gx, &gy);
        uint32_t spec[2] = {vec4, half ? 1u : 0u};
        LV_TRY(lv_dispatch(ctx, LV_OP_ROPE3D, spec, 2, bind, 3, &pc, sizeof pc, gx, gy, 1));
    }
    return LV_OK;
}

lv_status lv_op_rope(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x, const lv_tensor *table) {
    return rope(ctx, "lv_op_rope", false, out, x, table);
}

lv_status lv_op_rope_half(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x, const lv_tensor *table) {
    return rope(ctx, "lv_op_rope_half", true, out, x, table);
}
