/* SentencePiece tokenizers (Gemma's tokenizer.model), through libsentencepiece
 * (pipelines/gemma2/tokenizer.cc: the library's only C++ file).
 *
 *   lv_tokenizer *tok;
 *   if (lv_tokenizer_open("tokenizer.model", &tok) != LV_OK) fprintf(stderr, "%s\n", lv_last_error());
 *   int32_t ids[300]; int n, needed;
 *   lv_tokenizer_encode(tok, text, strlen(text), LV_TOKENIZE_GEMMA, ids, 300, &n, &needed);
 *   lv_tokenizer_close(tok);
 *
 * An lv_tokenizer is read-only once open: several threads may encode with it at once. */
#ifndef LONGVK_TOKENIZER_H
#define LONGVK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lv_tokenizer lv_tokenizer;

/* The longest text lv_tokenizer_encode accepts (bytes); longer text is LV_ERR_LIMIT. */
#define LV_TOKENIZER_MAX_TEXT (16u << 20)

/* `path`: a SentencePiece model file, or a directory holding tokenizer.model (a Hugging
 * Face model or diffusers tokenizer folder) or tokenizer/tokenizer.model (a diffusers
 * pipeline folder), or a GGUF file (llama.cpp's: the model built from its tokenizer.ggml.*
 * metadata, tokenizer.ggml.model "llama", with Gemma's encoding flags; tokenizer_gguf.c).
 * A missing file is LV_ERR_IO; a file that is not a SentencePiece model (a GGUF without a
 * tokenizer) LV_ERR_FORMAT; both messages name the path. */
lv_status lv_tokenizer_open(const char *path, lv_tokenizer **out);
/* The tokenizer.model of a text encoder (a folder, or a weights file inside one): in it, in
 * its tokenizer/, or in ../tokenizer/ (a diffusers text_encoder/ beside tokenizer/); failing
 * those, a *.gguf encoder file itself (its tokenizer metadata). 1 and the path in buf when
 * found; 0 and "" when not. */
int lv_tokenizer_find(const char *encoder, char *buf, size_t size);
void lv_tokenizer_close(lv_tokenizer *tok);

/* Flags of lv_tokenizer_encode. */
#define LV_TOKENIZE_BOS 1u     /* prepend <bos> (no <eos> is ever appended) */
#define LV_TOKENIZE_SPECIAL 2u /* the text of a control piece ("<eos>", "<bos>", "<pad>",
                                  "<unk>") in the input becomes its id, as Hugging Face
                                  tokenizers do; without it SentencePiece spells it out.
                                  User-defined pieces (<start_of_turn>) are matched either way. */
/* What Gemma's Hugging Face tokenizer does (SANA-Video's text encoder input). */
#define LV_TOKENIZE_GEMMA (LV_TOKENIZE_BOS | LV_TOKENIZE_SPECIAL)

/* Tokenizes `len` bytes of UTF-8 `text` (NUL bytes included; invalid UTF-8 becomes
 * replacement characters, as SentencePiece does). Writes the first min(needed, max_ids) ids
 * to `ids` (NULL when max_ids is 0): a text with more tokens is truncated on the right, as
 * Hugging Face's truncation=True does. *n receives the count written, *needed (may be NULL)
 * the count of the whole text. */
lv_status lv_tokenizer_encode(const lv_tokenizer *tok, const char *text, size_t len, unsigned flags,
                              int32_t *ids, int max_ids, int *n, int *needed);

/* Pieces back to text (control pieces dropped, bytes fused, U+2581 to spaces) into buf
 * (NUL-terminated, truncated to size); *len (may be NULL) receives the full length. */
lv_status lv_tokenizer_decode(const lv_tokenizer *tok, const int32_t *ids, int n, char *buf,
                              size_t size, size_t *len);

int lv_tokenizer_vocab_size(const lv_tokenizer *tok);
/* The piece of `id` ("▁the", "<bos>", "<0x0A>"); NULL outside the vocabulary. */
const char *lv_tokenizer_piece(const lv_tokenizer *tok, int id);
/* Special ids, -1 when the model has none. */
int lv_tokenizer_bos_id(const lv_tokenizer *tok);
int lv_tokenizer_eos_id(const lv_tokenizer *tok);
int lv_tokenizer_pad_id(const lv_tokenizer *tok);
int lv_tokenizer_unk_id(const lv_tokenizer *tok);
/* The model file read. */
const char *lv_tokenizer_path(const lv_tokenizer *tok);

#ifdef __cplusplus
}
#endif
#endif
