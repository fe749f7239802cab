/* tok.h - the Gemma 4 BPE tokenizer (tokenizer.ggml.model = "gemma4"), from GGUF metadata.
 *
 * Follows Hugging Face tokenizers as configured for Gemma (docs/model.md 2.1), checked id for id
 * against it on the real 262,144-piece vocabulary (tests/test_tokenizer_real.sh): control,
 * user-defined and unknown tokens (Hugging Face's added tokens) are split out first by exact
 * match (leftmost, longest); in the text between them every space becomes U+2581; the whole
 * segment is one BPE word starting from Unicode characters, merged lowest-rank-first
 * (leftmost on ties); characters missing from the vocabulary fall back to their <0xXX> byte
 * tokens (one <unk> when one of those is missing, consecutive <unk> fused). Internally the segment is cut where no merge can ever join the two sides, so
 * short words merge with a small scan and long ones with a heap (O(n log n)). Pieces point
 * into the model mapping (zero-copy). The tokenizer is read-only after ge_tok_create: any
 * number of threads may encode with it at once. */
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
/* Where each token of text ends: ids[0..n) are ge_tok_encode(text, add_special = false)'s.
 * ends[i] gets the byte of text after token i; mid[i] (mid may be NULL) is true when that
 * end falls inside a character (a <0xHH> piece of a character split in bytes), where ends[i]
 * is the character's start. GE_E_INTERNAL when ids are not text's tokens. */
ge_status ge_tok_spans(const ge_tok *t, const char *text, size_t len, const int32_t *ids,
                       size_t n, size_t *ends, bool *mid);
/* The bytes id stands for (its piece; a <0xHH> piece's one byte) into buf: their count, or
 * -1 when id is out of range or they do not fit in cap. */
int ge_tok_piece(const ge_tok *t, int32_t id, char *buf, size_t cap);
/* The <bos> id when the tokenizer prepends one, else -1. */
int32_t ge_tok_bos_prepended(const ge_tok *t);
/* The <eos> id when the tokenizer appends one, else -1. */
int32_t ge_tok_eos_appended(const ge_tok *t);
/* The index of the first media placeholder id (<|image|>, <|audio|>, <|video|>: the soft
 * tokens that media vectors replace) in ids[0..n), with its piece in *piece (may be NULL);
 * n when there is none. */
size_t ge_tok_find_placeholder(const ge_tok *t, const int32_t *ids, size_t n, const char **piece);

#endif
