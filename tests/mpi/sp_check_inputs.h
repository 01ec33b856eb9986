/* The inputs of the MPI transport check, rebuilt identically by sp_comm_check (one band per
 * rank) and by tests/models/test_sp_mpi.c (all bands, for the emulation): band r's partial state
 * [M] and its rows [F, rows, W, X] of a [F, H, W, X] grid, values from a hash of their
 * indices (no state, so any process computes the same floats). */
#ifndef LONGVK_SP_CHECK_INPUTS_H
#define LONGVK_SP_CHECK_INPUTS_H

#include <stdint.h>
#include <stdlib.h>

#include "longvk/sp_comm.h"

#define SP_CHECK_M 4099 /* not a multiple of anything the kernels tile by */
#define SP_CHECK_F 3
#define SP_CHECK_H 7
#define SP_CHECK_W 5
#define SP_CHECK_X 6

typedef struct sp_check_band {
    int row0, rows, top, bottom;
} sp_check_band;

static inline lv_status sp_check_band_of(int R, int r, sp_check_band *b) {
    lv_status s = lv_sp_band(SP_CHECK_H, R, r, &b->row0, &b->rows);
    b->top = r > 0;
    b->bottom = r < R - 1;
    return s;
}

/* a value in [-1, 1) from an index */
static inline float sp_check_value(uint64_t i) {
    i = (i ^ (i >> 31)) * 0x9e3779b97f4a7c15ull;
    i = (i ^ (i >> 29)) * 0xbf58476d1ce4e5b9ull;
    i ^= i >> 32;
    return (float)((double)(i & 0xffffff) / 8388608.0 - 1.0);
}

static inline float *sp_check_partial(int r) {
    float *p = malloc(SP_CHECK_M * sizeof *p);
    for (int i = 0; p && i < SP_CHECK_M; i++) p[i] = sp_check_value((uint64_t)r * 1000003u + (uint64_t)i);
    return p;
}

static inline float *sp_check_own(const sp_check_band *b) {
    size_t n = (size_t)SP_CHECK_F * b->rows * SP_CHECK_W * SP_CHECK_X, at = 0;
    float *o = malloc(n * sizeof *o);
    for (int f = 0; o && f < SP_CHECK_F; f++)
        for (int y = b->row0; y < b->row0 + b->rows; y++)
            for (int i = 0; i < SP_CHECK_W * SP_CHECK_X; i++)
                o[at++] = sp_check_value(7777777u + (((uint64_t)f * SP_CHECK_H + y) * SP_CHECK_W * SP_CHECK_X + i));
    return o;
}

#endif
