/* `longvk attn`: not built yet (placeholder until its issue lands). */
#include <stdio.h>

#include "commands.h"

int cmd_attn(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "longvk attn: not implemented in this build yet\n");
    return 2;
}
