/* matmul kernels (engine/ops_matmul.c, shaders/). */
#ifndef LONGVK_OPS_MATMUL_H
#define LONGVK_OPS_MATMUL_H

#include "longvk/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
