/* test_chunk.c - passages of long texts (issue 20, first part): ge_chunk_plan's rules on
 * random texts of words, sentences, CJK and emoji tokenized by the tiny model
 * (ge_tokenize_spans): the passages cover the text in order, hold at most the budget, overlap
 * as asked, never end or start inside a character, and cut at the last sentence end (else
 * whitespace) in a window's last tenth when there is one. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static bool space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static bool sentence_end(const char *t, size_t at)
{
    const unsigned char c = at ? (unsigned char)t[at - 1] : 0;
    return c == '.' || c == '!' || c == '?' ||
           (at >= 3 && (!memcmp(t + at - 3, "\xe3\x80\x82", 3) ||
                        !memcmp(t + at - 3, "\xef\xbc\x81", 3) ||
                        !memcmp(t + at - 3, "\xef\xbc\x9f", 3)));
}

/* s[0..n) as a JSON string */
static void put_json(FILE *f, const char *s, size_t n)
{
    putc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            putc(c, f);
    }
    putc('"', f);
}

/* argv[1]: a folder for chunk_cases.jsonl, the cases for tests/chunk_ref_check.py */
int main(int argc, char **argv)
{
    ge_model *m;
    ge_err err = {0};
    if (!check(ge_model_open(&m, "testdata/tiny-f32.gguf", NULL, &err) == GE_OK,
               "tiny model loads", "%s", err.msg))
        return check_done();

    char path[4200];
    snprintf(path, sizeof path, "%s/chunk_cases.jsonl", argc > 1 ? argv[1] : ".");
    FILE *cases = argc > 1 ? fopen(path, "w") : NULL;
    static const char *const words[] = {"alpha", "beta", "gamma.", "delta!", "epsilon",
                                        "\xe6\x97\xa5\xe6\x9c\xac", "\xe3\x80\x82",
                                        "\xf0\x9f\x98\x80", "z\xc3\xa9ta?", "\n", "eta,"};
    const size_t nw = sizeof words / sizeof words[0];
    int bad_cover = 0, bad_budget = 0, bad_overlap = 0, bad_char = 0, bad_cut = 0, multi = 0;
    int bad_spans = 0;
    char text[20000];
    for (int c = 0; c < 400; c++) {
        size_t len = 0, n_words = 20 + rnd(600);
        for (size_t w = 0; w < n_words; w++) {
            const char *s = words[rnd(nw)];
            memcpy(text + len, s, strlen(s));
            len += strlen(s);
            if (rnd(4))
                text[len++] = ' ';
        }
        ge_tokens tk = {0};
        size_t *ends;
        bool *mid;
        if (ge_tokenize_spans(m, NULL, text, len, &tk, &ends, &mid, &err) != GE_OK) {
            bad_spans++;
            continue;
        }
        /* the text's own tokens: between <bos> and <eos> */
        const size_t n = tk.n - 2, *e = ends + 1;
        const bool *md = mid + 1;
        bad_spans += ends[0] != 0 || ends[tk.n - 1] != len || (n && e[n - 1] != len);
        const size_t budget = 5 + rnd(80), overlap = rnd((unsigned)budget);
        ge_passage *p;
        size_t np;
        if (ge_chunk_plan(text, len, e, md, n, budget, overlap, &p, &np) != GE_OK) {
            bad_cover++;
            continue;
        }
        multi += np > 1;
        if (cases && c < 150) {
            fprintf(cases, "{\"text\": ");
            put_json(cases, text, len);
            fprintf(cases, ", \"budget\": %zu, \"overlap\": %zu, \"ends\": [", budget,
                    overlap);
            for (size_t i = 0; i < n; i++)
                fprintf(cases, i ? ", %zu" : "%zu", e[i]);
            fprintf(cases, "], \"mid\": [");
            for (size_t i = 0; i < n; i++)
                fprintf(cases, i ? ", %d" : "%d", md[i]);
            fprintf(cases, "], \"passages\": [");
            for (size_t i = 0; i < np; i++)
                fprintf(cases, "%s[%zu, %zu, %zu, %zu]", i ? ", " : "", p[i].tok_lo,
                        p[i].tok_hi, p[i].lo, p[i].hi);
            fprintf(cases, "]}\n");
        }
        bad_cover += p[0].tok_lo != 0 || p[0].lo != 0 || p[np - 1].tok_hi != n ||
                     p[np - 1].hi != len;
        for (size_t i = 0; i < np; i++) {
            const ge_passage *q = &p[i];
            bad_budget += q->tok_hi - q->tok_lo > budget || q->tok_hi <= q->tok_lo;
            bad_char += (q->tok_lo && md[q->tok_lo - 1]) || md[q->tok_hi - 1];
            bad_cover += q->hi != e[q->tok_hi - 1] || q->lo != (q->tok_lo ? e[q->tok_lo - 1] : 0);
            if (i == 0)
                continue;
            const ge_passage *r = &p[i - 1];
            bad_cover += q->tok_lo <= r->tok_lo || q->tok_lo > r->tok_hi;
            /* the overlap asked, unless a character or progress moved the start back */
            /* less only where the start must move on: the first whole character after the
             * previous start */
            size_t first = r->tok_lo + 1;
            while (first < r->tok_hi && md[first - 1])
                first++;
            bad_overlap += r->tok_hi - q->tok_lo < overlap && q->tok_lo != first;
            /* a window that was cut: at the last sentence end in its tenth, else whitespace */
            const size_t win_end = r->tok_lo + budget, tenth = budget / 10 ? budget / 10 : 1;
            const size_t from = win_end - tenth > r->tok_lo ? win_end - tenth : r->tok_lo + 1;
            size_t sent = 0, ws = 0;
            for (size_t k = from; k <= win_end && k <= n; k++) {
                if (md[k - 1])
                    continue;
                const size_t at = e[k - 1];
                if (sentence_end(text, at) && (at == len || space(text[at])))
                    sent = k;
                if (at == len || space(text[at]) || (at && space(text[at - 1])))
                    ws = k;
            }
            bad_cut += (sent && r->tok_hi != sent) || (!sent && ws && r->tok_hi != ws);
        }
        free(p), free(ends), free(mid);
        ge_tokens_free(&tk);
    }
    check(bad_spans == 0, "token spans of the tiny model's tokenization end at the text's end",
          "%d wrong", bad_spans);
    check(bad_cover == 0 && multi > 100, "passages cover the text in order (400 random texts)",
          "%d wrong, %d split", bad_cover, multi);
    check(bad_budget == 0, "a passage holds at most the budget", "%d over", bad_budget);
    check(bad_overlap == 0, "passages overlap by the tokens asked", "%d wrong", bad_overlap);
    check(bad_char == 0, "no passage starts or ends inside a character", "%d inside", bad_char);
    check(bad_cut == 0, "cuts at the last sentence end of a window's last tenth, else whitespace",
          "%d elsewhere", bad_cut);

    ge_passage *p;
    size_t np;
    const size_t e1[] = {1, 2, 3};
    const bool m1[] = {false, false, false};
    check(ge_chunk_plan("abc", 3, e1, m1, 3, 4, 4, &p, &np) == GE_E_USAGE,
          "an overlap of the budget or more is refused", "accepted");
    check(ge_chunk_plan("abc", 3, e1, m1, 3, 4, 1, &p, &np) == GE_OK && np == 1 &&
              p[0].tok_hi == 3, "a text within the budget is one passage", "%zu", np);
    free(p);
    if (cases)
        fclose(cases);
    ge_model_free(m);
    return check_done();
}
