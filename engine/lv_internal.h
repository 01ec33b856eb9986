/* Engine internals shared by the engine sources and the op wrappers. Not installed. */
#ifndef LONGVK_INTERNAL_H
#define LONGVK_INTERNAL_H

#include <stdbool.h>
#include <vulkan/vulkan.h>

#include "vk_coopmat.h" /* VK_KHR_cooperative_matrix where the headers predate it */

#include "longvk/engine.h"

typedef enum lv_op {
#define LV_OP(name, shader, kinds) LV_OP_##name,
#include "ops.def"
#undef LV_OP
    LV_OP_COUNT
} lv_op;

#define LV_MAX_BINDINGS 8
#define LV_MAX_SPEC 16
#define LV_PUSH_MAX 128

/* One device memory block; tensors are suballocated from blocks (memory.c). */
typedef struct lv_block lv_block;

struct lv_alloc {
    lv_block *block;
    VkBuffer buffer;     /* the block's buffer */
    VkBufferView texels; /* the block's R32G32B32A32_UINT view for texel bindings, or NULL */
    uint64_t texel_bytes; /* bytes of the block that view covers */
    uint64_t offset;     /* offset of this allocation in the block */
    uint64_t size;       /* bytes, rounded up to the offset alignment */
    void *mapped;        /* host pointer when the block is host-visible, else NULL */
    /* barrier tracking (stream.c): the barrier epoch in which the allocation was last
     * written / read by recorded work */
    uint64_t write_epoch;
    uint64_t read_epoch;
    struct lv_alloc *next_deferred; /* freed while recorded work still uses it */
};

/* A pipeline for one op and one set of specialization constants (pipeline.c). */
typedef struct lv_pipeline {
    lv_op op;
    uint32_t spec[LV_MAX_SPEC];
    uint32_t nspec;
    VkPipeline pipeline;
    struct lv_pipeline *next;
} lv_pipeline;

typedef struct lv_profile_entry {
    lv_op op;
    uint32_t query;     /* timestamp index written after the dispatch */
} lv_profile_entry;

struct lv_ctx {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    lv_device_info info;
    VkPhysicalDeviceLimits limits;
    VkPhysicalDeviceMemoryProperties memory_props;
    bool unified_memory;    /* tensors live in host-visible memory: no staging */
    uint64_t max_binding;
    uint64_t max_texel_bytes; /* how far into a block texel bindings reach (memory.c) */
    bool validation;
    uint64_t validation_messages;
    lv_precision precision;  /* never AUTO */
    bool coopmat;            /* VK_KHR_cooperative_matrix enabled on the device */

    /* memory.c */
    lv_tensor scratch;           /* lv_ctx_scratch's buffer (none until an op asks) */
    lv_block *blocks;
    uint64_t memory_in_use, memory_peak;
    lv_alloc *deferred_frees;    /* released after the next lv_flush */
    VkBuffer staging;
    VkDeviceMemory staging_memory;
    void *staging_mapped;
    uint64_t staging_size;

    /* pipeline.c */
    VkDescriptorSetLayout set_layouts[LV_OP_COUNT]; /* by op: its binding kinds */
    VkPipelineLayout pipeline_layouts[LV_OP_COUNT];
    VkShaderModule modules[LV_OP_COUNT];
    lv_pipeline *pipelines;
    VkPipelineCache pipeline_cache;

    /* stream.c */
    VkCommandPool command_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool descriptor_pool;
    uint32_t descriptor_sets_used;
    bool recording;
    uint64_t epoch;              /* barrier epoch; 0 is never current */
    uint64_t stream_first_epoch; /* epoch at which the recording began */
    uint32_t dispatches_recorded;
    /* profiling (LONGVK_PROFILE=1) */
    bool profile;
    int serial; /* 1 for the process's first context, 2 for the next, ... (the profile names it) */
    VkQueryPool query_pool;
    uint32_t queries_used;
    lv_profile_entry *profile_entries;
    double op_time_ms[LV_OP_COUNT];
    uint64_t op_calls[LV_OP_COUNT];
};

/* A tensor bound to one kernel binding. lv_bindings_prepare fills elem_offset: the
 * tensor's start in elements of its dtype from the start of the bound range (storage
 * bindings start at an offset aligned to minStorageBufferOffsetAlignment, texel bindings
 * at the start of the memory block); shaders add it to every index. For 16-bit dtypes
 * shaders read 32-bit words: element e is half (e & 1) of word e >> 1. For the
 * block-quantized q8_0 and q4_k it counts bytes (shaders/quant.glsl). */
typedef struct lv_binding {
    const lv_tensor *tensor;
    bool write;
    uint32_t elem_offset; /* out */
} lv_binding;

/* Check every binding of `op` against the device's range limits and compute elem_offset. */
lv_status lv_bindings_prepare(lv_ctx *ctx, lv_op op, lv_binding *bindings, uint32_t count);
/* Record one dispatch of `op` with specialization constants `spec` (constant_id 0..n-1),
 * the prepared bindings, push constants and a workgroup grid. Inserts a barrier first if
 * a binding was written (or, for a written binding, read) since the last barrier. */
lv_status lv_dispatch(lv_ctx *ctx, lv_op op, const uint32_t *spec, uint32_t nspec,
                      const lv_binding *bindings, uint32_t count, const void *push,
                      uint32_t push_size, uint32_t groups_x, uint32_t groups_y,
                      uint32_t groups_z);
/* Split a linear count of workgroups over x and y within the device's grid limits;
 * shaders recover the linear index as gl_WorkGroupID.y * gl_NumWorkGroups.x + x. */
void lv_grid_1d(const lv_ctx *ctx, uint64_t groups, uint32_t *gx, uint32_t *gy);

/* device_features.c: info's half-precision and cooperative-matrix fields (fp16, storage16,
 * bf16, coopmat*), from the device and LONGVK_COOPMAT. */
void lv_describe_features(VkInstance instance, VkPhysicalDevice pd, lv_device_info *info);

/* What vkCreateDevice adds for the tensor-core kernels: VK_KHR_cooperative_matrix and the
 * features their SPIR-V declares (fp16 arithmetic, the Vulkan memory model), with the
 * extensions that bring those to a Vulkan 1.1 instance. Self-referencing (pNext): fill it
 * in place and do not copy it. */
typedef struct lv_coopmat_enable {
    VkPhysicalDeviceFeatures2 features;
    VkPhysicalDeviceShaderFloat16Int8Features f16;
    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopmat;
    const char *extensions[3];
    uint32_t extension_count;
} lv_coopmat_enable;

/* device.c: the spec version of an instance layer, 0 when it is not installed. */
uint32_t lv_instance_layer_version(const char *name);

/* When info->coopmat is LV_COOPMAT_ON and the device and the validation layer allow it,
 * fills `e` and returns true; otherwise sets info->coopmat to the reason and returns false. */
bool lv_coopmat_prepare(VkPhysicalDevice pd, bool validation, lv_device_info *info, lv_coopmat_enable *e);

/* stream.c */
lv_status lv_stream_begin(lv_ctx *ctx);
/* Record a barrier before work that touches `a` if recorded work wrote it (or read it,
 * when `write`), then mark the access. Used by transfers recorded in the stream. */
void lv_stream_track(lv_ctx *ctx, lv_alloc *a, bool write);
/* True when recorded, unsubmitted work touches the allocation. */
bool lv_stream_touches(const lv_ctx *ctx, const lv_alloc *a);

/* pipeline.c */
lv_status lv_pipelines_init(lv_ctx *ctx);
void lv_pipelines_destroy(lv_ctx *ctx);
/* pipeline.c: whether the op's shader is embedded in this build (the tensor-core kernels
 * are only with a capable glslang). */
bool lv_op_available(const lv_ctx *ctx, lv_op op);
lv_status lv_pipeline_get(lv_ctx *ctx, lv_op op, const uint32_t *spec, uint32_t nspec,
                          lv_pipeline **out);
const char *lv_op_name(lv_op op);
uint32_t lv_op_bindings(lv_op op);
/* The kind letter of binding i of op (ops.def): 's' storage buffer, 't' texel buffer. */
char lv_op_binding_kind(lv_op op, uint32_t i);

/* memory.c */
lv_status lv_memory_init(lv_ctx *ctx);
void lv_memory_destroy(lv_ctx *ctx);
lv_status lv_alloc_create(lv_ctx *ctx, uint64_t size, lv_alloc **out);
void lv_alloc_free(lv_ctx *ctx, lv_alloc *a);
/* Release allocations freed while recorded work used them (after that work has run). */
void lv_memory_release_deferred(lv_ctx *ctx);
/* A view of n elements of dtype in the context's scratch buffer, for an op's temporaries
 * (the VAE convolution's columns): grown on demand and kept for the next op, so that
 * temporaries neither allocate per call nor wait for a flush to be freed. One op uses it
 * at a time; the stream's barriers order one use after the other. */
lv_status lv_ctx_scratch(lv_ctx *ctx, lv_dtype dtype, int64_t n, lv_tensor *out);
lv_status lv_alloc_upload(lv_ctx *ctx, lv_alloc *a, uint64_t offset, const void *src,
                          uint64_t size);
lv_status lv_alloc_download(lv_ctx *ctx, lv_alloc *a, uint64_t offset, void *dst,
                            uint64_t size);

/* Vulkan result to status with a message naming the call. */
lv_status lv_vk_check(VkResult r, const char *what);
#define LV_VK(call) LV_TRY(lv_vk_check((call), #call))

#endif
