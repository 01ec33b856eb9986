/* elementwise kernels (engine/ops_elementwise.c, shaders/). */
#ifndef LONGVK_OPS_ELEMENTWISE_H
#define LONGVK_OPS_ELEMENTWISE_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
