// Division by a divisor that is fixed for a dispatch: n / d = high word of n * magic,
// shifted (magic and shift from lv_fastdiv_make in engine/ops/op_helpers.c; magic 0 means
// d = 1). Exact for n < 2^30. Integer division is not vectorised on CPU devices, a
// 32x32->64-bit multiply is.
uint lv_fastdiv(uint n, uint magic, uint shift) {
    if (magic == 0u) return n;
    uint hi, lo;
    umulExtended(n, magic, hi, lo);
    return hi >> shift;
}
