/* `longvk devices` through the binary (LONGVK_CLI): per device, the half-precision line and
 * the cooperative-matrix line (issue 46). On lavapipe: shaderFloat16 and 16-bit storage,
 * no cooperative matrix; with LONGVK_COOPMAT=0 every device says the fp32 kernels are
 * forced. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "longvk.h"

/* stdout of `longvk devices` (malloc'd); the exit status must be 0. */
static char *devices_output(void) {
    FILE *p = popen("'" LONGVK_CLI "' devices", "r");
    cr_assert(p, "cannot run %s", LONGVK_CLI);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    cr_assert(out);
    size_t got;
    while ((got = fread(out + len, 1, cap - 1 - len, p)) > 0) len += got;
    out[len] = 0;
    int status = pclose(p);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "longvk devices ended with %d:\n%s",
              status, out);
    return out;
}

/* The lines of device `index` (from its "N: name" line to the next device), malloc'd. */
static char *device_block(const char *out, int index) {
    char header[32];
    snprintf(header, sizeof header, " %d: ", index);
    const char *start = strstr(out, header);
    cr_assert(start, "no device %d in:\n%s", index, out);
    const char *end = start + 1;
    while ((end = strchr(end, '\n')) && strncmp(end + 1, "     ", 5) == 0) end++;
    size_t len = end ? (size_t)(end - start) : strlen(start);
    char *block = malloc(len + 1);
    cr_assert(block);
    memcpy(block, start, len);
    block[len] = 0;
    return block;
}

Test(cli_devices, lavapipe_half_precision_and_no_coopmat, .timeout = 120) {
    lv_device_info infos[16];
    int n = 0;
    cr_assert_eq(lv_list_devices(infos, 16, &n), LV_OK, "%s", lv_last_error());
    char *out = devices_output();
    int lavapipes = 0;
    for (int i = 0; i < n && i < 16; i++) {
        char *block = device_block(out, infos[i].index);
        cr_assert(strstr(block, "half precision: shaderFloat16 "), "%s", block);
        cr_assert(strstr(block, "cooperative matrix: "), "%s", block);
        if (strstr(infos[i].name, "llvmpipe")) {
            lavapipes++;
            cr_assert(strstr(block, "half precision: shaderFloat16 yes, 16-bit storage yes"), "%s", block);
            cr_assert(strstr(block, "cooperative matrix: none (fp32 kernels)"), "%s", block);
        }
        free(block);
    }
    if (!lavapipes) cr_log_warn("no lavapipe device here: its lines were not checked");
    free(out);
}

Test(cli_devices, coopmat_disabled_by_environment, .timeout = 120) {
    int n = 0;
    cr_assert_eq(lv_list_devices(NULL, 0, &n), LV_OK, "%s", lv_last_error());
    cr_assert_eq(setenv("LONGVK_COOPMAT", "0", 1), 0);
    char *out = devices_output();
    int said = 0;
    for (const char *p = out; (p = strstr(p, "cooperative matrix: disabled by LONGVK_COOPMAT=0")); p++) said++;
    cr_assert_eq(said, n, "%d of %d devices say LONGVK_COOPMAT=0 disabled them:\n%s", said, n, out);
    free(out);
}
