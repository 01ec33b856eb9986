/* SANA-Video tensor names: what a config needs (original names and shapes, in model order),
 * how the diffusers layout names the same tensors, and what checkpoints carry but never use. */
#ifndef LONGVK_SANA_NAMES_H
#define LONGVK_SANA_NAMES_H

#include <stdint.h>

#include "longvk/sana.h"

#define SANA_NAME_MAX LV_SANA_NAME_MAX

/* Every tensor the model uses: lv_sana_expected_tensors (longvk/sana.h, sana_names.c). */

/* The diffusers names of original tensor `original`: 1 for a plain rename, 2 or 3 for parts
 * that are concatenated along the first dimension (q/k/v). 0 when it has none. */
int sana_diffusers_parts(const char *original, char parts[3][SANA_NAME_MAX]);

/* Tensors SANA-Video checkpoints carry but inference never reads. */
int sana_is_known_unused(const char *name);

/* N for "blocks.N.*" (original) or "transformer_blocks.N.*" (diffusers); -1 otherwise. */
int sana_block_index(const char *name, lv_sana_naming naming);

/* 1 when `name` is a non-block tensor of that naming (x_embedder.proj.weight, ...). */
int sana_is_top_level_name(const char *name, lv_sana_naming naming);

/* 1 when `name` is a SANA-Video tensor name of that naming: top-level, or a block tensor with
 * a known suffix (blocks.N.attn.qkv.weight, transformer_blocks.N.attn1.to_q.weight, ...). */
int sana_is_model_name(const char *name, lv_sana_naming naming);

#endif
