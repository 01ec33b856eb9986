/* `longvk info FILE.gguf` on the GGUF fuzz seed (written by tests/formats/test_gguf.c's own
 * writer: every tensor type longvk reads, typed metadata): the container named, each dtype
 * counted with its bytes, the metadata as text, and with --tensors every tensor's dtype,
 * shape (ggml's dims reversed) and bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_files.h"

#define SEED LONGVK_ASSETS_DIR "/../tests/fuzz/seeds/gguf/sample-align32.gguf"

Test(info_gguf_cli, types_shapes_and_bytes) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s info %s --tensors", LONGVK_CLI, SEED);
    int rc = ts_run(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    const char *want[] = {
        "(gguf)",
        "tensors:      6, 661 parameters, 484 B",
        "q8_0: 1 tensor (136 B), q4_k: 1 tensor (288 B)",
        "metadata:     general.architecture = gemma2",
        "metadata:     tokenizer.ggml.tokens = [array of 3 string]",
        "  w.f32 f32 [2, 3] 24 bytes\n",
        "  w.q8 q8_0 [2, 64] 136 bytes\n",           /* 4 blocks of 34 bytes */
        "  w.q4k q4_k [1, 2, 1, 256] 288 bytes\n",   /* 2 blocks of 144 bytes */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(out, want[i]), "want '%s' in:\n%s", want[i], out);
    free(out);
}
