/* Video files: a streaming encoder (frames go in one block at a time and reach the disk at
 * every block boundary) and a decoder (frames come out one at a time as 8-bit RGB). The
 * temporal-consistency metrics of `longvk metrics` are in longvk/metrics.h.
 *
 * Built on FFmpeg's libavcodec, libavformat, libavutil and libswscale; none of their types
 * appear here. Functions that can fail return an lv_status and leave a message in
 * lv_last_error(). */
#ifndef LONGVK_CODEC_H
#define LONGVK_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "longvk/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Encoder
 *
 * The container comes from the file extension: .mp4 (default codec libx264), .mkv (libx264;
 * ffv1 for lossless RGB), .webm (libvpx-vp9). The encoders: libx264 and libx265 (.mp4,
 * .mkv), ffv1 (.mkv), libvpx-vp9, libsvtav1 and libaom-av1 (.mp4, .mkv, .webm); other
 * FFmpeg encoders are refused. All but ffv1 encode yuv420p, converted from RGB with BT.709
 * coefficients and limited (MPEG) range, and the stream is tagged BT.709 / limited to match.
 * ffv1 stores the RGB samples themselves (bgr0): a round trip is bit-exact. libsvtav1 needs
 * frames of at least 64x64.
 *
 * .m3u8: an HLS stream (codec/hls.c), FFmpeg's hls muxer writing fragmented-MP4 segments of
 * about 2 s (PATH-without-.m3u8.00000.m4s, ... after PATH-without-.m3u8.init.mp4) and a
 * playlist of type EVENT that names complete segments only (each segment and the playlist
 * are renamed into place), EXT-X-ENDLIST at lv_encoder_close; the codecs fragmented MP4
 * holds (not ffv1; default libx264). Nothing is written before the first packet. A block
 * flush does not end a segment: a killed writer leaves every segment the playlist names
 * playable, and the frames after the last complete segment are lost. Resumable from the
 * frames the playlist names (lv_hls_named_frames, lv_encoder_open_resume): the named
 * segments are kept as they are and the new ones numbered on, with the same init segment.
 *
 * Blocks: lv_encoder_flush_block() ends a block. The encoder is drained, every frame of the
 * block is muxed, the container is flushed (a fragment per block for mp4, a cluster for
 * mkv/webm) and the file is synced (sync_blocks), so a process killed later leaves a file
 * that plays and holds every flushed frame. The file is written in place, not through a temporary name,
 * for exactly that reason.
 *
 * An encoder that holds frames back (x264's B-frames and look-ahead, vpx's lag, svt-av1)
 * cannot resume once drained, so after a block boundary a new encoder instance with the
 * same parameters starts the next block with a keyframe (a closed GOP per block); one
 * clock of timestamps runs through all of them. That keyframe is a small seam of its own:
 * with libx264 at crf 18 a near-static 128x96 clip measured a seam ratio (MAE) of 1.42
 * against 0.97 for one continuous encode, a panning clip 1.07 against 1.03. To measure a
 * model's seams, write ffv1 (lossless) or set low_delay, which keeps one encoder across
 * blocks. Encoders that give a packet for every frame at once (ffv1, low_delay) are never
 * restarted.
 *
 * Memory stays constant however many frames are written: one frame of scratch space plus
 * the encoder's own look-ahead. (mp4 with faststart keeps its sample index, ~40 bytes per
 * frame, until the end.) */

typedef struct lv_encoder lv_encoder;

typedef struct lv_encoder_options {
    /* NULL: the container's default. Otherwise one of the encoders above ("libx264",
     * "libx265", "ffv1", "libvpx-vp9", "libsvtav1", "libaom-av1") or a short name: "h264",
     * "hevc", "vp9", "av1" (libsvtav1). Any other name is an error naming it. */
    const char *codec;
    /* Constant-quality factor; < 0 for the default: 18 for libx264, 31 for libvpx-vp9,
     * the encoder's own otherwise. An encoder without a "crf" option reports it. */
    int crf;
    /* NULL for the default: "medium" for libx264, the encoder's own otherwise. */
    const char *preset;
    /* mp4 only: write an ordinary (non-fragmented) file and move its index to the front at
     * close. Not interrupt safe: a killed process leaves a file without an index. */
    int faststart;
    /* More encoder options, "key=value:key=value" (NULL: none). An option the encoder does
     * not know is an error naming it. */
    const char *extra;
    /* 1 (default): fdatasync() at every block boundary, so flushed blocks survive a power
     * loss and not only a killed process. */
    int sync_blocks;
    /* 1: configure the encoder to hold no frame back (libx264, libx265: tune zerolatency,
     * i.e. no B-frames and no look-ahead; libvpx-vp9: lag-in-frames 0), so one encoder instance runs
     * across blocks and blocks do not start with a keyframe. Whether that costs bits depends
     * on the block length: a 416x240 panning clip at crf 18 took 226 kB instead of 138 kB in
     * blocks of 80 frames, but 108 kB instead of 115 kB in blocks of 16. */
    int low_delay;
} lv_encoder_options;

void lv_encoder_options_default(lv_encoder_options *opt);

/* How float frames are laid out in memory. */
typedef enum lv_frame_layout {
    LV_LAYOUT_FHWC = 0, /* [frames, height, width, 3]: interleaved RGB, frame after frame */
    LV_LAYOUT_CFHW = 1  /* [3, frames, height, width]: channel planes, as the VAE decoder gives them */
} lv_frame_layout;

/* Opens `path` for writing `width` x `height` frames at `fps` frames per second (opt NULL:
 * defaults). Errors: an odd size for a 4:2:0 codec (the message suggests the nearest even
 * sizes), an unknown codec, container or option, a codec the container cannot hold, an
 * unwritable path. The codec is checked before the file is created or truncated. */
lv_status lv_encoder_open(const char *path, int width, int height, double fps,
                          const lv_encoder_options *opt, lv_encoder **out);

/* Continues the video an interrupted run left at `path` (killed, or closed cleanly: any
 * file lv_encoder_open wrote as .mp4 (fragmented or faststart), .mkv or .webm), keeping its
 * first `keep_frames` frames; the next frame written is frame keep_frames, and timestamps
 * run on as if the run had never stopped. Frames past keep_frames in the old file (a block
 * the earlier run had not finished, or flushed after its last state was saved) are dropped.
 *
 * keep_frames must be a frame count at which the earlier run ended a block (what
 * lv_encoder_frames_flushed said then), with the same options: there a restarting encoder
 * began a new instance with a keyframe. With ffv1 or low_delay any frame count works. A
 * count inside a group of pictures is refused (LV_ERR_INVALID).
 *
 * The old file is checked against this run: container, codec, pixel format, frame size,
 * frame rate and, for H.264 and ffv1, the stream header (the encoder's settings), each
 * mismatch an LV_ERR_INVALID naming both values ("the video at X has 832x480 frames, this
 * run makes 256x256"); it must hold at least keep_frames frames. No file at `path` is an
 * LV_ERR_IO. (keep_frames 0 reads nothing: whatever is at path is replaced.)
 *
 * The kept frames are copied packet by packet (no re-encoding) into a new file,
 * `path` + ".resume-part", which a fresh encoder instance then continues; it replaces the
 * old file (rename) at the first lv_encoder_flush_block that writes a frame, or at
 * lv_encoder_close. Until then the old file is untouched, so a resume that is killed loses
 * nothing and can be resumed again; lv_encoder_abort before that point removes the new
 * file. A stale ".resume-part" from a killed resume is overwritten.
 *
 * The result equals an uninterrupted run's, frame count and timestamps included. The kept
 * packets are the old file's own, bit for bit. After them: ffv1 decodes bit-exactly; the
 * restarting encoders (x264, vpx, svt-av1) encoded each block on its own anyway, so the
 * packets are the uninterrupted run's too, as far as the encoder is deterministic (x264's
 * AVX-512 code is not quite: its output depends on the heap's earlier contents, so two
 * uninterrupted runs already differ, by about 55 dB PSNR); with low_delay the resumed part
 * starts with a keyframe the uninterrupted run does not have, so its frames are another
 * encode of the same source (a 96x64 clip at crf 18: at least 43.8 dB from the
 * uninterrupted run's frames).
 *
 * lv_encoder_frames_written and lv_encoder_frames_flushed count the kept frames (they
 * return keep_frames right after this call); lv_encoder_instances counts this process's
 * encoder instances only. Copying reads the old file once and writes it again: about as
 * long as reading it.
 *
 * An HLS stream (.m3u8; codec/hls_resume.c): nothing is copied. keep_frames must be the
 * frames its playlist names (lv_hls_named_frames); the playlist and every segment it names
 * are checked as above (and the frames 0 .. keep_frames - 1 each once, in the segments
 * the playlist says), the named segments stay as they are, and the new ones are numbered on
 * after them with the same init segment; the playlist is rewritten (atomically) after every
 * block flush that completes a segment, EXT-X-ENDLIST at lv_encoder_close. A missing or
 * edited playlist, or a segment missing or damaged, is an error naming it, with nothing
 * written. */
lv_status lv_encoder_open_resume(const char *path, int width, int height, double fps,
                                 const lv_encoder_options *opt, int64_t keep_frames,
                                 lv_encoder **out);

/* An HLS stream (.m3u8): the frames its playlist names, whole segments (EXTINF x fps, each
 * a whole number of frames), into *frames: what lv_encoder_open_resume can keep. No
 * playlist: 0, unless its first segment is there (the playlist deleted, or a writer killed
 * between its first segment and its first playlist): an error saying so, *frames 0 (other
 * errors leave -1). A playlist longvk did not write (edited: other tags, other segment
 * names) is an error naming the line. */
lv_status lv_hls_named_frames(const char *path, double fps, int64_t *frames);
/* 1 when `path` names an HLS stream (.m3u8). */
int lv_encoder_path_is_hls(const char *path);

/* Appends `nframes` frames of 8-bit RGB, [frames, height, width, 3], rows packed. */
lv_status lv_encoder_write_rgb(lv_encoder *enc, const uint8_t *rgb, int nframes);

/* Appends `nframes` float frames in [-1, 1] (the model's range). Each value is clamped to
 * [-1, 1] and stored as round(127.5 x + 127.5); NaN is stored as 0 (black). */
lv_status lv_encoder_write_float(lv_encoder *enc, const float *x, int nframes, lv_frame_layout layout);

/* Ends the current block: every frame written so far is encoded, muxed, flushed and synced
 * to the file. A no-op if no frame was written since the last flush. */
lv_status lv_encoder_flush_block(lv_encoder *enc);

/* Flushes the last block, finalises the container and frees the encoder. Returns the first
 * error met (while writing or now, e.g. a full disk); the file is closed either way. */
lv_status lv_encoder_close(lv_encoder *enc);

/* Stops without encoding the frames of the unfinished block: finalises the container with
 * the blocks (and packets) already written, closes the file and frees the encoder. For
 * error paths; never fails. NULL is allowed. */
void lv_encoder_abort(lv_encoder *enc);

/* Frames written so far, and frames flushed to the file (those a killed process keeps). */
int64_t lv_encoder_frames_written(const lv_encoder *enc);
int64_t lv_encoder_frames_flushed(const lv_encoder *enc);
/* Encoder instances used so far: 1, plus one for every block boundary that had to drain
 * (and so restart) an encoder holding frames back. */
int64_t lv_encoder_instances(const lv_encoder *enc);
/* The FFmpeg encoder in use ("libx264") and the pixel format it is fed ("yuv420p"). */
const char *lv_encoder_codec_name(const lv_encoder *enc);
const char *lv_encoder_pix_fmt(const lv_encoder *enc);

/* ------------------------------------------------------------------------------------------
 * Decoder: any video FFmpeg reads; frames come out in display order as 8-bit RGB, converted
 * with the matrix and range the stream is tagged with (untagged: BT.601, limited, as FFmpeg
 * assumes). */

typedef struct lv_decoder lv_decoder;

typedef struct lv_video_info {
    int width, height;
    int fps_num, fps_den;   /* frame rate as the container gives it (0/1 when unknown) */
    double fps;             /* fps_num / fps_den, 0 when unknown */
    int64_t frames;         /* frame count the container states, -1 when it does not
                             * (fragmented mp4, mkv): count by decoding for the exact number */
    double duration;        /* seconds (the stream's, else the file's), -1 when unknown */
    char container[32];     /* "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", ... */
    char codec[32];         /* decoder name, e.g. "h264", "ffv1" */
    char pix_fmt[32];       /* decoded pixel format, e.g. "yuv420p", "bgr0" */
    /* colour tags as FFmpeg names them ("bt709", "tv" = limited, "pc" = full), or
     * "unknown" when the stream does not say */
    char color_primaries[24], color_trc[24], color_space[24], color_range[16];
} lv_video_info;

/* One decoded frame: its index in display order (0, 1, ...) and its presentation time in
 * seconds from the start of the stream. (A fragmented mp4 from libx264 stores its first
 * frame at 2/fps, the B-frame delay, as an empty index cannot carry the edit list that
 * would hide it; counted from the stream's start the first frame is at 0 all the same.) */
typedef struct lv_frame_info {
    int64_t index;
    double pts_seconds;
} lv_frame_info;

/* Up to three 8-bit planes of the last decoded frame in YUV (Y first). For 8-bit planar YUV
 * sources these are the decoded planes themselves (what FFmpeg's ssim and psnr filters
 * see); for other sources (RGB, more than 8 bits) they are computed from the RGB frame
 * with BT.709 limited range as yuv444p, and `native` is 0. nplanes is 1 for gray video. */
typedef struct lv_yuv_planes {
    int nplanes;
    const uint8_t *data[3];
    int stride[3];
    int width[3], height[3];
    int native;
} lv_yuv_planes;

/* Errors: a missing or unreadable file (LV_ERR_IO), a file FFmpeg cannot read or one with
 * no video stream (LV_ERR_FORMAT), no decoder for its codec (LV_ERR_UNSUPPORTED). */
lv_status lv_decoder_open(const char *path, lv_decoder **out);
const lv_video_info *lv_decoder_info(const lv_decoder *dec);
/* Decodes the next frame into `rgb` (width * height * 3 bytes, rows packed; NULL to skip the
 * conversion) and fills `frame` (may be NULL). Sets *end to 1 and returns LV_OK at the end of
 * the stream (a truncated file, e.g. one whose writer was killed, ends where its data ends);
 * otherwise *end is 0. */
lv_status lv_decoder_next(lv_decoder *dec, uint8_t *rgb, lv_frame_info *frame, int *end);
/* The YUV planes of the frame the last lv_decoder_next returned; valid until the next call. */
lv_status lv_decoder_planes(lv_decoder *dec, lv_yuv_planes *out);
void lv_decoder_close(lv_decoder *dec);

#ifdef __cplusplus
}
#endif
#endif
