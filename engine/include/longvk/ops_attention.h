/* attention kernels (engine/ops_attention.c, shaders/). */
#ifndef LONGVK_OPS_ATTENTION_H
#define LONGVK_OPS_ATTENTION_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
