/* fuzz_tok.c - libFuzzer target: the tokenizer (engine/tok.c ge_tok_encode) on arbitrary
 * bytes, checked against an independent, deliberately naive reference.
 *
 * The vocabulary is loaded once from GE_FUZZ_MODEL (default testdata/tiny-f32.gguf; the
 * real-vocabulary fixture build/bench/gemma4-vocab.gguf works too). Each input is encoded
 * as given (invalid UTF-8 must be a GE_E_INPUT naming the first bad byte) and, with its
 * invalid bytes dropped, as valid UTF-8, where the ids must equal the reference's:
 *   - special (control, user-defined, unknown) pieces are cut out leftmost-longest, a match
 *     starting and ending on a character boundary;
 *   - in the text between them every character (a space read as U+2581) is its own piece,
 *     else its <0xHH> byte pieces, else one <unk> (consecutive ones fused);
 *   - the whole segment is one BPE word: repeatedly merge the adjacent pair of lowest merge
 *     rank, leftmost on ties.
 * That is tok.h's definition without any of tok.c's speed-ups (hash tables, the word split
 * on joinable character pairs, the heap). When no <unk> appears the ids must also decode
 * back to the text (U+2581 read as a space on both sides), and with add_special the same
 * ids come framed by <bos>/<eos> as the metadata asks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"
#include "gguf.h"
#include "tok.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_BYTE = 6 };

static ge_gguf *g;
static ge_tok *tok;

/* reference vocabulary */
static ge_gguf_str *pieces;
static int32_t *types;
static size_t n_vocab;
static int32_t *by_bytes;     /* ids sorted by piece bytes, then id */
static int32_t byte_id[256];
static int32_t bos, eos, unk;
static bool add_bos, add_eos;
static int32_t *specials;     /* special ids grouped by first byte */
static size_t special_start[257];

typedef struct {
    uint64_t key;
    int32_t rank, result;
} merge;
static merge *merges;
static size_t n_merges;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_tok: %s: %s\n", what, msg);
    abort();
}

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : al < bl ? -1 : al > bl;
}

static int cmp_piece(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    int c = cmp_bytes(pieces[a].ptr, pieces[a].len, pieces[b].ptr, pieces[b].len);
    return c ? c : (a > b) - (a < b);
}

/* The first id whose piece is s[0..n), or -1. */
static int32_t lookup(const char *s, size_t n)
{
    size_t lo = 0, hi = n_vocab;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const ge_gguf_str *p = &pieces[by_bytes[mid]];
        if (cmp_bytes(p->ptr, p->len, s, n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n_vocab && cmp_bytes(pieces[by_bytes[lo]].ptr, pieces[by_bytes[lo]].len, s, n) == 0)
        return by_bytes[lo];
    return -1;
}

static int cmp_merge(const void *x, const void *y)
{
    const merge *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static const merge *find_merge(int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t lo = 0, hi = n_merges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (merges[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_merges && merges[lo].key == key ? &merges[lo] : NULL;
}

static void load(void)
{
    const char *path = getenv("GE_FUZZ_MODEL");
    if (!path || !*path)
        path = "testdata/tiny-f32.gguf";
    ge_err err;
    if (ge_gguf_open(&g, path, &err) || ge_tok_create(&tok, g, &err))
        die(path, err.msg);
    if (ge_gguf_get_str_array(g, "tokenizer.ggml.tokens", &pieces, &n_vocab, &err))
        die(path, err.msg);
    types = malloc(n_vocab * sizeof *types);
    by_bytes = malloc(n_vocab * sizeof *by_bytes);
    int64_t *tt = malloc(n_vocab * sizeof *tt);
    if (!types || !by_bytes || !tt)
        die(path, "out of memory");
    if (ge_gguf_find(g, "tokenizer.ggml.token_type")) {
        if (ge_gguf_get_int_array(g, "tokenizer.ggml.token_type", tt, n_vocab, &err))
            die(path, err.msg);
    } else {
        for (size_t i = 0; i < n_vocab; i++)
            tt[i] = TT_NORMAL;
    }
    for (size_t i = 0; i < n_vocab; i++)
        types[i] = (int32_t)tt[i], by_bytes[i] = (int32_t)i;
    free(tt);
    qsort(by_bytes, n_vocab, sizeof *by_bytes, cmp_piece);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        byte_id[b] = lookup(hex, 6);
    }
    uint32_t v;
    ge_gguf_get_u32_or(g, "tokenizer.ggml.bos_token_id", 2, &v, &err), bos = (int32_t)v;
    ge_gguf_get_u32_or(g, "tokenizer.ggml.eos_token_id", 1, &v, &err), eos = (int32_t)v;
    ge_gguf_get_u32_or(g, "tokenizer.ggml.unknown_token_id", 3, &v, &err), unk = (int32_t)v;
    ge_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", true, &add_bos, &err);
    ge_gguf_get_bool_or(g, "tokenizer.ggml.add_eos_token", false, &add_eos, &err);

    /* specials, bucketed by first byte (counting sort keeps ids ascending in a bucket) */
    size_t count[256] = {0}, n_sp = 0;
    for (size_t i = 0; i < n_vocab; i++)
        if ((types[i] == TT_CONTROL || types[i] == TT_USER || types[i] == TT_UNKNOWN) &&
            pieces[i].len > 0 && ((uint8_t)pieces[i].ptr[0] & 0xc0) != 0x80)
            count[(uint8_t)pieces[i].ptr[0]]++, n_sp++;
    specials = malloc((n_sp ? n_sp : 1) * sizeof *specials);
    for (int b = 0; b < 256; b++)
        special_start[b + 1] = special_start[b] + count[b];
    size_t fill[256];
    memcpy(fill, special_start, sizeof fill);
    for (size_t i = 0; i < n_vocab; i++)
        if ((types[i] == TT_CONTROL || types[i] == TT_USER || types[i] == TT_UNKNOWN) &&
            pieces[i].len > 0 && ((uint8_t)pieces[i].ptr[0] & 0xc0) != 0x80)
            specials[fill[(uint8_t)pieces[i].ptr[0]]++] = (int32_t)i;

    ge_gguf_str *m;
    size_t nm;
    if (ge_gguf_get_str_array(g, "tokenizer.ggml.merges", &m, &nm, &err))
        die(path, err.msg);
    merges = malloc((nm ? nm : 1) * sizeof *merges);
    char *buf = NULL;
    size_t cap = 0;
    for (size_t r = 0; r < nm; r++) {
        const char *sp = memchr(m[r].ptr + 1, ' ', m[r].len - 1);
        size_t ll = (size_t)(sp - m[r].ptr), rl = m[r].len - ll - 1;
        if (ll + rl > cap && !(buf = realloc(buf, cap = ll + rl)))
            die(path, "out of memory");
        memcpy(buf, m[r].ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t a = lookup(m[r].ptr, ll), b = lookup(sp + 1, rl), c = lookup(buf, ll + rl);
        if (a < 0 || b < 0 || c < 0)
            die(path, "a merge names a piece outside the vocabulary");
        merges[n_merges++] = (merge){(uint64_t)(uint32_t)a << 32 | (uint32_t)b, (int32_t)r, c};
    }
    free(buf);
    free(m);
    qsort(merges, n_merges, sizeof *merges, cmp_merge);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    load();
    return 0;
}

/* ---- the reference ---------------------------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} ids;

static void push(ids *o, int32_t id)
{
    if (o->n == o->cap && !(o->v = realloc(o->v, (o->cap = o->cap ? 2 * o->cap : 256) *
                                                      sizeof *o->v)))
        die("reference", "out of memory");
    o->v[o->n++] = id;
}

static size_t char_len(uint8_t c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

/* BPE over one segment (valid UTF-8, no specials inside), appended to o. */
static void ref_segment(const char *s, size_t len, ids *o)
{
    ids w = {0};
    bool prev_unk = false;
    for (size_t i = 0; i < len;) {
        size_t cl = char_len((uint8_t)s[i]);
        const char *c = s[i] == ' ' ? "\xe2\x96\x81" : s + i;
        size_t nb = s[i] == ' ' ? 3 : cl;
        int32_t id = lookup(c, nb);
        bool all = true;
        for (size_t k = 0; k < nb; k++)
            all &= byte_id[(uint8_t)c[k]] >= 0;
        if (id >= 0) {
            push(&w, id);
            prev_unk = id == unk;
        } else if (all) {
            for (size_t k = 0; k < nb; k++)
                push(&w, byte_id[(uint8_t)c[k]]);
            prev_unk = false;
        } else if (!prev_unk) {
            push(&w, unk);
            prev_unk = true;
        }
        i += cl;
    }
    /* naive BPE: rank[i] is the rank of the pair (i, i+1) */
    size_t n = w.n;
    int32_t *rank = malloc((n ? n : 1) * sizeof *rank), *res = malloc((n ? n : 1) * sizeof *res);
    if (!rank || !res)
        die("reference", "out of memory");
    for (size_t i = 0; i + 1 < n; i++) {
        const merge *m = find_merge(w.v[i], w.v[i + 1]);
        rank[i] = m ? m->rank : INT32_MAX;
        res[i] = m ? m->result : -1;
    }
    for (;;) {
        size_t best = SIZE_MAX;
        int32_t br = INT32_MAX;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] < br)
                br = rank[i], best = i;
        if (best == SIZE_MAX)
            break;
        w.v[best] = res[best];
        memmove(w.v + best + 1, w.v + best + 2, (n - best - 2) * sizeof *w.v);
        memmove(rank + best + 1, rank + best + 2, (n - best - 2) * sizeof *rank);
        memmove(res + best + 1, res + best + 2, (n - best - 2) * sizeof *res);
        n--;
        for (size_t i = best > 0 ? best - 1 : 0; i <= best && i + 1 < n; i++) {
            const merge *m = find_merge(w.v[i], w.v[i + 1]);
            rank[i] = m ? m->rank : INT32_MAX;
            res[i] = m ? m->result : -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        push(o, w.v[i]);
    free(rank);
    free(res);
    free(w.v);
}

static void ref_encode(const char *s, size_t len, ids *o)
{
    size_t seg = 0;
    for (size_t i = 0; i < len;) {
        uint8_t b = (uint8_t)s[i];
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t k = special_start[b]; k < special_start[b + 1]; k++) {
            const ge_gguf_str *p = &pieces[specials[k]];
            if (p->len <= best_len || p->len > len - i || memcmp(p->ptr, s + i, p->len) != 0)
                continue;
            if (i + p->len < len && ((uint8_t)s[i + p->len] & 0xc0) == 0x80)
                continue; /* ends inside a character */
            best = specials[k], best_len = p->len;
        }
        if (best < 0) {
            i += char_len(b);
            continue;
        }
        if (i > seg)
            ref_segment(s + seg, i - seg, o);
        push(o, best);
        i += best_len;
        seg = i;
    }
    if (len > seg)
        ref_segment(s + seg, len - seg, o);
}

/* ---- the target ------------------------------------------------------------------------- */

/* a[0..n) == b[0..n) (either may be NULL when n == 0) */
static bool same(const int32_t *a, const int32_t *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

static void mismatch(const char *what, const char *s, size_t len, const int32_t *a, size_t na,
                     const int32_t *b, size_t nb)
{
    fprintf(stderr, "fuzz_tok: %s on %zu bytes:", what, len);
    for (size_t i = 0; i < len && i < 200; i++)
        fprintf(stderr, " %02x", (uint8_t)s[i]);
    fprintf(stderr, "\n  tok.c:     ");
    for (size_t i = 0; i < na && i < 100; i++)
        fprintf(stderr, " %d", a[i]);
    fprintf(stderr, "\n  reference: ");
    for (size_t i = 0; i < nb && i < 100; i++)
        fprintf(stderr, " %d", b[i]);
    fprintf(stderr, "\n");
    abort();
}

/* s with U+2581 read as a space, appended to *o */
static void normalise(const char *s, size_t len, ids *o)
{
    for (size_t i = 0; i < len; i++) {
        if (i + 3 <= len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            push(o, ' ');
            i += 2;
        } else {
            push(o, (uint8_t)s[i]);
        }
    }
}

static void check_decode(const char *s, size_t len, const int32_t *v, size_t n)
{
    ids text = {0}, dec = {0}, raw = {0};
    for (size_t i = 0; i < n; i++) {
        if (v[i] == unk)
            goto done; /* <unk> loses the text */
        const ge_gguf_str *p = &pieces[v[i]];
        if (types[v[i]] == TT_BYTE && p->len == 6) {
            push(&raw, (int32_t)strtol(p->ptr + 3, NULL, 16));
            continue;
        }
        for (size_t k = 0; k < p->len; k++)
            push(&raw, (uint8_t)p->ptr[k]);
    }
    char *bytes = malloc(raw.n ? raw.n : 1);
    for (size_t i = 0; i < raw.n; i++)
        bytes[i] = (char)raw.v[i];
    normalise(bytes, raw.n, &dec);
    free(bytes);
    normalise(s, len, &text);
    if (dec.n != text.n || !same(dec.v, text.v, dec.n))
        mismatch("the ids do not decode to the text", s, len, v, n, NULL, 0);
done:
    free(text.v), free(dec.v), free(raw.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    ge_tokens out = {0};
    ge_err err;

    /* as given */
    size_t bad = ge_utf8_check(s, size);
    ge_status st = ge_tok_encode(tok, s, size, true, &out, &err);
    if (bad < size) {
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte %zu", bad);
        if (st != GE_E_INPUT || out.n != 0 || strcmp(err.msg, want) != 0)
            die("invalid UTF-8 not rejected", err.msg);
    } else if (st != GE_OK) {
        die("valid UTF-8 rejected", err.msg);
    }

    /* the valid characters only */
    char *clean = malloc(size ? size : 1);
    size_t n = 0;
    for (size_t i = 0; i < size;) {
        size_t k = ge_utf8_seq(s + i, size - i);
        if (!k) {
            i++;
            continue;
        }
        memcpy(clean + n, s + i, k);
        n += k, i += k;
    }
    if (ge_utf8_check(clean, n) != n)
        die("cleaning", "the cleaned text is not valid UTF-8");
    out.n = 0;
    if ((st = ge_tok_encode(tok, clean, n, false, &out, &err)) != GE_OK)
        die("valid UTF-8 rejected", err.msg);
    for (size_t i = 0; i < out.n; i++)
        if (out.ids[i] < 0 || (size_t)out.ids[i] >= n_vocab)
            mismatch("id outside the vocabulary", clean, n, out.ids, out.n, NULL, 0);
    ids ref = {0};
    ref_encode(clean, n, &ref);
    if (ref.n != out.n || !same(ref.v, out.ids, ref.n))
        mismatch("ids differ from the reference", clean, n, out.ids, out.n, ref.v, ref.n);
    check_decode(clean, n, out.ids, out.n);

    /* framing */
    ge_tokens framed = {0};
    if (ge_tok_encode(tok, clean, n, true, &framed, &err) != GE_OK)
        die("valid UTF-8 rejected with add_special", err.msg);
    size_t head = add_bos, tail = add_eos;
    if (framed.n != out.n + head + tail || (head && framed.ids[0] != bos) ||
        (tail && framed.ids[framed.n - 1] != eos) ||
        !same(framed.ids + head, out.ids, out.n))
        mismatch("add_special framing", clean, n, framed.ids, framed.n, out.ids, out.n);
    size_t at = ge_tok_find_placeholder(tok, framed.ids, framed.n, NULL);
    if (at > framed.n)
        die("ge_tok_find_placeholder", "index past the end");

    free(ref.v);
    ge_tokens_free(&framed);
    ge_tokens_free(&out);
    free(clean);
    return 0;
}
