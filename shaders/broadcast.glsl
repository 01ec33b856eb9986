// Index of the operand element that output element i = row * cols + col reads, for the
// broadcast modes of push_elementwise.h (LV_BCAST_*). `phase` is the number of rows of the
// operand's first bound group that lie before this dispatch's first row.
#include "fastdiv.glsl"

uint lv_bcast_index(uint i, uint row, uint col, uint cols, uint mode, uint phase, uint magic,
                    uint shift) {
    if (mode == LV_BCAST_FULL) return i;
    if (mode == LV_BCAST_CHANNEL) return col;
    return lv_fastdiv(row + phase, magic, shift) * cols + col;
}
