/* output.h - result writers: one per format behind the same small interface.
 *
 *   jsonl  {"id":<raw>,"embedding":[...]} per record (float "%.9g" or base64 of LE float32);
 *          with --tokenize {"id":<raw>,"tokens":[...]}; error records inline.
 *   npy    NumPy v1.0 '<f4' (N, dim); the header is written with room for any N and patched
 *          at close, so the output must be seekable. Ids sidecar, errors to the errors file.
 *   f32    raw little-endian float32 rows, no header. Ids sidecar, errors to the errors file.
 *
 * The ids sidecar (PATH.ids.jsonl, or --ids) has one line per row, the raw id. Error records
 * ({"id":<raw>,"error":{"code":...,"message":...}}) go inline for jsonl and to the errors
 * file (--errors, default stderr) for binary formats; with --errors they always go there.
 * Writers never print messages: failures come back as GE_E_IO (write failed) or GE_E_USAGE
 * (an output that cannot work, such as npy on a pipe) with a one-line message. */
#ifndef GE_CLI_OUTPUT_H
#define GE_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge.h"

typedef enum { GE_FMT_AUTO = 0, GE_FMT_JSONL, GE_FMT_NPY, GE_FMT_F32 } ge_fmt;

typedef struct {
    ge_fmt format;      /* resolved: not GE_FMT_AUTO */
    bool base64;        /* jsonl: embedding as a base64 string */
    bool tokenize;      /* jsonl: rows carry tokens, not vectors */
    const char *path;   /* NULL or "-" = stdout */
    const char *errors; /* NULL = inline for jsonl, stderr for npy/f32 */
    const char *ids;    /* NULL = PATH.ids.jsonl (no sidecar when writing to stdout) */
    int dim;            /* floats per row */
} ge_out_cfg;

typedef struct {
    const char *id;         /* raw JSON id bytes */
    size_t id_len;
    const float *vec;       /* [dim] embedding, or NULL in --tokenize mode */
    const int32_t *tokens;  /* [n_tokens] in --tokenize mode */
    size_t n_tokens;
    bool truncated;         /* cut to the context limit by --truncate */
    size_t orig_tokens;     /* token count before truncation */
} ge_row;

typedef struct ge_out ge_out;

/* The format a path's extension asks for (.npy, .f32, else jsonl). */
ge_fmt ge_out_guess(const char *path);

/* Check, before any work, that cfg can be honoured without creating anything: npy needs a
 * seekable output (not a pipe, not an O_APPEND stdout). GE_E_USAGE with a message if not. */
ge_status ge_out_check(const ge_out_cfg *cfg, ge_err *err);

/* Create the output (and sidecar / errors file) and write any header. */
ge_status ge_out_open(ge_out **out, const ge_out_cfg *cfg, ge_err *err);
/* Write one result row (embedding or tokens). */
ge_status ge_out_row(ge_out *o, const ge_row *r, ge_err *err);
/* Write one error record. msg is one line. */
ge_status ge_out_error(ge_out *o, const char *id, size_t id_len, const char *code,
                       const char *msg, ge_err *err);
/* Finish (patch the npy header), flush and close everything, free o. Always frees o; the
 * status reports the first write error. Accepts NULL. */
ge_status ge_out_close(ge_out *o, ge_err *err);

/* How many rows have been written so far. */
unsigned long long ge_out_rows(const ge_out *o);

#endif
