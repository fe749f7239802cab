/* pipeline.h - the record stream of a run, as stages on their own threads:
 *
 *   reader (the calling thread: input, --shard, --resume skip)
 *     -> decode/tokenize workers (images decoded and resized, audio decoded to 16 kHz and
 *        cut, then the record's texts and media blocks tokenized: every token and
 *        soft-token count known here)
 *     -> tower thread (windows of consecutive records: their images and clips through the
 *        vision and audio towers, then the sequences sorted by length and packed into
 *        waves, Matryoshka)
 *     -> writer thread (input order restored, error records, checkpoints, progress).
 *
 * Every input record yields exactly one output row or error record, in input order. Memory
 * is bounded by the ring of records in flight (a record count and a byte budget), whatever
 * the input size. The caller owns the model, the input and the output. */
#ifndef GE_CLI_PIPELINE_H
#define GE_CLI_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cache.h"
#include "ge.h"
#include "input.h"
#include "msg.h"
#include "opts.h"
#include "output.h"

/* The options come as they were parsed (o); the rest is what the run decided from them or
 * opened for them. */
typedef struct {
    const ge_opts *o;
    ge_model *model;
    ge_in *in;
    ge_out *out;
    ge_cache *cache;         /* --cache, or NULL */
    const char *prefix;      /* global prompt prefix (--prompt resolved, or --prefix), or NULL */
    int dim;                 /* output width (Matryoshka): --dim, or the model's */
    ge_fmt format;           /* the output's format */
    bool binary;             /* npy/f32/npz output: rows cannot carry notes */
    bool progress;           /* draw the progress line on stderr */
    unsigned long long skip; /* input records already done (--resume) */
    atomic_int *stop;        /* set by SIGINT/SIGTERM: stop reading, finish the rest */
    int wake_signal;         /* sent to the reader thread to interrupt a blocked read when
                                the run must end early (0: none) */
} ge_pipe_cfg;

/* Where the pipeline's own stages spent their time, in seconds (for --bench FILE); the towers
 * and the encoder inside the tower stage are timed by the model (ge_stats). */
typedef struct {
    double read;                              /* the reader: input parsing, --shard skips */
    double decode[GE_KIND_COUNT];             /* media items by kind: file read and decode */
    unsigned long long decoded[GE_KIND_COUNT];
    double tokenize;                          /* texts and media blocks into token ids */
    double tower;                             /* the tower thread's windows, all of them */
    double write;                             /* rows formatted and written, checkpoints */
} ge_pipe_times;

typedef struct {
    unsigned long long records;  /* records read (this shard) */
    unsigned long long failed;   /* error records written */
    unsigned long long index;    /* input records consumed (all shards), for messages */
    unsigned long long tokens;   /* tokens of the embedded records */
    unsigned long long cached;   /* rows whose vector came from --cache */
    unsigned long long deduped;  /* rows whose content an earlier record of the run had */
    bool out_failed;             /* a write error was reported already */
    bool max_errors_hit;         /* stopped by --max-errors */
    ge_pipe_times times;
} ge_pipe_result;

/* The options whose bounds come from the loaded model: --audio-max-seconds must leave a
 * clip that can fit the context beside <bos>, <eos> and its block's two boundary tokens
 * (327.53 s for 8192 tokens at 25 a second). GE_E_USAGE naming the largest value. */
ge_status ge_pipe_check_options(const ge_opts *o, const ge_model *m, ge_err *err);

/* Run the stream to its end (or a stop). Returns GE_EXIT_OK, GE_EXIT_IO after an input or
 * output error, or GE_EXIT_MODEL when a model file changed on disk (reported on stderr). */
ge_exit ge_pipeline_run(const ge_pipe_cfg *c, ge_pipe_result *res);

#endif
