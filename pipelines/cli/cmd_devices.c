/* `longvk devices`: the Vulkan devices and the limits that matter to longvk. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

int cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: longvk devices\n\nLists every Vulkan device with its index (for --device N or\n"
                   "LONGVK_DEVICE=N), type, driver, memory, subgroup size, fp16 support,\n"
                   "maxStorageBufferRange and the reach of texel buffers (maxTexelBufferElements x 16\n"
                   "bytes; kernels read their inputs through them). The default choice is marked\n"
                   "with '*': discrete > integrated > virtual > CPU.\n");
            return 0;
        }
        fprintf(stderr, "longvk devices: unknown option '%s'\n", argv[i]);
        return 2;
    }
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
