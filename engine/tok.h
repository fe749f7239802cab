/* tok.h - the Gemma 4 BPE tokenizer (tokenizer.ggml.model = "gemma4"), from GGUF metadata.
 *
 * Follows Hugging Face tokenizers as configured for Gemma (SPEC.md 2.1): control and
 * user-defined tokens are split out first by exact match (leftmost, longest); in the text
 * between them every space becomes U+2581; the whole segment is one BPE word starting from
 * Unicode characters, merged lowest-rank-first (leftmost on ties) with a priority queue, so a
 * long input costs O(n log n); characters missing from the vocabulary fall back to <0xXX>
 * byte tokens. Pieces point into the model mapping (zero-copy). */
#ifndef GE_TOK_H
#define GE_TOK_H

#include <stdbool.h>

#include "ge.h"
#include "gguf.h"

typedef struct ge_tok ge_tok;

ge_status ge_tok_create(ge_tok **out, const ge_gguf *g, ge_err *err);
void ge_tok_free(ge_tok *t); /* accepts NULL */

int ge_tok_vocab_size(const ge_tok *t);
/* Id of an exact piece, or -1. */
int32_t ge_tok_find(const ge_tok *t, const char *piece, size_t len);
/* Append the ids of text (valid UTF-8, else GE_E_INPUT) to out; with add_special, the
 * <bos>/<eos> the metadata asks for frame the sequence. */
ge_status ge_tok_encode(const ge_tok *t, const char *text, size_t len, bool add_special,
                        ge_tokens *out, ge_err *err);
/* The <eos> id when the tokenizer appends one, else -1. */
int32_t ge_tok_eos_appended(const ge_tok *t);

#endif
