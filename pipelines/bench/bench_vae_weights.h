/* Random Wan2.1 VAE decoder weights for the benchmarks (bench_vae_weights.c). */
#ifndef LONGVK_BENCH_VAE_WEIGHTS_H
#define LONGVK_BENCH_VAE_WEIGHTS_H

#include "longvk.h"

/* The decoder of the Wan2.1 structure with base width dim (96: Wan2.1's; a multiple of 4)
 * and 16 latent channels, random weights (convs of unit variance over their fan-in) under
 * the original names, written to path as a safetensors file. */
lv_status bench_vae_write_random(const char *path, int dim);

#endif
