/* The smallest program that embeds longvk: built by .ci/run against an installed copy
 * (cmake --install + pkg-config) to check that the installed headers, library and
 * longvk.pc are complete. Lists the Vulkan devices and makes a context on the first. */
#include <longvk.h>
#include <stdio.h>

int main(void) {
    lv_device_info devices[8];
    int n = 0;
    if (lv_list_devices(devices, 8, &n) != LV_OK) {
        fprintf(stderr, "%s\n", lv_last_error());
        return 1;
    }
    lv_ctx *ctx;
    if (lv_ctx_create(NULL, &ctx) != LV_OK) {
        fprintf(stderr, "%s\n", lv_last_error());
        return 1;
    }
    printf("%d device(s); using %s\n", n, lv_ctx_device(ctx)->name);
    lv_ctx_destroy(ctx);
    return 0;
}
