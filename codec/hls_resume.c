/* Continuing an HLS stream (`-o out.m3u8` with --resume; lv_encoder_open_resume with frames
 * to keep). The segments an interrupted run left are kept as they are, untouched: nothing
 * is copied. What is checked, before anything is written:
 *
 * - the playlist is one longvk writes (hls.c): #EXTM3U, the header tags FFmpeg's hls muxer
 *   writes, EXT-X-MEDIA-SEQUENCE 0, one EXT-X-MAP naming OUT.init.mp4, then segments named
 *   OUT.00000.m4s, OUT.00001.m4s, ... in order, each with an EXTINF of whole frames, and at
 *   most an EXT-X-ENDLIST at the end (an interrupted run's close writes one; it is dropped);
 * - the init segment and every named segment are there; read in sequence (init, then the
 *   segments, as a player reads them) they hold this run's stream (codec, size, pixel
 *   format, frame rate, the encoder's stream header) and exactly the frames 0 .. keep - 1,
 *   each once, each segment starting with a keyframe and holding the frames its EXTINF says.
 *
 * Then a fresh hls muxer writes the new segments, numbered on from the last named one, its
 * own playlist under a side name (OUT.m3u8.resume-part) and its init segment under another
 * (OUT.init.mp4.resume-part). The mp4 muxer is told the fragments continue a stream
 * (movflags frag_discont): their decode times (tfdt) are the uninterrupted run's. Its init
 * segment, written with the first new segment, is compared with the old one in what a
 * segment depends on (same_init: the sample description with the encoder's header, the time
 * scale, the fragment defaults) and removed, so the playlist keeps its one EXT-X-MAP and
 * needs no EXT-X-DISCONTINUITY. One that differs there is an error: the frames after it
 * would not play with the old init segment.
 *
 * After every block and at close the side playlist's segments are appended to the old
 * ones and OUT.m3u8 is rewritten whole (a temporary file renamed over it), EXT-X-ENDLIST only
 * at close. A kill at any moment leaves OUT.m3u8 naming complete segments only: the old
 * ones and those of the resumed run already merged. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec_internal.h"

#define SIDE_SUFFIX ".resume-part"

typedef struct hls_segment {
    double seconds;
    int64_t frames;
    char extinf[96]; /* the EXTINF line as written */
    char name[600];
} hls_segment;

typedef struct hls_playlist {
    int version, target, ended;
    char init[512];
    hls_segment *seg;
    int n, cap;
} hls_playlist;

struct lv_hls_continuation {
    char path[4096];       /* OUT.m3u8 */
    char side[4200];       /* the muxer's playlist */
    char init[4200];       /* OUT.init.mp4, full path */
    char side_init[4300];  /* the muxer's init segment, full path */
    char side_init_name[600]; /* its name, as the muxer is given it */
    hls_playlist old;
    double fps;
    int merged;            /* the side playlist's segments already in OUT.m3u8 */
    int init_checked;
};

/* The names hls.c gives: base = the playlist's path without ".m3u8"; the segments
 * "BASE.%05d.m4s" and the init segment "BASE.init.mp4", both beside the playlist. */
static void base_of(const char *path, char *base, size_t size) {
    snprintf(base, size, "%s", path);
    char *dot = strrchr(base, '.'), *slash = strrchr(base, '/');
    if (dot && (!slash || dot > slash)) *dot = '\0';
}

static const char *name_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* path of `name` in the playlist's folder */
static void beside(const char *playlist, const char *name, char *out, size_t size) {
    const char *slash = strrchr(playlist, '/');
    if (!slash) snprintf(out, size, "%s", name);
    else snprintf(out, size, "%.*s/%s", (int)(slash - playlist), playlist, name);
}

static void playlist_free(hls_playlist *p) {
    free(p->seg);
    memset(p, 0, sizeof *p);
}

/* Reads a playlist longvk (or the hls muxer under it) wrote. Its segments are named after
 * the playlist `names` (hls.c: BASE.%05d.m4s, BASE.init.mp4), numbered from `first` (its
 * EXT-X-MEDIA-SEQUENCE); `init`: the init segment's name expected (NULL: BASE.init.mp4).
 * *missing: 1 when there is no file (not an error then; NULL: an error). Frames per
 * segment: EXTINF x fps, whole. */
static lv_status playlist_read(const char *path, const char *names, int first, const char *init, double fps,
                               hls_playlist *p, int *missing) {
    memset(p, 0, sizeof *p);
    if (missing) *missing = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT && missing) {
            *missing = 1;
            return LV_OK;
        }
        return lv_error(LV_ERR_IO, "cannot resume %s: cannot read its playlist: %s", path, strerror(errno));
    }
    char line[1024];
    int lineno = 0, in_segment = 0, media_sequence = -1;
    double seconds = 0;
    char extinf[96] = "";
    lv_status s = LV_OK;
#define BAD(...) do { s = lv_error(LV_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') BAD("cannot resume %s: line %d of its playlist is too long", path, lineno);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (lineno == 1) {
            if (strcmp(line, "#EXTM3U") != 0) BAD("cannot resume %s: it is not an HLS playlist (no #EXTM3U first)", path);
            continue;
        }
        if (!line[0]) continue;
        if (p->ended) BAD("cannot resume %s: line %d of its playlist comes after #EXT-X-ENDLIST", path, lineno);
        const char *v;
        if (in_segment) { /* the segment's name */
            if (line[0] == '#') BAD("cannot resume %s: line %d of its playlist: a segment's name was expected after "
                                    "#EXTINF, not %.60s", path, lineno, line);
            char want[600], base[4096];
            base_of(name_of(names), base, sizeof base);
            snprintf(want, sizeof want, "%.500s.%05d.m4s", base, first + p->n);
            if (strcmp(line, want) != 0)
                BAD("cannot resume %s: line %d of its playlist names %.200s where longvk wrote %s (segment %d): the "
                    "playlist was edited", path, lineno, line, want, first + p->n);
            if (p->n == p->cap) {
                int cap = p->cap ? 2 * p->cap : 64;
                hls_segment *g = realloc(p->seg, (size_t)cap * sizeof *g);
                if (!g) BAD("cannot resume %s: out of memory", path);
                p->seg = g, p->cap = cap;
            }
            hls_segment *g = &p->seg[p->n++];
            g->seconds = seconds;
            double fr = seconds * fps;
            g->frames = (int64_t)llround(fr);
            if (g->frames <= 0 || fabs(fr - (double)g->frames) > 0.01)
                BAD("cannot resume %s: segment %s lasts %.6f s, not a whole number of frames at %g fps", path, want,
                    seconds, fps);
            snprintf(g->extinf, sizeof g->extinf, "%s", extinf);
            snprintf(g->name, sizeof g->name, "%s", want);
            in_segment = 0;
        } else if ((v = strstr(line, "#EXTINF:")) == line) {
            char *end;
            seconds = strtod(line + 8, &end);
            if (end == line + 8 || *end != ',' || !(seconds > 0) || !isfinite(seconds))
                BAD("cannot resume %s: line %d of its playlist: %.60s is not a duration", path, lineno, line);
            snprintf(extinf, sizeof extinf, "%.90s", line);
            in_segment = 1;
        } else if (strncmp(line, "#EXT-X-VERSION:", 15) == 0) {
            p->version = atoi(line + 15);
        } else if (strncmp(line, "#EXT-X-TARGETDURATION:", 22) == 0) {
            p->target = atoi(line + 22);
        } else if (strncmp(line, "#EXT-X-MEDIA-SEQUENCE:", 22) == 0) {
            media_sequence = atoi(line + 22);
        } else if (strcmp(line, "#EXT-X-PLAYLIST-TYPE:EVENT") == 0 || strcmp(line, "#EXT-X-INDEPENDENT-SEGMENTS") == 0) {
        } else if (strncmp(line, "#EXT-X-MAP:URI=\"", 16) == 0) {
            const char *q = strchr(line + 16, '"');
            if (p->init[0] || p->n || !q || q[1]) BAD("cannot resume %s: line %d of its playlist: %.80s is not where or "
                                                      "how longvk writes its init segment", path, lineno, line);
            snprintf(p->init, sizeof p->init, "%.*s", (int)(q - (line + 16)), line + 16);
        } else if (strcmp(line, "#EXT-X-ENDLIST") == 0) {
            p->ended = 1;
        } else {
            BAD("cannot resume %s: line %d of its playlist, %.80s, is not in a playlist longvk writes (edited, or "
                "written by another program)", path, lineno, line);
        }
    }
    if (ferror(f)) BAD("cannot resume %s: reading its playlist failed", path);
    if (in_segment) BAD("cannot resume %s: its playlist ends after an #EXTINF, without the segment's name", path);
    if (media_sequence != first || p->version <= 0 || p->target <= 0)
        BAD("cannot resume %s: its playlist lacks the #EXT-X-VERSION, #EXT-X-TARGETDURATION or "
            "#EXT-X-MEDIA-SEQUENCE:%d longvk writes", path, first);
    if (p->n && !p->init[0]) BAD("cannot resume %s: its playlist names no init segment (#EXT-X-MAP)", path);
    if (p->init[0]) {
        char base[4096], want[4200];
        base_of(name_of(names), base, sizeof base);
        snprintf(want, sizeof want, "%s.init.mp4", base);
        if (init) snprintf(want, sizeof want, "%s", init);
        if (strcmp(p->init, want) != 0)
            BAD("cannot resume %s: its playlist's init segment is %s, longvk wrote %s", path, p->init, want);
    }
#undef BAD
done:
    fclose(f);
    if (s != LV_OK) playlist_free(p);
    return s;
}

static int64_t playlist_frames(const hls_playlist *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n; i++) n += p->seg[i].frames;
    return n;
}

lv_status lv_hls_named_frames(const char *path, double fps, int64_t *frames) {
    *frames = -1;
    if (!(fps > 0)) return lv_error(LV_ERR_INVALID, "lv_hls_named_frames(%s): frame rate %g", path, fps);
    hls_playlist p;
    int missing;
    LV_TRY(playlist_read(path, path, 0, NULL, fps, &p, &missing));
    if (missing) {
        /* no playlist: nothing was named, unless segments are there (the playlist deleted) */
        char base[4096], first[4200];
        base_of(path, base, sizeof base);
        snprintf(first, sizeof first, "%s.00000.m4s", base); /* (the init segment is there from the first frame) */
        *frames = 0;
        if (access(first, F_OK) == 0)
            return lv_error(LV_ERR_IO, "cannot resume %s: its playlist is not there, but its segments are (%s): "
                            "was it moved or deleted? Put it back, or start again with --overwrite", path, first);
        return LV_OK;
    }
    *frames = playlist_frames(&p);
    playlist_free(&p);
    return LV_OK;
}

/* ------------------------------------------------------------------------------------------
 * Reading the init segment and the segments in sequence, as one fragmented MP4. */

typedef struct chained_files {
    int count;
    char (*path)[4200];
    int64_t *start; /* [count + 1]: where each file begins in the sequence; start[count]: the end */
    FILE *f;
    int open_index;
    int64_t pos;
} chained_files;

static int chain_read(void *opaque, uint8_t *buf, int size) {
    chained_files *c = opaque;
    if (c->pos >= c->start[c->count]) return AVERROR_EOF;
    int i = 0;
    while (c->start[i + 1] <= c->pos) i++;
    if (c->open_index != i) {
        if (c->f) fclose(c->f);
        c->f = fopen(c->path[i], "rb");
        c->open_index = c->f ? i : -1;
        if (!c->f) return AVERROR(errno);
    }
    if (fseeko(c->f, (off_t)(c->pos - c->start[i]), SEEK_SET) != 0) return AVERROR(errno);
    int64_t left = c->start[i + 1] - c->pos;
    size_t want = (size_t)(left < size ? left : size);
    size_t got = fread(buf, 1, want, c->f);
    if (got == 0) return ferror(c->f) ? AVERROR(EIO) : AVERROR_EOF; /* shrunk since stat */
    c->pos += (int64_t)got;
    return (int)got;
}

static int64_t chain_seek(void *opaque, int64_t offset, int whence) {
    chained_files *c = opaque;
    int64_t end = c->start[c->count];
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return end;
    int64_t to = whence == SEEK_SET ? offset : whence == SEEK_CUR ? c->pos + offset : whence == SEEK_END ? end + offset : -1;
    if (to < 0) return AVERROR(EINVAL);
    c->pos = to;
    return to;
}

/* Checks the named stream (see the top). */
static lv_status check_named(lv_hls_continuation *h, lv_encoder *enc, const lv_container *container,
                             const AVCodec *codec, enum AVPixelFormat pix_fmt, int width, int height, AVRational rate,
                             int64_t keep) {
    const char *path = h->path;
    const hls_playlist *p = &h->old;
    int64_t named = playlist_frames(p);
    if (named != keep)
        return lv_error(LV_ERR_INVALID, "cannot resume %s: its playlist names %lld frames (%d segments), the resume "
                        "state holds %lld: they are not of the same run", path, (long long)named, p->n, (long long)keep);
    chained_files c = {.count = p->n + 1, .open_index = -1};
    c.path = calloc((size_t)c.count, sizeof *c.path);
    c.start = calloc((size_t)c.count + 1, sizeof *c.start);
    lv_status s = c.path && c.start ? LV_OK : lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    for (int i = 0; s == LV_OK && i < c.count; i++) {
        if (i == 0) snprintf(c.path[0], sizeof c.path[0], "%s", h->init);
        else beside(path, p->seg[i - 1].name, c.path[i], sizeof c.path[i]);
        struct stat st;
        if (stat(c.path[i], &st) != 0)
            s = lv_error(LV_ERR_IO, "cannot resume %s: its playlist names %s, which is %s", path, c.path[i],
                         errno == ENOENT ? "not there (deleted?): the stream cannot continue; start again with "
                                           "--overwrite" : strerror(errno));
        else if (!S_ISREG(st.st_mode) || st.st_size == 0)
            s = lv_error(LV_ERR_FORMAT, "cannot resume %s: %s, which its playlist names, is %s", path, c.path[i],
                         S_ISREG(st.st_mode) ? "empty" : "not a regular file");
        else c.start[i + 1] = c.start[i] + (int64_t)st.st_size;
    }
    AVFormatContext *fmt = NULL;
    AVIOContext *io = NULL;
    AVPacket *pkt = NULL;
    uint8_t *seen = NULL;
    uint8_t *buffer = s == LV_OK ? av_malloc(1 << 16) : NULL;
    if (s == LV_OK && buffer) io = avio_alloc_context(buffer, 1 << 16, 0, &c, chain_read, NULL, chain_seek);
    if (s == LV_OK && !io) {
        av_free(buffer);
        s = lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    }
    if (s == LV_OK && !(fmt = avformat_alloc_context())) s = lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    if (s == LV_OK) {
        fmt->pb = io;
        fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
        int ret = avformat_open_input(&fmt, h->init, av_find_input_format("mp4"), NULL);
        if (ret < 0) {
            fmt = NULL; /* freed by avformat_open_input */
            s = lv_av_error(LV_ERR_FORMAT, ret, "cannot resume %s: its init segment and segments are not a "
                            "fragmented MP4 FFmpeg reads", path);
        } else if ((ret = avformat_find_stream_info(fmt, NULL)) < 0) {
            s = lv_av_error(LV_ERR_FORMAT, ret, "cannot resume %s: cannot find its streams", path);
        }
    }
    AVStream *vst = NULL;
    for (unsigned i = 0; s == LV_OK && i < fmt->nb_streams && !vst; i++)
        if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) vst = fmt->streams[i];
    if (s == LV_OK && !vst) s = lv_error(LV_ERR_FORMAT, "cannot resume %s: its init segment holds no video", path);
    if (s == LV_OK) s = lv_resume_check_stream(path, fmt, vst, container, codec, pix_fmt, width, height, rate);
    if (s == LV_OK) s = lv_resume_check_header(path, vst, enc);
    /* every frame 0 .. named - 1 once, in the segment EXTINF says, each segment opening with a keyframe */
    int64_t *count = s == LV_OK ? calloc((size_t)p->n + 1, sizeof *count) : NULL;
    if (s == LV_OK && (!count || !(pkt = av_packet_alloc()) || !(seen = calloc((size_t)(named / 8 + 1), 1))))
        s = lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    int64_t origin = s == LV_OK ? vst->start_time : 0;
    AVRational frame_tb = av_inv_q(rate);
    int last_segment = -1;
    while (s == LV_OK) {
        int ret = av_read_frame(fmt, pkt);
        if (ret == AVERROR_EOF) break;
        if (ret < 0) {
            s = lv_av_error(LV_ERR_FORMAT, ret, "cannot resume %s: reading its segments", path);
            break;
        }
        if (pkt->stream_index != vst->index) {
            av_packet_unref(pkt);
            continue;
        }
        int seg = 0;
        while (seg < p->n && pkt->pos >= c.start[seg + 2]) seg++;
        if (pkt->pos < c.start[1] || pkt->pts == AV_NOPTS_VALUE || (pkt->flags & AV_PKT_FLAG_CORRUPT)) {
            s = lv_error(LV_ERR_FORMAT, "cannot resume %s: segment %s holds a damaged frame", path, p->seg[seg].name);
        } else {
            if (origin == AV_NOPTS_VALUE) origin = pkt->pts;
            int64_t frame = av_rescale_q_rnd(pkt->pts - origin, vst->time_base, frame_tb, AV_ROUND_NEAR_INF);
            if (seg != last_segment && !(pkt->flags & AV_PKT_FLAG_KEY))
                s = lv_error(LV_ERR_FORMAT, "cannot resume %s: segment %s does not start with a keyframe", path,
                             p->seg[seg].name);
            else if (frame < 0 || (frame < named && (seen[frame >> 3] & (1u << (frame & 7)))))
                s = lv_error(LV_ERR_FORMAT, "cannot resume %s: segment %s holds frame %lld, %s", path,
                             p->seg[seg].name, (long long)frame, frame < 0 ? "before the first" : "twice");
            else { /* (one past the frames named shows as a segment holding more than its EXTINF) */
                if (frame < named) seen[frame >> 3] |= (uint8_t)(1u << (frame & 7));
                count[seg]++;
            }
            last_segment = seg;
        }
        av_packet_unref(pkt);
    }
    for (int i = 0; s == LV_OK && i < p->n; i++)
        if (count[i] != p->seg[i].frames)
            s = lv_error(LV_ERR_FORMAT, "cannot resume %s: segment %s holds %lld frames, its playlist says %lld "
                         "(%s): the playlist was edited or the segment damaged", path, p->seg[i].name,
                         (long long)count[i], (long long)p->seg[i].frames, p->seg[i].extinf);
    for (int64_t i = 0; s == LV_OK && i < named; i++)
        if (!(seen[i >> 3] & (1u << (i & 7))))
            s = lv_error(LV_ERR_FORMAT, "cannot resume %s: its segments hold no frame %lld, one of the %lld its "
                         "playlist names", path, (long long)i, (long long)named);
    free(count);
    free(seen);
    av_packet_free(&pkt);
    avformat_close_input(&fmt);
    if (io) av_freep(&io->buffer);
    avio_context_free(&io);
    if (c.f) fclose(c.f);
    free(c.path);
    free(c.start);
    return s;
}

/* ------------------------------------------------------------------------------------------
 * The continued stream */

lv_status lv_hls_open_continued(const char *path, int width, int height, double fps, const lv_encoder_options *opt,
                                int64_t keep, lv_encoder **out) {
    *out = NULL;
    if (!(fps > 0) || !isfinite(fps) || fps > 1000)
        return lv_error(LV_ERR_INVALID, "frame rate %g for %s: must be in (0, 1000]", fps, path);
    lv_hls_continuation *h = calloc(1, sizeof *h);
    if (!h) return lv_error(LV_ERR_NOMEM, "resuming %s: out of memory", path);
    h->fps = fps;
    char base[4096];
    base_of(path, base, sizeof base);
    lv_status s = LV_OK;
    if (snprintf(h->path, sizeof h->path, "%s", path) >= (int)sizeof h->path) s = lv_error(LV_ERR_INVALID, "path too long: %s", path);
    snprintf(h->side, sizeof h->side, "%s%s", path, SIDE_SUFFIX);
    snprintf(h->init, sizeof h->init, "%s.init.mp4", base);
    snprintf(h->side_init, sizeof h->side_init, "%s%s", h->init, SIDE_SUFFIX);
    snprintf(h->side_init_name, sizeof h->side_init_name, "%.580s", name_of(h->side_init));
    int missing = 0;
    if (s == LV_OK) s = playlist_read(path, path, 0, NULL, fps, &h->old, &missing);
    if (s == LV_OK && missing) s = lv_hls_named_frames(path, fps, &(int64_t){0}); /* says why, if segments are there */
    if (s == LV_OK && missing)
        s = lv_error(LV_ERR_IO, "cannot resume %s: there is no playlist there to continue", path);
    const lv_container *container = NULL;
    const AVCodec *codec = NULL;
    enum AVPixelFormat pix_fmt = AV_PIX_FMT_NONE;
    if (s == LV_OK) s = lv_container_for_path(path, &container);
    if (s == LV_OK) s = lv_codec_resolve(opt->codec, container, path, &codec);
    if (s == LV_OK) s = lv_codec_pix_fmt(codec, &pix_fmt);
    lv_encoder *enc = NULL;
    if (s == LV_OK) s = lv_encoder_open_as(path, NULL, width, height, fps, opt, &enc);
    if (s == LV_OK) s = check_named(h, enc, container, codec, pix_fmt, width, height, av_d2q(fps, 1001000), keep);
    if (s != LV_OK) {
        lv_encoder_abort(enc);
        lv_hls_continuation_free(h);
        return s;
    }
    /* stale files of an earlier resume killed before it merged anything */
    unlink(h->side);
    unlink(h->side_init);
    lv_encoder_continue_hls(enc, h);
    lv_encoder_start_at(enc, keep);
    *out = enc;
    return LV_OK;
}

const char *lv_hls_continuation_url(const lv_hls_continuation *h) { return h->side; }

lv_status lv_hls_continuation_options(const lv_hls_continuation *h, AVDictionary **opts) {
    char number[32];
    snprintf(number, sizeof number, "%d", h->old.n);
    int ret = 0;
    ret |= av_dict_set(opts, "start_number", number, 0);
    ret |= av_dict_set(opts, "hls_fmp4_init_filename", h->side_init_name, 0);
    /* the fragments continue the stream: decode times as if it had started at frame 0 */
    ret |= av_dict_set(opts, "hls_segment_options", "movflags=+frag_discont", 0);
    return ret < 0 ? lv_error(LV_ERR_NOMEM, "%s: out of memory", h->path) : LV_OK;
}

/* An init segment (at most 1 MiB) into memory; NULL if unreadable. */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = malloc(1 << 20);
    *len = b ? fread(b, 1, 1 << 20, f) : 0;
    if (b && (ferror(f) || !feof(f))) free(b), b = NULL;
    fclose(f);
    return b;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* The box of type `path[0]` in [p, end), then `path[1]` inside it, ...; NULL if absent. */
static const uint8_t *find_box(const uint8_t *p, const uint8_t *end, const char *const *path, size_t *size) {
    while (end - p >= 8) {
        size_t n = be32(p);
        if (n < 8 || n > (size_t)(end - p)) return NULL;
        if (memcmp(p + 4, path[0], 4) == 0) {
            if (!path[1]) {
                *size = n;
                return p;
            }
            return find_box(p + 8, p + n, path + 1, size);
        }
        p += n;
    }
    return NULL;
}

/* What the segments depend on in an init segment: the sample description (the codec and its
 * header), the track's time scale (mdhd: version, flags, times, then the time scale) and
 * the fragments' defaults (trex). What else the muxer writes differs between a stream's
 * start and its continuation without changing a segment's frames: the durations of the first
 * fragment (mvhd, tkhd, mdhd) and the edit list, which a continued muxer computes from its
 * own first packets. The old init segment, whose edit list is the stream's, stays. */
static int same_init(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    static const char *const stsd[] = {"moov", "trak", "mdia", "minf", "stbl", "stsd", NULL};
    static const char *const mdhd[] = {"moov", "trak", "mdia", "mdhd", NULL};
    static const char *const trex[] = {"moov", "mvex", "trex", NULL};
    const char *const *parts[] = {stsd, mdhd, trex};
    int same = x && y;
    for (int i = 0; same && i < 3; i++) {
        size_t sa = 0, sb = 0;
        const uint8_t *pa = find_box(x, x + na, parts[i], &sa), *pb = find_box(y, y + nb, parts[i], &sb);
        same = pa && pb;
        if (same && i == 1) { /* version 0: 4-byte times, the time scale at 20; version 1: at 28 */
            size_t at = pa[8] == 1 ? 28 : 20;
            same = sa >= at + 4 && sb >= at + 4 && pa[8] == pb[8] && memcmp(pa + at, pb + at, 4) == 0;
        } else if (same) {
            same = sa == sb && memcmp(pa, pb, sa) == 0;
        }
    }
    free(x);
    free(y);
    return same;
}

lv_status lv_hls_continuation_update(lv_hls_continuation *h, int closing) {
    hls_playlist side;
    int missing = 0;
    lv_status s = playlist_read(h->side, h->path, h->old.n, h->side_init_name, h->fps, &side, &missing);
    if (s != LV_OK) return s;
    if (!missing && side.n && !h->init_checked) {
        /* the muxer's init segment is written with its first segment */
        if (!same_init(h->side_init, h->init)) {
            playlist_free(&side);
            return lv_error(LV_ERR_UNSUPPORTED, "continuing %s: the init segment of the new segments (%s) differs "
                            "from the stream's (%s), so they would not play after the old ones; start again with "
                            "--overwrite", h->path, h->side_init, h->init);
        }
        unlink(h->side_init);
        h->init_checked = 1;
    }
    int ended = closing;
    if (!ended && side.n == h->merged) {
        playlist_free(&side);
        return LV_OK;
    }
    lv_atomic_file f;
    s = lv_atomic_open(&f, h->path);
    if (s == LV_OK) {
        int target = h->old.target > side.target ? h->old.target : side.target;
        for (int k = 0; k < 2; k++) /* never below a segment's length (RFC 8216 asks it rounded) */
            for (int i = 0; i < (k ? side.n : h->old.n); i++) {
                double d = (k ? side.seg : h->old.seg)[i].seconds;
                if (d > target) target = (int)ceil(d);
            }
        fprintf(f.fp, "#EXTM3U\n#EXT-X-VERSION:%d\n#EXT-X-TARGETDURATION:%d\n#EXT-X-MEDIA-SEQUENCE:0\n"
                      "#EXT-X-PLAYLIST-TYPE:EVENT\n#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"%s\"\n",
                h->old.version, target, h->old.init[0] ? h->old.init : name_of(h->init));
        for (int k = 0; k < 2; k++) {
            const hls_playlist *p = k ? &side : &h->old;
            for (int i = 0; i < p->n; i++) fprintf(f.fp, "%s\n%s\n", p->seg[i].extinf, p->seg[i].name);
        }
        if (ended) fprintf(f.fp, "#EXT-X-ENDLIST\n");
        s = lv_atomic_commit(&f);
    }
    if (s == LV_OK) h->merged = side.n;
    playlist_free(&side);
    if (s == LV_OK && closing) { /* all merged: the muxer's own files go */
        unlink(h->side);
        unlink(h->side_init);
    }
    return s;
}

void lv_hls_continuation_free(lv_hls_continuation *h) {
    if (!h) return;
    playlist_free(&h->old);
    free(h);
}
