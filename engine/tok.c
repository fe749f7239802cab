/* tok.c - Gemma 4 BPE: vocabulary and merge hash tables, special-token trie, word-wise BPE.
 *
 * Loading (262,144 pieces, ~515k merges in the real vocabulary) is dominated by random
 * accesses into the hash tables, so pieces and merges are processed in batches: first every
 * hash of the batch is computed and its slot prefetched, then the slots are probed, then the
 * candidate pieces are prefetched and compared. The merge table keys are (left id, right id).
 *
 * Encoding follows Hugging Face tokenizers (see tok.h): special tokens are cut out first
 * (a byte trie, leftmost-longest), then each segment is tokenized with spaces read as U+2581.
 * In Hugging Face the segment is one BPE word. But a merge (A, B) can only join two adjacent
 * symbols when A's last character and B's first character are the characters on either
 * side of the boundary, and the 515k merges use only ~34k distinct such pairs. The loader
 * collects them, and the segment is cut at every boundary whose pair is not among them:
 * no merge can ever cross such a cut, so merging the pieces separately gives exactly the
 * same tokens (the merge order inside each piece is unchanged). Prose falls apart into
 * words (">▁</" is the one Gemma piece that spans a space), CJK into runs of a few
 * characters. Pieces of up to SMALL_WORD symbols are merged with a quadratic scan, longer
 * ones (long runs such as "aaaa...") with the O(n log n) heap; both take the lowest rank,
 * then the leftmost position, like Hugging Face. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct {
    uint32_t tag; /* high 32 bits of the hash */
    int32_t id;   /* -1 = empty */
} piece_slot;

typedef struct {
    uint64_t key; /* left id << 32 | right id */
    int32_t rank, result; /* rank < 0 = empty */
} merge_slot;

typedef struct {
    int32_t child, sibling; /* node indices, 0 = none (node 0 is the root) */
    int32_t id;             /* the special token ending here, or -1 */
    uint8_t byte;
} trie_node;

#define SPACE_CP 0x2581u /* U+2581, the piece for a space */
#define NO_RANK INT32_MAX
#define SMALL_WORD 48 /* words up to this many symbols use the quadratic scan */

struct ge_tok {
    int n_vocab;
    ge_gguf_str *pieces;   /* [n_vocab] into the mapping */
    piece_slot *piece_map; /* open addressing on the piece hash; [piece_cap] */
    size_t piece_cap;
    merge_slot *merges;    /* open addressing on the pair; [merge_cap] */
    size_t merge_cap;
    int32_t *bmp_id;       /* [0x10000] id of the one-character piece of a BMP code point, or -1 */
    int32_t byte_id[256];  /* <0xHH> ids, -1 when absent */
    trie_node *trie;       /* special (control, user-defined, unknown) tokens; [0] is the root */
    size_t n_trie, trie_cap;
    uint8_t special_first[256]; /* a special token starts with this byte */
    /* Word split: the (last character of left, first character of right) pairs of all
     * merges. Two symbols can only ever merge when their pair is in the set. Pairs of
     * ASCII characters and U+2581 (index 128) are in a bit matrix, the rest in a hash set
     * (pair + 1, 0 = empty). split_words is false when some merge piece is not UTF-8. */
    uint8_t join_ascii[129][17];
    uint64_t *join;
    size_t join_cap, join_n;
    bool split_words;
    int32_t unk_first, unk_last; /* first and last characters of the <unk> piece */
    int32_t media[GE_KIND_COUNT]; /* soft-token placeholder ids (<|image|>, ...) by kind, -1
                                     when absent or text */
    int32_t bos, eos, unk;
    bool add_bos, add_eos;
    size_t longest;        /* bytes of the longest piece */
};

/* ---- hashing ------------------------------------------------------------------------------ */

/* A polynomial hash, h = sum of (byte + 1) * B^(n-1-i) mod 2^64, so that the hash of a
 * concatenation follows from the hashes of its parts: poly(a b) = poly(a) * B^|b| + poly(b).
 * Four bytes per step keep the multiply chain short. Mixed (with the length) before use. */
#define POLY_B 0x100000001b3ull
#define POLY_B2 (POLY_B * POLY_B)
#define POLY_B3 (POLY_B2 * POLY_B)
#define POLY_B4 (POLY_B2 * POLY_B2)

static inline uint64_t poly(const char *str, size_t n)
{
    const uint8_t *s = (const uint8_t *)str;
    uint64_t h = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        h = h * POLY_B4 + ((uint64_t)s[i] + 1) * POLY_B3 + ((uint64_t)s[i + 1] + 1) * POLY_B2 +
            ((uint64_t)s[i + 2] + 1) * POLY_B + ((uint64_t)s[i + 3] + 1);
    for (; i < n; i++)
        h = h * POLY_B + s[i] + 1;
    return h;
}

static inline uint64_t poly_pow(size_t n) /* B^n */
{
    uint64_t r = 1, b = POLY_B;
    for (; n; n >>= 1, b *= b)
        if (n & 1)
            r *= b;
    return r;
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* Does piece id spell a followed by b (b may be empty)? */
static inline bool piece_is(const ge_tok *t, int32_t id, const char *a, size_t al, const char *b,
                            size_t bl)
{
    const ge_gguf_str *p = &t->pieces[id];
    return p->len == al + bl && memcmp(p->ptr, a, al) == 0 && memcmp(p->ptr + al, b, bl) == 0;
}

static inline uint64_t piece_hash(uint64_t poly_h, size_t len)
{
    return mix(poly_h + len);
}

/* Probe from slot i for the piece a+b with hash h (piece_hash). */
static int32_t probe(const ge_tok *t, size_t i, uint64_t h, const char *a, size_t al,
                     const char *b, size_t bl)
{
    size_t mask = t->piece_cap - 1;
    uint32_t tag = (uint32_t)(h >> 32);
    for (;; i = (i + 1) & mask) {
        piece_slot s = t->piece_map[i];
        if (s.id < 0)
            return -1;
        if (s.tag == tag && piece_is(t, s.id, a, al, b, bl))
            return s.id;
    }
}

int32_t ge_tok_find(const ge_tok *t, const char *piece, size_t len)
{
    uint64_t h = piece_hash(poly(piece, len), len);
    return probe(t, h & (t->piece_cap - 1), h, piece, len, "", 0);
}

static inline const merge_slot *merge_find(const ge_tok *t, int32_t a, int32_t b)
{
    uint64_t key = pair_key(a, b);
    size_t mask = t->merge_cap - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
        const merge_slot *s = &t->merges[i];
        if (s->rank < 0)
            return NULL;
        if (s->key == key)
            return s;
    }
}

int ge_tok_vocab_size(const ge_tok *t) { return t->n_vocab; }
int32_t ge_tok_bos_prepended(const ge_tok *t) { return t->add_bos ? t->bos : -1; }

int32_t ge_tok_eos_appended(const ge_tok *t) { return t->add_eos ? t->eos : -1; }

/* ---- loading ------------------------------------------------------------------------------ */

enum { BATCH = 16 };

/* The code point of a whole one-character UTF-8 string, or -1. */
static int32_t single_cp(const char *s, size_t n)
{
    if (n == 0 || ge_utf8_seq(s, n) != n)
        return -1;
    const uint8_t *u = (const uint8_t *)s;
    switch (n) {
    case 1: return u[0];
    case 2: return (u[0] & 0x1f) << 6 | (u[1] & 0x3f);
    case 3: return (u[0] & 0x0f) << 12 | (u[1] & 0x3f) << 6 | (u[2] & 0x3f);
    default: return (u[0] & 0x07) << 18 | (u[1] & 0x3f) << 12 | (u[2] & 0x3f) << 6 | (u[3] & 0x3f);
    }
}

/* The code point of the last character of s[0..n) (valid UTF-8 assumed), or -1. */
static int32_t last_cp(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && ((uint8_t)s[i - 1] & 0xc0) == 0x80)
        i--;
    return i > 0 ? single_cp(s + i - 1, n - i + 1) : -1;
}

static ge_status load_pieces(ge_tok *t, const ge_gguf *g, ge_err *err)
{
    size_t n = (size_t)t->n_vocab;
    t->piece_cap = pow2_at_least(2 * n);
    t->piece_map = malloc(t->piece_cap * sizeof *t->piece_map);
    t->bmp_id = malloc(0x10000 * sizeof *t->bmp_id);
    if (!t->piece_map || !t->bmp_id)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
    memset(t->piece_map, 0xff, t->piece_cap * sizeof *t->piece_map); /* id -1 */
    memset(t->bmp_id, 0xff, 0x10000 * sizeof *t->bmp_id);
    size_t mask = t->piece_cap - 1;
    uint64_t h[BATCH];
    for (size_t b0 = 0; b0 < n; b0 += BATCH) {
        size_t nb = n - b0 < BATCH ? n - b0 : BATCH;
        for (size_t k = 0; k < nb; k++) {
            const ge_gguf_str *p = &t->pieces[b0 + k];
            t->longest = p->len > t->longest ? (size_t)p->len : t->longest;
            h[k] = piece_hash(poly(p->ptr, p->len), p->len);
            __builtin_prefetch(&t->piece_map[h[k] & mask], 1);
        }
        for (size_t k = 0; k < nb; k++) {
            int32_t id = (int32_t)(b0 + k);
            const ge_gguf_str *p = &t->pieces[id];
            uint32_t tag = (uint32_t)(h[k] >> 32);
            size_t i = h[k] & mask;
            for (; t->piece_map[i].id >= 0; i = (i + 1) & mask) {
                if (t->piece_map[i].tag == tag && piece_is(t, t->piece_map[i].id, p->ptr,
                                                            p->len, "", 0))
                    break; /* duplicate piece: the first id wins, as in a dict */
            }
            if (t->piece_map[i].id < 0)
                t->piece_map[i] = (piece_slot){tag, id};
            if (p->len <= 3) {
                int32_t cp = single_cp(p->ptr, p->len);
                if (cp >= 0 && cp < 0x10000 && t->bmp_id[cp] < 0)
                    t->bmp_id[cp] = id;
            }
        }
    }
    return GE_OK;
}

/* index in join_ascii, or -1 */
static inline int ascii_index(uint32_t cp)
{
    return cp < 0x80 ? (int)cp : cp == SPACE_CP ? 128 : -1;
}

static inline uint64_t join_key(uint32_t a, uint32_t b)
{
    return ((uint64_t)a << 32 | b) + 1;
}

static bool join_insert(ge_tok *t, uint64_t key)
{
    if (2 * (t->join_n + 1) > t->join_cap) {
        size_t cap = t->join_cap ? 2 * t->join_cap : 4096;
        uint64_t *v = calloc(cap, sizeof *v);
        if (!v)
            return false;
        for (size_t k = 0; k < t->join_cap; k++) {
            if (!t->join[k])
                continue;
            size_t i = mix(t->join[k]) & (cap - 1);
            while (v[i])
                i = (i + 1) & (cap - 1);
            v[i] = t->join[k];
        }
        free(t->join);
        t->join = v;
        t->join_cap = cap;
    }
    size_t mask = t->join_cap - 1, i = mix(key) & mask;
    for (; t->join[i]; i = (i + 1) & mask)
        if (t->join[i] == key)
            return true;
    t->join[i] = key;
    t->join_n++;
    return true;
}

/* Record that a merge may join a symbol ending with character a to one starting with b
 * (-1: not UTF-8). */
static bool add_join(ge_tok *t, int32_t a, int32_t b)
{
    if (a < 0 || b < 0) {
        t->split_words = false;
        return true;
    }
    int ia = ascii_index((uint32_t)a), ib = ascii_index((uint32_t)b);
    if (ia >= 0 && ib >= 0) {
        t->join_ascii[ia][ib >> 3] |= (uint8_t)(1u << (ib & 7));
        return true;
    }
    return join_insert(t, join_key((uint32_t)a, (uint32_t)b));
}

/* Can a symbol ending with character a ever merge with one starting with b? */
static inline bool joinable(const ge_tok *t, uint32_t a, uint32_t b)
{
    int ia = ascii_index(a), ib = ascii_index(b);
    if (ia >= 0 && ib >= 0)
        return (t->join_ascii[ia][ib >> 3] >> (ib & 7)) & 1;
    if (!t->join_n)
        return false;
    uint64_t key = join_key(a, b);
    size_t mask = t->join_cap - 1;
    for (size_t i = mix(key) & mask; t->join[i]; i = (i + 1) & mask)
        if (t->join[i] == key)
            return true;
    return false;
}

/* The code point of the first character of s[0..n), or -1. */
static int32_t first_cp(const char *s, size_t n)
{
    size_t k = n ? ge_utf8_seq(s, n) : 0;
    return k ? single_cp(s, k) : -1;
}

static ge_status load_merges(ge_tok *t, const ge_gguf *g, ge_err *err)
{
    ge_gguf_str_iter it;
    ge_status st = ge_gguf_get_str_iter(g, "tokenizer.ggml.merges", &it, err);
    if (st)
        return st;
    /* a merge is at least "a b" after its 8-byte length: a count the array's bytes cannot
     * hold (a sparse file's hole reads as empty strings) is refused before the table is
     * sized by it */
    if (it.n > it.nbytes / 11 || it.n >= INT32_MAX)
        return ge_fail(err, GE_E_FORMAT, "%s: tokenizer.ggml.merges: %llu merges cannot fit in "
                       "%llu bytes", g->path, (unsigned long long)it.n,
                       (unsigned long long)it.nbytes);
    const size_t n = (size_t)it.n;
    t->merge_cap = pow2_at_least(n + n / 2 + 1);
    t->merges = malloc(t->merge_cap * sizeof *t->merges);
    if (!t->merges)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory for %zu merges", g->path, n);
    for (size_t i = 0; i < t->merge_cap; i++)
        t->merges[i].rank = -1;
    const size_t pmask = t->piece_cap - 1, mmask = t->merge_cap - 1;
    struct {
        ge_gguf_str s;  /* "left right" */
        const char *l, *r;
        size_t ll, rl;
        uint64_t h[3];  /* left, right, left+right */
        int32_t id[3];
    } q[BATCH];
    for (size_t b0 = 0; b0 < n && !st; b0 += BATCH) {
        size_t nb = n - b0 < BATCH ? n - b0 : BATCH;
        /* 1: split "left right" (at the first space after byte 0: a piece may be a lone
         * space), hash the three pieces, prefetch their slots */
        for (size_t k = 0; k < nb; k++) {
            const ge_gguf_str *s = &q[k].s;
            q[k].s = ge_gguf_str_next(&it);
            if (s->len > t->longest + 1) { /* left + right is no piece: never read it all */
                st = ge_fail(err, GE_E_FORMAT, "%s: merge %zu is %llu bytes, longer than any "
                             "two pieces it could join (longest piece: %zu bytes)", g->path,
                             b0 + k, (unsigned long long)s->len, t->longest);
                break;
            }
            const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
            if (!sp) {
                st = ge_fail(err, GE_E_FORMAT, "%s: merge %zu is not \"left right\"", g->path,
                             b0 + k);
                break;
            }
            q[k].l = s->ptr;
            q[k].ll = (size_t)(sp - s->ptr);
            q[k].r = sp + 1;
            q[k].rl = s->len - q[k].ll - 1;
            uint64_t hl = poly(q[k].l, q[k].ll), hr = poly(q[k].r, q[k].rl);
            q[k].h[0] = piece_hash(hl, q[k].ll);
            q[k].h[1] = piece_hash(hr, q[k].rl);
            q[k].h[2] = piece_hash(hl * poly_pow(q[k].rl) + hr, q[k].ll + q[k].rl);
            for (int j = 0; j < 3; j++)
                __builtin_prefetch(&t->piece_map[q[k].h[j] & pmask]);
        }
        if (st)
            break;
        /* 2: the first slot with the right tag holds the piece almost always: prefetch its
         * entry, then (2b) its string */
        for (size_t k = 0; k < nb; k++) {
            for (int j = 0; j < 3; j++) {
                uint32_t tag = (uint32_t)(q[k].h[j] >> 32);
                size_t i = q[k].h[j] & pmask;
                while (t->piece_map[i].id >= 0 && t->piece_map[i].tag != tag)
                    i = (i + 1) & pmask;
                q[k].id[j] = t->piece_map[i].id;
                if (q[k].id[j] >= 0)
                    __builtin_prefetch(&t->pieces[q[k].id[j]]);
            }
        }
        for (size_t k = 0; k < nb; k++)
            for (int j = 0; j < 3; j++)
                if (q[k].id[j] >= 0)
                    __builtin_prefetch(t->pieces[q[k].id[j]].ptr);
        /* 3: confirm (or search on) and prefetch the merge slot */
        for (size_t k = 0; k < nb; k++) {
            const char *strs[3][2] = {{q[k].l, ""}, {q[k].r, ""}, {q[k].l, q[k].r}};
            size_t lens[3][2] = {{q[k].ll, 0}, {q[k].rl, 0}, {q[k].ll, q[k].rl}};
            for (int j = 0; j < 3; j++) {
                int32_t id = q[k].id[j];
                if (id < 0 || !piece_is(t, id, strs[j][0], lens[j][0], strs[j][1], lens[j][1]))
                    id = probe(t, q[k].h[j] & pmask, q[k].h[j], strs[j][0], lens[j][0],
                               strs[j][1], lens[j][1]);
                q[k].id[j] = id;
            }
            if (q[k].id[0] < 0 || q[k].id[1] < 0 || q[k].id[2] < 0) {
                const ge_gguf_str *s = &q[k].s;
                st = ge_fail(err, GE_E_FORMAT, "%s: merge %zu (\"%.*s\") names a piece that is "
                             "not in the vocabulary", g->path, b0 + k,
                             (int)(s->len > 80 ? 80 : s->len), s->ptr);
                break;
            }
            __builtin_prefetch(&t->merges[mix(pair_key(q[k].id[0], q[k].id[1])) & mmask], 1);
        }
        if (st)
            break;
        /* 4: insert; note which characters the merge joins */
        for (size_t k = 0; k < nb; k++) {
            uint64_t key = pair_key(q[k].id[0], q[k].id[1]);
            size_t i = mix(key) & mmask;
            while (t->merges[i].rank >= 0 && t->merges[i].key != key)
                i = (i + 1) & mmask;
            if (t->merges[i].rank < 0) /* a repeated pair keeps its first (best) rank */
                t->merges[i] = (merge_slot){key, (int32_t)(b0 + k), q[k].id[2]};
            if (!add_join(t, last_cp(q[k].l, q[k].ll), first_cp(q[k].r, q[k].rl))) {
                st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
                break;
            }
        }
    }
    return st;
}

static ge_status load_specials(ge_tok *t, const int32_t *types, const ge_gguf *g, ge_err *err)
{
    t->trie_cap = 1024;
    t->n_trie = 1;
    t->trie = malloc(t->trie_cap * sizeof *t->trie);
    if (!t->trie)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
    t->trie[0] = (trie_node){0, 0, -1, 0};
    for (int id = 0; id < t->n_vocab; id++) {
        int ty = types[id];
        const ge_gguf_str *p = &t->pieces[id];
        if ((ty != TT_CONTROL && ty != TT_USER && ty != TT_UNKNOWN) || p->len == 0)
            continue;
        /* a match must start on a character: never on a UTF-8 continuation byte */
        if (((uint8_t)p->ptr[0] & 0xc0) == 0x80)
            continue;
        int32_t node = 0;
        for (size_t k = 0; k < p->len; k++) {
            uint8_t c = (uint8_t)p->ptr[k];
            int32_t ch = t->trie[node].child;
            while (ch && t->trie[ch].byte != c)
                ch = t->trie[ch].sibling;
            if (!ch) {
                if (t->n_trie == t->trie_cap) {
                    trie_node *v = realloc(t->trie, 2 * t->trie_cap * sizeof *v);
                    if (!v)
                        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
                    t->trie = v;
                    t->trie_cap *= 2;
                }
                ch = (int32_t)t->n_trie++;
                t->trie[ch] = (trie_node){0, t->trie[node].child, -1, c};
                t->trie[node].child = ch;
            }
            node = ch;
        }
        if (t->trie[node].id < 0) /* the same string twice: the first id wins */
            t->trie[node].id = id;
        t->special_first[(uint8_t)p->ptr[0]] = 1;
    }
    return GE_OK;
}

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

/* An optional per-token array (token types, scores): numbers, one per token. */
static ge_status per_token(const ge_gguf *g, const char *key, size_t n, ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (kv && (kv->type != GE_GGUF_ARR || kv->arr_type == GE_GGUF_STR ||
               kv->arr_type == GE_GGUF_ARR))
        return ge_fail(err, GE_E_FORMAT, "%s: %s is not an array of numbers", g->path, key);
    if (kv && kv->arr_n != n)
        return ge_fail(err, GE_E_FORMAT, "%s: %s has %llu entries for %zu tokens", g->path, key,
                       (unsigned long long)kv->arr_n, n);
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
    t->split_words = true;
    size_t n;
    int32_t *types = NULL;
    /* the counts first: nothing is allocated per token before they agree */
    ge_gguf_str_iter it;
    if ((st = ge_gguf_get_str_iter(g, "tokenizer.ggml.tokens", &it, err)))
        goto fail;
    if (it.n == 0 || it.n > INT32_MAX / 4) {
        st = ge_fail(err, GE_E_FORMAT, "%s: vocabulary of %llu tokens", g->path,
                     (unsigned long long)it.n);
        goto fail;
    }
    n = (size_t)it.n;
    if ((st = per_token(g, "tokenizer.ggml.token_type", n, err)) ||
        (st = per_token(g, "tokenizer.ggml.scores", n, err)) ||
        (st = ge_gguf_get_str_array(g, "tokenizer.ggml.tokens", &t->pieces, &n, err)))
        goto fail;
    t->n_vocab = (int)n;
    types = malloc(n * sizeof *types);
    if (!types) {
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
        for (size_t i = 0; i < n && !st; i++) {
            if (tmp[i] < 0 || tmp[i] > TT_BYTE)
                st = ge_fail(err, GE_E_FORMAT, "%s: tokenizer.ggml.token_type: token %zu has "
                             "type %lld (0..6 are token types)", g->path, i, (long long)tmp[i]);
            types[i] = (int32_t)tmp[i];
        }
        free(tmp);
        if (st)
            goto fail;
    } else {
        for (size_t i = 0; i < n; i++)
            types[i] = TT_NORMAL;
    }
    if ((st = load_pieces(t, g, err)))
        goto fail;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_id[b] = ge_tok_find(t, hex, 6);
    }
    for (int k = 0; k < GE_KIND_COUNT; k++) {
        const char *soft = ge_modality_of((ge_kind)k)->soft;
        t->media[k] = soft ? ge_tok_find(t, soft, strlen(soft)) : -1;
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
    t->unk_first = first_cp(t->pieces[t->unk].ptr, t->pieces[t->unk].len);
    t->unk_last = last_cp(t->pieces[t->unk].ptr, t->pieces[t->unk].len);
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
    free(t->pieces);
    free(t->piece_map);
    free(t->bmp_id);
    free(t->merges);
    free(t->trie);
    free(t->join);
    free(t);
}

/* ---- encoding ----------------------------------------------------------------------------- */

static ge_status reserve(ge_tokens *out, size_t more)
{
    if (out->cap - out->n >= more)
        return GE_OK;
    size_t cap = out->cap ? out->cap : 64;
    while (cap - out->n < more)
        cap *= 2;
    int32_t *ids = realloc(out->ids, cap * sizeof *ids);
    if (!ids)
        return GE_E_NOMEM;
    out->ids = ids;
    out->cap = cap;
    return GE_OK;
}

static ge_status push(ge_tokens *out, int32_t id)
{
    ge_status st = reserve(out, 1);
    if (!st)
        out->ids[out->n++] = id;
    return st;
}

/* -- the heap BPE, for long words -- */

typedef struct {
    int32_t id, prev, next;
} symbol;

typedef struct {
    int32_t rank, left; /* ordered by rank, then leftmost position */
    int32_t left_id, right_id, result;
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
    return !m || heap_push(h, (candidate){m->rank, left, sym[left].id, sym[right].id, m->result});
}

static ge_status bpe_long(const ge_tok *t, const int32_t *ids, int32_t n, ge_tokens *out)
{
    symbol *sym = malloc((size_t)n * sizeof *sym);
    heap h = {0};
    ge_status st = GE_OK;
    if (!sym)
        return GE_E_NOMEM;
    for (int32_t i = 0; i < n; i++)
        sym[i] = (symbol){ids[i], i - 1, i + 1};
    sym[n - 1].next = -1;
    for (int32_t i = 0; i < n - 1; i++)
        if (!consider(t, &h, sym, i))
            goto nomem;
    while (h.n) {
        candidate c = heap_pop(&h);
        int32_t l = c.left, r = sym[l].next;
        if (sym[l].id != c.left_id || r < 0 || sym[r].id != c.right_id)
            continue; /* stale: one side was merged away since */
        sym[l].id = c.result;
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

/* -- the quadratic BPE, for short words: the same order (lowest rank, then leftmost) -- */

static ge_status bpe_word(const ge_tok *t, int32_t *w, int32_t n, ge_tokens *out)
{
    if (n > SMALL_WORD)
        return bpe_long(t, w, n, out);
    if (n > 1) {
        int32_t rank[SMALL_WORD], res[SMALL_WORD];
        for (int32_t i = 0; i + 1 < n; i++) {
            const merge_slot *m = merge_find(t, w[i], w[i + 1]);
            rank[i] = m ? m->rank : NO_RANK;
            res[i] = m ? m->result : -1;
        }
        for (;;) {
            int32_t best = -1, br = NO_RANK;
            for (int32_t i = 0; i + 1 < n; i++)
                if (rank[i] < br)
                    br = rank[i], best = i;
            if (best < 0)
                break;
            w[best] = res[best];
            n--;
            for (int32_t i = best + 1; i < n; i++) {
                w[i] = w[i + 1];
                rank[i] = rank[i + 1];
                res[i] = res[i + 1];
            }
            for (int32_t i = best > 0 ? best - 1 : 0; i <= best && i + 1 < n; i++) {
                const merge_slot *m = merge_find(t, w[i], w[i + 1]);
                rank[i] = m ? m->rank : NO_RANK;
                res[i] = m ? m->result : -1;
            }
        }
    }
    ge_status st = reserve(out, (size_t)n);
    if (st)
        return st;
    memcpy(out->ids + out->n, w, (size_t)n * sizeof *w);
    out->n += (size_t)n;
    return GE_OK;
}

typedef struct {
    int32_t *v;
    size_t cap;
} symbuf;

/* BPE over one segment of ordinary text (no special tokens inside), valid UTF-8: one word
 * in Hugging Face, cut here into the pieces that no merge can join (see the top of the
 * file). w holds the symbols of the current piece. */
static ge_status bpe_segment(const ge_tok *t, const char *s, size_t len, symbuf *w,
                             ge_tokens *out)
{
    int32_t n = 0;       /* symbols of the current word: sym[0..n) */
    int32_t *sym = w->v;
    int32_t last = -1;   /* last character of the previous symbol, -1 unknown */
    bool prev_unk = false;
    ge_status st = GE_OK;
    for (size_t i = 0; i < len;) {
        if ((size_t)n + 4 > w->cap) { /* a character adds at most 4 symbols */
            size_t cap = w->cap ? 2 * w->cap : 256;
            if (cap > (size_t)INT32_MAX || !(sym = realloc(w->v, cap * sizeof *sym)))
                return GE_E_NOMEM;
            w->v = sym;
            w->cap = cap;
        }
        const uint8_t *u = (const uint8_t *)s + i;
        uint32_t cp;
        size_t cl;
        if (u[0] < 0x80)
            cp = u[0], cl = 1;
        else if (u[0] < 0xe0)
            cp = (u[0] & 0x1fu) << 6 | (u[1] & 0x3fu), cl = 2;
        else if (u[0] < 0xf0)
            cp = (u[0] & 0x0fu) << 12 | (u[1] & 0x3fu) << 6 | (u[2] & 0x3fu), cl = 3;
        else
            cp = (u[0] & 0x07u) << 18 | (u[1] & 0x3fu) << 12 | (u[2] & 0x3fu) << 6 |
                 (u[3] & 0x3fu), cl = 4;
        if (cp == ' ')
            cp = SPACE_CP;
        int32_t id = cp < 0x10000 ? t->bmp_id[cp] : ge_tok_find(t, s + i, cl);
        int32_t first = (int32_t)cp, next_last = (int32_t)cp;
        int nb = 1; /* symbols for this character: bytes when id < 0 */
        const uint8_t *bytes = cp == SPACE_CP ? (const uint8_t *)"\xe2\x96\x81" : u;
        if (id < 0) {
            /* byte fallback (Hugging Face: the character's <0xHH> pieces when all exist,
             * else one <unk>; consecutive <unk> are fused) */
            nb = cp == SPACE_CP ? 3 : (int)cl;
            bool all = true;
            for (int k = 0; k < nb; k++)
                all &= t->byte_id[bytes[k]] >= 0;
            if (all) {
                first = '<', next_last = '>';
            } else if (prev_unk) {
                i += cl;
                continue;
            } else {
                id = t->unk, first = t->unk_first, next_last = t->unk_last, nb = 1;
            }
        }
        prev_unk = id >= 0 && id == t->unk;
        for (int k = 0; k < nb; k++) {
            if (n > 0 && t->split_words && last >= 0 && first >= 0 &&
                !joinable(t, (uint32_t)last, (uint32_t)first)) {
                if ((st = bpe_word(t, sym, n, out)))
                    return st;
                n = 0;
            }
            if (id >= 0)
                sym[n++] = id;
            else /* the UTF-8 bytes of the character (of U+2581 for a space) */
                sym[n++] = t->byte_id[bytes[k]];
            last = next_last;
        }
        i += cl;
    }
    return n > 0 ? bpe_word(t, sym, n, out) : GE_OK;
}

/* The longest special token at s[0..len), ending on a character boundary: its id and
 * length, or -1. */
static int32_t special_at(const ge_tok *t, const char *s, size_t len, size_t *mlen)
{
    int32_t node = 0, found = -1;
    for (size_t k = 0; k < len; k++) {
        uint8_t c = (uint8_t)s[k];
        int32_t ch = t->trie[node].child;
        while (ch && t->trie[ch].byte != c)
            ch = t->trie[ch].sibling;
        if (!ch)
            break;
        node = ch;
        if (t->trie[node].id >= 0 && (k + 1 == len || ((uint8_t)s[k + 1] & 0xc0) != 0x80)) {
            found = t->trie[node].id;
            *mlen = k + 1;
        }
    }
    return found;
}

ge_status ge_tok_encode(const ge_tok *t, const char *text, size_t len, bool add_special,
                        ge_tokens *out, ge_err *err)
{
    size_t bad = ge_utf8_check(text, len);
    if (bad < len)
        return ge_fail(err, GE_E_INPUT, "invalid UTF-8 at byte %zu", bad);
    ge_status st = GE_OK;
    symbuf w = {0};
    if (add_special && t->add_bos)
        st = push(out, t->bos);
    size_t seg = 0;
    for (size_t i = 0; i < len && !st; i++) {
        size_t ml;
        int32_t sp;
        if (!t->special_first[(uint8_t)text[i]] || (sp = special_at(t, text + i, len - i, &ml)) < 0)
            continue;
        if (i > seg)
            st = bpe_segment(t, text + seg, i - seg, &w, out);
        if (!st)
            st = push(out, sp);
        i += ml - 1;
        seg = i + 1;
    }
    if (!st && len > seg)
        st = bpe_segment(t, text + seg, len - seg, &w, out);
    free(w.v);
    if (!st && add_special && t->add_eos)
        st = push(out, t->eos);
    if (st)
        return ge_fail(err, st, "out of memory tokenizing %zu bytes", len);
    return GE_OK;
}

/* The code point of the (valid) UTF-8 character at u and its length in *cl. */
static uint32_t decode_cp(const uint8_t *u, size_t *cl)
{
    if (u[0] < 0x80)
        return *cl = 1, u[0];
    if (u[0] < 0xe0)
        return *cl = 2, (u[0] & 0x1fu) << 6 | (u[1] & 0x3fu);
    if (u[0] < 0xf0)
        return *cl = 3, (u[0] & 0x0fu) << 12 | (u[1] & 0x3fu) << 6 | (u[2] & 0x3fu);
    return *cl = 4, (u[0] & 0x07u) << 18 | (u[1] & 0x3fu) << 12 | (u[2] & 0x3fu) << 6 |
                    (u[3] & 0x3fu);
}

/* The id of the one-character piece of the character at u (cl bytes), or -1. */
static int32_t char_id(const ge_tok *t, const char *u, size_t cl, uint32_t cp)
{
    return cp < 0x10000 ? t->bmp_id[cp] : ge_tok_find(t, u, cl);
}

/* Does the character at u (cl bytes, code point cp) become <unk> (no piece of its own, and
 * not all of its bytes have <0xHH> pieces)? */
static bool char_unknown(const ge_tok *t, const uint8_t *u, size_t cl, uint32_t cp)
{
    if (char_id(t, (const char *)u, cl, cp) >= 0)
        return false;
    if (cp == SPACE_CP) /* a space falls back to the bytes of U+2581 */
        u = (const uint8_t *)"\xe2\x96\x81", cl = 3;
    for (size_t k = 0; k < cl; k++)
        if (t->byte_id[u[k]] < 0)
            return true;
    return false;
}

/* Is id a <0xHH> byte piece? Its byte into *b. */
static bool byte_piece(const ge_tok *t, int32_t id, uint8_t *b)
{
    const ge_gguf_str *p = &t->pieces[id];
    if (p->len != 6 || memcmp(p->ptr, "<0x", 3) || p->ptr[5] != '>')
        return false;
    *b = (uint8_t)strtoul((char[]){p->ptr[3], p->ptr[4], 0}, NULL, 16);
    return t->byte_id[*b] == id;
}

int ge_tok_piece(const ge_tok *t, int32_t id, char *buf, size_t cap)
{
    uint8_t b;
    if (id < 0 || id >= t->n_vocab)
        return -1;
    if (byte_piece(t, id, &b)) {
        if (cap < 1)
            return -1;
        buf[0] = (char)b;
        return 1;
    }
    const ge_gguf_str *p = &t->pieces[id];
    if (p->len > cap)
        return -1;
    memcpy(buf, p->ptr, p->len);
    return (int)p->len;
}

ge_status ge_tok_spans(const ge_tok *t, const char *text, size_t len, const int32_t *ids,
                       size_t n, size_t *ends, bool *mid)
{
    size_t at = 0, used = 0; /* the character at text[at], of which `used` normalised bytes
                              * are spent (a space is the 3 bytes of U+2581) */
    for (size_t i = 0; i < n; i++) {
        const int32_t id = ids[i];
        size_t ml;
        if (used == 0 && at < len && special_at(t, text + at, len - at, &ml) == id) {
            at += ml; /* a special token: its own bytes, no space replacement */
        } else if (id == t->unk) { /* fused unknown characters */
            for (;;) {
                size_t cl;
                decode_cp((const uint8_t *)text + at, &cl);
                at += cl;
                if (at >= len)
                    break;
                uint32_t cp = decode_cp((const uint8_t *)text + at, &cl);
                if (!char_unknown(t, (const uint8_t *)text + at, cl, cp == ' ' ? SPACE_CP : cp))
                    break;
            }
            used = 0;
        } else { /* its piece's bytes (one for a <0xHH> piece) against the normalised text */
            uint8_t byte;
            size_t k = byte_piece(t, id, &byte) ? 1 : (size_t)t->pieces[id].len;
            while (k > 0 && at < len) {
                size_t cl;
                decode_cp((const uint8_t *)text + at, &cl);
                const size_t norm = text[at] == ' ' ? 3 : cl, take = norm - used < k ? norm - used : k;
                used += take, k -= take;
                if (used == norm)
                    at += cl, used = 0;
            }
        }
        if (at > len)
            return GE_E_INTERNAL;
        ends[i] = at;
        if (mid)
            mid[i] = used != 0;
    }
    return at == len && used == 0 ? GE_OK : GE_E_INTERNAL;
}

size_t ge_tok_find_placeholder(const ge_tok *t, const int32_t *ids, size_t n, const char **piece)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < GE_KIND_COUNT; k++)
            if (t->media[k] >= 0 && ids[i] == t->media[k]) {
                if (piece)
                    *piece = ge_modality_of((ge_kind)k)->soft;
                return i;
            }
    return n;
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
