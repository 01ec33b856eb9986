/* `longvk bench attn`: placeholder until its issue lands. */
#include <stdio.h>

#include "bench.h"

int bench_attn(int argc, char **argv, bool json) {
    (void)argc;
    (void)argv;
    (void)json;
    fprintf(stderr, "longvk bench attn: not implemented in this build yet\n");
    return 2;
}
