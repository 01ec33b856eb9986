/* .npy reader and writer for float32 arrays (see longvk/npy.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "longvk/files.h"
#include "longvk/npy.h"

/* The product of `ndim` dimensions, or -1 when a dimension is negative or the product does
 * not fit in an int64_t (any zero dimension makes it 0, however large the others). */
static int64_t checked_numel(int ndim, const int64_t *shape) {
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] == 0) return 0;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (n > INT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    return n;
}

int64_t lv_npy_numel(const lv_npy *a) {
    if (a->ndim < 0 || a->ndim > LV_NPY_MAX_DIMS) return -1;
    return checked_numel(a->ndim, a->shape);
}

/* "(3, 4, 5)" */
static void shape_text(const lv_npy *a, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < a->ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    if (n < cap) snprintf(out + n, cap - n, "%s)", a->ndim == 1 ? "," : "");
}

void lv_npy_free(lv_npy *a) {
    free(a->data);
    a->data = NULL;
}

/* Find `'key':` in the header dict and return a pointer just past the colon. */
static const char *dict_value(const char *header, const char *key) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, "'%s'", key);
    const char *p = strstr(header, pattern);
    if (!p) return NULL;
    p += strlen(pattern);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static lv_status parse_header(const char *path, const char *h, lv_npy *out) {
    const char *descr = dict_value(h, "descr");
    if (!descr) return lv_error(LV_ERR_FORMAT, "%s: .npy header has no 'descr'", path);
    if (strncmp(descr, "'<f4'", 5) != 0) {
        char got[16] = {0};
        for (int i = 0; i < 15 && descr[i] && descr[i] != ','; i++) got[i] = descr[i];
        return lv_error(LV_ERR_FORMAT, "%s: dtype %s is not float32 ('<f4'); convert with "
                        "numpy's astype(np.float32)", path, got);
    }
    const char *fortran = dict_value(h, "fortran_order");
    if (!fortran) return lv_error(LV_ERR_FORMAT, "%s: .npy header has no 'fortran_order'", path);
    if (strncmp(fortran, "False", 5) != 0)
        return lv_error(LV_ERR_FORMAT, "%s: Fortran-ordered arrays are not supported", path);
    const char *shape = dict_value(h, "shape");
    if (!shape || *shape != '(') return lv_error(LV_ERR_FORMAT, "%s: .npy header has no 'shape'", path);
    shape++;
    out->ndim = 0;
    for (;;) {
        while (*shape == ' ' || *shape == ',') shape++;
        if (*shape == ')') break;
        if (*shape < '0' || *shape > '9')
            return lv_error(LV_ERR_FORMAT, "%s: malformed shape in .npy header", path);
        if (out->ndim == LV_NPY_MAX_DIMS)
            return lv_error(LV_ERR_FORMAT, "%s: more than %d dimensions", path, LV_NPY_MAX_DIMS);
        char *end;
        errno = 0;
        long long v = strtoll(shape, &end, 10);
        if (errno || v < 0 || v > (1ll << 40))
            return lv_error(LV_ERR_FORMAT, "%s: dimension out of range in .npy header", path);
        out->shape[out->ndim++] = v;
        shape = end;
    }
    /* the bytes, 4 per element, must fit in an int64_t (and so in size_t and off_t) */
    int64_t n = checked_numel(out->ndim, out->shape);
    if (n < 0 || n > INT64_MAX / 4) {
        char text[8 * 24 + 8];
        shape_text(out, text, sizeof text);
        return lv_error(LV_ERR_FORMAT,
                        "%s: shape %s in the .npy header has more elements than a file can hold (their product "
                        "overflows 64 bits): a corrupt header",
                        path, text);
    }
    return LV_OK;
}

lv_status lv_npy_read(const char *path, lv_npy *out) {
    memset(out, 0, sizeof *out);
    int fd;
    LV_TRY(lv_open_regular_file(path, &fd, NULL)); /* a FIFO or a device is refused before any read */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return lv_error(LV_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    unsigned char magic[10];
    lv_status s = LV_OK;
    char *header = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        s = lv_error(LV_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    uint32_t header_len;
    if (magic[6] == 1) {
        unsigned char l[2];
        if (fread(l, 1, 2, f) != 2) {
            s = lv_error(LV_ERR_FORMAT, "%s: truncated .npy header", path);
            goto done;
        }
        header_len = (uint32_t)l[0] | (uint32_t)l[1] << 8;
    } else if (magic[6] == 2 || magic[6] == 3) {
        unsigned char l[4];
        if (fread(l, 1, 4, f) != 4) {
            s = lv_error(LV_ERR_FORMAT, "%s: truncated .npy header", path);
            goto done;
        }
        header_len = (uint32_t)l[0] | (uint32_t)l[1] << 8 | (uint32_t)l[2] << 16 | (uint32_t)l[3] << 24;
        if (header_len > (1u << 20)) {
            s = lv_error(LV_ERR_FORMAT, "%s: .npy header of %u bytes is implausible", path, header_len);
            goto done;
        }
    } else {
        s = lv_error(LV_ERR_FORMAT, "%s: unsupported .npy version %d", path, magic[6]);
        goto done;
    }
    header = calloc(header_len + 1, 1);
    if (!header) {
        s = lv_error(LV_ERR_NOMEM, "out of host memory");
        goto done;
    }
    if (fread(header, 1, header_len, f) != header_len) {
        s = lv_error(LV_ERR_FORMAT, "%s: truncated .npy header (%u bytes expected)", path, header_len);
        goto done;
    }
    s = parse_header(path, header, out);
    if (s != LV_OK) goto done;
    int64_t n = lv_npy_numel(out);
    long here = ftell(f);
    if (fseek(f, 0, SEEK_END) != 0) {
        s = lv_error(LV_ERR_IO, "%s: cannot seek", path);
        goto done;
    }
    long size = ftell(f);
    if (size - here < n * 4) {
        s = lv_error(LV_ERR_FORMAT, "%s: truncated: the header promises %lld floats (%lld bytes) "
                     "but only %ld bytes follow it", path, (long long)n, (long long)n * 4, size - here);
        goto done;
    }
    fseek(f, here, SEEK_SET);
    out->data = malloc(n ? (size_t)n * 4 : 4);
    if (!out->data) {
        s = lv_error(LV_ERR_NOMEM, "%s: cannot hold %lld floats", path, (long long)n);
        goto done;
    }
    if (fread(out->data, 4, (size_t)n, f) != (size_t)n) s = lv_error(LV_ERR_IO, "%s: read failed", path);
done:
    free(header);
    fclose(f);
    if (s != LV_OK) lv_npy_free(out);
    return s;
}

lv_status lv_npy_write(const char *path, int ndim, const int64_t *shape, const float *data) {
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)shape[i],
                      ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        numel *= shape[i];
    }
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad so that the data starts on a 64-byte boundary, header ends with '\n' */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    lv_output_file out; /* a temporary file renamed into place; a device or FIFO written through */
    LV_TRY(lv_output_open(&out, path));
    FILE *f = out.fp;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    uint16_t hl = (uint16_t)(n + pad + 1);
    pre[8] = (unsigned char)(hl & 0xff);
    pre[9] = (unsigned char)(hl >> 8);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; i < pad && ok; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && fwrite(data, 4, (size_t)numel, f) == (size_t)numel;
    if (!ok) {
        int e = errno;
        lv_output_discard(&out);
        return lv_error(LV_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    LV_TRY(lv_output_commit(&out));
    return LV_OK;
}

lv_status lv_check_finite(const char *file, const char *tensor, const float *x, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    for (int64_t k = 0; k < n; k++) {
        if (isfinite(x[k])) continue;
        char index[256] = "";
        size_t at = 0;
        int64_t rest = k, stride = n;
        for (int i = 0; i < ndim && at < sizeof index; i++) {
            stride = shape[i] ? stride / shape[i] : 1;
            int64_t v = stride ? rest / stride : 0;
            rest -= v * stride;
            at += (size_t)snprintf(index + at, sizeof index - at, "%s%lld", i ? ", " : "", (long long)v);
        }
        return lv_error(LV_ERR_INVALID, "%s: tensor '%s': value %g at [%s] (offset %lld of %lld) is not finite", file,
                        tensor, (double)x[k], index, (long long)k, (long long)n);
    }
    return LV_OK;
}
