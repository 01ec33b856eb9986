#include "ts_files.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "longvk.h"

uint8_t *ts_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

void ts_spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

void ts_copy_file(const char *from, const char *to) {
    size_t len;
    uint8_t *b = ts_slurp(from, &len);
    ts_spit(to, b, len);
    free(b);
}

void ts_remove_output(const char *out, const char *const *suffixes) {
    char b[1200];
    remove(out);
    for (int i = 0; suffixes[i]; i++) {
        cr_assert_lt((size_t)snprintf(b, sizeof b, "%s%s", out, suffixes[i]), sizeof b, "path too long: %s", out);
        remove(b);
    }
}

void ts_remove_output_and_state(const char *out) {
    ts_remove_output(out, (const char *const[]){".longvk-state", NULL});
}

const char *ts_tmp_in(const char *dir, const char *name) {
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

int ts_run(const char *command, char **output) {
    size_t size = strlen(command) + 8; /* any length: a test may pass a 100 KB argument */
    char *cmd = malloc(size);
    cr_assert_not_null(cmd);
    snprintf(cmd, size, "%s 2>&1", command);
    FILE *p = popen(cmd, "r");
    free(cmd);
    cr_assert_not_null(p, "cannot run %s", command);
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (;;) {
        if (len + 1024 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert_not_null(out);
        }
        size_t k = fread(out + len, 1, cap - len - 1, p);
        len += k;
        if (k == 0) break;
    }
    out[len] = 0;
    int status = pclose(p);
    *output = out;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

uint8_t *ts_decode_all(const char *path, int64_t *frames, size_t *frame_bytes) {
    lv_decoder *dec;
    cr_assert_eq(lv_decoder_open(path, &dec), LV_OK, "%s", lv_last_error());
    const lv_video_info *info = lv_decoder_info(dec);
    *frame_bytes = (size_t)info->width * info->height * 3;
    size_t cap = 64;
    uint8_t *all = malloc(cap * *frame_bytes);
    int64_t n = 0;
    for (;;) {
        if ((size_t)n == cap) all = realloc(all, (cap *= 2) * *frame_bytes);
        int end = 0;
        cr_assert_eq(lv_decoder_next(dec, all + (size_t)n * *frame_bytes, NULL, &end), LV_OK, "%s: %s", path,
                     lv_last_error());
        if (end) break;
        n++;
    }
    lv_decoder_close(dec);
    *frames = n;
    return all;
}

uint8_t *ts_decode_frames(const char *path, int64_t frames, size_t frame_bytes) {
    int64_t n;
    size_t fb;
    uint8_t *v = ts_decode_all(path, &n, &fb);
    cr_assert_eq(n, frames, "%s: %lld frames", path, (long long)n);
    cr_assert_eq(fb, frame_bytes);
    return v;
}
