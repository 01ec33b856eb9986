/* The op table (ops.def) turned into Vulkan objects: one descriptor-set layout and
 * pipeline layout per op (its binding kinds, 128 bytes of push constants),
 * shader modules from the embedded SPIR-V, and a pipeline per (op, specialization
 * constants), created on first use. */
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"
#include "spirv_registry.h"

typedef struct lv_op_desc {
    const char *name;
    const char *shader;
    const char *kinds; /* one letter per binding: 's' storage buffer, 't' texel buffer */
} lv_op_desc;

static const lv_op_desc lv_ops[LV_OP_COUNT] = {
#define LV_OP(name, shader, kinds) {#name, shader, kinds},
#include "ops.def"
#undef LV_OP
};

const char *lv_op_name(lv_op op) { return op < LV_OP_COUNT ? lv_ops[op].shader : "?"; }
uint32_t lv_op_bindings(lv_op op) { return op < LV_OP_COUNT ? (uint32_t)strlen(lv_ops[op].kinds) : 0; }
char lv_op_binding_kind(lv_op op, uint32_t i) {
    return op < LV_OP_COUNT && i < lv_op_bindings(op) ? lv_ops[op].kinds[i] : 0;
}

lv_status lv_pipelines_init(lv_ctx *ctx) {
    for (int op = 0; op < LV_OP_COUNT; op++) {
        uint32_t n = lv_op_bindings((lv_op)op);
        VkDescriptorSetLayoutBinding b[LV_MAX_BINDINGS];
        if (n > LV_MAX_BINDINGS)
            return lv_error(LV_ERR_INVALID, "op %s has %u bindings (at most %d)", lv_ops[op].name, n,
                            LV_MAX_BINDINGS);
        for (uint32_t i = 0; i < n; i++)
            b[i] = (VkDescriptorSetLayoutBinding){
                .binding = i,
                .descriptorType = lv_ops[op].kinds[i] == 't' ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                             : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                .descriptorCount = 1,
                .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
            };
        VkDescriptorSetLayoutCreateInfo info = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            .bindingCount = n,
            .pBindings = b,
        };
        LV_VK(vkCreateDescriptorSetLayout(ctx->device, &info, NULL, &ctx->set_layouts[op]));
        VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = LV_PUSH_MAX};
        VkPipelineLayoutCreateInfo layout = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
            .setLayoutCount = 1,
            .pSetLayouts = &ctx->set_layouts[op],
            .pushConstantRangeCount = 1,
            .pPushConstantRanges = &push,
        };
        LV_VK(vkCreatePipelineLayout(ctx->device, &layout, NULL, &ctx->pipeline_layouts[op]));
    }
    VkPipelineCacheCreateInfo cache = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    LV_VK(vkCreatePipelineCache(ctx->device, &cache, NULL, &ctx->pipeline_cache));
    return LV_OK;
}

void lv_pipelines_destroy(lv_ctx *ctx) {
    for (lv_pipeline *p = ctx->pipelines, *next; p; p = next) {
        next = p->next;
        vkDestroyPipeline(ctx->device, p->pipeline, NULL);
        free(p);
    }
    ctx->pipelines = NULL;
    for (int i = 0; i < LV_OP_COUNT; i++)
        if (ctx->modules[i]) vkDestroyShaderModule(ctx->device, ctx->modules[i], NULL);
    for (int op = 0; op < LV_OP_COUNT; op++) {
        if (ctx->pipeline_layouts[op]) vkDestroyPipelineLayout(ctx->device, ctx->pipeline_layouts[op], NULL);
        if (ctx->set_layouts[op]) vkDestroyDescriptorSetLayout(ctx->device, ctx->set_layouts[op], NULL);
    }
    if (ctx->pipeline_cache) vkDestroyPipelineCache(ctx->device, ctx->pipeline_cache, NULL);
}

bool lv_op_available(const lv_ctx *ctx, lv_op op) {
    (void)ctx;
    for (size_t i = 0; i < lv_spirv_module_count; i++)
        if (strcmp(lv_spirv_modules[i].name, lv_ops[op].shader) == 0) return true;
    return false;
}

static lv_status shader_module(lv_ctx *ctx, lv_op op, VkShaderModule *out) {
    if (ctx->modules[op]) {
        *out = ctx->modules[op];
        return LV_OK;
    }
    const lv_spirv_module *m = NULL;
    for (size_t i = 0; i < lv_spirv_module_count; i++)
        if (strcmp(lv_spirv_modules[i].name, lv_ops[op].shader) == 0) m = &lv_spirv_modules[i];
    if (!m)
        return lv_error(LV_ERR_UNSUPPORTED, "op %s: shader '%s' is not embedded in this build",
                        lv_ops[op].name, lv_ops[op].shader);
    VkShaderModuleCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = m->size,
        .pCode = m->code,
    };
    LV_VK(vkCreateShaderModule(ctx->device, &info, NULL, &ctx->modules[op]));
    *out = ctx->modules[op];
    return LV_OK;
}

lv_status lv_pipeline_get(lv_ctx *ctx, lv_op op, const uint32_t *spec, uint32_t nspec,
                          lv_pipeline **out) {
    if (nspec > LV_MAX_SPEC) return lv_error(LV_ERR_INVALID, "too many specialization constants");
    for (lv_pipeline *p = ctx->pipelines; p; p = p->next)
        if (p->op == op && p->nspec == nspec && (nspec == 0 || memcmp(p->spec, spec, nspec * sizeof *spec) == 0)) {
            *out = p;
            return LV_OK;
        }
    VkShaderModule module = VK_NULL_HANDLE;
    LV_TRY(shader_module(ctx, op, &module));
    VkSpecializationMapEntry entries[LV_MAX_SPEC];
    for (uint32_t i = 0; i < nspec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = i * 4, .size = 4};
    VkSpecializationInfo spec_info = {
        .mapEntryCount = nspec,
        .pMapEntries = entries,
        .dataSize = nspec * 4,
        .pData = spec,
    };
    VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = module,
            .pName = "main",
            .pSpecializationInfo = nspec ? &spec_info : NULL,
        },
        .layout = ctx->pipeline_layouts[op],
    };
    lv_pipeline *p = calloc(1, sizeof *p);
    if (!p) return lv_error(LV_ERR_NOMEM, "out of host memory");
    VkResult r = vkCreateComputePipelines(ctx->device, ctx->pipeline_cache, 1, &info, NULL, &p->pipeline);
    if (r != VK_SUCCESS) {
        free(p);
        lv_vk_check(r, "vkCreateComputePipelines");
        return lv_error_prefix(LV_ERR_DEVICE, "op %s", lv_ops[op].name);
    }
    p->op = op;
    p->nspec = nspec;
    if (nspec) memcpy(p->spec, spec, nspec * sizeof *spec);
    p->next = ctx->pipelines;
    ctx->pipelines = p;
    *out = p;
    return LV_OK;
}
