/* fuzz_jsonl.c - libFuzzer target: the record reader (cli/input.c ge_in_create/ge_in_next)
 * on an arbitrary input file, format guessed as the CLI does (GE_IN_AUTO: jsonl when the
 * first non-blank byte is '{', else lines; gzip is decompressed transparently).
 *
 * The input goes to an anonymous memory file opened by its /proc/self/fd path. Every record
 * is checked: a good record has valid UTF-8 text (lines mode; jansson guarantees it in
 * jsonl), an id that is the raw JSON text of a string or number (or the line number), and a
 * prefix that is a C string; an error record has a code and a "source:line: " message.
 * Records are then written the way the CLI writes ids and texts (ge_json_put_string).
 * A second reader skips the first k records (ge_in_skip, k from the input's first byte) and
 * must then return exactly the records the first one returned after them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ge.h"
#include "input.h"
#include "json_span.h"

static int mem_fd = -1;
static char mem_path[64];
static FILE *sink;

static void put_file(const uint8_t *data, size_t size)
{
    if (mem_fd < 0) {
        mem_fd = memfd_create("fuzz_jsonl", 0);
        if (mem_fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(mem_path, sizeof mem_path, "/proc/self/fd/%d", mem_fd);
        sink = fopen("/dev/null", "w");
        if (!sink)
            abort();
    }
    if (ftruncate(mem_fd, 0) != 0 || (size && pwrite(mem_fd, data, size, 0) != (ssize_t)size)) {
        perror("memfd write");
        abort();
    }
}

static void must(int ok, const char *what, const ge_rec *r)
{
    if (!ok) {
        fprintf(stderr, "fuzz_jsonl: invariant broken: %s (line %llu, code %s: %s)\n", what,
                r->line, r->err_code ? r->err_code : "-", r->err_code ? r->err_msg : "");
        abort();
    }
}

static void check_record(const ge_rec *r, unsigned long long n)
{
    must(r->line >= 1 && r->seq >= r->line && r->seq >= n, "line numbers", r);
    must(r->source && strcmp(r->source, mem_path) == 0, "source", r);
    must(r->id && r->id_len > 0, "an id", r);
    if (r->err_code) {
        size_t pl = strlen(mem_path);
        must(strlen(r->err_code) > 0, "error code", r);
        must(strncmp(r->err_msg, mem_path, pl) == 0 && r->err_msg[pl] == ':', "error message",
             r);
        return;
    }
    /* a text record, or a record of items: valid UTF-8 texts, media with data (a path
     * without NUL bytes, or decoded inline bytes) */
    must((r->text != NULL) != (r->n_items > 0), "text or items", r);
    if (r->text)
        must(ge_utf8_check(r->text, r->text_len) == r->text_len, "text is valid UTF-8", r);
    for (size_t i = 0; i < r->n_items; i++) {
        const ge_rec_item *it = &r->items[i];
        must(it->data != NULL, "item data", r);
        if (it->kind == GE_KIND_TEXT)
            must(ge_utf8_check(it->data, it->len) == it->len, "item text is valid UTF-8", r);
        else
            must(it->len > 0 && (it->inline_bytes || strlen(it->data) == it->len),
                 "a media item's path or bytes", r);
        ge_json_put_string(sink, it->data, it->len);
    }
    if (r->prefix)
        must(ge_utf8_check(r->prefix, strlen(r->prefix)) == strlen(r->prefix),
             "prefix is valid UTF-8", r);
    /* the id: digits (the line number), or one JSON string or number as written */
    if (r->id[0] == '"') {
        json_error_t je;
        json_t *v = json_loadb(r->id, r->id_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        must(v && json_is_string(v), "a string id is one JSON string", r);
        json_decref(v);
    } else {
        must(ge_json_number_valid(r->id, r->id_len), "a numeric id is one JSON number", r);
    }
    if (r->text)
        ge_json_put_string(sink, r->text, r->text_len);
    ge_json_put_string(sink, r->id, r->id_len);
}

/* what identifies a record: its position, id, text and error */
static uint64_t fingerprint(const ge_rec *r)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(p, n)                                                                      \
    for (size_t i_ = 0; i_ < (n); i_++)                                                \
        h = (h ^ ((const unsigned char *)(p))[i_]) * 1099511628211ull;
    MIX(&r->line, sizeof r->line);
    MIX(&r->seq, sizeof r->seq);
    MIX(r->id, r->id_len);
    if (r->text)
        MIX(r->text, r->text_len);
    for (size_t i = 0; i < r->n_items; i++)
        MIX(r->items[i].data, r->items[i].len);
    if (r->prefix)
        MIX(r->prefix, strlen(r->prefix));
    if (r->err_code)
        MIX(r->err_code, strlen(r->err_code));
#undef MIX
    return h;
}

static void check_position(const ge_in *in, size_t size)
{
    unsigned long long done, total;
    ge_in_position(in, &done, &total);
    if (total != size || done > total) {
        fprintf(stderr, "fuzz_jsonl: position %llu of %llu, file of %zu bytes\n", done, total,
                size);
        abort();
    }
}

#define MAX_RECS 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t fp[MAX_RECS];
    put_file(data, size);
    char *paths[] = {mem_path};
    ge_in *in = ge_in_create(paths, 1, GE_IN_AUTO);
    if (!in)
        abort();
    ge_rec r;
    ge_err err;
    int rc;
    unsigned long long n = 0;
    while ((rc = ge_in_next(in, &r, &err)) == 1) {
        check_record(&r, ++n);
        check_position(in, size);
        if (n <= MAX_RECS)
            fp[n - 1] = fingerprint(&r);
    }
    if (rc < 0 && err.code != GE_E_IO) {
        fprintf(stderr, "fuzz_jsonl: unexpected failure: %s\n", err.msg);
        abort();
    }
    ge_in_free(in);
    if (rc < 0 || n > MAX_RECS)
        return 0;

    /* skip k, then the rest must be the same records */
    unsigned long long k = size ? data[0] % (n + 2) : 0, skipped, m = 0;
    in = ge_in_create(paths, 1, GE_IN_AUTO);
    if (!in)
        abort();
    if (ge_in_skip(in, k, &skipped, &err) != 0 || skipped != (k < n ? k : n)) {
        fprintf(stderr, "fuzz_jsonl: skipping %llu of %llu records skipped %llu\n", k, n,
                skipped);
        abort();
    }
    while ((rc = ge_in_next(in, &r, &err)) == 1) {
        if (skipped + m >= n || fingerprint(&r) != fp[skipped + m]) {
            fprintf(stderr, "fuzz_jsonl: after skipping %llu, record %llu differs\n", skipped,
                    skipped + m + 1);
            abort();
        }
        m++;
    }
    if (rc != 0 || skipped + m != n) {
        fprintf(stderr, "fuzz_jsonl: after skipping %llu, %llu records instead of %llu\n",
                skipped, m, n - skipped);
        abort();
    }
    ge_in_free(in);
    return 0;
}
