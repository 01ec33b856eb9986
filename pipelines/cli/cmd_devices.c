/* `longvk devices`: the Vulkan devices and the limits that matter to longvk. */
#include <stdio.h>

#include "commands.h"
#include "longvk.h"

const cli_spec cmd_devices_spec = {
    .command = "devices",
    .usage = "",
    .about = "Lists every Vulkan device with its index (for --device N or LONGVK_DEVICE=N), type,\n"
             "driver, memory, subgroup size, maxStorageBufferRange and the reach of texel buffers\n"
             "(maxTexelBufferElements x 16 bytes; kernels read their inputs through them), its\n"
             "half-precision support (shaderFloat16, 16-bit storage, bfloat16) and the shapes and\n"
             "types of its cooperative matrices (tensor cores, VK_KHR_cooperative_matrix), or why\n"
             "the fp32 kernels are used instead (LONGVK_COOPMAT=0 forces them). The default choice\n"
             "is marked with '*': discrete > integrated > virtual > CPU.\n",
};

static const char *yes_no(int v) { return v ? "yes" : "no"; }

/* "cooperative matrix: ..." and, when the device lists shapes, one line per shape:
 * M x N x K, A x B + C -> result, and the scope (the tensor cores' unit of work). */
static void print_coopmat(const lv_device_info *d) {
    switch (d->coopmat) {
    case LV_COOPMAT_NONE: printf("     cooperative matrix: none (fp32 kernels)\n"); return;
    case LV_COOPMAT_DISABLED:
        printf("     cooperative matrix: disabled by LONGVK_COOPMAT=0 (fp32 kernels)");
        if (d->coopmat_count) printf("; the device lists %d shapes", d->coopmat_count);
        printf("\n");
        return;
    case LV_COOPMAT_UNBUILT:
        printf("     cooperative matrix: %d shapes, unused: this build's glslang does not know "
               "GL_KHR_cooperative_matrix (fp32 kernels; see .ci/glslang)\n", d->coopmat_count);
        break;
    case LV_COOPMAT_OLD_LAYER:
        printf("     cooperative matrix: %d shapes, unused with the validation layer on: it predates "
               "VK_KHR_cooperative_matrix (fp32 kernels)\n", d->coopmat_count);
        break;
    case LV_COOPMAT_NO_F16:
        printf("     cooperative matrix: %d shapes, unused: no shaderFloat16 or Vulkan memory model "
               "(fp32 kernels)\n", d->coopmat_count);
        break;
    case LV_COOPMAT_ON:
        if (d->type == LV_DEVICE_CPU)
            printf("     cooperative matrix: %d shapes; unused by default (on a CPU device the fp32 register "
                   "kernel is faster; LONGVK_MATMUL_VARIANT=coopmat at --precision f16 forces them)\n",
                   d->coopmat_count);
        else
            printf("     cooperative matrix: %d shapes; used at --precision f16 (LONGVK_PRECISION=f16)\n",
                   d->coopmat_count);
        break;
    }
    int shown = d->coopmat_count < LV_COOPMAT_MAX_SHAPES ? d->coopmat_count : LV_COOPMAT_MAX_SHAPES;
    for (int i = 0; i < shown; i++) {
        const lv_coopmat_shape *c = &d->coopmat_shapes[i];
        printf("       %ux%ux%u %s x %s + %s -> %s, %s scope%s\n", c->m, c->n, c->k,
               lv_coopmat_type_name(c->a_type), lv_coopmat_type_name(c->b_type),
               lv_coopmat_type_name(c->c_type), lv_coopmat_type_name(c->result_type),
               lv_coopmat_scope_name(c->scope), c->saturating ? ", saturating" : "");
    }
    if (shown < d->coopmat_count) printf("       ... and %d more\n", d->coopmat_count - shown);
}

int cmd_devices(int argc, char **argv) {
    int r = cli_parse(&cmd_devices_spec, argc, argv);
    if (r >= 0) return r;
    lv_device_info infos[16];
    int count = 0;
    if (lv_list_devices(infos, 16, &count) != LV_OK) return cli_fail(NULL);
    int best = 0;
    static const int rank[] = {0, 4, 3, 2, 1};
    for (int i = 1; i < count && i < 16; i++)
        if (rank[infos[i].type] > rank[infos[best].type]) best = i;
    for (int i = 0; i < count && i < 16; i++) {
        const lv_device_info *d = &infos[i];
        printf("%c %d: %s\n", i == best ? '*' : ' ', d->index, d->name);
        printf("     type %s, driver %s\n", lv_device_type_name(d->type), d->driver);
        printf("     memory %.1f GiB, subgroup %u, maxStorageBufferRange %llu MiB, "
               "texel buffers %llu MiB, maxMemoryAllocationSize %llu MiB\n",
               (double)d->device_local_bytes / (1 << 30), d->subgroup_size,
               (unsigned long long)(d->max_storage_buffer_range >> 20),
               (unsigned long long)(d->max_texel_buffer_bytes >> 20),
               (unsigned long long)(d->max_allocation_bytes >> 20));
        printf("     half precision: shaderFloat16 %s, 16-bit storage %s, bfloat16 %s\n",
               yes_no(d->fp16), yes_no(d->storage16), yes_no(d->bf16));
        print_coopmat(d);
    }
    if (lv_coopmat_built())
        printf("this build has the tensor-core kernels (its glslang knows GL_KHR_cooperative_matrix)\n");
    else
        printf("this build has no tensor-core kernels: its glslang does not know GL_KHR_cooperative_matrix "
               "(Debian 12's glslang-tools 12; bash .ci/glslang builds one, then cmake -DLONGVK_GLSLANG=PATH; "
               "Debian 13's needs nothing)\n");
    return 0;
}
