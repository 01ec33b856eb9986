/* One generation's state (gen_run) and the pieces of lv_generate, one concern per file:
 *   generate.c          the run: setting up, the loop over the blocks, closing
 *   generate_options.c  checking the caller's options and resolving them against the model's card
 *   generate_text.c     the prompt to the rows the DiT reads (and shared between processes)
 *   generate_twin.c     CFG's twin (the unconditional passes on a second context)
 *   generate_output.c   frames to the encoder / frame sink / .npy, the video file's life
 *   generate_resume.c   the resume file: written after every block, read by --resume; interruption
 *   generate_progress.c progress reports and the ETA
 *   generate_describe.c what a run will do (lv_generate_describe), before it starts
 *   generate_schedule.c a prompt schedule: its times to blocks, its texts, each block's switch
 *   generate_image.c    --image: the picture the video starts from, to the first chunk's frame 0
 *   generate_continue.c continuing a clip: its frames into the model's space, committed
 *   generate_live.c     prompts pushed during the run (--prompts-from): switches at the next block
 *   generate_vae_tiles.c the VAE in spatial tiles (--vae-tiles): chosen, reported, decoding a block
 *   generate_vae_history.c the latent frames the VAE decoded last, kept for the resume file, and
 *                       decoded again by --resume to put back the decoder's causal history
 *   generate_vae_encode.c a latent model's pixel frames to its latents: the VAE's encoder half
 *   generate_plan.c     the device-memory plan, checked against the device's budget before any upload */
#ifndef LONGVK_GENERATE_RUN_H
#define LONGVK_GENERATE_RUN_H

#include "generate_internal.h"
#include "longvk/codec.h"
#include "longvk/frame_writer.h"
#include "longvk/sp_comm.h"
#include "longvk/vae.h"
#include "longvk/weights.h"

/* A schedule entry resolved against the run (generate_schedule.c). */
typedef struct gen_switch {
    int64_t asked;       /* the frame its time names */
    int64_t frame;       /* the first frame of the block holding it: where it applies */
    int block;           /* that block among the written ones (0-based) */
    int64_t transition;  /* frames its conditioning takes to move from the entry before */
    int text;            /* its rows in texts_y / texts_mask (the same for the same texts) */
    const char *prompt, *negative; /* borrowed from the options, or own_* */
    char *own_prompt, *own_negative; /* a switch pushed during the run: its copies (freed with the run) */
    bool live;           /* pushed during the run (generate_live.c): recorded in the resume file */
} gen_switch;

/* Continuing a clip (generate_continue.c): the clip's blocks and what is read of it. */
typedef struct gen_clip {
    int frames;              /* model frames of the clip (0: no clip) */
    int chunks;              /* its blocks, cut as a run of that many frames cuts them */
    int commit_from;         /* the first of them committed (the state holds the later ones) */
    int pixel_frames;        /* the clip's pixel frames used (a latent model: 1 + 4 (frames - 1)) */
    int dropped;             /* a latent model's: pixel frames past the last 1 + 4k, not used */
    bool prime_decoder;      /* a latent model with a VAE: the clip's latents decoded first */
    float *latents;          /* a latent model: the clip encoded, [C, frames, grid_h, grid_w] */
    lv_decoder *dec;         /* the video being read (NULL: frames from memory) */
    int64_t next_frame;      /* the decoder's next frame */
    int in_w, in_h;          /* the video's frame size, and the centred crop of the model's aspect */
    int crop_x, crop_y, crop_w, crop_h;
    uint8_t *rgb;            /* one decoded frame */
    float *out;              /* a block at the output's size, for --continue-output whole */
    char identity[160];      /* the clip in the run's identity (its CRC-32; resume) */
} gen_clip;

/* A chunk of the run (burn-in included), as lv_gen_chunk describes it. */
typedef enum gen_chunk_kind { GEN_CHUNK_BURN_IN, GEN_CHUNK_CLIP, GEN_CHUNK_NEW } gen_chunk_kind;
typedef struct gen_chunk {
    gen_chunk_kind kind;
    int index;               /* among its kind */
    int frames;
    int first;               /* its first frame among its kind's (clip or new frames) */
    int out_first;           /* its first model frame in the output (after the clip's with whole) */
    int position;            /* RoPE frame offset: the frames an uninterrupted run made before it */
    bool made;               /* denoised by the sampler (a burn-in or new block) */
    bool committed;          /* added to the carried state (made, or a clip block the state holds) */
    bool read;               /* a clip block whose frames are read */
    bool written;            /* its frames go to the output */
} gen_chunk;

/* One generation: the resolved options and everything it holds. */
typedef struct gen_run {
    lv_generate_options o;
    lv_gen_model m;
    char state_path[4096];
    char output_target[4096]; /* o.output with symbolic links resolved (lv_output_target) */
    char vae_file[4200];      /* o.vae_path's weights file (a folder given names its file) */
    int grid_h, grid_w;      /* the model's frame size: pixels, or latents for latent models */
    int units;               /* model frames to make: pixel frames, or latent frames */
    int chunks;              /* chunks of the video (the burn-in not counted) */
    int text_len;
    float *y, *mask;         /* [2, L, caption] and [2, L]: prompt, negative prompt */
    bool use_encoder;        /* the text goes through a Gemma-2 encoder (latent models) */
    lv_text_encoder *text;   /* its files and the tokenized prompts, until it has run */
    uint64_t text_memory;    /* the encoder's device bytes at most (0: none ran) */
    double text_seconds;
    lv_ctx *ctx;
    lv_dit *dit;
    lv_dit_twin *twin;       /* CFG's unconditional passes on a second context, or NULL */
    lv_encoder *enc;
    lv_weights *vae_weights;
    lv_vae_decoder *vae;
    uint64_t vae_weight_bytes; /* the device bytes its weights took (measured when it was made) */
    bool vae_chosen;         /* tiled or not is decided (at the first block decoded) */
    lv_vae_tile_stream *vae_stream; /* decoding in tiles, or NULL */
    lv_vae_tiling vae_tiling;  /* the tiles chosen (tile_h 0: whole frames) */
    bool vae_forced;         /* --resume: vae_tiling is the interrupted run's choice, not chosen again */
    /* the latent frames the decoder took (generate_vae_history.c): vae_fed since the video's
     * start, the last vae_ring_cap (lv_vae_history_frames) of them in a ring of frames
     * [vae_ring_cap, C, H, W] (the writing process's); --resume's are in vae_resume until the
     * decoder exists */
    int64_t vae_fed;
    float *vae_ring;
    int vae_ring_cap;
    lv_gen_vae_state vae_resume;
    lv_generate_callback progress; /* the caller's progress callback (the VAE's choice is reported) */
    void *progress_user;
    float *x0;               /* one chunk */
    lv_frame_writer writer;  /* frames to the encoder and the frame sink (the writing process) */
    float *last_frame;       /* the last chunk's last frame [C, H, W] (model space) */
    int64_t frame_values;    /* C * H * W */
    float *latents;          /* latent model without a VAE: every latent frame, for the .npy */
    int64_t frames_done;     /* output frames (pixel frames; latent frames without a VAE) */
    int64_t frames_total;    /* the same, of the whole video */
    lv_block_recipe first;   /* a block made from the text alone: the first, or every block
                                when no state is carried */
    lv_block_recipe later;   /* a block that continues the earlier ones */
    bool uncond;             /* some block uses CFG: text slot 1 holds the negative prompt */
    /* the ETA's clock: forward passes done this run, and when the first step of this
     * run's first block ended (it pays for compiling every kernel: not a rate to go by) */
    double t_start, warm_end, warm_work, work_done;
    int blocks_made;         /* by this run */
    bool wrote_start_state;  /* a fresh run's resume file, written before its first block */
    bool stopped_in_text;    /* stopped on request while the text encoder ran (nothing made) */
    /* HLS output: the frames of the resume file on disk (the last lv_gen_save_state), and
     * those the playlist named at the last look (-1: not looked yet); see generate_resume.c */
    int64_t saved_frames, hls_named;
    lv_sp_comm *sp;          /* sequence parallelism over processes (o.sp_comm), or NULL */
    bool root;               /* this process writes the video and the resume file (band 0's) */
    gen_switch *sw;          /* the prompt schedule (nsw 0: none) */
    int nsw, ntexts;
    float *texts_y, *texts_mask; /* [ntexts, 2, L, caption], [ntexts, 2, L]: each distinct text */
    const lv_gen_switch *entries; /* the schedule given: o.schedule, or live_first (--prompts-from alone) */
    lv_gen_switch live_first;     /* -p as entry 0 when only prompts pushed during the run switch */
    lv_text_encoder *live_text;   /* the word tables for prompts pushed during the run (opened at the first) */
    int cond_switch;         /* the conditioning the DiT holds: entry, and how far its transition is */
    double cond_alpha;
    /* --on-switch recache: the last hist_slots finished blocks (K + 1), slot c % hist_slots:
     * [hist_slots, HIST_HEAD + C x 2B x H x W] floats, each slot its chunk index (-1: none),
     * frames and position, then the clean latents [C, frames, H, W] */
    float *hist;
    int hist_slots;
    int64_t hist_stride;
    /* --image: the clean leading frames of the video's first chunk (lv_chunk_options.cond),
     * [C, cond_frames, grid_h, grid_w]; NULL / 0: none */
    float *cond;
    int cond_frames;
    float *image;            /* --image with a latent model: the fitted picture [3, 1, H, W] until encoded */
    const char *encoder_vae; /* a latent model writing .npy latents: the VAE for the encoder only */
    gen_clip clip;           /* continuing a clip (none: clip.frames 0) */
} gen_run;

#define LV_GEN_HIST_HEAD 3

/* generate.c */
double lv_gen_now(void);
/* More than one process makes this video: bands (sp_comm), a CFG partner, or both. */
bool lv_gen_several(const gen_run *r);
/* data from the writing process to every other (see generate.c) */
lv_status lv_gen_share(gen_run *r, void *data, uint64_t bytes);
/* Tokens a frame of the model's grid makes. */
int64_t lv_gen_frame_tokens(const gen_run *r);
/* The recipe of block `chunk` (burn-in included). */
const lv_block_recipe *lv_gen_recipe_of(const gen_run *r, int chunk);

/* generate_options.c */
/* What can be checked before the model is opened: every value the caller set. */
lv_status lv_gen_check_options(const lv_generate_options *o);
/* The options against the opened model (r->m): r->o and the run's sizes and recipes. */
lv_status lv_gen_resolve_options(const lv_generate_options *in, gen_run *r);

/* generate_plan.c: the plan once r->ctx exists (twin: CFG's twin will run), and the refusal
 * (LV_ERR_NOMEM naming the figures and the settings that would fit) when it exceeds the budget */
lv_status lv_gen_plan(gen_run *r, bool twin, lv_generate_plan *plan);
lv_status lv_gen_plan_check(const gen_run *r, const lv_generate_plan *plan);

/* generate_text.c */
/* The prompt (and with CFG the negative prompt) into r->y / r->mask, or tokenized for the
 * text encoder that lv_gen_encode_text runs once the device is up. */
lv_status lv_gen_prepare_text(gen_run *r, void (*warn)(void *, const char *), void *user);
lv_status lv_gen_encode_text(gen_run *r, lv_generate_callback progress, void *user, volatile sig_atomic_t *stop);
lv_status lv_gen_share_text(gen_run *r);
lv_status lv_gen_save_text_embeds(const gen_run *r, const char *path);

/* generate_twin.c */
bool lv_gen_use_twin(const gen_run *r, int cpu_threads);
/* Text slot 0: the prompt; slot 1, when some block uses CFG: the negative prompt. */
lv_status lv_gen_set_texts(const gen_run *r, lv_ctx *ctx, lv_dit *dit);
lv_status lv_gen_twin_open(gen_run *r, const lv_ctx_options *copt, const lv_dit_options *dopt);
lv_status lv_gen_twin_copy_state(gen_run *r, int64_t chunks);

/* generate_output.c */
lv_status lv_gen_alloc_buffers(gen_run *r);
bool lv_gen_writes_video(const gen_run *r);
lv_status lv_gen_open_video(gen_run *r, int64_t keep_frames, lv_encoder **out);
lv_status lv_gen_probe_output(gen_run *r);
lv_status lv_gen_emit_chunk(gen_run *r, int f0, int n);
void lv_gen_keep_last_frame(gen_run *r, int n);
/* Closes the video (or writes the .npy) after a run that ended with s; returns the run's status. */
lv_status lv_gen_close_output(gen_run *r, lv_status s);

/* generate_resume.c */
lv_status lv_gen_save_state(gen_run *r, int chunks_done, int64_t frames_done);
lv_status lv_gen_load_resume(gen_run *r, int *first_chunk);
/* HLS output (-o OUT.m3u8): the resume file kept for the frames the playlist names, taken
 * after a block is written and before its own resume file replaces the last; the name of
 * that file (STATE-segment); whether a state file to resume from is there. */
bool lv_gen_hls_output(const gen_run *r);
lv_status lv_gen_hls_segment_state(gen_run *r);
void lv_gen_segment_state_path(const gen_run *r, char *out, size_t size);
bool lv_gen_resume_file_exists(const gen_run *r);
lv_status lv_gen_interrupted(const gen_run *r, int next);
/* The run writes a resume file: block-wise generation of a pixel-space model, or of a latent
 * model decoded by a VAE into a video (not a latent model's .npy: its latents are kept in
 * memory until the end) */
bool lv_gen_resumable(const gen_run *r);

/* generate_schedule.c */
lv_status lv_gen_resolve_schedule(gen_run *r);
/* every distinct text: the word tables' rows now; Gemma-2's tokenized now (the longest left in
 * r->text), encoded by lv_gen_schedule_encode on the writing process once the device is up */
lv_status lv_gen_schedule_texts(gen_run *r, void (*warn)(void *, const char *), void *user);
lv_status lv_gen_schedule_encode(gen_run *r, lv_ctx *ctx, uint64_t *peak);
/* the host bytes of the rows kept for the run */
uint64_t lv_gen_schedule_rows_bytes(const gen_run *r);
lv_status lv_gen_schedule_block(gen_run *r, int chunk, int *started);
void lv_gen_schedule_report(const gen_run *r, int i, lv_generate_progress *p);
/* the switches at shown blocks < shown_blocks (the ones applied once that many are started) */
lv_status lv_gen_schedule_write(const gen_run *r, int shown_blocks);
/* --on-switch recache: chunk c (made at `position`, n frames, in r->x0) kept; and the
 * carried state rebuilt under the conditioning just set, before chunk c */
void lv_gen_schedule_keep_block(gen_run *r, int c, int position, int n);
lv_status lv_gen_schedule_recache(gen_run *r, int c);

/* generate_image.c */
/* What a run with --image cannot be (a latent model without a VAE encoder, a burn-in asked
 * for): with the other options, before anything is opened or written. */
lv_status lv_gen_image_check(const gen_run *r, const lv_generate_options *in);
/* Reads the image and fits it to the model (r->cond, r->cond_frames); warn says what was
 * cropped when its aspect ratio is not the model's. */
lv_status lv_gen_prepare_image(gen_run *r, void (*warn)(void *, const char *), void *user);
/* The last conditioning frame into r->last_frame: a warm-started first block starts from it. */
void lv_gen_keep_cond_frame(gen_run *r);
/* A latent model's picture through the VAE encoder into r->cond (the writing process encodes,
 * the others get its latents), then lv_gen_keep_cond_frame: on the run's context, before the
 * DiT is uploaded. Nothing to do for a pixel model or a run without --image. */
lv_status lv_gen_encode_image(gen_run *r);
/* generate_vae_encode.c */
/* The VAE file a latent model's run uses (--vae, or the pipeline folder's vae/), or NULL. */
const char *lv_gen_vae_path(const gen_run *r);
/* Refused unless that file holds the encoder half (flag: the option that needs it). */
lv_status lv_gen_vae_encoder_check(const gen_run *r, const char *flag);
/* rgb [3, T, o.height, o.width] in [-1, 1] into the model's normalised latents
 * [C, lv_vae_encoded_frames(T), grid_h, grid_w]: the encoder created on r->ctx, run, freed. */
lv_status lv_gen_vae_encode(const gen_run *r, const char *flag, const float *rgb, int T, float *latents);
/* generate_continue.c */
/* The clip against the run (after the options are resolved): read, counted, checked. */
lv_status lv_gen_resolve_continue(gen_run *r);
/* What the run says about the clip before its first block (its size policy, its fps). */
void lv_gen_continue_warn(const gen_run *r, void (*warn)(void *, const char *), void *user);
/* Chunks of the run, burn-in and clip included; chunk c of them. */
int lv_gen_total_chunks(const gen_run *r);
gen_chunk lv_gen_chunk(const gen_run *r, int c);
/* Frames written (the video's: a latent model's through the VAE are pixel frames), and blocks
 * committed to the state, once `chunks_done` chunks are done. */
int64_t lv_gen_frames_after(const gen_run *r, int chunks_done);
int lv_gen_committed_after(const gen_run *r, int chunks_done);
/* Model frames in the output (the new ones, and the clip's with --continue-output whole), and
 * the video's frames (pixel frames; a latent model's through the VAE, or latent frames). */
int lv_gen_written_units(const gen_run *r);
int64_t lv_gen_output_frames(const gen_run *r);
/* A latent model's clip read at the model's pixel size and encoded by the VAE into clip.latents:
 * on the run's context before the DiT is uploaded. Nothing to do otherwise. */
lv_status lv_gen_continue_encode(gen_run *r);
/* Opens the clip for a run starting at chunk first_chunk (resumed or not). */
lv_status lv_gen_continue_open(gen_run *r, int first_chunk);
/* A clip chunk: its frames into r->x0 (model space), committed when k->committed, and to
 * the output when k->written. */
lv_status lv_gen_continue_block(gen_run *r, const gen_chunk *k);
void lv_gen_continue_free(gen_run *r);
/* generate_live.c */
/* Before chunk c (burn-in included): the lines pushed since, each a switch at the next shown
 * block not yet started or later; what is not applied, and the input's end, said through warn. */
lv_status lv_gen_live_poll(gen_run *r, int c, void (*warn)(void *, const char *), void *user);
/* After the last block: lines that came too late, reported. */
void lv_gen_live_after(gen_run *r, void (*warn)(void *, const char *), void *user);
/* The switches pushed during the run at shown blocks < shown_done, as the resume file's "live"
 * record (JSON; malloc'd; NULL without --prompts-from), and read back by --resume. */
char *lv_gen_live_record(const gen_run *r, int shown_done);
lv_status lv_gen_live_restore(gen_run *r, const char *record, const char *path);

/* generate_vae_history.c */
/* n latent frames x [C, n, H, W] the decoder has just taken: the last of them kept. */
void lv_gen_vae_keep(gen_run *r, const float *x, int n);
/* The decoder's record for the resume file (*out; out->latents malloc'd, the caller frees). */
lv_status lv_gen_vae_record(const gen_run *r, lv_gen_vae_state *out);
/* Latent frames the decoder has taken once chunks_done chunks are done (the check of a resume
 * file's record). */
int64_t lv_gen_vae_fed_after(const gen_run *r, int chunks_done);
/* --resume, once the decoder exists: the kept latent frames (r->vae_resume) decoded again,
 * their frames dropped, in the interrupted run's tiles; nothing when none was decoded. */
lv_status lv_gen_vae_reprime(gen_run *r);
/* A clip's latent frames (x [C, n, H, W]) through the decoder, their frames dropped: the
 * history that new frames continue (--continue). */
lv_status lv_gen_vae_prime(gen_run *r, const float *x, int n);

/* generate_vae_tiles.c */
/* The options' VAE tiles (lv_gen_check_options). */
lv_status lv_gen_check_vae_tiles(const lv_generate_options *o);
/* A finished latent chunk of n frames (r->x0) through the VAE into r->writer, tiled or not as
 * chosen at the first call (and reported through r->progress). */
lv_status lv_gen_vae_decode(gen_run *r, int n);
/* The same for x [C, n, H, W] with every frame to fn (NULL: dropped). */
lv_status lv_gen_vae_decode_to(gen_run *r, const float *x, int n, lv_vae_frame_fn fn, void *user);
void lv_gen_vae_tiles_free(gen_run *r);

/* generate_progress.c */
double lv_gen_recipe_work(const gen_run *r, const lv_block_recipe *rec);
void lv_gen_on_step(void *user, int step, int passes);
double lv_gen_eta_seconds(const gen_run *r, int next, int total);
void lv_gen_report_progress(gen_run *r, lv_generate_callback progress, void *user, int block, int blocks, int burn,
                            int64_t frames_at_start, int64_t frames_total);

#endif
