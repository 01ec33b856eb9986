/* Where a text encoder's tokenizer lives: tokenizer.model in a Hugging Face model folder,
 * in its tokenizer/ subfolder, or in the tokenizer/ folder beside a diffusers text_encoder/. */
#include <stdio.h>
#include <string.h>

#include "longvk/files.h"
#include "longvk/tokenizer.h"

int lv_tokenizer_find(const char *encoder, char *buf, size_t size) {
    if (!encoder || !buf || size == 0) return 0;
    char dir[4096];
    if (lv_path_is_dir(encoder)) snprintf(dir, sizeof dir, "%s", encoder);
    else lv_path_dir(encoder, dir, sizeof dir); /* a weights file: its folder */
    static const char *const tries[] = {"%s/tokenizer.model", "%s/tokenizer/tokenizer.model",
                                        "%s/../tokenizer/tokenizer.model"};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        int len = snprintf(buf, size, tries[i], dir);
        if (len > 0 && (size_t)len < size && lv_path_is_file(buf)) return 1;
    }
    /* a GGUF without a tokenizer.model beside it: its tokenizer.ggml.* metadata */
    if (lv_path_is_file(encoder) && lv_path_ends_with(encoder, ".gguf") && strlen(encoder) < size) {
        snprintf(buf, size, "%s", encoder);
        return 1;
    }
    buf[0] = 0;
    return 0;
}
