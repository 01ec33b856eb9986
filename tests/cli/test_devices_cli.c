/* `longvk devices` through the binary (LONGVK_CLI): per device, the half-precision line and
 * the cooperative-matrix line (issues 46, 57), as the device reports them; whether the build
 * has the tensor-core kernels; with LONGVK_COOPMAT=0 every device says the fp32 kernels are
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

/* Each device's cooperative-matrix line says what the device reports (lv_list_devices: its
 * state and shapes), whatever the driver (Mesa 26's lavapipe lists four shapes on AVX2,
 * older ones none); lavapipe has shaderFloat16 and 16-bit storage; the last line says
 * whether the build has the tensor-core kernels. */
Test(cli_devices, half_precision_and_coopmat_as_reported, .timeout = 120) {
    lv_device_info infos[16];
    int n = 0;
    cr_assert_eq(lv_list_devices(infos, 16, &n), LV_OK, "%s", lv_last_error());
    char *out = devices_output();
    for (int i = 0; i < n && i < 16; i++) {
        const lv_device_info *d = &infos[i];
        char *block = device_block(out, d->index);
        cr_assert(strstr(block, "half precision: shaderFloat16 "), "%s", block);
        cr_assert(strstr(block, "cooperative matrix: "), "%s", block);
        if (strstr(d->name, "llvmpipe"))
            cr_assert(strstr(block, "half precision: shaderFloat16 yes, 16-bit storage yes"), "%s", block);
        char want[96];
        const bool no_shapes = d->coopmat == LV_COOPMAT_NONE || d->coopmat == LV_COOPMAT_DISABLED;
        if (d->coopmat == LV_COOPMAT_NONE) snprintf(want, sizeof want, "cooperative matrix: none (fp32 kernels)");
        else if (d->coopmat == LV_COOPMAT_DISABLED) snprintf(want, sizeof want, "disabled by LONGVK_COOPMAT=0");
        else snprintf(want, sizeof want, "cooperative matrix: %d shapes", d->coopmat_count);
        cr_assert(strstr(block, want), "%s: state %d, want \"%s\" in:\n%s", d->name, (int)d->coopmat, want, block);
        /* one line per shape */
        int lines = 0;
        for (const char *p = block; (p = strstr(p, " scope")); p++) lines++;
        int listed = d->coopmat_count < LV_COOPMAT_MAX_SHAPES ? d->coopmat_count : LV_COOPMAT_MAX_SHAPES;
        cr_assert_eq(lines, no_shapes ? 0 : listed, "%s", block);
        cr_log_info("%s: %s", d->name, want);
        free(block);
    }
    cr_assert(strstr(out, lv_coopmat_built() ? "this build has the tensor-core kernels"
                                             : "this build has no tensor-core kernels: its glslang does not know"),
              "%s", out);
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
