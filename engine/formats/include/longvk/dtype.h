/* Element types and rank of tensors, on the device (longvk/engine.h) and in model files
 * (longvk/weights.h): one table for both, in engine/formats/dtype.c. */
#ifndef LONGVK_DTYPE_H
#define LONGVK_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a tensor has, on the device or in a file. */
#define LV_MAX_DIMS 5

typedef enum lv_dtype { LV_F32 = 0, LV_F16, LV_BF16, LV_I32 } lv_dtype;

/* Bytes per element (0 for a value outside the enum). */
size_t lv_dtype_size(lv_dtype dtype);
/* "f32", "f16", "bf16", "i32": the name used in messages and on the command line. */
const char *lv_dtype_name(lv_dtype dtype);
/* "F32", "F16", "BF16", "I32": the safetensors header's spelling. */
const char *lv_dtype_tag(lv_dtype dtype);
/* "[2, 3, 4]": a shape for messages. */
void lv_shape_format(const int64_t *shape, int ndim, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
