/* A growing byte buffer for tests that build files byte by byte (GGUF, from docs/gguf.md):
 * little-endian integers and floats, and GGUF's strings (a u64 length, then the bytes). The
 * bytes are in p[0..n); free(p) when done. Out of memory fails the test. */
#ifndef LONGVK_TS_BYTES_H
#define LONGVK_TS_BYTES_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_bytes {
    uint8_t *p;
    size_t n, cap;
} ts_bytes;

void ts_put(ts_bytes *b, const void *d, size_t n);
void ts_put_u8(ts_bytes *b, uint8_t v);
void ts_put_u16(ts_bytes *b, uint16_t v);
void ts_put_u32(ts_bytes *b, uint32_t v);
void ts_put_u64(ts_bytes *b, uint64_t v);
void ts_put_f32(ts_bytes *b, float f);
void ts_put_str(ts_bytes *b, const char *s);

#endif
