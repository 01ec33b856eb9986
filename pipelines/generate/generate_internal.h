/* Shared by the generation sources: the opened model (pipelines/generate/gen_model.c) and the
 * resume file (pipelines/generate/resume_state.c). */
#ifndef LONGVK_GENERATE_INTERNAL_H
#define LONGVK_GENERATE_INTERNAL_H

#include "longvk/dit.h"
#include "longvk/generate.h"
#include "longvk/sana.h"

typedef struct lv_gen_model {
    lv_sana_file *file;
    lv_model_card card;
    lv_text_tables text;           /* models with a vocabulary: the word tables */
    char name[256];                /* the path, or "the default model" */
} lv_gen_model;

/* path NULL: the default model compiled into the library. */
lv_status lv_gen_model_open(const char *path, lv_gen_model *m);
void lv_gen_model_close(lv_gen_model *m);

typedef struct lv_gen_resume {
    int chunks_done;
    int64_t frames_done;
} lv_gen_resume;

/* Write the resume file (atomically) after `chunks_done` chunks; last_frame [frame_values]
 * is the last chunk's last frame (model space), which a warm-started chunk starts from.
 * chunks_done 0 (ctx and dit may be NULL): the run is starting, nothing is carried yet. */
lv_status lv_gen_resume_save(lv_ctx *ctx, lv_dit *dit, const char *path, const lv_generate_options *o,
                             const lv_gen_model *m, int chunks_done, int64_t frames_done,
                             const float *last_frame, int64_t frame_values);
/* Read it back into the dit's carried state and last_frame [frame_values], checking that
 * it belongs to the same run (model, prompt, seed, sizes, schedule). */
lv_status lv_gen_resume_load(lv_ctx *ctx, lv_dit *dit, const char *path, const lv_generate_options *o,
                             const lv_gen_model *m, lv_gen_resume *out, float *last_frame,
                             int64_t frame_values);

int lv_generate_chunk_frames(int total, int block_frames, int chunk);
int lv_generate_chunk_count(int total, int block_frames);

#endif
