/* What the output file's extension means, which encoder a name stands for, and what pixel
 * format, crf and preset each encoder gets by default. */
#include <string.h>
#include <strings.h>

#include <libavutil/pixdesc.h>

#include "codec_internal.h"

static const lv_container containers[] = {
    {"mp4", "mp4", "libx264", NULL},
    {"mkv", "matroska", "libx264", NULL},
    {"webm", "webm", "libvpx-vp9", NULL},
    {"m3u8", "hls", "libx264", "mp4"}, /* HLS: a playlist of fragmented-MP4 segments (hls.c) */
};
#define NCONTAINERS (sizeof containers / sizeof containers[0])

lv_status lv_container_for_path(const char *path, const lv_container **out) {
    *out = NULL;
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (!dot || !dot[1])
        return lv_error(LV_ERR_UNSUPPORTED, "%s has no extension to choose a container by: use .mp4, .mkv, .webm or .m3u8 (HLS)",
                        path);
    for (size_t i = 0; i < NCONTAINERS; i++)
        if (strcasecmp(dot + 1, containers[i].extension) == 0) {
            *out = &containers[i];
            return LV_OK;
        }
    return lv_error(LV_ERR_UNSUPPORTED, "unknown container '%s' for %s: use .mp4, .mkv, .webm or .m3u8 (HLS)", dot, path);
}

/* The encoders longvk writes with: each is tested writing several blocks into every
 * container here that can hold it (tests/codec/test_codec_matrix.c), and through a resume. Other
 * FFmpeg encoders are refused by name: restarting an encoder at every block boundary needs
 * timestamps the encoder's wrapper does not always give (FFmpeg 5.1's libx265 announces no
 * reordering delay, for one), so an untested one may fail only at its second block.
 * `reorder`: the most frames the encoder reorders when FFmpeg's wrapper does not say
 * (has_b_frames 0): x265 holds back up to 2 (B-pyramid; 1 without it, 0 without B-frames). */
static const struct {
    const char *name;
    int reorder;
} encoders[] = {
    {"libx264", 0}, {"libx265", 2}, {"ffv1", 0}, {"libvpx-vp9", 0}, {"libsvtav1", 0}, {"libaom-av1", 0},
};
#define NENCODERS (sizeof encoders / sizeof encoders[0])
#define ENCODER_LIST "libx264, libx265, ffv1, libvpx-vp9, libsvtav1 or libaom-av1"

/* Short names for the encoders. */
static const char *alias(const char *name) {
    static const char *const table[][2] = {
        {"h264", "libx264"}, {"x264", "libx264"}, {"avc", "libx264"},
        {"hevc", "libx265"}, {"h265", "libx265"}, {"x265", "libx265"},
        {"vp9", "libvpx-vp9"}, {"av1", "libsvtav1"}, {"svtav1", "libsvtav1"}, {"aom", "libaom-av1"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i][0]) == 0) return table[i][1];
    return name;
}

static int encoder_index(const char *name) {
    for (size_t i = 0; i < NENCODERS; i++)
        if (strcmp(name, encoders[i].name) == 0) return (int)i;
    return -1;
}

/* "libvpx-vp9, libsvtav1": the offered encoders this FFmpeg has that `fmt` can hold. */
static void encoders_for(const AVOutputFormat *fmt, char *out, size_t cap) {
    out[0] = 0;
    for (size_t i = 0; i < NENCODERS; i++) {
        const AVCodec *c = avcodec_find_encoder_by_name(encoders[i].name);
        if (!c || avformat_query_codec(fmt, c->id, FF_COMPLIANCE_NORMAL) != 1) continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", len ? ", " : "", encoders[i].name);
    }
}

lv_status lv_codec_resolve(const char *name, const lv_container *container, const char *path, const AVCodec **out) {
    *out = NULL;
    const char *wanted = name ? alias(name) : container->default_codec;
    const AVCodec *codec = avcodec_find_encoder_by_name(wanted);
    if (encoder_index(wanted) < 0) {
        if (!codec)
            return lv_error(LV_ERR_UNSUPPORTED, "unknown codec '%s': use " ENCODER_LIST " (or h264, hevc, vp9, av1)",
                            name ? name : wanted);
        return lv_error(LV_ERR_UNSUPPORTED,
                        "codec '%s' is an FFmpeg encoder longvk does not write with: use " ENCODER_LIST
                        " (or h264, hevc, vp9, av1)",
                        name ? name : wanted);
    }
    if (!codec)
        return lv_error(LV_ERR_UNSUPPORTED, "codec '%s': this FFmpeg has no %s encoder (built without it)",
                        name ? name : wanted, wanted);
    if (codec->type != AVMEDIA_TYPE_VIDEO)
        return lv_error(LV_ERR_UNSUPPORTED, "codec '%s' is not a video encoder", name ? name : wanted);
    if (!av_guess_format(container->format, NULL, NULL))
        return lv_error(LV_ERR_UNSUPPORTED, "this FFmpeg has no %s muxer (for %s)", container->format, path);
    const char *holder = container->segments ? container->segments : container->format;
    const AVOutputFormat *fmt = av_guess_format(holder, NULL, NULL);
    if (!fmt) return lv_error(LV_ERR_UNSUPPORTED, "this FFmpeg has no %s muxer (for %s)", holder, path);
    if (avformat_query_codec(fmt, codec->id, FF_COMPLIANCE_NORMAL) != 1) {
        char fits[256];
        encoders_for(fmt, fits, sizeof fits);
        return lv_error(LV_ERR_UNSUPPORTED,
                        "a .%s file cannot hold %s video (%s): choose another codec or container (.%s takes %s)",
                        container->extension, avcodec_get_name(codec->id), codec->name, container->extension,
                        *fits ? fits : "none of longvk's encoders");
    }
    *out = codec;
    return LV_OK;
}

int lv_codec_reorder_bound(const AVCodec *codec) {
    int i = encoder_index(codec->name);
    return i < 0 ? 0 : encoders[i].reorder;
}

/* The encoder's list of pixel formats: AVCodec.pix_fmts until FFmpeg 7.1 (libavcodec 61.13),
 * which deprecates it for avcodec_get_supported_config (Debian 12 has 5.1, Debian 13 7.1).
 * NULL when the encoder does not say. */
static const enum AVPixelFormat *pix_fmts(const AVCodec *codec) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
    const void *list = NULL;
    int n = 0;
    if (avcodec_get_supported_config(NULL, codec, AV_CODEC_CONFIG_PIX_FORMAT, 0, &list, &n) < 0) return NULL;
    return list;
#else
    return codec->pix_fmts;
#endif
}

static int supports(const AVCodec *codec, enum AVPixelFormat fmt) {
    const enum AVPixelFormat *list = pix_fmts(codec);
    if (!list) return 0;
    for (const enum AVPixelFormat *p = list; *p != AV_PIX_FMT_NONE; p++)
        if (*p == fmt) return 1;
    return 0;
}

lv_status lv_codec_pix_fmt(const AVCodec *codec, enum AVPixelFormat *out) {
    /* ffv1 is lossless: feed it the RGB samples themselves so a round trip is exact. */
    if (codec->id == AV_CODEC_ID_FFV1 && supports(codec, AV_PIX_FMT_BGR0)) {
        *out = AV_PIX_FMT_BGR0;
        return LV_OK;
    }
    if (supports(codec, AV_PIX_FMT_YUV420P)) {
        *out = AV_PIX_FMT_YUV420P;
        return LV_OK;
    }
    return lv_error(LV_ERR_UNSUPPORTED, "encoder %s does not take 8-bit yuv420p frames", codec->name);
}

int lv_codec_default_crf(const AVCodec *codec) {
    if (strcmp(codec->name, "libx264") == 0) return 18;
    if (strcmp(codec->name, "libvpx-vp9") == 0) return 31; /* with b:v 0: constant quality */
    return -1;
}

const char *lv_codec_default_preset(const AVCodec *codec) {
    return strcmp(codec->name, "libx264") == 0 ? "medium" : NULL;
}
