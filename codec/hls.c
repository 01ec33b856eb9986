/* HLS output (`-o out.m3u8`): FFmpeg's hls muxer, which writes its own files beside the
 * playlist: fragmented-MP4 segments of about LV_HLS_SEGMENT_SECONDS each
 * (OUT-without-.m3u8.00000.m4s, ...) after an init segment (.init.mp4). The playlist is of
 * type EVENT (segments are only ever added) and names a segment only once it is complete: the
 * muxer writes each segment under a .tmp name and renames it when it ends (hls_flags
 * temp_file), and writes the playlist to a temporary file renamed over the old one, so a
 * reader (a player, or a process killed at any moment) sees a playlist whose every segment
 * plays. EXT-X-ENDLIST is added at the close. A segment ends at the first keyframe after
 * LV_HLS_SEGMENT_SECONDS: every block longvk writes starts with one (codec/README.md).
 * Continuing a stream an interrupted run left: hls_resume.c. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "codec_internal.h"

int lv_container_is_hls(const lv_container *c) { return c && strcmp(c->format, "hls") == 0; }

int lv_encoder_path_is_hls(const char *path) { /* containers.c's test, without its error message */
    if (!path) return 0;
    const char *slash = strrchr(path, '/'), *dot = strrchr(slash ? slash + 1 : path, '.');
    return dot && strcasecmp(dot + 1, "m3u8") == 0;
}

lv_status lv_hls_muxer_options(const char *path, AVDictionary **opts) {
    /* the segments' names: the playlist's without ".m3u8", a '%' in it doubled (the muxer
     * reads the name as a pattern) */
    char base[4096], pattern[8400];
    size_t n = strlen(path);
    if (n >= sizeof base) return lv_error(LV_ERR_INVALID, "path too long: %s", path);
    memcpy(base, path, n + 1);
    char *dot = strrchr(base, '.'), *slash = strrchr(base, '/');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    size_t k = 0;
    for (const char *p = base; *p && k + 3 < sizeof pattern; p++) {
        if (*p == '%') pattern[k++] = '%';
        pattern[k++] = *p;
    }
    pattern[k] = '\0';
    char segments[8500], init[4200];
    snprintf(segments, sizeof segments, "%s.%%05d.m4s", pattern);
    snprintf(init, sizeof init, "%s.init.mp4", slash ? base + (slash - base) + 1 : base); /* beside the segments */
    char seconds[32];
    snprintf(seconds, sizeof seconds, "%d", LV_HLS_SEGMENT_SECONDS);
    int ret = 0;
    ret |= av_dict_set(opts, "hls_time", seconds, 0);
    ret |= av_dict_set(opts, "hls_list_size", "0", 0);             /* every segment stays named */
    ret |= av_dict_set(opts, "hls_playlist_type", "event", 0);
    ret |= av_dict_set(opts, "hls_segment_type", "fmp4", 0);
    ret |= av_dict_set(opts, "hls_flags", "temp_file+independent_segments", 0);
    ret |= av_dict_set(opts, "hls_segment_filename", segments, 0);
    ret |= av_dict_set(opts, "hls_fmp4_init_filename", init, 0);
    return ret < 0 ? lv_error(LV_ERR_NOMEM, "%s: out of memory", path) : LV_OK;
}
