/* A dit's twin on a second context, driven by a worker thread (see longvk/sampler.h).
 * The thread waits for one pass at a time: lv_dit_twin_start hands it over, the worker
 * runs lv_dit_forward and keeps the status and message, lv_dit_twin_wait takes them back.
 * lv_last_error is per thread, so the message is copied across. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longvk/sampler.h"

struct lv_dit_twin {
    lv_ctx *ctx;
    lv_dit *dit;
    pthread_t thread;
    bool thread_running;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* guarded by lock */
    bool has_job, job_done, quit;
    bool misuse; /* a start without a pass, or while a pass ran: the next wait fails */
    lv_dit_pass pass;
    float *out;
    lv_status status;
    char message[1024];
};

static void *twin_main(void *arg) {
    lv_dit_twin *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->has_job && !t->quit) pthread_cond_wait(&t->changed, &t->lock);
        if (t->quit) break;
        lv_dit_pass pass = t->pass;
        float *out = t->out;
        pthread_mutex_unlock(&t->lock);
        lv_clear_error();
        lv_status s = lv_dit_forward(t->ctx, t->dit, &pass, out);
        pthread_mutex_lock(&t->lock);
        t->status = s;
        snprintf(t->message, sizeof t->message, "%s", s == LV_OK ? "" : lv_last_error());
        t->has_job = false;
        t->job_done = true;
        pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

lv_status lv_dit_twin_create(const lv_ctx_options *copt, const lv_sana_file *file,
                             const lv_dit_options *dopt, lv_dit_twin **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_dit_twin_create: out is NULL");
    *out = NULL;
    if (!copt || !file)
        return lv_error(LV_ERR_INVALID, "lv_dit_twin_create: %s is NULL", !copt ? "the context options" : "the file");
    lv_dit_twin *t = calloc(1, sizeof *t);
    if (!t) return lv_error(LV_ERR_NOMEM, "out of host memory");
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    lv_status s = lv_ctx_create(copt, &t->ctx);
    if (s == LV_OK) s = lv_dit_create(t->ctx, file, dopt, &t->dit);
    if (s == LV_OK) {
        if (pthread_create(&t->thread, NULL, twin_main, t) != 0)
            s = lv_error(LV_ERR_NOMEM, "cannot start the CFG twin's thread");
        else
            t->thread_running = true;
    }
    if (s != LV_OK) {
        lv_error_prefix(s, "the second context for parallel CFG passes");
        lv_dit_twin_destroy(t);
        return s;
    }
    *out = t;
    return LV_OK;
}

void lv_dit_twin_destroy(lv_dit_twin *t) {
    if (!t) return;
    if (t->thread_running) {
        pthread_mutex_lock(&t->lock);
        while (t->has_job) pthread_cond_wait(&t->changed, &t->lock); /* never abandon a pass */
        t->quit = true;
        pthread_cond_broadcast(&t->changed);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->thread, NULL);
    }
    if (t->dit) lv_dit_destroy(t->ctx, t->dit);
    if (t->ctx) lv_ctx_destroy(t->ctx);
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

lv_ctx *lv_dit_twin_ctx(lv_dit_twin *t) { return t ? t->ctx : NULL; }
lv_dit *lv_dit_twin_dit(lv_dit_twin *t) { return t ? t->dit : NULL; }

void lv_dit_twin_start(lv_dit_twin *t, const lv_dit_pass *pass, float *out) {
    if (!t) return; /* lv_dit_twin_wait(NULL) reports it */
    pthread_mutex_lock(&t->lock);
    if (!pass || t->has_job) { /* no pass, or one already running: the wait reports it */
        if (!t->has_job) {
            t->status = LV_ERR_INVALID;
            snprintf(t->message, sizeof t->message, "lv_dit_twin_start: the pass is NULL");
            t->job_done = true;
        }
        t->misuse = true;
        pthread_mutex_unlock(&t->lock);
        return;
    }
    t->pass = *pass;
    t->out = out;
    t->has_job = true;
    t->job_done = false;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

lv_status lv_dit_twin_wait(lv_dit_twin *t) {
    if (!t) return lv_error(LV_ERR_INVALID, "lv_dit_twin_wait: the twin is NULL");
    pthread_mutex_lock(&t->lock);
    if (!t->has_job && !t->job_done) { /* nothing started: waiting would never end */
        pthread_mutex_unlock(&t->lock);
        return lv_error(LV_ERR_INVALID, "lv_dit_twin_wait: no pass was started (lv_dit_twin_start)");
    }
    while (!t->job_done) pthread_cond_wait(&t->changed, &t->lock);
    t->job_done = false;
    lv_status s = t->status;
    char message[sizeof t->message];
    memcpy(message, t->message, sizeof message);
    if (t->misuse && s == LV_OK) {
        s = LV_ERR_INVALID;
        snprintf(message, sizeof message, "lv_dit_twin_start: a pass was started while another ran");
    }
    t->misuse = false;
    pthread_mutex_unlock(&t->lock);
    if (s != LV_OK) lv_error(s, "CFG twin: %s", message);
    return s;
}
