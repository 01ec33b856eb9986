/* A diffusers pipeline folder (SanaVideoPipeline as diffusers saves it): model_index.json
 * beside one folder per component. Only the layout is read here; each component is opened
 * by its own loader (the DiT, Gemma-2, the tokenizer, the VAE), which names what is wrong
 * inside it. */
#include <stdio.h>
#include <string.h>

#include "longvk/files.h"
#include "longvk/generate.h"

int lv_is_pipeline_dir(const char *path) {
    char index[4200];
    if (!path || !lv_path_is_dir(path)) return 0;
    snprintf(index, sizeof index, "%s/model_index.json", path);
    return lv_path_is_file(index);
}

/* path into out when it fits, else "". */
static void keep(const char *path, char *out, size_t size) {
    size_t len = strlen(path);
    if (len < size) memcpy(out, path, len + 1);
    else out[0] = 0;
}

/* `dir`/`name` into out when it is a folder, else "". */
static void component(const char *dir, const char *name, char *out, size_t size) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lv_path_is_dir(path)) keep(path, out, size);
    else out[0] = 0;
}

lv_status lv_vae_weights_file(const char *path, char *out, size_t size) {
    if (!path || !out || size == 0) return lv_error(LV_ERR_INVALID, "lv_vae_weights_file: NULL path or out");
    char file[4200];
    if (lv_path_is_dir(path)) snprintf(file, sizeof file, "%s/diffusion_pytorch_model.safetensors", path);
    else snprintf(file, sizeof file, "%s", path);
    if (lv_path_is_dir(path) && !lv_path_is_file(file))
        return lv_error(LV_ERR_IO, "%s: no diffusion_pytorch_model.safetensors (the VAE's weights)", path);
    if (strlen(file) >= size) return lv_error(LV_ERR_INVALID, "%s: path too long", file);
    memcpy(out, file, strlen(file) + 1);
    return LV_OK;
}

lv_status lv_pipeline_dir_open(const char *dir, lv_pipeline_dir *out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_pipeline_dir_open: out is NULL");
    memset(out, 0, sizeof *out);
    if (!lv_is_pipeline_dir(dir))
        return lv_error(LV_ERR_INVALID, "%s: not a diffusers pipeline folder (no model_index.json)", dir ? dir : "(null)");
    if (strlen(dir) > 4000) return lv_error(LV_ERR_INVALID, "%s: path too long", dir);
    /* every component first, so that a caller describing them all gets each path */
    component(dir, "transformer", out->transformer, sizeof out->transformer);
    component(dir, "text_encoder", out->text_encoder, sizeof out->text_encoder);
    component(dir, "tokenizer", out->tokenizer, sizeof out->tokenizer);
    char vae_dir[4096];
    component(dir, "vae", vae_dir, sizeof vae_dir);
    /* the weights file itself (the VAE is opened as one file: lv_weights_open) */
    if (vae_dir[0]) LV_TRY(lv_vae_weights_file(vae_dir, out->vae, sizeof out->vae));
    if (!out->transformer[0])
        return lv_error(LV_ERR_IO, "%s: a diffusers pipeline folder without transformer/ (the DiT)", dir);
    return LV_OK;
}
