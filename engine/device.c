/* Vulkan instance, device choice, validation messenger, and the context's lifetime. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lv_internal.h"

#define LV_NO_DEVICE_HINT                                                                       \
    "no Vulkan device found. Install a GPU driver, or Mesa's CPU device with "                \
    "`apt-get install mesa-vulkan-drivers` (lavapipe), then check with `vulkaninfo --summary`"

lv_status lv_vk_check(VkResult r, const char *what) {
    if (r == VK_SUCCESS) return LV_OK;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        return lv_error(LV_ERR_NOMEM, "%s: out of %s memory (VkResult %d)", what,
                        r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host", (int)r);
    return lv_error(LV_ERR_DEVICE, "%s failed (VkResult %d)", what, (int)r);
}

const char *lv_device_type_name(lv_device_type type) {
    switch (type) {
    case LV_DEVICE_DISCRETE: return "discrete";
    case LV_DEVICE_INTEGRATED: return "integrated";
    case LV_DEVICE_VIRTUAL: return "virtual";
    case LV_DEVICE_CPU: return "cpu";
    default: return "other";
    }
}

static lv_device_type map_type(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return LV_DEVICE_DISCRETE;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return LV_DEVICE_INTEGRATED;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return LV_DEVICE_VIRTUAL;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return LV_DEVICE_CPU;
    default: return LV_DEVICE_OTHER;
    }
}

/* discrete > integrated > virtual > CPU > other */
static int type_rank(lv_device_type t) {
    switch (t) {
    case LV_DEVICE_DISCRETE: return 4;
    case LV_DEVICE_INTEGRATED: return 3;
    case LV_DEVICE_VIRTUAL: return 2;
    case LV_DEVICE_CPU: return 1;
    default: return 0;
    }
}

/* Every validation message of every context in this process (tests and the CLI check it). */
static _Atomic unsigned long long validation_messages_total;

uint64_t lv_validation_messages_total(void) { return validation_messages_total; }

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT type,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)type;
    lv_ctx *ctx = user;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)) {
        if (ctx) ctx->validation_messages++;
        validation_messages_total++;
        fprintf(stderr, "longvk: validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

uint32_t lv_instance_layer_version(const char *name) {
    uint32_t n = 0, version = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *props = calloc(n, sizeof *props);
    if (!props) return 0;
    if (vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(props[i].layerName, name) == 0) version = props[i].specVersion;
    free(props);
    return version;
}

static bool instance_extension_available(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS) return false;
    VkExtensionProperties *props = calloc(n ? n : 1, sizeof *props);
    if (!props) return false;
    bool found = false;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(props[i].extensionName, name) == 0) found = true;
    free(props);
    return found;
}

/* Creates the instance; with `ctx` and validation on, also the debug messenger. */
static lv_status create_instance(bool validation, lv_ctx *ctx, VkInstance *out) {
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "longvk",
        .pEngineName = "longvk",
        .apiVersion = VK_API_VERSION_1_1,
    };
    const char *layers[1];
    const char *extensions[2];
    uint32_t nlayers = 0, nextensions = 0;
    VkInstanceCreateFlags flags = 0;
    if (validation) {
        if (!lv_instance_layer_version("VK_LAYER_KHRONOS_validation"))
            return lv_error(LV_ERR_DEVICE,
                            "LONGVK_VALIDATE is set but VK_LAYER_KHRONOS_validation is not "
                            "installed (apt-get install vulkan-validationlayers)");
        layers[nlayers++] = "VK_LAYER_KHRONOS_validation";
        extensions[nextensions++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    /* MoltenVK and other non-conformant drivers are only listed with portability enumeration */
    if (instance_extension_available(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        extensions[nextensions++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation_message,
        .pUserData = ctx,
    };
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation ? &messenger_info : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = nlayers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = nextensions,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateInstance(&info, NULL, out);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        return lv_error(LV_ERR_DEVICE, LV_NO_DEVICE_HINT);
    LV_VK(r);
    if (validation && ctx) {
        PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                *out, "vkCreateDebugUtilsMessengerEXT");
        if (!create_messenger) return lv_error(LV_ERR_DEVICE, "vkCreateDebugUtilsMessengerEXT missing");
        LV_VK(create_messenger(*out, &messenger_info, NULL, &ctx->messenger));
    }
    return LV_OK;
}

static void describe_device(VkInstance instance, VkPhysicalDevice pd, int index, lv_device_info *info,
                            VkPhysicalDeviceLimits *limits_out) {
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties maint3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &subgroup};
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &maint3};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &driver};
    vkGetPhysicalDeviceProperties2(pd, &props);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);

    memset(info, 0, sizeof *info);
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", props.properties.deviceName);
    info->type = map_type(props.properties.deviceType);
    snprintf(info->driver, sizeof info->driver, "%.100s %.100s", driver.driverName, driver.driverInfo);
    info->vendor_id = props.properties.vendorID;
    for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
        if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            mem.memoryHeaps[i].size > info->device_local_bytes)
            info->device_local_bytes = mem.memoryHeaps[i].size;
    info->subgroup_size = subgroup.subgroupSize;
    lv_describe_features(instance, pd, info); /* half precision, cooperative matrix */
    info->max_storage_buffer_range = props.properties.limits.maxStorageBufferRange;
    info->max_texel_buffer_bytes = (uint64_t)props.properties.limits.maxTexelBufferElements * 16;
    info->max_allocation_bytes = maint3.maxMemoryAllocationSize;
    info->max_workgroup_invocations = props.properties.limits.maxComputeWorkGroupInvocations;
    info->max_shared_memory_bytes = props.properties.limits.maxComputeSharedMemorySize;
    if (limits_out) *limits_out = props.properties.limits;
}

static lv_status enumerate(VkInstance instance, VkPhysicalDevice **out, uint32_t *count) {
    *out = NULL;
    *count = 0;
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return lv_vk_check(r, "vkEnumeratePhysicalDevices");
    if (n == 0) return lv_error(LV_ERR_DEVICE, LV_NO_DEVICE_HINT);
    *out = calloc(n, sizeof **out);
    if (!*out) return lv_error(LV_ERR_NOMEM, "out of host memory listing devices");
    r = vkEnumeratePhysicalDevices(instance, &n, *out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(*out);
        *out = NULL;
        return lv_vk_check(r, "vkEnumeratePhysicalDevices");
    }
    *count = n;
    return LV_OK;
}

lv_status lv_list_devices(lv_device_info *out, int max, int *count) {
    VkInstance instance;
    LV_TRY(create_instance(false, NULL, &instance));
    VkPhysicalDevice *pds;
    uint32_t n;
    lv_status s = enumerate(instance, &pds, &n);
    if (s == LV_OK) {
        for (uint32_t i = 0; i < n && out && (int)i < max; i++) describe_device(instance, pds[i], (int)i, &out[i], NULL);
        *count = (int)n;
        free(pds);
    }
    vkDestroyInstance(instance, NULL);
    return s;
}

void lv_ctx_options_default(lv_ctx_options *opt) {
    opt->device_index = -1;
    opt->validation = -1;
    opt->profile = -1;
    opt->max_binding_bytes = 0;
    opt->max_texel_bytes = 0;
    opt->cpu_threads = -1;
    opt->precision = LV_PRECISION_AUTO;
}

/* LV_PRECISION_AUTO: LONGVK_PRECISION, else f32 (see lv_ctx_options.precision). */
lv_status lv_precision_resolve(int requested, lv_precision *out) {
    if (requested == LV_PRECISION_F32 || requested == LV_PRECISION_F16 || requested == LV_PRECISION_BF16) {
        *out = (lv_precision)requested;
        return LV_OK;
    }
    if (requested != LV_PRECISION_AUTO)
        return lv_error(LV_ERR_INVALID, "lv_ctx_options.precision %d: LV_PRECISION_AUTO, _F32, _F16 or _BF16", requested);
    const char *env = lv_env_str("LONGVK_PRECISION");
    *out = LV_PRECISION_F32;
    if (!env || strcmp(env, "f32") == 0) return LV_OK;
    if (strcmp(env, "f16") == 0 || strcmp(env, "bf16") == 0) {
        *out = env[0] == 'f' ? LV_PRECISION_F16 : LV_PRECISION_BF16;
        return LV_OK;
    }
    return lv_error(LV_ERR_INVALID, "LONGVK_PRECISION='%s': f32, f16 or bf16", env);
}

lv_precision lv_ctx_precision(const lv_ctx *ctx) { return ctx->precision; }
bool lv_ctx_coopmat(const lv_ctx *ctx) { return ctx->coopmat; }

static lv_status pick_device(lv_ctx *ctx, int requested) {
    VkPhysicalDevice *pds;
    uint32_t n;
    LV_TRY(enumerate(ctx->instance, &pds, &n));
    int chosen = -1;
    if (requested >= 0) {
        if ((uint32_t)requested >= n) {
            free(pds);
            return lv_error(LV_ERR_INVALID,
                            "device %d requested but only %u Vulkan device(s) exist "
                            "(see `longvk devices`)", requested, n);
        }
        chosen = requested;
    } else {
        int best_rank = -1;
        for (uint32_t i = 0; i < n; i++) {
            lv_device_info info;
            describe_device(ctx->instance, pds[i], (int)i, &info, NULL);
            if (type_rank(info.type) > best_rank) {
                best_rank = type_rank(info.type);
                chosen = (int)i;
            }
        }
    }
    ctx->physical = pds[chosen];
    free(pds);
    describe_device(ctx->instance, ctx->physical, chosen, &ctx->info, &ctx->limits);
    vkGetPhysicalDeviceMemoryProperties(ctx->physical, &ctx->memory_props);
    ctx->info.timestamp_valid_bits = 0;
    return LV_OK;
}

static lv_status create_device(lv_ctx *ctx) {
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return lv_error(LV_ERR_NOMEM, "out of host memory");
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical, &nq, qf);
    int family = -1;
    /* prefer a compute queue family; any compute-capable one will do */
    for (uint32_t i = 0; i < nq && family < 0; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = (int)i;
    if (family >= 0) ctx->info.timestamp_valid_bits = qf[family].timestampValidBits;
    free(qf);
    if (family < 0)
        return lv_error(LV_ERR_DEVICE, "device '%s' has no compute queue", ctx->info.name);
    ctx->queue_family = (uint32_t)family;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = ctx->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue_info,
    };
    /* the tensor cores, when offered and usable; every other context enables nothing */
    lv_coopmat_enable coopmat;
    ctx->coopmat = lv_coopmat_prepare(ctx->physical, ctx->validation, &ctx->info, &coopmat);
    if (ctx->coopmat) {
        info.pNext = &coopmat.features;
        info.enabledExtensionCount = coopmat.extension_count;
        info.ppEnabledExtensionNames = coopmat.extensions;
    }
    LV_VK(vkCreateDevice(ctx->physical, &info, NULL, &ctx->device));
    vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);
    return LV_OK;
}

lv_status lv_ctx_create(const lv_ctx_options *opt_in, lv_ctx **out) {
    lv_ctx_options opt;
    if (opt_in) opt = *opt_in;
    else lv_ctx_options_default(&opt);
    *out = NULL;

    int device_index = opt.device_index;
    if (device_index < 0) {
        const char *env = lv_env_str("LONGVK_DEVICE");
        if (env) {
            char *end;
            long v = strtol(env, &end, 10);
            if (*end || v < 0)
                return lv_error(LV_ERR_INVALID, "LONGVK_DEVICE='%s' is not a device index", env);
            device_index = (int)v;
        }
    }
    lv_precision precision;
    LV_TRY(lv_precision_resolve(opt.precision, &precision));
    lv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return lv_error(LV_ERR_NOMEM, "out of host memory");
    ctx->precision = precision;
    ctx->validation = opt.validation < 0 ? lv_env_flag("LONGVK_VALIDATE") : opt.validation != 0;
    ctx->profile = opt.profile < 0 ? lv_env_flag("LONGVK_PROFILE") : opt.profile != 0;
    static atomic_int contexts_made;
    ctx->serial = atomic_fetch_add(&contexts_made, 1) + 1;

    /* lavapipe sizes its compute thread pool from LP_NUM_THREADS when the instance
     * enumerates its devices; set it for that moment only, so that other contexts of the
     * process keep their own choice (the user's LP_NUM_THREADS wins) */
    bool threads_set = false;
    if (opt.cpu_threads >= 0 && !getenv("LP_NUM_THREADS")) {
        char n[16];
        snprintf(n, sizeof n, "%d", opt.cpu_threads);
        threads_set = setenv("LP_NUM_THREADS", n, 1) == 0;
    }
    lv_status s = create_instance(ctx->validation, ctx, &ctx->instance);
    if (s == LV_OK) s = pick_device(ctx, device_index);
    if (threads_set) unsetenv("LP_NUM_THREADS");
    if (s == LV_OK) s = create_device(ctx);
    if (s == LV_OK) {
        ctx->max_binding = ctx->info.max_storage_buffer_range;
        uint64_t override = opt.max_binding_bytes ? opt.max_binding_bytes : lv_env_u64("LONGVK_MAX_BINDING", 0, 0, UINT64_MAX);
        if (override && override < ctx->max_binding) ctx->max_binding = override;
        ctx->max_texel_bytes = ctx->info.max_texel_buffer_bytes;
        if (opt.max_texel_bytes && opt.max_texel_bytes < ctx->max_texel_bytes)
            ctx->max_texel_bytes = opt.max_texel_bytes;
        if (ctx->profile && ctx->info.timestamp_valid_bits == 0) ctx->profile = false;
        s = lv_memory_init(ctx);
    }
    if (s == LV_OK) s = lv_pipelines_init(ctx);
    if (s != LV_OK) {
        lv_ctx_destroy(ctx);
        return s;
    }
    *out = ctx;
    return LV_OK;
}

static void print_profile(lv_ctx *ctx) {
    double total = 0;
    for (int i = 0; i < LV_OP_COUNT; i++) total += ctx->op_time_ms[i];
    /* one table a context: a CFG-parallel run's twin (its second context) prints its own */
    fprintf(stderr, "longvk profile of context %d on %s (device time per op):\n", ctx->serial, ctx->info.name);
    fprintf(stderr, "  %-20s %10s %12s %8s\n", "op", "calls", "ms", "share");
    for (int i = 0; i < LV_OP_COUNT; i++) {
        if (!ctx->op_calls[i]) continue;
        fprintf(stderr, "  %-20s %10llu %12.3f %7.1f%%\n", lv_op_name((lv_op)i),
                (unsigned long long)ctx->op_calls[i], ctx->op_time_ms[i],
                total > 0 ? 100.0 * ctx->op_time_ms[i] / total : 0.0);
    }
    fprintf(stderr, "  %-20s %10s %12.3f\n", "total", "", total);
}

void lv_ctx_destroy(lv_ctx *ctx) {
    if (!ctx) return;
    if (ctx->device) {
        if (ctx->recording) lv_flush(ctx);
        vkDeviceWaitIdle(ctx->device);
        if (ctx->profile) print_profile(ctx);
        lv_pipelines_destroy(ctx);
        if (ctx->query_pool) vkDestroyQueryPool(ctx->device, ctx->query_pool, NULL);
        free(ctx->profile_entries);
        if (ctx->descriptor_pool) vkDestroyDescriptorPool(ctx->device, ctx->descriptor_pool, NULL);
        if (ctx->fence) vkDestroyFence(ctx->device, ctx->fence, NULL);
        if (ctx->command_pool) vkDestroyCommandPool(ctx->device, ctx->command_pool, NULL);
        lv_memory_destroy(ctx);
        vkDestroyDevice(ctx->device, NULL);
    }
    if (ctx->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                ctx->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy_messenger) destroy_messenger(ctx->instance, ctx->messenger, NULL);
    }
    if (ctx->instance) vkDestroyInstance(ctx->instance, NULL);
    free(ctx);
}

const lv_device_info *lv_ctx_device(const lv_ctx *ctx) { return &ctx->info; }
uint64_t lv_ctx_max_binding(const lv_ctx *ctx) { return ctx->max_binding; }
uint64_t lv_ctx_validation_messages(const lv_ctx *ctx) { return ctx->validation_messages; }
uint64_t lv_ctx_memory_in_use(const lv_ctx *ctx) { return ctx->memory_in_use; }
uint64_t lv_ctx_memory_peak(const lv_ctx *ctx) { return ctx->memory_peak; }
void lv_ctx_memory_reset_peak(lv_ctx *ctx) { ctx->memory_peak = ctx->memory_in_use; }
uint64_t lv_ctx_memory_budget(const lv_ctx *ctx) {
    uint64_t heap = ctx->info.device_local_bytes;
    /* a CPU device (lavapipe) allocates host memory: the 2 GiB heap Mesa 22.3 reports is not
     * enforced (`bench text` holds Gemma-2's 3.9 GB there), so the host's memory is the limit */
    if (ctx->info.type == LV_DEVICE_CPU) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page > heap) heap = (uint64_t)pages * (uint64_t)page;
    }
    return lv_env_u64("LONGVK_DEVICE_BUDGET", heap, 1, UINT64_MAX);
}
