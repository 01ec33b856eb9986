/* Internals shared by the codec sources (the files of codec/). Not installed. */
#ifndef LONGVK_CODEC_INTERNAL_H
#define LONGVK_CODEC_INTERNAL_H

#include <stdio.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/pixfmt.h>

#include "longvk/codec.h"
#include "longvk/files.h"

/* av_error.c: record `fmt` followed by ": " and FFmpeg's text for `averr`. */
lv_status lv_av_error(lv_status status, int averr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Lowers FFmpeg's log level to errors once, unless the program has set one. */
void lv_av_quiet(void);
/* The lv_status that fits an FFmpeg error code (ENOMEM -> LV_ERR_NOMEM, I/O -> LV_ERR_IO...). */
lv_status lv_status_from_av(int averr);

/* containers.c: what a file extension means and which encoder and pixel format to use. */
typedef struct lv_container {
    const char *extension;     /* "mp4" */
    const char *format;        /* libavformat muxer name: "mp4", "matroska", "webm" */
    const char *default_codec; /* encoder name */
    const char *segments;      /* the muxer of its segments, which decides the codecs it takes (HLS:
                                  "mp4"), or NULL: the container's own */
} lv_container;

/* HLS (hls.c): the playlist's muxer writes its own files; each segment's length in seconds of
 * video, and the muxer's options for the playlist at `path`. */
#define LV_HLS_SEGMENT_SECONDS 2
int lv_container_is_hls(const lv_container *c);
lv_status lv_hls_muxer_options(const char *path, AVDictionary **opts);

/* The container for `path`'s extension; an unknown one is an error naming it. */
lv_status lv_container_for_path(const char *path, const lv_container **out);
/* The encoder for `name` (NULL: the container's default; short names "h264", "hevc", "vp9",
 * "av1"), one of the encoders longvk writes with (libx264, libx265, ffv1, libvpx-vp9,
 * libsvtav1, libaom-av1); errors name an unknown codec, an FFmpeg encoder longvk does not
 * offer and a codec the container cannot hold (with the encoders it can). */
lv_status lv_codec_resolve(const char *name, const lv_container *container, const char *path,
                           const AVCodec **out);
/* The pixel format to feed `codec`: bgr0 for ffv1 (lossless RGB), yuv420p otherwise. */
lv_status lv_codec_pix_fmt(const AVCodec *codec, enum AVPixelFormat *out);
/* The crf and preset a codec gets when the options leave them unset (-1 / NULL: none). */
int lv_codec_default_crf(const AVCodec *codec);
/* The most frames `codec` reorders where FFmpeg's wrapper leaves has_b_frames at 0 although
 * the encoder holds frames back (libx265: 2); 0 for the others. */
int lv_codec_reorder_bound(const AVCodec *codec);
const char *lv_codec_default_preset(const AVCodec *codec);

/* colour.c: libswscale contexts with the colour matrix and range set explicitly.
 * RGB24 (full range) -> `dst` (yuv: BT.709 limited; rgb formats: a repack). */
struct SwsContext *lv_sws_from_rgb24(int width, int height, enum AVPixelFormat dst);
/* `src` -> RGB24 full range, reading YUV with `space` and `range` (unspecified: BT.601, limited). */
struct SwsContext *lv_sws_to_rgb24(int width, int height, enum AVPixelFormat src,
                                   enum AVColorSpace space, enum AVColorRange range);
/* `src` -> yuv444p 8-bit, for metrics on sources whose planes are not 8-bit planar YUV:
 * RGB becomes BT.709 limited (as the encoder writes it), YUV keeps its range. */
struct SwsContext *lv_sws_to_yuv444(int width, int height, enum AVPixelFormat src, enum AVColorRange range);
/* 1 when `fmt` is 8-bit planar YUV (or gray) whose planes metrics can use as they are. */
int lv_pix_fmt_is_planar_yuv8(enum AVPixelFormat fmt);

/* file_output.c: an AVIOContext writing to a file descriptor we own, so that a write error
 * (a full disk) is reported with its errno and a block can be synced to the disk. */
typedef struct lv_file_output lv_file_output;
/* `name`: the file messages name (NULL: path), the user's output when path is the temporary
 * file it is written under (a resume, generate's first block): errors never name that one. */
lv_status lv_file_output_open(const char *path, const char *name, lv_file_output **out);
AVIOContext *lv_file_output_avio(lv_file_output *f);
/* avio_flush and, with sync, fdatasync. Returns the first write error met so far. */
lv_status lv_file_output_flush(lv_file_output *f, int sync);
/* The first write error (0 if none), as an AVERROR code. */
int lv_file_output_error(const lv_file_output *f);
/* Flushes and closes; returns the first error met over the file's life. NULL is allowed. */
lv_status lv_file_output_close(lv_file_output *f);

/* atomic_file.c: text outputs written to a temporary file beside `path`, renamed at commit
 * (a device or FIFO written through): lv_output_file of longvk/files.h. */
typedef lv_output_file lv_atomic_file;
lv_status lv_atomic_open(lv_atomic_file *f, const char *path);
/* Closes and renames; on a write error removes the temporary file and reports it. */
lv_status lv_atomic_commit(lv_atomic_file *f);
void lv_atomic_discard(lv_atomic_file *f);

/* encoder.c, for resume.c. lv_encoder_open, but the file is written under `tmp_path`
 * (NULL: path itself) and renamed to `path` at the first block flush or at close; an
 * encoder aborted (or failing at close) before that removes tmp_path and leaves path alone. */
lv_status lv_encoder_open_as(const char *path, const char *tmp_path, int width, int height, double fps,
                             const lv_encoder_options *opt, lv_encoder **out);
/* The global stream header the encoder's instances write (NULL, 0 when none). */
const uint8_t *lv_encoder_stream_header(const lv_encoder *enc, int *size);
/* Frames the encoder reorders (x264's B-frame delay, x265's 2; 0 with ffv1, vpx, and with
 * low_delay for x264): its packets' decode times run this many frames behind. */
int lv_encoder_reorder_delay(const lv_encoder *enc);
/* Muxes a packet taken from another file, its pts, dts and duration in frames (1 / fps).
 * Consumes the packet's data (unref). */
lv_status lv_encoder_mux_copy(lv_encoder *enc, AVPacket *pkt);
/* Ends the current mp4 fragment / mkv cluster and writes it out (no sync). */
lv_status lv_encoder_end_fragment(lv_encoder *enc);
/* Counts `frames` frames as written and flushed, before the first lv_encoder_write_*: the
 * next frame written is frame `frames`, timestamps continuing from there. */
void lv_encoder_start_at(lv_encoder *enc, int64_t frames);

/* hls_resume.c: continuing an HLS stream. lv_hls_open_continued checks the playlist and
 * its segments against this run and keep (the frames they must name) and returns an
 * encoder whose muxer writes the new segments beside them; the encoder calls
 * lv_hls_continuation_update after every block flush (closing 0) and at close (1: with
 * EXT-X-ENDLIST), which merges them into the playlist. */
typedef struct lv_hls_continuation lv_hls_continuation;
lv_status lv_hls_open_continued(const char *path, int width, int height, double fps, const lv_encoder_options *opt,
                                int64_t keep, lv_encoder **out);
const char *lv_hls_continuation_url(const lv_hls_continuation *h); /* the muxer's own playlist */
lv_status lv_hls_continuation_options(const lv_hls_continuation *h, AVDictionary **opts);
lv_status lv_hls_continuation_update(lv_hls_continuation *h, int closing);
void lv_hls_continuation_free(lv_hls_continuation *h);
/* encoder.c: the encoder writes the continuation of h (and frees it) */
void lv_encoder_continue_hls(lv_encoder *enc, lv_hls_continuation *h);

/* resume.c: the old stream against what this run writes: container family, codec, pixel
 * format, size, frame rate; then the encoder's stream header. */
lv_status lv_resume_check_stream(const char *path, const AVFormatContext *fmt, const AVStream *st,
                                 const lv_container *container, const AVCodec *codec, enum AVPixelFormat pix_fmt,
                                 int width, int height, AVRational fps);
lv_status lv_resume_check_header(const char *path, const AVStream *st, lv_encoder *enc);

/* resume.c: renames a resumed file from tmp to path (and, with sync, syncs the directory
 * so the rename itself survives a power loss). */
lv_status lv_resume_commit(const char *tmp, const char *path, int sync);

#endif
