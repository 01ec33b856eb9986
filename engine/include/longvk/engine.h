/* The Vulkan compute engine: a context on one device, tensors in device memory, and a
 * command stream that records kernel dispatches until lv_flush() submits them.
 *
 *   lv_ctx_options opt; lv_ctx_options_default(&opt);
 *   lv_ctx *ctx; if (lv_ctx_create(&opt, &ctx) != LV_OK) fprintf(stderr, "%s\n", lv_last_error());
 *   lv_tensor x; lv_tensor_create(ctx, LV_F32, 2, (int64_t[]){rows, cols}, &x);
 *   lv_tensor_write(ctx, &x, host, bytes);  ... kernels (longvk/ops_*.h) ...
 *   lv_tensor_read(ctx, &y, host, bytes);    (flushes the stream first)
 */
#ifndef LONGVK_ENGINE_H
#define LONGVK_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "longvk/dtype.h"
#include "longvk/status.h"
#include "longvk/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices -------------------------------------------------------------------------- */

typedef enum lv_device_type {
    LV_DEVICE_OTHER = 0,
    LV_DEVICE_DISCRETE,
    LV_DEVICE_INTEGRATED,
    LV_DEVICE_VIRTUAL,
    LV_DEVICE_CPU
} lv_device_type;

/* Whether the matrix kernels may use the device's cooperative matrices (tensor cores). */
typedef enum lv_coopmat_state {
    LV_COOPMAT_NONE = 0,  /* the device offers no VK_KHR_cooperative_matrix: fp32 kernels */
    LV_COOPMAT_ON,        /* offered, and this build's shaders can use it */
    LV_COOPMAT_DISABLED,  /* LONGVK_COOPMAT=0 in the environment forces the fp32 kernels */
    LV_COOPMAT_UNBUILT,   /* offered, but the build's glslang did not know
                             GL_KHR_cooperative_matrix (see .ci/glslang): fp32 kernels */
    LV_COOPMAT_OLD_LAYER, /* a context with the validation layer on, and the layer older
                             than the extension (1.3.255; Debian 12's is 1.3.239): it would
                             report the extension's structures and SPIR-V as errors */
    LV_COOPMAT_NO_F16     /* offered without shaderFloat16 or the Vulkan memory model, which
                             the fp16 kernels need */
} lv_coopmat_state;

/* One entry of vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR: C (M x N) += A (M x K) *
 * B (K x N). Types and scope are Vulkan's VkComponentTypeKHR / VkScopeKHR values; their
 * names: lv_coopmat_type_name(), lv_coopmat_scope_name(). */
typedef struct lv_coopmat_shape {
    uint32_t m, n, k;
    uint32_t a_type, b_type, c_type, result_type;
    uint32_t scope;
    int saturating;
} lv_coopmat_shape;

#define LV_COOPMAT_MAX_SHAPES 32

typedef struct lv_device_info {
    int index;                      /* position in Vulkan's enumeration order */
    char name[256];
    lv_device_type type;
    char driver[256];               /* driver name and info */
    uint32_t vendor_id;
    uint64_t device_local_bytes;    /* size of the largest device-local heap */
    uint32_t subgroup_size;
    int fp16;                       /* shaderFloat16 supported */
    int storage16;                  /* storageBuffer16BitAccess: 16-bit loads and stores */
    int bf16;                       /* VK_KHR_shader_bfloat16's shaderBFloat16Type */
    lv_coopmat_state coopmat;
    int coopmat_count;              /* shapes the device lists (even with LONGVK_COOPMAT=0);
                                       the first LV_COOPMAT_MAX_SHAPES are kept */
    lv_coopmat_shape coopmat_shapes[LV_COOPMAT_MAX_SHAPES];
    uint64_t max_storage_buffer_range;
    uint64_t max_texel_buffer_bytes; /* maxTexelBufferElements x 16: how far into a memory
                                        block the kernels' texel bindings reach */
    uint64_t max_allocation_bytes;  /* maxMemoryAllocationSize */
    uint32_t max_workgroup_invocations;
    uint32_t max_shared_memory_bytes;
    uint32_t timestamp_valid_bits;
} lv_device_info;

const char *lv_device_type_name(lv_device_type type);
/* "f16", "bf16", "f32", "s8", "u32", ... ("?" for a type longvk does not name) */
const char *lv_coopmat_type_name(uint32_t component_type);
/* "subgroup", "workgroup", "device", "queue family" */
const char *lv_coopmat_scope_name(uint32_t scope);
/* Whether this build has the tensor-core kernels (shaders/coopmat/): 1 when the glslang it was
 * built with knows GL_KHR_cooperative_matrix (Debian 13's does; on Debian 12 the one
 * .ci/glslang builds, given as -DLONGVK_GLSLANG=PATH), else 0. */
int lv_coopmat_built(void);

/* Fill up to `max` entries of `out` (out may be NULL to count). Fails with LV_ERR_DEVICE and
 * a message naming mesa-vulkan-drivers when there is no Vulkan device at all. */
lv_status lv_list_devices(lv_device_info *out, int max, int *count);

/* ---- context -------------------------------------------------------------------------- */

typedef struct lv_ctx lv_ctx;

typedef struct lv_ctx_options {
    int device_index;            /* -1: LONGVK_DEVICE if set, else the best device */
    int validation;              /* -1: LONGVK_VALIDATE=1 turns it on; 0 off; 1 on */
    int profile;                 /* -1: LONGVK_PROFILE=1 turns it on; 0 off; 1 on */
    uint64_t max_binding_bytes;  /* 0: the device's maxStorageBufferRange; smaller values
                                    (or LONGVK_MAX_BINDING) exercise the splitting paths */
    uint64_t max_texel_bytes;    /* 0: maxTexelBufferElements x 16 bytes, the reach of the
                                    texel bindings into a memory block; smaller values
                                    exercise the error for tensors past it */
    int precision;               /* LV_PRECISION_AUTO (also 0: LONGVK_PRECISION=f32|f16|bf16
                                    when set, else f32), LV_PRECISION_F32, LV_PRECISION_F16 or
                                    LV_PRECISION_BF16: the DiT keeps the activations that only
                                    feed matrix products in that 16-bit dtype (engine/README.md,
                                    "Tensor cores"), arithmetic stays fp32; at F16 the matrix
                                    products with f32 inputs run on the tensor cores where the
                                    context uses them. AUTO stays f32 until the half-precision
                                    paths have been checked on a GPU. */
    int cpu_threads;             /* CPU devices (lavapipe) only. -1: lavapipe's choice (one
                                    worker per core, or LP_NUM_THREADS); 0: every dispatch
                                    runs on lavapipe's queue thread, no hand-off to workers
                                    (~6 us a dispatch instead of ~50 here: faster for small
                                    models); N > 0: N workers. A LP_NUM_THREADS set by the
                                    user wins. Sets the variable while the context is
                                    created: create such contexts from one thread. */
} lv_ctx_options;

typedef enum lv_precision { LV_PRECISION_AUTO = 0, LV_PRECISION_F32, LV_PRECISION_F16, LV_PRECISION_BF16 } lv_precision;

/* What a context made with `requested` as its precision would use: AUTO resolved through
 * LONGVK_PRECISION (an error naming the variable for a bad value), never AUTO itself. No
 * device is needed: a run's identity records it before the context exists. */
lv_status lv_precision_resolve(int requested, lv_precision *out);

void lv_ctx_options_default(lv_ctx_options *opt);
lv_status lv_ctx_create(const lv_ctx_options *opt, lv_ctx **out);
/* Waits for the device, prints the profile if enabled, frees everything. */
void lv_ctx_destroy(lv_ctx *ctx);

const lv_device_info *lv_ctx_device(const lv_ctx *ctx);
/* The context's precision (never AUTO), and whether it enabled the tensor cores
 * (lv_ctx_device(ctx)->coopmat is then LV_COOPMAT_ON). */
lv_precision lv_ctx_precision(const lv_ctx *ctx);
bool lv_ctx_coopmat(const lv_ctx *ctx);
/* The largest byte range one kernel binding may cover (device limit or override). */
uint64_t lv_ctx_max_binding(const lv_ctx *ctx);
/* Validation-layer errors and warnings seen so far (0 when validation is off), by this
 * context and by every context of the process. */
uint64_t lv_ctx_validation_messages(const lv_ctx *ctx);
uint64_t lv_validation_messages_total(void);
/* Device memory currently held by live tensors, and the peak, in bytes. */
uint64_t lv_ctx_memory_in_use(const lv_ctx *ctx);
uint64_t lv_ctx_memory_peak(const lv_ctx *ctx);
/* Starts the peak again from the memory in use now (one model's peak after another's). */
void lv_ctx_memory_reset_peak(lv_ctx *ctx);
/* The granularity of device allocations: every tensor takes its bytes rounded up to this
 * (max(16, minStorageBufferOffsetAlignment)), and lv_ctx_memory_in_use counts them so. */
uint64_t lv_ctx_alloc_alignment(const lv_ctx *ctx);
/* The device memory a run may plan to hold: LONGVK_DEVICE_BUDGET (bytes) when set, else the
 * largest device-local heap (lv_device_info.device_local_bytes); on a CPU device (lavapipe,
 * whose reported heap is not enforced) the host's physical memory when that is larger. */
uint64_t lv_ctx_memory_budget(const lv_ctx *ctx);

/* Submit everything recorded so far and wait for it. */
lv_status lv_flush(lv_ctx *ctx);

/* ---- tensors -------------------------------------------------------------------------- */

typedef struct lv_alloc lv_alloc;

/* A tensor is a typed, shaped, contiguous (row-major) range of one device allocation.
 * Tensors are small values: views made with lv_tensor_view share the allocation and must
 * not be freed; only the tensor returned by lv_tensor_create owns it. */
typedef struct lv_tensor {
    lv_alloc *alloc;
    uint64_t offset;   /* bytes from the start of the allocation */
    lv_dtype dtype;
    int ndim;
    int64_t shape[LV_MAX_DIMS];
    int is_view;
} lv_tensor;

lv_status lv_tensor_create(lv_ctx *ctx, lv_dtype dtype, int ndim, const int64_t *shape,
                           lv_tensor *out);
void lv_tensor_free(lv_ctx *ctx, lv_tensor *t);
int64_t lv_tensor_numel(const lv_tensor *t);
uint64_t lv_tensor_nbytes(const lv_tensor *t);
/* A view of `ndim`/`shape` starting `elem_offset` elements into t (must stay inside t; for
 * the block-quantized q8_0 and q4_k, whose device tensors hold rows of whole blocks as GGUF
 * does, a whole number of blocks). */
lv_tensor lv_tensor_view(const lv_tensor *t, int64_t elem_offset, int ndim, const int64_t *shape);
/* Rows [row0, row0 + nrows) of t along its first dimension. */
lv_tensor lv_tensor_rows(const lv_tensor *t, int64_t row0, int64_t nrows);
int lv_tensor_same_shape(const lv_tensor *a, const lv_tensor *b);
/* "[2, 3, 4] f32" into buf. */
const char *lv_tensor_describe(const lv_tensor *t, char *buf, size_t size);

/* Copy host bytes in the tensor's dtype to the device (nbytes must equal the tensor size),
 * and back. Both wait for recorded work that touches the tensor. */
lv_status lv_tensor_write(lv_ctx *ctx, const lv_tensor *t, const void *src, uint64_t nbytes);
lv_status lv_tensor_read(lv_ctx *ctx, const lv_tensor *t, void *dst, uint64_t nbytes);
/* Recorded in the stream: set every byte to zero / copy src into dst (same byte size). */
lv_status lv_tensor_zero(lv_ctx *ctx, const lv_tensor *t);
lv_status lv_tensor_copy(lv_ctx *ctx, const lv_tensor *dst, const lv_tensor *src);

/* A tensor of `dtype` (f32, f16 or bf16) and shape [ndim]shape from a weight of a model file
 * (f32, f16 or bf16, as many elements in any shape), converted on the host when the dtypes
 * differ (to nearest even). On error nothing is left allocated; the message names the
 * weight. */
lv_status lv_tensor_from_weight(lv_ctx *ctx, const lv_weight *w, lv_dtype dtype, int ndim, const int64_t *shape,
                                lv_tensor *out);

/* Element i of an f32, f16 or bf16 weight as a float (the file's mapping may be unaligned). */
float lv_weight_float(const lv_weight *w, size_t i);

/* Host-side half conversions used by loaders, tests and references. */
float lv_half_to_float(uint16_t h);
uint16_t lv_float_to_half(float f);
float lv_bf16_to_float(uint16_t b);
uint16_t lv_float_to_bf16(float f); /* round to nearest even */

/* The LONGVK_* environment variables (every one, what it changes and its default:
 * engine/README.md, "Environment variables"); every reader in longvk goes through these.
 * lv_env_str: the value, NULL when unset or empty. lv_env_flag: set, not empty and not "0".
 * lv_env_u64: a decimal number in [lo, hi], else (unset, empty, signed, not a number, out of
 * range) fallback. */
const char *lv_env_str(const char *name);
bool lv_env_flag(const char *name);
uint64_t lv_env_u64(const char *name, uint64_t fallback, uint64_t lo, uint64_t hi);

#ifdef __cplusplus
}
#endif
#endif
