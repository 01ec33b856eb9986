/* Random SANA-Video weights for `bench dit`: every tensor of the config in bf16 (as the
 * released checkpoints store them), laid out as a safetensors image in an anonymous mapping
 * and opened with lv_sana_file_open_memory, so that the DiT loads them through the same
 * checks and upload as a real model, and nothing touches the disk (the 2B model is 4 GB).
 *
 * The values: a counter-based generator (splitmix64 of seed, tensor and position) gives 16
 * random bits per element, looked up in a table of 65536 bf16 values, uniform in
 * [-0.02, 0.02] (norm weights: 1 plus that). About a second per GB on one core. The scale
 * keeps every activation of 20 layers finite (lv_dit_forward refuses non-finite output) and
 * far from fp32's subnormals; timing does not depend on the values otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_dit_model.h"
#include "longvk.h"

static uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int is_norm(const char *name) {
    size_t n = strlen(name);
    return n >= 11 && strcmp(name + n - 11, "norm.weight") == 0;
}

/* Appends to a growing string; returns 0 when out of memory. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static int sb_add(strbuf *b, const char *text) {
    size_t n = strlen(text);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) return 0;
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, text, n + 1);
    b->len += n;
    return 1;
}

lv_status bench_dit_model_make(const lv_sana_config *cfg, uint64_t seed, bench_dit_model *m) {
    memset(m, 0, sizeof *m);
    lv_sana_tensor_spec *specs = NULL;
    int n = 0;
    strbuf h = {0};
    lv_status s = lv_sana_expected_tensors(cfg, &specs, &n);
    if (s != LV_OK) return s;
    /* the header: the config in __metadata__, then each tensor's dtype, shape and bytes */
    char config[512], escaped[1024], line[512];
    s = lv_sana_config_to_json(cfg, config, sizeof config);
    if (s != LV_OK) goto done;
    size_t e = 0;
    for (const char *c = config; *c && e + 2 < sizeof escaped; c++) {
        if (*c == '"') escaped[e++] = '\\';
        escaped[e++] = *c;
    }
    escaped[e] = '\0';
    int ok = sb_add(&h, "{\"__metadata__\": {\"config\": \"") && sb_add(&h, escaped) && sb_add(&h, "\"}");
    uint64_t offset = 0;
    for (int i = 0; i < n && ok; i++) {
        uint64_t count = 1;
        int at = snprintf(line, sizeof line, ", \"%s\": {\"dtype\": \"BF16\", \"shape\": [", specs[i].name);
        for (int d = 0; d < specs[i].ndim; d++) {
            count *= (uint64_t)specs[i].shape[d];
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%lld", d ? ", " : "", (long long)specs[i].shape[d]);
        }
        snprintf(line + at, sizeof line - (size_t)at, "], \"data_offsets\": [%llu, %llu]}",
                 (unsigned long long)offset, (unsigned long long)(offset + 2 * count));
        offset += 2 * count;
        m->params += count;
        ok = sb_add(&h, line);
    }
    while (ok && (h.len + 1) % 8) ok = sb_add(&h, " "); /* the data starts 8-byte aligned */
    if (!ok || !sb_add(&h, "}")) {
        s = lv_error(LV_ERR_NOMEM, "bench dit: out of memory for the weights' header");
        goto done;
    }
    m->size = 8 + h.len + offset;
    m->image = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->image == MAP_FAILED) {
        m->image = NULL;
        s = lv_error(LV_ERR_NOMEM, "bench dit: cannot map %.2f GB of host memory for the random weights",
                     (double)m->size / 1e9);
        goto done;
    }
    unsigned char *p = m->image;
    uint64_t hl = h.len;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(hl >> (8 * i));
    memcpy(p + 8, h.s, h.len);
    /* the values, through two tables of 65536 bf16 numbers */
    static uint16_t table[2][65536];
    for (int k = 0; k < 65536; k++) {
        float u = 0.02f * ((float)k / 32768.0f - 1.0f);
        table[0][k] = lv_float_to_bf16(u);
        table[1][k] = lv_float_to_bf16(1.0f + u);
    }
    uint16_t *dst = (uint16_t *)(p + 8 + h.len);
    for (int i = 0; i < n; i++) {
        uint64_t count = 1;
        for (int d = 0; d < specs[i].ndim; d++) count *= (uint64_t)specs[i].shape[d];
        const uint16_t *t = table[is_norm(specs[i].name)];
        uint64_t base = seed ^ ((uint64_t)i << 44);
        for (uint64_t j = 0; j < count; j += 4) {
            uint64_t r = splitmix64(base + j);
            for (uint64_t k = 0; k < 4 && j + k < count; k++) dst[j + k] = t[(r >> (16 * k)) & 0xffff];
        }
        dst += count;
    }
    s = lv_sana_file_open_memory(m->image, m->size, "random bf16 weights", &m->file);
done:
    free(specs);
    free(h.s);
    return s;
}

void bench_dit_model_free(bench_dit_model *m) {
    if (!m) return;
    lv_sana_file_close(m->file);
    if (m->image) munmap(m->image, m->size);
    memset(m, 0, sizeof *m);
}
