/* NumPy .npy files (format 1.0-3.0), float32 little-endian, C order: the exchange format
 * of `longvk attn`, `longvk forward` and the test vectors. */
#ifndef LONGVK_NPY_H
#define LONGVK_NPY_H

#include <stdint.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LV_NPY_MAX_DIMS 8

typedef struct lv_npy {
    int ndim;
    int64_t shape[LV_NPY_MAX_DIMS];
    float *data; /* numel floats, owned */
} lv_npy;

/* The number of elements: the product of the shape (1 for ndim 0), or -1 when that product
 * overflows an int64_t (never for an array lv_npy_read returned). */
int64_t lv_npy_numel(const lv_npy *a);
/* Reads a float32 array; any other dtype, Fortran order, a broken header, a shape whose
 * size overflows 64 bits or a file shorter than its header says is an error naming the
 * file (and the shape). */
lv_status lv_npy_read(const char *path, lv_npy *out);
/* Writes atomically: a temporary file beside `path`, renamed when complete. */
lv_status lv_npy_write(const char *path, int ndim, const int64_t *shape, const float *data);
void lv_npy_free(lv_npy *a);

/* LV_OK when every value of x (shape [ndim]) is finite; else LV_ERR_INVALID with a message
 * naming the file, the tensor and the first bad value: its index in the shape and its flat
 * offset ("x.npy: tensor 'latents': value nan at [3, 0, 1, 2] (offset 1234) is not
 * finite"). Data that enters a model (latents, prompt rows) goes through it first. */
lv_status lv_check_finite(const char *file, const char *tensor, const float *x, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
