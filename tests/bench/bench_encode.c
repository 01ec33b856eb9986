/* `longvk bench encode`: placeholder until its issue lands. */
#include <stdio.h>

#include "bench.h"

int bench_encode(int argc, char **argv, bool json) {
    (void)argc;
    (void)argv;
    (void)json;
    fprintf(stderr, "longvk bench encode: not implemented in this build yet\n");
    return 2;
}
