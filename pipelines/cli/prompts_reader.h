/* `longvk generate --prompts-from FILE`: a thread that reads lines from a FIFO, a regular
 * file or stdin ("-") while the video is made and pushes each to the run
 * (lv_generate_push_prompt); at the input's end it says so to the run (lv_gen_live_end). */
#ifndef LONGVK_CLI_PROMPTS_READER_H
#define LONGVK_CLI_PROMPTS_READER_H

#include "longvk/generate.h"

typedef struct prompts_reader prompts_reader;

/* The path as --prompts-from takes it ("-", or something that can be opened for reading and
 * is not a folder): NULL when it can, else why not (a static message). Opens nothing: a
 * FIFO's open waits for a writer. */
const char *prompts_reader_check(const char *path);
/* Opens the file (a FIFO without waiting for a writer) and starts the thread. 0, or -1
 * with a message on stderr. */
int prompts_reader_start(const char *path, lv_gen_live *live, prompts_reader **out);
/* Stops the thread (within 0.1 s, whatever the input does) and frees it. */
void prompts_reader_stop(prompts_reader *r);

#endif
