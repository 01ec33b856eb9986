/* The engine itself: devices, context, tensors, transfers, the stream and its limits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "vk_coopmat.h"

Test(engine, lists_devices) {
    lv_device_info infos[8];
    int n = 0;
    cr_assert_eq(lv_list_devices(infos, 8, &n), LV_OK, "%s", lv_last_error());
    cr_assert_gt(n, 0);
    cr_assert_gt(infos[0].max_storage_buffer_range, 0);
    cr_assert_gt(infos[0].subgroup_size, 0);
}

/* What Vulkan itself reports for the device named `name` (asked here through an instance of
 * the test's own, not through longvk): whether it lists VK_KHR_cooperative_matrix, and how
 * many shapes vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR gives. */
static int vulkan_coopmat_shapes(const char *name, bool *listed) {
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    cr_assert_eq(vkCreateInstance(&ci, NULL, &inst), VK_SUCCESS);
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(inst, &n, NULL);
    VkPhysicalDevice pds[16];
    if (n > 16) n = 16;
    vkEnumeratePhysicalDevices(inst, &n, pds);
    int shapes = -1;
    *listed = false;
    for (uint32_t i = 0; i < n && shapes < 0; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (strcmp(p.deviceName, name) != 0) continue;
        shapes = 0;
        uint32_t ne = 0;
        vkEnumerateDeviceExtensionProperties(pds[i], NULL, &ne, NULL);
        VkExtensionProperties *ext = calloc(ne ? ne : 1, sizeof *ext);
        cr_assert(ext);
        vkEnumerateDeviceExtensionProperties(pds[i], NULL, &ne, ext);
        for (uint32_t j = 0; j < ne; j++) *listed = *listed || strcmp(ext[j].extensionName, "VK_KHR_cooperative_matrix") == 0;
        free(ext);
        PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
            (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
                inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
        uint32_t count = 0;
        if (*listed && get && get(pds[i], &count, NULL) == VK_SUCCESS) shapes = (int)count;
    }
    vkDestroyInstance(inst, NULL);
    cr_assert_geq(shapes, 0, "Vulkan has no device named %s", name);
    return shapes;
}

/* Half precision and cooperative matrices (issues 46, 57): every device's state and shapes are
 * what Vulkan reports for it (not what its driver is assumed to have: Mesa 26's lavapipe has
 * cooperative matrices on AVX2, Mesa 22's and 25's none); lavapipe has shaderFloat16 and
 * 16-bit storage; a device that lists shapes lists real ones; LONGVK_COOPMAT=0 reports every
 * device's tensor cores as disabled. */
Test(engine, half_precision_and_coopmat) {
    lv_device_info infos[8];
    int n = 0;
    cr_assert_eq(lv_list_devices(infos, 8, &n), LV_OK, "%s", lv_last_error());
    for (int i = 0; i < n && i < 8; i++) {
        const lv_device_info *d = &infos[i];
        if (strstr(d->name, "llvmpipe"))
            cr_assert(d->fp16 && d->storage16, "%s: shaderFloat16 %d, 16-bit storage %d", d->name,
                      d->fp16, d->storage16);
        bool listed;
        int shapes = vulkan_coopmat_shapes(d->name, &listed);
        cr_assert_eq(d->coopmat_count, shapes, "%s: %d shapes, Vulkan reports %d", d->name, d->coopmat_count, shapes);
        if (!listed || shapes == 0)
            cr_assert_eq(d->coopmat, LV_COOPMAT_NONE, "%s: no cooperative matrix reported, state %d", d->name,
                         (int)d->coopmat);
        else if (lv_coopmat_built())
            cr_assert(d->coopmat == LV_COOPMAT_ON || d->coopmat == LV_COOPMAT_NO_F16, "%s: state %d", d->name,
                      (int)d->coopmat);
        else
            cr_assert_eq(d->coopmat, LV_COOPMAT_UNBUILT, "%s: state %d", d->name, (int)d->coopmat);
        cr_log_info("%s: VK_KHR_cooperative_matrix %s, %d shapes, state %d (build has the kernels: %d)", d->name,
                    listed ? "listed" : "not listed", shapes, (int)d->coopmat, lv_coopmat_built());
        cr_assert_eq(d->coopmat == LV_COOPMAT_NONE, d->coopmat_count == 0, "%s: state %d, %d shapes",
                     d->name, (int)d->coopmat, d->coopmat_count);
        for (int j = 0; j < d->coopmat_count && j < LV_COOPMAT_MAX_SHAPES; j++) {
            const lv_coopmat_shape *c = &d->coopmat_shapes[j];
            cr_assert(c->m && c->n && c->k, "%s: shape %d is %ux%ux%u", d->name, j, c->m, c->n, c->k);
        }
    }
    cr_assert_eq(setenv("LONGVK_COOPMAT", "0", 1), 0);
    lv_device_info off[8];
    int n_off = 0;
    cr_assert_eq(lv_list_devices(off, 8, &n_off), LV_OK, "%s", lv_last_error());
    unsetenv("LONGVK_COOPMAT");
    cr_assert_eq(n_off, n);
    for (int i = 0; i < n && i < 8; i++) {
        cr_assert_eq(off[i].coopmat, LV_COOPMAT_DISABLED, "%s", off[i].name);
        cr_assert_eq(off[i].coopmat_count, infos[i].coopmat_count, "the shapes are still listed");
    }
    cr_assert_str_eq(lv_coopmat_type_name(0), "f16");
    cr_assert_str_eq(lv_coopmat_type_name(1000141000u), "bf16");
    cr_assert_str_eq(lv_coopmat_scope_name(3), "subgroup");
}

Test(engine, fill_and_read_back) {
    lv_ctx *ctx = ts_ctx();
    int64_t shape[2] = {37, 53};
    lv_tensor t = ts_empty(ctx, 2, shape);
    cr_assert_eq(lv_op_fill(ctx, &t, 2.5f), LV_OK, "%s", lv_last_error());
    float *x = ts_read(ctx, &t);
    for (int i = 0; i < 37 * 53; i++) cr_assert_eq(x[i], 2.5f);
    free(x);
    lv_tensor_free(ctx, &t);
    ts_ctx_done(ctx);
}

Test(engine, write_read_roundtrip_and_views) {
    lv_ctx *ctx = ts_ctx();
    int64_t shape[1] = {1001};
    float *data = ts_rand_alloc(1001, 7, -1, 1);
    lv_tensor t = ts_tensor(ctx, LV_F32, 1, shape, data);
    /* an unaligned view: fill elements 3..102 */
    int64_t vshape[1] = {100};
    lv_tensor v = lv_tensor_view(&t, 3, 1, vshape);
    cr_assert_eq(lv_op_fill(ctx, &v, -7.0f), LV_OK, "%s", lv_last_error());
    float *x = ts_read(ctx, &t);
    for (int i = 0; i < 1001; i++) cr_assert_eq(x[i], (i >= 3 && i < 103) ? -7.0f : data[i], "at %d", i);
    free(x);
    free(data);
    lv_tensor_free(ctx, &t);
    ts_ctx_done(ctx);
}

Test(engine, fill_splits_over_binding_limit) {
    lv_ctx *ctx = ts_ctx_with_binding(4096); /* force many splits */
    int64_t shape[1] = {10000};
    lv_tensor t = ts_empty(ctx, 1, shape);
    cr_assert_eq(lv_op_fill(ctx, &t, 1.0f), LV_OK, "%s", lv_last_error());
    float *x = ts_read(ctx, &t);
    for (int i = 0; i < 10000; i++) cr_assert_eq(x[i], 1.0f, "at %d", i);
    free(x);
    lv_tensor_free(ctx, &t);
    ts_ctx_done(ctx);
}

/* Read-only operands are texel bindings (ops.def), which reach max_texel_bytes into a
 * memory block: blocks are made no larger than that, and only a tensor larger than the
 * reach is an error, one that names the limit. */
Test(engine, texel_binding_reach) {
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    opt.max_texel_bytes = 4096;
    lv_ctx *ctx = ts_ctx_with(opt);
    int64_t small[1] = {512}, big[1] = {2048}; /* 2 KiB: within the reach; 8 KiB: past it */
    lv_tensor a = ts_empty(ctx, 1, small), b = ts_empty(ctx, 1, small), c = ts_empty(ctx, 1, small);
    lv_tensor d = ts_empty(ctx, 1, big), e = ts_empty(ctx, 1, big);
    cr_assert_eq(lv_op_fill(ctx, &a, 2.0f), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_fill(ctx, &c, -1.0f), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_op_add(ctx, &b, &a, &c), LV_OK, "%s", lv_last_error()); /* c: a second block */
    float *x = ts_read(ctx, &b);
    for (int i = 0; i < 512; i++) cr_assert_eq(x[i], 1.0f, "at %d", i);
    free(x);
    cr_assert_eq(lv_op_fill(ctx, &d, 1.0f), LV_OK, "%s", lv_last_error()); /* written: storage */
    cr_assert_eq(lv_op_silu(ctx, &e, &d), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "maxTexelBufferElements") != NULL, "%s", lv_last_error());
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &b);
    lv_tensor_free(ctx, &c);
    lv_tensor_free(ctx, &d);
    lv_tensor_free(ctx, &e);
    ts_ctx_done(ctx);
}

/* cpu_threads sets lavapipe's LP_NUM_THREADS for the context's instance only, and the
 * kernels compute the same either way. */
Test(engine, cpu_threads_is_per_context) {
    if (getenv("LP_NUM_THREADS")) cr_skip_test("LP_NUM_THREADS is set: the user's choice wins");
    float out[2][64];
    for (int k = 0; k < 2; k++) {
        lv_ctx_options opt;
        lv_ctx_options_default(&opt);
        opt.cpu_threads = k == 0 ? 0 : -1;
        lv_ctx *ctx = ts_ctx_with(opt);
        cr_assert_null(getenv("LP_NUM_THREADS"), "the variable is restored after creation");
        int64_t shape[1] = {64};
        lv_tensor a = ts_empty(ctx, 1, shape), b = ts_empty(ctx, 1, shape);
        float in[64];
        for (int i = 0; i < 64; i++) in[i] = (float)i / 8 - 4;
        cr_assert_eq(lv_tensor_write(ctx, &a, in, sizeof in), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_op_gelu_tanh(ctx, &b, &a), LV_OK, "%s", lv_last_error());
        cr_assert_eq(lv_tensor_read(ctx, &b, out[k], sizeof out[k]), LV_OK, "%s", lv_last_error());
        lv_tensor_free(ctx, &a);
        lv_tensor_free(ctx, &b);
        ts_ctx_done(ctx);
    }
    cr_assert(memcmp(out[0], out[1], sizeof out[0]) == 0);
}

Test(engine, zero_and_copy_in_stream) {
    lv_ctx *ctx = ts_ctx();
    int64_t shape[1] = {256};
    lv_tensor a = ts_empty(ctx, 1, shape), b = ts_empty(ctx, 1, shape);
    cr_assert_eq(lv_op_fill(ctx, &a, 3.0f), LV_OK);
    cr_assert_eq(lv_tensor_copy(ctx, &b, &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tensor_zero(ctx, &a), LV_OK, "%s", lv_last_error());
    float *xa = ts_read(ctx, &a), *xb = ts_read(ctx, &b);
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(xa[i], 0.0f);
        cr_assert_eq(xb[i], 3.0f);
    }
    free(xa);
    free(xb);
    lv_tensor_free(ctx, &a);
    lv_tensor_free(ctx, &b);
    ts_ctx_done(ctx);
}

Test(engine, bad_requests_are_errors) {
    lv_ctx *ctx = ts_ctx();
    lv_tensor t;
    int64_t bad[2] = {4, 0};
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 2, bad, &t), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "dimension 1") != NULL, "%s", lv_last_error());
    int64_t huge[1] = {(int64_t)1 << 40};
    cr_assert_eq(lv_tensor_create(ctx, LV_F32, 1, huge, &t), LV_ERR_LIMIT);
    cr_assert(strstr(lv_last_error(), "maxMemoryAllocationSize") != NULL, "%s", lv_last_error());
    int64_t shape[1] = {16};
    lv_tensor small = ts_empty(ctx, 1, shape);
    float buf[8];
    cr_assert_eq(lv_tensor_write(ctx, &small, buf, sizeof buf), LV_ERR_INVALID);
    lv_tensor_free(ctx, &small);
    /* block-quantized dtypes (GGUF's q8_0, q4_k): rows of whole blocks, sized by their
     * blocks (3 of 34 bytes), never as 0 bytes; a row not whole blocks is refused */
    int64_t row[1] = {32};
    cr_assert_eq(lv_tensor_create(ctx, LV_Q8_0, 1, (int64_t[]){96}, &t), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_tensor_nbytes(&t), 102);
    lv_tensor_free(ctx, &t);
    cr_assert_eq(lv_tensor_create(ctx, LV_Q8_0, 1, (int64_t[]){33}, &t), LV_ERR_UNSUPPORTED);
    cr_assert(strstr(lv_last_error(), "q8_0") != NULL, "%s", lv_last_error());
    static const uint8_t q8[34];
    lv_weight w = {"blk.0.q", LV_Q8_0, 1, {32}, q8, sizeof q8};
    cr_assert_eq(lv_tensor_from_weight(ctx, &w, LV_F16, 1, row, &t), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "'blk.0.q': q8_0") != NULL, "%s", lv_last_error());
    cr_assert_eq(lv_ctx_memory_in_use(ctx), 0);
    /* to f32 it is dequantised: d = 0.5 (f16 0x3800), q = i - 16 */
    uint8_t q8b[34] = {0x00, 0x38};
    for (int i = 0; i < 32; i++) q8b[2 + i] = (uint8_t)(int8_t)(i - 16);
    lv_weight wq = {"blk.1.q", LV_Q8_0, 1, {32}, q8b, sizeof q8b};
    cr_assert_eq(lv_tensor_from_weight(ctx, &wq, LV_F32, 1, row, &t), LV_OK, "%s", lv_last_error());
    float *deq = ts_read(ctx, &t);
    for (int i = 0; i < 32; i++) cr_assert_eq(deq[i], 0.5f * (float)(i - 16), "element %d: %g", i, deq[i]);
    free(deq);
    lv_tensor_free(ctx, &t);
    ts_ctx_done(ctx);
}

Test(engine, half_conversions) {
    float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.96e-08f, 0.333333f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        float h = lv_half_to_float(lv_float_to_half(vals[i]));
        cr_assert_float_eq(h, vals[i], fabsf(vals[i]) * 1e-3f + 1e-7f, "%g -> %g", vals[i], h);
        float b = lv_bf16_to_float(lv_float_to_bf16(vals[i]));
        cr_assert_float_eq(b, vals[i], fabsf(vals[i]) * 8e-3f, "%g -> %g", vals[i], b);
    }
    cr_assert_eq(lv_float_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(lv_float_to_half(1.0f), 0x3c00);
}
