/* tokbench.c - tokenizer micro-benchmark on a real vocabulary (`make bench`; not a test).
 *
 *   tokbench VOCAB.gguf GOLDEN.jsonl PROSE_FILE...
 *
 * VOCAB.gguf holds the 262,144-piece vocabulary (tests/test_tokenizer_real.sh explains how it
 * is made); only its tokenizer metadata is used. Reports, single-threaded:
 *   - load: ge_gguf_open and ge_tok_create (pieces, merges and special tokens), best and
 *     median of several runs;
 *   - English prose (the PROSE_FILEs, hard-wrapped lines joined into paragraphs): MB/s with
 *     one ge_tok_encode call per paragraph, and with the whole text in one call;
 *   - CJK: MB/s on text made of seeded random CJK pieces of the vocabulary, per ~600-byte
 *     record and as one call;
 *   - the golden strings: total time, the slowest and the longest input (each the best of
 *     3 runs), and how many differ from the golden ids (a sanity check; the test is
 *     tests/test_tokenizer_real.sh).
 * Times are CPU time of the (single) thread, so other load on the machine disturbs them less.
 * The numbers are for PERF.md; nothing here is gated. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h" /* bench_now: CPU time of this thread (the tokenizer is single-threaded) */
#include "gguf.h"
#include "tok.h"

static void die(const char *what, const ge_err *err)
{
    fprintf(stderr, "tokbench: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

typedef struct {
    char *buf;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        if (!(s->buf = realloc(s->buf, s->cap)))
            die("out of memory", NULL);
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
}

/* records: offsets into one buffer */
typedef struct {
    sbuf text;
    size_t *off, n, cap; /* record i is text[off[i], off[i+1]) */
} corpus;

static void rec_end(corpus *c)
{
    if (c->n + 2 > c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        if (!(c->off = realloc(c->off, c->cap * sizeof *c->off)))
            die("out of memory", NULL);
    }
    if (c->n == 0)
        c->off[c->n++] = 0;
    c->off[c->n++] = c->text.len;
}

/* Paragraphs of a text file: blank lines separate them; the lines of one paragraph are
 * joined with single spaces (leading indentation dropped). */
static void add_prose(corpus *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tokbench: %s: cannot open\n", path);
        exit(1);
    }
    char line[4096];
    size_t start = c->text.len;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, "\r\n");
        if (n == 0) {
            if (c->text.len > start)
                rec_end(c);
            start = c->text.len;
            continue;
        }
        if (c->text.len > start)
            sb_add(&c->text, " ", 1);
        sb_add(&c->text, p, n);
    }
    if (c->text.len > start)
        rec_end(c);
    fclose(f);
}

/* ~bytes of CJK text from seeded random vocabulary pieces made only of CJK ideographs,
 * kana and hangul, in records of about 600 bytes. */
static void add_cjk(corpus *c, const ge_gguf *g, size_t bytes)
{
    ge_gguf_str *p;
    size_t n;
    ge_err err;
    if (ge_gguf_get_str_array(g, "tokenizer.ggml.tokens", &p, &n, &err))
        die("tokens", &err);
    size_t *cjk = malloc(n * sizeof *cjk), m = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)p[i].ptr;
        size_t k = 0, len = p[i].len;
        bool ok = len >= 3;
        while (ok && k < len) { /* 3-byte UTF-8 sequences in U+3040..U+9FFF or U+AC00..U+D7A3 */
            if (k + 3 > len || (s[k] & 0xf0) != 0xe0) {
                ok = false;
                break;
            }
            unsigned cp = (s[k] & 0x0fu) << 12 | (s[k + 1] & 0x3fu) << 6 | (s[k + 2] & 0x3fu);
            ok = (cp >= 0x3040 && cp <= 0x9fff) || (cp >= 0xac00 && cp <= 0xd7a3);
            k += 3;
        }
        if (ok)
            cjk[m++] = i;
    }
    uint32_t x = 12345;
    size_t rec = 0;
    while (c->text.len < bytes) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        /* favour the lower ids (more frequent pieces): min of two draws */
        uint32_t y = x * 2654435761u;
        size_t a = x % m, b = y % m, i = cjk[a < b ? a : b];
        sb_add(&c->text, p[i].ptr, p[i].len);
        rec += p[i].len;
        if (rec >= 600) {
            rec_end(c);
            rec = 0;
        }
    }
    if (rec)
        rec_end(c);
    free(cjk);
    free(p);
}

/* MB/s over every record of c, one call each, repeated until at least min_s seconds;
 * *ntok receives the token count of one pass. */
static double rate_records(const ge_tok *t, const corpus *c, double min_s, size_t *ntok)
{
    ge_tokens out = {0};
    ge_err err;
    size_t bytes = 0, passes = 0, toks = 0;
    double t0 = bench_now(), el;
    do {
        passes++;
        for (size_t r = 0; r + 1 < c->n; r++) {
            out.n = 0;
            if (ge_tok_encode(t, c->text.buf + c->off[r], c->off[r + 1] - c->off[r], true, &out,
                              &err))
                die("encode", &err);
            toks += out.n;
            bytes += c->off[r + 1] - c->off[r];
        }
    } while ((el = bench_now() - t0) < min_s);
    *ntok = toks / passes;
    ge_tokens_free(&out);
    return bytes / el / 1e6;
}

static double rate_whole(const ge_tok *t, const corpus *c, double min_s)
{
    ge_tokens out = {0};
    ge_err err;
    size_t bytes = 0;
    double t0 = bench_now(), el;
    do {
        out.n = 0;
        if (ge_tok_encode(t, c->text.buf, c->text.len, true, &out, &err))
            die("encode", &err);
        bytes += c->text.len;
    } while ((el = bench_now() - t0) < min_s);
    ge_tokens_free(&out);
    return bytes / el / 1e6;
}

static void golden(const ge_tok *t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tokbench: %s: cannot open\n", path);
        exit(1);
    }
    char *line = NULL;
    size_t cap = 0, n = 0, bad = 0, bytes = 0;
    ssize_t len;
    double total = 0, worst = 0, big_t = 0;
    char worst_name[128] = "", big_name[128] = "";
    size_t worst_bytes = 0, big_bytes = 0;
    ge_tokens out = {0};
    sbuf s = {0};
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
        json_t *ids = o ? json_object_get(o, "ids") : NULL;
        if (!ids) {
            json_decref(o);
            continue; /* the meta line */
        }
        s.len = 0;
        sb_add(&s, json_string_value(json_object_get(o, "prefix")),
               json_string_length(json_object_get(o, "prefix")));
        sb_add(&s, json_string_value(json_object_get(o, "text")),
               json_string_length(json_object_get(o, "text")));
        ge_err err;
        double best = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            out.n = 0;
            double t0 = bench_now();
            if (ge_tok_encode(t, s.buf, s.len, true, &out, &err))
                die("encode", &err);
            double el = bench_now() - t0;
            best = el < best ? el : best;
        }
        total += best;
        bytes += s.len;
        const char *name = json_string_value(json_object_get(o, "name"));
        if (best > worst) {
            worst = best;
            worst_bytes = s.len;
            snprintf(worst_name, sizeof worst_name, "%s", name ? name : "?");
        }
        if (name && strncmp(name, "long_", 5) == 0)
            printf("  %-20s %6zu bytes %6zu tokens %7.2f ms\n", name, s.len, out.n, best * 1e3);
        if (s.len > big_bytes) {
            big_t = best;
            big_bytes = s.len;
            snprintf(big_name, sizeof big_name, "%s", name ? name : "?");
        }
        bool same = out.n == json_array_size(ids);
        for (size_t i = 0; same && i < out.n; i++)
            same = out.ids[i] == json_integer_value(json_array_get(ids, i));
        bad += !same;
        n++;
        json_decref(o);
    }
    free(line);
    free(s.buf);
    ge_tokens_free(&out);
    fclose(f);
    printf("golden strings       %zu strings, %zu bytes in %.2f ms; %zu differ from the golden "
           "ids\n", n, bytes, total * 1e3, bad);
    printf("slowest golden input %.2f ms for \"%s\" (%zu bytes)\n", worst * 1e3, worst_name,
           worst_bytes);
    printf("longest golden input %.2f ms for \"%s\" (%zu bytes)\n", big_t * 1e3, big_name,
           big_bytes);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tokbench VOCAB.gguf GOLDEN.jsonl PROSE_FILE...\n");
        return 2;
    }
    ge_err err;
    enum { RUNS = 7 };
    double t_open[RUNS], t_tok[RUNS], t_all[RUNS];
    ge_gguf *g = NULL;
    ge_tok *t = NULL;
    for (int r = 0; r < RUNS; r++) {
        ge_tok_free(t);
        ge_gguf_close(g);
        double t0 = bench_now();
        if (ge_gguf_open(&g, argv[1], &err))
            die("open", &err);
        double t1 = bench_now();
        if (ge_tok_create(&t, g, &err))
            die("tokenizer", &err);
        double t2 = bench_now();
        t_open[r] = t1 - t0, t_tok[r] = t2 - t1, t_all[r] = t2 - t0;
    }
    const bench_stats s_open = bench_stats_of(t_open, RUNS),
                      s_tok = bench_stats_of(t_tok, RUNS), s_all = bench_stats_of(t_all, RUNS);
    printf("vocabulary           %d pieces\n", ge_tok_vocab_size(t));
    printf("load                 %.1f ms best, %.1f ms median (medians: gguf open %.1f ms, "
           "tokenizer %.1f ms)\n", s_all.min * 1e3, s_all.med * 1e3, s_open.med * 1e3,
           s_tok.med * 1e3);

    corpus prose = {0}, cjk = {0};
    for (int i = 3; i < argc; i++)
        add_prose(&prose, argv[i]);
    add_cjk(&cjk, g, prose.text.len > (1u << 20) ? prose.text.len : (1u << 20));
    size_t ntok;
    double r = rate_records(t, &prose, 1.0, &ntok);
    printf("prose, per paragraph %.1f MB/s (%zu paragraphs, %zu bytes, %.2f bytes/token)\n", r,
           prose.n - 1, prose.text.len, (double)prose.text.len / (double)ntok);
    printf("prose, one call      %.1f MB/s\n", rate_whole(t, &prose, 1.0));
    r = rate_records(t, &cjk, 1.0, &ntok);
    printf("CJK, per record      %.1f MB/s (%zu records, %zu bytes, %.2f bytes/token)\n", r,
           cjk.n - 1, cjk.text.len, (double)cjk.text.len / (double)ntok);
    printf("CJK, one call        %.1f MB/s\n", rate_whole(t, &cjk, 1.0));
    golden(t, argv[2]);

    free(prose.text.buf);
    free(prose.off);
    free(cjk.text.buf);
    free(cjk.off);
    ge_tok_free(t);
    ge_gguf_close(g);
    return 0;
}
