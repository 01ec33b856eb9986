/* The tiny diffusers pipeline folder that `longvk generate --model DIR` runs in the generate
 * tests, built from the test models of assets/: model_index.json, text_encoder/ (the tiny
 * Gemma-2), tokenizer/ (its SentencePiece model), transformer/ (the tiny SANA-Video DiT with
 * its caption projection widened to Gemma's hidden size 96) and vae/ (the tiny Wan2.1 VAE).
 * `assets` is the assets folder; the macros pass LONGVK_ASSETS_DIR (defined for test
 * executables). Failures fail the test. */
#ifndef LONGVK_TS_TINY_PIPELINE_H
#define LONGVK_TS_TINY_PIPELINE_H

/* The tiny DiT (tiny-hd32) with caption_channels `cap`, written to `path`:
 * y_embedder.y_proj.fc1.weight [64, cap] drawn afresh (seed 4301, in [-0.5, 0.5)), every
 * other tensor as in tiny-hd32. */
void ts_write_tiny_dit_in(const char *assets, const char *path, int cap);
#define ts_write_tiny_dit(path, cap) ts_write_tiny_dit_in(LONGVK_ASSETS_DIR, (path), (cap))
/* The pipeline folder made at `dir` (its files written over); returns the folder's path in
 * a static buffer (valid until the next call). ts_make_tiny_pipeline(name) makes it in the
 * test's scratch directory. */
const char *ts_make_tiny_pipeline_in(const char *assets, const char *dir);
#define ts_make_tiny_pipeline(name) ts_make_tiny_pipeline_in(LONGVK_ASSETS_DIR, ts_tmp(name))

#endif
