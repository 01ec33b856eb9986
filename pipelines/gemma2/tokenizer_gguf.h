/* A SentencePiece model built from a GGUF's tokenizer metadata (tokenizer_gguf.c), for
 * tokenizer.cc to load like a tokenizer.model. */
#ifndef LONGVK_TOKENIZER_GGUF_H
#define LONGVK_TOKENIZER_GGUF_H

#include <stddef.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the file at `path` starts with GGUF's magic. */
int lv_tokenizer_is_gguf(const char *path);
/* The serialized ModelProto (malloc'd into *proto, *len bytes) of the GGUF at `path`:
 * tokenizer.ggml.model "llama" (SentencePiece), tokens, scores and token_type. Errors name
 * the file and the key. */
lv_status lv_tokenizer_gguf_proto(const char *path, char **proto, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
