/* File helpers for the tests of the model-file readers: whole-file reads and writes, and
 * paths in the test scratch directory. Failures fail the test. */
#ifndef LONGVK_TS_FILES_H
#define LONGVK_TS_FILES_H

#include <stddef.h>
#include <stdint.h>

/* The whole file in a malloc'd buffer (NUL-terminated, *len bytes). */
uint8_t *ts_slurp(const char *path, size_t *len);
void ts_spit(const char *path, const void *data, size_t len);
/* Copies the file `from` to `to` (ts_slurp, then ts_spit). */
void ts_copy_file(const char *from, const char *to);
/* "<dir>/<name>" in a static rotating buffer (valid for the next 7 calls); ts_tmp(name) puts
 * it in the test's scratch directory (LONGVK_TEST_TMP, defined for test executables). */
const char *ts_tmp_in(const char *dir, const char *name);
#define ts_tmp(name) ts_tmp_in(LONGVK_TEST_TMP, (name))
/* Removes a run's output and the files longvk puts beside it, "<out><suffix>" for each
 * suffix (NULL-terminated), before a test makes them again; missing ones are fine. */
void ts_remove_output(const char *out, const char *const *suffixes);
/* The output and its resume file (OUT.longvk-state). */
void ts_remove_output_and_state(const char *out);
/* Runs a shell command; returns its exit status and its stdout+stderr in *output (malloc'd). */
int ts_run(const char *command, char **output);
/* Every frame of the video at `path` decoded into one malloc'd packed RGB buffer: *frames
 * frames of *frame_bytes bytes. */
uint8_t *ts_decode_all(const char *path, int64_t *frames, size_t *frame_bytes);
/* The same, failing the test unless the video has `frames` frames of `frame_bytes` bytes. */
uint8_t *ts_decode_frames(const char *path, int64_t frames, size_t frame_bytes);

#endif
