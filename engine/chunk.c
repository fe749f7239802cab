/* chunk.c - passages of a long text (ge.h ge_chunk_plan; docs/model.md 2.6).
 *
 * The rules, restated in tools/ref/chunk.py: windows of at most `budget` tokens; a window
 * that does not reach the end is cut at the last sentence end within its last tenth, else at
 * its last whitespace there, else at its last token end, never inside a character (a byte
 * piece); the next window starts `overlap` tokens before the cut (at least one token after
 * the previous start, and never inside a character). */
#include <stdlib.h>
#include <string.h>

#include "ge.h"

/* A character that ends a sentence: . ! ? and the CJK full stops (U+3002, U+FF01, U+FF1F). */
static bool sentence_end(const char *t, size_t at)
{
    if (at == 0)
        return false;
    const unsigned char c = (unsigned char)t[at - 1];
    if (c == '.' || c == '!' || c == '?')
        return true;
    return at >= 3 && ((!memcmp(t + at - 3, "\xe3\x80\x82", 3)) ||
                       !memcmp(t + at - 3, "\xef\xbc\x81", 3) ||
                       !memcmp(t + at - 3, "\xef\xbc\x9f", 3));
}

static bool space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* May a passage end after token k - 1 (k tokens in)? Not inside a character. */
static bool boundary(const bool *mid, size_t k) { return k == 0 || !mid[k - 1]; }

ge_status ge_chunk_plan(const char *text, size_t len, const size_t *ends, const bool *mid,
                        size_t n, size_t budget, size_t overlap, ge_passage **out,
                        size_t *n_out)
{
    *out = NULL, *n_out = 0;
    if (budget == 0 || overlap >= budget)
        return GE_E_USAGE;
    size_t cap = 8, np = 0;
    ge_passage *p = malloc(cap * sizeof *p);
    if (!p)
        return GE_E_NOMEM;
    size_t s = 0;
    for (;;) {
        size_t e = n - s > budget ? s + budget : n;
        if (e < n) {
            const size_t tenth = budget / 10 > 0 ? budget / 10 : 1;
            const size_t from = e - tenth > s ? e - tenth : s + 1;
            size_t sent = 0, ws = 0, any = 0;
            for (size_t c = from; c <= e; c++) {
                if (!boundary(mid, c))
                    continue;
                const size_t at = ends[c - 1];
                any = c;
                if (sentence_end(text, at) && (at == len || space(text[at])))
                    sent = c;
                if (at == len || space(text[at]) || (at > 0 && space(text[at - 1])))
                    ws = c;
            }
            e = sent ? sent : ws ? ws : any ? any : e;
            while (e > s + 1 && !boundary(mid, e)) /* a character over the whole tenth */
                e--;
        }
        if (np == cap) {
            ge_passage *q = realloc(p, 2 * cap * sizeof *p);
            if (!q)
                return free(p), GE_E_NOMEM;
            p = q, cap *= 2;
        }
        p[np++] = (ge_passage){s, e, s ? ends[s - 1] : 0, e ? ends[e - 1] : 0};
        if (e >= n)
            break;
        size_t next = e > s + overlap ? e - overlap : s + 1;
        if (next <= s)
            next = s + 1;
        while (next > s + 1 && !boundary(mid, next))
            next--;
        while (!boundary(mid, next) && next < e)
            next++;
        s = next;
    }
    *out = p, *n_out = np;
    return GE_OK;
}

/* Context a window gives a passage on one side: unlimited at the document's own edge. */
static size_t side(size_t window_edge, size_t doc_edge, size_t gap)
{
    return window_edge == doc_edge ? SIZE_MAX : gap;
}

ge_status ge_chunk_windows(size_t n, size_t room, const ge_passage *p, size_t np,
                           ge_window **out, size_t *n_out, size_t *window_of)
{
    *out = NULL, *n_out = 0;
    size_t longest = 0;
    for (size_t i = 0; i < np; i++)
        longest = p[i].tok_hi - p[i].tok_lo > longest ? p[i].tok_hi - p[i].tok_lo : longest;
    if (room == 0 || longest > room)
        return GE_E_USAGE;
    const size_t stride = room - longest;
    /* windows every `stride` tokens hold every passage; with less than a quarter of a
     * window to step by, one window per passage, centred on it, costs fewer passes */
    const bool strided = n <= room || (stride > 0 && stride >= room / 4);
    size_t cap = strided ? (n <= room ? 1 : (n - room + stride - 1) / stride + 1) : np;
    ge_window *w = malloc((cap ? cap : 1) * sizeof *w);
    if (!w)
        return GE_E_NOMEM;
    size_t nw = 0;
    if (strided) {
        for (size_t a = 0;; a += stride) {
            w[nw++] = (ge_window){a, a + room < n ? a + room : n};
            if (a + room >= n)
                break;
        }
    } else {
        for (size_t i = 0; i < np; i++) {
            const size_t mid = (p[i].tok_lo + p[i].tok_hi) / 2;
            size_t a = mid > room / 2 ? mid - room / 2 : 0;
            a = a + room > n ? n - room : a;
            w[nw++] = (ge_window){a, a + room};
        }
    }
    for (size_t i = 0; i < np; i++) { /* the window with the most context on both sides */
        size_t best = SIZE_MAX, best_ctx = 0;
        for (size_t j = 0; j < nw; j++) {
            if (w[j].lo > p[i].tok_lo || w[j].hi < p[i].tok_hi)
                continue;
            const size_t l = side(w[j].lo, 0, p[i].tok_lo - w[j].lo);
            const size_t r = side(w[j].hi, n, w[j].hi - p[i].tok_hi);
            const size_t ctx = l < r ? l : r;
            if (best == SIZE_MAX || ctx > best_ctx)
                best = j, best_ctx = ctx;
        }
        window_of[i] = best;
    }
    *out = w, *n_out = nw;
    return GE_OK;
}
