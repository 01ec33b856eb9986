/* Internals of the Wan VAE decoder (pipelines/wan_vae/wan_vae.c, wan_vae_arch.c) and encoder
 * (wan_vae_encoder.c, wan_vae_encoder_weights.c). Not installed. */
#ifndef LONGVK_WAN_VAE_INTERNAL_H
#define LONGVK_WAN_VAE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "longvk/vae.h"

#define VAE_MAX_UPS 40
#define VAE_MAX_Z 64

typedef enum vae_kind { VAE_RES = 0, VAE_UP3D, VAE_UP2D } vae_kind;

/* One module of decoder.upsamples: a residual block ci -> co, or a Resample of width ci
 * (upsample3d: time_conv ci -> 2ci, then the 2-D conv ci -> co = ci / 2 on the 2x frame;
 * upsample2d: only the 2-D conv). */
typedef struct vae_arch_layer {
    vae_kind kind;
    int ci, co;
} vae_arch_layer;

/* The decoder's layer structure: conv2 (z -> z), conv1 (z -> trunk), the middle
 * (residual, attention, residual at trunk width), the upsampling modules, the head
 * (norm over head_ch, conv head_ch -> out_ch). */
typedef struct vae_arch {
    int z, trunk, head_ch, out_ch;
    int nres;          /* residual blocks per stage minus one (diffusers naming needs it) */
    int nups;
    vae_arch_layer ups[VAE_MAX_UPS];
} vae_arch;

/* The real Wan2.1 decoder (dim 96, z 16, dim_mult [1, 2, 4, 4], 2 residual blocks,
 * temporal upsampling [True, True, False]), built by the generic rule of the spec. */
void vae_arch_wan21(vae_arch *arch);
/* The same structure at another base width `dim` and latent width z (the spec's tiny test
 * config is dim 8, z 4). */
void vae_arch_make(vae_arch *arch, int dim, int z);
/* Causal convs with a history slot, in forward order (32 for Wan2.1). */
int vae_arch_slots(const vae_arch *arch);
/* Latent frames whose decode from a reset decoder leaves every history as the whole video's
 * (lv_vae_history_frames; 40 for Wan2.1). */
int vae_arch_history_frames(const vae_arch *arch);
/* Parameters of conv2 and decoder.* (73,295,603 for Wan2.1). */
uint64_t vae_arch_params(const vae_arch *arch);

/* Device memory of a decode at latent h x w in steps of `step` latent frames. */
typedef struct vae_memory {
    uint64_t weights, history, work;
    uint64_t work_elems; /* elements in each of the 3 work buffers */
} vae_memory;
/* act: the activations' dtype (the work buffers and the history frames: f32 or f16). */
void vae_arch_memory(const vae_arch *arch, int h, int w, int step, lv_dtype act, vae_memory *m);
/* Multiply-adds of one later latent frame at latent h x w (lv_vae_decoder_macs). */
double vae_arch_macs(const vae_arch *arch, int h, int w);
/* The tensors of the structure under the original names, in module order, into out (at
 * most max; NULL: count only); returns how many there are, or -1 when a name does not fit
 * (lv_vae_expected_tensors). */
int vae_arch_tensors(const vae_arch *arch, lv_vae_tensor_spec *out, int max);

/* ---- the decoder on the device (wan_vae_weights.c loads it, wan_vae.c runs it) ---------- */

/* A convolution: packed weight [co, kt, k, k, ci] (ops_vae.h) and bias [co]. */
typedef struct vae_conv {
    lv_tensor w, b;
} vae_conv;

typedef struct vae_block {
    int ci, co;
    lv_tensor g0, g3;          /* residual.0 and residual.3 gammas */
    vae_conv a, b;             /* residual.2 and residual.6 */
    bool shortcut;
    lv_tensor sc_w, sc_b;      /* 1x1x1 shortcut as a matmul weight [co, ci] */
    int slot_a, slot_b;
} vae_block;

typedef struct vae_up {
    vae_arch_layer arch;
    vae_block res;             /* VAE_RES */
    vae_conv time_conv;        /* VAE_UP3D: packed [2ci, 3, 1, 1, ci] */
    vae_conv conv;             /* VAE_UP3D, VAE_UP2D: resample.1 packed [co, 1, 3, 3, ci] */
    int slot_t;
} vae_up;

/* A causal conv's two-frame history: frames[newest] is the last input frame seen,
 * frames[1 - newest] the one before; `valid` frames of them are real (the rest are the
 * zeros of the video's start and are not read). */
typedef struct vae_hist {
    int C, scale;              /* channels; spatial scale (1, 2, 4, 8) of the conv's level */
    lv_tensor frames;          /* [2, h * scale, w * scale, C], allocated at the first decode */
    int valid, newest;
} vae_hist;

#define VAE_MAX_SLOTS (6 + 2 * VAE_MAX_UPS)

struct lv_vae_decoder {
    vae_arch arch;
    float mean[VAE_MAX_Z], std[VAE_MAX_Z];
    bool tables_missing;        /* no tables in the file and z != 16: must be set */
    lv_tensor conv2_w, conv2_b; /* [z, z], [z] */
    vae_conv conv1;
    vae_block mid0, mid2;
    lv_tensor attn_g, qkv_w, qkv_b, proj_w, proj_b; /* [C], [3C, C], [3C], [C, C], [C] */
    vae_up ups[VAE_MAX_UPS];
    lv_tensor head_g;
    vae_conv head;
    int slot_conv1, slot_head, nslots;
    vae_hist hist[VAE_MAX_SLOTS];

    /* decoding state */
    int clamp, step_frames;
    int h, w;                  /* latent size the buffers are allocated for (0: none) */
    bool started;              /* the first latent frame of the video has been decoded */
    int64_t frames_done;
    lv_tensor work[3];
    uint64_t work_elems;
    lv_dtype act;              /* the activations' dtype when not over bands (vae_act_dtype) */
    lv_dtype buf_dtype;        /* the dtype work and the history frames were made in */
    lv_vae_tap tap;
    void *tap_user;

    /* sequence parallelism (lv_vae_set_sequence_parallel): NULL, or the bands; own_comm is
     * the emulation this decoder made (freed with it), else comm is borrowed */
    struct lv_sp_comm *comm, *own_comm;
    bool comm_checked;         /* D4 (every rank on the same kind of device) asked */
};

/* The activations' dtype (work buffers, history frames): the decoder's (lv_vae_activation_dtype
 * of its context's precision), f32 over bands (the halo exchange and the gathers move f32 rows). */
lv_dtype vae_act_dtype(const lv_vae_decoder *d);

/* wan_vae_weights.c: reads the structure and uploads every weight (dec zeroed before). */
lv_status vae_load(lv_ctx *ctx, const lv_weights *weights, lv_vae_decoder *dec);

/* The weight readers both halves share (wan_vae_weights.c): tensors looked up under their
 * original names, or (diffusers) under the names vae_diffusers_name gives; every shape
 * checked; uploaded in fp32, convolutions packed (longvk/ops_vae.h). */
typedef struct vae_loader {
    lv_ctx *ctx;
    const lv_weights *w;
    bool diffusers;
    int nres;
} vae_loader;
const lv_weight *vae_find(const vae_loader *L, const char *name, char *file_name, size_t size);
/* A norm's gamma [C, 1, 1, 1] (ndim 4) or [C, 1, 1] (3) as [C]. */
lv_status vae_load_gamma(const vae_loader *L, const char *name, int C, int ndim, lv_tensor *dst);
/* prefix.weight [co, ci, kt, k, k] (kt 0: a Conv2d [co, ci, k, k]) packed, prefix.bias. */
lv_status vae_load_conv(const vae_loader *L, const char *prefix, int co, int ci, int kt, int k, vae_conv *c);
/* A 1x1 conv [co, ci, 1...] (`ones` trailing 1s) as a matmul weight [co, ci], and its bias. */
lv_status vae_load_pointwise(const vae_loader *L, const char *prefix, int co, int ci, int ones,
                             lv_tensor *w, lv_tensor *b);
/* A ResidualBlock ci -> co under prefix; its two causal convs take slots *slot, *slot + 1. */
lv_status vae_load_block(const vae_loader *L, const char *prefix, int ci, int co, int *slot, vae_block *b);
void vae_free_conv(lv_ctx *ctx, vae_conv *c);
void vae_free_block(lv_ctx *ctx, vae_block *b);
/* latents_mean / latents_std of dec->arch.z entries from the metadata, else Wan2.1's (z 16). */
lv_status vae_load_tables(const vae_loader *L, lv_vae_decoder *dec);

/* wan_vae.c's steps, which the encoder runs too on its own lv_vae_decoder core (its work
 * buffers, history slots, middle and head; no bands): a causal conv over x with the slot's
 * history (then updated), a ResidualBlock on work[cur] [T, H, W, ci] (output in place), the
 * middle's AttentionBlock on work[cur] [T, H, W, arch.trunk] (H = d->h without bands). */
lv_status vae_causal(lv_ctx *ctx, lv_vae_decoder *d, int slot, const vae_conv *c, const lv_tensor *x,
                     const lv_tensor *out, const lv_tensor *res, bool time_conv);
lv_status vae_res_block(lv_ctx *ctx, lv_vae_decoder *d, const vae_block *b, int cur, int64_t T, int64_t H,
                        int64_t W);
lv_status vae_attention(lv_ctx *ctx, lv_vae_decoder *d, int cur, int64_t T, int64_t H, int64_t W);
/* The history slots and work buffers for latent h x w (made again when the size changes,
 * which forgets the history; grown when a step needs more). */
lv_status vae_ensure_buffers(lv_ctx *ctx, lv_vae_decoder *d, int h, int w);
/* Frees every device tensor of the decoder (weights, history, work buffers). */
void vae_free_tensors(lv_ctx *ctx, lv_vae_decoder *dec);

/* The diffusers AutoencoderKLWan name of an original Wan2.1 tensor name (either half), into
 * buf (false when the name has no diffusers counterpart). */
bool vae_diffusers_name(const char *orig, int nres, char *buf, size_t size);

/* ---- the encoder (wan_vae_encoder.c runs it, wan_vae_encoder_weights.c loads it) ------------ */

typedef enum vae_enc_kind { VAE_ENC_RES = 0, VAE_ENC_DOWN2D, VAE_ENC_DOWN3D } vae_enc_kind;

/* One module of encoder.downsamples: a residual block ci -> co, or a Resample of width
 * ci = co (downsample2d: the stride-2 conv; downsample3d: then its time_conv, a 3x1x1 conv
 * with stride 2 in time over the frames after the one it keeps from the chunk before). */
typedef struct vae_enc_layer {
    vae_enc_kind kind;
    int ci, co;
    vae_block res;           /* VAE_ENC_RES */
    vae_conv conv;           /* resample.1, packed [co, 1, 3, 3, ci] */
    vae_conv time_conv;      /* VAE_ENC_DOWN3D: packed [co, 3, 1, 1, co] */
    lv_tensor last;          /* VAE_ENC_DOWN3D: the last frame of the previous chunk [H, W, co] */
    bool has_last;
} vae_enc_layer;

struct lv_vae_encoder {
    /* conv1 = encoder.conv1, mid0 / attn / mid2 = encoder.middle, head_g / head = encoder.head;
     * hist: every causal conv's history; work: the three work buffers; arch.z = z, arch.trunk =
     * the middle's width; mean / std: the normalisation tables; h, w: the latent size */
    lv_vae_decoder core;
    int in_ch;               /* 3: RGB */
    int nlayers;
    vae_enc_layer layers[VAE_MAX_UPS];
    lv_tensor mu_w, mu_b;    /* conv1 (the quant conv) [2z, 2z], [2z]: rows [0, z) give the mean */
    int downscale;           /* 2 ^ (resamples): 8 */
    uint64_t params;         /* of encoder.* and conv1.* */
    int H, W;                /* frame size the buffers are made for (0: none) */
    lv_vae_tap tap;
    void *tap_user;
};

/* wan_vae_encoder_weights.c: reads the structure and uploads the weights (enc zeroed). */
lv_status vae_encoder_load(lv_ctx *ctx, const lv_weights *weights, lv_vae_encoder *enc);
void vae_encoder_free_tensors(lv_ctx *ctx, lv_vae_encoder *enc);

#endif
