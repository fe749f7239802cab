/* ge.h - the public API of the gemmaembed engine: the only engine header cli/ includes.
 *
 * The engine loads an EmbeddingGemma 2 GGUF file, tokenizes text and computes sentence
 * embeddings. It never prints, exits or reads the environment: every failure comes back as
 * a ge_status plus a one-line message in a caller-provided ge_err. */
#ifndef GE_H
#define GE_H

#include <stddef.h>
#include <stdint.h>

/* ---- status ---------------------------------------------------------------------------- */

typedef enum {
    GE_OK = 0,
    GE_E_USAGE,       /* bad argument from the caller */
    GE_E_IO,          /* open/read/map failed */
    GE_E_FORMAT,      /* malformed file or record */
    GE_E_UNSUPPORTED, /* valid but not handled (tensor type, architecture) */
    GE_E_LIMIT,       /* over a size limit (context length, counts) */
    GE_E_INPUT,       /* bad input record content */
    GE_E_NOMEM,
    GE_E_INTERNAL
} ge_status;

typedef struct {
    ge_status code;
    char msg[512]; /* one line, no trailing newline */
} ge_err;

/* Record `code` and a printf-style message in err (err may be NULL); returns code, so a
 * failure is one line: return ge_fail(err, GE_E_FORMAT, "%s: ...", path). */
ge_status ge_fail(ge_err *err, ge_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix err->msg with "prefix: " (adds context such as a file name or record line). */
void ge_err_prefix(ge_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Short stable name of a status ("format", "limit", ...), for error records. */
const char *ge_status_name(ge_status code);

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n) (shortest form, no surrogates, at most
 * U+10FFFF), or 0 when it is not one. n must be >= 1. */
size_t ge_utf8_seq(const char *s, size_t n);
/* Byte offset of the first invalid UTF-8 sequence in s[0..len), or len when s is valid. */
size_t ge_utf8_check(const char *s, size_t len);

/* ---- model ----------------------------------------------------------------------------- */

typedef struct ge_model ge_model;

/* Open and validate a gemma-embedding2 GGUF text model (mmap, read-only, zero-copy).
 * Every hyperparameter comes from metadata; every tensor's name, type and shape is
 * checked. On failure *out is NULL and err names the file, the tensor and the cause. */
ge_status ge_model_open(ge_model **out, const char *path, ge_err *err);
void ge_model_free(ge_model *m); /* accepts NULL */

int ge_model_dim(const ge_model *m);         /* output width E (768 for the real model) */
int ge_model_max_tokens(const ge_model *m);  /* context limit per record (8192) */
const char *ge_model_describe(const ge_model *m); /* one line: layers, widths, vocab, types */

/* ---- prompts (SPEC.md 2.2) ------------------------------------------------------------- */

/* The prefix string of a prompt name ("query", "document", "STS", ...; case-insensitive),
 * or NULL when the name is unknown. */
const char *ge_prompt_find(const char *name);
/* NULL-terminated list of the canonical prompt names, for --help. */
const char *const *ge_prompt_names(void);

/* ---- tokenizer ------------------------------------------------------------------------- */

typedef struct {
    int32_t *ids;
    size_t n, cap;
} ge_tokens;

/* Tokenize prefix+text (prefix may be NULL) exactly as the encoder sees it: <bos> and <eos>
 * added when the model's metadata asks for them. text must be valid UTF-8 (GE_E_INPUT
 * otherwise). Appends to out (which starts zeroed or cleared with out->n = 0). */
ge_status ge_tokenize(const ge_model *m, const char *prefix, const char *text, size_t len,
                      ge_tokens *out, ge_err *err);
/* Cut a tokenized record to at most max tokens, keeping the final <eos> when present. */
void ge_tokens_truncate(const ge_model *m, ge_tokens *t, size_t max);
void ge_tokens_free(ge_tokens *t); /* frees ids; accepts NULL */

/* ---- embedding ------------------------------------------------------------------------- */

/* Embed one token sequence: out receives the L2-normalised [ge_model_dim] vector.
 * GE_E_LIMIT when n > ge_model_max_tokens; GE_E_INPUT for an id outside the vocabulary. */
ge_status ge_embed(ge_model *m, const int32_t *ids, size_t n, float *out, ge_err *err);

/* Matryoshka: keep the first dim entries of an embedding and L2-normalise them again. */
void ge_matryoshka(float *v, int dim);

#endif
