/* Device memory: large blocks, each with one VkBuffer (and one texel view of it for the
 * ops' read-only texel bindings, ops.def), from which tensors are suballocated first-fit. On unified-memory devices (integrated GPUs, CPU devices such as
 * lavapipe) blocks are host-visible and tensors are read and written directly; elsewhere
 * blocks are device-local and transfers go through a staging buffer. */
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"

#define LV_BLOCK_SIZE (256ull << 20)
#define LV_STAGING_SIZE (16ull << 20)

typedef struct lv_range {
    uint64_t offset, size;
} lv_range;

struct lv_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    VkBufferView texels;  /* R32G32B32A32_UINT over the first texel_bytes, or NULL */
    uint64_t texel_bytes;
    uint64_t size;
    void *mapped;
    lv_range *free_ranges; /* sorted by offset, never adjacent */
    uint32_t nfree, capfree;
    struct lv_block *next;
};

static int find_memory_type(const lv_ctx *ctx, uint32_t type_bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < ctx->memory_props.memoryTypeCount; i++)
        if ((type_bits & (1u << i)) &&
            (ctx->memory_props.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

static lv_status create_buffer(lv_ctx *ctx, uint64_t size, bool host_visible, VkBuffer *buffer,
                               VkDeviceMemory *memory, void **mapped) {
    VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    LV_VK(vkCreateBuffer(ctx->device, &info, NULL, buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, *buffer, &req);
    VkMemoryPropertyFlags want =
        host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    int type = -1;
    if (host_visible && ctx->unified_memory)
        type = find_memory_type(ctx, req.memoryTypeBits, want | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0) type = find_memory_type(ctx, req.memoryTypeBits, want);
    if (type < 0) {
        vkDestroyBuffer(ctx->device, *buffer, NULL);
        *buffer = VK_NULL_HANDLE;
        return lv_error(LV_ERR_DEVICE, "device '%s' has no suitable memory type", ctx->info.name);
    }
    VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    VkResult r = vkAllocateMemory(ctx->device, &alloc, NULL, memory);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(ctx->device, *buffer, NULL);
        *buffer = VK_NULL_HANDLE;
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return lv_error(LV_ERR_NOMEM,
                            "cannot allocate %llu MiB of device memory on '%s' (%llu MiB in use "
                            "by tensors)",
                            (unsigned long long)(size >> 20), ctx->info.name,
                            (unsigned long long)(ctx->memory_in_use >> 20));
        return lv_vk_check(r, "vkAllocateMemory");
    }
    LV_VK(vkBindBufferMemory(ctx->device, *buffer, *memory, 0));
    *mapped = NULL;
    if (host_visible) LV_VK(vkMapMemory(ctx->device, *memory, 0, VK_WHOLE_SIZE, 0, mapped));
    return LV_OK;
}

lv_status lv_memory_init(lv_ctx *ctx) {
    /* Unified memory: the device's memory is the host's, so staging would only copy twice. */
    ctx->unified_memory = false;
    if (ctx->info.type == LV_DEVICE_CPU || ctx->info.type == LV_DEVICE_INTEGRATED) {
        VkMemoryPropertyFlags uma = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        ctx->unified_memory = find_memory_type(ctx, ~0u, uma) >= 0;
    }
    if (!ctx->unified_memory) {
        VkDeviceMemory mem;
        LV_TRY(create_buffer(ctx, LV_STAGING_SIZE, true, &ctx->staging, &mem, &ctx->staging_mapped));
        ctx->staging_memory = mem;
        ctx->staging_size = LV_STAGING_SIZE;
    }
    return LV_OK;
}

static void block_destroy(lv_ctx *ctx, lv_block *b) {
    if (b->texels) vkDestroyBufferView(ctx->device, b->texels, NULL);
    if (b->buffer) vkDestroyBuffer(ctx->device, b->buffer, NULL);
    if (b->memory) vkFreeMemory(ctx->device, b->memory, NULL);
    free(b->free_ranges);
    free(b);
}

lv_status lv_ctx_scratch(lv_ctx *ctx, lv_dtype dtype, int64_t n, lv_tensor *out) {
    const uint64_t bytes = (uint64_t)n * lv_dtype_size(dtype);
    if (n < 1) return lv_error(LV_ERR_INVALID, "scratch of %lld elements", (long long)n);
    if (!lv_dtype_size(dtype)) return lv_error(LV_ERR_UNSUPPORTED, "no scratch of dtype %s", lv_dtype_name(dtype));
    if (!ctx->scratch.alloc || lv_tensor_nbytes(&ctx->scratch) < bytes) {
        lv_tensor_free(ctx, &ctx->scratch); /* deferred while recorded work reads it */
        int64_t words = (int64_t)((bytes + 3) / 4);
        lv_status s = lv_tensor_create(ctx, LV_F32, 1, &words, &ctx->scratch);
        if (s != LV_OK) return lv_error_prefix(s, "scratch of %llu bytes", (unsigned long long)bytes);
    }
    lv_tensor v = ctx->scratch;
    v.dtype = dtype;
    *out = lv_tensor_view(&v, 0, 1, &n);
    return LV_OK;
}

void lv_memory_destroy(lv_ctx *ctx) {
    lv_tensor_free(ctx, &ctx->scratch);
    for (lv_block *b = ctx->blocks, *next; b; b = next) {
        next = b->next;
        block_destroy(ctx, b);
    }
    ctx->blocks = NULL;
    if (ctx->staging) vkDestroyBuffer(ctx->device, ctx->staging, NULL);
    if (ctx->staging_memory) vkFreeMemory(ctx->device, ctx->staging_memory, NULL);
}

static uint64_t alignment(const lv_ctx *ctx) {
    uint64_t a = ctx->limits.minStorageBufferOffsetAlignment;
    return a < 16 ? 16 : a;
}

uint64_t lv_ctx_alloc_alignment(const lv_ctx *ctx) { return alignment(ctx); }

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* The view texel bindings read through: as much of the block as maxTexelBufferElements
 * texels of 16 bytes cover (all of it on lavapipe and desktop GPUs; a tensor past the end
 * gets a clear error from lv_bindings_prepare). None when the device cannot read
 * R32G32B32A32_UINT texel buffers, which the Vulkan spec makes mandatory. */
static lv_status block_texel_view(lv_ctx *ctx, lv_block *b) {
    VkFormatProperties props;
    vkGetPhysicalDeviceFormatProperties(ctx->physical, VK_FORMAT_R32G32B32A32_UINT, &props);
    if (!(props.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT)) return LV_OK;
    uint64_t bytes = b->size / 16 * 16, max = ctx->max_texel_bytes / 16 * 16;
    if (bytes > max) bytes = max;
    if (bytes == 0) return LV_OK;
    VkBufferViewCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = b->buffer,
        .format = VK_FORMAT_R32G32B32A32_UINT,
        .offset = 0,
        .range = bytes,
    };
    LV_VK(vkCreateBufferView(ctx->device, &info, NULL, &b->texels));
    b->texel_bytes = bytes;
    return LV_OK;
}

static lv_status block_create(lv_ctx *ctx, uint64_t size, lv_block **out) {
    lv_block *b = calloc(1, sizeof *b);
    if (!b) return lv_error(LV_ERR_NOMEM, "out of host memory");
    b->size = size;
    lv_status s = create_buffer(ctx, size, ctx->unified_memory, &b->buffer, &b->memory, &b->mapped);
    if (s == LV_OK) s = block_texel_view(ctx, b);
    if (s == LV_OK) {
        b->free_ranges = malloc(4 * sizeof *b->free_ranges);
        if (!b->free_ranges) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    if (s != LV_OK) {
        block_destroy(ctx, b);
        return s;
    }
    b->capfree = 4;
    b->nfree = 1;
    b->free_ranges[0] = (lv_range){0, size};
    b->next = ctx->blocks;
    ctx->blocks = b;
    *out = b;
    return LV_OK;
}

static bool block_take(lv_block *b, uint64_t size, uint64_t align, uint64_t *offset) {
    for (uint32_t i = 0; i < b->nfree; i++) {
        lv_range *r = &b->free_ranges[i];
        uint64_t start = round_up(r->offset, align);
        if (start + size > r->offset + r->size) continue;
        uint64_t end = start + size;
        uint64_t tail = r->offset + r->size - end;
        /* sizes are multiples of the alignment, so free ranges start aligned: no gap */
        if (tail == 0) {
            memmove(r, r + 1, (b->nfree - i - 1) * sizeof *r);
            b->nfree--;
        } else {
            r->offset = end;
            r->size = tail;
        }
        *offset = start;
        return true;
    }
    return false;
}

static lv_status block_give(lv_block *b, uint64_t offset, uint64_t size) {
    uint32_t i = 0;
    while (i < b->nfree && b->free_ranges[i].offset < offset) i++;
    bool merge_prev = i > 0 && b->free_ranges[i - 1].offset + b->free_ranges[i - 1].size == offset;
    bool merge_next = i < b->nfree && offset + size == b->free_ranges[i].offset;
    if (merge_prev && merge_next) {
        b->free_ranges[i - 1].size += size + b->free_ranges[i].size;
        memmove(&b->free_ranges[i], &b->free_ranges[i + 1], (b->nfree - i - 1) * sizeof(lv_range));
        b->nfree--;
    } else if (merge_prev) {
        b->free_ranges[i - 1].size += size;
    } else if (merge_next) {
        b->free_ranges[i].offset = offset;
        b->free_ranges[i].size += size;
    } else {
        if (b->nfree == b->capfree) {
            lv_range *grown = realloc(b->free_ranges, 2 * b->capfree * sizeof *grown);
            if (!grown) return lv_error(LV_ERR_NOMEM, "out of host memory");
            b->free_ranges = grown;
            b->capfree *= 2;
        }
        memmove(&b->free_ranges[i + 1], &b->free_ranges[i], (b->nfree - i) * sizeof(lv_range));
        b->free_ranges[i] = (lv_range){offset, size};
        b->nfree++;
    }
    return LV_OK;
}

lv_status lv_alloc_create(lv_ctx *ctx, uint64_t size, lv_alloc **out) {
    *out = NULL;
    uint64_t align = alignment(ctx);
    size = round_up(size ? size : 1, align);
    uint64_t max_alloc = ctx->info.max_allocation_bytes ? ctx->info.max_allocation_bytes : (1ull << 30);
    if (size > max_alloc)
        return lv_error(LV_ERR_LIMIT,
                        "a tensor of %llu bytes exceeds the device's maxMemoryAllocationSize "
                        "(%llu bytes) on '%s'",
                        (unsigned long long)size, (unsigned long long)max_alloc, ctx->info.name);
    lv_alloc *a = calloc(1, sizeof *a);
    if (!a) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_block *block = NULL;
    uint64_t offset = 0;
    for (lv_block *b = ctx->blocks; b && !block; b = b->next)
        if (block_take(b, size, align, &offset)) block = b;
    if (!block) {
        uint64_t bsize = size > LV_BLOCK_SIZE ? size : LV_BLOCK_SIZE;
        /* smaller blocks where texel buffers reach less far, so that only a tensor larger
         * than that reach can lie beyond it */
        uint64_t texel_reach = ctx->max_texel_bytes / align * align;
        if (bsize > texel_reach && size <= texel_reach) bsize = texel_reach;
        if (bsize > max_alloc) bsize = max_alloc;
        lv_status s = block_create(ctx, bsize, &block);
        if (s != LV_OK) {
            free(a);
            return s;
        }
        block_take(block, size, align, &offset);
    }
    a->block = block;
    a->buffer = block->buffer;
    a->texels = block->texels;
    a->texel_bytes = block->texel_bytes;
    a->offset = offset;
    a->size = size;
    a->mapped = block->mapped ? (char *)block->mapped + offset : NULL;
    ctx->memory_in_use += size;
    if (ctx->memory_in_use > ctx->memory_peak) ctx->memory_peak = ctx->memory_in_use;
    *out = a;
    return LV_OK;
}

static void release(lv_ctx *ctx, lv_alloc *a) {
    block_give(a->block, a->offset, a->size);
    ctx->memory_in_use -= a->size;
    free(a);
}

void lv_alloc_free(lv_ctx *ctx, lv_alloc *a) {
    if (!a) return;
    if (lv_stream_touches(ctx, a)) {
        /* recorded work still uses it: release it when that work has run (lv_flush), so
         * that freeing temporaries never stalls the stream */
        a->next_deferred = ctx->deferred_frees;
        ctx->deferred_frees = a;
        return;
    }
    release(ctx, a);
}

void lv_memory_release_deferred(lv_ctx *ctx) {
    while (ctx->deferred_frees) {
        lv_alloc *a = ctx->deferred_frees;
        ctx->deferred_frees = a->next_deferred;
        release(ctx, a);
    }
}

/* Copy through the staging buffer in chunks, one submit each (device-local memory). */
static lv_status staged_copy(lv_ctx *ctx, lv_alloc *a, uint64_t offset, void *host,
                             uint64_t size, bool upload) {
    for (uint64_t done = 0; done < size;) {
        uint64_t n = size - done < ctx->staging_size ? size - done : ctx->staging_size;
        if (upload) memcpy(ctx->staging_mapped, (const char *)host + done, n);
        LV_TRY(lv_stream_begin(ctx));
        VkBufferCopy region = {
            .srcOffset = upload ? 0 : a->offset + offset + done,
            .dstOffset = upload ? a->offset + offset + done : 0,
            .size = n,
        };
        vkCmdCopyBuffer(ctx->cmd, upload ? ctx->staging : a->buffer,
                        upload ? a->buffer : ctx->staging, 1, &region);
        LV_TRY(lv_flush(ctx));
        if (!upload) memcpy((char *)host + done, ctx->staging_mapped, n);
        done += n;
    }
    return LV_OK;
}

lv_status lv_alloc_upload(lv_ctx *ctx, lv_alloc *a, uint64_t offset, const void *src,
                          uint64_t size) {
    if (offset + size > a->size)
        return lv_error(LV_ERR_INVALID, "upload of %llu bytes at %llu past a %llu-byte tensor",
                        (unsigned long long)size, (unsigned long long)offset,
                        (unsigned long long)a->size);
    if (a->mapped) {
        /* host-visible, coherent memory: recorded work that uses this allocation must run
         * before it changes; work that does not will simply read the new bytes */
        if (lv_stream_touches(ctx, a)) LV_TRY(lv_flush(ctx));
        memcpy((char *)a->mapped + offset, src, size);
        return LV_OK;
    }
    if (ctx->recording) LV_TRY(lv_flush(ctx)); /* keep program order with recorded work */
    return staged_copy(ctx, a, offset, (void *)src, size, true);
}

lv_status lv_alloc_download(lv_ctx *ctx, lv_alloc *a, uint64_t offset, void *dst,
                            uint64_t size) {
    if (offset + size > a->size)
        return lv_error(LV_ERR_INVALID, "download of %llu bytes at %llu past a %llu-byte tensor",
                        (unsigned long long)size, (unsigned long long)offset,
                        (unsigned long long)a->size);
    if (a->mapped) {
        if (lv_stream_touches(ctx, a)) LV_TRY(lv_flush(ctx));
        memcpy(dst, (const char *)a->mapped + offset, size);
        return LV_OK;
    }
    if (ctx->recording) LV_TRY(lv_flush(ctx));
    return staged_copy(ctx, a, offset, dst, size, false);
}
