/* `longvk bench chunks`: placeholder until its issue lands. */
#include <stdio.h>

#include "bench.h"

int bench_chunks(int argc, char **argv, bool json) {
    (void)argc;
    (void)argv;
    (void)json;
    fprintf(stderr, "longvk bench chunks: not implemented in this build yet\n");
    return 2;
}
