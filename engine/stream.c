/* The command stream: dispatches are recorded into one command buffer until lv_flush()
 * submits it and waits on a fence. A barrier is recorded only where a dispatch reads
 * what an earlier dispatch of the current barrier epoch wrote (or writes what it read or
 * wrote); independent dispatches run without one. With LONGVK_PROFILE=1 a timestamp
 * follows every dispatch and device time is summed per op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"

#define LV_SETS_PER_POOL 1024
#define LV_PROFILE_QUERIES 4096

static lv_status stream_init(lv_ctx *ctx) {
    VkCommandPoolCreateInfo pool = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    LV_VK(vkCreateCommandPool(ctx->device, &pool, NULL, &ctx->command_pool));
    VkCommandBufferAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    LV_VK(vkAllocateCommandBuffers(ctx->device, &alloc, &ctx->cmd));
    VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    LV_VK(vkCreateFence(ctx->device, &fence, NULL, &ctx->fence));
    VkDescriptorPoolSize sizes[2] = {
        {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = LV_SETS_PER_POOL * LV_MAX_BINDINGS},
        {.type = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, .descriptorCount = LV_SETS_PER_POOL * LV_MAX_BINDINGS},
    };
    VkDescriptorPoolCreateInfo dp = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = LV_SETS_PER_POOL,
        .poolSizeCount = 2,
        .pPoolSizes = sizes,
    };
    LV_VK(vkCreateDescriptorPool(ctx->device, &dp, NULL, &ctx->descriptor_pool));
    if (ctx->profile) {
        VkQueryPoolCreateInfo q = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = LV_PROFILE_QUERIES,
        };
        LV_VK(vkCreateQueryPool(ctx->device, &q, NULL, &ctx->query_pool));
        ctx->profile_entries = calloc(LV_PROFILE_QUERIES, sizeof *ctx->profile_entries);
        if (!ctx->profile_entries) return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (ctx->epoch == 0) ctx->epoch = 1;
    return LV_OK;
}

lv_status lv_stream_begin(lv_ctx *ctx) {
    if (ctx->recording) return LV_OK;
    if (!ctx->command_pool) LV_TRY(stream_init(ctx));
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    LV_VK(vkBeginCommandBuffer(ctx->cmd, &begin));
    ctx->recording = true;
    ctx->epoch++;
    ctx->stream_first_epoch = ctx->epoch;
    ctx->dispatches_recorded = 0;
    ctx->queries_used = 0;
    if (ctx->profile) {
        vkCmdResetQueryPool(ctx->cmd, ctx->query_pool, 0, LV_PROFILE_QUERIES);
        vkCmdWriteTimestamp(ctx->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, ctx->query_pool, 0);
        ctx->queries_used = 1;
    }
    return LV_OK;
}

static void record_barrier(lv_ctx *ctx) {
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(ctx->cmd, stages, stages, 0, 1, &barrier, 0, NULL, 0, NULL);
    ctx->epoch++;
}

static bool needs_barrier(const lv_ctx *ctx, const lv_alloc *a, bool write) {
    return a->write_epoch == ctx->epoch || (write && a->read_epoch == ctx->epoch);
}

static void mark(const lv_ctx *ctx, lv_alloc *a, bool write) {
    if (write) a->write_epoch = ctx->epoch;
    else a->read_epoch = ctx->epoch;
}

void lv_stream_track(lv_ctx *ctx, lv_alloc *a, bool write) {
    if (needs_barrier(ctx, a, write)) record_barrier(ctx);
    mark(ctx, a, write);
}

bool lv_stream_touches(const lv_ctx *ctx, const lv_alloc *a) {
    return ctx->recording &&
           (a->write_epoch >= ctx->stream_first_epoch || a->read_epoch >= ctx->stream_first_epoch);
}

static void collect_profile(lv_ctx *ctx) {
    if (!ctx->profile || ctx->queries_used < 2) return;
    uint64_t *ts = calloc(ctx->queries_used, sizeof *ts);
    if (!ts) return;
    if (vkGetQueryPoolResults(ctx->device, ctx->query_pool, 0, ctx->queries_used,
                              ctx->queries_used * sizeof *ts, ts, sizeof *ts,
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
        double ns_per_tick = ctx->limits.timestampPeriod;
        for (uint32_t i = 1; i < ctx->queries_used; i++) {
            lv_profile_entry *e = &ctx->profile_entries[i];
            ctx->op_time_ms[e->op] += (double)(ts[i] - ts[i - 1]) * ns_per_tick * 1e-6;
            ctx->op_calls[e->op]++;
        }
    }
    free(ts);
}

lv_status lv_flush(lv_ctx *ctx) {
    if (!ctx->recording) return LV_OK;
    ctx->recording = false;
    LV_VK(vkEndCommandBuffer(ctx->cmd));
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &ctx->cmd,
    };
    LV_VK(vkQueueSubmit(ctx->queue, 1, &submit, ctx->fence));
    LV_VK(vkWaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE, UINT64_MAX));
    LV_VK(vkResetFences(ctx->device, 1, &ctx->fence));
    lv_memory_release_deferred(ctx);
    collect_profile(ctx);
    LV_VK(vkResetDescriptorPool(ctx->device, ctx->descriptor_pool, 0));
    ctx->descriptor_sets_used = 0;
    LV_VK(vkResetCommandBuffer(ctx->cmd, 0));
    ctx->epoch++;
    return LV_OK;
}

/* A texel binding sees the whole memory block through its R32G32B32A32_UINT view, so the
 * tensor's element offset counts from the block's start. */
/* What a binding's elem_offset counts: elements, or bytes for the block-quantized dtypes
 * (q8_0's 34-byte blocks do not divide a word; the kernels address their blocks by byte) */
static uint64_t binding_unit(lv_dtype dtype) { return lv_dtype_quantized(dtype) ? 1 : lv_dtype_size(dtype); }

static lv_status prepare_texel(lv_ctx *ctx, lv_op op, uint32_t i, lv_binding *b) {
    const lv_tensor *t = b->tensor;
    uint64_t start = t->alloc->offset + t->offset;
    uint64_t end = start + lv_tensor_nbytes(t);
    if (!t->alloc->texels || end > t->alloc->texel_bytes) {
        char d[96];
        return lv_error(LV_ERR_LIMIT,
                        "op %s binding %u: tensor %s ends %llu bytes into its memory block, past "
                        "the %llu bytes a texel buffer covers on '%s' (maxTexelBufferElements "
                        "%u of 16 bytes, or the context's max_texel_bytes)",
                        lv_op_name(op), i, lv_tensor_describe(t, d, sizeof d),
                        (unsigned long long)end, (unsigned long long)t->alloc->texel_bytes,
                        ctx->info.name, ctx->limits.maxTexelBufferElements);
    }
    b->elem_offset = (uint32_t)(start / binding_unit(t->dtype));
    return LV_OK;
}

lv_status lv_bindings_prepare(lv_ctx *ctx, lv_op op, lv_binding *bindings, uint32_t count) {
    if (count != lv_op_bindings(op))
        return lv_error(LV_ERR_INVALID, "op %s takes %u bindings, %u given", lv_op_name(op),
                        lv_op_bindings(op), count);
    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    if (align < 4) align = 4;
    for (uint32_t i = 0; i < count; i++) {
        const lv_tensor *t = bindings[i].tensor;
        if (!t || !t->alloc) return lv_error(LV_ERR_INVALID, "binding %u has no tensor", i);
        if (lv_op_binding_kind(op, i) == 't') {
            LV_TRY(prepare_texel(ctx, op, i, &bindings[i]));
            continue;
        }
        uint64_t start = t->alloc->offset + t->offset;
        uint64_t bound = start / align * align;
        uint64_t shift = start - bound;
        uint64_t range = (shift + lv_tensor_nbytes(t) + 3) / 4 * 4;
        if (range > ctx->max_binding) {
            char d[96];
            return lv_error(LV_ERR_LIMIT,
                            "tensor %s needs a %llu-byte binding but the device allows %llu "
                            "(maxStorageBufferRange of '%s'); the op must split its work",
                            lv_tensor_describe(t, d, sizeof d), (unsigned long long)range,
                            (unsigned long long)ctx->max_binding, ctx->info.name);
        }
        bindings[i].elem_offset = (uint32_t)(shift / binding_unit(t->dtype));
    }
    return LV_OK;
}

void lv_grid_1d(const lv_ctx *ctx, uint64_t groups, uint32_t *gx, uint32_t *gy) {
    uint64_t maxx = ctx->limits.maxComputeWorkGroupCount[0];
    if (groups <= maxx) {
        *gx = (uint32_t)(groups ? groups : 1);
        *gy = 1;
    } else {
        *gx = (uint32_t)maxx;
        *gy = (uint32_t)((groups + maxx - 1) / maxx);
    }
}

lv_status lv_dispatch(lv_ctx *ctx, lv_op op, const uint32_t *spec, uint32_t nspec,
                      const lv_binding *bindings, uint32_t count, const void *push,
                      uint32_t push_size, uint32_t groups_x, uint32_t groups_y,
                      uint32_t groups_z) {
    if (count != lv_op_bindings(op))
        return lv_error(LV_ERR_INVALID, "op %s takes %u bindings, %u given", lv_op_name(op),
                        lv_op_bindings(op), count);
    if (push_size > LV_PUSH_MAX)
        return lv_error(LV_ERR_INVALID, "op %s: %u bytes of push constants (max %d)",
                        lv_op_name(op), push_size, LV_PUSH_MAX);
    for (int d = 0; d < 3; d++) {
        uint32_t g = d == 0 ? groups_x : d == 1 ? groups_y : groups_z;
        if (g > ctx->limits.maxComputeWorkGroupCount[d])
            return lv_error(LV_ERR_LIMIT, "op %s: %u workgroups in dimension %d exceed the "
                            "device's maxComputeWorkGroupCount (%u)", lv_op_name(op), g, d,
                            ctx->limits.maxComputeWorkGroupCount[d]);
    }
    if (groups_x == 0 || groups_y == 0 || groups_z == 0) return LV_OK;
    lv_pipeline *pipeline;
    LV_TRY(lv_pipeline_get(ctx, op, spec, nspec, &pipeline));

    if (ctx->recording && (ctx->descriptor_sets_used == LV_SETS_PER_POOL ||
                           (ctx->profile && ctx->queries_used == LV_PROFILE_QUERIES)))
        LV_TRY(lv_flush(ctx));
    LV_TRY(lv_stream_begin(ctx));

    VkDescriptorSetAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = ctx->descriptor_pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &ctx->set_layouts[op],
    };
    VkDescriptorSet set;
    LV_VK(vkAllocateDescriptorSets(ctx->device, &alloc, &set));
    ctx->descriptor_sets_used++;

    uint64_t align = ctx->limits.minStorageBufferOffsetAlignment;
    if (align < 4) align = 4;
    VkDescriptorBufferInfo infos[LV_MAX_BINDINGS];
    VkWriteDescriptorSet writes[LV_MAX_BINDINGS];
    bool barrier = false;
    for (uint32_t i = 0; i < count; i++) {
        const lv_tensor *t = bindings[i].tensor;
        uint64_t start = t->alloc->offset + t->offset;
        uint64_t bound = start / align * align;
        uint64_t range = (start - bound + lv_tensor_nbytes(t) + 3) / 4 * 4;
        infos[i] = (VkDescriptorBufferInfo){.buffer = t->alloc->buffer, .offset = bound, .range = range};
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[i],
        };
        if (lv_op_binding_kind(op, i) == 't') {
            writes[i].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
            writes[i].pBufferInfo = NULL;
            writes[i].pTexelBufferView = &t->alloc->texels;
        }
        barrier = barrier || needs_barrier(ctx, t->alloc, bindings[i].write);
    }
    vkUpdateDescriptorSets(ctx->device, count, writes, 0, NULL);
    if (barrier) record_barrier(ctx);
    for (uint32_t i = 0; i < count; i++) mark(ctx, bindings[i].tensor->alloc, bindings[i].write);

    VkPipelineLayout layout = ctx->pipeline_layouts[op];
    vkCmdBindPipeline(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
    vkCmdBindDescriptorSets(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
    if (push_size)
        vkCmdPushConstants(ctx->cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    vkCmdDispatch(ctx->cmd, groups_x, groups_y, groups_z);
    ctx->dispatches_recorded++;
    if (ctx->profile) {
        vkCmdWriteTimestamp(ctx->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, ctx->query_pool,
                            ctx->queries_used);
        ctx->profile_entries[ctx->queries_used].op = op;
        ctx->profile_entries[ctx->queries_used].query = ctx->queries_used;
        ctx->queries_used++;
    }
    return LV_OK;
}
