/* Prompts pushed during a run (lv_gen_live, lv_generate_push_prompt; issue 54), with the
 * embedded default model, 3 s at 16 fps (48 frames, blocks of 4), 4 burn-in blocks, frames to
 * a sink (no video file):
 *
 * - pushed_from_a_thread: another thread pushes three lines (one with "+0.5", one empty,
 *   one with a negative prompt and a transition) at moments it draws at random from the
 *   blocks the run reports; the switches applied, written to schedule_out, given back as a
 *   schedule (lv_gen_schedule_read) make the same frames bit for bit; at least one switch
 *   was applied and the frames differ from the first prompt's alone; a line past the end is
 *   reported through warn and not applied; the input's end is said once.
 * - queue_errors: NULL arguments, a line over LV_GEN_LIVE_MAX_LINE bytes, a push after
 *   lv_gen_live_end are errors naming what is wrong; a run whose queue holds only a line past
 *   the end, then ended, reports both and makes the first prompt's frames. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "longvk.h"
#include "longvk/generate.h"
#include "test_support.h"

#define PROMPT_A "two red balls bouncing on a blue background"
#define PROMPT_B "three yellow squares on a dark background"
#define FRAMES 48
#define BURN 4
#define BLOCKS (BURN + FRAMES / 4)
#define FRAME_VALUES (3 * 32 * 32)

typedef struct run_log {
    float *frames;              /* [FRAMES, 3, 32, 32] */
    atomic_int block;           /* the last block reported (1-based, burn-in included) */
    char warnings[16][400];
    int n_warnings;
} run_log;

static lv_status sink(void *user, int64_t index, const float *rgb, int height, int width) {
    run_log *l = user;
    cr_assert(index >= 0 && index < FRAMES && height == 32 && width == 32);
    memcpy(l->frames + index * FRAME_VALUES, rgb, FRAME_VALUES * sizeof(float));
    return LV_OK;
}

static void on_progress(void *user, const lv_generate_progress *p) {
    if (p->phase == LV_GEN_PHASE_BLOCK) atomic_store(&((run_log *)user)->block, p->block);
}

static void on_warn(void *user, const char *message) {
    run_log *l = user;
    cr_log_info("warning: %s", message);
    if (l->n_warnings < 16) snprintf(l->warnings[l->n_warnings++], sizeof l->warnings[0], "%s", message);
}

static void options(lv_generate_options *o, run_log *log) {
    lv_generate_options_default(o);
    o->prompt = PROMPT_A;
    o->frames = FRAMES;
    o->burn_in_blocks = BURN;
    o->seed = 7;
    o->output = NULL;
    o->frame_sink = sink;
    o->frame_user = log;
    log->frames = calloc((size_t)FRAMES * FRAME_VALUES, sizeof(float));
    atomic_init(&log->block, 0);
}

static int warned(const run_log *l, const char *what) {
    int n = 0;
    for (int i = 0; i < l->n_warnings; i++) n += strstr(l->warnings[i], what) != NULL;
    return n;
}

typedef struct pusher {
    lv_gen_live *live;
    run_log *log;
    unsigned seed;
    int failures;
} pusher;

/* waits until the run has reported block b (or it has ended) */
static void wait_block(run_log *l, int b) {
    for (int i = 0; i < 20000 && atomic_load(&l->block) < b; i++) usleep(1000);
}

static void *push_thread(void *arg) {
    pusher *p = arg;
    /* three moments in the written blocks, drawn at random, in order */
    int at[3];
    for (int i = 0; i < 3; i++) at[i] = BURN + 1 + i * 3 + (int)(rand_r(&p->seed) % 3);
    /* (no cr_assert off the test's thread: failures are counted, checked after the join) */
    wait_block(p->log, at[0]);
    p->failures += lv_generate_push_prompt(p->live, PROMPT_B) != LV_OK;
    wait_block(p->log, at[1]);
    p->failures += lv_generate_push_prompt(p->live, "") != LV_OK; /* ignored */
    p->failures += lv_generate_push_prompt(p->live, "+0.5 " PROMPT_A " | three squares | 4f") != LV_OK;
    wait_block(p->log, at[2]);
    p->failures += lv_generate_push_prompt(p->live, "# a comment") != LV_OK;
    p->failures += lv_generate_push_prompt(p->live, PROMPT_B) != LV_OK;
    p->failures += lv_generate_push_prompt(p->live, "@1:00 " PROMPT_A) != LV_OK; /* past the end */
    lv_gen_live_end(p->live, NULL);
    return NULL;
}

Test(live_prompts, pushed_from_a_thread, .timeout = 600) {
    const char *sched = LONGVK_TEST_TMP "/live_api.schedule";
    remove(sched);
    run_log live_log = {0}, replay_log = {0}, plain_log = {0};
    lv_generate_options o;
    options(&o, &live_log);
    lv_gen_live *live;
    cr_assert_eq(lv_gen_live_create(&live), LV_OK);
    o.live = live;
    o.schedule_out = sched;
    pusher p = {.live = live, .log = &live_log, .seed = (unsigned)time(NULL)};
    cr_log_info("pusher seed %u", p.seed);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, push_thread, &p), 0);
    lv_status s = lv_generate(&o, on_progress, on_warn, &live_log, NULL);
    pthread_join(t, NULL);
    cr_assert_eq(s, LV_OK, "%s", lv_last_error());
    cr_assert_eq(p.failures, 0, "lv_generate_push_prompt failed %d times during the run", p.failures);
    lv_gen_live_destroy(live);
    /* the last line is past the end (or, on a slow machine, after the last block started) */
    cr_expect_eq(warned(&live_log, "is past the end of the video (48 frames): not applied") +
                     warned(&live_log, "arrived after the last block had started: not applied"), 1,
                 "the line past the end is reported once");
    cr_expect_leq(warned(&live_log, "the input ended after 6 lines: the run goes on with the last prompt"), 1);

    /* the switches applied, as a schedule: the same frames */
    lv_gen_switch *e;
    int n;
    char *text;
    cr_assert_eq(lv_gen_schedule_read(sched, &e, &n, &text), LV_OK, "%s", lv_last_error());
    cr_assert_geq(n, 2, "at least one switch applied");
    cr_assert_leq(n, 4);
    options(&o, &replay_log);
    o.schedule = e;
    o.schedule_count = n;
    cr_assert_eq(lv_generate(&o, on_progress, on_warn, &replay_log, NULL), LV_OK, "%s", lv_last_error());
    cr_assert(memcmp(live_log.frames, replay_log.frames, (size_t)FRAMES * FRAME_VALUES * sizeof(float)) == 0,
              "the schedule written by the run steered from a thread makes other frames");
    lv_gen_schedule_free(e, text);

    options(&o, &plain_log);
    cr_assert_eq(lv_generate(&o, on_progress, on_warn, &plain_log, NULL), LV_OK, "%s", lv_last_error());
    cr_assert(memcmp(live_log.frames, plain_log.frames, (size_t)FRAMES * FRAME_VALUES * sizeof(float)) != 0,
              "the switches changed nothing");
    free(live_log.frames), free(replay_log.frames), free(plain_log.frames);
}

Test(live_prompts, queue_errors, .timeout = 300) {
    lv_gen_live *live;
    cr_assert_eq(lv_gen_live_create(NULL), LV_ERR_INVALID);
    cr_assert_eq(lv_gen_live_create(&live), LV_OK);
    cr_assert_eq(lv_generate_push_prompt(NULL, "x"), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "live is NULL"), "%s", lv_last_error());
    cr_assert_eq(lv_generate_push_prompt(live, NULL), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "line is NULL"), "%s", lv_last_error());
    char *big = malloc(LV_GEN_LIVE_MAX_LINE + 2);
    memset(big, 'a', LV_GEN_LIVE_MAX_LINE + 1);
    big[LV_GEN_LIVE_MAX_LINE + 1] = '\0';
    cr_assert_eq(lv_generate_push_prompt(live, big), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "a line of 4097 bytes (at most 4096)"), "%s", lv_last_error());
    big[LV_GEN_LIVE_MAX_LINE] = '\0';
    cr_assert_eq(lv_generate_push_prompt(live, big), LV_OK, "exactly the most: taken");
    free(big);
    lv_gen_live_end(live, "a test's end");
    cr_assert_eq(lv_generate_push_prompt(live, PROMPT_B), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "the input was ended"), "%s", lv_last_error());
    lv_gen_live_destroy(live);

    /* a run whose only line is past the end: reported, not applied */
    cr_assert_eq(lv_gen_live_create(&live), LV_OK);
    cr_assert_eq(lv_generate_push_prompt(live, "+100 " PROMPT_B), LV_OK);
    lv_gen_live_end(live, "a test's end");
    run_log log = {0}, plain = {0};
    lv_generate_options o;
    options(&o, &log);
    o.frames = 8;
    o.live = live;
    cr_assert_eq(lv_generate(&o, on_progress, on_warn, &log, NULL), LV_OK, "%s", lv_last_error());
    cr_expect_eq(warned(&log, "--prompts-from line 1: frame 1604 is past the end of the video (8 frames): not "
                              "applied: " PROMPT_B), 1, "the +100 line is reported");
    cr_expect_eq(warned(&log, "a test's end after 1 line: the run goes on with the last prompt (\"" PROMPT_A "\")"),
                 1, "the end is said once, with the reason given");
    lv_gen_live_destroy(live);
    options(&o, &plain);
    o.frames = 8;
    cr_assert_eq(lv_generate(&o, NULL, NULL, NULL, NULL), LV_OK, "%s", lv_last_error());
    cr_assert(memcmp(log.frames, plain.frames, (size_t)8 * FRAME_VALUES * sizeof(float)) == 0,
              "no switch applied: the first prompt's frames");
    free(log.frames), free(plain.frames);
}
