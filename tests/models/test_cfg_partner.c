/* CFG parallelism at the sampler (lv_chunk_options.cfg_partner, longvk/sampler.h): two
 * parties, each with its own context and dit, run one of the two passes of every guided
 * step and swap predictions (here two threads and a barrier; over MPI the partner is
 * lv_cfg_partner_mpi_create's). Both must produce the chunks of one dit running both
 * passes, to the bit, and end with the same carried state; a failed swap names the step. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/dit.h"
#include "longvk/sampler.h"
#include "test_support.h"

#define MODEL LONGVK_ASSETS_DIR "/testdata/sana-video/tiny-hd32.weights.safetensors"
#define CHUNKS 2
#define FRAMES 2
#define SIDE 8 /* latent 8 x 8: 4 x 4 tokens */
#define TEXT 8

static const float timesteps[3] = {1000, 700, 400};

typedef struct exchange {
    pthread_barrier_t barrier;
    const float *slot[2];
} exchange;

typedef struct party {
    lv_ctx *ctx;
    lv_dit *dit;
    lv_cfg_partner partner;
    exchange *ex;
    float *x0[CHUNKS];
    size_t n;
    lv_status status;
    char message[1024];
} party;

/* both parties post their prediction, then each copies the other's */
static lv_status swap_through_barrier(void *user, const float *mine, float *theirs, size_t n) {
    party *p = user;
    const int me = (int)p->partner.role;
    p->ex->slot[me] = mine;
    pthread_barrier_wait(&p->ex->barrier);
    memcpy(theirs, p->ex->slot[1 - me], n * sizeof *theirs);
    pthread_barrier_wait(&p->ex->barrier); /* the other has copied mine: it may change now */
    return LV_OK;
}

static lv_status swap_fails(void *user, const float *mine, float *theirs, size_t n) {
    (void)user, (void)mine, (void)theirs, (void)n;
    return lv_error(LV_ERR_IO, "the partner is gone");
}

static lv_dit *open_dit(lv_ctx *ctx, lv_sana_file *file) {
    lv_dit_options opt = {.cached_blocks = LV_CACHED_ALL};
    lv_dit *dit;
    cr_assert_eq(lv_dit_create(ctx, file, &opt, &dit), LV_OK, "%s", lv_last_error());
    const int cap = lv_sana_file_config(file)->caption_channels;
    float *y = ts_rand_alloc((size_t)TEXT * cap, 3, -1, 1), *empty = calloc((size_t)TEXT * cap, sizeof *empty);
    float mask[TEXT], none[TEXT] = {0};
    for (int i = 0; i < TEXT; i++) mask[i] = i < 5;
    cr_assert_eq(lv_dit_set_text(ctx, dit, 0, y, TEXT, mask), LV_OK, "%s", lv_last_error());
    cr_assert_eq(lv_dit_set_text(ctx, dit, 1, empty, TEXT, none), LV_OK, "%s", lv_last_error());
    free(y);
    free(empty);
    return dit;
}

static lv_status run_chunks(lv_ctx *ctx, lv_dit *dit, const lv_cfg_partner *partner, float *const *x0) {
    lv_chunk_options opt = {.timesteps = timesteps, .steps = 3, .seed = 11, .cfg_scale = 4.5,
                            .cfg_last_steps = 2, .cfg_partner = partner};
    for (int c = 0; c < CHUNKS; c++) LV_TRY(lv_longsana_chunk(ctx, dit, &opt, c, c * FRAMES, FRAMES, SIDE, SIDE, x0[c]));
    return LV_OK;
}

static void *party_main(void *arg) {
    party *p = arg;
    lv_clear_error();
    p->status = run_chunks(p->ctx, p->dit, &p->partner, p->x0);
    snprintf(p->message, sizeof p->message, "%s", p->status == LV_OK ? "" : lv_last_error());
    return NULL;
}

static float *layer_state(lv_ctx *ctx, lv_dit *dit, const lv_sana_config *cfg, int layer) {
    const size_t hd = (size_t)cfg->heads * cfg->head_dim;
    float *s = malloc((hd * cfg->head_dim + hd) * sizeof *s);
    cr_assert_eq(lv_dit_layer_state(ctx, dit, layer, s, s + hd * cfg->head_dim, NULL, 0), LV_OK, "%s",
                 lv_last_error());
    return s;
}

Test(cfg_partner, two_parties_make_the_chunks_of_one, .timeout = 300) {
    lv_sana_file *file;
    cr_assert_eq(lv_sana_file_open(MODEL, NULL, NULL, &file), LV_OK, "%s", lv_last_error());
    const lv_sana_config *cfg = lv_sana_file_config(file);
    const size_t n = (size_t)cfg->in_channels * FRAMES * SIDE * SIDE;

    /* one dit, both passes of every guided step */
    lv_ctx *ctx = ts_ctx();
    lv_dit *dit = open_dit(ctx, file);
    float *want[CHUNKS];
    for (int c = 0; c < CHUNKS; c++) want[c] = malloc(n * sizeof *want[c]);
    cr_assert_eq(run_chunks(ctx, dit, NULL, want), LV_OK, "%s", lv_last_error());

    /* two parties on their own contexts and threads */
    exchange ex;
    pthread_barrier_init(&ex.barrier, NULL, 2);
    party p[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].ctx = ts_ctx();
        p[i].dit = open_dit(p[i].ctx, file);
        p[i].partner = (lv_cfg_partner){.role = i == 0 ? LV_CFG_COND : LV_CFG_UNCOND, .swap = swap_through_barrier,
                                        .user = &p[i]};
        p[i].ex = &ex;
        for (int c = 0; c < CHUNKS; c++) p[i].x0[c] = malloc(n * sizeof *p[i].x0[c]);
    }
    for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&threads[i], NULL, party_main, &p[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(p[i].status, LV_OK, "party %d: %s", i, p[i].message);
        for (int c = 0; c < CHUNKS; c++)
            cr_assert(memcmp(p[i].x0[c], want[c], n * sizeof *want[c]) == 0,
                      "party %d (%s passes), chunk %d: not the bits of one dit running both passes", i,
                      i == 0 ? "conditional" : "unconditional", c);
        /* the carried state went on the same way: the next chunk would be the same too */
        for (int layer = 0; layer < cfg->depth; layer++) {
            float *a = layer_state(ctx, dit, cfg, layer), *b = layer_state(p[i].ctx, p[i].dit, cfg, layer);
            const size_t hd = (size_t)cfg->heads * cfg->head_dim;
            cr_assert(memcmp(a, b, (hd * cfg->head_dim + hd) * sizeof *a) == 0, "party %d, layer %d's state", i,
                      layer);
            free(a);
            free(b);
        }
        for (int c = 0; c < CHUNKS; c++) free(p[i].x0[c]);
        lv_dit_destroy(p[i].ctx, p[i].dit);
        ts_ctx_done(p[i].ctx);
    }
    pthread_barrier_destroy(&ex.barrier);
    for (int c = 0; c < CHUNKS; c++) free(want[c]);
    lv_dit_destroy(ctx, dit);
    ts_ctx_done(ctx);
    lv_sana_file_close(file);
}

Test(cfg_partner, a_failed_swap_names_the_step, .timeout = 300) {
    lv_sana_file *file;
    cr_assert_eq(lv_sana_file_open(MODEL, NULL, NULL, &file), LV_OK, "%s", lv_last_error());
    const size_t n = (size_t)lv_sana_file_config(file)->in_channels * FRAMES * SIDE * SIDE;
    lv_ctx *ctx = ts_ctx();
    lv_dit *dit = open_dit(ctx, file);
    float *x0 = malloc(n * sizeof *x0);
    /* CFG at the last 2 of 3 steps: the first swap is at step 2 */
    lv_cfg_partner gone = {.role = LV_CFG_UNCOND, .swap = swap_fails};
    lv_chunk_options opt = {.timesteps = timesteps, .steps = 3, .seed = 11, .cfg_scale = 4.5, .cfg_last_steps = 2,
                            .cfg_partner = &gone};
    cr_assert_eq(lv_longsana_chunk(ctx, dit, &opt, 0, 0, FRAMES, SIDE, SIDE, x0), LV_ERR_IO);
    cr_assert(strstr(lv_last_error(), "step 2 of 3") && strstr(lv_last_error(), "the partner is gone"), "%s",
              lv_last_error());
    /* one or the other: a partner and a twin */
    opt.twin = (lv_dit_twin *)1;
    cr_assert_eq(lv_longsana_chunk(ctx, dit, &opt, 0, 0, FRAMES, SIDE, SIDE, x0), LV_ERR_INVALID);
    cr_assert(strstr(lv_last_error(), "one or the other"), "%s", lv_last_error());
    opt.twin = NULL;
    gone.swap = NULL;
    cr_assert_eq(lv_longsana_chunk(ctx, dit, &opt, 0, 0, FRAMES, SIDE, SIDE, x0), LV_ERR_INVALID);
    free(x0);
    lv_dit_destroy(ctx, dit);
    ts_ctx_done(ctx);
    lv_sana_file_close(file);
}
