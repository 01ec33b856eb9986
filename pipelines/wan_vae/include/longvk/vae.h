/* The Wan2.1 VAE decoder on the engine (pipelines/wan_vae*.c), as SANA-Video uses it:
 * normalised latents [z, n, h, w] in, RGB frames [3, T, 8h, 8w] out, in fp32
 * (pipelines/wan_vae/README.md).
 *
 * Decoding is causal and streaming: call lv_vae_decode_frames() again and again as blocks
 * of latent frames arrive. The first latent frame of a video gives 1 pixel frame, every
 * later one 4, and decoding in any chunking gives the same frames as decoding the whole
 * sequence at once. The decoder carries two frames of history per causal conv (the
 * original's feat_cache, about 3.8 GB in fp32 at 480 x 832) and works through at most
 * `step_frames` latent frames at a time, whatever the size of the block it is given.
 *
 *   lv_weights *w;  lv_weights_open("Wan2.1_VAE.pth", &w);
 *   lv_vae_decoder *dec;  lv_vae_decoder_create(ctx, w, &dec);
 *   for each latent block: lv_vae_decode_frames_cb(ctx, dec, block, n, h, w, on_frame, user);
 *   lv_vae_decoder_destroy(ctx, dec);  lv_weights_close(w); */
#ifndef LONGVK_VAE_H
#define LONGVK_VAE_H

#include <stdint.h>

#include "longvk/engine.h"
#include "longvk/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lv_vae_decoder lv_vae_decoder;

/* Reads the decoder's weights (conv2.* and decoder.*) from a safetensors file under the
 * original Wan2.1 names, a PyTorch checkpoint (Wan2.1_VAE.pth), or a diffusers
 * AutoencoderKLWan file (post_quant_conv.*, decoder.conv_in, mid_block, up_blocks, ...),
 * and uploads them in fp32. The layer structure is read from the tensors present (the
 * real checkpoint: dim 96, z 16, 15 upsampling modules); the de-normalisation tables
 * come from the file's metadata (latents_mean, latents_std) or, for z = 16, Wan2.1's
 * (see lv_vae_set_normalization). */
lv_status lv_vae_decoder_create(lv_ctx *ctx, const lv_weights *weights, lv_vae_decoder **out);
void lv_vae_decoder_destroy(lv_ctx *ctx, lv_vae_decoder *dec);

/* Latent channels (16 for Wan2.1). */
int lv_vae_z_dim(const lv_vae_decoder *dec);
/* The de-normalisation z_raw = z * std + mean, z entries each (std > 0). Needed for a file
 * without the tables whose z is not 16 (decoding refuses until then); replaces them else. */
lv_status lv_vae_set_normalization(lv_vae_decoder *dec, const float *mean, const float *std);
/* 0 while the decoder has no de-normalisation tables (weights without latents_mean /
 * latents_std metadata and z not 16, before lv_vae_set_normalization): decoding refuses. */
int lv_vae_has_normalization(const lv_vae_decoder *dec);
/* 1: clamp decoded values to [-1, 1] (what WanVAE.decode returns); 0 (default): raw. */
void lv_vae_set_clamp(lv_vae_decoder *dec, int clamp);
/* Latent frames decoded per internal step (default 1: the least memory). Larger steps
 * give the same frames; work buffers grow with it. */
lv_status lv_vae_set_step_frames(lv_vae_decoder *dec, int step_frames);
/* Sequence parallelism (pipelines/parallel/README.md): every latent frame's rows in bands
 * (lv_sp_band over the latent rows), each computed as one rank would: each 3x3 conv reads
 * one halo row from each neighbouring band, the middle attention its keys and values from
 * the normalised rows of every band (gathered). bands R > 0: all R bands in this process
 * (the emulation, `decode --sp-emulate R`); comm: a communicator holding some of the bands
 * (an MPI rank's one, longvk/sp_comm_mpi.h), borrowed, with every process decoding the
 * same latents; both 0 / NULL: whole frames (the default). The frames equal an unsplit
 * decode's and reach the callback (or frames_out) on the process holding band 0 only; the
 * others count them (lv_vae_frames_decoded). Only between videos (after lv_vae_reset or
 * before the first decode); decoding fails, naming both, when R exceeds the latent rows.
 * Taps are not called over bands; lv_vae_decode_tiled refuses them. */
struct lv_sp_comm;
lv_status lv_vae_set_sequence_parallel(lv_vae_decoder *dec, int bands, struct lv_sp_comm *comm);
/* Forget the history: the next call starts a new video. Also needed to change h, w. */
void lv_vae_reset(lv_vae_decoder *dec);
/* Pixel frames the next call with n latent frames will give: 1 + 4 (n - 1) for the first
 * block of a video, 4 n after. */
int64_t lv_vae_frames_for(const lv_vae_decoder *dec, int n);
/* Pixel frames decoded since the last reset. */
int64_t lv_vae_frames_decoded(const lv_vae_decoder *dec);
/* Resuming a decode (`generate --resume`): the last R latent frames of a video, decoded by a
 * reset decoder (and their frames dropped), leave every causal conv's history exactly as the
 * whole video's decode left it, bit for bit, so that the frames decoded next are the same; R
 * is this, the decoder's temporal receptive field as its structure gives it (40 for Wan2.1;
 * pipelines/wan_vae/README.md, "Resuming a decode"). Fewer frames than R: all of them, from
 * the video's first. The same holds tile by tile (lv_vae_tile_stream) and over bands. */
int lv_vae_history_frames(const lv_vae_decoder *dec);

/* Called for every pixel frame in order: `index` counts from the start of the video,
 * rgb is [3, height, width] (channel planes). Returning anything but LV_OK stops the
 * decode with that status. */
typedef lv_status (*lv_vae_frame_fn)(void *user, int64_t index, const float *rgb, int height,
                                     int width);

/* Decodes n latent frames [z, n, h, w] (normalised, diffusion space) that continue the
 * video; h and w must stay the same until lv_vae_reset. After an error (or a callback that
 * stopped it) the history is not that of a whole step: lv_vae_reset before decoding on. */
lv_status lv_vae_decode_frames_cb(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents,
                                  int n, int h, int w, lv_vae_frame_fn fn, void *user);
/* The same into frames_out [3, T, 8h, 8w] with T = lv_vae_frames_for(dec, n). */
lv_status lv_vae_decode_frames(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents, int n,
                               int h, int w, float *frames_out);

/* Spatial tiling, for devices that cannot hold the full-frame decoder: tiles of
 * tile_h x tile_w latent pixels overlapping by `overlap` (e.g. 32 x 32 and 8: 256-pixel
 * tiles with 64 pixels of overlap). Each tile is decoded over the whole video with its own
 * history and the tiles are blended linearly across the overlaps; device memory is that of
 * one tile. The output differs from an untiled decode near the seams (tiles do not see
 * their neighbours): test_vae.c measures it. */
typedef struct lv_vae_tiling {
    int tile_h, tile_w, overlap;
} lv_vae_tiling;

/* Decodes a whole video [z, n, h, w] from its start (the decoder is reset before and after)
 * into frames_out [3, 1 + 4 (n - 1), 8h, 8w]. */
lv_status lv_vae_decode_tiled(lv_ctx *ctx, lv_vae_decoder *dec, const float *latents, int n,
                              int h, int w, const lv_vae_tiling *tiling, float *frames_out);
/* Device memory of a tiled decode (one tile). */
uint64_t lv_vae_tiled_memory(const lv_vae_decoder *dec, int h, int w, const lv_vae_tiling *tiling);

/* Tiles streamed block by block (`generate --vae-tiles`): the same tiles and blending as
 * lv_vae_decode_tiled, but the video arrives in blocks of latent frames, as generate makes
 * them. Each tile is its own streaming decoder state: its convs' history is kept in host
 * memory between blocks (lv_vae_tile_stream_host_bytes in all) and put back on the device
 * before the tile's next block, so the device holds one tile's decoder
 * (lv_vae_tiled_memory). The frames of a video decoded in any blocks are those of
 * lv_vae_decode_tiled over the whole video, bit for bit; with one tile covering the frame,
 * those of the untiled decode. The decoder is borrowed (not over bands; reset after each
 * block: use it for nothing else while the stream lives). After an error the stream is
 * unusable (destroy it). */
typedef struct lv_vae_tile_stream lv_vae_tile_stream;
lv_status lv_vae_tile_stream_create(lv_vae_decoder *dec, int h, int w, const lv_vae_tiling *tiling,
                                    lv_vae_tile_stream **out);
/* The next n latent frames [z, n, h, w] of the video: fn gets each pixel frame [3, 8h, 8w]
 * in order (the whole block's frames are blended in host memory first). */
lv_status lv_vae_tile_stream_decode(lv_ctx *ctx, lv_vae_tile_stream *s, const float *latents, int n,
                                    lv_vae_frame_fn fn, void *user);
int lv_vae_tile_stream_count(const lv_vae_tile_stream *s);
/* A tile's size in latent pixels (the tiling's, at most the frame's). */
void lv_vae_tile_stream_size(const lv_vae_tile_stream *s, int *tile_h, int *tile_w);
uint64_t lv_vae_tile_stream_host_bytes(const lv_vae_tile_stream *s);
void lv_vae_tile_stream_destroy(lv_vae_tile_stream *s);

/* Tiles for a device budget (`generate --vae-tiles auto`): 0 when the untiled decode at latent
 * h x w fits in `budget` bytes (lv_vae_decoder_memory); else 1 and *out the largest square
 * tiles (at most the frame along each axis; overlap lv_vae_tile_overlap) whose one-tile
 * memory fits; -1 when even tiles of 4 x 4 do not. */
int lv_vae_choose_tiling(const lv_vae_decoder *dec, int h, int w, uint64_t budget, lv_vae_tiling *out);
/* The same choice for the real Wan2.1 decoder from its estimate (lv_vae_memory_estimate_at),
 * no weights loaded: `info --plan`. */
int lv_vae_choose_tiling_estimate(int h, int w, lv_precision precision, uint64_t budget, lv_vae_tiling *out);
/* The overlap generate uses for tiles of tile_h x tile_w latent pixels: half the smaller
 * side, at most 8 (decode --vae-tiling's default; 64 pixels). */
int lv_vae_tile_overlap(int tile_h, int tile_w);

/* Device memory a decode at latent size h x w needs, in bytes: weights, the causal convs'
 * history and the work buffers of one step. lv_vae_memory_estimate is for the real
 * Wan2.1 decoder (dim 96, z 16) with 1-frame steps; lv_vae_decoder_memory for a loaded
 * decoder, its step setting and its bands (lv_vae_set_sequence_parallel: one process's).
 * Where the convolutions run on the tensor cores (engine/README.md) the context adds a
 * scratch buffer of at most 64 MiB for their columns. */
uint64_t lv_vae_memory_estimate(int h, int w);
uint64_t lv_vae_decoder_memory(const lv_vae_decoder *dec, int h, int w);
/* The dtype of a decoder's activations (its work buffers and history frames) under a
 * context's precision: f16 for LV_PRECISION_F16, else f32 (bf16's 8-bit mantissa is too
 * coarse for the VAE's pixels; over bands, lv_vae_set_sequence_parallel, always f32).
 * Arithmetic is f32 either way (pipelines/wan_vae/README.md, "Precision"). */
lv_dtype lv_vae_activation_dtype(lv_precision precision);
/* lv_vae_memory_estimate with the activations of `precision` (lv_vae_activation_dtype). */
uint64_t lv_vae_memory_estimate_at(int h, int w, lv_precision precision);
/* lv_vae_memory_estimate in its three parts (their sum is its result). */
typedef struct lv_vae_memory {
    uint64_t weights, history, work;
} lv_vae_memory;
void lv_vae_memory_estimate_parts(int h, int w, lv_vae_memory *out);
/* The same with the activations of `precision` (lv_vae_memory_estimate_at's parts). */
void lv_vae_memory_estimate_parts_at(int h, int w, lv_precision precision, lv_vae_memory *out);
/* lv_vae_decoder_memory of the decoder these weights make on a context of `precision`
 * (1-frame steps, no bands), read from the tensors present before anything is uploaded:
 * generate's plan. */
lv_status lv_vae_weights_memory(const lv_weights *weights, int h, int w, lv_precision precision, uint64_t *bytes);

/* The structure of a loaded decoder, as read from its weights. */
typedef struct lv_vae_info {
    int z;       /* latent channels (lv_vae_z_dim) */
    int trunk;   /* the middle's width: 4 x the base width (384 for Wan2.1) */
    int head_ch; /* the head's input width: the base width (96) */
    int out_ch;  /* output channels (3: RGB) */
    int upscale; /* pixels per latent pixel, in each direction (8) */
} lv_vae_info;
void lv_vae_decoder_info(const lv_vae_decoder *dec, lv_vae_info *out);
/* Multiply-adds of decoding one later latent frame (4 pixel frames for Wan2.1; the first
 * latent frame of a video costs less) at latent size h x w: the convolutions' and the
 * middle attention's, counted from the structure (`longvk bench vae` divides by time). */
double lv_vae_decoder_macs(const lv_vae_decoder *dec, int h, int w);

/* The tensors of the Wan2.1 decoder's structure at base width `dim` (96 for Wan2.1; a
 * multiple of 4) and z latent channels (16), under the original names (conv2.*, decoder.*),
 * in the order of the module tree, with their shapes: what lv_vae_decoder_create reads
 * (`longvk bench vae` writes random weights of any width from it). *out: a malloc'd array
 * of *count entries (free() it). LV_ERR_INVALID for a width that is not a positive
 * multiple of 4, or z outside 1 to 64. */
#define LV_VAE_NAME_MAX 96
typedef struct lv_vae_tensor_spec {
    char name[LV_VAE_NAME_MAX]; /* conv2.weight, decoder.upsamples.3.time_conv.bias, ... */
    int ndim;
    int64_t shape[LV_MAX_DIMS];
} lv_vae_tensor_spec;
lv_status lv_vae_expected_tensors(int dim, int z, lv_vae_tensor_spec **out, int *count);

/* Test hook: called with intermediate activations of every step, channels-last
 * [T, H, W, C] ("conv2", "decoder.conv1", "decoder.middle.{0,1,2}",
 * "decoder.upsamples.{i}", "decoder.head"), in the activations' dtype
 * (lv_vae_activation_dtype: f16 at f16 precision). Valid only during the call. */
typedef void (*lv_vae_tap)(void *user, const char *name, lv_ctx *ctx, const lv_tensor *t);
void lv_vae_set_tap(lv_vae_decoder *dec, lv_vae_tap tap, void *user);

/* ---- the encoder ----------------------------------------------------------------------------
 *
 * The causal 3-D encoder of the original (Encoder3d, then conv1 to mean and log-variance; the
 * mean is kept, as SANA-Video's and Wan's pipelines do) on the engine: RGB frames [3, T, H, W]
 * in [-1, 1] in, normalised latents [z, F, H/8, W/8] out, (mean - latents_mean) / latents_std
 * per channel as WanVAE.encode does, in the diffusion model's space (what the decoder takes).
 *
 * Frame counts as in the original's chunking (WanVAE_.encode): frame 0 alone, then 4 frames at
 * a time, each chunk one latent frame: T = 1 + 4k frames give F = 1 + k latent frames. Other
 * counts use the first 1 + 4 floor((T - 1) / 4) frames and ignore the rest (up to 3), as the
 * original does (lv_vae_encoded_frames). H and W must be multiples of 8.
 *
 *   lv_vae_encoder *enc;  lv_vae_encoder_create(ctx, w, &enc);   (LV_ERR_FORMAT: no encoder)
 *   lv_vae_encode_frames(ctx, enc, rgb, T, H, W, latents);       ([z, F, H/8, W/8])
 *   lv_vae_encoder_destroy(ctx, enc);
 *
 * Runs in fp32, or with the convolutions' columns in f16 / bf16 where the decoder's are
 * (the context's precision on the tensor-core path, engine/README.md). */
typedef struct lv_vae_encoder lv_vae_encoder;

/* Reads encoder.* and conv1.* (diffusers: encoder.conv_in, down_blocks, mid_block, norm_out,
 * conv_out and quant_conv) from the same files as the decoder; the structure comes from the
 * tensors present. A file without them (a decoder-only file) is refused with LV_ERR_FORMAT and
 * a message saying so. The normalisation tables as for the decoder (metadata, or Wan2.1's for
 * z = 16; lv_vae_encoder_set_normalization else). */
lv_status lv_vae_encoder_create(lv_ctx *ctx, const lv_weights *weights, lv_vae_encoder **out);
void lv_vae_encoder_destroy(lv_ctx *ctx, lv_vae_encoder *enc);
/* Latent channels z (16 for Wan2.1) and pixels per latent pixel in each direction (8). */
int lv_vae_encoder_z_dim(const lv_vae_encoder *enc);
int lv_vae_encoder_downscale(const lv_vae_encoder *enc);
/* The normalisation z = (mean - m) / s, z entries each (s > 0), as lv_vae_set_normalization. */
lv_status lv_vae_encoder_set_normalization(lv_vae_encoder *enc, const float *mean, const float *std);
/* Latent frames T pixel frames give: 1 + (T - 1) / 4 (rounded down; 0 for T < 1). */
int lv_vae_encoded_frames(int T);
/* Encodes a whole video: rgb [3, T, H, W] (channel planes, values in [-1, 1]) into
 * latents_out [z, lv_vae_encoded_frames(T), H / 8, W / 8], one chunk at a time on the device
 * with the causal convs' history carried between chunks. Nothing is carried between calls. */
lv_status lv_vae_encode_frames(lv_ctx *ctx, lv_vae_encoder *enc, const float *rgb, int T, int H, int W,
                               float *latents_out);
/* Device memory an encode of H x W frames needs (weights, history, work buffers). */
uint64_t lv_vae_encoder_memory(const lv_vae_encoder *enc, int H, int W);
/* Spatial tiling as for the decoder (lv_vae_tiling, in latent pixels: a tile is 8 tile_h x
 * 8 tile_w pixels): each tile encoded over the whole video on its own, the tiles' latents
 * blended linearly across the overlaps; device memory is that of one tile
 * (lv_vae_encoder_tiled_memory). Near the seams the latents differ from an untiled encode
 * (tiles do not see their neighbours; test_vae_encoder.c measures it). */
lv_status lv_vae_encode_tiled(lv_ctx *ctx, lv_vae_encoder *enc, const float *rgb, int T, int H, int W,
                              const lv_vae_tiling *tiling, float *latents_out);
uint64_t lv_vae_encoder_tiled_memory(const lv_vae_encoder *enc, int H, int W, const lv_vae_tiling *tiling);
/* Parameters of encoder.* and conv1.* as loaded. */
uint64_t lv_vae_encoder_params(const lv_vae_encoder *enc);
/* Test hook, as lv_vae_set_tap: "encoder.conv1", "encoder.downsamples.{i}",
 * "encoder.middle.{0,1,2}", "encoder.head" (the head's conv output, 2z channels), per chunk. */
void lv_vae_encoder_set_tap(lv_vae_encoder *enc, lv_vae_tap tap, void *user);

/* What a VAE weight file holds, by tensor names (original or diffusers): parameters of the
 * decoder half (conv2.* / post_quant_conv.*, decoder.*) and of the encoder half (conv1.* /
 * quant_conv.*, encoder.*); 0 for a half that is absent. For `longvk info`. */
typedef struct lv_vae_halves {
    uint64_t decoder_params, encoder_params;
    int decoder_tensors, encoder_tensors;
} lv_vae_halves;
void lv_vae_weights_halves(const lv_weights *w, lv_vae_halves *out);

#ifdef __cplusplus
}
#endif
#endif
