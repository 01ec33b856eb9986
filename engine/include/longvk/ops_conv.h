/* conv kernels (engine/ops_conv.c, shaders/). */
#ifndef LONGVK_OPS_CONV_H
#define LONGVK_OPS_CONV_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
