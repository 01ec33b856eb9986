/* The streaming encoder: RGB or float frames in, one block at a time; a container on disk
 * that holds every flushed block even if the process dies (see longvk/codec.h).
 *
 * A block boundary must put every frame written so far into the file, but encoders with
 * look-ahead (x264, vpx, svt-av1) hold frames back and most cannot resume after being
 * drained. So each block gets its own encoder instance: drained and freed at the boundary,
 * a fresh one opened for the next frame. Every block starts with a keyframe. The instances
 * share all parameters, hence the same global header (checked), and their timestamps come
 * from one frame counter, so the stream continues seamlessly across blocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavutil/avstring.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "codec_internal.h"

/* bytes past a frame that swscale may read */
#define LV_SWS_PADDING 64

struct lv_encoder {
    char path[4096];
    const lv_container *container;
    const AVCodec *codec;
    enum AVPixelFormat pix_fmt;
    int width, height;
    AVRational fps;           /* frames per second */
    AVRational codec_tb;      /* 1 / fps: frame n has pts n */
    AVDictionary *codec_opts; /* crf, preset, extra: given to every block's encoder */
    int sync_blocks;
    AVCodecContext *cc;       /* the current block's encoder; NULL between blocks */
    int64_t instances;        /* encoder instances opened so far */
    int64_t instance_first_pts; /* pts of the current instance's first frame */
    int64_t instance_packets; /* packets the current instance has given */
    int reorder;              /* frames the encoder reorders: decode times run this far behind */
    int64_t last_dts;         /* of the last packet muxed, in codec_tb (INT64_MIN: none yet) */
    uint8_t *extradata;       /* the first encoder's global header */
    int extradata_size;
    lv_file_output *file;
    int header_written;       /* the muxer has started: a trailer is due */
    AVFormatContext *fmt;
    AVStream *st;
    AVFrame *frame;           /* the converted frame handed to the encoder */
    AVPacket *pkt;
    struct SwsContext *sws;
    uint8_t *scratch;         /* one RGB frame, for float input */
    int64_t written, flushed;
    lv_status failed;         /* the first error, sticky */
    char failure[1024];
    /* A resumed file (resume.c) is written under this temporary name and renamed to path at
     * the first block flush or at close, so the file it replaces stays whole until then;
     * "" once renamed, and for files opened by lv_encoder_open. A faststart mp4 plays only
     * once finalised, so it replaces the old file at close. */
    char tmp_path[4200];
    int faststart;
    /* HLS (hls.c): the muxer writes the playlist and its segments itself (no file here), and
     * its header is written with the first packet, so that an encoder opened and closed
     * without a frame (a probe) leaves no file */
    int hls;
    /* an HLS stream continued (hls_resume.c): the muxer writes beside the playlist, whose
     * segments are merged into it after every block; NULL otherwise */
    lv_hls_continuation *hls_cont;
};

void lv_encoder_options_default(lv_encoder_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->crf = -1;
    opt->sync_blocks = 1;
}

/* Remember the first error so every later call reports it too. */
static lv_status fail(lv_encoder *enc, lv_status st) {
    if (!enc->failed) {
        enc->failed = st;
        snprintf(enc->failure, sizeof enc->failure, "%s", lv_last_error());
    }
    return st;
}

static lv_status failed_before(const lv_encoder *enc) {
    return lv_error(enc->failed, "%s (an earlier error stopped this encoder)", enc->failure);
}

/* Frees an opened encoder instance that has been given `frames` frames, first ending its
 * stream and dropping whatever it still gives: libsvtav1 (FFmpeg 5.1, SVT-AV1 1.4) waits
 * forever in its close for an end of stream that never came, and in the end of stream of
 * an instance that never had a frame; that one gets a black frame first. */
static void free_codec(AVCodecContext **cc, AVPacket *scratch, int64_t frames) {
    if (!*cc || !avcodec_is_open(*cc)) {
        avcodec_free_context(cc);
        return;
    }
    int ok = 1;
    if (frames == 0 && strcmp((*cc)->codec->name, "libsvtav1") == 0) {
        AVFrame *black = av_frame_alloc();
        ok = black != NULL;
        if (ok) {
            black->format = (*cc)->pix_fmt;
            black->width = (*cc)->width;
            black->height = (*cc)->height;
            ok = av_frame_get_buffer(black, 0) >= 0;
            if (ok) {
                ptrdiff_t linesize[4];
                for (int i = 0; i < 4; i++) linesize[i] = black->linesize[i];
                ok = av_image_fill_black(black->data, linesize, (*cc)->pix_fmt, (*cc)->color_range, black->width,
                                         black->height) >= 0;
            }
            black->pts = 0;
            ok = ok && avcodec_send_frame(*cc, black) >= 0;
        }
        av_frame_free(&black);
    }
    AVPacket *pkt = scratch ? scratch : av_packet_alloc();
    if (ok && pkt && avcodec_send_frame(*cc, NULL) >= 0)
        while (avcodec_receive_packet(*cc, pkt) >= 0) av_packet_unref(pkt);
    if (pkt != scratch) av_packet_free(&pkt);
    avcodec_free_context(cc);
}

/* Odd sizes cannot be 4:2:0: say which and what would work. */
static lv_status check_size(const lv_encoder *enc) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(enc->pix_fmt);
    int wmask = (1 << d->log2_chroma_w) - 1, hmask = (1 << d->log2_chroma_h) - 1;
    /* SVT-AV1 refuses smaller frames with only "Invalid argument" */
    if (strcmp(enc->codec->name, "libsvtav1") == 0 && (enc->width < 64 || enc->height < 64))
        return lv_error(LV_ERR_INVALID, "%dx%d for %s: libsvtav1 needs frames of at least 64x64 (use libaom-av1 for "
                                        "smaller AV1 video)",
                        enc->width, enc->height, enc->path);
    if (!(enc->width & wmask) && !(enc->height & hmask)) return LV_OK;
    int w0 = enc->width & ~wmask, h0 = enc->height & ~hmask;
    int w1 = (enc->width & wmask) ? w0 + wmask + 1 : enc->width;
    int h1 = (enc->height & hmask) ? h0 + hmask + 1 : enc->height;
    if (w0 == 0) w0 = w1;
    if (h0 == 0) h0 = h1;
    return lv_error(LV_ERR_INVALID,
                    "%dx%d for %s: %s (4:2:0 chroma) needs an even width and height; the nearest even sizes are "
                    "%dx%d and %dx%d (or use ffv1 in .mkv for odd sizes)",
                    enc->width, enc->height, enc->path, av_get_pix_fmt_name(enc->pix_fmt), w0, h0, w1, h1);
}

/* The encoder's threads, whatever the machine (see open_codec); libx265's worker pool
 * (build_options). */
#define LV_ENCODER_THREADS 4
#define X265_THREADS 4

/* A new encoder instance with every parameter set; unknown options are named. */
static lv_status open_codec(lv_encoder *enc, AVCodecContext **out) {
    *out = NULL;
    AVCodecContext *cc = avcodec_alloc_context3(enc->codec);
    if (!cc) return lv_error(LV_ERR_NOMEM, "encoder %s for %s: out of memory", enc->codec->name, enc->path);
    cc->width = enc->width;
    cc->height = enc->height;
    cc->pix_fmt = enc->pix_fmt;
    cc->time_base = enc->codec_tb;
    cc->framerate = enc->fps;
    cc->sample_aspect_ratio = (AVRational){1, 1};
    /* a fixed count, not 0 (as many as the CPUs the process may use): libx264's frames depend on
     * its thread count, so a file would depend on the machine, `taskset` or an MPI rank's
     * binding; with a fixed count it depends only on the frames and the options. libx265 takes
     * the count as its frame threads (frames encoded at once), which change its frames (from 4
     * CPUs on it picks 2 or more when left to itself) and hold frames back, which low_delay
     * forbids: one frame thread, and its worker pool fixed too (build_options: x265-params) */
    cc->thread_count = strcmp(enc->codec->name, "libx265") == 0 ? 1 : LV_ENCODER_THREADS;
    cc->color_primaries = AVCOL_PRI_BT709;
    cc->color_trc = AVCOL_TRC_BT709;
    if (av_pix_fmt_desc_get(enc->pix_fmt)->flags & AV_PIX_FMT_FLAG_RGB) {
        cc->colorspace = AVCOL_SPC_RGB;
        cc->color_range = AVCOL_RANGE_JPEG;
    } else {
        cc->colorspace = AVCOL_SPC_BT709;
        cc->color_range = AVCOL_RANGE_MPEG;
    }
    if (av_dict_get(enc->codec_opts, "crf", NULL, 0)) cc->bit_rate = 0; /* constant quality, no bitrate cap */
    if (av_guess_format(enc->container->format, NULL, NULL)->flags & AVFMT_GLOBALHEADER)
        cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;

    AVDictionary *opts = NULL;
    av_dict_copy(&opts, enc->codec_opts, 0);
    int ret = avcodec_open2(cc, enc->codec, &opts);
    const AVDictionaryEntry *left = av_dict_get(opts, "", NULL, AV_DICT_IGNORE_SUFFIX);
    lv_status st = LV_OK;
    if (ret < 0) {
        /* name the options given: a bad value (preset "fastest") fails here, not as unknown */
        char given[512] = "";
        const AVDictionaryEntry *e = NULL;
        while ((e = av_dict_get(enc->codec_opts, "", e, AV_DICT_IGNORE_SUFFIX)))
            snprintf(given + strlen(given), sizeof given - strlen(given), " %s=%s", e->key, e->value);
        st = lv_av_error(lv_status_from_av(ret) == LV_ERR_IO ? LV_ERR_INVALID : lv_status_from_av(ret), ret,
                         "opening encoder %s for %s (%dx%d %s, options:%s)", enc->codec->name, enc->path, enc->width,
                         enc->height, av_get_pix_fmt_name(enc->pix_fmt), *given ? given : " none");
    }
    else if (left)
        st = lv_error(LV_ERR_INVALID, "encoder %s has no option '%s' (given '%s=%s' for %s)", enc->codec->name, left->key,
                      left->key, left->value, enc->path);
    av_dict_free(&opts);
    if (st != LV_OK) {
        free_codec(&cc, NULL, 0);
        return st;
    }
    *out = cc;
    return LV_OK;
}

/* Opens the encoder for the next block and checks it writes the header the file has. */
static lv_status open_block(lv_encoder *enc) {
    AVCodecContext *cc;
    LV_TRY(open_codec(enc, &cc));
    if (cc->extradata_size != enc->extradata_size ||
        (enc->extradata_size && memcmp(cc->extradata, enc->extradata, (size_t)enc->extradata_size) != 0)) {
        free_codec(&cc, enc->pkt, 0);
        return lv_error(LV_ERR_UNSUPPORTED,
                        "encoder %s for %s: instance %lld (frame %lld) got a different stream header from the first, so "
                        "blocks cannot share one stream",
                        enc->codec->name, enc->path, (long long)enc->instances, (long long)enc->written);
    }
    enc->cc = cc;
    enc->instances++;
    enc->instance_first_pts = enc->written;
    enc->instance_packets = 0;
    return LV_OK;
}

static lv_status write_error(lv_encoder *enc, int ret, const char *what) {
    if (lv_file_output_error(enc->file)) return lv_file_output_flush(enc->file, 0); /* reports the file's errno */
    return lv_av_error(lv_status_from_av(ret), ret, "%s %s", what, enc->path);
}

static lv_status setup_muxer(lv_encoder *enc, int faststart);

/* Moves every packet the encoder has ready into the file. */
static lv_status mux_ready_packets(lv_encoder *enc) {
    for (;;) {
        int ret = avcodec_receive_packet(enc->cc, enc->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return LV_OK;
        if (ret < 0) return lv_av_error(lv_status_from_av(ret), ret, "encoder %s for %s", enc->codec->name, enc->path);
        if (enc->pkt->duration <= 0) enc->pkt->duration = 1; /* one frame, in codec_tb */
        /* Decode timestamps from the frame counter too. The k-th packet of an encoder
         * instance that starts at frame s decodes at s + k - delay, delay being the
         * encoder's reordering depth (enc->reorder, the same for every instance): one steady
         * clock across instances. (x264 alone would start a block shorter than its B-frame
         * delay without the offset, leaving a gap that mp4 turns into a too-long sample
         * duration; x265 gives a short block no delay at all, so its own timestamps would go
         * backwards at the next block.) */
        int64_t dts = enc->instance_first_pts + enc->instance_packets - enc->reorder;
        enc->instance_packets++;
        if (enc->pkt->pts != AV_NOPTS_VALUE && dts > enc->pkt->pts) dts = enc->pkt->pts;
        if (dts <= enc->last_dts) {
            long long frame = (long long)enc->pkt->pts;
            av_packet_unref(enc->pkt);
            return lv_error(LV_ERR_UNSUPPORTED,
                            "encoder %s for %s reorders frames more than the %d frames it announced (frame %lld of "
                            "block %lld): its packets cannot be given increasing decode times",
                            enc->codec->name, enc->path, enc->reorder, frame, (long long)enc->instances);
        }
        enc->last_dts = dts;
        enc->pkt->dts = dts;
        if (!enc->header_written) { /* HLS: the muxer starts with the first packet */
            lv_status st = setup_muxer(enc, 0);
            if (st != LV_OK) {
                av_packet_unref(enc->pkt);
                return st;
            }
        }
        av_packet_rescale_ts(enc->pkt, enc->codec_tb, enc->st->time_base);
        enc->pkt->stream_index = enc->st->index;
        ret = av_write_frame(enc->fmt, enc->pkt);
        av_packet_unref(enc->pkt);
        if (ret < 0) return write_error(enc, ret, "writing a frame to");
    }
}

static lv_status setup_muxer(lv_encoder *enc, int faststart) {
    /* the file's own name: faststart reopens it by this name to move the index */
    const char *url = enc->hls_cont ? lv_hls_continuation_url(enc->hls_cont) : enc->tmp_path[0] ? enc->tmp_path : enc->path;
    int ret = avformat_alloc_output_context2(&enc->fmt, NULL, enc->container->format, url);
    if (ret < 0) return lv_av_error(LV_ERR_UNSUPPORTED, ret, "container %s for %s", enc->container->format, enc->path);
    if (enc->file) {
        enc->fmt->pb = lv_file_output_avio(enc->file);
        enc->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    }
    enc->st = avformat_new_stream(enc->fmt, NULL);
    if (!enc->st) return lv_error(LV_ERR_NOMEM, "%s: out of memory", enc->path);
    ret = avcodec_parameters_from_context(enc->st->codecpar, enc->cc);
    if (ret < 0) return lv_av_error(LV_ERR_NOMEM, ret, "%s", enc->path);
    enc->st->time_base = enc->codec_tb; /* a hint: the muxer may choose another */
    enc->st->avg_frame_rate = enc->fps;
    enc->st->r_frame_rate = enc->fps;

    AVDictionary *mux = NULL;
    if (strcmp(enc->container->format, "mp4") == 0)
        /* fragmented: an empty index up front, then a self-contained fragment per block, which
         * is what a killed process leaves playable; faststart instead finalises at close */
        av_dict_set(&mux, "movflags", faststart ? "+faststart+write_colr" : "+frag_custom+empty_moov+default_base_moof+write_colr", 0);
    if (enc->hls) {
        lv_status st = lv_hls_muxer_options(enc->path, &mux);
        if (st == LV_OK && enc->hls_cont) st = lv_hls_continuation_options(enc->hls_cont, &mux);
        if (st != LV_OK) {
            av_dict_free(&mux);
            return st;
        }
    }
    ret = avformat_write_header(enc->fmt, &mux);
    av_dict_free(&mux);
    if (ret < 0) return write_error(enc, ret, "writing the header of");
    enc->header_written = 1;
    return lv_file_output_flush(enc->file, 0);
}

static lv_status build_options(lv_encoder *enc, const lv_encoder_options *opt) {
    char num[32];
    int crf = opt->crf >= 0 ? opt->crf : lv_codec_default_crf(enc->codec);
    if (crf >= 0) {
        snprintf(num, sizeof num, "%d", crf);
        av_dict_set(&enc->codec_opts, "crf", num, 0);
    }
    const char *preset = opt->preset ? opt->preset : lv_codec_default_preset(enc->codec);
    if (preset) av_dict_set(&enc->codec_opts, "preset", preset, 0);
    int x265 = strcmp(enc->codec->name, "libx265") == 0;
    if (opt->low_delay) {
        if (strcmp(enc->codec->name, "libx264") == 0 || x265) av_dict_set(&enc->codec_opts, "tune", "zerolatency", 0);
        else if (strcmp(enc->codec->name, "libvpx-vp9") == 0) av_dict_set(&enc->codec_opts, "lag-in-frames", "0", 0);
    }
    if (opt->extra && *opt->extra) {
        int ret = av_dict_parse_string(&enc->codec_opts, opt->extra, "=", ":", 0);
        if (ret < 0)
            return lv_av_error(LV_ERR_INVALID, ret, "encoder options '%s' for %s (expected key=value:key=value)",
                               opt->extra, enc->path);
    }
    /* x265 prints its settings and statistics to stderr for every instance: errors only. Its
     * frames depend only on the frames and the options with one frame thread and a worker pool
     * of a fixed size (X265_THREADS; x265's own choice follows the CPUs it counts, and without a
     * pool it turns wavefront coding off); the caller's x265-params come after and win */
    if (x265) {
        const AVDictionaryEntry *e = av_dict_get(enc->codec_opts, "x265-params", NULL, 0);
        char *params = av_asprintf("%sframe-threads=1:pools=%d%s%s", e && strstr(e->value, "log-level") ? ""
                                   : "log-level=error:", X265_THREADS, e ? ":" : "", e ? e->value : "");
        if (!params) return lv_error(LV_ERR_NOMEM, "encoder options for %s: out of memory", enc->path);
        av_dict_set(&enc->codec_opts, "x265-params", params, AV_DICT_DONT_STRDUP_VAL);
    }
    return LV_OK;
}

lv_status lv_encoder_open(const char *path, int width, int height, double fps, const lv_encoder_options *options,
                          lv_encoder **out) {
    return lv_encoder_open_as(path, NULL, width, height, fps, options, out);
}

lv_status lv_encoder_open_as(const char *path, const char *tmp_path, int width, int height, double fps,
                             const lv_encoder_options *options, lv_encoder **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_encoder_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "lv_encoder_open: empty path");
    if (strlen(path) >= sizeof ((lv_encoder *)0)->path) return lv_error(LV_ERR_INVALID, "path too long: %s", path);
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
        return lv_error(LV_ERR_INVALID, "frame size %dx%d for %s: each side must be in [1, 16384]", width, height, path);
    if (!(fps > 0) || !isfinite(fps) || fps > 1000)
        return lv_error(LV_ERR_INVALID, "frame rate %g for %s: must be in (0, 1000]", fps, path);
    lv_encoder_options defaults;
    lv_encoder_options_default(&defaults);
    const lv_encoder_options *opt = options ? options : &defaults;
    lv_av_quiet();

    lv_encoder *enc = calloc(1, sizeof *enc);
    if (!enc) return lv_error(LV_ERR_NOMEM, "opening %s: out of memory", path);
    snprintf(enc->path, sizeof enc->path, "%s", path);
    if (tmp_path && snprintf(enc->tmp_path, sizeof enc->tmp_path, "%s", tmp_path) >= (int)sizeof enc->tmp_path) {
        free(enc);
        return lv_error(LV_ERR_INVALID, "path too long: %s", tmp_path);
    }
    enc->width = width;
    enc->height = height;
    enc->sync_blocks = opt->sync_blocks;
    enc->faststart = opt->faststart;
    enc->fps = av_d2q(fps, 1001000);
    enc->codec_tb = av_inv_q(enc->fps);
    enc->last_dts = INT64_MIN;

    lv_status st = lv_container_for_path(path, &enc->container);
    if (st == LV_OK && opt->faststart && strcmp(enc->container->format, "mp4") != 0)
        st = lv_error(LV_ERR_INVALID, "faststart is for .mp4 files, not %s", path);
    enc->hls = lv_container_is_hls(enc->container);
    if (st == LV_OK && enc->hls && enc->tmp_path[0])
        st = lv_error(LV_ERR_UNSUPPORTED, "%s: an HLS stream is written in place (its segments and playlist), not "
                      "under a temporary name", path);
    if (st == LV_OK) st = lv_codec_resolve(opt->codec, enc->container, path, &enc->codec);
    if (st == LV_OK) st = lv_codec_pix_fmt(enc->codec, &enc->pix_fmt);
    if (st == LV_OK) st = check_size(enc);
    if (st == LV_OK) st = build_options(enc, opt);
    /* the first block's encoder, opened now so bad options fail before the file is touched */
    if (st == LV_OK) st = open_codec(enc, &enc->cc);
    if (st == LV_OK) {
        enc->reorder = enc->cc->has_b_frames;
        if (enc->reorder < lv_codec_reorder_bound(enc->codec)) enc->reorder = lv_codec_reorder_bound(enc->codec);
    }
    if (st == LV_OK && enc->cc->extradata_size > 0) {
        enc->extradata = malloc((size_t)enc->cc->extradata_size);
        if (!enc->extradata) st = lv_error(LV_ERR_NOMEM, "%s: out of memory", path);
        else memcpy(enc->extradata, enc->cc->extradata, (size_t)enc->cc->extradata_size);
        enc->extradata_size = enc->cc->extradata_size;
    }
    if (st == LV_OK) {
        enc->instances = 1;
        enc->frame = av_frame_alloc();
        enc->pkt = av_packet_alloc();
        enc->sws = lv_sws_from_rgb24(width, height, enc->pix_fmt);
        enc->scratch = calloc(1, (size_t)width * (size_t)height * 3 + LV_SWS_PADDING);
        if (!enc->frame || !enc->pkt || !enc->sws || !enc->scratch)
            st = lv_error(LV_ERR_NOMEM, "encoder for %s: out of memory", path);
    }
    if (st == LV_OK) {
        enc->frame->format = enc->pix_fmt;
        enc->frame->width = width;
        enc->frame->height = height;
        enc->frame->color_primaries = enc->cc->color_primaries;
        enc->frame->color_trc = enc->cc->color_trc;
        enc->frame->colorspace = enc->cc->colorspace;
        enc->frame->color_range = enc->cc->color_range;
        int ret = av_frame_get_buffer(enc->frame, 0);
        if (ret < 0) st = lv_av_error(LV_ERR_NOMEM, ret, "encoder for %s", path);
        /* defined padding (row ends, the unused byte of bgr0): encoders may read it */
        for (int i = 0; ret >= 0 && i < AV_NUM_DATA_POINTERS && enc->frame->buf[i]; i++)
            memset(enc->frame->buf[i]->data, 0, enc->frame->buf[i]->size);
    }
    const char *file_path = enc->tmp_path[0] ? enc->tmp_path : path;
    if (st == LV_OK && !enc->hls) st = lv_file_output_open(file_path, path, &enc->file);
    if (st == LV_OK && !enc->hls) st = setup_muxer(enc, opt->faststart);
    if (st != LV_OK) {
        int remove_file = enc->file != NULL; /* created here, holds no frame: leave nothing behind */
        char created[sizeof enc->tmp_path];
        snprintf(created, sizeof created, "%s", file_path);
        lv_encoder_abort(enc);
        /* a device or FIFO written through (/dev/null), or a link, is never removed */
        struct stat ls;
        if (remove_file && lstat(created, &ls) == 0 && S_ISREG(ls.st_mode)) unlink(created);
        return st;
    }
    *out = enc;
    return LV_OK;
}

/* Converts one packed RGB frame (in enc->scratch) and hands it to the current block's encoder. */
static lv_status encode_scratch_frame(lv_encoder *enc) {
    const uint8_t *rgb = enc->scratch;
    if (!enc->cc) LV_TRY(open_block(enc));
    int ret = av_frame_make_writable(enc->frame); /* the encoder may still hold the last one */
    if (ret < 0) return lv_av_error(LV_ERR_NOMEM, ret, "encoder for %s", enc->path);
    const uint8_t *src[1] = {rgb};
    const int stride[1] = {enc->width * 3};
    sws_scale(enc->sws, src, stride, 0, enc->height, enc->frame->data, enc->frame->linesize);
    enc->frame->pts = enc->written;
    ret = avcodec_send_frame(enc->cc, enc->frame);
    if (ret < 0)
        return lv_av_error(lv_status_from_av(ret), ret, "encoder %s for %s, frame %lld", enc->codec->name, enc->path,
                           (long long)enc->written);
    enc->written++;
    return mux_ready_packets(enc);
}

lv_status lv_encoder_write_rgb(lv_encoder *enc, const uint8_t *rgb, int nframes) {
    if (!enc) return lv_error(LV_ERR_INVALID, "lv_encoder_write_rgb: encoder is NULL");
    if (enc->failed) return failed_before(enc);
    if (nframes < 0 || (nframes > 0 && !rgb))
        return lv_error(LV_ERR_INVALID, "lv_encoder_write_rgb(%s): %d frames at %p", enc->path, nframes, (const void *)rgb);
    size_t frame_bytes = (size_t)enc->width * (size_t)enc->height * 3;
    for (int i = 0; i < nframes; i++) {
        /* swscale's vector code reads a few bytes past the end of its input: never hand it the
         * caller's buffer, whose last row may end at an unmapped page */
        memcpy(enc->scratch, rgb + (size_t)i * frame_bytes, frame_bytes);
        lv_status st = encode_scratch_frame(enc);
        if (st != LV_OK) return fail(enc, st);
    }
    return LV_OK;
}

/* round(127.5 x + 127.5) after clamping to [-1, 1], halves rounded up; NaN becomes -1
 * (black). In double the product and sum are exact, so the rounding is too. */
static inline uint8_t float_to_u8(float v) {
    if (!(v > -1.0f)) v = -1.0f;
    if (v > 1.0f) v = 1.0f;
    return (uint8_t)(int)(127.5 * (double)v + 128.0);
}

lv_status lv_encoder_write_float(lv_encoder *enc, const float *x, int nframes, lv_frame_layout layout) {
    if (!enc) return lv_error(LV_ERR_INVALID, "lv_encoder_write_float: encoder is NULL");
    if (enc->failed) return failed_before(enc);
    if (nframes < 0 || (nframes > 0 && !x))
        return lv_error(LV_ERR_INVALID, "lv_encoder_write_float(%s): %d frames at %p", enc->path, nframes, (const void *)x);
    if (layout != LV_LAYOUT_FHWC && layout != LV_LAYOUT_CFHW)
        return lv_error(LV_ERR_INVALID, "lv_encoder_write_float(%s): unknown layout %d", enc->path, (int)layout);
    size_t hw = (size_t)enc->width * (size_t)enc->height;
    for (int i = 0; i < nframes; i++) {
        if (layout == LV_LAYOUT_FHWC) {
            const float *f = x + (size_t)i * hw * 3;
            for (size_t k = 0; k < hw * 3; k++) enc->scratch[k] = float_to_u8(f[k]);
        } else {
            for (int c = 0; c < 3; c++) {
                const float *plane = x + ((size_t)c * (size_t)nframes + (size_t)i) * hw;
                for (size_t k = 0; k < hw; k++) enc->scratch[3 * k + (size_t)c] = float_to_u8(plane[k]);
            }
        }
        lv_status st = encode_scratch_frame(enc);
        if (st != LV_OK) return fail(enc, st);
    }
    return LV_OK;
}

/* Drains the block's encoder into the file and frees it. */
static lv_status finish_block_encoder(lv_encoder *enc) {
    if (!enc->cc) return LV_OK;
    if (enc->written == enc->instance_first_pts) { /* given no frame: nothing to drain into the file */
        free_codec(&enc->cc, enc->pkt, 0);
        return LV_OK;
    }
    int ret = avcodec_send_frame(enc->cc, NULL);
    lv_status st = ret < 0 ? lv_av_error(LV_ERR_IO, ret, "draining encoder %s for %s", enc->codec->name, enc->path)
                           : mux_ready_packets(enc);
    free_codec(&enc->cc, enc->pkt, 1);
    return st;
}

lv_status lv_encoder_flush_block(lv_encoder *enc) {
    if (!enc) return lv_error(LV_ERR_INVALID, "lv_encoder_flush_block: encoder is NULL");
    if (enc->failed) return failed_before(enc);
    if (enc->written == enc->flushed) return LV_OK;
    /* An encoder that holds frames back must be drained, which ends it; one that has given
     * a packet for every frame (low_delay, ffv1) simply continues into the next block. */
    lv_status st = LV_OK;
    if (enc->cc && enc->instance_packets < enc->written - enc->instance_first_pts) st = finish_block_encoder(enc);
    if (st != LV_OK) return fail(enc, st);
    /* a NULL packet ends the mp4 fragment / mkv cluster now instead of at the next one; an
     * HLS segment ends at its own length (the playlist names complete segments only) */
    int ret = enc->hls || !enc->header_written ? 0 : av_write_frame(enc->fmt, NULL);
    if (ret < 0) return fail(enc, write_error(enc, ret, "flushing"));
    st = lv_file_output_flush(enc->file, enc->sync_blocks);
    if (st != LV_OK) return fail(enc, st);
    enc->flushed = enc->written;
    if (enc->hls_cont) { /* the segments the muxer completed, named in the playlist */
        st = lv_hls_continuation_update(enc->hls_cont, 0);
        if (st != LV_OK) return fail(enc, st);
    }
    if (enc->tmp_path[0] && !enc->faststart) { /* a resumed file holds a new block: it replaces the old one */
        st = lv_resume_commit(enc->tmp_path, enc->path, enc->sync_blocks);
        if (st != LV_OK) return fail(enc, st);
        enc->tmp_path[0] = 0;
    }
    return LV_OK;
}

static void free_encoder(lv_encoder *enc) {
    free_codec(&enc->cc, enc->pkt, enc->written - enc->instance_first_pts);
    avformat_free_context(enc->fmt);
    av_frame_free(&enc->frame);
    av_packet_free(&enc->pkt);
    sws_freeContext(enc->sws);
    av_dict_free(&enc->codec_opts);
    free(enc->extradata);
    free(enc->scratch);
    lv_hls_continuation_free(enc->hls_cont);
    free(enc);
}

/* Writes the trailer if the file can still take it, closes the file; returns the first error. */
static lv_status finish_file(lv_encoder *enc, lv_status st) {
    if (enc->header_written && !lv_file_output_error(enc->file)) {
        int ret = av_write_trailer(enc->fmt);
        if (ret < 0 && st == LV_OK) st = write_error(enc, ret, "finishing");
    }
    lv_status cst = lv_file_output_close(enc->file);
    enc->file = NULL;
    if (enc->fmt) enc->fmt->pb = NULL;
    return st != LV_OK ? st : cst;
}

lv_status lv_encoder_close(lv_encoder *enc) {
    if (!enc) return LV_OK;
    lv_status st = enc->failed ? failed_before(enc) : lv_encoder_flush_block(enc);
    if (st == LV_OK && enc->cc) { /* drain what a continuing encoder may still emit at its end */
        st = finish_block_encoder(enc);
        if (st == LV_OK) st = lv_file_output_flush(enc->file, enc->sync_blocks);
        if (st != LV_OK) fail(enc, st);
    }
    st = finish_file(enc, st);
    if (st == LV_OK && enc->hls_cont) st = lv_hls_continuation_update(enc->hls_cont, 1); /* EXT-X-ENDLIST */
    if (enc->tmp_path[0]) { /* resumed, no new block: the kept frames replace the old file */
        if (st == LV_OK) st = lv_resume_commit(enc->tmp_path, enc->path, enc->sync_blocks);
        if (st != LV_OK) unlink(enc->tmp_path); /* the old file stays as it was */
    }
    char message[1024];
    snprintf(message, sizeof message, "%s", lv_last_error());
    free_encoder(enc);
    if (st != LV_OK) lv_error(st, "%s", message);
    return st;
}

void lv_encoder_abort(lv_encoder *enc) {
    if (!enc) return;
    char message[1024];
    snprintf(message, sizeof message, "%s", lv_last_error()); /* keep the caller's error */
    /* the unfinished block's frames are dropped */
    free_codec(&enc->cc, enc->pkt, enc->written - enc->instance_first_pts);
    if (enc->file) (void)finish_file(enc, LV_OK);
    if (enc->tmp_path[0]) unlink(enc->tmp_path); /* a resume that never flushed: the old file stays */
    free_encoder(enc);
    lv_error(LV_OK, "%s", message);
}

int64_t lv_encoder_frames_written(const lv_encoder *enc) { return enc ? enc->written : 0; }
int64_t lv_encoder_frames_flushed(const lv_encoder *enc) { return enc ? enc->flushed : 0; }
int64_t lv_encoder_instances(const lv_encoder *enc) { return enc ? enc->instances : 0; }
const char *lv_encoder_codec_name(const lv_encoder *enc) { return enc && enc->codec ? enc->codec->name : ""; }
const char *lv_encoder_pix_fmt(const lv_encoder *enc) { return enc ? av_get_pix_fmt_name(enc->pix_fmt) : ""; }

/* For resume.c: the continued file's packets copied from the old one, then the counters. */

const uint8_t *lv_encoder_stream_header(const lv_encoder *enc, int *size) {
    *size = enc->extradata_size;
    return enc->extradata;
}

int lv_encoder_reorder_delay(const lv_encoder *enc) { return enc->reorder; }

lv_status lv_encoder_mux_copy(lv_encoder *enc, AVPacket *pkt) {
    enc->last_dts = pkt->dts;
    av_packet_rescale_ts(pkt, enc->codec_tb, enc->st->time_base);
    pkt->stream_index = enc->st->index;
    int ret = av_write_frame(enc->fmt, pkt);
    av_packet_unref(pkt);
    return ret < 0 ? fail(enc, write_error(enc, ret, "copying a frame to")) : LV_OK;
}

lv_status lv_encoder_end_fragment(lv_encoder *enc) {
    int ret = av_write_frame(enc->fmt, NULL);
    if (ret < 0) return fail(enc, write_error(enc, ret, "flushing"));
    lv_status st = lv_file_output_flush(enc->file, 0);
    return st != LV_OK ? fail(enc, st) : LV_OK;
}

void lv_encoder_continue_hls(lv_encoder *enc, lv_hls_continuation *h) { enc->hls_cont = h; }

void lv_encoder_start_at(lv_encoder *enc, int64_t frames) {
    enc->written = enc->flushed = frames;
    enc->instance_first_pts = frames;
    enc->instance_packets = 0;
}
