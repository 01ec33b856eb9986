/* The resume file of `longvk generate` (OUT.longvk-state) carries a CRC-32 of its contents:
 * a flipped byte anywhere in its records or tensors, or a file without a checksum, is refused
 * with an error naming the file, and the video stays as it was. (Before, a tampered state
 * resumed with exit 0 and made wrong frames.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk.h"
#include "longvk/generate.h"

#define OUT LONGVK_TEST_TMP "/checksum.mkv"
#define STATE OUT ".longvk-state"

static void options(lv_generate_options *o) {
    lv_generate_options_default(o);
    o->prompt = "two red balls bouncing on a blue background";
    o->frames = 6;
    o->scale = 1;
    o->seed = 7;
    o->output = OUT;
    o->block_frames = 2;
    o->burn_in_blocks = 0;
    o->encoder.codec = "ffv1";
}

typedef struct stopper {
    volatile sig_atomic_t flag;
} stopper;

static void stop_now(void *user, const lv_generate_progress *p) {
    (void)p;
    ((stopper *)user)->flag = 1;
}

typedef struct bytes {
    size_t n;
    unsigned char *p;
} bytes;

static bytes slurp(const char *path) {
    bytes b = {0, NULL};
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    b.n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc(b.n);
    cr_assert_eq(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

static void spit(const char *path, const bytes *b) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(b->p, 1, b->n, f), b->n);
    cr_assert_eq(fclose(f), 0);
}

/* Puts back the interrupted run's video and a (tampered) state, resumes, and expects a
 * clean refusal whose message contains `want`; the video must be untouched. */
static void expect_refused(const bytes *video, const bytes *state, const char *what, const char *want) {
    spit(OUT, video);
    spit(STATE, state);
    lv_generate_options o;
    options(&o);
    o.resume = true;
    lv_clear_error();
    lv_status s = lv_generate(&o, NULL, NULL, NULL, NULL);
    cr_assert_eq(s, LV_ERR_FORMAT, "%s: resumed with status %d (%s)", what, (int)s, lv_last_error());
    const char *msg = lv_last_error();
    cr_assert_not_null(strstr(msg, STATE), "%s: the message does not name the state file: %s", what, msg);
    cr_assert_not_null(strstr(msg, want), "%s: the message does not say '%s': %s", what, want, msg);
    bytes after = slurp(OUT);
    cr_assert(after.n == video->n && memcmp(after.p, video->p, after.n) == 0, "%s: the video was changed", what);
    free(after.p);
}

/* The byte offset of `needle` in b (after the 8-byte header length), -1 if absent. */
static long find(const bytes *b, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 8; i + k <= b->n; i++)
        if (memcmp(b->p + i, needle, k) == 0) return (long)i;
    return -1;
}

Test(resume_checksum, tampered_state_is_refused, .timeout = 600) {
    lv_generate_options o;
    options(&o);
    remove(STATE);
    stopper stop = {0};
    cr_assert_eq(lv_generate(&o, stop_now, NULL, &stop, &stop.flag), LV_ERR_INTERRUPTED, "%s", lv_last_error());
    bytes video = slurp(OUT), state = slurp(STATE);
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | state.p[i];
    cr_assert_lt(8 + header, state.n);
    cr_assert_geq(find(&state, "\"checksum\":\"crc32:"), 0, "the state has no checksum record");

    /* a flipped bit in the tensors: the first value of the carried state, one in the
     * middle, the last byte of the file (the last frame) */
    size_t data = 8 + (size_t)header;
    size_t offsets[] = {data, data + (state.n - data) / 2, state.n - 1};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        bytes t = {state.n, malloc(state.n)};
        memcpy(t.p, state.p, state.n);
        t.p[offsets[i]] ^= 0x10;
        char what[64];
        snprintf(what, sizeof what, "byte %zu flipped", offsets[i]);
        expect_refused(&video, &t, what, "checksum");
        free(t.p);
    }

    /* an edited record: the position moved on (still valid JSON, still a number) */
    long at = find(&state, "frames_done");
    cr_assert_geq(at, 0);
    bytes t = {state.n, malloc(state.n)};
    memcpy(t.p, state.p, state.n);
    unsigned char *digit = t.p + at;
    while (*digit < '1' || *digit > '9') digit++;
    *digit = *digit == '9' ? '8' : (unsigned char)(*digit + 1);
    expect_refused(&video, &t, "frames_done edited", "checksum");
    free(t.p);

    /* no checksum: a file from before the checksum existed */
    spit(STATE, &state);
    lv_weights *w;
    cr_assert_eq(lv_weights_open(STATE, &w), LV_OK, "%s", lv_last_error());
    lv_weight tensors[2] = {*lv_weights_find(w, "carried_state"), *lv_weights_find(w, "last_frame")};
    const char *meta[4] = {"run", lv_weights_metadata(w, "run"), "position", lv_weights_metadata(w, "position")};
    char old[600];
    snprintf(old, sizeof old, "%s.old", STATE);
    cr_assert_eq(lv_safetensors_write(old, tensors, 2, meta, 2), LV_OK, "%s", lv_last_error());
    lv_weights_close(w);
    bytes unchecked = slurp(old);
    expect_refused(&video, &unchecked, "no checksum", "no checksum");
    free(unchecked.p);

    /* and the file as written resumes */
    spit(OUT, &video);
    spit(STATE, &state);
    options(&o);
    o.resume = true;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    free(video.p);
    free(state.p);
}
