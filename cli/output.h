/* output.h - result writers: one per format behind the same small interface.
 *
 *   jsonl  {"id":<raw>,"embedding":[...]} per record (float "%.9g", integers for the byte
 *          precisions, or base64 of the row's little-endian bytes);
 *          with --tokenize {"id":<raw>,"tokens":[...]}; error records inline.
 *   npy    NumPy v1.0 (N, width) of the precision's dtype ('<f4' for float32); the header is written with room for any N and patched
 *          at close, so the output must be seekable. Ids sidecar, errors to the errors file.
 *   f32    raw little-endian rows of the precision's element type, no header. Ids sidecar, errors to the errors file.
 *   npz    zip (stored, no compression) of embeddings.npy and ids.npy (a '<U' array of the raw
 *          ids), built at close from unlinked temporary files; works on pipes too.
 *   openai-batch  one line per request in the OpenAI Batch API's output shape: custom_id and
 *          response {status_code, request_id, body {object, data[{object, index,
 *          embedding}], model, usage}} or, for a failed request, a 400 (500 for our own
 *          failures) with body {error {message, type, param, code}}. The rows of a request
 *          are held until its last one and written together; a record that is not a request
 *          is a request of one input whose custom_id is its id.
 *
 * Run description: PATH.meta.json beside an output file (inside an npz: meta.json), a JSON
 * object with the tool version, the identity --resume checks (the fingerprint's fields), the
 * format, precision, dtype, dim and width, rows, input records consumed, shard, the kernel
 * tier and whether the run completed. Written (whole, then renamed into place) when the
 * output is opened, with complete false, and again when it is closed.
 *
 * Records map: beside the output of a --shard run written by its path, PATH.records has one
 * line per input record of the shard, in order: how many units of the output it took (lines
 * of jsonl and openai-batch, rows of npy, f32 and npz; 0 for a failed record whose error went
 * elsewhere). gemmaembed merge interleaves the shards by it. On resume it is cut back to the
 * checkpoint's records (their count follows from it; the state file does not record it).
 *
 * The ids sidecar (PATH.ids.jsonl, or --ids) has one line per row, the raw id (a passage's
 * row: {"id":<raw>,"chunk":K,"chunks":N,"start":S,"end":E}, as jsonl rows carry it). Error records
 * ({"id":<raw>,"error":{"code":...,"message":...}}) go inline for jsonl and to the errors
 * file (--errors, default stderr) for binary formats; with --errors they always go there.
 * Writers never print messages: failures come back as GE_E_IO (write failed) or GE_E_USAGE
 * (an output that cannot work, such as npy on a pipe) with a one-line message.
 *
 * Resume (--resume) and write errors. Beside an output file written by its path (not npz,
 * not a descriptor or device), a state file PATH.resume (resume.h) records what wrote the
 * output and, at each checkpoint, how many input records it covers and the byte length of
 * every file of the set (output, ids sidecar, errors file). ge_out_checkpoint runs whenever
 * the writer catches up: the files are flushed first, then the npy header is patched to the
 * row count and the checkpoint written, so a kill -9 leaves a loadable npy and a state that
 * says what is in it. Resuming checks this run's fingerprint against the recorded one (a
 * mismatch is GE_E_USAGE naming each field), checks that every file of the set is there and
 * long enough, cuts each back to the checkpoint and skips that many input records. After a
 * failed write, closing cuts every file back to the last checkpoint (the npy header
 * included), so the output loads and resumes. The state file stays after a finished run:
 * --resume on a finished output then only processes records appended to the input since. */
#ifndef GE_CLI_OUTPUT_H
#define GE_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge.h"
#include "paths.h"
#include "precision.h"
#include "resume.h"

typedef enum {
    GE_FMT_AUTO = 0,
    GE_FMT_JSONL,
    GE_FMT_NPY,
    GE_FMT_F32,
    GE_FMT_NPZ,
    GE_FMT_OPENAI /* openai-batch */
} ge_fmt;

typedef struct {
    ge_fmt format;      /* resolved: not GE_FMT_AUTO */
    bool base64;        /* jsonl: embedding as a base64 string */
    bool tokenize;      /* jsonl: rows carry tokens, not vectors */
    const char *path;   /* NULL or "-" = stdout */
    const char *errors; /* NULL = inline for jsonl, stderr for npy/f32 */
    const char *ids;    /* NULL = PATH.ids.jsonl (no sidecar when writing to stdout) */
    int dim;            /* values per row (before --precision packs bits) */
    int max_dim;        /* openai-batch: the widest row a request may ask for (0: dim) */
    ge_prec precision;  /* the rows' element type (precision.h) */
    const ge_calib *calib; /* its ranges (int8, uint8), else NULL */
    const char *write_calib; /* --write-calibration PATH, or NULL */
    const char *tier;   /* the kernel tier, for PATH.meta.json (informational) */
    const char *model_name; /* openai-batch: the "model" of a request that names none */
    bool merged;        /* gemmaembed merge's output: no resume state, no records map */
    bool resume;        /* continue the existing output (see above) */
    unsigned long long shard_i, shard_n; /* --shard (n == 0: none) */
    const ge_fingerprint *fp; /* what else decides the rows (model, prompt, options); the
                                 output adds its own fields (format, dim, ...) */
} ge_out_cfg;

/* The OpenAI request a row belongs to (input.h ge_rec_request). */
typedef struct {
    const char *custom_id;  /* raw JSON */
    size_t custom_id_len;
    unsigned i, n;          /* this row is input i of the request's n */
    bool base64;            /* "encoding_format": "base64" */
    const char *model;      /* raw JSON, or NULL */
    size_t model_len;
} ge_row_request;

/* The passage a row holds (--chunk, --late-chunk): chunk of chunks, code points [start, end)
 * of the record's text. */
typedef struct {
    size_t chunk, chunks, start, end;
} ge_row_chunk;

typedef struct {
    const char *id;         /* raw JSON id bytes */
    size_t id_len;
    const float *vec;       /* [dim] embedding, or NULL in --tokenize mode */
    const int32_t *tokens;  /* [n_tokens] in --tokenize mode */
    size_t n_tokens;
    bool truncated;         /* cut to the context limit by --truncate */
    size_t orig_tokens;     /* token count before truncation */
    size_t used_tokens;     /* tokens embedded (openai-batch "usage") */
    int dim;                /* values in vec; 0: the output's dim */
    unsigned long long index; /* the record's 1-based input index (openai-batch ids) */
    const ge_row_request *req; /* the OpenAI request it answers, or NULL */
    const ge_row_chunk *chunk; /* its passage, or NULL; the record ends with its last */
    const char *raw;        /* gemmaembed merge: the row as written already (a jsonl or
                               openai-batch line without its newline, or row_bytes bytes) */
    size_t raw_len;
    unsigned raw_rows;      /* the vectors a raw line holds (0: an error line) */
} ge_row;

typedef struct ge_out ge_out;

/* The format of a name ("jsonl", ..., "openai-batch"), or GE_FMT_AUTO. */
ge_fmt ge_out_format_of(const char *name);

/* The format a path's extension asks for (.npy, .f32, .npz, else jsonl). */
ge_fmt ge_out_guess(const char *path);

/* True when cfg's output has a run description (PATH.meta.json beside a regular file written
 * by its path; meta.json inside any npz): its identity (cfg->fp) must then be built. */
bool ge_out_has_meta(const ge_out_cfg *cfg);

/* Check, before any work, that cfg can be honoured without creating anything: npy needs a
 * seekable output (not a pipe, not in append mode), --resume a regular file by its path.
 * GE_E_USAGE with a message if not. */
ge_status ge_out_check(const ge_out_cfg *cfg, ge_err *err);

/* True when cfg's output keeps a state file (a regular file written by its path, not npz):
 * its fingerprint (cfg->fp) must then be complete. */
bool ge_out_has_state(const ge_out_cfg *cfg);

/* The files cfg's output writes (output, state, ids, errors), for ge_paths_check: at most 4
 * into u; names holds the paths made here (PATH.resume, PATH.ids.jsonl). */
size_t ge_out_uses(const ge_out_cfg *cfg, ge_path_use *u, char names[][4200]);

/* Create the output (and sidecar / errors file) and write any header. With cfg->resume and
 * an existing output, reopen it instead, check it against its state, cut it back to its last
 * checkpoint and set *skip to the number of input records to skip (0 otherwise). Paths that
 * name a descriptor are written through it (paths.h). */
ge_status ge_out_open(ge_out **out, const ge_out_cfg *cfg, unsigned long long *skip,
                      ge_err *err);
/* Something the user should know about the open ("starting again ..."), or "". */
const char *ge_out_note(const ge_out *o);
/* Everything up to `records` input records (counted from the start of the input, records
 * of other shards included) is written: flush and, for outputs with a state file, record
 * the checkpoint. */
ge_status ge_out_checkpoint(ge_out *o, unsigned long long records, ge_err *err);
/* True once a write failed with EPIPE (a reader closed the pipe). */
bool ge_out_epipe(void);
/* The run read its whole input and wrote every record: the run description says complete. */
void ge_out_mark_complete(ge_out *o);
/* Write one result row (embedding or tokens). */
ge_status ge_out_row(ge_out *o, const ge_row *r, ge_err *err);
/* Write one error record. msg is one line. r: its id, and (openai-batch) its request and
 * index; vec unused. */
ge_status ge_out_error(ge_out *o, const ge_row *r, const char *code, const char *msg,
                       ge_err *err);
/* Finish (patch the npy header), flush and close everything, free o. Always frees o; the
 * status reports the first write error. After a write error every file of a resumable output
 * is cut back to its last checkpoint, and note (when not NULL) says so. Accepts NULL. */
ge_status ge_out_close(ge_out *o, char *note, size_t note_len, ge_err *err);

/* How many rows have been written so far. */
unsigned long long ge_out_rows(const ge_out *o);

#endif
