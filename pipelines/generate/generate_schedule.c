/* A prompt schedule (issue 54): the entries' times to blocks, every distinct prompt's rows
 * encoded once before the DiT, each block's conditioning (a transition interpolates the
 * rows), the switches applied written beside the video. See pipelines/generate/README.md,
 * "A prompt schedule". */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_run.h"

/* ---- the syntax ------------------------------------------------------------------------ */

static int parse_seconds(const char *t, double *out) {
    if (!*t || isspace((unsigned char)*t) || *t == '+' || *t == '-') return 0;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || *end || errno || !isfinite(v) || v < 0) return 0;
    for (const char *p = t; *p; p++) /* no hex, inf or nan spellings */
        if (!isdigit((unsigned char)*p) && *p != '.') return 0;
    *out = v;
    return 1;
}

int lv_gen_parse_time(const char *text, double *seconds, int64_t *frames) {
    if (!text || !*text || !seconds || !frames) return 0;
    *seconds = 0;
    *frames = -1;
    size_t n = strlen(text);
    if (text[n - 1] == 'f') { /* NNf: frames */
        if (n < 2 || n > 12) return 0;
        int64_t v = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            if (!isdigit((unsigned char)text[i])) return 0;
            v = 10 * v + (text[i] - '0');
        }
        *frames = v;
        return 1;
    }
    const char *colon = strchr(text, ':');
    if (colon) { /* mm:ss or mm:ss.s */
        if (colon == text || strchr(colon + 1, ':') || colon - text > 6) return 0;
        int64_t m = 0;
        for (const char *p = text; p < colon; p++) {
            if (!isdigit((unsigned char)*p)) return 0;
            m = 10 * m + (*p - '0');
        }
        double s;
        if (!parse_seconds(colon + 1, &s) || s >= 60 || colon[1] == '.' || !isdigit((unsigned char)colon[2]))
            return 0;
        *seconds = 60.0 * (double)m + s;
        return 1;
    }
    return parse_seconds(text, seconds);
}

/* ---- the file --------------------------------------------------------------------------- */

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

void lv_gen_schedule_free(lv_gen_switch *entries, char *text) {
    if (entries)
        for (int i = 0; entries[i].time; i++) free((char *)entries[i].where);
    free(entries);
    free(text);
}

lv_status lv_gen_schedule_read(const char *path, lv_gen_switch **out, int *count, char **text) {
    if (!path || !out || !count || !text) return lv_error(LV_ERR_INVALID, "lv_gen_schedule_read: a NULL argument");
    *out = NULL;
    *count = 0;
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lv_error(LV_ERR_IO, "--schedule %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t size = 0, cap = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (size + 2 > cap) {
            cap = cap ? 2 * cap : 4096;
            char *b = cap > (1u << 20) ? NULL : realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return lv_error(LV_ERR_INVALID, "--schedule %s: larger than 1 MiB", path);
            }
            buf = b;
        }
        buf[size++] = (char)c;
    }
    fclose(f);
    if (!buf && !(buf = malloc(1))) return lv_error(LV_ERR_NOMEM, "out of host memory");
    buf[size] = '\0';
    if (strlen(buf) != size) {
        free(buf);
        return lv_error(LV_ERR_INVALID, "--schedule %s: a NUL byte (not a text file)", path);
    }
    int lines = 1;
    for (size_t i = 0; i < size; i++) lines += buf[i] == '\n';
    lv_gen_switch *e = calloc((size_t)lines + 1, sizeof *e);
    if (!e) {
        free(buf);
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    }
    int n = 0, line = 0;
    lv_status s = LV_OK;
    for (char *p = buf; p && s == LV_OK;) {
        line++;
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        char *hash = strchr(p, '#');
        if (hash) *hash = '\0';
        char *l = trim(p);
        p = nl ? nl + 1 : NULL;
        if (!*l) continue;
        char *field[5] = {0};
        int nf = 0;
        for (char *q = l; q && nf < 5;) {
            char *bar = strchr(q, '|');
            if (bar) *bar = '\0';
            field[nf++] = trim(q);
            q = bar ? bar + 1 : NULL;
        }
        char where[600];
        snprintf(where, sizeof where, "%s line %d", path, line);
        if (nf < 2 || nf > 4)
            s = lv_error(LV_ERR_INVALID, "%s: '%s' is not TIME | PROMPT [| NEGATIVE [| TRANSITION]]", where, l);
        else if (!(e[n].where = strdup(where)))
            s = lv_error(LV_ERR_NOMEM, "out of host memory");
        else {
            e[n].time = field[0];
            e[n].prompt = field[1];
            e[n].negative_prompt = nf > 2 && *field[2] ? field[2] : NULL;
            e[n].transition = nf > 3 && *field[3] ? field[3] : NULL;
            n++;
        }
    }
    if (s == LV_OK && n == 0) s = lv_error(LV_ERR_INVALID, "--schedule %s: no entry (TIME | PROMPT a line)", path);
    if (s != LV_OK) {
        lv_gen_schedule_free(e, buf);
        return s;
    }
    *out = e;
    *count = n;
    *text = buf;
    return LV_OK;
}

/* ---- the run ----------------------------------------------------------------------------- */

/* First frame of shown chunk k. */
static int64_t block_start(const gen_run *r, int k) {
    int64_t f = 0;
    for (int i = 0; i < k; i++) f += lv_generate_chunk_frames(r->units, r->o.block_frames, i);
    return f;
}

/* A schedule's times and transitions count the video's frames. A latent model's latent frame
 * u shows pixel frames 4u - 3 .. 4u (frame 0 alone, the VAE's causal first frame): its
 * frame f is in latent frame (f + 3) / 4, and a block's video starts at 4u - 3. */
static int64_t video_frame_of_unit(const gen_run *r, int64_t u) { return r->m.card.pixel || u == 0 ? u : 4 * u - 3; }
static int64_t unit_of_video_frame(const gen_run *r, int64_t f) { return r->m.card.pixel || f == 0 ? f : (f + 3) / 4; }

/* The video frames of shown chunk k: its first, and how many. */
static int64_t block_first_frame(const gen_run *r, int k) { return video_frame_of_unit(r, block_start(r, k)); }
static int64_t block_video_frames(const gen_run *r, int k) {
    return video_frame_of_unit(r, block_start(r, k) + lv_generate_chunk_frames(r->units, r->o.block_frames, k)) -
           block_first_frame(r, k);
}

/* The shown chunk holding model frame f (a latent model's latent frame). */
static int block_of(const gen_run *r, int64_t f) {
    int64_t at = 0;
    for (int k = 0; k < r->chunks; k++) {
        int n = lv_generate_chunk_frames(r->units, r->o.block_frames, k);
        if (f < at + n) return k;
        at += n;
    }
    return r->chunks - 1;
}

static const char *entry_name(const lv_gen_switch *e, int i, char *buf, size_t size) {
    if (e->where) snprintf(buf, size, "schedule entry %d (%s)", i + 1, e->where);
    else snprintf(buf, size, "schedule entry %d (at %s)", i + 1, e->time ? e->time : "0");
    return buf;
}

static lv_status to_frame(const gen_run *r, const char *text, const char *what, const char *name, int64_t *frame) {
    double sec;
    int64_t f;
    if (!lv_gen_parse_time(text, &sec, &f))
        return lv_error(LV_ERR_INVALID, "%s: %s '%s' is not seconds (12.5), mm:ss (1:05.5) or frames (80f)%s", name,
                        what, text, text[0] == '-' ? ": it is negative" : "");
    if (f < 0) {
        double v = sec * r->o.fps;
        if (v > 1e12) return lv_error(LV_ERR_INVALID, "%s: %s '%s' is past the end", name, what, text);
        f = (int64_t)floor(v + 1e-6); /* the frame showing that moment */
    }
    *frame = f;
    return LV_OK;
}

lv_status lv_gen_resolve_schedule(gen_run *r) {
    const lv_generate_options *o = &r->o;
    int count = o->schedule ? o->schedule_count : 0;
    r->entries = o->schedule;
    if (count <= 0 && o->live) { /* prompts pushed during the run: -p is entry 0 */
        r->live_first = (lv_gen_switch){.time = "0", .prompt = o->prompt, .negative_prompt = o->negative_prompt,
                                        .where = "-p"};
        r->entries = &r->live_first;
        count = 1;
    }
    if (count <= 0) return LV_OK;
    const char *flags = !o->live ? "--prompt-at / --schedule" : o->schedule ? "--prompt-at / --schedule / --prompts-from"
                                                                             : "--prompts-from";
    const char *why = NULL;
    if (o->on_switch != LV_GEN_SWITCH_KEEP && o->on_switch != LV_GEN_SWITCH_RECACHE)
        why = "on_switch must be keep or recache";
    else if (o->on_switch == LV_GEN_SWITCH_RECACHE && o->cached_blocks < 0)
        why = "--on-switch recache re-makes a window of blocks: not with --cached-blocks all (every block is summed)";
    else if (o->sampler != LV_GEN_LONGSANA) why = "a schedule needs block-wise generation (the LongSANA sampler)";
    else if (o->live && (o->sp_bands > 0 || o->sp_comm || o->cfg_partner))
        why = "not with --sp-emulate, --sequence-parallel or --cfg-parallel: one process reads the prompts and makes "
              "the video";
    else if (o->on_switch == LV_GEN_SWITCH_RECACHE && o->cfg_partner)
        why = "--on-switch recache: not with --cfg-parallel (keep is; or --sequence-parallel alone)";
    else if (o->text_embeds_path || (!r->use_encoder && !(r->m.card.pixel && r->m.card.vocab_size)))
        why = "a schedule's prompts go through the model's text encoder (its word tables, or Gemma-2 for a latent "
              "model): --text-embeds holds the rows of one prompt, not a schedule's (give --text-encoder or the "
              "pipeline folder instead)";
    else if (o->live && r->use_encoder)
        why = "prompts typed during the run need the default model's word tables: Gemma-2 is freed before the DiT "
              "is uploaded (give the prompts as a schedule: --prompt-at / --schedule)";
    else if (!(o->transition >= 0) || o->transition > 3600) why = "--transition must be 0 to 3600 seconds";
    if (why) return lv_error(LV_ERR_INVALID, "%s: %s", flags, why);
    if (count > 4096) return lv_error(LV_ERR_INVALID, "a schedule of %d entries: at most 4096", count);
    r->sw = calloc((size_t)count, sizeof *r->sw);
    if (!r->sw) return lv_error(LV_ERR_NOMEM, "out of host memory");
    r->nsw = count;
    const int64_t end = video_frame_of_unit(r, r->units); /* the video's frames */
    for (int i = 0; i < r->nsw; i++) {
        const lv_gen_switch *e = &r->entries[i];
        gen_switch *w = &r->sw[i];
        char name[700];
        entry_name(e, i, name, sizeof name);
        if (!e->prompt || !e->prompt[0]) return lv_error(LV_ERR_INVALID, "%s: the prompt is empty", name);
        LV_TRY(to_frame(r, e->time ? e->time : "0", "the time", name, &w->asked));
        if (i == 0 && w->asked != 0)
            return lv_error(LV_ERR_INVALID, "%s: the first entry must be at time 0 (or give -p for the start)", name);
        if (w->asked >= end)
            return lv_error(LV_ERR_INVALID, "%s: time %s is past the end (the video is %lld frames, %g s)", name,
                            e->time, (long long)end, (double)end / o->fps);
        w->transition = (int64_t)floor(o->transition * o->fps + 1e-6);
        if (e->transition) LV_TRY(to_frame(r, e->transition, "the transition", name, &w->transition));
        w->block = block_of(r, unit_of_video_frame(r, w->asked));
        w->frame = block_first_frame(r, w->block);
        w->prompt = e->prompt;
        w->negative = e->negative_prompt ? e->negative_prompt : o->negative_prompt ? o->negative_prompt : "";
        if (i > 0) {
            const gen_switch *p = &r->sw[i - 1];
            char pname[700];
            entry_name(&r->entries[i - 1], i - 1, pname, sizeof pname);
            if (w->asked == p->asked)
                return lv_error(LV_ERR_INVALID, "%s: time %s is duplicated (%s has it too)", name, e->time, pname);
            if (w->asked < p->asked)
                return lv_error(LV_ERR_INVALID, "%s: time %s is out of order (before %s's %s): entries go in time order",
                                name, e->time, pname, r->entries[i - 1].time ? r->entries[i - 1].time : "0");
            if (w->block == p->block)
                return lv_error(LV_ERR_INVALID, "%s: time %s falls in block %d (frames %lld-%lld) with %s: one switch "
                                "a block", name, e->time, w->block + 1, (long long)w->frame,
                                (long long)(w->frame + block_video_frames(r, w->block) - 1),
                                pname);
        }
        w->text = i; /* distinct texts are found in lv_gen_schedule_texts */
    }
    if (o->on_switch == LV_GEN_SWITCH_RECACHE && o->cached_blocks > 0) {
        const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
        r->hist_slots = o->cached_blocks + 1;
        r->hist_stride = LV_GEN_HIST_HEAD + (int64_t)cfg->in_channels * 2 * o->block_frames * r->grid_h * r->grid_w;
        if (!(r->hist = malloc((size_t)r->hist_slots * (size_t)r->hist_stride * sizeof(float))))
            return lv_error(LV_ERR_NOMEM, "out of host memory for --on-switch recache's %d blocks", r->hist_slots);
        for (int j = 0; j < r->hist_slots; j++) r->hist[(size_t)j * r->hist_stride] = -1;
    }
    return LV_OK;
}

void lv_gen_schedule_keep_block(gen_run *r, int c, int position, int n) {
    if (!r->hist) return;
    const lv_sana_config *cfg = lv_sana_file_config(r->m.file);
    float *h = r->hist + (size_t)(c % r->hist_slots) * r->hist_stride;
    h[0] = (float)c;
    h[1] = (float)n;
    h[2] = (float)position;
    memcpy(h + LV_GEN_HIST_HEAD, r->x0, (size_t)cfg->in_channels * n * r->grid_h * r->grid_w * sizeof(float));
}

/* Before chunk c, the conditioning of its switch set: the write passes of the last m
 * finished blocks again, m = min(c, K + 1). With m = c the state is made again from nothing
 * (the chain of conv caches exactly as the first time); otherwise the state is reloaded as
 * after c - m blocks, so that each re-committed block takes its own slot of the window
 * (slot j mod K), and the first of them only primes the conv cache for the next: its terms
 * leave the window again with block c - 1. */
lv_status lv_gen_schedule_recache(gen_run *r, int c) {
    if (!r->hist || c <= 0 || !lv_dit_carries_state(r->dit)) return LV_OK;
    const int K = r->o.cached_blocks, m = c < K + 1 ? c : K + 1;
    for (int j = c - m; j < c; j++)
        if ((int)r->hist[(size_t)(j % r->hist_slots) * r->hist_stride] != j)
            return lv_error(LV_ERR_INVALID, "--on-switch recache before block %d: block %d is not kept", c + 1, j + 1);
    if (m == c) LV_TRY(lv_dit_reset(r->ctx, r->dit));
    else {
        float *state = NULL;
        int64_t count = 0;
        lv_status s = lv_dit_state_save(r->ctx, r->dit, &state, &count);
        if (s == LV_OK) s = lv_dit_state_load(r->ctx, r->dit, state, count, c - m, lv_gen_frame_tokens(r));
        free(state);
        LV_TRY(s);
    }
    float *ts = calloc((size_t)2 * r->o.block_frames, sizeof *ts); /* t = 0: the clean block */
    if (!ts) return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_status s = LV_OK;
    for (int j = c - m; s == LV_OK && j < c; j++) {
        const float *h = r->hist + (size_t)(j % r->hist_slots) * r->hist_stride;
        lv_dit_pass pass = {.x = h + LV_GEN_HIST_HEAD, .frames = (int)h[1], .height = r->grid_h, .width = r->grid_w,
                            .timesteps = ts, .frame_offset = (int)h[2], .text_slot = 0, .commit = true};
        s = lv_dit_forward(r->ctx, r->dit, &pass, NULL);
        if (s != LV_OK) lv_error_prefix(s, "--on-switch recache before block %d, block %d's write pass", c + 1, j + 1);
    }
    free(ts);
    LV_TRY(s);
    if (lv_dit_chunks(r->dit) != c)
        return lv_error(LV_ERR_INVALID, "--on-switch recache: %lld blocks committed, %d expected",
                        (long long)lv_dit_chunks(r->dit), c);
    if (r->twin) LV_TRY(lv_gen_twin_copy_state(r, c));
    return LV_OK;
}

typedef struct entry_warn {
    void (*warn)(void *, const char *);
    void *user;
    const char *name;
} entry_warn;

static void warn_entry(void *user, const char *message) {
    const entry_warn *w = user;
    char buf[2400];
    snprintf(buf, sizeof buf, "%s: %s", w->name, message);
    w->warn(w->user, buf);
}

/* Every distinct (prompt, negative prompt) of the schedule: w->text, and r->ntexts. The
 * same on every process (the options are). */
static void distinct_texts(gen_run *r) {
    r->ntexts = 0;
    for (int i = 0; i < r->nsw; i++) {
        gen_switch *w = &r->sw[i];
        w->text = -1;
        for (int j = 0; j < i && w->text < 0; j++)
            if (!strcmp(r->sw[j].prompt, w->prompt) && (!r->uncond || !strcmp(r->sw[j].negative, w->negative)))
                w->text = r->sw[j].text;
        if (w->text < 0) w->text = r->ntexts++;
    }
}

/* The first entry with text t. */
static int entry_of_text(const gen_run *r, int t) {
    int i = 0;
    while (i + 1 < r->nsw && r->sw[i].text != t) i++;
    return i;
}

/* Gemma-2's negative prompt: an entry without one (empty) gets the encoder's default, SANA-Video's. */
static const char *encoder_negative(const gen_run *r, const gen_switch *w) {
    return r->use_encoder && !*w->negative ? NULL : w->negative;
}

/* Host bytes of the rows kept for the run: every distinct text's. */
uint64_t lv_gen_schedule_rows_bytes(const gen_run *r) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels;
    return (uint64_t)r->ntexts * 2 * r->text_len * ((uint64_t)cap + 1) * sizeof(float);
}

/* Entry 0's rows are the run's (r->y, r->mask: what the DiT is first given). */
static void first_rows(gen_run *r) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    memcpy(r->y, r->texts_y + (size_t)r->sw[0].text * 2 * L * cap, (size_t)2 * L * cap * sizeof(float));
    memcpy(r->mask, r->texts_mask + (size_t)r->sw[0].text * 2 * L, (size_t)2 * L * sizeof(float));
    r->cond_switch = 0;
    r->cond_alpha = 1;
}

/* Every distinct (prompt, negative prompt), once: through the word tables into r->texts now;
 * for Gemma-2 tokenized now (a bad text fails before any device work, and what the model
 * will not read is said, naming the entry), the longest left set in r->text for the memory
 * plan, and encoded once the device is up (lv_gen_schedule_encode), by the writing process
 * alone. */
lv_status lv_gen_schedule_texts(gen_run *r, void (*warn)(void *, const char *), void *user) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    const size_t rows = (size_t)2 * L * cap;
    distinct_texts(r);
    /* the distinct texts only: a SANA-Video prompt's rows are 5.3 MiB (prompts pushed during
     * the run grow them, generate_live.c) */
    if (!(r->texts_y = calloc((size_t)r->ntexts * rows, sizeof(float))) ||
        !(r->texts_mask = calloc((size_t)r->ntexts * 2 * L, sizeof(float))))
        return lv_error(LV_ERR_NOMEM, "out of host memory");
    lv_text_encoder *te = r->text;
    if (!r->use_encoder) {
        lv_word_vocab vocab = lv_model_card_vocab(&r->m.card);
        LV_TRY(lv_text_encoder_open_words(&r->m.text, &vocab, &te));
    } else if (!te) { /* Gemma-2 runs on the writing process: the others receive the rows (lv_gen_share_text) */
        r->cond_switch = 0;
        r->cond_alpha = 1;
        return LV_OK;
    }
    lv_status s = LV_OK;
    int longest = 0;
    uint64_t most = 0;
    for (int t = 0; s == LV_OK && t < r->ntexts; t++) {
        int i = entry_of_text(r, t);
        const gen_switch *w = &r->sw[i];
        /* the entry's warnings name it */
        char name[700];
        entry_name(&r->entries[i], i, name, sizeof name);
        entry_warn ew = {warn, user, name};
        s = lv_text_encoder_set_prompts(te, w->prompt, r->uncond, encoder_negative(r, w), warn ? warn_entry : NULL,
                                        &ew);
        /* the text whose pass needs the most (its longest sequence, prompt or negative) */
        if (s == LV_OK && r->use_encoder && lv_text_encoder_memory_plan(te, 1) > most)
            most = lv_text_encoder_memory_plan(te, 1), longest = t;
        if (s == LV_OK && !r->use_encoder)
            s = lv_text_encoder_encode(te, NULL, r->texts_y + (size_t)t * rows, r->texts_mask + (size_t)t * 2 * L, NULL);
        if (s != LV_OK) lv_error_prefix(s, "%s", name);
    }
    if (!r->use_encoder) {
        lv_text_encoder_close(te);
        LV_TRY(s);
        first_rows(r);
        return LV_OK;
    }
    LV_TRY(s);
    const gen_switch *w = &r->sw[entry_of_text(r, longest)]; /* the memory plan sizes Gemma-2's work for it */
    return lv_text_encoder_set_prompts(te, w->prompt, r->uncond, encoder_negative(r, w), NULL, NULL);
}

/* Gemma-2 over every distinct text, uploaded once (lv_text_encoder_hold) on ctx: the rows
 * into r->texts, entry 0's into r->y; *peak the most it held. */
lv_status lv_gen_schedule_encode(gen_run *r, lv_ctx *ctx, uint64_t *peak) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    const size_t rows = (size_t)2 * L * cap;
    lv_text_encoder *te = r->text;
    lv_text_encoder_hold(te);
    lv_status s = LV_OK;
    for (int t = 0; s == LV_OK && t < r->ntexts; t++) {
        const gen_switch *w = &r->sw[entry_of_text(r, t)];
        s = lv_text_encoder_set_prompts(te, w->prompt, r->uncond, encoder_negative(r, w), NULL, NULL);
        if (s == LV_OK)
            s = lv_text_encoder_encode(te, ctx, r->texts_y + (size_t)t * rows, r->texts_mask + (size_t)t * 2 * L, peak);
        if (s != LV_OK && s != LV_ERR_INTERRUPTED) {
            char name[700];
            int i = entry_of_text(r, t);
            lv_error_prefix(s, "%s", entry_name(&r->entries[i], i, name, sizeof name));
        }
    }
    lv_text_encoder_release(te);
    LV_TRY(s);
    first_rows(r);
    return LV_OK;
}

/* The switch in force at shown chunk k (-1: before any, the burn-in) and how far its
 * transition is: the fraction of it done at the block's middle frame, 1 once done. */
static int switch_at(const gen_run *r, int k, double *alpha) {
    *alpha = 1;
    if (k < 0) return 0;
    int i = 0;
    while (i + 1 < r->nsw && r->sw[i + 1].block <= k) i++;
    const gen_switch *w = &r->sw[i];
    if (i > 0 && w->transition > 0) {
        double mid = (double)block_first_frame(r, k) + 0.5 * (double)block_video_frames(r, k);
        double a = (mid - (double)w->frame) / (double)w->transition;
        *alpha = a >= 1 ? 1 : a;
    }
    return i;
}

/* The rows (and masks) a block reads at fraction a of entry i's transition, into y and mask:
 * y = (1 - a) y_before + a y_i, where y_before is what the block before the switch read. That
 * is entry i-1's own rows once its transition has ended; when switches come closer than a
 * transition, it is itself a mixture, made the same way, so the new transition starts from the
 * conditioning in force instead of jumping back to entry i-1's own rows. The masks of every text
 * that contributes are united. Recursion: one level per switch still inside the transition
 * before it. */
static void transition_rows(const gen_run *r, int i, double a, float *y, float *mask) {
    const int cap = lv_sana_file_config(r->m.file)->caption_channels, L = r->text_len;
    const size_t rows = (size_t)2 * L * cap;
    const float *to = r->texts_y + (size_t)r->sw[i].text * rows, *tm = r->texts_mask + (size_t)r->sw[i].text * 2 * L;
    if (a >= 1) { /* the entry's own rows, bit for bit */
        memcpy(y, to, rows * sizeof(float));
        memcpy(mask, tm, (size_t)2 * L * sizeof(float));
        return;
    }
    double before_a;
    int before = switch_at(r, r->sw[i].block - 1, &before_a); /* a switch is never at block 0 */
    transition_rows(r, before, before_a, y, mask);
    float fa = (float)a;
    for (size_t j = 0; j < rows; j++) y[j] = (1.0f - fa) * y[j] + fa * to[j];
    for (int j = 0; j < 2 * L; j++) mask[j] = mask[j] > tm[j] ? mask[j] : tm[j];
}

/* Before chunk c (burn-in included): the DiT's texts for that block, set when they change;
 * *started receives the switch that begins at this block (-1: none). */
lv_status lv_gen_schedule_block(gen_run *r, int c, int *started) {
    *started = -1;
    if (!r->nsw) return LV_OK;
    int k = c - r->o.burn_in_blocks;
    double a;
    int i = switch_at(r, k, &a);
    if (k >= 0 && i > 0 && r->sw[i].block == k) *started = i;
    if (i == r->cond_switch && a == r->cond_alpha) return LV_OK;
    transition_rows(r, i, a, r->y, r->mask);
    LV_TRY(lv_gen_set_texts(r, r->ctx, r->dit));
    if (r->twin) LV_TRY(lv_gen_set_texts(r, lv_dit_twin_ctx(r->twin), lv_dit_twin_dit(r->twin)));
    r->cond_switch = i;
    r->cond_alpha = a;
    return LV_OK;
}

/* Fills a progress report's switch fields for switch i. */
void lv_gen_schedule_report(const gen_run *r, int i, lv_generate_progress *p) {
    const gen_switch *w = &r->sw[i];
    p->switch_index = i;
    p->switches = r->nsw - 1;
    p->switch_block = r->o.burn_in_blocks + w->block + 1;
    p->switch_frame = w->frame;
    p->switch_frame_asked = w->asked;
    p->switch_transition_frames = w->transition;
    p->switch_seconds = (double)w->frame / r->o.fps;
    p->switch_prompt = w->prompt;
}

static void put_field(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '|' || *s == '#' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

/* OUTPUT.schedule: the switches applied (at shown blocks < shown_blocks), block-exact, in the
 * schedule format. */
lv_status lv_gen_schedule_write(const gen_run *r, int shown_blocks) {
    if (!r->nsw || !r->root) return LV_OK;
    char path[4200];
    if (r->o.schedule_out) snprintf(path, sizeof path, "%s", r->o.schedule_out);
    else if (!r->o.output) return LV_OK;
    else if (snprintf(path, sizeof path, "%s.schedule", r->o.output) >= (int)sizeof path)
        return lv_error(LV_ERR_INVALID, "output path too long: %s", r->o.output);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return lv_error(LV_ERR_IO, "writing %s: %s", tmp, strerror(errno));
    fprintf(f, "# longvk schedule: the switches applied to %s (seed %llu, %g fps, %d frames, blocks of %d frames,\n"
               "# %d burn-in blocks); times are the first frame of the block that applied each entry.\n"
               "# TIME | PROMPT | NEGATIVE PROMPT | TRANSITION\n",
            r->o.output ? r->o.output : "frames", (unsigned long long)r->o.seed, r->o.fps, r->units,
            r->o.block_frames, r->o.burn_in_blocks);
    for (int i = 0; i < r->nsw; i++) {
        const gen_switch *w = &r->sw[i];
        if (w->block >= shown_blocks) break; /* pushed during the run, not yet applied */
        fprintf(f, "# entry %d: block %d of the video (%d with the burn-in), frame %lld = %.3f s (asked: frame %lld)\n",
                i + 1, w->block + 1, r->o.burn_in_blocks + w->block + 1, (long long)w->frame,
                (double)w->frame / r->o.fps, (long long)w->asked);
        fprintf(f, "%lldf | ", (long long)w->frame);
        put_field(f, w->prompt);
        fputs(" | ", f);
        put_field(f, w->negative);
        fprintf(f, " | %lldf\n", (long long)w->transition);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return lv_error(LV_ERR_IO, "writing %s failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return lv_error(LV_ERR_IO, "renaming %s to %s: %s", tmp, path, strerror(errno));
    }
    return LV_OK;
}

/* The schedule as the resume file records it: one line an entry, block-exact. NULL when
 * there is none; malloc'd. */
char *lv_gen_schedule_identity(const lv_generate_options *o) {
    if (!o->schedule || o->schedule_count <= 0) return NULL;
    size_t size = 64;
    for (int i = 0; i < o->schedule_count; i++) {
        const lv_gen_switch *e = &o->schedule[i];
        size += 16 + strlen(e->time ? e->time : "0") + strlen(e->prompt ? e->prompt : "") +
                strlen(e->negative_prompt ? e->negative_prompt : "") + strlen(e->transition ? e->transition : "-");
    }
    char *s = malloc(size), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "transition %.17g; on_switch %d", o->transition, o->on_switch);
    for (int i = 0; i < o->schedule_count; i++) {
        const lv_gen_switch *e = &o->schedule[i];
        p += sprintf(p, "\n%s | %s | %s | %s", e->time ? e->time : "0", e->prompt ? e->prompt : "",
                     e->negative_prompt ? e->negative_prompt : "", e->transition ? e->transition : "-");
    }
    return s;
}
