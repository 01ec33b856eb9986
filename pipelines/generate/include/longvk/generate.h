/* Long-video generation (pipelines/generate/generate.c): a model, a prompt and a length in; a video
 * file out, written block by block as LongSANA produces the chunks, with a resume file
 * at every block boundary. Memory does not grow with the length. */
#ifndef LONGVK_GENERATE_H
#define LONGVK_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "longvk/codec.h"
#include "longvk/engine.h"
#include "longvk/sampler.h"
#include "longvk/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a model file says about itself beyond the DiT config: its "longvk" metadata
 * (pipelines/generate/model_card.c). Pixel-space models with a vocabulary can be prompted with
 * text; the others need prompt embeddings. */
#define LV_CARD_MAX_VOCAB 1024
#define LV_CARD_MAX_STEPS 32
#define LV_CARD_MAX_BURN_IN 4096

/* How a block is denoised: timesteps (model scale, noisiest first), the step rule and CFG
 * (1: prompt only). */
typedef struct lv_block_recipe {
    int steps;
    float timesteps[LV_CARD_MAX_STEPS];
    lv_chunk_sampler sampler;
    double cfg_scale;
    int cfg_last_steps;   /* CFG only at the last this many steps; 0: at every step */
    bool warm_start;      /* start from the previous block's last frame (lv_chunk_options.warm) */
} lv_block_recipe;

typedef struct lv_model_card {
    bool pixel;                  /* "kind": "pixel" (frames are the model's output) */
    int height, width;           /* model resolution in pixels */
    double fps;
    int block_frames;
    int cached_blocks;           /* as lv_dit_options (LV_CACHED_ALL: every earlier chunk) */
    lv_block_recipe later_blocks; /* blocks that continue earlier ones: "sample_timesteps",
                                     "sampler" ("renoise", the default, or "euler"),
                                     "cfg_scale" (default 1), "cfg_last_steps" (default 0:
                                     every step), "warm_start" (default false) */
    lv_block_recipe first_block;  /* "first_block" {timesteps, sampler, cfg_scale,
                                     cfg_last_steps}: a block made
                                     from the text alone, with no earlier block to continue
                                     (default: as the others) */
    int burn_in_blocks;          /* "burn_in_blocks" (default 0): blocks made and committed to
                                    the carried state before the first written frame, then
                                    dropped (lv_generate_options.burn_in_blocks) */
    int text_len;
    int vocab_size;
    char *vocab[LV_CARD_MAX_VOCAB];
} lv_model_card;

/* LongSANA's defaults for a latent-space model without "longvk" metadata (the released
 * SANA-Video weights): 480 x 832 pixels, 16 fps, chunks of 10 latent frames, timesteps
 * 1000, 960, 889, 727, every earlier chunk, no CFG. */
void lv_model_card_longsana(lv_model_card *card);
/* Parse the "longvk" metadata JSON (`source` names it in messages). */
lv_status lv_model_card_parse(const char *json, const char *source, lv_model_card *out);
void lv_model_card_free(lv_model_card *card);
/* The card a model file generates with (path NULL: the embedded default model): its
 * "longvk" metadata, or LongSANA's defaults for a released latent-space model.
 * lv_model_card_free it. */
lv_status lv_model_card_of(const char *path, lv_model_card *out);

/* The card's vocabulary ("vocab", "text_len") as the word tokenizer and the word tables of
 * longvk/text.h take it (borrowed from the card). */
lv_word_vocab lv_model_card_vocab(const lv_model_card *card);
/* The card's tokenizer: lv_word_tokenize over the card's vocabulary (see longvk/text.h for
 * what is a word and what `unknown` receives). Errors: a NULL card, ids or mask, or a card
 * without a vocabulary. */
lv_status lv_model_card_tokenize(const lv_model_card *card, const char *prompt, int *ids,
                                 float *mask, char *unknown, size_t unknown_size);

/* A diffusers pipeline folder (model_index.json): the paths of its components, "" for
 * those absent. transformer, text_encoder and tokenizer are the folders; vae is the
 * weights file in vae/ (diffusion_pytorch_model.safetensors). A folder without
 * model_index.json is LV_ERR_INVALID; transformer/ missing, or a vae/ without its file,
 * LV_ERR_IO naming it (every component found is filled in all the same). */
typedef struct lv_pipeline_dir {
    char transformer[4096], text_encoder[4096], tokenizer[4096], vae[4096];
} lv_pipeline_dir;
lv_status lv_pipeline_dir_open(const char *dir, lv_pipeline_dir *out);
/* 1 when `path` is a folder holding model_index.json. */
int lv_is_pipeline_dir(const char *path);
/* A VAE given as a folder (a pipeline's vae/) names its weights file,
 * diffusion_pytorch_model.safetensors, written to out; a file is copied as it is. A folder
 * without that file is LV_ERR_IO naming it. */
lv_status lv_vae_weights_file(const char *path, char *out, size_t size);

/* The default model compiled into the library (assets/default-model/default.safetensors). */
const void *lv_default_model_data(void);
size_t lv_default_model_size(void);

#define LV_GEN_MODEL_DEFAULT (-1000)

typedef enum lv_gen_sampler {
    LV_GEN_LONGSANA = 0,  /* block by block over the carried state (long videos) */
    LV_GEN_EULER,         /* the base model's single clip: flow-matching Euler */
    LV_GEN_DPMPP_2M       /* the base model's single clip: DPM-Solver++ 2M */
} lv_gen_sampler;

/* A frame: rgb [3, height, width] planes of floats, nominally in [-1, 1] (the encoder clamps
 * and stores uint8(127.5 x + 127.5)); index counts from the video's first frame. Valid only
 * during the call; anything but LV_OK stops the run with that status. */
typedef lv_status (*lv_generate_frame_fn)(void *user, int64_t index, const float *rgb, int height, int width);

typedef struct lv_generate_options {
    const char *model_path;       /* NULL: the embedded default model; a weights file, a
                                     transformer folder or a diffusers pipeline folder */
    /* Latent-space models (SANA-Video): prompt embeddings instead of a prompt (a
     * safetensors file with y [L, caption_channels] and optionally mask [L]), and the
     * VAE that turns latents into frames; without a VAE the latents go to `output`
     * as a float32 .npy [C, F, h, w]. Pixel counts (frames, -W/-H) map to latents
     * through the VAE's stride: 4 frames and 8 x 8 pixels per latent, first frame alone. */
    const char *text_embeds_path;
    const char *vae_path;
    /* Latent-space models prompted with text (SANA-Video): the Gemma-2 text encoder (a
     * folder or weights file, as lv_gemma2_file_open takes) and its SentencePiece tokenizer
     * (NULL: tokenizer.model in or beside the encoder's folder). The prompt goes through
     * SANA-Video's prompt handling (longvk/sana_prompt.h); the encoder runs on the device
     * before the DiT and is freed before the DiT's weights are uploaded. A diffusers
     * pipeline folder given as model_path (model_index.json, transformer/, text_encoder/,
     * tokenizer/, vae/) supplies the encoder, the tokenizer and the VAE that are not given
     * here. text_embeds_path, when set, is used instead of any encoder. */
    const char *text_encoder_path;
    const char *tokenizer_path;
    int text_softcap;             /* the encoder's attention soft-cap: 0 off (SANA-Video's
                                     own runs: transformers' sdpa ignores it), 1 the config's */
    int text_weights_dtype;       /* the encoder's matrix weights on the device, in
                                     weights_dtype's codes (lv_dit_weights = lv_text_weights):
                                     0 as stored, f32, f16, bf16, or quantized to q8_0 / q4_K */
    int motion_score;             /* " motion score: N." appended to the prompt;
                                     LV_GEN_MODEL_DEFAULT: SANA-Video's 10; 0: nothing */
    const char *text_embeds_out;  /* when set: the rows fed to the DiT, written as a safetensors
                                     file that text_embeds_path reads (y, mask, and with CFG
                                     negative_y, negative_mask); with a schedule entry 0's,
                                     and every other distinct text N's as textN.y, textN.mask,
                                     ..., the metadata "schedule_texts" each entry's N */
    const char *prompt;
    const char *negative_prompt;  /* used when cfg_scale != 1 (NULL: empty) */
    int frames;                   /* pixel frames to make; <= 0: seconds x fps */
    double seconds;               /* length when frames <= 0 */
    double fps;                   /* <= 0: the model's */
    int width, height;            /* model resolution; 0: the model's */
    int scale;                    /* integer upscale at encode time (1: none); LV_GEN_MODEL_DEFAULT:
                                     8 for a pixel-space model (the embedded one's 32 x 32
                                     frames), 1 for a latent model */
    lv_gen_sampler sampler;
    int steps;                    /* denoising steps per chunk (single clip: in all, default 50);
                                     0: the model's */
    double shift;                 /* single clip: time-grid shift (<= 0: 8) */
    double cfg_scale;             /* < 0: the model's */
    uint64_t seed;
    int block_frames;             /* <= 0: the model's */
    int cached_blocks;            /* LV_GEN_MODEL_DEFAULT: the model's; otherwise as
                                     lv_dit_options: LV_CACHED_ALL every earlier chunk, K > 0
                                     the last K, 0 no carried state */
    int burn_in_blocks;           /* LV_GEN_MODEL_DEFAULT: the model's. Blocks made before the
                                     first written frame and dropped: the first block, made from
                                     the text alone, is a model's weakest, and the blocks that
                                     continue it can settle what it drew wrong. They cost time,
                                     not memory; none without a carried state or in a single
                                     clip. */
    const char *output;
    lv_encoder_options encoder;
    const char *state_path;       /* resume file (NULL: OUTPUT.longvk-state) */
    bool resume;                  /* continue from state_path */
    int device_index;             /* -1: automatic */
    int cpu_threads;              /* CPU devices (lavapipe): as lv_ctx_options.cpu_threads;
                                     LV_GEN_CPU_THREADS_AUTO: lv_generate_auto_cpu_threads */
    int weights_dtype;            /* the DiT's matrix weights on the device (lv_dit_weights):
                                     0 as stored, or converted to f32, f16 or bf16, or
                                     quantized to q8_0 or q4_K */
    int precision;                /* as lv_ctx_options.precision: LV_PRECISION_AUTO (0),
                                     _F32, _F16 or _BF16 (the DiT's 16-bit activations; at
                                     _F16 also the tensor cores where the device offers them) */
    int parallel_cfg;             /* CFG's unconditional passes on a second context and
                                     thread (lv_dit_twin): 1 on, 0 off, -1 auto: on for a CPU
                                     device running kernels inline (cpu_threads 0) with 2+
                                     cores, or as LONGVK_PARALLEL_CFG=on|off says. Same
                                     frames either way. Off with sequence
                                     parallelism (1 is then an error): the twin's passes
                                     would run beside the bands' collectives. */
    /* Sequence parallelism (pipelines/parallel/README.md), passed to the DiT
     * (lv_dit_options): sp_bands R > 0 splits every pass into R bands of token rows in this
     * process (the reference); sp_comm, borrowed and never freed, is an MPI rank's
     * communicator (longvk/sp_comm_mpi.h), one band per process, every process calling
     * lv_generate with the same options. The sampler stays replicated: every process
     * draws the same noise and gets the whole prediction, so the frames are those of
     * sp_bands R, bit for bit. With a VAE every process of the writing group decodes its
     * band of latent rows (lv_vae_set_sequence_parallel, the same bands or communicator;
     * the frames of an unsplit decode). The process holding band 0 alone writes the video, the
     * .npy and the resume file, reads the resume file (and hands its state to the others)
     * and gets warnings; progress comes to every process (print it on one). The stop flag
     * is agreed at every block boundary, so all processes stop after the same block. It
     * alone runs a Gemma-2 text encoder (and hands the rows on) and a VAE. At most one of
     * sp_bands and sp_comm. */
    int sp_bands;
    struct lv_sp_comm *sp_comm;
    /* CFG parallelism (lv_cfg_partner in longvk/cfg_partner.h; over MPI lv_cfg_split_mpi),
     * borrowed: this process runs one of the two passes of every guided step, its partner
     * the other, and they swap predictions; sp_comm is then this process's group of bands.
     * The conditional group's band 0 alone writes, reads the resume file and runs the text
     * encoder; what it reads goes to its group and from each conditional process to its
     * partner (share); the stop flag is agreed across both groups. The frames are those of
     * one process running both passes (with sp_comm: of sp_bands R), bit for bit.
     * Block-wise generation with CFG at some block only; not with the CFG twin. */
    const lv_cfg_partner *cfg_partner;
    /* Frames to the caller (a program embedding longvk, `bench generate --no-encode`): every
     * frame of the video in order, as the encoder gets it (upscaled by `scale`), on the
     * process that writes. With output NULL there is no file at all: no video, no resume
     * file (resume needs an output). A latent model needs a VAE for frames. */
    lv_generate_frame_fn frame_sink;
    void *frame_user;
    /* A prompt schedule (block-wise generation with a text encoder: a model's word tables,
     * or a latent model's Gemma-2, run once on every distinct text before the DiT is
     * uploaded; not with text_embeds_path; over bands and ranks too, rank 0 encoding):
     * entry 0 at time 0, the others switch the prompt at the block that holds their time
     * (the video's frames: a latent model's pixel frames; see lv_gen_switch and
     * pipelines/generate/README.md, "A prompt schedule"). NULL / 0: `prompt` for the whole
     * video. With a schedule, `prompt` and `negative_prompt` are ignored: entry 0 holds
     * them. */
    const struct lv_gen_switch *schedule;
    int schedule_count;
    double transition;            /* seconds an entry's conditioning takes to move from the
                                     prompt before it to its own, when the entry says nothing */
    int on_switch;                /* lv_gen_on_switch: what a switch does to the carried state */
    /* Where the switches applied are written, in the schedule format with block-exact times
     * (NULL: OUTPUT.schedule; nothing without an output or a schedule). */
    const char *schedule_out;
    /* Image-to-video (SanaImageToVideoPipeline's conditioning): the video starts from this
     * picture (any file FFmpeg decodes: PNG, JPEG, WebP; a video's first frame). Its centre
     * at the model's aspect ratio is area-averaged to the model's size and is the video's
     * frame 0, held clean at timestep 0 while the rest of the first block is denoised;
     * LongSANA's blocks continue from it (pipelines/generate/README.md, "Starting from an
     * image"); a single clip (LV_GEN_EULER, LV_GEN_DPMPP_2M) holds it the same way. No
     * burn-in (the image is the first frame). A latent model takes it through the VAE's
     * encoder (vae_path, or the pipeline folder's vae/, with the encoder half) into latent
     * frame 0. The resume file records the file's CRC-32. NULL: none. */
    const char *image_path;
    /* Continuing a clip (pipelines/generate/README.md, "Continuing a clip"): its frames are
     * brought into the model's space and committed block by block through the write pass
     * (t = 0) at the positions an uninterrupted run gives them, then `frames` (or `seconds`)
     * new frames follow, their noise and RoPE positions those of an uninterrupted run. Only
     * the blocks the state can still hold are committed: the last cached_blocks + 1 (the
     * first of them primes the conv cache), every one (and the burn-in before them) with
     * LV_CACHED_ALL; none without a carried state (the last frame still warm-starts).
     * Either a video file (continue_path; pixel-space models: its frames centre-cropped to
     * the model's aspect, box-averaged to its size, x = byte / 127.5 - 1) or the frames in
     * model space (continue_frames [C, continue_count, H, W], as x0 chunks and the frame sink
     * at scale 1 hold them; a latent model's: its latents). A latent model's video file goes
     * through the VAE's encoder (its 1 + 4k frames to 1 + k latent frames; up to 3 more are
     * not used), `frames` new pixel frames round up to whole latent frames of 4, and the VAE
     * decoder is primed with the clip's latents. Block-wise generation on one process
     * (sp_bands allowed), no schedule. */
    const char *continue_path;
    const float *continue_frames;
    int continue_count;
    int continue_output;          /* lv_gen_continue_output: what the output holds */
    /* Prompts during the run (borrowed; NULL: none): lines pushed from any thread with
     * lv_generate_push_prompt, each a switch at the next block not yet started (see
     * lv_gen_live). The default model (word tables), one process; `prompt` is entry 0
     * when there is no schedule. OUTPUT.schedule is rewritten at each switch, and the resume
     * file records the switches applied. */
    struct lv_gen_live *live;
    /* The VAE in spatial tiles (lv_vae_tile_stream; pipelines/generate/README.md, "The VAE in
     * tiles"): LV_GEN_VAE_TILES_AUTO (0) tiles only when the untiled decode would not fit the
     * device's budget (its largest heap minus what the run holds when the first block is
     * decoded; LONGVK_VAE_BUDGET=BYTES sets it), _OFF never, _FIXED in tiles of vae_tile_h x
     * vae_tile_w latent pixels. Not over sequence-parallel bands (auto then decodes untiled). */
    int vae_tiles;
    int vae_tile_h, vae_tile_w;
    /* The device-memory plan (pipelines/generate/README.md, "The device-memory plan"), made
     * once the device is known and before anything is uploaded: a run whose peak exceeds the
     * device's budget (lv_ctx_memory_budget) is refused with LV_ERR_NOMEM, the message naming
     * the figures and the settings that would fit. plan_only: stop after the plan, nothing
     * uploaded and nothing written. plan_out (may be NULL) receives it. */
    bool plan_only;
    struct lv_generate_plan *plan_out;
} lv_generate_options;

typedef enum lv_gen_vae_tiles {
    LV_GEN_VAE_TILES_AUTO = 0,
    LV_GEN_VAE_TILES_OFF = 1,
    LV_GEN_VAE_TILES_FIXED = 2
} lv_gen_vae_tiles;

/* What a run will hold on the device at its peak, by phase: Gemma-2's (uploaded, run and
 * freed before the DiT), then the DiT beside the VAE decoder (made at the first block's
 * frames) and CFG's twin where it runs. */
typedef struct lv_generate_plan {
    char device[256];
    uint64_t budget;           /* lv_ctx_memory_budget */
    uint64_t text;             /* Gemma-2's weights and work buffers; 0 for the word tables */
    lv_dit_memory_plan dit;    /* a chunk's passes (lv_dit_memory_plan_of) */
    uint64_t twin;             /* CFG's twin: a second DiT's passes on a second context; 0 without */
    uint64_t vae;              /* the VAE decoder (lv_vae_weights_memory); 0 without */
    uint64_t peak;             /* max(text, lv_gen_plan_dit_phase) */
    int chunk_frames, grid_h, grid_w; /* the largest chunk's model frames and grid */
    int text_tokens, text_slots;
    int text_prompts;          /* a prompt schedule's distinct texts, each encoded once (0: none) */
    uint64_t text_rows_host;   /* their rows, kept in host memory for the run (0: none) */
    int weights_dtype;         /* lv_dit_weights */
    lv_dtype stored;           /* the file's matrix weights' dtype */
    lv_precision precision;
} lv_generate_plan;
/* The DiT's phase: max(dit.set_text, with the twin dit.passes + dit.set_text, dit.passes +
 * twin + vae) (pipelines/generate/README.md, "The device-memory plan"). */
uint64_t lv_gen_plan_dit_phase(const lv_generate_plan *plan);

typedef enum lv_gen_continue_output {
    LV_GEN_CONTINUE_WHOLE = 0,    /* the clip's frames, then the new ones: the clip made longer,
                                     itself a clip to continue again */
    LV_GEN_CONTINUE_NEW = 1       /* the new frames only (nothing of the clip re-encoded) */
} lv_gen_continue_output;

/* Prompts typed during a run (pipelines/generate/generate_live.c; `longvk generate
 * --prompts-from`). A queue that any thread fills while lv_generate runs with it as
 * options.live; the run takes the lines waiting before every block (burn-in included). A
 * line is
 *     [+SECONDS | @TIME] PROMPT [| NEGATIVE [| TRANSITION]]
 * PROMPT applies from the next block of the video not yet started (never block 1, which
 * holds the first prompt), or from the block holding that block's first frame + SECONDS, or
 * holding TIME of the video (a TIME already passed: the next block). One switch a block: a
 * later line for the same block replaces the earlier. Empty lines and '#' comments are
 * ignored; a line that cannot apply (bad time, empty prompt, past the end, after the last
 * block started) is reported through the run's warn callback and skipped, and the run goes
 * on. The run says, once, when lv_gen_live_end was called (the input closed). */
typedef struct lv_gen_live lv_gen_live;
#define LV_GEN_LIVE_MAX_LINE 4096
lv_status lv_gen_live_create(lv_gen_live **out);
/* Thread-safe. Errors: NULL arguments, a line longer than LV_GEN_LIVE_MAX_LINE bytes, more
 * than 65536 lines waiting, or after lv_gen_live_end. The line is copied. */
lv_status lv_generate_push_prompt(lv_gen_live *live, const char *line);
/* Thread-safe: no more lines will come; why (NULL: the input's end) is said by the run. */
void lv_gen_live_end(lv_gen_live *live, const char *why);
/* After lv_generate has returned and no thread pushes any more. */
void lv_gen_live_destroy(lv_gen_live *live);

/* One entry of a prompt schedule. time: "12.5" (seconds), "mm:ss" or "mm:ss.s", or "NNf"
 * (frames); the entry takes effect at the first frame of the block that holds it. */
typedef struct lv_gen_switch {
    const char *time;
    const char *prompt;
    const char *negative_prompt;  /* NULL: the run's (negative_prompt); empty: the encoder's default */
    const char *transition;       /* "1.5" seconds or "NNf" frames; NULL: the run's transition */
    const char *where;            /* for messages: "--prompt-at 0:05", "s.txt line 3" (may be NULL) */
} lv_gen_switch;

typedef enum lv_gen_on_switch {
    LV_GEN_SWITCH_KEEP = 0,       /* the carried state as it was made, under the earlier prompts */
    LV_GEN_SWITCH_RECACHE = 1     /* the write passes of the last cached_blocks + 1 finished
                                     blocks again under the switch block's conditioning, the
                                     state rebuilt from them (not with LV_CACHED_ALL) */
} lv_gen_on_switch;

/* A schedule file: one entry a line, "TIME | PROMPT [| NEGATIVE [| TRANSITION]]", fields
 * trimmed, '#' to the end of a line a comment, blank lines ignored. *out (malloc'd entries
 * whose strings live in *text, both freed by lv_gen_schedule_free) and *count. Errors name
 * the file and line. */
lv_status lv_gen_schedule_read(const char *path, lv_gen_switch **out, int *count, char **text);
void lv_gen_schedule_free(lv_gen_switch *entries, char *text);
/* The time or transition syntax: seconds (>= 0), mm:ss(.s) or NNf. *frames receives the
 * frame (NNf) or -1, *seconds the seconds otherwise. 0 when it is not one of them. */
int lv_gen_parse_time(const char *text, double *seconds, int64_t *frames);

#define LV_GEN_CPU_THREADS_AUTO (-2)
/* The automatic choice: 0 (every dispatch on lavapipe's queue thread) when a block's
 * kernels are small, tokens x hidden^2 <= 2^24 (the default model: 128 x 96^2 = 2^20.2,
 * whose dispatches take less time than lavapipe hands work to its workers and back in),
 * else -1 (lavapipe's thread pool, one worker per core). */
int lv_generate_auto_cpu_threads(int64_t tokens_per_block, int hidden);

void lv_generate_options_default(lv_generate_options *opt);

/* What a progress call reports. A run with a text encoder reports TEXT_START before the
 * encoder is uploaded and TEXT_DONE once it is freed (block 0: no block is made yet); every
 * run then reports BLOCK after each block. */
typedef enum lv_generate_phase {
    LV_GEN_PHASE_BLOCK = 0,
    LV_GEN_PHASE_TEXT_START,
    LV_GEN_PHASE_TEXT_DONE,
    LV_GEN_PHASE_SWITCH,          /* a schedule's entry applies from the next block (switch_*) */
    LV_GEN_PHASE_VAE              /* how the VAE decodes, before the first block's frames (vae_*) */
} lv_generate_phase;

typedef struct lv_generate_progress {
    int block, blocks;            /* block just finished (1-based) of how many, burn-in included */
    int burn_in_blocks;           /* blocks 1 .. burn_in_blocks are the burn-in: made, not written */
    int64_t frames_done, frames_total; /* frames in the file (a resumed run's kept ones included) */
    double seconds;               /* since this run started */
    double frames_per_second;     /* frames this run made / seconds */
    double eta_seconds;           /* the blocks left, weighed by their forward passes (the first
                                     block takes more steps than the others), at the time per
                                     pass measured since this run's first step (which also
                                     compiles every kernel) */
    uint64_t state_bytes;         /* carried state on the device (0: none is carried) */
    const char *device;
    int64_t frames_resumed;       /* frames kept from the interrupted run (--resume; else 0):
                                     this run made frames_done - frames_resumed */
    lv_generate_phase phase;      /* what this call reports (fields above: blocks only) */
    int text_tokens;              /* LV_GEN_PHASE_TEXT_*: real tokens of the prompt (and of the
                                     negative prompt with CFG), <bos> included; with a
                                     schedule, of the text whose pass is the largest */
    int text_prompts;             /* LV_GEN_PHASE_TEXT_*: the distinct texts encoded (a schedule's
                                     (prompt, negative prompt) pairs, each once; else 1) */
    uint64_t text_rows_bytes;     /* LV_GEN_PHASE_TEXT_DONE with a schedule: host bytes of every
                                     distinct text's rows, kept for the run (0: none) */
    double text_seconds;          /* LV_GEN_PHASE_TEXT_DONE: time the encoder took, upload and
                                     kernel compilation included */
    /* Device memory in bytes: the text encoder's peak (its weights and work buffers; 0 when
     * none ran), freed before the DiT is uploaded; and the peak since (DiT weights, VAE,
     * carried state, one pass's activations). The run's peak is the larger, not the sum. */
    uint64_t text_encoder_memory, model_memory;
    /* LV_GEN_PHASE_SWITCH, before the block that applies it: entry switch_index (1 ..
     * switches) of the schedule, at block switch_block (1-based, burn-in included), from its
     * first frame switch_frame (the time asked named switch_frame_asked), its conditioning
     * moving over switch_transition_frames. */
    int switch_index, switches, switch_block;
    int64_t switch_frame, switch_frame_asked, switch_transition_frames;
    double switch_seconds;        /* switch_frame / fps */
    const char *switch_prompt;
    /* Continuing a clip: blocks burn_in_blocks + 1 .. burn_in_blocks + continue_blocks are the
     * clip's (read, and committed when the state can hold them; not denoised) */
    int continue_blocks;
    /* LV_GEN_PHASE_VAE: vae_tile_count tiles (0: untiled) of vae_tile_h x vae_tile_w latent
     * pixels overlapping by vae_tile_overlap; the device bytes of the decode as it runs
     * (one tile's when tiled) and of an untiled one, the budget auto compared with (0 with
     * --vae-tiles off or HxW), and the host bytes holding the tiles' history */
    int vae_tile_count, vae_tile_h, vae_tile_w, vae_tile_overlap;
    uint64_t vae_memory, vae_untiled_memory, vae_budget, vae_host_bytes;
} lv_generate_progress;

typedef void (*lv_generate_callback)(void *user, const lv_generate_progress *p);

/* Runs a generation. Every option is checked first: a bad or non-finite value (NULL opt,
 * scale 0, cfg_scale NaN, ...) is LV_ERR_INVALID naming it. `stop`, when non-NULL, is
 * polled before every block, burn-in blocks included: once set, the current block is
 * finished, the file is closed properly and LV_ERR_INTERRUPTED is returned (where the run
 * writes a resume file, lv_generate_description.resumable, --resume continues it; the message says
 * what is written). `warn` receives warnings
 * (words of the prompt that are ignored, and why).
 *
 * The video is written under OUTPUT.resume-part until its first block is flushed, then
 * renamed to OUTPUT; the resume file (state_path) is written once the options and the
 * model are checked, before the device is set up, and after every block, burn-in blocks
 * included. Killed at any moment, a run leaves at OUTPUT nothing of its own or a playable
 * video, and a resume file that --resume continues from with the frames an uninterrupted
 * run makes (except in the first milliseconds, while the model is read: then nothing at
 * all). A failed start leaves nothing.
 *
 * Every block is checked on the device for NaN and infinities (the DiT's predictions and
 * the carried state, lv_dit_forward): the first one stops the run with an error naming the
 * block (burn-in or not), the step and the stage; what was written stays (the file plays,
 * the resume file holds the last good block). */
/* Checks a run's prompt schedule against its model (the times against its fps and length,
 * empty prompts, order) without any device work: what lv_generate would refuse at its
 * start, for a caller that wants usage errors apart. LV_OK without a schedule. */
lv_status lv_generate_check_schedule(const lv_generate_options *opt);

lv_status lv_generate(const lv_generate_options *opt, lv_generate_callback progress,
                      void (*warn)(void *user, const char *message), void *user,
                      volatile sig_atomic_t *stop);

/* The options checked against the model before any work, as lv_generate checks them: the
 * model is opened (its card and config), the options resolved, and it is closed again. On
 * failure *bad_value (may be NULL) says whether a value of the options is what is wrong
 * (-W/-H not a multiple of the model's patch, more --steps than its card's, a latent model
 * without a text encoder, ...: a command line's usage error) rather than the model, which
 * could not be read. */
lv_status lv_generate_check(const lv_generate_options *opt, bool *bad_value);

/* What a run with these options will do, resolved against its model as lv_generate
 * resolves them (the model is opened and closed again; no device work): for a summary
 * printed before the first frame, and for messages that must not promise what the run
 * cannot do (resume). */
typedef struct lv_generate_description {
    char model[256];              /* the model's name: its path, or "the default model" */
    bool latent;                  /* works in a VAE's latent space (SANA-Video) */
    bool resumable;               /* writes a resume file that --resume continues from (block by
                                     block: pixel-space models, and latent models writing a video
                                     through the VAE; not a single clip nor a .npy of latents) */
    int width, height, scale;     /* the model's frame size; the upscale at encode time */
    int64_t frames;               /* frames written (latent frames for a latent model without a VAE) */
    int64_t frames_asked;         /* pixel frames asked (--frames, or seconds x fps) */
    double fps;
    int blocks, burn_in_blocks, block_frames; /* blocks made, the burn-in included */
    int steps;                    /* per block after the first (single clip: in all) */
    double cfg_scale;
    uint64_t seed;
    lv_precision precision;       /* resolved: never LV_PRECISION_AUTO */
    lv_gen_sampler sampler;
} lv_generate_description;

lv_status lv_generate_describe(const lv_generate_options *opt, lv_generate_description *plan);

#ifdef __cplusplus
}
#endif
#endif
