/* Resuming a video an interrupted run left behind (see lv_encoder_open_resume in
 * longvk/codec.h).
 *
 * The old file is read packet by packet and its first keep_frames frames are copied, not
 * re-encoded, into a new file written under a temporary name beside it; a fresh encoder then
 * continues from frame keep_frames. The new file replaces the old one (rename) only once it
 * holds a new block, or at close, so a resume that is itself interrupted loses nothing.
 *
 * Why copying is exact: the encoder starts a new encoder instance with a keyframe at every
 * block boundary where it drains one (x264, vpx, svt-av1), so the packets of the first
 * keep_frames frames decode without any packet after them; encoders that never reorder
 * (ffv1, low_delay) can be cut after any frame. The check that makes this safe for any file
 * is that the kept packets come first in decode order: a packet can only refer to packets
 * decoded before it. Timestamps are rebuilt in frames exactly as the encoder makes them
 * (pts = frame index, dts = packet index - reordering delay), so the copied packets get the
 * timestamps they had when first written, whatever the container's clock rounded. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavutil/pixdesc.h>

#include "codec_internal.h"
#include "longvk/files.h"

/* The temporary name: the output's own name plus this, in the same directory (rename is
 * atomic only within one file system). A stale one from a killed resume is overwritten. */
#define LV_RESUME_SUFFIX ".resume-part"
/* While copying, an mp4 fragment is held in memory until it ends: end one at every keyframe
 * (where the earlier run's blocks began) and at least every this many bytes. */
#define LV_COPY_FRAGMENT_BYTES (4 << 20)

lv_status lv_resume_commit(const char *tmp, const char *path, int sync) {
    if (rename(tmp, path) != 0)
        return lv_error(LV_ERR_IO, "cannot put the video written beside %s in its place (a rename in its folder): %s",
                        path, strerror(errno));
    if (!sync) return LV_OK;
    /* the rename is an entry in the directory: sync that too, or a power loss may undo it */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return lv_error(LV_ERR_IO, "cannot open directory %s to sync it: %s", dir, strerror(errno));
    int err = fsync(fd) != 0 && errno != EINVAL && errno != EROFS ? errno : 0;
    close(fd);
    return err ? lv_error(LV_ERR_IO, "syncing directory %s: %s", dir, strerror(err)) : LV_OK;
}

/* ------------------------------------------------------------------------------------------
 * Does the old file hold what this run would write? */

typedef struct old_video {
    const char *path;
    AVFormatContext *fmt;
    AVStream *st;
    AVPacket *pkt;
} old_video;

static void old_video_close(old_video *v) {
    avformat_close_input(&v->fmt);
    av_packet_free(&v->pkt);
}

static lv_status old_video_open(old_video *v, const char *path) {
    memset(v, 0, sizeof *v);
    v->path = path;
    if (access(path, F_OK) == 0) LV_TRY(lv_check_regular_file(path)); /* FFmpeg would wait on a FIFO */
    int ret = avformat_open_input(&v->fmt, path, NULL, NULL);
    if (ret == AVERROR(ENOENT)) return lv_error(LV_ERR_IO, "cannot resume %s: there is no video there to continue", path);
    if (ret < 0) {
        if (ret == AVERROR(EACCES) || ret == AVERROR(EISDIR) || ret == AVERROR(EIO))
            return lv_av_error(LV_ERR_IO, ret, "cannot resume %s: cannot read it", path);
        return lv_av_error(LV_ERR_FORMAT, ret, "cannot resume %s: it is not a video FFmpeg can read", path);
    }
    ret = avformat_find_stream_info(v->fmt, NULL);
    if (ret < 0) return lv_av_error(LV_ERR_FORMAT, ret, "cannot resume %s: cannot find its streams", path);
    for (unsigned i = 0; i < v->fmt->nb_streams && !v->st; i++) {
        AVStream *s = v->fmt->streams[i];
        if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO && !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) v->st = s;
    }
    if (!v->st) return lv_error(LV_ERR_FORMAT, "cannot resume %s: it holds no video stream", path);
    v->pkt = av_packet_alloc();
    if (!v->pkt) return lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    return LV_OK;
}

/* Container, codec, pixel format, size and frame rate against what this run makes. */
lv_status lv_resume_check_stream(const char *path, const AVFormatContext *fmt, const AVStream *st,
                                 const lv_container *container, const AVCodec *codec, enum AVPixelFormat pix_fmt,
                                 int width, int height, AVRational fps) {
    /* HLS: fragmented-MP4 segments */
    const char *family = strcmp(container->format, "mp4") == 0 || lv_container_is_hls(container) ? "mp4" : "matroska";
    if (!strstr(fmt->iformat->name, family))
        return lv_error(LV_ERR_INVALID, "the video at %s is a %s file, this run writes %s", path, fmt->iformat->name,
                        container->format);
    const AVCodecParameters *par = st->codecpar;
    if (par->codec_id != codec->id)
        return lv_error(LV_ERR_INVALID, "the video at %s is %s video, this run makes %s (encoder %s)", path,
                        avcodec_get_name(par->codec_id), avcodec_get_name(codec->id), codec->name);
    if (par->width != width || par->height != height)
        return lv_error(LV_ERR_INVALID, "the video at %s has %dx%d frames, this run makes %dx%d", path, par->width,
                        par->height, width, height);
    if (par->format != pix_fmt) {
        const char *name = par->format >= 0 ? av_get_pix_fmt_name((enum AVPixelFormat)par->format) : NULL;
        return lv_error(LV_ERR_INVALID, "the video at %s stores %s frames, this run makes %s", path,
                        name ? name : "unknown", av_get_pix_fmt_name(pix_fmt));
    }
    AVRational r = st->avg_frame_rate;
    if (r.num <= 0 || r.den <= 0) r = st->r_frame_rate;
    /* relative tolerance: mkv states the rate as a frame duration in whole nanoseconds */
    if (r.num > 0 && r.den > 0 && fabs(av_q2d(r) / av_q2d(fps) - 1) > 1e-6)
        return lv_error(LV_ERR_INVALID, "the video at %s runs at %g fps, this run makes %g fps", path, av_q2d(r),
                        av_q2d(fps));
    return LV_OK;
}

/* The NAL units of an H.264 stream header, given either as avcC (how mp4 and mkv store it)
 * or with start codes (how x264 gives it). Returns the count, -1 if malformed. */
typedef struct nal_unit {
    const uint8_t *data;
    int size;
} nal_unit;

static int h264_header_units(const uint8_t *p, int n, nal_unit *u, int max) {
    int count = 0;
    if (n >= 7 && p[0] == 1) { /* avcC: 5 bytes, then SPS count + (length, unit)..., PPS count + ... */
        int off = 5;
        for (int list = 0; list < 2; list++) {
            if (off >= n) return -1;
            int units = list == 0 ? p[off] & 31 : p[off];
            off++;
            for (int i = 0; i < units; i++) {
                if (off + 2 > n) return -1;
                int len = (p[off] << 8) | p[off + 1];
                off += 2;
                if (len > n - off || count == max) return -1;
                u[count++] = (nal_unit){p + off, len};
                off += len;
            }
        }
        return count; /* bytes after the PPS (high-profile extensions) repeat what the SPS says */
    }
    int i = 0;
    for (;;) { /* start codes 00 00 01 (a leading 00 of 00 00 00 01 ends the unit before) */
        while (i + 3 <= n && !(p[i] == 0 && p[i + 1] == 0 && p[i + 2] == 1)) i++;
        if (i + 3 > n) break;
        int start = i + 3, end = start;
        while (end + 3 <= n && !(p[end] == 0 && p[end + 1] == 0 && p[end + 2] == 1)) end++;
        if (end + 3 > n) end = n;
        int stop = end;
        while (stop > start && p[stop - 1] == 0) stop--;
        if (count == max) return -1;
        u[count++] = (nal_unit){p + start, stop - start};
        i = end;
    }
    return count;
}

/* The old stream's header must be the one this run's encoder writes: the same encoder
 * settings (preset, profile, low_delay, extra options). Compared where the container keeps
 * the header in a form we can read back: H.264 (parameter sets) and ffv1 (as is). */
lv_status lv_resume_check_header(const char *path, const AVStream *st, lv_encoder *enc) {
    int size;
    const uint8_t *mine = lv_encoder_stream_header(enc, &size);
    const AVCodecParameters *par = st->codecpar;
    int same = 1;
    if (par->codec_id == AV_CODEC_ID_H264) {
        nal_unit a[32], b[32];
        int na = h264_header_units(par->extradata, par->extradata_size, a, 32);
        int nb = h264_header_units(mine, size, b, 32);
        same = na == nb && na >= 0;
        for (int i = 0; same && i < na; i++)
            same = a[i].size == b[i].size && memcmp(a[i].data, b[i].data, (size_t)a[i].size) == 0;
    } else if (par->codec_id == AV_CODEC_ID_FFV1) {
        same = par->extradata_size == size && (size == 0 || memcmp(par->extradata, mine, (size_t)size) == 0);
    }
    if (!same)
        return lv_error(LV_ERR_INVALID,
                        "the video at %s was encoded with other settings than this run: its %s stream header differs "
                        "(another preset, profile, low_delay or extra option?)",
                        path, avcodec_get_name(par->codec_id));
    return LV_OK;
}

/* ------------------------------------------------------------------------------------------
 * Copying the first keep_frames frames */

/* mp4 and mkv store H.264 and HEVC with every NAL unit prefixed by its length (avcC,
 * hvcC); the encoder's packets, which the muxer expects and converts, carry start codes
 * (Annex B). Turns a stored packet back into that form, in `scratch`, and moves it into pkt. */
static lv_status nal_to_annexb(AVPacket *pkt, int length_size, AVPacket *scratch, const char *path, int64_t frame,
                               const char *codec) {
    size_t out = 0;
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *p = pkt->data, *end = pkt->data + pkt->size;
        uint8_t *dst = pass ? scratch->data : NULL;
        while (p < end) {
            if (end - p < length_size) goto malformed;
            size_t len = 0;
            for (int i = 0; i < length_size; i++) len = (len << 8) | p[i];
            p += length_size;
            if (len == 0 || len > (size_t)(end - p)) goto malformed;
            if (dst) {
                memcpy(dst, "\0\0\0\1", 4);
                memcpy(dst + 4, p, len);
                dst += 4 + len;
            } else {
                out += 4 + len;
            }
            p += len;
        }
        if (!pass) {
            if (out > INT32_MAX - 64) goto malformed;
            int ret = av_new_packet(scratch, (int)out);
            if (ret < 0) return lv_av_error(LV_ERR_NOMEM, ret, "resuming %s", path);
        }
    }
    int ret = av_packet_copy_props(scratch, pkt);
    av_packet_unref(pkt);
    if (ret < 0) {
        av_packet_unref(scratch);
        return lv_av_error(LV_ERR_NOMEM, ret, "resuming %s", path);
    }
    av_packet_move_ref(pkt, scratch);
    return LV_OK;
malformed:
    av_packet_unref(scratch);
    return lv_error(LV_ERR_FORMAT, "resuming %s: frame %lld is not a well-formed %s packet", path, (long long)frame,
                    codec);
}

static lv_status copy_frames(old_video *v, lv_encoder *enc, AVRational frame_tb, int64_t keep) {
    const char *path = v->path;
    AVStream *st = v->st;
    AVPacket *pkt = v->pkt;
    /* one bit per frame met, grown as frames come: memory follows the file, not keep */
    uint8_t *seen = NULL;
    int64_t seen_bytes = 0;
    const int delay = lv_encoder_reorder_delay(enc);
    const AVCodecParameters *par = st->codecpar;
    int nal_length_size = 0; /* H.264 stored as avcC, HEVC as hvcC: packets to turn back into Annex B */
    if (par->codec_id == AV_CODEC_ID_H264 && par->extradata_size >= 7 && par->extradata[0] == 1)
        nal_length_size = (par->extradata[4] & 3) + 1;
    if (par->codec_id == AV_CODEC_ID_HEVC && par->extradata_size >= 23 && par->extradata[0] == 1)
        nal_length_size = (par->extradata[21] & 3) + 1;
    AVPacket *scratch = av_packet_alloc();
    if (!scratch) return lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    int64_t origin = st->start_time; /* the first frame's pts: frame 0 */
    int64_t packets = 0, kept = 0, first_dropped = -1, last_dts = INT64_MIN, fragment_bytes = 0;
    lv_status s = LV_OK;
    while (s == LV_OK) {
        int ret = av_read_frame(v->fmt, pkt);
        /* the end, or the end of the readable part (a writer killed inside a block) */
        if (ret == AVERROR_EOF || ret == AVERROR_INVALIDDATA) break;
        if (ret < 0) {
            s = lv_av_error(lv_status_from_av(ret), ret, "resuming %s: reading it", path);
            break;
        }
        if (pkt->stream_index != st->index) {
            av_packet_unref(pkt);
            continue;
        }
        int64_t index = packets++; /* position in decode order */
        if (pkt->pts == AV_NOPTS_VALUE) {
            s = lv_error(LV_ERR_FORMAT, "resuming %s: its packet %lld has no timestamp", path, (long long)index);
            break;
        }
        if (origin == AV_NOPTS_VALUE) origin = pkt->pts;
        int64_t frame = av_rescale_q_rnd(pkt->pts - origin, st->time_base, frame_tb, AV_ROUND_NEAR_INF);
        if (frame < 0) {
            s = lv_error(LV_ERR_FORMAT, "resuming %s: its packet %lld is timed before the first frame", path,
                         (long long)index);
            break;
        }
        if (frame >= keep) { /* past the frames to keep: dropped */
            if (first_dropped < 0) first_dropped = frame;
            av_packet_unref(pkt);
            continue;
        }
        if (first_dropped >= 0) {
            s = lv_error(LV_ERR_INVALID,
                         "cannot resume %s after frame %lld: that is not where a block of the earlier run ended "
                         "(frame %lld, to keep, is stored after frame %lld, to drop: the encoder coded them "
                         "together); keep_frames must be a frame count the earlier run had flushed",
                         path, (long long)keep, (long long)frame, (long long)first_dropped);
            break;
        }
        if ((frame >> 3) >= seen_bytes) {
            int64_t bytes = seen_bytes ? 2 * seen_bytes : 1024;
            if (bytes <= (frame >> 3)) bytes = (frame >> 3) + 1;
            uint8_t *grown = realloc(seen, (size_t)bytes);
            if (!grown) {
                s = lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
                break;
            }
            memset(grown + seen_bytes, 0, (size_t)(bytes - seen_bytes));
            seen = grown;
            seen_bytes = bytes;
        }
        if (seen[frame >> 3] & (1u << (frame & 7))) {
            s = lv_error(LV_ERR_FORMAT, "resuming %s: it holds frame %lld twice (at %.6f s)", path, (long long)frame,
                         (double)(pkt->pts - origin) * av_q2d(st->time_base));
            break;
        }
        if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
            s = lv_error(LV_ERR_FORMAT, "resuming %s: its frame %lld is truncated, and it is one of the %lld to keep",
                         path, (long long)frame, (long long)keep);
            break;
        }
        seen[frame >> 3] |= (uint8_t)(1u << (frame & 7));
        kept++;
        /* the timestamps the encoder gave this packet (encoder.c, mux_ready_packets) */
        int64_t dts = index - delay;
        if (dts > frame) dts = frame;
        if (dts <= last_dts) {
            s = lv_error(LV_ERR_FORMAT, "resuming %s: its frames are not in an order this encoder writes (frame %lld)",
                         path, (long long)frame);
            break;
        }
        last_dts = dts;
        if (kept > 1 && ((pkt->flags & AV_PKT_FLAG_KEY) || fragment_bytes >= LV_COPY_FRAGMENT_BYTES)) {
            s = lv_encoder_end_fragment(enc);
            fragment_bytes = 0;
            if (s != LV_OK) break;
        }
        fragment_bytes += pkt->size;
        if (nal_length_size) {
            s = nal_to_annexb(pkt, nal_length_size, scratch, path, frame, avcodec_get_name(par->codec_id));
            if (s != LV_OK) break;
        }
        av_packet_free_side_data(pkt);
        if (kept == 1 && par->extradata_size > 0) {
            /* An encoder that gives its stream header with its first packet instead of when
             * opened (libaom-av1 in FFmpeg 5.1): the muxer takes it from there, and without
             * it matroska refuses an AV1 stream ("Invalid data"). Hand it the old file's. */
            int size;
            lv_encoder_stream_header(enc, &size);
            if (size == 0) {
                uint8_t *side = av_packet_new_side_data(pkt, AV_PKT_DATA_NEW_EXTRADATA, (size_t)par->extradata_size);
                if (!side) {
                    s = lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
                    break;
                }
                memcpy(side, par->extradata, (size_t)par->extradata_size);
            }
        }
        pkt->pts = frame;
        pkt->dts = dts;
        pkt->duration = 1;
        pkt->pos = -1;
        pkt->flags &= AV_PKT_FLAG_KEY;
        s = lv_encoder_mux_copy(enc, pkt);
    }
    av_packet_unref(pkt);
    av_packet_free(&scratch);
    if (s == LV_OK && kept < keep) {
        if (packets < keep)
            s = lv_error(LV_ERR_INVALID, "the video at %s holds %lld frames, fewer than the %lld to keep", path,
                         (long long)packets, (long long)keep);
        else {
            int64_t missing = 0;
            while ((missing >> 3) < seen_bytes && (seen[missing >> 3] & (1u << (missing & 7)))) missing++;
            s = lv_error(LV_ERR_FORMAT, "the video at %s has no frame %lld (at %.6f s), one of the %lld to keep", path,
                         (long long)missing, (double)missing * av_q2d(frame_tb), (long long)keep);
        }
    }
    free(seen);
    if (s == LV_OK && kept > 0) s = lv_encoder_end_fragment(enc);
    return s;
}

lv_status lv_encoder_open_resume(const char *path, int width, int height, double fps, const lv_encoder_options *options,
                                 int64_t keep_frames, lv_encoder **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_encoder_open_resume: out is NULL");
    *out = NULL;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "lv_encoder_open_resume: empty path");
    if (keep_frames < 0)
        return lv_error(LV_ERR_INVALID, "resuming %s: %lld frames to keep (must be >= 0)", path, (long long)keep_frames);
    const lv_container *hls;
    if (lv_container_for_path(path, &hls) == LV_OK && lv_container_is_hls(hls)) {
        /* HLS: segments written in place beside the playlist (hls.c); continued by hls_resume.c */
        if (keep_frames == 0) return lv_encoder_open_as(path, NULL, width, height, fps, options, out);
        lv_encoder_options defaults;
        lv_encoder_options_default(&defaults);
        lv_av_quiet();
        return lv_hls_open_continued(path, width, height, fps, options ? options : &defaults, keep_frames, out);
    }
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s%s", path, LV_RESUME_SUFFIX) >= (int)sizeof tmp)
        return lv_error(LV_ERR_INVALID, "path too long: %s", path);
    if (keep_frames == 0) /* nothing to keep: a new video that replaces the old at its first block */
        return lv_encoder_open_as(path, tmp, width, height, fps, options, out);
    if (!(fps > 0) || !isfinite(fps) || fps > 1000)
        return lv_error(LV_ERR_INVALID, "frame rate %g for %s: must be in (0, 1000]", fps, path);

    lv_encoder_options defaults;
    lv_encoder_options_default(&defaults);
    const lv_encoder_options *opt = options ? options : &defaults;
    lv_av_quiet();
    /* what this run writes, as lv_encoder_open decides it */
    const lv_container *container;
    const AVCodec *codec;
    enum AVPixelFormat pix_fmt;
    LV_TRY(lv_container_for_path(path, &container));
    LV_TRY(lv_codec_resolve(opt->codec, container, path, &codec));
    LV_TRY(lv_codec_pix_fmt(codec, &pix_fmt));
    AVRational rate = av_d2q(fps, 1001000); /* as the encoder: its frames are 1 / rate apart */

    old_video v;
    lv_status s = old_video_open(&v, path);
    if (s == LV_OK) s = lv_resume_check_stream(path, v.fmt, v.st, container, codec, pix_fmt, width, height, rate);
    lv_encoder *enc = NULL;
    if (s == LV_OK) s = lv_encoder_open_as(path, tmp, width, height, fps, opt, &enc);
    if (s == LV_OK) s = lv_resume_check_header(path, v.st, enc);
    if (s == LV_OK) s = copy_frames(&v, enc, av_inv_q(rate), keep_frames);
    old_video_close(&v);
    if (s != LV_OK) {
        lv_encoder_abort(enc); /* removes the temporary file; the old video is untouched */
        return s;
    }
    lv_encoder_start_at(enc, keep_frames);
    *out = enc;
    return LV_OK;
}
