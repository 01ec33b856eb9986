/* Internals of the Wan VAE decoder (pipelines/wan_vae/wan_vae.c, wan_vae_arch.c). Not installed. */
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
/* Parameters of conv2 and decoder.* (73,295,603 for Wan2.1). */
uint64_t vae_arch_params(const vae_arch *arch);

/* Device memory of a decode at latent h x w in steps of `step` latent frames. */
typedef struct vae_memory {
    uint64_t weights, history, work;
    uint64_t work_elems; /* floats in each of the 3 work buffers */
} vae_memory;
void vae_arch_memory(const vae_arch *arch, int h, int w, int step, vae_memory *m);
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
    lv_vae_tap tap;
    void *tap_user;

    /* sequence parallelism (lv_vae_set_sequence_parallel): NULL, or the bands; own_comm is
     * the emulation this decoder made (freed with it), else comm is borrowed */
    struct lv_sp_comm *comm, *own_comm;
    bool comm_checked;         /* D4 (every rank on the same kind of device) asked */
};

/* wan_vae_weights.c: reads the structure and uploads every weight (dec zeroed before). */
lv_status vae_load(lv_ctx *ctx, const lv_weights *weights, lv_vae_decoder *dec);
/* Frees every device tensor of the decoder (weights, history, work buffers). */
void vae_free_tensors(lv_ctx *ctx, lv_vae_decoder *dec);

/* The diffusers AutoencoderKLWan name of an original Wan2.1 tensor name, into buf
 * (false when the name has no diffusers counterpart). */
bool vae_diffusers_name(const char *orig, int nres, char *buf, size_t size);

#endif
