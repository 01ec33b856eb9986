/* Shared by the generation sources: the opened model (pipelines/generate/gen_model.c) and the
 * resume file (pipelines/generate/resume_state.c). The text encoders are pipelines/text's
 * (longvk/text.h). */
#ifndef LONGVK_GENERATE_INTERNAL_H
#define LONGVK_GENERATE_INTERNAL_H

#include "longvk/dit.h"
#include "longvk/gemma2.h"
#include "longvk/generate.h"
#include "longvk/sana.h"
#include "longvk/sana_prompt.h"
#include "longvk/text.h"

typedef struct lv_gen_model {
    lv_sana_file *file;
    bool pipeline;                 /* opened from a diffusers pipeline folder: */
    lv_pipeline_dir parts;         /* its components ("" where absent) */
    lv_model_card card;
    lv_text_tables text;           /* models with a vocabulary: the word tables */
    char name[256];                /* the path, or "the default model" */
} lv_gen_model;

/* path NULL: the default model compiled into the library; a diffusers pipeline folder:
 * its transformer/. */
lv_status lv_gen_model_open(const char *path, lv_gen_model *m);
void lv_gen_model_close(lv_gen_model *m);

/* A latent model's VAE decoder in the resume file (generate_vae_history.c): how many latent
 * frames it has decoded, in which tiles, and the last of them (at most lv_vae_history_frames),
 * which --resume decodes again, dropping their frames, to put back its causal history. */
typedef struct lv_gen_vae_state {
    int64_t fed;                 /* latent frames the decoder has taken since the video's start */
    int tile_h, tile_w, overlap; /* the tiles chosen (lv_vae_tiling; tile_h 0: whole frames) */
    int64_t kept;                /* latent frames in latents: min(fed, lv_vae_history_frames) */
    float *latents;              /* [kept, C, H, W], oldest first (read: malloc'd) */
} lv_gen_vae_state;

typedef struct lv_gen_resume {
    int chunks_done;
    int64_t frames_done;
    char *live;          /* the switches pushed during the run (lv_gen_live_record; malloc'd), or NULL */
    lv_gen_vae_state vae; /* a latent model with a VAE: its decoder (latents NULL otherwise) */
} lv_gen_resume;

/* Write the resume file (atomically) after `chunks_done` chunks: state [state_count] is the
 * dit's carried state (lv_dit_state_save; ignored when chunks_done is 0: the run is starting,
 * nothing is carried yet), last_frame [frame_values] the last chunk's last frame (model
 * space), which a warm-started chunk starts from. The file does not depend on how many
 * sequence-parallel bands made the state (the state is whole). */
lv_status lv_gen_resume_save(const char *path, const lv_generate_options *o, const lv_gen_model *m,
                             const char *input, int chunks_done, int64_t frames_done, const float *state, int64_t state_count,
                             const float *last_frame, int64_t frame_values, const float *recent,
                             int64_t recent_count, const char *live, const lv_gen_vae_state *vae);
/* input: what the run continues (a clip's CRC-32; "" or NULL: nothing), part of the run's
 * identity. live (NULL: none, the file as before): the switches pushed during the run, a
 * "live" metadata record the checksum covers.
 * recent [recent_count] (NULL: none, the file as before): with --on-switch recache the last
 * blocks kept (gen_run.hist), a third tensor "recent_blocks" the checksum covers.
 * vae (NULL: none, a pixel model's file as before): a latent model's decoder, "vae_fed" and
 * "vae_tiles" in the position record and the tensor "vae_latents" [kept x frame_values],
 * all covered by the checksum. */
/* Read it back, checking that it belongs to the same run (model, prompt, seed, sizes,
 * schedule): the position, the carried state into *state (malloc'd; NULL and 0 when no
 * block was made), for lv_dit_state_load, and last_frame [frame_values]. Host only: one
 * process reads it and hands it to the others. vae: the run decodes latents (out->vae read;
 * its latents malloc'd, the caller frees them). */
lv_status lv_gen_resume_read(const char *path, const lv_generate_options *o, const lv_gen_model *m,
                             const char *input, lv_gen_resume *out, float **state, int64_t *state_count, float *last_frame,
                             int64_t frame_values, float *recent, int64_t recent_count, bool vae);

/* The schedule as the resume file records it (NULL: none; malloc'd). */
char *lv_gen_schedule_identity(const lv_generate_options *o);
/* --image as the resume file records it: the CRC-32 and size of the file's bytes (NULL: no
 * image; malloc'd; "unreadable" when it cannot be read). */
char *lv_gen_image_identity(const lv_generate_options *o);
/* A file by its content, "crc32:XXXXXXXX, N bytes" (zlib's CRC-32), "unreadable" when it
 * cannot be read; malloc'd (NULL: out of memory). The run identity's record of an input file:
 * the same file moved is the same run, an edited one another (the image, --text-embeds). */
char *lv_gen_file_identity(const char *path);

int lv_generate_chunk_frames(int total, int block_frames, int chunk);
int lv_generate_chunk_count(int total, int block_frames);

#endif
