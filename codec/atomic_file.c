/* Whole-file outputs (JSON, SVG) written to a temporary name and renamed when complete, so a
 * reader never sees half a file; a device or FIFO is written through, a symbolic link
 * followed (lv_output_open, longvk/files.h). */
#include "codec_internal.h"

lv_status lv_atomic_open(lv_atomic_file *f, const char *path) { return lv_output_open(f, path); }

lv_status lv_atomic_commit(lv_atomic_file *f) { return lv_output_commit(f); }

void lv_atomic_discard(lv_atomic_file *f) { lv_output_discard(f); }
