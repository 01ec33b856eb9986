/* The Wan VAE decoder's layer structure without weights: the real configuration, the
 * history slots, the temporal receptive field (the frames a resume decodes again), the
 * parameter count, the device memory of a decode (the plan pipelines/wan_vae/wan_vae.c
 * allocates by), the multiply-adds of a frame, the tensors of a structure under their original
 * names, and the diffusers names of the tensors. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wan_vae_internal.h"

void vae_arch_wan21(vae_arch *arch) { vae_arch_make(arch, 96, 16); }

void vae_arch_make(vae_arch *arch, int dim, int z) {
    const int nres = 2;
    const int mult[4] = {1, 2, 4, 4};
    const bool temporal[3] = {true, true, false};
    memset(arch, 0, sizeof *arch);
    arch->z = z;
    arch->trunk = dim * mult[3];
    arch->out_ch = 3;
    arch->nres = nres;
    /* stage i has width dim * mult[3 - i]; every upsampling conv halves the width */
    int cin = arch->trunk;
    for (int i = 0; i < 4; i++) {
        int cout = dim * mult[3 - i];
        for (int r = 0; r < nres + 1; r++) {
            arch->ups[arch->nups++] = (vae_arch_layer){VAE_RES, cin, cout};
            cin = cout;
        }
        if (i < 3) {
            arch->ups[arch->nups++] = (vae_arch_layer){temporal[i] ? VAE_UP3D : VAE_UP2D, cout, cout / 2};
            cin = cout / 2;
        }
    }
    arch->head_ch = cin;
}

int vae_arch_slots(const vae_arch *arch) {
    int n = 1 + 4 + 1; /* conv1, the middle's two residual blocks, head */
    for (int i = 0; i < arch->nups; i++)
        n += arch->ups[i].kind == VAE_RES ? 2 : arch->ups[i].kind == VAE_UP3D ? 1 : 0;
    return n;
}

/* The latent frames to decode again, from a reset decoder, so that every causal conv's
 * history is that of the whole video's decode (lv_vae_history_frames; README "Resuming a
 * decode"). Decoding from latent frame s instead of 0 differs from the whole decode only in
 * the frames that see back past s (zeros instead of the frames before) and in the first-frame
 * rule (frame s passes both time_convs alone, and their history starts with zeros at frame
 * s + 1). c is the first exact position, in latent frames: a frame at temporal rate k (the
 * frames per latent frame at that level, 1, 2, 4) sits at latent position j + i / k. A causal
 * 3-tap conv at rate k reads 2 frames back, 2 / k latent frames: c += 2 / k. A time_conv at
 * rate k also needs its frames to come after frame s (it never saw s): c = max(c, s + 1) + 2 / k.
 * At the end the convs keep their last two input frames, the earliest at N - 2 at rate 1 (later
 * at a higher rate): with c <= N - 2 for the last conv (c only grows) all of them are exact.
 * Wan2.1: 22 after the latent level, 24 after the first time_conv, 31 after the second, 37.5
 * after the head: 40 frames. */
static double exact_after(double c, double s, int rate) { return (c > s + 1 ? c : s + 1) + 2.0 / rate; }

int vae_arch_history_frames(const vae_arch *arch) {
    const double s = 0;
    double c = s + 2 + 4 + 4; /* conv1, the middle's two residual blocks (two convs each) at rate 1 */
    int rate = 1;
    for (int i = 0; i < arch->nups; i++) {
        if (arch->ups[i].kind == VAE_RES) c += 2 * 2.0 / rate;
        else if (arch->ups[i].kind == VAE_UP3D) {
            c = exact_after(c, s, rate);
            rate *= 2;
        }
    }
    c += 2.0 / rate; /* the head */
    return (int)ceil(c - s) + 2;
}

static uint64_t res_params(uint64_t ci, uint64_t co) {
    uint64_t p = ci + co * ci * 27 + co + co + co * co * 27 + co;
    if (ci != co) p += co * ci + co;
    return p;
}

uint64_t vae_arch_params(const vae_arch *arch) {
    uint64_t z = (uint64_t)arch->z, t = (uint64_t)arch->trunk, hc = (uint64_t)arch->head_ch;
    uint64_t p = z * z + z + t * z * 27 + t;
    p += 2 * res_params(t, t) + (t + 3 * t * t + 3 * t + t * t + t);
    for (int i = 0; i < arch->nups; i++) {
        uint64_t ci = (uint64_t)arch->ups[i].ci, co = (uint64_t)arch->ups[i].co;
        switch (arch->ups[i].kind) {
        case VAE_RES: p += res_params(ci, co); break;
        case VAE_UP3D: p += 2 * ci * ci * 3 + 2 * ci + co * ci * 9 + co; break;
        case VAE_UP2D: p += co * ci * 9 + co; break;
        }
    }
    p += hc + (uint64_t)arch->out_ch * hc * 27 + (uint64_t)arch->out_ch;
    return p;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Walks one step of `step` latent frames as pipelines/wan_vae/wan_vae.c runs it (a later step:
 * every upsample3d doubles the frames; the first step has fewer) and records the largest
 * activation any of the three work buffers must hold, and the history of every slot. */
void vae_arch_memory(const vae_arch *arch, int h, int w, int step, lv_dtype act_dtype, vae_memory *m) {
    const uint64_t e = lv_dtype_size(act_dtype);
    uint64_t T = (uint64_t)step, H = (uint64_t)h, W = (uint64_t)w, P = H * W;
    uint64_t z = (uint64_t)arch->z, t = (uint64_t)arch->trunk;
    uint64_t act = T * P * z, hist = 2 * P * z; /* the latents, conv2, conv1's history */
    act = max_u64(act, 3 * T * P * t);          /* conv1 out; attention's q, k, v in one buffer */
    hist += 4 * 2 * P * t;                      /* the middle's residual convs */
    for (int i = 0; i < arch->nups; i++) {
        uint64_t ci = (uint64_t)arch->ups[i].ci, co = (uint64_t)arch->ups[i].co;
        switch (arch->ups[i].kind) {
        case VAE_RES:
            act = max_u64(act, T * P * max_u64(ci, co));
            hist += 2 * P * ci + 2 * P * co;
            break;
        case VAE_UP3D:
            hist += 2 * P * ci;
            T *= 2;
            act = max_u64(act, T * P * ci); /* time_conv's interleaved output */
            H *= 2, W *= 2, P = H * W;
            act = max_u64(act, T * P * co);
            break;
        case VAE_UP2D:
            H *= 2, W *= 2, P = H * W;
            act = max_u64(act, T * P * co);
            break;
        }
    }
    uint64_t hc = (uint64_t)arch->head_ch;
    act = max_u64(act, T * P * max_u64(hc, (uint64_t)arch->out_ch));
    hist += 2 * P * hc;
    m->weights = 4 * vae_arch_params(arch);
    m->history = e * hist;
    m->work_elems = act;
    m->work = 3 * e * act;
}

/* Walks the structure as a decode of one later latent frame does (every upsample3d doubles
 * the frames, every resample the rows and columns). */
double vae_arch_macs(const vae_arch *a, int h, int w) {
    double T = 1, P = (double)h * w, z = a->z, t = a->trunk;
    double m = T * P * z * z + T * P * t * z * 27;
    m += 2 * T * P * 2 * t * t * 27;                            /* the middle's residual blocks */
    m += T * (P * 3 * t * t + 2 * P * P * t + P * t * t);      /* attention */
    for (int i = 0; i < a->nups; i++) {
        double ci = a->ups[i].ci, co = a->ups[i].co;
        if (a->ups[i].kind == VAE_RES) {
            m += T * P * (co * ci * 27 + co * co * 27 + (ci != co ? co * ci : 0));
            continue;
        }
        if (a->ups[i].kind == VAE_UP3D) {
            m += T * P * 2 * ci * ci * 3;
            T *= 2;
        }
        P *= 4;
        m += T * P * co * ci * 9;
    }
    return m + T * P * a->out_ch * a->head_ch * 27;
}

/* ---- the tensors of a structure ----------------------------------------------------------- */

typedef struct spec_list {
    lv_vae_tensor_spec *out;
    int max, n;
    bool too_long;
} spec_list;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void add_spec(spec_list *l, int ndim, const int64_t *shape, const char *fmt, ...) {
    char name[LV_VAE_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof name) l->too_long = true;
    if (l->out && l->n < l->max) {
        lv_vae_tensor_spec *t = &l->out[l->n];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, sizeof name);
        t->ndim = ndim;
        for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    }
    l->n++;
}

#define SPEC(l, shape, ...) add_spec(l, (int)(sizeof shape / sizeof shape[0]), shape, __VA_ARGS__)

/* A causal conv (kt > 0: [co, ci, kt, k, k]) or a 2-D one (kt 0: [co, ci, k, k]), and its bias. */
static void conv_specs(spec_list *l, const char *prefix, int64_t co, int64_t ci, int kt, int k) {
    if (kt) {
        const int64_t w[] = {co, ci, kt, k, k};
        SPEC(l, w, "%s.weight", prefix);
    } else {
        const int64_t w[] = {co, ci, k, k};
        SPEC(l, w, "%s.weight", prefix);
    }
    const int64_t b[] = {co};
    SPEC(l, b, "%s.bias", prefix);
}

static void block_specs(spec_list *l, const char *p, int64_t ci, int64_t co) {
    char conv[LV_VAE_NAME_MAX];
    const int64_t g0[] = {ci, 1, 1, 1}, g3[] = {co, 1, 1, 1};
    SPEC(l, g0, "%s.residual.0.gamma", p);
    snprintf(conv, sizeof conv, "%s.residual.2", p);
    conv_specs(l, conv, co, ci, 3, 3);
    SPEC(l, g3, "%s.residual.3.gamma", p);
    snprintf(conv, sizeof conv, "%s.residual.6", p);
    conv_specs(l, conv, co, co, 3, 3);
    if (ci != co) {
        snprintf(conv, sizeof conv, "%s.shortcut", p);
        conv_specs(l, conv, co, ci, 1, 1);
    }
}

int vae_arch_tensors(const vae_arch *a, lv_vae_tensor_spec *out, int max) {
    spec_list l = {out, out ? max : 0, 0, false};
    const int64_t z = a->z, t = a->trunk;
    conv_specs(&l, "conv2", z, z, 1, 1);
    conv_specs(&l, "decoder.conv1", t, z, 3, 3);
    block_specs(&l, "decoder.middle.0", t, t);
    const int64_t gamma[] = {t, 1, 1}, qkv_w[] = {3 * t, t, 1, 1}, qkv_b[] = {3 * t}, proj_w[] = {t, t, 1, 1},
                  proj_b[] = {t};
    SPEC(&l, gamma, "decoder.middle.1.norm.gamma");
    SPEC(&l, qkv_w, "decoder.middle.1.to_qkv.weight");
    SPEC(&l, qkv_b, "decoder.middle.1.to_qkv.bias");
    SPEC(&l, proj_w, "decoder.middle.1.proj.weight");
    SPEC(&l, proj_b, "decoder.middle.1.proj.bias");
    block_specs(&l, "decoder.middle.2", t, t);
    for (int i = 0; i < a->nups; i++) {
        char p[32], q[LV_VAE_NAME_MAX];
        snprintf(p, sizeof p, "decoder.upsamples.%d", i);
        const vae_arch_layer *u = &a->ups[i];
        if (u->kind == VAE_RES) {
            block_specs(&l, p, u->ci, u->co);
            continue;
        }
        if (u->kind == VAE_UP3D) {
            snprintf(q, sizeof q, "%s.time_conv", p);
            conv_specs(&l, q, 2 * (int64_t)u->ci, u->ci, 3, 1);
        }
        snprintf(q, sizeof q, "%s.resample.1", p);
        conv_specs(&l, q, u->co, u->ci, 0, 3);
    }
    const int64_t head_g[] = {a->head_ch, 1, 1, 1};
    SPEC(&l, head_g, "decoder.head.0.gamma");
    conv_specs(&l, "decoder.head.2", a->out_ch, a->head_ch, 3, 3);
    return l.too_long ? -1 : l.n;
}

/* ---- diffusers names ---------------------------------------------------------------------- */

/* "residual.0.gamma" -> "norm1.gamma" etc. for a residual block's tail `rest`. */
static bool res_tail(const char *rest, char *buf, size_t size, const char *prefix) {
    static const char *const map[][2] = {
        {"residual.0.", "norm1."}, {"residual.2.", "conv1."}, {"residual.3.", "norm2."},
        {"residual.6.", "conv2."}, {"shortcut.", "conv_shortcut."},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i][0]);
        if (strncmp(rest, map[i][0], n) == 0)
            return (size_t)snprintf(buf, size, "%s%s%s", prefix, map[i][1], rest + n) < size;
    }
    return false;
}

/* The encoder's names: conv1 is quant_conv; encoder.downsamples is one flat list in diffusers
 * too (down_blocks.{i}: residual blocks as the decoder's, Resamples keep resample.1 and
 * time_conv). */
static bool encoder_diffusers_name(const char *orig, char *buf, size_t size) {
    int idx = -1, used = 0;
    if (strncmp(orig, "conv1.", 6) == 0)
        return (size_t)snprintf(buf, size, "quant_conv.%s", orig + 6) < size;
    if (strncmp(orig, "encoder.conv1.", 14) == 0)
        return (size_t)snprintf(buf, size, "encoder.conv_in.%s", orig + 14) < size;
    if (strcmp(orig, "encoder.head.0.gamma") == 0)
        return (size_t)snprintf(buf, size, "encoder.norm_out.gamma") < size;
    if (strncmp(orig, "encoder.head.2.", 15) == 0)
        return (size_t)snprintf(buf, size, "encoder.conv_out.%s", orig + 15) < size;
    if (sscanf(orig, "encoder.middle.%d.%n", &idx, &used) == 1 && used > 0) {
        const char *rest = orig + used;
        if (idx == 1)
            return (size_t)snprintf(buf, size, "encoder.mid_block.attentions.0.%s", rest) < size;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "encoder.mid_block.resnets.%d.", idx == 0 ? 0 : 1);
        return (idx == 0 || idx == 2) && res_tail(rest, buf, size, prefix);
    }
    if (sscanf(orig, "encoder.downsamples.%d.%n", &idx, &used) == 1 && used > 0 && idx >= 0) {
        const char *rest = orig + used;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "encoder.down_blocks.%d.", idx);
        if (strncmp(rest, "residual.", 9) == 0 || strncmp(rest, "shortcut.", 9) == 0)
            return res_tail(rest, buf, size, prefix);
        return (size_t)snprintf(buf, size, "%s%s", prefix, rest) < size;
    }
    return false;
}

bool vae_diffusers_name(const char *orig, int nres, char *buf, size_t size) {
    int idx = -1, used = 0;
    if (strncmp(orig, "encoder.", 8) == 0 || strncmp(orig, "conv1.", 6) == 0)
        return encoder_diffusers_name(orig, buf, size);
    if (strncmp(orig, "conv2.", 6) == 0)
        return (size_t)snprintf(buf, size, "post_quant_conv.%s", orig + 6) < size;
    if (strncmp(orig, "decoder.conv1.", 14) == 0)
        return (size_t)snprintf(buf, size, "decoder.conv_in.%s", orig + 14) < size;
    if (strcmp(orig, "decoder.head.0.gamma") == 0)
        return (size_t)snprintf(buf, size, "decoder.norm_out.gamma") < size;
    if (strncmp(orig, "decoder.head.2.", 15) == 0)
        return (size_t)snprintf(buf, size, "decoder.conv_out.%s", orig + 15) < size;
    if (sscanf(orig, "decoder.middle.%d.%n", &idx, &used) == 1 && used > 0) {
        const char *rest = orig + used;
        if (idx == 1)
            return (size_t)snprintf(buf, size, "decoder.mid_block.attentions.0.%s", rest) < size;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "decoder.mid_block.resnets.%d.", idx == 0 ? 0 : 1);
        return (idx == 0 || idx == 2) && res_tail(rest, buf, size, prefix);
    }
    if (sscanf(orig, "decoder.upsamples.%d.%n", &idx, &used) == 1 && used > 0 && idx >= 0) {
        /* stage s holds nres + 1 residual blocks, then (except the last) a Resample */
        const char *rest = orig + used;
        int per = nres + 2, stage = idx / per, j = idx % per;
        char prefix[64];
        if (j <= nres) {
            snprintf(prefix, sizeof prefix, "decoder.up_blocks.%d.resnets.%d.", stage, j);
            return res_tail(rest, buf, size, prefix);
        }
        return (size_t)snprintf(buf, size, "decoder.up_blocks.%d.upsamplers.0.%s", stage, rest) < size;
    }
    return false;
}
