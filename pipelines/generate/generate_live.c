/* Prompts typed during the run (issue 54, --prompts-from): a queue of lines that any thread
 * fills (lv_generate_push_prompt) and the run empties before every block, each line a switch
 * of the prompt schedule at the next block not yet started (or later: "+SECONDS" / "@TIME"
 * in front). The switches applied go into OUT.schedule and the resume file, so that
 * --schedule OUT.schedule makes the same video and --resume continues it. See
 * pipelines/generate/README.md, "Prompts typed during the run". */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"

/* ---- the queue (thread-safe) --------------------------------------------------------------- */

struct lv_gen_live {
    pthread_mutex_t lock;
    char **lines;        /* pushed, not yet taken */
    int n, cap;
    int pushed;          /* lines pushed in all */
    bool ended;          /* no more lines will come (lv_gen_live_end) */
    bool end_reported;   /* the run said so */
    char why[512];       /* why the input ended ("" : its end) */
};

lv_status lv_gen_live_create(lv_gen_live **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_gen_live_create: out is NULL");
    *out = NULL;
    lv_gen_live *l = calloc(1, sizeof *l);
    if (!l) return lv_error(LV_ERR_NOMEM, "out of host memory");
    if (pthread_mutex_init(&l->lock, NULL) != 0) {
        free(l);
        return lv_error(LV_ERR_NOMEM, "lv_gen_live_create: no mutex");
    }
    *out = l;
    return LV_OK;
}

lv_status lv_generate_push_prompt(lv_gen_live *live, const char *line) {
    if (!live || !line) return lv_error(LV_ERR_INVALID, "lv_generate_push_prompt: %s is NULL", live ? "line" : "live");
    size_t len = strlen(line);
    if (len > LV_GEN_LIVE_MAX_LINE)
        return lv_error(LV_ERR_INVALID, "lv_generate_push_prompt: a line of %zu bytes (at most %d)", len,
                        LV_GEN_LIVE_MAX_LINE);
    char *copy = malloc(len + 1);
    if (!copy) return lv_error(LV_ERR_NOMEM, "out of host memory");
    memcpy(copy, line, len + 1);
    lv_status s = LV_OK;
    pthread_mutex_lock(&live->lock);
    if (live->ended) s = LV_ERR_INVALID;
    else if (live->n == live->cap) {
        int cap = live->cap ? 2 * live->cap : 16;
        char **g = cap > 65536 ? NULL : realloc(live->lines, (size_t)cap * sizeof *g);
        if (!g) s = LV_ERR_NOMEM;
        else {
            live->lines = g;
            live->cap = cap;
        }
    }
    if (s == LV_OK) {
        live->lines[live->n++] = copy;
        live->pushed++;
    }
    pthread_mutex_unlock(&live->lock);
    if (s == LV_OK) return LV_OK;
    free(copy);
    return s == LV_ERR_NOMEM ? lv_error(s, "lv_generate_push_prompt: more than 65536 lines waiting, or out of memory")
                             : lv_error(s, "lv_generate_push_prompt: the input was ended (lv_gen_live_end)");
}

void lv_gen_live_end(lv_gen_live *live, const char *why) {
    if (!live) return;
    pthread_mutex_lock(&live->lock);
    if (!live->ended) snprintf(live->why, sizeof live->why, "%s", why ? why : "");
    live->ended = true;
    pthread_mutex_unlock(&live->lock);
}

void lv_gen_live_destroy(lv_gen_live *live) {
    if (!live) return;
    for (int i = 0; i < live->n; i++) free(live->lines[i]);
    free(live->lines);
    pthread_mutex_destroy(&live->lock);
    free(live);
}

/* The lines waiting (malloc'd array of malloc'd lines), and whether the input has just been
 * found ended (once). */
static char **take(lv_gen_live *live, int *n, bool *ended_now, char *why, size_t why_size, int *pushed) {
    pthread_mutex_lock(&live->lock);
    char **lines = live->lines;
    *n = live->n;
    live->lines = NULL;
    live->n = live->cap = 0;
    *ended_now = live->ended && !live->end_reported;
    if (*ended_now) live->end_reported = true;
    snprintf(why, why_size, "%s", live->why);
    *pushed = live->pushed;
    pthread_mutex_unlock(&live->lock);
    return lines;
}

/* ---- lines to switches --------------------------------------------------------------------- */

static void say(void (*warn)(void *, const char *), void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(void (*warn)(void *, const char *), void *user, const char *fmt, ...) {
    if (!warn) return;
    char buf[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    warn(user, buf);
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

/* First frame of shown block k, and the shown block holding frame f (k = chunks past the end). */
static int64_t block_start(const gen_run *r, int k) {
    int64_t f = 0;
    for (int i = 0; i < k && i < r->chunks; i++) f += lv_generate_chunk_frames(r->units, r->o.block_frames, i);
    return f;
}

static int block_of(const gen_run *r, int64_t f) {
    int64_t at = 0;
    for (int k = 0; k < r->chunks; k++) {
        at += lv_generate_chunk_frames(r->units, r->o.block_frames, k);
        if (f < at) return k;
    }
    return r->chunks;
}

/* The rows of one more text (prompt, negative) at index r->ntexts, through the model's word
 * tables (kept open for the run: the default model's text path is a table lookup). */
static lv_status encode_text(gen_run *r, const char *prompt, const char *negative,
                             void (*warn)(void *, const char *), void *user, int *index) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    const size_t rows = (size_t)2 * L * cap;
    if (!r->live_text) {
        lv_word_vocab vocab = lv_model_card_vocab(&r->m.card);
        LV_TRY(lv_text_encoder_open_words(&r->m.text, &vocab, &r->live_text));
    }
    float *y = realloc(r->texts_y, (size_t)(r->ntexts + 1) * rows * sizeof(float));
    if (!y) return lv_error(LV_ERR_NOMEM, "out of host memory");
    r->texts_y = y;
    float *m = realloc(r->texts_mask, (size_t)(r->ntexts + 1) * 2 * L * sizeof(float));
    if (!m) return lv_error(LV_ERR_NOMEM, "out of host memory");
    r->texts_mask = m;
    lv_status s = lv_text_encoder_set_prompts(r->live_text, prompt, r->uncond, negative, warn, user);
    if (s == LV_OK)
        s = lv_text_encoder_encode(r->live_text, NULL, r->texts_y + (size_t)r->ntexts * rows,
                                   r->texts_mask + (size_t)r->ntexts * 2 * L, NULL);
    if (s != LV_OK) return s;
    *index = r->ntexts++;
    return LV_OK;
}

/* A switch at shown block `block` (>= 1), kept in r->sw in block order; one already due at
 * that block is replaced (*replaced receives its prompt's copy to report, or NULL). */
static lv_status add_switch(gen_run *r, int64_t asked, int block, int64_t transition, const char *prompt,
                            const char *negative, void (*warn)(void *, const char *), void *user, bool *replaced) {
    *replaced = false;
    if (r->nsw >= 4096 + 4096) return lv_error(LV_ERR_INVALID, "more than 8192 switches in one run");
    int text = -1;
    LV_TRY(encode_text(r, prompt, negative, warn, user, &text));
    char *p = strdup(prompt), *n = strdup(negative);
    gen_switch *g = p && n ? realloc(r->sw, (size_t)(r->nsw + 1) * sizeof *g) : NULL;
    if (!g) {
        free(p);
        free(n);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    r->sw = g;
    int at = 0;
    while (at < r->nsw && r->sw[at].block < block) at++;
    gen_switch w = {.asked = asked, .frame = block_start(r, block), .block = block, .transition = transition,
                    .text = text, .prompt = p, .negative = n, .own_prompt = p, .own_negative = n, .live = true};
    if (at < r->nsw && r->sw[at].block == block) {
        free(r->sw[at].own_prompt);
        free(r->sw[at].own_negative);
        *replaced = true;
    } else {
        memmove(r->sw + at + 1, r->sw + at, (size_t)(r->nsw - at) * sizeof *r->sw);
        r->nsw++;
    }
    r->sw[at] = w;
    return LV_OK;
}

/* One line pushed before shown block k (the next not yet started; r->chunks after the last). */
static void apply_line(gen_run *r, char *line, int k, int number, void (*warn)(void *, const char *), void *user) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *l = trim(line);
    if (!*l) return; /* empty lines and comments: ignored */
    char name[64];
    snprintf(name, sizeof name, "--prompts-from line %d", number);
    if (k >= r->chunks) {
        say(warn, user, "%s arrived after the last block had started: not applied: %.200s", name, l);
        return;
    }
    const int first = k < 1 ? 1 : k; /* block 0 holds the first prompt (the burn-in's too) */
    int64_t start = block_start(r, first), asked = start;
    if (*l == '+' || *l == '@') { /* "+SECONDS PROMPT" later than now, "@TIME PROMPT" at a time of the video */
        char *sp = l + 1;
        while (*sp && !isspace((unsigned char)*sp)) sp++;
        char tok[64];
        size_t tn = (size_t)(sp - l - 1);
        double sec;
        int64_t f;
        if (tn == 0 || tn >= sizeof tok) {
            say(warn, user, "%s: '%.40s' is not +SECONDS or @TIME before the prompt: not applied", name, l);
            return;
        }
        memcpy(tok, l + 1, tn);
        tok[tn] = '\0';
        if (!lv_gen_parse_time(tok, &sec, &f)) {
            say(warn, user, "%s: '%c%s' is not seconds (12.5), mm:ss (1:05.5) or frames (80f): not applied", name, *l,
                tok);
            return;
        }
        if (f < 0) f = sec * r->o.fps > 1e12 ? INT64_MAX / 2 : (int64_t)floor(sec * r->o.fps + 1e-6);
        asked = *l == '+' ? start + f : f;
        l = trim(sp);
        if (!*l) {
            say(warn, user, "%s: no prompt after the time: not applied", name);
            return;
        }
    }
    /* PROMPT [| NEGATIVE [| TRANSITION]], as a schedule file's fields after the time */
    char *field[3] = {l, NULL, NULL};
    for (int i = 0; i < 2 && field[i]; i++) {
        char *bar = strchr(field[i], '|');
        if (bar) {
            *bar = '\0';
            field[i + 1] = bar + 1;
        }
    }
    if (field[2] && strchr(field[2], '|')) {
        say(warn, user, "%s: more than PROMPT | NEGATIVE | TRANSITION: not applied", name);
        return;
    }
    for (int i = 0; i < 3; i++)
        if (field[i]) field[i] = trim(field[i]);
    if (!*field[0]) {
        say(warn, user, "%s: the prompt is empty: not applied", name);
        return;
    }
    int64_t transition = (int64_t)floor(r->o.transition * r->o.fps + 1e-6);
    if (field[2] && *field[2]) {
        double sec;
        int64_t f;
        if (!lv_gen_parse_time(field[2], &sec, &f)) {
            say(warn, user, "%s: the transition '%s' is not seconds or NNf frames: not applied", name, field[2]);
            return;
        }
        transition = f >= 0 ? f : (int64_t)floor(fmin(sec, 3600) * r->o.fps + 1e-6);
    }
    const char *negative = field[1] && *field[1] ? field[1] : r->o.negative_prompt ? r->o.negative_prompt : "";
    int block = block_of(r, asked);
    if (block >= r->chunks) {
        say(warn, user, "%s: frame %lld is past the end of the video (%d frames): not applied: %.200s", name,
            (long long)asked, r->units, field[0]);
        return;
    }
    if (block < first) {
        say(warn, user, "%s: frame %lld is in a block already started: applied from block %d of the video instead",
            name, (long long)asked, first + 1);
        block = first;
    }
    bool replaced;
    lv_status s = add_switch(r, asked, block, transition, field[0], negative, warn, user, &replaced);
    if (s != LV_OK) say(warn, user, "%s: not applied: %s", name, lv_last_error());
    else if (replaced)
        say(warn, user, "%s replaces the prompt due at block %d of the video (one switch a block)", name, block + 1);
}

lv_status lv_gen_live_poll(gen_run *r, int c, void (*warn)(void *, const char *), void *user) {
    if (!r->o.live) return LV_OK;
    int n, pushed;
    bool ended_now;
    char why[512];
    char **lines = take(r->o.live, &n, &ended_now, why, sizeof why, &pushed);
    int k = c - r->o.burn_in_blocks;
    for (int i = 0; i < n; i++) {
        apply_line(r, lines[i], k, pushed - n + i + 1, warn, user);
        free(lines[i]);
    }
    free(lines);
    if (ended_now && k < r->chunks) {
        const gen_switch *last = NULL;
        for (int i = 0; i < r->nsw; i++) last = &r->sw[i];
        say(warn, user, "--prompts-from: %s after %d line%s: the run goes on with the last prompt (\"%.200s\")",
            why[0] ? why : "the input ended", pushed, pushed == 1 ? "" : "s", last ? last->prompt : "");
    }
    return LV_OK;
}

void lv_gen_live_after(gen_run *r, void (*warn)(void *, const char *), void *user) {
    if (r->o.live) (void)lv_gen_live_poll(r, r->o.burn_in_blocks + r->chunks, warn, user);
}

/* ---- the resume file's record ---------------------------------------------------------- */

char *lv_gen_live_record(const gen_run *r, int shown_done) {
    if (!r->o.live) return NULL;
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < r->nsw; i++) {
        const gen_switch *w = &r->sw[i];
        if (!w->live || w->block >= shown_done) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "asked", (double)w->asked);
        cJSON_AddNumberToObject(e, "block", w->block);
        cJSON_AddNumberToObject(e, "transition", (double)w->transition);
        cJSON_AddStringToObject(e, "prompt", w->prompt);
        cJSON_AddStringToObject(e, "negative", w->negative);
        cJSON_AddItemToArray(a, e);
    }
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return s;
}

lv_status lv_gen_live_restore(gen_run *r, const char *record, const char *path) {
    cJSON *a = cJSON_Parse(record);
    lv_status s = cJSON_IsArray(a) ? LV_OK : lv_error(LV_ERR_FORMAT, "%s: its 'live' record is not a list", path);
    const cJSON *e;
    int i = 0;
    if (s == LV_OK) cJSON_ArrayForEach(e, a) {
        i++;
        const cJSON *asked = cJSON_GetObjectItemCaseSensitive(e, "asked"), *block = cJSON_GetObjectItemCaseSensitive(e, "block");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(e, "transition");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "prompt"), *n = cJSON_GetObjectItemCaseSensitive(e, "negative");
        if (!cJSON_IsNumber(asked) || !cJSON_IsNumber(block) || !cJSON_IsNumber(tr) || !cJSON_IsString(p) ||
            !cJSON_IsString(n) || block->valuedouble < 1 || block->valuedouble >= r->chunks || tr->valuedouble < 0 ||
            tr->valuedouble > 1e9 || !*p->valuestring) {
            s = lv_error(LV_ERR_FORMAT, "%s: entry %d of its 'live' record is malformed", path, i);
            break;
        }
        bool replaced;
        s = add_switch(r, (int64_t)asked->valuedouble, block->valueint, (int64_t)tr->valuedouble, p->valuestring,
                       n->valuestring, NULL, NULL, &replaced);
        if (s != LV_OK) lv_error_prefix(s, "%s: switch %d of its 'live' record", path, i);
    }
    cJSON_Delete(a);
    return s;
}
