/* What a device offers for half precision and tensor cores: shaderFloat16, 16-bit storage,
 * bfloat16, and the shapes of VK_KHR_cooperative_matrix (issue 46). The kernels that use
 * them choose by this summary; `longvk devices` prints it. */
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"
#include "vk_coopmat.h"

#ifndef LONGVK_HAVE_COOPMAT_SHADERS
#define LONGVK_HAVE_COOPMAT_SHADERS 0
#endif

const char *lv_coopmat_type_name(uint32_t t) {
    switch (t) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR: return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_KHR: return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_KHR: return "f64";
    case VK_COMPONENT_TYPE_SINT8_KHR: return "s8";
    case VK_COMPONENT_TYPE_SINT16_KHR: return "s16";
    case VK_COMPONENT_TYPE_SINT32_KHR: return "s32";
    case VK_COMPONENT_TYPE_SINT64_KHR: return "s64";
    case VK_COMPONENT_TYPE_UINT8_KHR: return "u8";
    case VK_COMPONENT_TYPE_UINT16_KHR: return "u16";
    case VK_COMPONENT_TYPE_UINT32_KHR: return "u32";
    case VK_COMPONENT_TYPE_UINT64_KHR: return "u64";
    case LV_VK_COMPONENT_TYPE_BFLOAT16: return "bf16";
    case LV_VK_COMPONENT_TYPE_FLOAT8_E4M3: return "e4m3";
    case LV_VK_COMPONENT_TYPE_FLOAT8_E5M2: return "e5m2";
    default: return "?";
    }
}

const char *lv_coopmat_scope_name(uint32_t scope) {
    switch (scope) {
    case VK_SCOPE_DEVICE_KHR: return "device";
    case VK_SCOPE_WORKGROUP_KHR: return "workgroup";
    case VK_SCOPE_SUBGROUP_KHR: return "subgroup";
    case VK_SCOPE_QUEUE_FAMILY_KHR: return "queue family";
    default: return "?";
    }
}

int lv_coopmat_built(void) { return LONGVK_HAVE_COOPMAT_SHADERS ? 1 : 0; }

static bool device_extension(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkExtensionProperties *props = calloc(n, sizeof *props);
    if (!props) return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

/* The device's list of cooperative-matrix shapes into info (count: all of them). */
static void list_shapes(VkInstance instance, VkPhysicalDevice pd, lv_device_info *info) {
    /* a device-extension command on the physical device: reached through the instance */
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0) return;
    VkCooperativeMatrixPropertiesKHR *props = calloc(n, sizeof *props);
    if (!props) return;
    for (uint32_t i = 0; i < n; i++)
        props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    VkResult r = get(pd, &n, props);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
        info->coopmat_count = (int)n;
        for (uint32_t i = 0; i < n && i < LV_COOPMAT_MAX_SHAPES; i++)
            info->coopmat_shapes[i] = (lv_coopmat_shape){
                .m = props[i].MSize, .n = props[i].NSize, .k = props[i].KSize,
                .a_type = (uint32_t)props[i].AType, .b_type = (uint32_t)props[i].BType,
                .c_type = (uint32_t)props[i].CType, .result_type = (uint32_t)props[i].ResultType,
                .scope = (uint32_t)props[i].scope, .saturating = props[i].saturatingAccumulation != 0,
            };
    }
    free(props);
}

static bool coopmat_env_off(void) {
    const char *v = lv_env_str("LONGVK_COOPMAT");
    return v && strcmp(v, "0") == 0;
}

/* Feature structs are chained only for what every validation layer knows (Vulkan 1.1/1.2
 * core): a layer older than an extension (Debian 12's is 1.3.239) reports an unknown sType
 * in the chain as an error, and the tests fail on validation messages. The extensions
 * themselves need no struct: the spec's feature requirements make cooperativeMatrix
 * mandatory with VK_KHR_cooperative_matrix and shaderBFloat16Type with
 * VK_KHR_shader_bfloat16, so the extension's presence says it. */
void lv_describe_features(VkInstance instance, VkPhysicalDevice pd, lv_device_info *info) {
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &storage16};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &f16};
    vkGetPhysicalDeviceFeatures2(pd, &features);

    info->fp16 = f16.shaderFloat16 ? 1 : 0;
    info->storage16 = storage16.storageBuffer16BitAccess ? 1 : 0;
    info->bf16 = device_extension(pd, VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME) ? 1 : 0;
    info->coopmat_count = 0;
    if (device_extension(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) list_shapes(instance, pd, info);
    if (coopmat_env_off()) info->coopmat = LV_COOPMAT_DISABLED;
    else if (info->coopmat_count == 0) info->coopmat = LV_COOPMAT_NONE;
    else info->coopmat = LONGVK_HAVE_COOPMAT_SHADERS ? LV_COOPMAT_ON : LV_COOPMAT_UNBUILT;
}

bool lv_coopmat_prepare(VkPhysicalDevice pd, bool validation, lv_device_info *info, lv_coopmat_enable *e) {
    memset(e, 0, sizeof *e);
    if (info->coopmat != LV_COOPMAT_ON) return false;
    /* VK_KHR_cooperative_matrix entered the headers (and the layer) at 1.3.255; an older
     * layer reports its structures in pNext chains and its SPIR-V capabilities as errors */
    if (validation && lv_instance_layer_version("VK_LAYER_KHRONOS_validation") < VK_MAKE_API_VERSION(0, 1, 3, 255)) {
        info->coopmat = LV_COOPMAT_OLD_LAYER;
        return false;
    }
    e->coopmat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
    e->memory_model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    e->memory_model.pNext = &e->coopmat;
    e->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    e->f16.pNext = &e->memory_model;
    e->features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    e->features.pNext = &e->f16;
    vkGetPhysicalDeviceFeatures2(pd, &e->features); /* what the device has ... */
    if (!e->coopmat.cooperativeMatrix || !e->f16.shaderFloat16 || !e->memory_model.vulkanMemoryModel ||
        !e->memory_model.vulkanMemoryModelDeviceScope ||
        !device_extension(pd, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME) ||
        !device_extension(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
        info->coopmat = LV_COOPMAT_NO_F16;
        memset(e, 0, sizeof *e);
        return false;
    }
    /* ... and what is turned on: only these, every other feature as without them */
    VkPhysicalDeviceFeatures2 none = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &e->f16};
    e->features = none;
    e->f16 = (VkPhysicalDeviceShaderFloat16Int8Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &e->memory_model,
        .shaderFloat16 = VK_TRUE};
    /* With the memory model on, SPIR-V's device-scope operations (the other kernels' atomics and
     * barriers) need vulkanMemoryModelDeviceScope too (VUID-RuntimeSpirv-vulkanMemoryModel-06265):
     * enabled where offered, and a device without it keeps the coopmat kernels off. */
    e->memory_model = (VkPhysicalDeviceVulkanMemoryModelFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, .pNext = &e->coopmat,
        .vulkanMemoryModel = VK_TRUE, .vulkanMemoryModelDeviceScope = VK_TRUE};
    e->coopmat = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, .cooperativeMatrix = VK_TRUE};
    e->extensions[e->extension_count++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    e->extensions[e->extension_count++] = VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME;
    e->extensions[e->extension_count++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
    return true;
}
