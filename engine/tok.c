/* tok.c - Gemma 4 BPE: vocabulary and merge hash tables, special-token split, heap BPE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct {
    uint64_t key; /* left id << 32 | right id */
    int32_t rank, result;
} merge_slot;

struct ge_tok {
    int n_vocab;
    ge_gguf_str *pieces;  /* [n_vocab] into the mapping */
    int32_t *piece_map;   /* open addressing: id + 1, 0 = empty; [piece_cap] */
    size_t piece_cap;
    merge_slot *merges;   /* open addressing on key; rank < 0 = empty; [merge_cap] */
    size_t merge_cap;
    int32_t byte_id[256]; /* <0xHH> ids, -1 when absent */
    int32_t *special_by_byte[256]; /* per first byte: special ids, longest first, -1 ends */
    int32_t bos, eos, unk;
    bool add_bos, add_eos;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

int32_t ge_tok_find(const ge_tok *t, const char *piece, size_t len)
{
    size_t mask = t->piece_cap - 1;
    for (size_t i = hash_bytes(piece, len) & mask;; i = (i + 1) & mask) {
        int32_t v = t->piece_map[i];
        if (v == 0)
            return -1;
        const ge_gguf_str *p = &t->pieces[v - 1];
        if (p->len == len && memcmp(p->ptr, piece, len) == 0)
            return v - 1;
    }
}

static const merge_slot *merge_find(const ge_tok *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = t->merge_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        const merge_slot *s = &t->merges[i];
        if (s->rank < 0)
            return NULL;
        if (s->key == key)
            return s;
    }
}

int ge_tok_vocab_size(const ge_tok *t) { return t->n_vocab; }
int32_t ge_tok_eos_appended(const ge_tok *t) { return t->add_eos ? t->eos : -1; }

/* ---- loading ------------------------------------------------------------------------------ */

static ge_status special_id(const ge_gguf *g, const ge_tok *t, const char *key, int32_t dflt,
                            int32_t *out, ge_err *err)
{
    uint32_t v;
    ge_status st = ge_gguf_get_u32_or(g, key, (uint32_t)dflt, &v, err);
    if (st)
        return st;
    if (v >= (uint32_t)t->n_vocab)
        return ge_fail(err, GE_E_FORMAT, "%s: %s = %u is outside the vocabulary of %d", g->path,
                       key, v, t->n_vocab);
    *out = (int32_t)v;
    return GE_OK;
}

static ge_status load_merges(ge_tok *t, const ge_gguf *g, ge_err *err)
{
    ge_gguf_str *m;
    size_t n;
    ge_status st = ge_gguf_get_str_array(g, "tokenizer.ggml.merges", &m, &n, err);
    if (st)
        return st;
    t->merge_cap = pow2_at_least(2 * n + 1);
    t->merges = malloc(t->merge_cap * sizeof *t->merges);
    char *buf = NULL;
    size_t buf_cap = 0;
    if (!t->merges) {
        free(m);
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory for %zu merges", g->path, n);
    }
    for (size_t i = 0; i < t->merge_cap; i++)
        t->merges[i].rank = -1;
    for (size_t r = 0; r < n && !st; r++) {
        /* "left right": split at the first space after byte 0 (a piece may be a lone space) */
        const char *s = m[r].ptr, *sp = m[r].len > 1 ? memchr(s + 1, ' ', m[r].len - 1) : NULL;
        if (!sp) {
            st = ge_fail(err, GE_E_FORMAT, "%s: merge %zu is not \"left right\"", g->path, r);
            break;
        }
        size_t ll = (size_t)(sp - s), rl = m[r].len - ll - 1;
        if (ll + rl > buf_cap) {
            free(buf);
            buf_cap = 2 * (ll + rl);
            if (!(buf = malloc(buf_cap))) {
                st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
                break;
            }
        }
        memcpy(buf, s, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t a = ge_tok_find(t, s, ll), b = ge_tok_find(t, sp + 1, rl),
                c = ge_tok_find(t, buf, ll + rl);
        if (a < 0 || b < 0 || c < 0) {
            st = ge_fail(err, GE_E_FORMAT, "%s: merge %zu (\"%.*s\") names a piece that is not "
                         "in the vocabulary", g->path, r, (int)(m[r].len > 80 ? 80 : m[r].len), s);
            break;
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        size_t mask = t->merge_cap - 1, i = hash_u64(key) & mask;
        while (t->merges[i].rank >= 0 && t->merges[i].key != key)
            i = (i + 1) & mask;
        if (t->merges[i].rank < 0) /* a repeated pair keeps its first (best) rank */
            t->merges[i] = (merge_slot){key, (int32_t)r, c};
    }
    free(buf);
    free(m);
    return st;
}

static int cmp_len_desc(const void *a, const void *b, void *ctx)
{
    const ge_tok *t = ctx;
    uint64_t la = t->pieces[*(const int32_t *)a].len, lb = t->pieces[*(const int32_t *)b].len;
    if (la != lb)
        return la > lb ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

static ge_status load_specials(ge_tok *t, const int32_t *types, const ge_gguf *g, ge_err *err)
{
    size_t count[256] = {0};
    for (int i = 0; i < t->n_vocab; i++)
        if ((types[i] == TT_CONTROL || types[i] == TT_USER) && t->pieces[i].len > 0)
            count[(uint8_t)t->pieces[i].ptr[0]]++;
    for (int c = 0; c < 256; c++) {
        if (!count[c])
            continue;
        int32_t *list = malloc((count[c] + 1) * sizeof *list);
        if (!list)
            return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
        size_t k = 0;
        for (int i = 0; i < t->n_vocab; i++)
            if ((types[i] == TT_CONTROL || types[i] == TT_USER) && t->pieces[i].len > 0 &&
                (uint8_t)t->pieces[i].ptr[0] == c)
                list[k++] = i;
        qsort_r(list, k, sizeof *list, cmp_len_desc, t);
        list[k] = -1;
        t->special_by_byte[c] = list;
    }
    return GE_OK;
}

ge_status ge_tok_create(ge_tok **out, const ge_gguf *g, ge_err *err)
{
    *out = NULL;
    ge_gguf_str model;
    ge_status st = ge_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st)
        return st;
    if (!ge_gguf_str_eq(model, "gemma4"))
        return ge_fail(err, GE_E_UNSUPPORTED,
                       "%s: tokenizer.ggml.model \"%.*s\" is not supported (expected \"gemma4\")",
                       g->path, (int)(model.len > 64 ? 64 : model.len), model.ptr);
    ge_tok *t = calloc(1, sizeof *t);
    if (!t)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
    size_t n;
    int32_t *types = NULL;
    if ((st = ge_gguf_get_str_array(g, "tokenizer.ggml.tokens", &t->pieces, &n, err)))
        goto fail;
    if (n == 0 || n > INT32_MAX / 2) {
        st = ge_fail(err, GE_E_FORMAT, "%s: vocabulary of %zu tokens", g->path, n);
        goto fail;
    }
    t->n_vocab = (int)n;
    t->piece_cap = pow2_at_least(2 * n + 1);
    t->piece_map = calloc(t->piece_cap, sizeof *t->piece_map);
    types = malloc(n * sizeof *types);
    if (!t->piece_map || !types) {
        st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
        goto fail;
    }
    if (ge_gguf_find(g, "tokenizer.ggml.token_type")) {
        int64_t *tmp = malloc(n * sizeof *tmp);
        if (!tmp) {
            st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
            goto fail;
        }
        st = ge_gguf_get_int_array(g, "tokenizer.ggml.token_type", tmp, n, err);
        for (size_t i = 0; i < n; i++)
            types[i] = (int32_t)tmp[i];
        free(tmp);
        if (st)
            goto fail;
    } else {
        for (size_t i = 0; i < n; i++)
            types[i] = TT_NORMAL;
    }
    for (size_t id = 0; id < n; id++) {
        const ge_gguf_str *p = &t->pieces[id];
        size_t mask = t->piece_cap - 1, i = hash_bytes(p->ptr, p->len) & mask;
        for (; t->piece_map[i]; i = (i + 1) & mask) {
            const ge_gguf_str *q = &t->pieces[t->piece_map[i] - 1];
            if (q->len == p->len && memcmp(q->ptr, p->ptr, p->len) == 0)
                break; /* duplicate piece: the first id wins, as in a dict */
        }
        if (!t->piece_map[i])
            t->piece_map[i] = (int32_t)id + 1;
    }
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_id[b] = ge_tok_find(t, hex, 6);
    }
    bool bos = true, eos = false;
    if ((st = special_id(g, t, "tokenizer.ggml.bos_token_id", 2, &t->bos, err)) ||
        (st = special_id(g, t, "tokenizer.ggml.eos_token_id", 1, &t->eos, err)) ||
        (st = special_id(g, t, "tokenizer.ggml.unknown_token_id", 3, &t->unk, err)) ||
        (st = ge_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", true, &bos, err)) ||
        (st = ge_gguf_get_bool_or(g, "tokenizer.ggml.add_eos_token", false, &eos, err)) ||
        (st = load_merges(t, g, err)) || (st = load_specials(t, types, g, err)))
        goto fail;
    t->add_bos = bos;
    t->add_eos = eos;
    free(types);
    *out = t;
    return GE_OK;
fail:
    free(types);
    ge_tok_free(t);
    return st;
}

void ge_tok_free(ge_tok *t)
{
    if (!t)
        return;
    for (int c = 0; c < 256; c++)
        free(t->special_by_byte[c]);
    free(t->pieces);
    free(t->piece_map);
    free(t->merges);
    free(t);
}

/* ---- encoding ----------------------------------------------------------------------------- */

static size_t utf8_len(uint8_t c)
{
    return c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
}

static ge_status push(ge_tokens *out, int32_t id)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 64;
        int32_t *ids = realloc(out->ids, cap * sizeof *ids);
        if (!ids)
            return GE_E_NOMEM;
        out->ids = ids;
        out->cap = cap;
    }
    out->ids[out->n++] = id;
    return GE_OK;
}

typedef struct {
    int32_t id, prev, next;
} symbol;

typedef struct {
    int32_t rank, left; /* ordered by rank, then leftmost position */
    int32_t left_id, right_id;
} candidate;

typedef struct {
    candidate *v;
    size_t n, cap;
} heap;

static bool cand_less(const candidate *a, const candidate *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static bool heap_push(heap *h, candidate c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        candidate *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && cand_less(&c, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
    return true;
}

static candidate heap_pop(heap *h)
{
    candidate top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const candidate *best = &last;
        if (l < h->n && cand_less(&h->v[l], best))
            m = l, best = &h->v[l];
        if (r < h->n && cand_less(&h->v[r], best))
            m = r;
        if (m == i)
            break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

static bool consider(const ge_tok *t, heap *h, const symbol *sym, int32_t left)
{
    if (left < 0 || sym[left].next < 0)
        return true;
    int32_t right = sym[left].next;
    const merge_slot *m = merge_find(t, sym[left].id, sym[right].id);
    return !m || heap_push(h, (candidate){m->rank, left, sym[left].id, sym[right].id});
}

/* BPE over one segment of ordinary text (no special tokens inside). */
static ge_status bpe_segment(const ge_tok *t, const char *s, size_t len, ge_tokens *out)
{
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    symbol *sym = malloc((len + 1) * sizeof *sym); /* at most one symbol per byte */
    heap h = {0};
    ge_status st = GE_OK;
    if (!sym)
        return GE_E_NOMEM;
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = utf8_len((uint8_t)s[i]);
        int32_t id = s[i] == ' ' ? ge_tok_find(t, space, 3) : ge_tok_find(t, s + i, cl);
        const char *bytes = s[i] == ' ' ? space : s + i;
        size_t nb = s[i] == ' ' ? 3 : cl;
        if (id >= 0) {
            sym[n] = (symbol){id, n - 1, n + 1};
            n++;
        } else {
            for (size_t k = 0; k < nb; k++, n++) {
                int32_t b = t->byte_id[(uint8_t)bytes[k]];
                sym[n] = (symbol){b >= 0 ? b : t->unk, n - 1, n + 1};
            }
        }
        i += cl;
    }
    if (n == 0)
        goto done;
    sym[n - 1].next = -1;
    for (int32_t i = 0; i < n - 1; i++)
        if (!consider(t, &h, sym, i))
            goto nomem;
    while (h.n) {
        candidate c = heap_pop(&h);
        int32_t l = c.left, r = sym[l].next;
        if (sym[l].id != c.left_id || r < 0 || sym[r].id != c.right_id)
            continue; /* stale: one side was merged away since */
        sym[l].id = merge_find(t, c.left_id, c.right_id)->result;
        sym[l].next = sym[r].next;
        if (sym[r].next >= 0)
            sym[sym[r].next].prev = l;
        sym[r].id = -1;
        if (!consider(t, &h, sym, sym[l].prev) || !consider(t, &h, sym, l))
            goto nomem;
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if ((st = push(out, sym[i].id)))
            break;
done:
    free(h.v);
    free(sym);
    return st;
nomem:
    st = GE_E_NOMEM;
    goto done;
}

/* The longest special token starting at s (within len bytes), or -1. */
static int32_t special_at(const ge_tok *t, const char *s, size_t len)
{
    const int32_t *list = t->special_by_byte[(uint8_t)s[0]];
    if (!list)
        return -1;
    for (; *list >= 0; list++) {
        const ge_gguf_str *p = &t->pieces[*list];
        if (p->len <= len && memcmp(p->ptr, s, p->len) == 0)
            return *list;
    }
    return -1;
}

ge_status ge_tok_encode(const ge_tok *t, const char *text, size_t len, bool add_special,
                        ge_tokens *out, ge_err *err)
{
    size_t bad = ge_utf8_check(text, len);
    if (bad < len)
        return ge_fail(err, GE_E_INPUT, "invalid UTF-8 at byte %zu", bad);
    ge_status st = GE_OK;
    if (add_special && t->add_bos)
        st = push(out, t->bos);
    size_t seg = 0;
    for (size_t i = 0; i < len && !st;) {
        int32_t sp = special_at(t, text + i, len - i);
        if (sp < 0) {
            i += utf8_len((uint8_t)text[i]);
            continue;
        }
        if (i > seg)
            st = bpe_segment(t, text + seg, i - seg, out);
        if (!st)
            st = push(out, sp);
        i += t->pieces[sp].len;
        seg = i;
    }
    if (!st && len > seg)
        st = bpe_segment(t, text + seg, len - seg, out);
    if (!st && add_special && t->add_eos)
        st = push(out, t->eos);
    if (st)
        return ge_fail(err, st, "out of memory tokenizing %zu bytes", len);
    return GE_OK;
}

/* ---- public wrappers (ge.h) ------------------------------------------------------------- */

void ge_tokens_free(ge_tokens *t)
{
    if (!t)
        return;
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}
