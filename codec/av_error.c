/* FFmpeg error codes turned into longvk messages and statuses. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <pthread.h>

#include <libavutil/error.h>
#include <libavutil/log.h>

#include "codec_internal.h"

lv_status lv_status_from_av(int averr) {
    if (averr == AVERROR(ENOMEM)) return LV_ERR_NOMEM;
    if (averr == AVERROR_INVALIDDATA || averr == AVERROR_EOF) return LV_ERR_FORMAT;
    if (averr == AVERROR_ENCODER_NOT_FOUND || averr == AVERROR_DECODER_NOT_FOUND ||
        averr == AVERROR_MUXER_NOT_FOUND || averr == AVERROR_DEMUXER_NOT_FOUND || averr == AVERROR_PATCHWELCOME)
        return LV_ERR_UNSUPPORTED;
    if (averr == AVERROR(EINVAL) || averr == AVERROR(ERANGE)) return LV_ERR_INVALID;
    return LV_ERR_IO;
}

lv_status lv_av_error(lv_status status, int averr, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char reason[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(averr, reason, sizeof reason);
    return lv_error(status, "%s: %s", what, reason);
}

/* FFmpeg logs at "info" by default: x264 alone prints several lines for every encoder
 * opened (one per block). Keep its errors, drop the chatter, unless the program embedding
 * the library has chosen a level itself. Called before the first encoder or decoder opens. */
static void quiet_once(void) {
    if (av_log_get_level() != AV_LOG_INFO) return;
    av_log_set_level(AV_LOG_ERROR);
    /* SVT-AV1 prints its configuration to stdout through its own logger, which only this
     * variable controls (1: errors); a value the user set is kept */
    setenv("SVT_LOG", "1", 0);
}

void lv_av_quiet(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, quiet_once);
}
