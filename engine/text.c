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
     * (docs/model.md 2.4). A text record has none to put there, so it is an error, never a <pad>
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

ge_status ge_tokenize_spans(const ge_model *m, const char *prefix, const char *text, size_t len,
                            ge_tokens *out, size_t **ends, bool **mid, ge_err *err)
{
    *ends = NULL, *mid = NULL;
    out->n = 0;
    ge_status st = ge_tokenize(m, prefix, text, len, out, err);
    if (st)
        return st;
    const size_t pl = prefix ? strlen(prefix) : 0, n = out->n;
    char *joined = malloc(pl + len + 1);
    *ends = malloc((n ? n : 1) * sizeof **ends);
    *mid = calloc(n ? n : 1, sizeof **mid);
    if (!joined || !*ends || !*mid) {
        free(joined), free(*ends), free(*mid);
        *ends = NULL, *mid = NULL;
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    if (pl)
        memcpy(joined, prefix, pl);
    memcpy(joined + pl, text, len);
    /* the framing tokens: <bos> first and <eos> last, when the metadata adds them */
    const size_t lo = n && ge_tok_bos_prepended(m->tok) >= 0 ? 1 : 0;
    const size_t hi = n > lo && ge_tok_eos_appended(m->tok) >= 0 ? n - 1 : n;
    if (lo)
        (*ends)[0] = 0;
    if (hi < n)
        (*ends)[n - 1] = pl + len;
    st = ge_tok_spans(m->tok, joined, pl + len, out->ids + lo, hi - lo, *ends + lo, *mid + lo);
    free(joined);
    if (st) {
        free(*ends), free(*mid);
        *ends = NULL, *mid = NULL;
        return ge_fail(err, GE_E_INTERNAL, "the tokens do not spell the text");
    }
    return GE_OK;
}

void ge_tokens_frame(const ge_model *m, size_t *bos, size_t *eos)
{
    *bos = ge_tok_bos_prepended(m->tok) >= 0;
    *eos = ge_tok_eos_appended(m->tok) >= 0;
}

static ge_status push_id(ge_tokens *t, int32_t id, ge_err *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *ids = realloc(t->ids, cap * sizeof *ids);
        if (!ids)
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        t->ids = ids, t->cap = cap;
    }
    t->ids[t->n++] = id;
    return GE_OK;
}

ge_status ge_tokenize_parts(const ge_model *m, const char *prefix, const ge_part *parts,
                            size_t n, ge_tokens *out, ge_err *err)
{
    /* one string: the prefix, the texts, and one placeholder piece per media item */
    size_t len = prefix ? strlen(prefix) : 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].kind == GE_KIND_TEXT) {
            for (int k = GE_KIND_TEXT + 1; k < GE_KIND_COUNT; k++) {
                const char *soft = ge_modality_of((ge_kind)k)->soft;
                if (memmem(parts[i].text, parts[i].len, soft, strlen(soft)))
                    return ge_fail(err, GE_E_INPUT, "text part %zu contains the media "
                                   "placeholder %s", i + 1, soft);
            }
            len += parts[i].len;
        } else {
            len += strlen(ge_modality_of(parts[i].kind)->soft);
        }
    }
    char *s = malloc(len + 1);
    ge_tokens mid = {0};
    if (!s)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    if (prefix)
        memcpy(s, prefix, strlen(prefix)), at = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        const char *p = parts[i].kind == GE_KIND_TEXT ? parts[i].text
                                                      : ge_modality_of(parts[i].kind)->soft;
        size_t pl = parts[i].kind == GE_KIND_TEXT ? parts[i].len : strlen(p);
        memcpy(s + at, p, pl);
        at += pl;
    }
    ge_status st = ge_tok_encode(m->tok, s, len, true, &mid, err);
    free(s);
    /* expand each placeholder, in order, into its media item's block */
    size_t start = out->n, next = 0;
    for (size_t i = 0; !st && i < mid.n; i++) {
        if (ge_tok_find_placeholder(m->tok, mid.ids + i, 1, NULL) == 1) {
            st = push_id(out, mid.ids[i], err);
            continue;
        }
        while (next < n && parts[next].kind == GE_KIND_TEXT)
            next++;
        if (next == n) { /* cannot happen: the texts hold no placeholder */
            st = ge_fail(err, GE_E_INTERNAL, "more placeholders than media items");
            break;
        }
        const ge_modality *md = ge_modality_of(parts[next++].kind);
        const int n_soft = parts[next - 1].n_soft;
        const char *const block[3] = {md->soft, md->open, md->close};
        int32_t ids[3];
        for (int k = 0; k < 3; k++)
            if ((ids[k] = ge_tok_find(m->tok, block[k], strlen(block[k]))) < 0)
                st = ge_fail(err, GE_E_UNSUPPORTED, "the vocabulary has no %s token", block[k]);
        if (!st)
            st = push_id(out, ids[1], err);
        for (int k = 0; !st && k < n_soft; k++)
            st = push_id(out, ids[0], err);
        if (!st)
            st = push_id(out, ids[2], err);
    }
    while (!st && next < n && parts[next].kind == GE_KIND_TEXT)
        next++;
    if (!st && next < n) /* special pieces are split out before BPE: cannot happen */
        st = ge_fail(err, GE_E_INTERNAL, "fewer placeholders than media items");
    ge_tokens_free(&mid);
    if (st)
        out->n = start;
    return st;
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
