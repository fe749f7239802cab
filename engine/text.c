/* text.c - text entry points of ge.h around the encoder: prompt + text tokenization,
 * truncation that keeps <eos>, and Matryoshka normalisation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void ge_matryoshka(float *v, int dim)
{
    double ss = 0.0;
    for (int i = 0; i < dim; i++)
        ss += (double)v[i] * v[i];
    double norm = sqrt(ss);
    float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
    for (int i = 0; i < dim; i++)
        v[i] *= inv;
}

/* ---- tokenizer entry points (ge.h) ---------------------------------------------------- */

ge_status ge_tokenize(const ge_model *m, const char *prefix, const char *text, size_t len,
                      ge_tokens *out, ge_err *err)
{
    size_t start = out->n;
    ge_status st;
    if (!prefix || !*prefix) {
        st = ge_tok_encode(m->tok, text, len, true, out, err);
    } else {
        /* the prompt and the text are one string, so BPE can merge across the boundary */
        size_t pl = strlen(prefix);
        char *joined = malloc(pl + len + 1);
        if (!joined)
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        memcpy(joined, prefix, pl);
        memcpy(joined + pl, text, len);
        st = ge_tok_encode(m->tok, joined, pl + len, true, out, err);
        free(joined);
    }
    if (st) {
        out->n = start;
        return st;
    }
    /* A media placeholder (<|image|>, <|audio|>, <|video|>) is a slot for media vectors
     * (SPEC.md 2.4). A text record has none to put there, so it is an error, never a <pad>
     * row or a silent removal. The boundary tokens (<|image>, <image|>, ...) stay ordinary
     * control tokens, as in Hugging Face. */
    const char *ph = NULL;
    size_t at = ge_tok_find_placeholder(m->tok, out->ids + start, out->n - start, &ph);
    if (at == out->n - start)
        return GE_OK;
    out->n = start;
    const char *where = memmem(text, len, ph, strlen(ph));
    if (where)
        return ge_fail(err, GE_E_INPUT, "the text contains the media placeholder %s (at byte "
                       "%zu); a text record cannot hold media placeholders", ph,
                       (size_t)(where - text) + 1);
    return ge_fail(err, GE_E_INPUT, "the prompt or title contains the media placeholder %s; "
                   "a text record cannot hold media placeholders", ph);
}

void ge_tokens_truncate(const ge_model *m, ge_tokens *t, size_t max)
{
    if (t->n <= max || max == 0)
        return;
    int32_t eos = ge_tok_eos_appended(m->tok);
    bool keep_eos = eos >= 0 && t->ids[t->n - 1] == eos;
    t->n = max;
    if (keep_eos)
        t->ids[max - 1] = eos;
}
