/* `longvk decode`: not built yet (placeholder until its issue lands). */
#include <stdio.h>

#include "commands.h"

int cmd_decode(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "longvk decode: not implemented in this build yet\n");
    return 2;
}
