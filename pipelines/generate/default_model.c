/* Access to the embedded default model (pipelines/generate/default_model.S). */
#include <stddef.h>

#include "longvk/generate.h"

extern const unsigned char lv_default_model_bytes[];
extern const unsigned char lv_default_model_end[];

const void *lv_default_model_data(void) { return lv_default_model_bytes; }

size_t lv_default_model_size(void) { return (size_t)(lv_default_model_end - lv_default_model_bytes); }
