/* Measures over decoded video frames, as ts_decode_all returns them (packed RGB, frame t
 * at v + t * frame_bytes): the mean absolute difference of a frame pair, the median seam
 * at the block boundaries (what `longvk metrics` compares a switch's seam with), the PSNR
 * of two runs of bytes, and a comparator to sort doubles with qsort. */
#ifndef LONGVK_TS_FRAMES_H
#define LONGVK_TS_FRAMES_H

#include <stddef.h>
#include <stdint.h>

/* The mean absolute difference of frames t and t + 1, over their frame_bytes bytes. */
double ts_pair_mae(const uint8_t *v, size_t frame_bytes, int t);
/* The median ts_pair_mae over the block boundaries, the pairs (kb - 1, kb) for
 * k = block_frames, b = 1, 2, ... while kb < frames. */
double ts_median_seam(const uint8_t *v, size_t frame_bytes, int64_t frames, int block_frames);
/* The PSNR in dB of n bytes of a against b (peak 255); 99 when they are equal (not
 * test_clips.h's clip_psnr, which says INFINITY). */
double ts_psnr(const uint8_t *a, const uint8_t *b, size_t n);
/* qsort's comparator for doubles, ascending. */
int ts_cmp_double(const void *a, const void *b);

#endif
