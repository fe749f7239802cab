/* test_tok.c - the tokenizer on the tiny vocabulary: UTF-8 validation, framing, special-token
 * split, byte fallback, and the heap BPE against a naive O(n^2) BPE on random strings. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gguf.h"
#include "tok.h"

#define RNG_SEED 88172645463325252ull
#include "rng.h"

/* ---- naive reference BPE ------------------------------------------------------------------ */

typedef struct {
    uint64_t key;
    int32_t rank, result;
} merge;

static merge *merges;
static size_t n_merges;

static int cmp_merge(const void *a, const void *b)
{
    uint64_t x = ((const merge *)a)->key, y = ((const merge *)b)->key;
    if (x != y)
        return x < y ? -1 : 1;
    return ((const merge *)a)->rank - ((const merge *)b)->rank;
}

static const merge *find_merge(int32_t a, int32_t b)
{
    merge k = {(uint64_t)(uint32_t)a << 32 | (uint32_t)b, -1, 0};
    size_t lo = 0, hi = n_merges;
    while (lo < hi) { /* first entry with key >= k (lowest rank among duplicates) */
        size_t mid = (lo + hi) / 2;
        if (merges[mid].key < k.key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_merges && merges[lo].key == k.key ? &merges[lo] : NULL;
}

static void load_merges(const ge_gguf *g, const ge_tok *t)
{
    ge_gguf_str *m;
    size_t n;
    ge_err err;
    ge_gguf_get_str_array(g, "tokenizer.ggml.merges", &m, &n, &err);
    merges = malloc(n * sizeof *merges);
    for (size_t r = 0; r < n; r++) {
        const char *sp = memchr(m[r].ptr + 1, ' ', m[r].len - 1);
        size_t ll = (size_t)(sp - m[r].ptr), rl = m[r].len - ll - 1;
        char buf[256];
        memcpy(buf, m[r].ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        merges[n_merges++] = (merge){(uint64_t)(uint32_t)ge_tok_find(t, m[r].ptr, ll) << 32 |
                                         (uint32_t)ge_tok_find(t, sp + 1, rl),
                                     (int32_t)r, ge_tok_find(t, buf, ll + rl)};
    }
    qsort(merges, n_merges, sizeof *merges, cmp_merge);
    free(m);
}

static size_t naive(const ge_tok *t, const char *s, size_t len, int32_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = (uint8_t)s[i] < 0x80 ? 1 : (uint8_t)s[i] < 0xe0 ? 2 : (uint8_t)s[i] < 0xf0 ? 3 : 4;
        const char *c = s[i] == ' ' ? "\xe2\x96\x81" : s + i;
        size_t nb = s[i] == ' ' ? 3 : cl;
        int32_t id = ge_tok_find(t, c, nb);
        if (id >= 0) {
            out[n++] = id;
        } else {
            for (size_t k = 0; k < nb; k++) {
                char hex[8];
                snprintf(hex, sizeof hex, "<0x%02X>", (uint8_t)c[k]);
                out[n++] = ge_tok_find(t, hex, 6);
            }
        }
        i += cl;
    }
    for (;;) {
        size_t best = SIZE_MAX;
        const merge *bm = NULL;
        for (size_t i = 0; i + 1 < n; i++) {
            const merge *m = find_merge(out[i], out[i + 1]);
            if (m && (!bm || m->rank < bm->rank))
                bm = m, best = i;
        }
        if (!bm)
            return n;
        out[best] = bm->result;
        memmove(out + best + 1, out + best + 2, (n - best - 2) * sizeof *out);
        n--;
    }
}

static uint32_t next(void) { return (uint32_t)(rnd() >> 16); }

static ge_status encode(const ge_tok *t, const char *s, bool special, ge_tokens *out)
{
    ge_err err;
    out->n = 0;
    return ge_tok_encode(t, s, strlen(s), special, out, &err);
}

int main(int argc, char **argv)
{
    ge_gguf *g = NULL;
    ge_tok *t = NULL;
    ge_err err = {0};
    const char *path = "testdata/tiny-f32.gguf";
    if (!check(ge_gguf_open(&g, path, &err) == GE_OK && ge_tok_create(&t, g, &err) == GE_OK,
               "tiny vocabulary loads", "%s", err.msg))
        return check_done();
    load_merges(g, t);
    check(n_merges > 100, "tiny vocabulary has merges", "%zu", n_merges);

    /* UTF-8 validation */
    const struct {
        const char *s;
        size_t bad;
    } u8[] = {{"abc", 3}, {"\xc3\xa9", 2}, {"\xc3", 0}, {"a\x80", 1}, {"\xc0\xaf", 0},
              {"\xed\xa0\x80", 0}, {"\xf4\x90\x80\x80", 0}, {"\xf0\x9f\x98\x80", 4},
              {"x\xe2\x82", 1}};
    int bad = 0;
    for (size_t i = 0; i < sizeof u8 / sizeof u8[0]; i++)
        bad += ge_utf8_check(u8[i].s, strlen(u8[i].s)) != u8[i].bad;
    check(bad == 0, "UTF-8 validation (overlong, surrogate, > U+10FFFF, truncated)",
          "%d wrong", bad);
    ge_tokens tk = {0};
    check(ge_tok_encode(t, "ok\xff", 3, true, &tk, &err) == GE_E_INPUT &&
              strstr(err.msg, "byte 2"),
          "invalid UTF-8 is an input error naming the byte", "%s", err.msg);

    /* framing */
    int32_t bos = ge_tok_find(t, "<bos>", 5), eos = ge_tok_find(t, "<eos>", 5);
    encode(t, "", true, &tk);
    check(tk.n == 2 && tk.ids[0] == bos && tk.ids[1] == eos, "empty text is <bos> <eos>",
          "n=%zu", tk.n);
    /* special tokens split out by exact match, and not merged with neighbours */
    int32_t sot = ge_tok_find(t, "<start_of_turn>", 15);
    encode(t, "a<start_of_turn>b", false, &tk);
    check(sot >= 0 && tk.n == 3 && tk.ids[1] == sot, "control token inside text",
          "n=%zu", tk.n);
    /* emoji are not in the tiny vocabulary: four byte tokens */
    encode(t, "\xf0\x9f\x98\x80", false, &tk);
    check(tk.n == 4 && tk.ids[0] == ge_tok_find(t, "<0xF0>", 6) &&
              tk.ids[3] == ge_tok_find(t, "<0x80>", 6),
          "byte fallback for an emoji", "n=%zu", tk.n);
    /* a space is U+2581 and there is no dummy prefix */
    encode(t, " ", false, &tk);
    check(tk.n == 1 && tk.ids[0] == ge_tok_find(t, "\xe2\x96\x81", 3), "space becomes U+2581",
          "n=%zu", tk.n);

    /* heap BPE == naive BPE on random strings */
    const char *alpha[] = {"a", "b", "e", "t", "h", "i", "n", "g", "s", "o", "r", " ", " ", " ",
                           "\n", "\t", "T", "1", "0", ".", ",", "\xc3\xa9", "\xe6\x97\xa5",
                           "\xf0\x9f\x98\x80", "the", "ing", " the", "  ", "er", "on"};
    const size_t na = sizeof alpha / sizeof alpha[0];
    int mismatches = 0, cases = 0;
    char s[2048];
    int32_t want[2048];
    for (int c = 0; c < 3000; c++) {
        size_t len = 0, parts = next() % 60;
        for (size_t p = 0; p < parts; p++) {
            const char *a = alpha[next() % na];
            memcpy(s + len, a, strlen(a));
            len += strlen(a);
        }
        s[len] = 0;
        encode(t, s, false, &tk);
        size_t nw = naive(t, s, len, want);
        cases++;
        if (nw != tk.n || memcmp(want, tk.ids, nw * sizeof *want) != 0) {
            if (mismatches++ == 0)
                printf("first mismatch on \"%s\": %zu vs %zu tokens\n", s, tk.n, nw);
        }
    }
    check(mismatches == 0, "heap BPE equals naive BPE on 3000 random strings",
          "%d of %d differ", mismatches, cases);

    /* token spans: each token's piece (U+2581 as a space, <0xHH> as its byte) spells the text
     * between its end and the previous one; an end inside a character only after a byte piece */
    const char *more[] = {"<start_of_turn>", "\xe2\x96\x81", "\xf0\x9f\x98\x80 ", "<bos>"};
    int span_bad = 0, mids = 0;
    for (int c = 0; c < 3000; c++) {
        size_t len = 0, parts = next() % 60;
        for (size_t p = 0; p < parts; p++) {
            const char *a = next() % 8 ? alpha[next() % na] : more[next() % 4];
            memcpy(s + len, a, strlen(a));
            len += strlen(a);
        }
        s[len] = 0;
        encode(t, s, false, &tk);
        size_t ends[2048];
        bool mid[2048];
        if (ge_tok_spans(t, s, len, tk.ids, tk.n, ends, mid) != GE_OK) {
            if (span_bad++ == 0)
                printf("spans fail on \"%s\"\n", s);
            continue;
        }
        char spelled[8192];
        size_t k = 0, from = 0;
        for (size_t i = 0; i < tk.n; i++) {
            char piece[64];
            int pl = ge_tok_piece(t, tk.ids[i], piece, sizeof piece);
            for (int j = 0; j < pl; j++) /* U+2581 spells a space, but the text's own U+2581 */
                spelled[k++] = piece[j];
            mids += mid[i];
            if (mid[i])
                continue;
            /* the text from the last whole-character end to this one, normalised as pieces */
            char want_s[8192];
            size_t w = 0;
            for (size_t b = from; b < ends[i]; b++)
                if (s[b] == ' ')
                    memcpy(want_s + w, "\xe2\x96\x81", 3), w += 3;
                else
                    want_s[w++] = s[b];
            if (w != k || memcmp(want_s, spelled, k) != 0) {
                if (span_bad++ == 0)
                    printf("span %zu of \"%s\" is wrong\n", i, s);
                break;
            }
            k = 0, from = ends[i];
        }
        span_bad += from != len && !span_bad;
    }
    check(span_bad == 0 && mids > 0, "token spans spell the text on 3000 random strings "
          "(specials, U+2581, emoji byte pieces)", "%d wrong, %d mid-character ends", span_bad,
          mids);

    /* long input: O(n log n) */
    size_t big = 200000;
    char *longtext = malloc(big + 1);
    for (size_t i = 0; i < big; i++)
        longtext[i] = "the thing is on  \n"[i % 18];
    longtext[big] = 0;
    clock_t t0 = clock();
    tk.n = 0;
    ge_status st = ge_tok_encode(t, longtext, big, true, &tk, &err);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    check(st == GE_OK && tk.n > 1000 && secs < 2.0, "200 kB text tokenizes quickly",
          "status %d, %.2f s", st, secs);
    printf("info: 200 kB in %.3f s (%zu tokens)\n", secs, tk.n);
    free(longtext);
    (void)argc, (void)argv;
    ge_tokens_free(&tk);
    free(merges);
    ge_tok_free(t);
    ge_gguf_close(g);
    return check_done();
}
