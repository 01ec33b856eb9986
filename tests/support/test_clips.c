#include "test_clips.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void square(uint8_t *rgb, int w, int h, int x0, int y0, int size, uint8_t v) {
    for (int y = y0; y < y0 + size; y++)
        for (int x = x0; x < x0 + size; x++) {
            if (x < 0 || y < 0 || x >= w || y >= h) continue;
            uint8_t *p = rgb + 3 * ((size_t)y * (size_t)w + (size_t)x);
            p[0] = p[1] = p[2] = v;
        }
}

static uint32_t hash(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

void clip_frame(clip_kind kind, int w, int h, int t, int period, uint8_t *rgb) {
    int scene = kind == CLIP_HARD_CUTS && period > 0 ? t / period : 0;
    int tt = kind == CLIP_STATIC ? 0 : (kind == CLIP_HARD_CUTS && period > 0 ? t % period : t);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + 3 * ((size_t)y * (size_t)w + (size_t)x);
            if (kind == CLIP_SMOOTH) {
                double u = 2 * M_PI * (x + t) / 40.0, v = 2 * M_PI * y / 30.0;
                p[0] = (uint8_t)lrint(128 + 90 * sin(u));
                p[1] = (uint8_t)lrint(128 + 90 * cos(v + 0.5 * sin(u)));
                p[2] = (uint8_t)lrint(128 + 60 * sin(u + v));
            } else {
                int sc = scene % 4;
                p[0] = (uint8_t)(sc == 1 ? 255 - x * 255 / (w - 1) : x * 255 / (w - 1));
                p[1] = (uint8_t)(sc == 2 ? 255 - y * 255 / (h - 1) : y * 255 / (h - 1));
                p[2] = (uint8_t)(60 + 50 * sc);
                if (kind == CLIP_NOISY) {
                    uint32_t r = hash((uint32_t)(t * 7919 + y * 104729 + x * 31));
                    for (int c = 0; c < 3; c++) {
                        int v = p[c] + (int)((r >> (8 * c)) & 31) - 16;
                        p[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                    }
                }
            }
        }
    int size = w / 5 > 8 ? w / 5 : 8;
    if (kind == CLIP_SMOOTH) square(rgb, w, h, 4 + t, 4 + t, size, 235);
    else square(rgb, w, h, 4 + 2 * tt + 17 * scene % w, 6 + tt + 11 * scene % h, size, 240);
}

lv_status clip_write(const char *path, const char *codec, clip_kind kind, int w, int h, double fps, int n, int block,
                     int period) {
    lv_encoder_options opt;
    lv_encoder_options_default(&opt);
    opt.codec = codec;
    opt.sync_blocks = 0; /* tests: the kill test syncs explicitly where it matters */
    lv_encoder *enc;
    LV_TRY(lv_encoder_open(path, w, h, fps, &opt, &enc));
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    lv_status st = rgb ? LV_OK : LV_ERR_NOMEM;
    for (int t = 0; t < n && st == LV_OK; t++) {
        clip_frame(kind, w, h, t, period, rgb);
        st = lv_encoder_write_rgb(enc, rgb, 1);
        if (st == LV_OK && block > 0 && (t + 1) % block == 0) st = lv_encoder_flush_block(enc);
    }
    free(rgb);
    if (st != LV_OK) {
        lv_encoder_abort(enc);
        return st;
    }
    return lv_encoder_close(enc);
}

double clip_psnr(const uint8_t *a, const uint8_t *b, size_t n) {
    double sse = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        sse += d * d;
    }
    if (sse == 0) return INFINITY;
    return 10 * log10(255.0 * 255.0 * (double)n / sse);
}

int clip_run(const char *command) {
    int rc = system(command);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

char *clip_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}
