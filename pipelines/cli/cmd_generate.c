/* `longvk generate`: not built yet (placeholder until its issue lands). */
#include <stdio.h>

#include "commands.h"

int cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "longvk generate: not implemented in this build yet\n");
    return 2;
}
