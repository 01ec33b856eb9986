/* `longvk bench gemm`: placeholder until its issue lands. */
#include <stdio.h>

#include "bench.h"

int bench_gemm(int argc, char **argv, bool json) {
    (void)argc;
    (void)argv;
    (void)json;
    fprintf(stderr, "longvk bench gemm: not implemented in this build yet\n");
    return 2;
}
