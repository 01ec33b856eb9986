/* RMSNorm and LayerNorm over the last dimension (shaders/rmsnorm.comp, layernorm.comp).
 * Rows are split over dispatches so each binding fits the device's binding limit; the row
 * layout (a workgroup or a subgroup per row, see shaders/row_reduce.glsl) is chosen per
 * device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/ops.h"
#include "lv_internal.h"
#include "norm_modes.h"
#include "op_helpers.h"
#include "push_layernorm.h"
#include "push_rmsnorm.h"

typedef struct norm_layout {
    uint32_t wg;         /* workgroup size */
    uint32_t mode;       /* LV_ROWS_PER_* */
    uint32_t rows_per_wg;
} norm_layout;

/* CPU devices (lavapipe: a subgroup is one 256-bit register, its size is fixed, barriers
 * are slow): one row per subgroup, 8 subgroups per workgroup. Measured on lavapipe, rows of
 * 2240 and of 16384: 3.5x less CPU time than a workgroup per row (and the same as one row
 * per invocation, which reads rows with strided gathers). GPUs: a workgroup per row.
 * LONGVK_NORM_LAYOUT=workgroup forces the GPU layout anywhere (tests run it on lavapipe). */
static lv_status choose_layout(lv_ctx *ctx, const char *op, int64_t C, norm_layout *l) {
    VkPhysicalDeviceSubgroupProperties sg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &sg};
    vkGetPhysicalDeviceProperties2(ctx->physical, &props);
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sg.supportedOperations & need) != need ||
        !(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || sg.subgroupSize < 4)
        return lv_error(LV_ERR_UNSUPPORTED,
                        "%s: device '%s' lacks subgroup arithmetic in compute shaders (or has "
                        "subgroups under 4 lanes)", op, ctx->info.name);
    const char *force = lv_env_str("LONGVK_NORM_LAYOUT");
    bool workgroup = ctx->info.type != LV_DEVICE_CPU || (force && strcmp(force, "workgroup") == 0);
    if (workgroup) {
        uint32_t wg = C >= 1024 ? 256 : 64;
        if (wg < sg.subgroupSize) wg = sg.subgroupSize;
        *l = (norm_layout){wg, LV_ROWS_PER_WORKGROUP, 1};
    } else {
        *l = (norm_layout){sg.subgroupSize * 8, LV_ROWS_PER_SUBGROUP, 8};
    }
    return LV_OK;
}

/* Rows are walked in vec4 units when C and every bound offset are multiples of 4. */
static uint32_t use_vec4(const lv_binding *b, uint32_t n, int64_t C) {
    if (C % 4 != 0) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (b[i].elem_offset % 4 != 0) return 0;
    return 1;
}

/* Shapes: x [..., C] f32; out the same, f32 (or, half_out, f16 / bf16: an activation
 * that only feeds a matrix product); weight and bias C elements or NULL. */
static lv_status check_norm(const char *op, const lv_tensor *out, const lv_tensor *x,
                            const lv_tensor *w, const lv_tensor *b, float eps, bool half_out,
                            int64_t *R, int64_t *C) {
    char d1[96], d2[96];
    LV_TRY(half_out ? lv_check_act(op, "out", out) : lv_check_f32(op, "out", out)); /* in place: same dtype, below */
    LV_TRY(lv_check_f32(op, "x", x));
    if (!lv_tensor_same_shape(out, x))
        return lv_error(LV_ERR_INVALID, "%s: out %s and x %s must have the same shape", op,
                        lv_tensor_describe(out, d1, sizeof d1), lv_tensor_describe(x, d2, sizeof d2));
    LV_TRY(lv_check_alias(op, out, "x", x, true));
    lv_rows_cols(x, R, C);
    if (!(eps >= 0.0f) || isinf(eps))
        return lv_error(LV_ERR_INVALID, "%s: eps %g must be finite and >= 0", op, (double)eps);
    const lv_tensor *params[2] = {w, b};
    const char *names[2] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        if (!params[i]) continue;
        LV_TRY(lv_check_f32(op, names[i], params[i]));
        if (lv_tensor_numel(params[i]) != *C)
            return lv_error(LV_ERR_INVALID, "%s: %s %s must have %lld elements, the last dimension of x %s",
                            op, names[i], lv_tensor_describe(params[i], d1, sizeof d1), (long long)*C,
                            lv_tensor_describe(x, d2, sizeof d2));
        LV_TRY(lv_check_alias(op, out, names[i], params[i], false));
    }
    return LV_OK;
}

/* Dispatch a norm over all rows, split to fit the binding limit. */
/* group_rows > 0: adaLN modulation, w = scale and b = shift are [R / group_rows, C]. */
static lv_status norm_dispatch(lv_ctx *ctx, const char *op, lv_op kind, const lv_tensor *out,
                               const lv_tensor *x, const lv_tensor *w, const lv_tensor *b,
                               float eps, int64_t R, int64_t C, int64_t group_rows) {
    if (R == 0 || C == 0) return LV_OK;
    norm_layout l = {0, 0, 1};
    LV_TRY(choose_layout(ctx, op, C, &l));
    int64_t per;
    LV_TRY(lv_rows_per_binding(ctx, op, x, (uint64_t)C * 4, &per));
    for (int64_t r0 = 0; r0 < R; r0 += per) {
        int64_t nr = R - r0 < per ? R - r0 : per;
        lv_tensor vo = lv_rows_view(out, r0, nr, C), vx = lv_rows_view(x, r0, nr, C);
        /* absent parameters bind x as a placeholder the shader does not read; modulation
         * binds the parameter rows of the groups this chunk of rows touches */
        int64_t g0 = group_rows ? r0 / group_rows : 0;
        int64_t ng = group_rows ? (r0 + nr - 1) / group_rows - g0 + 1 : 1;
        lv_tensor vw = w ? lv_rows_view(w, g0, ng, C) : vx, vb = b ? lv_rows_view(b, g0, ng, C) : vx;
        uint32_t gx, gy;
        lv_grid_1d(ctx, ((uint64_t)nr + l.rows_per_wg - 1) / l.rows_per_wg, &gx, &gy);
        if (kind == LV_OP_RMSNORM) {
            lv_binding bind[3] = {{&vo, true, 0}, {&vx, false, 0}, {&vw, false, 0}};
            LV_TRY(lv_bindings_prepare(ctx, kind, bind, 3));
            uint32_t spec[4] = {l.wg, l.mode, w != NULL, use_vec4(bind, 3, C)};
            lv_push_rmsnorm pc = {
                .out_offset = bind[0].elem_offset,
                .x_offset = bind[1].elem_offset,
                .w_offset = bind[2].elem_offset,
                .rows = (uint32_t)nr,
                .cols = (uint32_t)C,
                .eps = eps,
            };
            LV_TRY(lv_dispatch(ctx, kind, spec, 4, bind, 3, &pc, sizeof pc, gx, gy, 1));
        } else {
            lv_binding bind[4] = {{&vo, true, 0}, {&vx, false, 0}, {&vw, false, 0}, {&vb, false, 0}};
            LV_TRY(lv_bindings_prepare(ctx, kind, bind, 4));
            uint32_t spec[7] = {l.wg, l.mode, w != NULL, b != NULL, use_vec4(bind, 4, C), group_rows > 0,
                                (uint32_t)out->dtype};
            lv_push_layernorm pc = {
                .out_offset = bind[0].elem_offset,
                .x_offset = bind[1].elem_offset,
                .w_offset = bind[2].elem_offset,
                .b_offset = bind[3].elem_offset,
                .rows = (uint32_t)nr,
                .cols = (uint32_t)C,
                .eps = eps,
                .group_rows = (uint32_t)(group_rows ? group_rows : 1),
                .group_phase = (uint32_t)(group_rows ? r0 - g0 * group_rows : 0),
            };
            LV_TRY(lv_dispatch(ctx, kind, spec, 7, bind, 4, &pc, sizeof pc, gx, gy, 1));
        }
    }
    return LV_OK;
}

lv_status lv_op_rmsnorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                        const lv_tensor *weight, float eps) {
    const char *op = "lv_op_rmsnorm";
    int64_t R, C;
    LV_TRY(check_norm(op, out, x, weight, NULL, eps, false, &R, &C));
    return norm_dispatch(ctx, op, LV_OP_RMSNORM, out, x, weight, NULL, eps, R, C, 0);
}

lv_status lv_op_layernorm(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                          const lv_tensor *weight, const lv_tensor *bias, float eps) {
    const char *op = "lv_op_layernorm";
    int64_t R, C;
    LV_TRY(check_norm(op, out, x, weight, bias, eps, true, &R, &C));
    return norm_dispatch(ctx, op, LV_OP_LAYERNORM, out, x, weight, bias, eps, R, C, 0);
}

lv_status lv_op_layernorm_modulate(lv_ctx *ctx, const lv_tensor *out, const lv_tensor *x,
                                   const lv_tensor *shift, const lv_tensor *scale, float eps) {
    const char *op = "lv_op_layernorm_modulate";
    int64_t R, C;
    LV_TRY(check_norm(op, out, x, NULL, NULL, eps, true, &R, &C));
    LV_TRY(lv_check_f32(op, "shift", shift));
    LV_TRY(lv_check_f32(op, "scale", scale));
    int64_t G = lv_tensor_numel(shift) / (C ? C : 1);
    char d1[96], d2[96];
    if (lv_tensor_numel(shift) != G * C || lv_tensor_numel(scale) != G * C || G < 1 || R % G)
        return lv_error(LV_ERR_INVALID, "%s: shift %s and scale %s must both be [G, %lld] with G "
                        "dividing the %lld rows of x", op, lv_tensor_describe(shift, d1, sizeof d1),
                        lv_tensor_describe(scale, d2, sizeof d2), (long long)C, (long long)R);
    LV_TRY(lv_check_alias(op, out, "shift", shift, false));
    LV_TRY(lv_check_alias(op, out, "scale", scale, false));
    return norm_dispatch(ctx, op, LV_OP_LAYERNORM, out, x, scale, shift, eps, R, C, R / G);
}
