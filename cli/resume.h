/* resume.h - the state file kept beside a file output (PATH.resume): which configuration
 * wrote the output, and how far it got.
 *
 * Layout: two checkpoint slots of GE_STATE_SLOT bytes written alternately, each one text line
 * with a sequence number and a crc32, so that a torn write leaves the other valid; then the
 * fingerprint, written once when the output is created: "key=value" lines for everything
 * that decides the rows (model files by size and content hash, prompt, dim, format,
 * encoding, mode, semantics, media options, the switches that change numbers), ended by a
 * line with its crc32. Each slot carries the fingerprint's crc too, so slots and fingerprint
 * cannot come from two different runs.
 *
 * A resumed run rebuilds its own fingerprint and refuses to continue an output written with
 * another one, naming every field that differs. Text from an older or damaged state file is
 * never guessed at: it is refused. */
#ifndef GE_CLI_RESUME_H
#define GE_CLI_RESUME_H

#include <stdbool.h>
#include <stddef.h>

#include "ge.h"

#define GE_STATE_SLOT 256
#define GE_STATE_FP_AT (2 * GE_STATE_SLOT)
#define GE_STATE_FP_MAX 8192

typedef struct {
    unsigned long long seq;     /* slot sequence number: the higher valid one wins */
    unsigned long long records; /* input records consumed (all shards) */
    unsigned long long rows;    /* rows in the output */
    long long out, ids, errors; /* byte lengths of the files of the set; -1: not a file */
} ge_ckpt;

typedef struct {
    char text[GE_STATE_FP_MAX]; /* "key=value\n" lines */
    size_t len;
    bool overflow; /* a field did not fit (the fingerprint is then refused) */
} ge_fingerprint;

/* Append "key=value\n". A value may end with "  # note": the note is shown in messages but
 * not compared (a model file's name: the same bytes under another name are the same model). */
void ge_fp_add(ge_fingerprint *fp, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Every field whose value differs between was and now (either missing counts), as
 * "key (was X, now Y), ..." into msg. false when they agree. */
bool ge_fp_diff(const ge_fingerprint *was, const ge_fingerprint *now, char *msg, size_t n);

/* The bytes of a state file for checkpoint c (slot c->seq % 2) of fingerprint fp: the slot
 * into slot[GE_STATE_SLOT]; the fingerprint block into block (at most GE_STATE_FP_MAX + 32
 * bytes), its length into *block_len. */
void ge_state_slot(const ge_ckpt *c, const ge_fingerprint *fp, char *slot);
void ge_state_fp_block(const ge_fingerprint *fp, char *block, size_t *block_len);

/* Parse a whole state file: the newest valid slot into *c and the fingerprint into *fp.
 * GE_E_FORMAT with the reason ("no valid checkpoint", "damaged fingerprint", "written by an
 * older gemmaembed") otherwise. Never reads outside buf[0..len). */
ge_status ge_state_parse(const char *buf, size_t len, ge_ckpt *c, ge_fingerprint *fp,
                         ge_err *err);

#endif
