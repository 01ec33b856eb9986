/* ts_bytes.h: a growing byte buffer for files built byte by byte. */
#include "ts_bytes.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

void ts_put(ts_bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

/* the low `bytes` bytes of v, least significant first */
static void put_le(ts_bytes *b, uint64_t v, int bytes) {
    uint8_t x[8];
    for (int i = 0; i < bytes; i++) x[i] = (uint8_t)(v >> (8 * i));
    ts_put(b, x, (size_t)bytes);
}

void ts_put_u8(ts_bytes *b, uint8_t v) { ts_put(b, &v, 1); }
void ts_put_u16(ts_bytes *b, uint16_t v) { put_le(b, v, 2); }
void ts_put_u32(ts_bytes *b, uint32_t v) { put_le(b, v, 4); }
void ts_put_u64(ts_bytes *b, uint64_t v) { put_le(b, v, 8); }

void ts_put_f32(ts_bytes *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    ts_put_u32(b, u);
}

void ts_put_str(ts_bytes *b, const char *s) {
    ts_put_u64(b, strlen(s));
    ts_put(b, s, strlen(s));
}
