/* The SANA-Video diffusion transformer on the engine (pipelines/sana/sana_dit*.c).
 *
 * A lv_dit holds the model's weights on the device, the text conditioning, and the state
 * it carries from chunk to chunk in long-video mode: per layer the linear-attention state
 * (S, z) and the last frame of Mix-FFN features for the temporal conv. Its size is fixed
 * at creation; it does not grow with the number of chunks.
 *
 *   lv_dit_create(ctx, file, &opt, &dit);
 *   lv_dit_set_text(ctx, dit, y, L, mask);
 *   for each chunk: read passes (commit = false) at the denoising timesteps, then one
 *   write pass (commit = true) over the clean chunk at t = 0. */
#ifndef LONGVK_DIT_H
#define LONGVK_DIT_H

#include <stdbool.h>

#include "longvk/engine.h"
#include "longvk/sana.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lv_dit lv_dit;

#define LV_CACHED_ALL (-1)

/* The dtype the matrix weights take on the device (every other parameter is f32). */
typedef enum lv_dit_weights {
    LV_DIT_WEIGHTS_AS_STORED = 0, /* the file's: f32, f16 or bf16 */
    LV_DIT_WEIGHTS_F32,
    LV_DIT_WEIGHTS_F16,           /* rounded to nearest even on the host: half the memory of f32 */
    LV_DIT_WEIGHTS_BF16,
    /* quantized on the host as they are uploaded, read as blocks by the matmul (ggml's q8_0:
     * 1.06 bytes a weight; q4_K: 0.56). A matrix whose rows are not whole blocks (q8_0: 32,
     * q4_K: 256) falls back: q4_K to q8_0, q8_0 to the file's dtype */
    LV_DIT_WEIGHTS_Q8_0,
    LV_DIT_WEIGHTS_Q4_K
} lv_dit_weights;

/* The rule's name as the options spell it ("as-stored", "f32", ..., "q8_0", "q4_K"); "?" for
 * a value that is none of them. */
const char *lv_dit_weights_name(lv_dit_weights rule);

typedef struct lv_dit_options {
    /* Which committed chunks attention reads: LV_CACHED_ALL (< 0) every one (the additive
     * state), K > 0 the last K (a window), 0 none: no state is carried (each chunk alone,
     * and the temporal conv starts from zeros), to show what the state buys. */
    int cached_blocks;
    lv_dit_weights weights;
    /* Sequence parallelism emulated in this process (pipelines/parallel/README.md): 0 off;
     * R >= 1 splits every pass's token rows into R bands (the first Hp % R one row taller),
     * each run as its own tensors, exactly what one of R ranks would compute, with the
     * linear-attention partial states summed in band order and one halo row per side for
     * the Mix-FFN's 3x3 conv (R = 1: one band, the band path itself). Results match the
     * unsplit pass to rounding and are deterministic. A pass with fewer token rows than R
     * is an LV_ERR_INVALID naming both. Taps (lv_dit_set_tap) are called at R = 1 only,
     * where the one band is the whole pass (the same names and tensors as the unsplit
     * pass's, which tests/models/test_sequence_parallel.c holds equal bit for bit). */
    int sp_bands;
    /* Sequence parallelism over processes: a communicator holding some of the bands (an MPI
     * rank's one: longvk/sp_comm_mpi.h), which the dit uses and never frees; sp_bands must
     * then be 0. Every process runs every pass with the same inputs; each computes its
     * bands, and the prediction's rows are gathered so that every process gets all of it. */
    struct lv_sp_comm *sp_comm;
} lv_dit_options;

/* Uploads every weight (matmul weights as opt->weights says; the rest become f32). opt NULL:
 * every committed chunk is read. Functions of this header that return a status check
 * their pointers (LV_ERR_INVALID for a NULL one); the others take NULL as "none" (0, false,
 * NULL, nothing done). */
lv_status lv_dit_create(lv_ctx *ctx, const lv_sana_file *file, const lv_dit_options *opt,
                        lv_dit **out);
void lv_dit_destroy(lv_ctx *ctx, lv_dit *dit);
const lv_sana_config *lv_dit_config(const lv_dit *dit);

/* Text conditioning in slot 0 or 1 (e.g. the prompt and the negative prompt for CFG):
 * y [L, caption_channels] raw caption embeddings, mask [L] (1 valid, 0 padding; NULL: all
 * valid). Runs the caption embedder and each block's key/value projections once; they are
 * reused by every forward pass that names the slot. */
lv_status lv_dit_set_text(lv_ctx *ctx, lv_dit *dit, int slot, const float *y, int L,
                          const float *mask);

/* One forward pass over a chunk of latent frames. Attention reads the carried state of
 * every committed chunk plus this chunk's own contribution; the temporal conv starts from
 * the last committed chunk's cached frame. A fresh dit (or after lv_dit_reset) makes this
 * the ordinary one-shot forward over all given frames. */
typedef struct lv_dit_pass {
    const float *x;          /* [in_channels, frames, height, width] latents */
    int frames, height, width;
    const float *timesteps;  /* [frames] in the model's scale (0..1000); truncated to integers */
    int frame_offset;        /* absolute index of the first latent frame (RoPE time position) */
    int text_slot;           /* which lv_dit_set_text conditioning to attend to */
    bool commit;             /* write pass: add this chunk to the carried state */
} lv_dit_pass;

/* out: [out_channels, frames, height, width], the velocity prediction; NULL for a write
 * pass whose prediction is not needed (the final layer is then skipped).
 * Every pass checks on the device (lv_op_count_nonfinite) what it hands on: a prediction
 * with a NaN or an infinity, or after a write pass a carried state with one, is an
 * LV_ERR_INVALID naming it ("the DiT's output has non-finite values (...)", "the carried
 * state of layer 2 has non-finite values after the write pass (...)"), never a silent
 * NaN; the prediction is still written to out. A NULL ctx, dit or pass, or a bad pass, is
 * LV_ERR_INVALID too. */
lv_status lv_dit_forward(lv_ctx *ctx, lv_dit *dit, const lv_dit_pass *pass, float *out);

/* False when the dit carries nothing between chunks (cached_blocks 0). */
bool lv_dit_carries_state(const lv_dit *dit);
/* Forget every carried chunk. */
lv_status lv_dit_reset(lv_ctx *ctx, lv_dit *dit);
/* Device bytes of the state (all layers): the carried state and the working slots (see
 * lv_dit_state_size_of's memory), constant once the first chunk is committed. */
uint64_t lv_dit_state_bytes(const lv_dit *dit);

/* The sizes of a dit's state, from the config alone (`longvk info`):
 *   carried  what goes from one chunk to the next, and into a resume file: per layer the
 *            linear-attention state S and z (heads x d x (d + 1) floats) once when every
 *            earlier chunk is read (their sum), once per cached chunk for a window of K,
 *            plus the last frame before the temporal conv (hidden x tokens_per_frame floats);
 *            0 with cached_blocks 0.
 *   memory   what the state takes on the device, lv_dit_state_bytes once a chunk is
 *            committed: carried plus the working slots of every layer (the chunk's own S
 *            and z and the sum its queries read). A device that splits the state update
 *            over several workgroups holds one more S and z per split, which only
 *            lv_dit_state_bytes counts. */
typedef struct lv_dit_state_size {
    uint64_t carried;
    uint64_t memory;
} lv_dit_state_size;
lv_dit_state_size lv_dit_state_size_of(const lv_sana_config *cfg, int cached_blocks, int64_t tokens_per_frame);
/* The device memory of a run's DiT phase, from the config alone (no upload): what
 * lv_ctx_memory_peak measures over lv_dit_create, lv_dit_set_text of every slot and the
 * passes of a chunk once the carried state is whole (tests/models/test_dit_memory_plan.c
 * holds them equal). pipelines/sana/README.md, "The device-memory plan", says what each
 * part is. The device-dependent inputs come from lv_dit_plan_device. */
/* The Mix-FFN's four wide intermediates ([tokens, ffn_hidden] each) are made over slices of
 * whole frames of at most this many tokens (a whole frame when one frame has more):
 * LONGVK_FFN_SLICE, default 4096. The frames are the unsliced forward's bit for bit. */
int lv_dit_ffn_slice_tokens(void);
/* Frames per slice for F frames of P tokens each. */
int lv_dit_ffn_slice_frames(int F, int64_t P, int slice_tokens);

typedef struct lv_dit_plan_input {
    lv_dit_weights weights;  /* the rule of the matrix weights (lv_dit_options.weights) */
    lv_dtype stored;         /* the file's dtype of the matrix weights: AS_STORED, and q8_0's fallback */
    lv_precision precision;  /* the activations' (lv_ctx_precision): F32, F16 or BF16 */
    int frames, height, width; /* a chunk's latent frames, height, width */
    int text_tokens;         /* per text slot */
    int text_slots;          /* 1, or 2 with CFG (the negative prompt's slot) */
    int cached_blocks;       /* lv_dit_options.cached_blocks */
    /* the device's: */
    bool tconv_gemm;         /* lv_temporal_conv_uses_gemm: the tap-major matmul weight */
    uint32_t linattn_splits; /* lv_linattn_splits */
    int ffn_slice_tokens;    /* lv_dit_ffn_slice_tokens (0: its default) */
    uint64_t alignment;      /* lv_ctx_alloc_alignment */
} lv_dit_plan_input;

typedef struct lv_dit_memory_plan {
    uint64_t weights;        /* every parameter as lv_dit_create uploads it */
    uint64_t state;          /* carried state and working slots, conv caches included */
    uint64_t text;           /* every slot's keys, values and mask */
    uint64_t conditioning;   /* the timestep-conditioning cache, full */
    uint64_t pass;           /* a pass's tensors that live through it: patches, x, rope, the
                                conditioning's scratch */
    uint64_t block;          /* one block's temporaries (released at the block's end) */
    uint64_t final_layer;    /* the final layer's temporaries (after the blocks) */
    uint64_t set_text;       /* the peak of lv_dit_set_text, the other slots set */
    uint64_t passes;         /* the peak of the passes: everything held, a pass's tensors and
                                one block's (or the final layer's) temporaries */
    uint64_t peak;           /* the larger of set_text and passes */
} lv_dit_memory_plan;

/* The device-dependent fields of `in` for the context's device and environment. */
void lv_dit_plan_device(const lv_ctx *ctx, lv_dit_plan_input *in);
/* LV_ERR_INVALID for a config or input that lv_dit_create or a pass would refuse. */
lv_status lv_dit_memory_plan_of(const lv_sana_config *cfg, const lv_dit_plan_input *in, lv_dit_memory_plan *out);

/* The sequence-parallel communicator of the passes from now on, borrowed like
 * lv_dit_options.sp_comm (NULL: unsplit passes); an emulation the dit made for sp_bands is
 * freed. The carried state is the same object either way (`longvk bench sp` runs one dit
 * as each rank in turn). */
lv_status lv_dit_set_sp_comm(lv_dit *dit, struct lv_sp_comm *comm);

/* Chunks committed so far. */
int64_t lv_dit_chunks(const lv_dit *dit);

/* Test hook: called with each intermediate activation (names: "patch_embed", "temb",
 * "caption", "block{B}_attn_out", "block{B}_after_attn", "block{B}_after_cross",
 * "block{B}_ffn_out", "block{B}_after_ffn",
 * "final_tokens"; token-major [T, C]). The tensor is valid only during the call. */
typedef void (*lv_dit_tap)(void *user, const char *name, lv_ctx *ctx, const lv_tensor *t);
void lv_dit_set_tap(lv_dit *dit, lv_dit_tap tap, void *user);

/* Carried state of one layer, for tests and resume files: S [H, D, D], z [H, D],
 * conv_last [P, C] (P = tokens per frame of the last committed chunk; NULL to skip). */
lv_status lv_dit_layer_state(lv_ctx *ctx, lv_dit *dit, int layer, float *S, float *z,
                             float *conv_last, int64_t conv_last_count);

/* The whole carried state as host floats (every layer's linear-attention state with the
 * window ring, then the conv caches), for resume files: save allocates *data (free()).
 * With bands on other processes (lv_dit_options.sp_comm) each process holds only its rows
 * of the conv caches: save gathers them, so every process must call it together, and each
 * gets the whole state, the same as one process or any number of bands would save. */
lv_status lv_dit_state_save(lv_ctx *ctx, lv_dit *dit, float **data, int64_t *count);
/* Restore it into a dit made with the same model and options, after `chunks` chunks of
 * `tokens_per_frame` tokens per frame. */
lv_status lv_dit_state_load(lv_ctx *ctx, lv_dit *dit, const float *data, int64_t count,
                            int64_t chunks, int64_t tokens_per_frame);

#ifdef __cplusplus
}
#endif
#endif
