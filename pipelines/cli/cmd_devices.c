/* `longvk devices`: the Vulkan devices and the limits that matter to longvk. */
#include <stdio.h>

#include "commands.h"
#include "longvk.h"

const cli_spec cmd_devices_spec = {
    .command = "devices",
    .usage = "",
    .about = "Lists every Vulkan device with its index (for --device N or LONGVK_DEVICE=N), type,\n"
             "driver, memory, subgroup size, fp16 support, maxStorageBufferRange and the reach of\n"
             "texel buffers (maxTexelBufferElements x 16 bytes; kernels read their inputs through\n"
             "them). The default choice is marked with '*': discrete > integrated > virtual > CPU.\n",
};

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
        printf("     memory %.1f GiB, subgroup %u, fp16 %s, maxStorageBufferRange %llu MiB, "
               "texel buffers %llu MiB, maxMemoryAllocationSize %llu MiB\n",
               (double)d->device_local_bytes / (1 << 30), d->subgroup_size, d->fp16 ? "yes" : "no",
               (unsigned long long)(d->max_storage_buffer_range >> 20),
               (unsigned long long)(d->max_texel_buffer_bytes >> 20),
               (unsigned long long)(d->max_allocation_bytes >> 20));
    }
    return 0;
}
