/* The decoder: any video FFmpeg reads, one frame at a time, as 8-bit RGB plus the decoded
 * YUV planes the metrics work on. Memory is one decoded frame and the decoder's own. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "codec_internal.h"
#include "longvk/files.h"

struct lv_decoder {
    char path[4096];
    AVFormatContext *fmt;
    AVStream *st;
    AVCodecContext *cc;
    AVPacket *pkt;
    AVFrame *frame;          /* the frame lv_decoder_next returned last */
    int have_frame;
    struct SwsContext *to_rgb;
    struct SwsContext *to_yuv;
    int sws_format;          /* the source format the contexts were made for (-1: none) */
    uint8_t *yuv444;         /* three width x height planes, for sources not 8-bit planar YUV */
    int yuv444_valid;
    int draining;            /* the demuxer is done; the decoder is being drained */
    int64_t index;           /* frames returned so far */
    int64_t start;           /* timestamp of the stream's start, in its time base */
    lv_video_info info;
};

static void copy_name(char *dst, size_t cap, const char *name) {
    snprintf(dst, cap, "%s", name && *name ? name : "unknown");
}

static void fill_info(lv_decoder *dec) {
    lv_video_info *in = &dec->info;
    const AVCodecParameters *par = dec->st->codecpar;
    in->width = par->width;
    in->height = par->height;
    AVRational r = dec->st->avg_frame_rate;
    if (r.num <= 0 || r.den <= 0) r = dec->st->r_frame_rate;
    if (r.num > 0 && r.den > 0) {
        in->fps_num = r.num;
        in->fps_den = r.den;
        in->fps = av_q2d(r);
    } else {
        in->fps_num = 0;
        in->fps_den = 1;
        in->fps = 0;
    }
    in->frames = dec->st->nb_frames > 0 ? dec->st->nb_frames : -1;
    if (dec->st->duration != AV_NOPTS_VALUE && dec->st->duration > 0)
        in->duration = (double)dec->st->duration * av_q2d(dec->st->time_base);
    else if (dec->fmt->duration != AV_NOPTS_VALUE && dec->fmt->duration > 0)
        in->duration = (double)dec->fmt->duration / AV_TIME_BASE;
    else
        in->duration = -1;
    copy_name(in->container, sizeof in->container, dec->fmt->iformat->name);
    copy_name(in->codec, sizeof in->codec, avcodec_get_name(par->codec_id));
    copy_name(in->pix_fmt, sizeof in->pix_fmt, av_get_pix_fmt_name(dec->cc->pix_fmt));
    copy_name(in->color_primaries, sizeof in->color_primaries, av_color_primaries_name(par->color_primaries));
    copy_name(in->color_trc, sizeof in->color_trc, av_color_transfer_name(par->color_trc));
    copy_name(in->color_space, sizeof in->color_space, av_color_space_name(par->color_space));
    copy_name(in->color_range, sizeof in->color_range, av_color_range_name(par->color_range));
}

/* The first video stream that is not a cover picture. */
static AVStream *find_video(AVFormatContext *fmt) {
    for (unsigned i = 0; i < fmt->nb_streams; i++) {
        AVStream *s = fmt->streams[i];
        if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO && !(s->disposition & AV_DISPOSITION_ATTACHED_PIC))
            return s;
    }
    return NULL;
}

static lv_status open_input(lv_decoder *dec) {
    const char *path = dec->path;
    LV_TRY(lv_check_regular_file(path)); /* FFmpeg would wait forever on a FIFO without a writer */
    int ret = avformat_open_input(&dec->fmt, path, NULL, NULL);
    if (ret < 0) {
        if (ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) || ret == AVERROR(EISDIR) || ret == AVERROR(EIO))
            return lv_av_error(LV_ERR_IO, ret, "cannot read %s", path);
        return lv_av_error(LV_ERR_FORMAT, ret, "%s is not a video FFmpeg can read", path);
    }
    ret = avformat_find_stream_info(dec->fmt, NULL);
    if (ret < 0) return lv_av_error(LV_ERR_FORMAT, ret, "%s: cannot find its streams", path);
    dec->st = find_video(dec->fmt);
    if (!dec->st)
        return lv_error(LV_ERR_FORMAT, "%s holds no video stream (format %s)", path, dec->fmt->iformat->name);
    for (unsigned i = 0; i < dec->fmt->nb_streams; i++)
        if (dec->fmt->streams[i] != dec->st) dec->fmt->streams[i]->discard = AVDISCARD_ALL;
    const AVCodecParameters *par = dec->st->codecpar;
    if (par->width <= 0 || par->height <= 0)
        return lv_error(LV_ERR_FORMAT, "%s: its video stream has no frame size", path);
    const AVCodec *codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: this FFmpeg has no decoder for %s video", path,
                        avcodec_get_name(par->codec_id));
    dec->cc = avcodec_alloc_context3(codec);
    if (!dec->cc) return lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
    ret = avcodec_parameters_to_context(dec->cc, par);
    if (ret < 0) return lv_av_error(LV_ERR_FORMAT, ret, "%s: video stream parameters", path);
    dec->cc->thread_count = 0;
    dec->cc->pkt_timebase = dec->st->time_base;
    ret = avcodec_open2(dec->cc, codec, NULL);
    if (ret < 0) return lv_av_error(LV_ERR_UNSUPPORTED, ret, "%s: opening the %s decoder", path, codec->name);
    dec->pkt = av_packet_alloc();
    dec->frame = av_frame_alloc();
    if (!dec->pkt || !dec->frame) return lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
    dec->start = dec->st->start_time;
    dec->sws_format = -1;
    fill_info(dec);
    return LV_OK;
}

lv_status lv_decoder_open(const char *path, lv_decoder **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_decoder_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "lv_decoder_open: empty path");
    if (strlen(path) >= sizeof ((lv_decoder *)0)->path) return lv_error(LV_ERR_INVALID, "path too long: %s", path);
    lv_av_quiet();
    lv_decoder *dec = calloc(1, sizeof *dec);
    if (!dec) return lv_error(LV_ERR_NOMEM, "opening %s: out of memory", path);
    snprintf(dec->path, sizeof dec->path, "%s", path);
    lv_status st = open_input(dec);
    if (st != LV_OK) {
        lv_decoder_close(dec);
        return st;
    }
    *out = dec;
    return LV_OK;
}

const lv_video_info *lv_decoder_info(const lv_decoder *dec) { return dec ? &dec->info : NULL; }

/* (Re)makes the conversion contexts when the decoded format changes. */
static lv_status prepare_sws(lv_decoder *dec) {
    const AVFrame *f = dec->frame;
    if (dec->sws_format == f->format && dec->to_rgb) return LV_OK;
    sws_freeContext(dec->to_rgb);
    sws_freeContext(dec->to_yuv);
    dec->to_yuv = NULL;
    enum AVColorSpace space = f->colorspace != AVCOL_SPC_UNSPECIFIED ? f->colorspace : dec->st->codecpar->color_space;
    enum AVColorRange range = f->color_range != AVCOL_RANGE_UNSPECIFIED ? f->color_range : dec->st->codecpar->color_range;
    dec->to_rgb = lv_sws_to_rgb24(f->width, f->height, (enum AVPixelFormat)f->format, space, range);
    if (!dec->to_rgb)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: cannot convert %s frames to RGB", dec->path,
                        av_get_pix_fmt_name((enum AVPixelFormat)f->format));
    if (!lv_pix_fmt_is_planar_yuv8((enum AVPixelFormat)f->format)) {
        dec->to_yuv = lv_sws_to_yuv444(f->width, f->height, (enum AVPixelFormat)f->format, range);
        if (!dec->yuv444) dec->yuv444 = malloc((size_t)f->width * (size_t)f->height * 3);
        if (!dec->to_yuv || !dec->yuv444)
            return lv_error(LV_ERR_NOMEM, "%s: cannot convert %s frames to yuv444p", dec->path,
                            av_get_pix_fmt_name((enum AVPixelFormat)f->format));
    }
    dec->sws_format = f->format;
    return LV_OK;
}

/* A decoded frame: checks it, converts it, numbers it. */
static lv_status deliver(lv_decoder *dec, uint8_t *rgb, lv_frame_info *info) {
    AVFrame *f = dec->frame;
    if (f->width != dec->info.width || f->height != dec->info.height)
        return lv_error(LV_ERR_UNSUPPORTED, "%s: frame %lld is %dx%d but the stream is %dx%d (size changes are not supported)",
                        dec->path, (long long)dec->index, f->width, f->height, dec->info.width, dec->info.height);
    LV_TRY(prepare_sws(dec));
    if (rgb) {
        uint8_t *dst[1] = {rgb};
        int stride[1] = {f->width * 3};
        sws_scale(dec->to_rgb, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride);
    }
    dec->have_frame = 1;
    dec->yuv444_valid = 0;
    if (info) {
        int64_t ts = f->best_effort_timestamp;
        info->index = dec->index;
        if (ts == AV_NOPTS_VALUE) {
            info->pts_seconds = dec->info.fps > 0 ? (double)dec->index / dec->info.fps : 0;
        } else {
            if (dec->start == AV_NOPTS_VALUE) dec->start = ts;
            info->pts_seconds = (double)(ts - dec->start) * av_q2d(dec->st->time_base);
        }
    }
    dec->index++;
    return LV_OK;
}

lv_status lv_decoder_next(lv_decoder *dec, uint8_t *rgb, lv_frame_info *info, int *end) {
    if (!dec || !end) return lv_error(LV_ERR_INVALID, "lv_decoder_next: NULL decoder or end flag");
    *end = 0;
    dec->have_frame = 0;
    for (;;) {
        av_frame_unref(dec->frame);
        int ret = avcodec_receive_frame(dec->cc, dec->frame);
        if (ret == 0) return deliver(dec, rgb, info);
        if (ret == AVERROR_EOF) {
            *end = 1;
            return LV_OK;
        }
        if (ret == AVERROR_INVALIDDATA) continue; /* a damaged frame: skip it */
        if (ret != AVERROR(EAGAIN)) return lv_av_error(lv_status_from_av(ret), ret, "decoding %s", dec->path);
        if (dec->draining) { /* should have ended with EOF */
            *end = 1;
            return LV_OK;
        }
        ret = av_read_frame(dec->fmt, dec->pkt);
        if (ret < 0) {
            /* the end of the file, or of its readable part (a writer killed mid-block) */
            if (ret != AVERROR_EOF && ret != AVERROR_INVALIDDATA)
                return lv_av_error(lv_status_from_av(ret), ret, "reading %s", dec->path);
            dec->draining = 1;
            ret = avcodec_send_packet(dec->cc, NULL);
            if (ret < 0 && ret != AVERROR_EOF) return lv_av_error(LV_ERR_FORMAT, ret, "draining the decoder of %s", dec->path);
            continue;
        }
        if (dec->pkt->stream_index == dec->st->index) {
            ret = avcodec_send_packet(dec->cc, dec->pkt);
            if (ret < 0 && ret != AVERROR_INVALIDDATA && ret != AVERROR(EAGAIN)) {
                av_packet_unref(dec->pkt);
                return lv_av_error(lv_status_from_av(ret), ret, "decoding %s", dec->path);
            }
        }
        av_packet_unref(dec->pkt);
    }
}

lv_status lv_decoder_planes(lv_decoder *dec, lv_yuv_planes *out) {
    if (!dec || !out) return lv_error(LV_ERR_INVALID, "lv_decoder_planes: NULL argument");
    memset(out, 0, sizeof *out);
    if (!dec->have_frame) return lv_error(LV_ERR_INVALID, "lv_decoder_planes(%s): no current frame", dec->path);
    const AVFrame *f = dec->frame;
    if (!dec->to_yuv) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
        out->nplanes = d->nb_components >= 3 ? 3 : 1;
        out->native = 1;
        for (int p = 0; p < out->nplanes; p++) {
            out->data[p] = f->data[p];
            out->stride[p] = f->linesize[p];
            out->width[p] = p ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
            out->height[p] = p ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
        }
        return LV_OK;
    }
    size_t plane = (size_t)f->width * (size_t)f->height;
    uint8_t *dst[3] = {dec->yuv444, dec->yuv444 + plane, dec->yuv444 + 2 * plane};
    int stride[3] = {f->width, f->width, f->width};
    if (!dec->yuv444_valid) {
        sws_scale(dec->to_yuv, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride);
        dec->yuv444_valid = 1;
    }
    out->nplanes = 3;
    out->native = 0;
    for (int p = 0; p < 3; p++) {
        out->data[p] = dst[p];
        out->stride[p] = f->width;
        out->width[p] = f->width;
        out->height[p] = f->height;
    }
    return LV_OK;
}

void lv_decoder_close(lv_decoder *dec) {
    if (!dec) return;
    avcodec_free_context(&dec->cc);
    avformat_close_input(&dec->fmt);
    av_packet_free(&dec->pkt);
    av_frame_free(&dec->frame);
    sws_freeContext(dec->to_rgb);
    sws_freeContext(dec->to_yuv);
    free(dec->yuv444);
    free(dec);
}
