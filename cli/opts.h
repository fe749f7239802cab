/* opts.h - the command line of gemmaembed.
 *
 * One option table (opts.c) drives getopt_long, the parsing and checking of every value,
 * --help and the man page check. Parsing only fills a ge_opts value and reports a usage
 * error as a GE_E_USAGE ge_err: it never prints or exits and knows nothing about the model
 * (checks that need the model, such as --dim against the model's width, happen in main.c). */
#ifndef GE_CLI_OPTS_H
#define GE_CLI_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "input.h"
#include "output.h"

typedef struct {
    const char *model;      /* -m, or $GEMMAEMBED_MODEL; NULL when neither is set */
    const char *mmproj[2];  /* --mmproj (repeatable), or $GEMMAEMBED_MMPROJ */
    int n_mmproj;
    int image_tokens;       /* --image-tokens: soft tokens per image (budget) */
    double audio_max_seconds; /* --audio-max-seconds: audio past this is cut, as HF does */
    int video_tokens;       /* --video-tokens: soft tokens per video frame (budget) */
    double video_fps;       /* --video-fps: frames sampled per second of video */
    int video_frames;       /* --video-frames: at most this many frames per video */
    const char *output;     /* -o; NULL = stdout */
    const char *errors;     /* --errors; NULL = default (see output.h) */
    const char *ids;        /* --ids; NULL = OUTPUT.ids.jsonl */
    ge_fmt format;          /* --format; GE_FMT_AUTO = from the -o extension */
    ge_in_kind input;       /* --input; GE_IN_AUTO = guessed per file */
    bool base64;            /* --encoding base64 */
    int dim;                /* --dim; 0 = the model's width */
    ge_prec precision;      /* --precision */
    const char *calibration; /* --calibration PATH.npy (int8, uint8) */
    const char *write_calibration; /* --write-calibration PATH.npy */
    const char *cache;      /* --cache DIR */
    const char *prompt;     /* --prompt NAME (not yet resolved) */
    const char *prefix;     /* --prefix STR */
    bool truncate, tokenize, quiet;
    unsigned chunk;         /* --chunk / --late-chunk N: passage size in tokens; 0: off */
    unsigned chunk_overlap; /* their :OVERLAP */
    bool late_chunk;        /* --late-chunk: pool passages from one pass over the text */
    bool chunk_flag;        /* the mode came from a flag (else from the environment) */
    bool resume;            /* --resume */
    bool progress;          /* --progress (wins over --quiet for the progress line) */
    unsigned long long shard_i, shard_n; /* --shard i/n; n == 0: no sharding */
    bool help, version, print_config;
    bool bench;             /* --bench */
    const char *bench_json; /* --bench-json PATH */
    int bench_reps;         /* --bench-reps N */
    ge_config cfg;          /* engine switches: defaults < environment < flags */
    unsigned long long max_errors; /* --max-errors; 0 = no limit */
    int failed_exit;        /* --failed-exit: the status when some records failed */
    char **files;           /* FILE operands; nfiles == 0 means stdin */
    int nfiles;
} ge_opts;

/* Parse argv into *o (defaults first, then the environment, then the flags). On a usage
 * error returns GE_E_USAGE with a one-line message in err (no "gemmaembed: " prefix). */
ge_status ge_opts_parse(int argc, char **argv, ge_opts *o, ge_err *err);

/* Print the full --help text (every flag with its default, the prompt names) to f. */
void ge_opts_help(FILE *f);

#endif
