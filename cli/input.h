/* input.h - record readers: the FILE operands (or stdin) as one stream of records.
 *
 * Each input is read through zlib (gzip is decompressed, plain files pass through) and split
 * into lines; a line becomes a record in "lines" mode (the line is the text) or "jsonl" mode
 * (one JSON object per line). A record carries where it came from (source name and line, for
 * messages), its raw id bytes (echoed verbatim by the writers) and either its text and prompt
 * prefix or a per-record error (code + message). Reading never prints; I/O failures come back
 * as a ge_err. Tokenizing and embedding are main.c's job. */
#ifndef GE_CLI_INPUT_H
#define GE_CLI_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "ge.h"

/* GE_IN_FILES: one path per line; each names a media file (never guessed: --input files). */
typedef enum { GE_IN_AUTO = 0, GE_IN_JSONL, GE_IN_LINES, GE_IN_FILES } ge_in_kind;

/* Longest accepted line; a longer one becomes a "too_long" error record (memory stays
 * bounded whatever the input). */
#define GE_IN_MAX_LINE ((size_t)64 << 20)

/* One item of a record with media, in record order. */
typedef struct {
    ge_kind kind;
    const char *data;   /* text: its UTF-8; media: the file path (NUL-terminated), or the
                           bytes themselves when inline (base64 field or data: URI) */
    size_t len;
    bool inline_bytes;
    bool by_streams;    /* --input files, a container of video and/or sound (MP4, Matroska,
                           ...): a video item when it has a video stream, else an audio item */
} ge_rec_item;

/* Most inputs in one OpenAI request (the API's own limit). */
#define GE_IN_MAX_INPUTS 2048

/* A record that is an OpenAI Batch API embeddings request ({"custom_id", "method": "POST",
 * "url": "/v1/embeddings", "body": {"input": a string or a list of strings, "dimensions",
 * "encoding_format", "model"}}): its id is custom_id, and each input becomes a vector of its
 * own, the request's rows written together. */
typedef struct {
    const char *const *texts; /* n input strings (valid UTF-8) and their lengths */
    const size_t *lens;
    size_t n;
    bool list;               /* "input" was a list (even of one) */
    int dim;                 /* "dimensions", 0 when absent */
    int base64;              /* "encoding_format": 1 "base64", 0 "float", -1 absent */
    const char *model;       /* "model" as raw JSON, or NULL */
    size_t model_len;
} ge_rec_request;

typedef struct {
    const char *source;      /* input name for messages: the path, or "<stdin>" */
    unsigned long long line; /* 1-based line number inside source */
    unsigned long long seq;  /* 1-based line number across all inputs: the default id */
    const char *id;          /* raw JSON text of the id, as it appeared (not NUL-terminated) */
    size_t id_len;
    const char *text;        /* the text to embed (may contain NUL; valid UTF-8) */
    size_t text_len;
    const char *prefix;      /* this record's prompt prefix, or NULL to use the global one */
    const ge_rec_item *items; /* a record with media: its items (text unused), else NULL */
    size_t n_items;
    const ge_rec_request *request; /* an OpenAI request (text unused), else NULL; an error
                                      record of one has it too, with n = 0 */
    const char *err_code;    /* NULL for a good record, else "bad_json", "bad_record", ... */
    char err_msg[640];       /* "source:line: what went wrong" when err_code is set */
} ge_rec;

typedef struct ge_in ge_in;

/* Check that path ("-" = stdin) can be opened for reading and is not a directory, so an
 * unreadable operand is reported before any work starts. GE_E_IO with "path: reason". */
ge_status ge_in_check(const char *path, ge_err *err);

/* A reader over paths[0..n) in order (n == 0: stdin). kind GE_IN_AUTO guesses each input's
 * format from its first non-blank byte ('{' = jsonl, else lines). paths must outlive it. */
ge_in *ge_in_create(char **paths, int n, ge_in_kind kind);

/* Next record into *r: 1 = a record (good or an error record), 0 = end of all inputs,
 * -1 = I/O error (err set; the stream cannot continue). The pointers in *r stay valid until
 * the next call. Blank lines in jsonl inputs are not records (they are skipped, but still
 * counted for line numbers); in lines mode every line is a record, an empty line included. */
int ge_in_next(ge_in *in, ge_rec *r, ge_err *err);

/* Skip up to n records without parsing them (--resume, --shard): the same records
 * ge_in_next would return, counted the same way (blank lines of jsonl and files inputs are
 * not records), line numbers and default ids still advance. *skipped gets how many were
 * skipped (fewer than n at the end of the input). GE_E_IO (or GE_E_NOMEM) on an error. */
ge_status ge_in_skip(ge_in *in, unsigned long long n, unsigned long long *skipped,
                     ge_err *err);

/* Input bytes consumed so far (compressed bytes for gzip inputs) and the total size of the
 * inputs, 0 when unknown (some input is not a regular file). For progress and ETA. */
void ge_in_position(const ge_in *in, unsigned long long *done, unsigned long long *total);

void ge_in_free(ge_in *in); /* accepts NULL */
/* While reading, ask interrupted(ctx) at least every 100 ms when no bytes come; true ends the
 * read as an error (as a signal's EINTR does): a stop request cannot be missed by a read that
 * was about to block. NULL: plain blocking reads. */
void ge_in_set_interrupt(ge_in *in, bool (*interrupted)(void *ctx), void *ctx);

#endif
