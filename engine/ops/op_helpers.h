/* Helpers shared by the row-wise op wrappers (element-wise, norms, rope): shape
 * flattening, splitting rows over the device's binding limit, aliasing checks, and the
 * host half of the shaders' fast division (shaders/fastdiv.glsl). Not installed. */
#ifndef LONGVK_OP_HELPERS_H
#define LONGVK_OP_HELPERS_H

#include <stdbool.h>
#include <stdint.h>

#include "lv_internal.h"

/* Division by a divisor d fixed for a dispatch, done in the shader as a 32x32->64-bit
 * multiply and a shift (integer division is slow on CPU devices: it is not vectorised).
 * Exact for every dividend n < 2^30. magic == 0 means d == 1. */
typedef struct lv_fastdiv {
    uint32_t magic;
    uint32_t shift;
} lv_fastdiv;

lv_fastdiv lv_fastdiv_make(uint32_t d);

/* Rows and columns of t with every leading dimension flattened into the rows. */
void lv_rows_cols(const lv_tensor *t, int64_t *rows, int64_t *cols);

/* How many rows of `row_bytes` bytes one binding may cover (the binding limit less the
 * offset-alignment slack). Fails with LV_ERR_LIMIT, naming the op and the tensor, when
 * not even one row fits. */
lv_status lv_rows_per_binding(lv_ctx *ctx, const char *op, const lv_tensor *t,
                              uint64_t row_bytes, int64_t *rows);

/* A 2-D [nrows, cols] view of rows [row0, row0 + nrows) of a tensor holding rows of
 * `cols` elements. */
lv_tensor lv_rows_view(const lv_tensor *t, int64_t row0, int64_t nrows, int64_t cols);

/* Fails with LV_ERR_INVALID when `in` and `out` overlap in memory without being exactly
 * the same range (when `exact_ok`; otherwise any overlap fails). In-place ops write an
 * element only after reading the inputs at that element, so exact aliasing is safe. */
lv_status lv_check_alias(const char *op, const lv_tensor *out, const char *in_name,
                         const lv_tensor *in, bool exact_ok);

/* Fails with LV_ERR_INVALID unless t is f32. */
lv_status lv_check_f32(const char *op, const char *name, const lv_tensor *t);
/* The same for an activation: f32, or 16-bit (f16 / bf16, lv_ctx_options.precision) */
lv_status lv_check_act(const char *op, const char *name, const lv_tensor *t);

#endif
