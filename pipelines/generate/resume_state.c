/* The resume file of `longvk generate`: after every block, the whole carried state of the
 * DiT (every layer's linear-attention state, the window ring included, and the temporal
 * conv's cached frame), the last frame made (warm-started blocks start from it) and the
 * position in the run, as a safetensors file written
 * atomically. Noise is counter-based (lv_noise_fill), so no generator state is needed. A
 * latent model's run adds its VAE decoder's place: the latent frames it last decoded, which
 * --resume decodes again to put back its causal history (generate_vae_history.c).
 *
 * The metadata "checksum" ("crc32:" and 8 hex digits, zlib's CRC-32) covers everything the
 * file holds: the "run" and "position" records and both tensors' names, sizes and bytes.
 * A file whose contents do not match it (a flipped bit, an edit) is refused, and so is a file
 * without one (written before the checksum existed, or with it removed): a resume from an
 * unverified state would silently make wrong frames. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "longvk/engine.h"

#include "generate_internal.h"
#include "longvk/weights.h"

/* The settings a resumed run must share with the interrupted one. */
static cJSON *run_identity(const lv_generate_options *o, const lv_gen_model *m, const char *input) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", m->name);
    cJSON_AddNumberToObject(j, "model_parameters", (double)lv_sana_file_param_count(m->file));
    cJSON_AddStringToObject(j, "prompt", o->prompt ? o->prompt : "");
    cJSON_AddStringToObject(j, "negative_prompt", o->negative_prompt ? o->negative_prompt : "");
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(j, "seed", seed);
    cJSON_AddNumberToObject(j, "frames", o->frames);
    cJSON_AddNumberToObject(j, "width", o->width);
    cJSON_AddNumberToObject(j, "height", o->height);
    cJSON_AddNumberToObject(j, "scale", o->scale);
    cJSON_AddNumberToObject(j, "fps", o->fps);
    cJSON_AddNumberToObject(j, "steps", o->steps);
    cJSON_AddNumberToObject(j, "cfg_scale", o->cfg_scale);
    cJSON_AddNumberToObject(j, "block_frames", o->block_frames);
    cJSON_AddNumberToObject(j, "cached_blocks", o->cached_blocks);
    cJSON_AddNumberToObject(j, "burn_in_blocks", o->burn_in_blocks);
    /* only with quantized weights (their frames differ): a file of another run reads as before */
    if (o->weights_dtype == LV_DIT_WEIGHTS_Q8_0 || o->weights_dtype == LV_DIT_WEIGHTS_Q4_K)
        cJSON_AddStringToObject(j, "weights_dtype", o->weights_dtype == LV_DIT_WEIGHTS_Q8_0 ? "q8_0" : "q4_K");
    /* only with a schedule: a file of a run without one reads as before */
    char *schedule = lv_gen_schedule_identity(o);
    if (schedule) cJSON_AddStringToObject(j, "schedule", schedule);
    free(schedule);
    /* only with an image, likewise: the file's content, so another picture is another run */
    char *image = lv_gen_image_identity(o);
    if (image) cJSON_AddStringToObject(j, "image", image);
    free(image);
    /* only when continuing a clip: the clip (its CRC-32) and what the output holds */
    if (input && *input) {
        cJSON_AddStringToObject(j, "continue", input);
        cJSON_AddNumberToObject(j, "continue_output", o->continue_output);
    }
    if (o->live) { /* prompts pushed during the run: how they apply (the switches are the "live" record) */
        char how[128];
        snprintf(how, sizeof how, "transition %.17g; on_switch %d", o->transition, o->on_switch);
        cJSON_AddStringToObject(j, "prompts_from", how);
    }
    /* the rest change the frames too (issue 53, item 7), recorded only when not the default,
     * so that a file of an earlier longvk, which had none of them, reads as before */
    lv_precision precision = LV_PRECISION_F32;
    if (lv_precision_resolve(o->precision, &precision) != LV_OK) precision = LV_PRECISION_F32; /* refused earlier */
    static const char *const precisions[] = {"auto", "f32", "f16", "bf16"};
    if (precision != LV_PRECISION_F32) cJSON_AddStringToObject(j, "precision", precisions[precision]);
    /* the float weight dtypes (the quantized ones are recorded above) */
    if (o->weights_dtype > LV_DIT_WEIGHTS_AS_STORED && o->weights_dtype <= LV_DIT_WEIGHTS_BF16)
        cJSON_AddStringToObject(j, "weights_dtype", lv_dit_weights_name((lv_dit_weights)o->weights_dtype));
    /* the text encoder's, likewise (its rows differ): only when not as stored */
    if (o->text_weights_dtype > LV_DIT_WEIGHTS_AS_STORED && o->text_weights_dtype <= LV_DIT_WEIGHTS_Q4_K)
        cJSON_AddStringToObject(j, "text_weights_dtype", lv_dit_weights_name((lv_dit_weights)o->text_weights_dtype));
    /* the rows by their content (the same file moved is the same run, an edited one is not) */
    char *embeds = o->text_embeds_path ? lv_gen_file_identity(o->text_embeds_path) : NULL;
    if (embeds) cJSON_AddStringToObject(j, "text_embeds", embeds);
    free(embeds);
    if (o->encoder.codec) cJSON_AddStringToObject(j, "codec", o->encoder.codec);
    if (o->encoder.crf >= 0) cJSON_AddNumberToObject(j, "crf", o->encoder.crf);
    if (o->encoder.preset) cJSON_AddStringToObject(j, "preset", o->encoder.preset);
    /* a latent model's VAE (the frames are its decode) and its tiles (tiled frames differ near
     * the seams); recorded only for a latent model with a VAE, which had no resume file before */
    if (!m->card.pixel && o->vae_path) {
        cJSON_AddStringToObject(j, "vae", o->vae_path);
        char tiles[64] = "auto";
        if (o->vae_tiles == LV_GEN_VAE_TILES_OFF) snprintf(tiles, sizeof tiles, "off");
        else if (o->vae_tiles == LV_GEN_VAE_TILES_FIXED)
            snprintf(tiles, sizeof tiles, "%dx%d", o->vae_tile_h, o->vae_tile_w);
        cJSON_AddStringToObject(j, "vae_tiles", tiles);
    }
    return j;
}

/* The option of the command line a record of the run identity comes from. */
static const char *option_of(const char *key) {
    static const char *const names[][2] = {
        {"model", "--model"}, {"model_parameters", "--model"}, {"prompt", "--prompt"},
        {"negative_prompt", "--negative-prompt"}, {"seed", "--seed"}, {"frames", "--frames/--seconds"},
        {"width", "--width"}, {"height", "--height"}, {"scale", "--scale"}, {"fps", "--fps"}, {"steps", "--steps"},
        {"cfg_scale", "--cfg-scale"}, {"block_frames", "--block-frames"}, {"cached_blocks", "--cached-blocks"},
        {"burn_in_blocks", "--burn-in-blocks"}, {"schedule", "--prompt-at/--schedule"},
        {"precision", "--precision"}, {"weights_dtype", "--weights-dtype"}, {"text_embeds", "--text-embeds"},
        {"text_weights_dtype", "--text-weights-dtype"},
        {"codec", "--codec"}, {"crf", "--crf"}, {"preset", "--preset"}, {"image", "--image"},
        {"continue", "--continue"}, {"continue_output", "--continue-output"}, {"prompts_from", "--prompts-from"},
        {"vae", "--vae"}, {"vae_tiles", "--vae-tiles"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i][0], key) == 0) return names[i][1];
    return key;
}

/* "--precision was "bf16", now the default": the first record in which the two runs differ
 * (either may lack a record that is recorded only when not the default), or LV_OK. */
static lv_status compare_identity(const char *path, const cJSON *want, const cJSON *got) {
    const cJSON *a[2] = {want, got}, *item;
    for (int side = 0; side < 2; side++) cJSON_ArrayForEach(item, a[side]) {
        const cJSON *other = cJSON_GetObjectItemCaseSensitive(a[1 - side], item->string);
        if (other && cJSON_Compare(item, other, 1)) continue;
        const cJSON *now = side == 0 ? item : other, *was = side == 0 ? other : item;
        char *n = now ? cJSON_PrintUnformatted(now) : NULL, *w = was ? cJSON_PrintUnformatted(was) : NULL;
        lv_status s = lv_error(LV_ERR_INVALID, "%s belongs to another run: %s was %s, now %s (%s: resume with "
                               "the same options, or start over with --overwrite)", path, item->string,
                               w ? w : "not set (the default)", n ? n : "not set (the default)",
                               option_of(item->string));
        free(n);
        free(w);
        return s;
    }
    return LV_OK;
}

/* CRC-32 of `n` bytes, fed in pieces zlib can take (uInt). */
static uLong crc_bytes(uLong crc, const void *data, uint64_t n) {
    const Bytef *p = data;
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return crc;
}

static uLong crc_string(uLong crc, const char *s) { return crc_bytes(crc, s, strlen(s) + 1); /* with its NUL */ }

/* The checksum of a resume file's contents: the records and the tensors, in a fixed order. */
static uint32_t state_checksum(const char *run, const char *position, const char *live,
                               const lv_weight *const tensors[4]) {
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc_string(crc, "longvk resume state 1");
    crc = crc_string(crc, "run");
    crc = crc_string(crc, run);
    crc = crc_string(crc, "position");
    crc = crc_string(crc, position);
    if (live) { /* only with prompts pushed during the run */
        crc = crc_string(crc, "live");
        crc = crc_string(crc, live);
    }
    for (int i = 0; i < 4; i++) { /* recent_blocks only with --on-switch recache, vae_latents with a VAE */
        if (!tensors[i]) continue;
        char size[64];
        snprintf(size, sizeof size, "%" PRIu64, tensors[i]->nbytes);
        crc = crc_string(crc, tensors[i]->name);
        crc = crc_string(crc, size);
        crc = crc_bytes(crc, tensors[i]->data, tensors[i]->nbytes);
    }
    return (uint32_t)crc;
}

lv_status lv_gen_resume_save(const char *path, const lv_generate_options *o, const lv_gen_model *m,
                             const char *input, int chunks_done, int64_t frames_done, const float *state, int64_t state_count,
                             const float *last_frame, int64_t frame_values, const float *recent,
                             int64_t recent_count, const char *live, const lv_gen_vae_state *vae) {
    if (chunks_done != 0 && !state)
        return lv_error(LV_ERR_INVALID, "lv_gen_resume_save: no carried state after %d blocks", chunks_done);
    if (chunks_done == 0) state_count = 0; /* before the first block: nothing carried */
    cJSON *id = run_identity(o, m, input);
    char *run = cJSON_PrintUnformatted(id);
    cJSON_Delete(id);
    char pos[320];
    int len = snprintf(pos, sizeof pos, "{\"chunks_done\": %d, \"frames_done\": %lld", chunks_done,
                       (long long)frames_done);
    if (vae) /* the decoder's place in the video and its tiles */
        len += snprintf(pos + len, sizeof pos - (size_t)len, ", \"vae_fed\": %lld, \"vae_tiles\": [%d, %d, %d]",
                        (long long)vae->fed, vae->tile_h, vae->tile_w, vae->overlap);
    snprintf(pos + len, sizeof pos - (size_t)len, "}");
    lv_weight t[4] = {{.name = "carried_state", .dtype = LV_F32, .ndim = 1, .shape = {state_count},
                       .data = (void *)state, .nbytes = (uint64_t)state_count * 4},
                      {.name = "last_frame", .dtype = LV_F32, .ndim = 1, .shape = {frame_values},
                       .data = (void *)last_frame, .nbytes = (uint64_t)frame_values * 4},
                      {.name = "recent_blocks", .dtype = LV_F32, .ndim = 1, .shape = {recent_count},
                       .data = (void *)recent, .nbytes = (uint64_t)recent_count * 4},
                      {.name = "vae_latents", .dtype = LV_F32, .ndim = 1,
                       .shape = {vae ? vae->kept * frame_values : 0}, .data = vae ? (void *)vae->latents : NULL,
                       .nbytes = vae ? (uint64_t)(vae->kept * frame_values) * 4 : 0}};
    const lv_weight *const tensors[4] = {&t[0], &t[1], recent ? &t[2] : NULL, vae ? &t[3] : NULL};
    char checksum[32];
    snprintf(checksum, sizeof checksum, "crc32:%08" PRIx32, state_checksum(run ? run : "{}", pos, live, tensors));
    const char *meta[8] = {"run", run ? run : "{}", "position", pos, "checksum", checksum, "live", live};
    lv_weight written[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (tensors[i]) written[n++] = *tensors[i];
    lv_status s = run ? lv_safetensors_write(path, written, n, meta, live ? 4 : 3)
                      : lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s != LV_OK) lv_error_prefix(s, "writing the resume file %s", path);
    free(run);
    return s;
}

lv_status lv_gen_resume_read(const char *path, const lv_generate_options *o, const lv_gen_model *m,
                             const char *input, lv_gen_resume *out, float **state, int64_t *state_count, float *last_frame,
                             int64_t frame_values, float *recent, int64_t recent_count, bool vae) {
    *state = NULL;
    *state_count = 0;
    lv_weights *w;
    lv_status s = lv_weights_open(path, &w);
    if (s != LV_OK)
        return lv_error_prefix(s, "--resume needs the state file an interrupted run left (%s)", path);
    const char *run = lv_weights_metadata(w, "run"), *pos = lv_weights_metadata(w, "position");
    const char *checksum = lv_weights_metadata(w, "checksum"), *live = lv_weights_metadata(w, "live");
    out->live = NULL;
    const lv_weight *t = lv_weights_find(w, "carried_state"), *lf = lv_weights_find(w, "last_frame");
    const lv_weight *rb = lv_weights_find(w, "recent_blocks"), *vl = lv_weights_find(w, "vae_latents");
    out->vae = (lv_gen_vae_state){0};
    cJSON *want = run_identity(o, m, input), *got = run ? cJSON_Parse(run) : NULL, *p = pos ? cJSON_Parse(pos) : NULL;
    uint32_t stored = 0, actual = 0;
    char tail = 0;
    if (!run || !pos || !t || !lf) {
        s = lv_error(LV_ERR_FORMAT, "%s is not a longvk resume file", path);
    } else if (!checksum) {
        s = lv_error(LV_ERR_FORMAT,
                     "%s has no checksum: it was written by an earlier longvk (or edited), so its state cannot be "
                     "verified and is not used; run again without --resume to start over",
                     path);
    } else if (sscanf(checksum, "crc32:%8" SCNx32 "%c", &stored, &tail) != 1 || strlen(checksum) != 14) {
        s = lv_error(LV_ERR_FORMAT, "%s: its checksum record '%.40s' is malformed (the file is damaged)", path,
                     checksum);
    } else if ((actual = state_checksum(run, pos, live, (const lv_weight *const[4]){t, lf, rb, vl})) != stored) {
        s = lv_error(LV_ERR_FORMAT,
                     "%s is damaged: its contents do not match its checksum (CRC-32 %08" PRIx32 " stored, %08" PRIx32
                     " computed), so it was changed or corrupted after it was written; run again without --resume "
                     "to start over",
                     path, stored, actual);
    } else if (!got || !p || t->dtype != LV_F32) {
        s = lv_error(LV_ERR_FORMAT, "%s is not a longvk resume file", path);
    } else if (recent && (!rb || rb->dtype != LV_F32 || (int64_t)lv_weight_numel(rb) != recent_count)) {
        s = lv_error(LV_ERR_FORMAT, "%s: 'recent_blocks' (the blocks --on-switch recache makes again) must be float32 "
                     "with %lld values", path, (long long)recent_count);
    } else if (!lf || lf->dtype != LV_F32 || (int64_t)lv_weight_numel(lf) != frame_values) {
        s = lv_error(LV_ERR_FORMAT, "%s: 'last_frame' must be float32 with %lld values (one frame of the model)",
                     path, (long long)frame_values);
    } else {
        if (cJSON_GetObjectItemCaseSensitive(got, "prompts_from") && !cJSON_GetObjectItemCaseSensitive(want, "prompts_from"))
            s = lv_error(LV_ERR_INVALID, "%s belongs to a run steered during it (--prompts-from): resume with "
                         "--prompts-from too (a FIFO, a file, - for stdin, or /dev/null for no more prompts); the "
                         "switches it applied are in the file", path);
        else if (cJSON_GetObjectItemCaseSensitive(got, "schedule") && !cJSON_GetObjectItemCaseSensitive(want, "schedule"))
            s = lv_error(LV_ERR_INVALID, "%s belongs to a run with a prompt schedule (--prompt-at / --schedule): "
                         "resume with the same schedule", path);
        if (s == LV_OK && cJSON_GetObjectItemCaseSensitive(got, "image") && !cJSON_GetObjectItemCaseSensitive(want, "image"))
            s = lv_error(LV_ERR_INVALID, "%s belongs to a run that started from an image (--image): resume with the "
                         "same image", path);
        /* a file of an earlier longvk recorded --text-embeds by its path: the same path reads as before */
        const cJSON *old_embeds = cJSON_GetObjectItemCaseSensitive(got, "text_embeds");
        if (s == LV_OK && cJSON_IsString(old_embeds) && strncmp(old_embeds->valuestring, "crc32:", 6) != 0 &&
            o->text_embeds_path && strcmp(old_embeds->valuestring, o->text_embeds_path) == 0)
            cJSON_ReplaceItemInObjectCaseSensitive(want, "text_embeds", cJSON_Duplicate(old_embeds, 1));
        if (s == LV_OK) s = compare_identity(path, want, got);
    }
    if (s == LV_OK) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "chunks_done");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(p, "frames_done");
        /* chunks_done 0: written as the run started, before its first block */
        if (!cJSON_IsNumber(c) || !cJSON_IsNumber(f) || c->valuedouble < 0 || c->valuedouble > 1e9 ||
            c->valuedouble != (double)(int)c->valuedouble || f->valuedouble < 0 || f->valuedouble > 1e12)
            s = lv_error(LV_ERR_FORMAT, "%s: bad position record", path); /* lv_gen_load_resume checks it exactly */
        else {
            out->chunks_done = c->valueint;
            out->frames_done = (int64_t)f->valuedouble;
        }
    }
    if (s == LV_OK && vae) { /* the VAE decoder's place and the latent frames it decodes again */
        const cJSON *fed = cJSON_GetObjectItemCaseSensitive(p, "vae_fed");
        const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(p, "vae_tiles");
        int tv[3] = {0, 0, 0}, ok = cJSON_IsNumber(fed) && fed->valuedouble >= 0 && fed->valuedouble <= 1e9 &&
                                    cJSON_IsArray(tiles) && cJSON_GetArraySize(tiles) == 3 && vl &&
                                    vl->dtype == LV_F32 && frame_values > 0 &&
                                    lv_weight_numel(vl) % (uint64_t)frame_values == 0;
        for (int i = 0; ok && i < 3; i++) {
            const cJSON *v = cJSON_GetArrayItem(tiles, i);
            ok = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 4096;
            if (ok) tv[i] = v->valueint;
        }
        if (!ok)
            s = lv_error(LV_ERR_FORMAT, "%s: no VAE decoder record (vae_fed, vae_tiles and vae_latents of %lld values "
                         "a latent frame): not the resume file of a latent model's run", path, (long long)frame_values);
        else {
            out->vae = (lv_gen_vae_state){.fed = (int64_t)fed->valuedouble, .tile_h = tv[0], .tile_w = tv[1],
                                          .overlap = tv[2],
                                          .kept = (int64_t)(lv_weight_numel(vl) / (uint64_t)frame_values)};
            const size_t bytes = (size_t)lv_weight_numel(vl) * sizeof(float);
            if (!(out->vae.latents = malloc(bytes ? bytes : 1)))
                s = lv_error(LV_ERR_NOMEM, "out of host memory for the VAE's latent frames of %s", path);
            else memcpy(out->vae.latents, vl->data, bytes);
        }
    }
    /* chunks_done 0: written as the run started, nothing carried yet */
    if (s == LV_OK && out->chunks_done > 0) {
        const int64_t n = (int64_t)lv_weight_numel(t);
        if (!(*state = malloc((size_t)(n ? n : 1) * sizeof **state)))
            s = lv_error(LV_ERR_NOMEM, "out of host memory for the carried state of %s", path);
        else {
            memcpy(*state, t->data, (size_t)n * sizeof **state);
            *state_count = n;
        }
    }
    if (s == LV_OK) memcpy(last_frame, lf->data, (size_t)frame_values * sizeof *last_frame);
    if (s == LV_OK && recent) memcpy(recent, rb->data, (size_t)recent_count * sizeof *recent);
    if (s == LV_OK && live && !(out->live = strdup(live))) s = lv_error(LV_ERR_NOMEM, "out of host memory");
    if (s != LV_OK) {
        free(out->vae.latents);
        out->vae.latents = NULL;
    }
    cJSON_Delete(want);
    cJSON_Delete(got);
    cJSON_Delete(p);
    lv_weights_close(w);
    return s;
}
