/* linear_attention kernels (engine/ops_linear_attention.c, shaders/). */
#ifndef LONGVK_OPS_LINEAR_ATTENTION_H
#define LONGVK_OPS_LINEAR_ATTENTION_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
