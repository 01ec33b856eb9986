/* Colour conversion through libswscale, with the matrix and range always set explicitly
 * (swscale's own default is BT.601 and would shift colours of a BT.709-tagged stream).
 *
 * Encoding: RGB (full range) -> Y'CbCr with BT.709 coefficients, limited range (Y 16-235,
 * C 16-240), which is what the stream is tagged with. Decoding: Y'CbCr -> RGB with the
 * matrix and range the stream says; an untagged stream is read as BT.601 limited, as
 * FFmpeg does. SWS_ACCURATE_RND keeps swscale off its fast RGB24->YUV420P path, which
 * rounds less carefully; full chroma interpolation upsamples 4:2:0 chroma with the
 * bicubic filter instead of repeating samples. */
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "codec_internal.h"

static int is_rgb(enum AVPixelFormat fmt) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fmt);
    return d && (d->flags & AV_PIX_FMT_FLAG_RGB);
}

static int sws_space(enum AVColorSpace space) {
    switch (space) {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709;
    case AVCOL_SPC_FCC: return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M: return SWS_CS_ITU601;
    default: return SWS_CS_DEFAULT; /* BT.601 */
    }
}

struct SwsContext *lv_sws_from_rgb24(int width, int height, enum AVPixelFormat dst) {
    int flags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP | SWS_BITEXACT;
    struct SwsContext *sws = sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, dst, flags, NULL, NULL, NULL);
    if (!sws || is_rgb(dst)) return sws;
    const int *bt709 = sws_getCoefficients(SWS_CS_ITU709);
    /* source range 1 = full (RGB), destination range 0 = limited; brightness 0, contrast and
     * saturation 1.0 in 16.16 fixed point */
    if (sws_setColorspaceDetails(sws, bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16) < 0) {
        sws_freeContext(sws);
        return NULL;
    }
    return sws;
}

struct SwsContext *lv_sws_to_rgb24(int width, int height, enum AVPixelFormat src, enum AVColorSpace space,
                                   enum AVColorRange range) {
    int flags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_BITEXACT;
    struct SwsContext *sws = sws_getContext(width, height, src, width, height, AV_PIX_FMT_RGB24, flags, NULL, NULL, NULL);
    if (!sws || is_rgb(src)) return sws;
    const int *coeffs = sws_getCoefficients(sws_space(space));
    /* yuvj* formats are full range whatever the tag says */
    int full = range == AVCOL_RANGE_JPEG || src == AV_PIX_FMT_YUVJ420P || src == AV_PIX_FMT_YUVJ422P ||
               src == AV_PIX_FMT_YUVJ444P || src == AV_PIX_FMT_YUVJ440P || src == AV_PIX_FMT_YUVJ411P;
    if (sws_setColorspaceDetails(sws, coeffs, full, coeffs, 1, 0, 1 << 16, 1 << 16) < 0) {
        sws_freeContext(sws);
        return NULL;
    }
    return sws;
}

int lv_pix_fmt_is_planar_yuv8(enum AVPixelFormat fmt) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fmt);
    if (!d || (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BITSTREAM)))
        return 0;
    if (d->nb_components != 1 && d->nb_components != 3 && d->nb_components != 4) return 0;
    int n = d->nb_components >= 3 ? 3 : 1;
    for (int c = 0; c < n; c++)
        if (d->comp[c].depth != 8 || d->comp[c].plane != c || d->comp[c].step != 1 || d->comp[c].shift != 0) return 0;
    return 1;
}

struct SwsContext *lv_sws_to_yuv444(int width, int height, enum AVPixelFormat src, enum AVColorRange range) {
    int flags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_BITEXACT;
    struct SwsContext *sws =
        sws_getContext(width, height, src, width, height, AV_PIX_FMT_YUV444P, flags, NULL, NULL, NULL);
    if (!sws) return NULL;
    const int *bt709 = sws_getCoefficients(SWS_CS_ITU709);
    /* RGB in: BT.709 limited, as the encoder writes it; YUV in: the same range out (no
     * matrix change happens between two YUV formats) */
    int src_full = is_rgb(src) || range == AVCOL_RANGE_JPEG;
    int dst_full = is_rgb(src) ? 0 : src_full;
    if (sws_setColorspaceDetails(sws, bt709, src_full, bt709, dst_full, 0, 1 << 16, 1 << 16) < 0) {
        sws_freeContext(sws);
        return NULL;
    }
    return sws;
}
