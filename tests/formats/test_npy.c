/* The .npy reader against crafted headers: a shape whose element count overflows 64 bits is
 * an error naming the file and the shape (it was a signed overflow, caught by UBSan, and in
 * an ordinary build wrapped to a small count that was then "read"). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"

/* A version 1.0 .npy file with `dict` as its header and `data_bytes` zero bytes after it. */
static void write_npy(const char *path, const char *dict, size_t data_bytes) {
    char header[512];
    int n = snprintf(header, sizeof header, "%s", dict);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    memset(header + n, ' ', (size_t)pad);
    header[n + pad] = '\n';
    int hl = n + pad + 1;
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    cr_assert_eq(fwrite(pre, 1, 10, f), 10u);
    cr_assert_eq(fwrite(header, 1, (size_t)hl, f), (size_t)hl);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    cr_assert_eq(fclose(f), 0);
}

static void expect_overflow(const char *name, const char *shape) {
    char path[512], dict[256];
    snprintf(path, sizeof path, "%s/npy_%s.npy", LONGVK_TEST_TMP, name);
    snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
    write_npy(path, dict, 64);
    lv_npy a;
    lv_clear_error();
    cr_assert_eq(lv_npy_read(path, &a), LV_ERR_FORMAT, "%s: shape %s accepted", name, shape);
    const char *msg = lv_last_error();
    cr_assert_not_null(strstr(msg, path), "the message does not name the file: %s", msg);
    cr_assert_not_null(strstr(msg, shape), "the message does not give the shape %s: %s", shape, msg);
    cr_assert_not_null(strstr(msg, "overflow"), "%s", msg);
    cr_assert_null(a.data);
}

Test(npy, element_count_overflowing_64_bits_is_refused) {
    expect_overflow("2d", "(1099511627776, 1099511627776)");         /* 2^80 */
    expect_overflow("3d", "(2097152, 2097152, 2097152)");            /* 2^63 */
    expect_overflow("bytes", "(2147483648, 2147483648)");            /* 2^62 elements: 2^64 bytes */
    expect_overflow("8d", "(256, 256, 256, 256, 256, 256, 256, 256)"); /* 2^64 */
}

/* A zero dimension makes an empty array however large the others are: numpy writes these. */
Test(npy, zero_dimension_beside_huge_ones_is_an_empty_array) {
    char path[512];
    snprintf(path, sizeof path, "%s/npy_empty_huge.npy", LONGVK_TEST_TMP);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 0), }", 0);
    lv_npy a;
    cr_assert_eq(lv_npy_read(path, &a), LV_OK, "%s", lv_last_error());
    cr_assert_eq(a.ndim, 3);
    cr_assert_eq(lv_npy_numel(&a), 0);
    lv_npy_free(&a);
}

/* The largest count that fits still gets the ordinary "truncated" error, not an overflow. */
Test(npy, large_but_representable_shape_is_truncated_not_overflowing) {
    char path[512];
    snprintf(path, sizeof path, "%s/npy_large.npy", LONGVK_TEST_TMP);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1073741824), }", 16);
    lv_npy a;
    cr_assert_eq(lv_npy_read(path, &a), LV_ERR_FORMAT);
    cr_assert_not_null(strstr(lv_last_error(), "truncated"), "%s", lv_last_error());
    cr_assert_not_null(strstr(lv_last_error(), "1152921504606846976 floats"), "%s", lv_last_error());
}

Test(npy, numel_reports_overflow) {
    lv_npy a = {.ndim = 2, .shape = {INT64_C(1) << 40, INT64_C(1) << 40}};
    cr_assert_eq(lv_npy_numel(&a), -1);
    lv_npy b = {.ndim = 3, .shape = {INT64_C(1) << 40, INT64_C(1) << 40, 0}};
    cr_assert_eq(lv_npy_numel(&b), 0);
    lv_npy c = {.ndim = 2, .shape = {3, 5}};
    cr_assert_eq(lv_npy_numel(&c), 15);
    lv_npy d = {.ndim = 0};
    cr_assert_eq(lv_npy_numel(&d), 1);
}
