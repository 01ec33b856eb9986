/* The frame writer (longvk/frame_writer.h), the one path from float frames to the encoder
 * and the frame sink for `generate` and `decode`: through a lossless ffv1 file each
 * rounding stores exactly the bytes its rule gives (LV_FRAME_ROUND: round(127.5 x + 127.5)
 * as lv_encoder_write_float; LV_FRAME_TRUNCATE: SANA-Video's uint8(127.5 x + 127.5), NaN
 * 0), frames written in one call or one at a time give the same file and the same sink
 * frames, the sink's index continues from `frames`, and the upscale reaches both. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/frame_writer.h"
#include "test_support.h"

enum { W = 5, H = 3, N = 4 };

/* [3, N, H, W]: values over [-1.2, 1.2] and a NaN, halves on purpose (x = 1/255 steps) */
static void frames_of(float *x) {
    for (int i = 0; i < 3 * N * H * W; i++) x[i] = (float)((i % 97) - 48) / 40.0f;
    x[7] = NAN;
    x[11] = 1.0f / 255.0f; /* 127.5 x + 127.5 = 128.0: both rules give 128 */
    x[12] = -1.0f / 255.0f; /* 127.0: both 127 */
    x[13] = 0.0f;          /* 127.5: round 128, truncate 127 */
}

static uint8_t rule(lv_frame_rounding r, float v) {
    if (r == LV_FRAME_ROUND) {
        if (!(v > -1.0f)) v = -1.0f;
        if (v > 1.0f) v = 1.0f;
        return (uint8_t)(int)(127.5 * (double)v + 128.0);
    }
    float u = 127.5f * v + 127.5f;
    u = u > 0.0f ? u : 0.0f;
    u = u < 255.0f ? u : 255.0f;
    return (uint8_t)u;
}

typedef struct seen {
    int count;
    int64_t index[2 * N];
    float frame[2 * N][3 * H * W * 4];
} seen;

static lv_status on_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    seen *s = user;
    cr_assert_lt(s->count, 2 * N);
    cr_assert_leq((size_t)3 * height * width, sizeof s->frame[0] / sizeof(float));
    s->index[s->count] = index;
    memcpy(s->frame[s->count], rgb, (size_t)3 * height * width * sizeof *rgb);
    s->count++;
    return LV_OK;
}

static void write_file(const char *path, lv_frame_rounding r, int scale, bool at_once, const float *x, seen *s) {
    lv_encoder_options eo;
    lv_encoder_options_default(&eo);
    eo.codec = "ffv1";
    lv_frame_writer w = {.rounding = r, .scale = scale, .sink = on_frame, .sink_user = s, .frames = 10};
    cr_assert_eq(lv_encoder_open(path, W * scale, H * scale, 16, &eo, &w.encoder), LV_OK, "%s", lv_last_error());
    if (at_once) {
        cr_assert_eq(lv_frame_writer_write(&w, x, N, H, W), LV_OK, "%s", lv_last_error());
    } else {
        float one[3 * H * W];
        for (int t = 0; t < N; t++) {
            for (int c = 0; c < 3; c++) memcpy(one + c * H * W, x + ((size_t)c * N + t) * H * W, sizeof(float) * H * W);
            cr_assert_eq(lv_frame_writer_write(&w, one, 1, H, W), LV_OK, "%s", lv_last_error());
        }
    }
    cr_assert_eq(w.frames, 10 + N);
    cr_assert_eq(lv_encoder_close(w.encoder), LV_OK, "%s", lv_last_error());
    lv_frame_writer_free(&w);
}

static uint8_t *read_file(const char *path, int pixels) {
    lv_decoder *d;
    cr_assert_eq(lv_decoder_open(path, &d), LV_OK, "%s", lv_last_error());
    uint8_t *rgb = malloc((size_t)N * pixels * 3);
    for (int t = 0; t < N; t++) {
        int end = 0;
        cr_assert_eq(lv_decoder_next(d, rgb + (size_t)t * pixels * 3, NULL, &end), LV_OK, "%s", lv_last_error());
        cr_assert_eq(end, 0, "frame %d missing", t);
    }
    lv_decoder_close(d);
    return rgb;
}

Test(frame_writer, each_rounding_stores_its_rule) {
    float x[3 * N * H * W];
    frames_of(x);
    const lv_frame_rounding rules[2] = {LV_FRAME_ROUND, LV_FRAME_TRUNCATE};
    for (int k = 0; k < 2; k++) {
        char path[2][512];
        seen s[2];
        memset(s, 0, sizeof s);
        uint8_t *got[2];
        for (int at_once = 0; at_once < 2; at_once++) {
            snprintf(path[at_once], sizeof path[at_once], "%s/frame_writer_%d_%d.mkv", LONGVK_TEST_TMP, k, at_once);
            write_file(path[at_once], rules[k], 1, at_once, x, &s[at_once]);
            got[at_once] = read_file(path[at_once], H * W);
        }
        cr_assert(memcmp(got[0], got[1], (size_t)N * H * W * 3) == 0, "rounding %d: one call and frame by frame differ", k);
        for (int t = 0; t < N; t++)
            for (int c = 0; c < 3; c++)
                for (int p = 0; p < H * W; p++) {
                    float v = x[((size_t)c * N + t) * H * W + p];
                    cr_assert_eq(got[0][((size_t)t * H * W + p) * 3 + c], rule(rules[k], v),
                                 "rounding %d frame %d channel %d pixel %d (x = %g)", k, t, c, p, (double)v);
                }
        for (int a = 0; a < 2; a++) {
            cr_assert_eq(s[a].count, N);
            for (int t = 0; t < N; t++) {
                cr_assert_eq(s[a].index[t], 10 + t, "the sink's index continues from the writer's frames");
                for (int c = 0; c < 3; c++)
                    cr_assert(memcmp(s[a].frame[t] + c * H * W, x + ((size_t)c * N + t) * H * W, sizeof(float) * H * W) == 0,
                              "sink frame %d channel %d is not the frame written", t, c);
            }
        }
        free(got[0]);
        free(got[1]);
    }
}

/* Scale 2: the sink gets the upscaled frames (what the encoder gets), the same in one call
 * or frame by frame; a constant frame stays constant. */
Test(frame_writer, upscale_reaches_encoder_and_sink) {
    float x[3 * N * H * W];
    frames_of(x);
    seen s[2];
    memset(s, 0, sizeof s);
    char path[512];
    for (int at_once = 0; at_once < 2; at_once++) {
        snprintf(path, sizeof path, "%s/frame_writer_up_%d.mkv", LONGVK_TEST_TMP, at_once);
        write_file(path, LV_FRAME_ROUND, 2, at_once, x, &s[at_once]);
    }
    cr_assert_eq(s[0].count, N);
    cr_assert(memcmp(s[0].frame, s[1].frame, sizeof s[0].frame) == 0, "upscaled sink frames differ between the calls");
    float flat[3 * H * W];
    for (int i = 0; i < 3 * H * W; i++) flat[i] = 0.25f;
    seen one = {0};
    lv_frame_writer w = {.scale = 2, .sink = on_frame, .sink_user = &one};
    cr_assert_eq(lv_frame_writer_write(&w, flat, 1, H, W), LV_OK, "%s", lv_last_error());
    for (int i = 0; i < 3 * H * W * 4; i++) cr_assert_eq(one.frame[0][i], 0.25f, "value %d", i);
    lv_frame_writer_free(&w);
}

Test(frame_writer, bad_arguments) {
    lv_frame_writer w = {0};
    float x[3] = {0};
    cr_assert_eq(lv_frame_writer_write(NULL, x, 1, 1, 1), LV_ERR_INVALID);
    cr_assert_eq(lv_frame_writer_write(&w, NULL, 1, 1, 1), LV_ERR_INVALID);
    cr_assert_eq(lv_frame_writer_write(&w, x, -1, 1, 1), LV_ERR_INVALID);
    cr_assert_eq(lv_frame_writer_write(&w, x, 1, 0, 1), LV_ERR_INVALID);
    w.rounding = (lv_frame_rounding)7;
    cr_assert_eq(lv_frame_writer_write(&w, x, 1, 1, 1), LV_ERR_INVALID);
    cr_assert_eq(lv_frame_writer_reserve(NULL, 1, 1, 1), LV_ERR_INVALID);
    cr_assert_eq(lv_vae_decode_to_writer(NULL, NULL, x, 1, 1, 1, NULL, NULL), LV_ERR_INVALID);
    lv_frame_writer_free(NULL);
    lv_frame_writer_free(&w);
}
