/* Option tables: each command (and each `longvk bench` benchmark) describes its options
 * once, in an array of cli_option, and that one table drives both the parser and --help.
 *
 * An entry says what the value is (its kind: a flag, a number with its range, a choice
 * among words, a file the command reads or a file it writes, ...), where it goes, what
 * --help says about it and which default --help shows. The parser names the option in
 * every error (unknown option, missing value, a value that is not a finite number or is
 * out of range), and refuses, before anything is opened, a command line where a file the
 * command writes is a file it reads (compared by device and inode, so links and other
 * spellings of a path count too). A usage error is exit status 2.
 *
 * The command line: options in any order, each followed by its value in the next argument
 * (which may start with '-': "--cfg-scale -1"); the last of a repeated option wins; other
 * arguments are the positionals in table order; after "--" every argument is positional. */
#ifndef LONGVK_CLI_OPTIONS_H
#define LONGVK_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum cli_kind {
    CLI_FLAG = 1, /* no value: *(bool *)dest = true */
    CLI_INT,      /* an integer in [min, max] into an int, or one of `choices` (words for numbers) */
    CLI_LONG,     /* the same into a long */
    CLI_DOUBLE,   /* a finite number within `bounds` into a double */
    CLI_STRING,   /* any text, "" included, into a const char * */
    CLI_INPUT,    /* the name of a file the command reads (not ""), into a const char * */
    CLI_OUTPUT,   /* the name of a file the command writes (not ""), into a const char * */
    CLI_CHOICE,   /* one of `choices`: its value into an int */
    CLI_CUSTOM,   /* `parse` reads the value (lists, FxHxW sizes, ...) */
} cli_kind;

/* Bounds of a CLI_DOUBLE (none: any finite number). */
enum {
    CLI_ABOVE = 1,    /* > lo */
    CLI_AT_LEAST = 2, /* >= lo */
    CLI_BELOW = 4,    /* < hi */
    CLI_AT_MOST = 8,  /* <= hi */
};

typedef struct cli_choice {
    const char *name;
    int value;
} cli_choice;

typedef struct cli_option {
    const char *name;    /* "--seed"; NULL for a positional argument (in table order) */
    const char *alias;   /* "-s", or NULL */
    cli_kind kind;
    void *dest;
    const char *metavar; /* the value in --help ("N", "FILE"); NULL: by kind. Positionals: their name */
    const char *help;    /* wrapped to the terminal's width; '\n' breaks a line, and the spaces
                            that start a line after it indent it and its continuation */
    const char *def;     /* shown as " (default: DEF)" after the first line of help; NULL: none */
    long min, max;       /* CLI_INT, CLI_LONG */
    double lo, hi;       /* CLI_DOUBLE, with `bounds` */
    unsigned bounds;
    const cli_choice *choices; /* ended by {0} */
    const cli_choice *aliases; /* CLI_CHOICE: also accepted, not listed (other spellings); ended by {0} */
    /* CLI_CUSTOM: NULL when the value is good (and stored), else what it should be, for
     * the message "FLAG: 'VALUE' <returned text>". */
    const char *(*parse)(const char *value, void *dest);
    bool required;
    bool given; /* set by the parser */
} cli_option;

typedef struct cli_spec {
    const char *command; /* "generate", "bench gemm": messages and the usage line */
    const char *usage;   /* the usage line after "longvk <command> " */
    const char *about;   /* printed as is between the usage line and the options; NULL: none */
    const char *epilog;  /* printed as is after the options; NULL: none */
    cli_option *options;
    int count;
    /* Called before --help is printed: fills in help and defaults known only at run time
     * (such as the embedded model's). NULL: none. */
    void (*prepare_help)(void);
} cli_spec;

#define CLI_COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* --device N, the same in every command that opens a device; dest_ is an int * or a long *. */
#define CLI_DEVICE_OPTION(dest_)                                                                        \
    {.name = "--device", .kind = _Generic((dest_), int *: CLI_INT, long *: CLI_LONG), .dest = (dest_), \
     .min = 0, .max = 64, .help = "Vulkan device index (see `longvk devices`; default: LONGVK_DEVICE, or the best)"}

/* Sequence parallelism, the same two options in generate, forward and decode: over the ranks
 * of mpirun (a bool *), or R bands emulated in one process (an int * or a long *). The help
 * says what is split; CLI_SP_RANK_DEVICE and CLI_SP_NEEDS_MPI are its common words. */
#define CLI_SP_RANK_DEVICE "(rank modulo the devices, unless --device or LONGVK_DEVICE)"
#define CLI_SP_NEEDS_MPI "needs a build with -DLONGVK_MPI=ON"
#define CLI_SEQUENCE_PARALLEL_OPTION(dest_, help_) \
    {.name = "--sequence-parallel", .kind = CLI_FLAG, .dest = (dest_), .help = (help_)}
#define CLI_SP_EMULATE_OPTION(dest_, help_)                                                                \
    {.name = "--sp-emulate", .kind = _Generic((dest_), int *: CLI_INT, long *: CLI_LONG), .dest = (dest_), \
     .metavar = "R", .min = 1, .max = 4096, .def = "off", .help = (help_)}

/* Parses argv[1 .. argc-1] into the table's destinations. Returns -1 when the command
 * should go on, else the exit status it should return at once: 0 after --help (printed
 * on stdout), 2 after a usage error (printed on stderr), 1 when an existing output may not
 * be written by this user or is a folder (lv_output_target: a write-protected file is never
 * replaced). */
int cli_parse(const cli_spec *spec, int argc, char **argv);

/* Whether the option called `name` was on the command line (after cli_parse). */
bool cli_given(const cli_spec *spec, const char *name);

/* The whole --help text: usage line, about, the options, epilog. */
void cli_help(const cli_spec *spec, FILE *out);
/* Only the option lines (for `longvk bench --help`, which lists every benchmark's). */
void cli_help_options(const cli_spec *spec, FILE *out);

/* Refuses (message on stderr naming both options, returns 0) when a given output option
 * names the same file as a given input option, or as another output. cli_parse calls it;
 * a command whose inputs include files that are not options (found in another file, say)
 * may call cli_same_file itself. */
int cli_check_files(const cli_spec *spec);
/* 1 when `out` is no file any given input of the spec reads; else 0 after a usage error
 * naming `what` (the output: an option, or a file derived from one), the input and the
 * file: the input itself by any name (device and inode), a file inside an input folder
 * (three levels: a diffusers pipeline's weights, shards, configs and tokenizer) or the
 * tokenizer/ folder beside it, and beside an input file its config.json, tokenizer.model,
 * tokenizer/, ../tokenizer/ and an index's shards. cli_check_files calls it for every
 * output option; commands call it for the files they derive (OUT.mask.npy, the state). */
int cli_check_output(const cli_spec *spec, const char *out, const char *what);
/* 1 when both paths name one existing file (device and inode), else 0. */
int cli_same_file(const char *a, const char *b);

/* Value parsers for CLI_CUSTOM options and for text the commands read themselves. Each
 * takes the whole string: no leading spaces, no trailing characters, no empty value. */
/* A finite number (not nan, inf or out of double's range). */
int cli_parse_finite(const char *text, double *out);
/* A decimal integer in [min, max]. */
int cli_parse_long(const char *text, long min, long max, long *out);
/* n integers in [min, max] separated by 'x' ("4x8x8"): 1 when it is exactly that. */
int cli_parse_dims(const char *text, int n, long min, long max, long *out);

/* This process's rank when a launcher started several (mpirun: OMPI_COMM_WORLD_RANK, or
 * PMI_RANK), else 0. */
int cli_launcher_rank(void);
/* What a rank other than 0 returns for a fault every rank finds (rank 0 says it): 2, after a
 * moment that lets rank 0's message out before the launcher ends the job. */
int cli_other_rank_fails(void);
/* A usage error of `command`, formatted as "longvk <command>: <message>\n" on stderr; returns 2.
 * Under mpirun only rank 0 prints it: every rank parses the same command line. */
int cli_usage_error(const char *command, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* --preset NAME: 1 when NAME is a SANA-Video preset (or NULL), else 0 after a usage error
 * naming the presets (exit 2: a bad value, found before anything is read). */
int cli_check_preset(const char *command, const char *preset);

/* Choices shared by commands: --weights-dtype (lv_dit_weights) and --precision (lv_precision). */
extern const cli_choice cli_weight_dtypes[];
/* --weights-dtype's other spellings, accepted and not listed: q4_k, Q4_K, Q8_0 */
extern const cli_choice cli_weight_dtype_aliases[];
extern const cli_choice cli_precisions[];

#endif
