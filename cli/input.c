/* input.c - record readers (input.h): gzip-transparent line reader, lines and jsonl records.
 *
 * Line numbering: rec->line counts lines inside each input (for "file:line" messages) and
 * rec->seq counts lines across all inputs, continuing from one file to the next. seq is the
 * id of lines-mode records and of JSONL records without an id, so `gemmaembed a b` gives the
 * same ids as `cat a b | gemmaembed`. A final line without a newline is still a line; a
 * newline at the very end does not start another one. A UTF-8 byte order mark at the start of
 * an input is skipped. */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base64.h"
#include "json_span.h"

/* jansson flags for records:
 *  - DECODE_ANY: a line holding a bare scalar is parsed, then reported as "not an object";
 *  - DECODE_INT_AS_REAL: integers beyond int64 (ids of any size) parse as doubles instead
 *    of failing; the id itself is echoed from the raw text, never from the double;
 *  - REJECT_DUPLICATES: {"id":1,"id":2} is ambiguous (which id? which text?) so it is an
 *    error record rather than a silent choice;
 *  - ALLOW_NUL: "\u0000" in a text is legal JSON and the tokenizer takes lengths. */
#define JSON_FLAGS (JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

/* Most items in one record (a content array longer than this is an error record). */
#define MAX_ITEMS 256

struct ge_in {
    char **paths;
    int npaths, next;   /* next = index of the next path to open */
    ge_in_kind forced;  /* --input, or GE_IN_AUTO */

    /* the current input: read(2) as bytes come, so that a pipe's reader sees each line as
     * soon as it is written (gzread waits for a full buffer); inflated when it starts with
     * the gzip magic, member after member as gzip -d does */
    int fd;             /* -1 between inputs */
    const char *source; /* its name for messages */
    ge_in_kind kind;    /* its format */
    bool eof;           /* the end of the current input's (decompressed) bytes */
    bool gzip, fd_eof, member_end;
    z_stream zs;
    unsigned char *zbuf; /* compressed bytes for inflate */
    unsigned char head[2]; /* the first bytes, read to look for the gzip magic */
    size_t head_len;
    unsigned long long raw_bytes; /* bytes read from fd */
    bool (*interrupted)(void *); /* ge_in_set_interrupt */
    void *interrupt_ctx;

    char *buf;          /* read buffer: unconsumed bytes are buf[start..end) */
    size_t cap, start, end;
    char *line;         /* the current line, without "\n" / "\r\n" */
    size_t line_len, line_cap;
    bool line_over;     /* the current line was longer than GE_IN_MAX_LINE */
    bool over_text;     /* ... and had a non-blank byte (else it is a blank line) */

    unsigned long long line_no, seq;
    unsigned long long cur_size;    /* size of the current input when a regular file */
    unsigned long long closed_bytes; /* sizes of the inputs already read */
    unsigned long long total_bytes; /* sum of the input sizes, 0 = unknown */
    json_t *root;       /* the current JSONL record (owns its text) */
    char *prefix;       /* the current record's title prefix */
    char *subst;        /* copy of a line with huge numbers replaced (parse_huge_numbers) */
    char idbuf[24];     /* a line number written as an id */
    char *idjson;       /* files input: the path as a JSON string */
    size_t idjson_len;
    ge_rec_request req;           /* the current record, when an OpenAI request */
    const char *req_texts[GE_IN_MAX_INPUTS];
    size_t req_lens[GE_IN_MAX_INPUTS];
    ge_rec_item items[MAX_ITEMS]; /* the current record's media items */
    char *item_data[MAX_ITEMS];   /* their NUL-terminated paths or decoded bytes (owned) */
    size_t n_items;
};

ge_status ge_in_check(const char *path, ge_err *err)
{
    if (strcmp(path, "-") == 0)
        return GE_OK;
    /* stat and access, not open: opening a named pipe to look at it would take (and on close
     * drop) the writer the real read needs */
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        return ge_fail(err, GE_E_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ge_fail(err, GE_E_IO, "%s: %s", path, strerror(EISDIR));
    return GE_OK;
}

ge_in *ge_in_create(char **paths, int n, ge_in_kind kind)
{
    ge_in *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    static char *dash[] = {"-"};
    in->paths = n > 0 ? paths : dash;
    in->npaths = n > 0 ? n : 1;
    in->forced = kind;
    in->fd = -1;
    for (int i = 0; i < in->npaths; i++) {
        struct stat st;
        const char *p = in->paths[i];
        int ok = strcmp(p, "-") == 0 ? fstat(STDIN_FILENO, &st) : stat(p, &st);
        if (ok != 0 || !S_ISREG(st.st_mode)) {
            in->total_bytes = 0;
            break;
        }
        in->total_bytes += (unsigned long long)st.st_size;
    }
    return in;
}

void ge_in_position(const ge_in *in, unsigned long long *done, unsigned long long *total)
{
    unsigned long long d = in->closed_bytes;
    if (in->fd >= 0) {
        /* a plain file: the bytes handed out as lines; gzip: compressed bytes read */
        size_t pending = in->gzip ? 0 : in->end - in->start;
        if (in->raw_bytes >= pending)
            d += in->raw_bytes - pending;
    }
    *done = d;
    *total = in->total_bytes;
}

static void close_input(ge_in *in)
{
    if (in->fd >= 0) {
        close(in->fd);
        in->closed_bytes += in->cur_size;
        if (in->gzip)
            inflateEnd(&in->zs);
    }
    in->fd = -1;
}

void ge_in_free(ge_in *in)
{
    if (!in)
        return;
    close_input(in);
    json_decref(in->root);
    free(in->prefix);
    free(in->subst);
    free(in->idjson);
    for (size_t i = 0; i < in->n_items; i++)
        free(in->item_data[i]);
    free(in->buf);
    free(in->line);
    free(in->zbuf);
    free(in);
}

/* ---- reading ---------------------------------------------------------------------------- */

static int read_error(ge_in *in, const char *why, ge_err *err)
{
    ge_fail(err, GE_E_IO, "%s: read error: %s", in->source, why);
    return -1;
}

#define INTERRUPT_POLL_MS 100

void ge_in_set_interrupt(ge_in *in, bool (*interrupted)(void *ctx), void *ctx)
{
    in->interrupted = interrupted;
    in->interrupt_ctx = ctx;
}

/* read(2) into dst: the bytes, 0 at the end, -1 on an error (EINTR included: a signal asks
 * the reader to stop; so does ge_in_set_interrupt's test). */
static ssize_t read_fd(ge_in *in, void *dst, size_t want, ge_err *err)
{
    /* wait for bytes in short polls: a stop that lands just before a blocking read (too
     * early for its signal to interrupt it) is still seen within INTERRUPT_POLL_MS */
    struct pollfd p = {in->fd, POLLIN, 0};
    while (in->interrupted) {
        if (in->interrupted(in->interrupt_ctx))
            return read_error(in, strerror(EINTR), err);
        int r = poll(&p, 1, INTERRUPT_POLL_MS);
        if (r > 0 || (r < 0 && errno != EINTR))
            break; /* bytes, the end, or an error that read(2) reports */
    }
    ssize_t n = read(in->fd, dst, want);
    if (n < 0)
        return read_error(in, strerror(errno), err);
    in->raw_bytes += (unsigned long long)n;
    return n;
}

#define ZBUF ((size_t)128 << 10)

/* Start reading the input just opened: look for the gzip magic in its first two bytes. */
static int start_input(ge_in *in, ge_err *err)
{
    in->head_len = 0;
    in->gzip = in->fd_eof = in->member_end = false;
    while (in->head_len < 2) {
        ssize_t n = read_fd(in, in->head + in->head_len, 2 - in->head_len, err);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        in->head_len += (size_t)n;
    }
    if (in->head_len < 2 || in->head[0] != 0x1f || in->head[1] != 0x8b)
        return 0;
    if (!in->zbuf && !(in->zbuf = malloc(ZBUF)))
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", in->source), -1;
    memset(&in->zs, 0, sizeof in->zs);
    if (inflateInit2(&in->zs, 16 + MAX_WBITS) != Z_OK)
        return ge_fail(err, GE_E_NOMEM, "%s: cannot start zlib", in->source), -1;
    in->gzip = true;
    memcpy(in->zbuf, in->head, 2);
    in->zs.next_in = in->zbuf;
    in->zs.avail_in = 2;
    in->head_len = 0;
    return 0;
}

/* Up to want decompressed bytes into dst: as soon as there are some, 0 at the end, -1 on an
 * error. After a member, another one may follow; other trailing bytes are ignored (gzip -d
 * warns about them, zlib's gzread ignores them too). */
static ssize_t inflate_some(ge_in *in, unsigned char *dst, size_t want, ge_err *err)
{
    z_stream *z = &in->zs;
    for (;;) {
        if (z->avail_in == 0 && !in->fd_eof) {
            ssize_t n = read_fd(in, in->zbuf, ZBUF, err);
            if (n < 0)
                return -1;
            in->fd_eof = n == 0;
            z->next_in = in->zbuf;
            z->avail_in = (uInt)n;
            continue;
        }
        if (in->member_end) {
            if (z->avail_in == 0 || z->next_in[0] != 0x1f)
                return 0;
            inflateReset(z);
            in->member_end = false;
        }
        if (z->avail_in == 0) /* the input ended inside a member */
            return read_error(in, "unexpected end of file", err);
        z->next_out = dst;
        z->avail_out = (uInt)want;
        int r = inflate(z, Z_NO_FLUSH);
        if (r == Z_STREAM_END)
            in->member_end = true;
        else if (r != Z_OK && r != Z_BUF_ERROR)
            return read_error(in, z->msg ? z->msg : "corrupt gzip data", err);
        if (z->avail_out < want)
            return (ssize_t)(want - z->avail_out);
    }
}

/* Read more bytes after buf[end], growing or compacting the buffer as needed. Returns 1 when
 * bytes were added, 0 at the end of the input, -1 on a read error. */
static int refill(ge_in *in, ge_err *err)
{
    if (in->eof)
        return 0;
    if (in->start > 0 && in->start == in->end)
        in->start = in->end = 0;
    if (in->end == in->cap) {
        if (in->start > 0) {
            memmove(in->buf, in->buf + in->start, in->end - in->start);
            in->end -= in->start;
            in->start = 0;
        } else {
            size_t cap = in->cap ? in->cap * 2 : (size_t)256 << 10;
            char *b = realloc(in->buf, cap);
            if (!b) {
                ge_fail(err, GE_E_NOMEM, "%s: out of memory", in->source);
                return -1;
            }
            in->buf = b;
            in->cap = cap;
        }
    }
    size_t want = in->cap - in->end;
    if (want > (1u << 30))
        want = 1u << 30;
    ssize_t got;
    if (in->gzip) {
        got = inflate_some(in, (unsigned char *)in->buf + in->end, want, err);
    } else if (in->head_len) { /* the bytes read to look for the gzip magic */
        got = (ssize_t)(in->head_len < want ? in->head_len : want);
        memcpy(in->buf + in->end, in->head, (size_t)got);
        memmove(in->head, in->head + got, in->head_len - (size_t)got);
        in->head_len -= (size_t)got;
    } else {
        got = read_fd(in, in->buf + in->end, want, err);
    }
    if (got < 0)
        return -1;
    if (got == 0) {
        in->eof = true;
        return 0;
    }
    in->end += (size_t)got;
    return 1;
}

#define PEEK_MAX GE_IN_MAX_LINE

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Open paths[next], skip a BOM and settle its format. Returns 1, 0 when no input is left,
 * -1 on error. */
static int open_next(ge_in *in, ge_err *err)
{
    if (in->next >= in->npaths)
        return 0;
    const char *path = in->paths[in->next++];
    int fd;
    if (strcmp(path, "-") == 0) {
        in->source = "<stdin>";
        fd = dup(STDIN_FILENO);
    } else {
        in->source = path;
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return ge_fail(err, GE_E_IO, "%s: %s", in->source, strerror(errno)), -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: %s", in->source, strerror(EISDIR)), -1;
    }
    in->cur_size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (unsigned long long)st.st_size
                                                              : 0;
    in->fd = fd;
    in->raw_bytes = 0;
    in->eof = false;
    if (start_input(in, err) < 0)
        return -1;
    in->start = in->end = 0;
    in->line_no = 0;

    /* Peek at the start: skip a byte order mark, then find the first non-blank byte for
     * the format guess (looking at most PEEK_MAX bytes ahead, to keep memory bounded). */
    while (in->end - in->start < 3) {
        int r = refill(in, err);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
    }
    if (in->end - in->start >= 3 && memcmp(in->buf + in->start, "\xEF\xBB\xBF", 3) == 0)
        in->start += 3;
    size_t i = 0;
    for (;;) {
        while (in->start + i < in->end && blank(in->buf[in->start + i]))
            i++;
        if (in->start + i < in->end || i >= PEEK_MAX)
            break;
        int r = refill(in, err);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
    }
    in->kind = in->forced;
    if (in->kind == GE_IN_AUTO && i >= PEEK_MAX && in->start + i == in->end)
        return ge_fail(err, GE_E_INPUT, "%s: cannot tell jsonl from lines: the first %zu MiB "
                       "are blank (use --input jsonl or --input lines)", in->source,
                       PEEK_MAX >> 20), -1;
    if (in->kind == GE_IN_AUTO)
        in->kind = in->start + i < in->end && in->buf[in->start + i] == '{' ? GE_IN_JSONL
                                                                              : GE_IN_LINES;
    return 1;
}

static bool all_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!blank(p[i]))
            return false;
    return true;
}

/* Keep up to GE_IN_MAX_LINE bytes of a line, and one more for a '\r' before its newline;
 * past that only note whether it has text. */
static int append_line(ge_in *in, const char *p, size_t n)
{
    if (in->line_over || in->line_len + n > GE_IN_MAX_LINE + 1) {
        if (!in->line_over)
            in->over_text = !all_blank(in->line, in->line_len);
        in->line_over = true;
        in->over_text = in->over_text || !all_blank(p, n);
        return 0;
    }
    if (n == 0)
        return 0; /* in->line may still be NULL: no memcpy to NULL + 0 */
    if (in->line_len + n > in->line_cap) {
        size_t cap = in->line_cap ? in->line_cap : 4096;
        while (cap < in->line_len + n)
            cap *= 2;
        char *l = realloc(in->line, cap);
        if (!l)
            return -1;
        in->line = l;
        in->line_cap = cap;
    }
    memcpy(in->line + in->line_len, p, n);
    in->line_len += n;
    return 0;
}

/* Read the next line of the current input into in->line. 1 = a line, 0 = end of this
 * input, -1 = error. */
static int next_line(ge_in *in, ge_err *err)
{
    in->line_len = 0;
    in->line_over = false;
    bool any = false;
    for (;;) {
        char *p = in->buf + in->start;
        size_t avail = in->end - in->start;
        char *nl = avail ? memchr(p, '\n', avail) : NULL;
        size_t take = nl ? (size_t)(nl - p) : avail;
        if (append_line(in, p, take) < 0)
            return ge_fail(err, GE_E_NOMEM, "%s: out of memory", in->source), -1;
        any |= avail > 0;
        in->start += take + (nl != NULL);
        if (nl)
            break;
        int r = refill(in, err);
        if (r < 0)
            return -1;
        if (r == 0) {
            if (!any)
                return 0;
            break;
        }
    }
    in->line_no++;
    in->seq++;
    if (!in->line_over && in->line_len > 0 && in->line[in->line_len - 1] == '\r')
        in->line_len--;
    if (!in->line_over && in->line_len > GE_IN_MAX_LINE) {
        in->line_over = true;
        in->over_text = !all_blank(in->line, in->line_len);
    }
    return 1;
}

/* ---- records ---------------------------------------------------------------------------- */

static void rec_fail(ge_in *in, ge_rec *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rec_fail(ge_in *in, ge_rec *r, const char *code, const char *fmt, ...)
{
    int k = snprintf(r->err_msg, sizeof r->err_msg, "%s:%llu: ", in->source, in->line_no);
    if (k < 0 || (size_t)k >= sizeof r->err_msg)
        k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err_msg + k, sizeof r->err_msg - (size_t)k, fmt, ap);
    va_end(ap);
    r->err_code = code;
}

static void id_from_line(ge_in *in, ge_rec *r)
{
    snprintf(in->idbuf, sizeof in->idbuf, "%llu", in->seq);
    r->id = in->idbuf;
    r->id_len = strlen(in->idbuf);
}

static void parse_lines(ge_in *in, ge_rec *r)
{
    size_t ok = ge_utf8_check(in->line, in->line_len);
    if (ok < in->line_len) {
        rec_fail(in, r, "bad_utf8", "invalid UTF-8 at byte %zu", ok + 1);
        return;
    }
    r->text = in->line ? in->line : "";
    r->text_len = in->line_len;
}

/* jansson keeps numbers as int64 or double, so a number beyond the double range (an id of
 * 400 digits, 1e999) fails the whole line. Ids may be integers of any size and other fields
 * are ignored, so on a numeric overflow parse again with every such number replaced by 0: the
 * id is echoed from the raw line, and a text, prompt or title that is a number is still a
 * wrong type. */
static json_t *parse_huge_numbers(ge_in *in, const char *s, size_t n)
{
    char *c = realloc(in->subst, n ? n : 1);
    if (!c)
        return NULL;
    in->subst = c;
    size_t replaced, len = ge_json_zero_huge_numbers(s, n, c, &replaced);
    json_error_t je;
    return replaced ? json_loadb(c, len, JSON_FLAGS, &je) : NULL;
}

/* Resolve the record's "prompt" and "title" into r->prefix (NULL = global prompt). A prompt
 * is a name known to ge_prompt_find or else a literal prefix; a title selects the document
 * form "title: {title} | text: " unless the prompt names a non-document prompt. */
static void record_prefix(ge_in *in, ge_rec *r, json_t *prompt, json_t *title)
{
    const char *p = NULL;
    if (prompt) {
        p = ge_prompt_find(json_string_value(prompt));
        if (!p)
            p = json_string_value(prompt);
    }
    const char *doc = ge_prompt_find("document");
    if (title && (!p || (doc && strcmp(p, doc) == 0))) {
        const char *t = json_string_value(title);
        size_t need = strlen(t) + sizeof "title:  | text: ";
        char *b = realloc(in->prefix, need);
        if (!b) {
            rec_fail(in, r, "internal", "out of memory");
            return;
        }
        in->prefix = b;
        snprintf(b, need, "title: %s | text: ", t);
        p = b;
    }
    r->prefix = p;
}

/* A string member, or NULL when absent or null. *bad is set when present but not a string
 * (or a string with NUL bytes, which a prefix cannot hold when nul_ok is false). */
static json_t *string_member(json_t *root, const char *key, bool nul_ok, bool *bad)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) ||
        (!nul_ok && strlen(json_string_value(v)) != json_string_length(v)))
        *bad = true;
    return v;
}

/* "a string", "an object", ... for messages about a value of the wrong type. */
static const char *json_kind(const json_t *v)
{
    return json_is_object(v) ? "an object" : json_is_array(v) ? "an array"
         : json_is_string(v) ? "a string" : json_is_number(v) ? "a number"
         : json_is_boolean(v) ? "a boolean" : "null";
}

/* The record's text: "text", or "content" when that is a string (a "content" array is a
 * record with media). *text NULL: none. false with the record failed when either has
 * another type, or both hold a text (which one would be embedded?). */
static bool record_text(ge_in *in, ge_rec *r, json_t *root, json_t **text)
{
    json_t *t = json_object_get(root, "text"), *c = json_object_get(root, "content");
    *text = NULL;
    if (t && !json_is_null(t) && !json_is_string(t)) {
        rec_fail(in, r, "bad_record", "\"text\" must be a string, not %s", json_kind(t));
        return false;
    }
    if (c && !json_is_null(c) && !json_is_string(c) && !json_is_array(c)) {
        rec_fail(in, r, "bad_record", "\"content\" must be a string (the text) or an array of "
                 "items such as {\"type\": \"image\", \"path\": ...}, not %s", json_kind(c));
        return false;
    }
    if (json_is_string(t) && json_is_string(c)) {
        rec_fail(in, r, "bad_record", "a record has either \"text\" or \"content\", not both");
        return false;
    }
    *text = json_is_string(t) ? t : json_is_string(c) ? c : NULL;
    return true;
}

/* ---- media items ------------------------------------------------------------------------ */

/* a kind's name: its record key and content item type ("image") */
static const char *kind_name(ge_kind k) { return ge_modality_of(k)->name; }
/* a media kind's placeholder piece ("<|image|>") */
static const char *ph_of(int k) { return ge_modality_of((ge_kind)k)->soft; }

/* Add an item; its data is copied (a NUL-terminated path, or the decoded bytes of inline
 * base64 / a data: URI). Returns false with the record failed. */
static bool add_item(ge_in *in, ge_rec *r, ge_kind kind, const char *s, size_t n,
                     bool base64)
{
    if (in->n_items == MAX_ITEMS) {
        rec_fail(in, r, "bad_record", "more than %d items in one record", MAX_ITEMS);
        return false;
    }
    ge_rec_item *it = &in->items[in->n_items];
    it->kind = kind;
    it->inline_bytes = it->by_streams = false;
    if (kind == GE_KIND_TEXT) {
        it->data = s, it->len = n;
        in->item_data[in->n_items++] = NULL;
        return true;
    }
    if (n >= 5 && strncmp(s, "data:", 5) == 0) { /* data:[type][;base64],DATA */
        const char *comma = memchr(s, ',', n);
        if (!comma || comma - s < 12 || strncmp(comma - 7, ";base64", 7) != 0) {
            rec_fail(in, r, "bad_record", "%s: only base64 data: URIs are read",
                     kind_name(kind));
            return false;
        }
        n -= (size_t)(comma + 1 - s), s = comma + 1, base64 = true;
    } else if (!base64 && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0)) {
        rec_fail(in, r, "unsupported", "%s: remote URLs are not fetched; give a local path or "
                 "the data inline", kind_name(kind));
        return false;
    }
    char *copy = malloc(base64 ? n / 4 * 3 + 3 : n + 1);
    if (!copy) {
        rec_fail(in, r, "internal", "out of memory");
        return false;
    }
    if (base64) {
        if (!ge_base64_decode(s, n, (unsigned char *)copy, &it->len) || it->len == 0) {
            free(copy);
            rec_fail(in, r, "bad_record", "%s: the inline data is not valid base64",
                     kind_name(kind));
            return false;
        }
        it->inline_bytes = true;
    } else {
        if (n == 0 || memchr(s, 0, n)) {
            free(copy);
            rec_fail(in, r, "bad_record", "%s: %s", kind_name(kind),
                     n ? "the path contains a NUL byte" : "the path is empty");
            return false;
        }
        memcpy(copy, s, n);
        copy[n] = 0;
        it->len = n;
    }
    it->data = copy;
    in->item_data[in->n_items++] = copy;
    return true;
}

/* The item a "content" array element describes: {"type": "text", "text": ...} or
 * {"type": "image" | "audio" | "video", and the media in "path", "url", the type's own key
 * or "data" (base64)}. */
static bool content_item(ge_in *in, ge_rec *r, json_t *el, size_t i)
{
    if (!json_is_object(el)) {
        rec_fail(in, r, "bad_record", "content item %zu must be an object such as {\"type\": "
                 "\"text\", \"text\": ...}, not %s", i + 1, json_kind(el));
        return false;
    }
    json_t *type = json_object_get(el, "type");
    int kind = -1;
    for (int k = 0; json_is_string(type) && k < GE_KIND_COUNT; k++)
        if (strcmp(json_string_value(type), kind_name(k)) == 0)
            kind = k;
    if (!type || !json_is_string(type)) {
        rec_fail(in, r, "bad_record", "content item %zu needs a \"type\" (text, image, audio or "
                 "video)%s%s", i + 1, type ? ", not " : "", type ? json_kind(type) : "");
        return false;
    }
    if (kind < 0) {
        char shown[40]; /* the type as given, cut and with its control bytes replaced */
        snprintf(shown, sizeof shown, "%s", json_string_value(type));
        for (char *c = shown; *c; c++)
            *c = (unsigned char)*c < 0x20 || *c == '"' ? '?' : *c;
        rec_fail(in, r, "bad_record", "content item %zu: unknown \"type\" \"%s\" (text, image, "
                 "audio or video)", i + 1, shown);
        return false;
    }
    const char *keys[] = {kind == GE_KIND_TEXT ? "text" : "path", "url", kind_name(kind), "data"};
    const size_t nk = kind == GE_KIND_TEXT ? 1u : 4u;
    size_t found = nk;
    for (size_t k = 0; k < nk; k++) {
        json_t *v = json_object_get(el, keys[k]);
        if (!v)
            continue;
        if (!json_is_string(v)) {
            rec_fail(in, r, "bad_record", "content item %zu: \"%s\" must be a string, not %s",
                     i + 1, keys[k], json_kind(v));
            return false;
        }
        if (found < nk) { /* two sources: which one is meant? */
            rec_fail(in, r, "bad_record", "content item %zu (%s) has both \"%s\" and \"%s\": "
                     "give one", i + 1, kind_name(kind), keys[found], keys[k]);
            return false;
        }
        found = k;
    }
    if (found < nk) {
        json_t *v = json_object_get(el, keys[found]);
        return add_item(in, r, (ge_kind)kind, json_string_value(v), json_string_length(v),
                        found == 3);
    }
    rec_fail(in, r, "bad_record", "content item %zu (%s) has no %s", i + 1, kind_name(kind),
             kind == GE_KIND_TEXT ? "\"text\"" : "\"path\", \"url\", \"data\" or its own key");
    return false;
}

/* A record with media: a "content" array, or "image"/"image_b64"/"audio"/"audio_b64"/"video"
 * fields (media first, then "text" when there is one, as an image and its caption). */
static void media_record(ge_in *in, ge_rec *r, json_t *root, json_t *content)
{
    bool bad_prompt = false, bad_title = false, ok = true;
    if (json_is_array(content)) {
        static const char *const FIELDS[] = {"text", "image", "image_b64", "audio", "audio_b64",
                                             "video"};
        for (size_t k = 0; k < sizeof FIELDS / sizeof *FIELDS; k++)
            if (json_object_get(root, FIELDS[k])) { /* which would come first? */
                rec_fail(in, r, "bad_record", "a record has either a \"content\" array or "
                         "\"%s\", not both", FIELDS[k]);
                return;
            }
        for (size_t i = 0; ok && i < json_array_size(content); i++)
            ok = content_item(in, r, json_array_get(content, i), i);
        if (ok && in->n_items == 0) {
            rec_fail(in, r, "bad_record", "the \"content\" array is empty");
            return;
        }
    } else {
        static const struct {
            const char *key;
            ge_kind kind;
            bool base64;
        } fields[] = {{"image", GE_KIND_IMAGE, false}, {"image_b64", GE_KIND_IMAGE, true},
                      {"video", GE_KIND_VIDEO, false}, {"audio", GE_KIND_AUDIO, false},
                      {"audio_b64", GE_KIND_AUDIO, true}};
        json_t *text;
        if (!record_text(in, r, root, &text))
            return;
        /* media first, then the text; but a text that holds manual placeholders (<|image|>,
         * <|audio|>, <|video|>) places the media itself: each placeholder takes the next item
         * of its kind, in field order (docs/model.md 2.3: no automatic placeholders then) */
        const char *t = text ? json_string_value(text) : "";
        size_t tl = text ? json_string_length(text) : 0;
        bool manual = false;
        for (int k = GE_KIND_IMAGE; k < GE_KIND_COUNT; k++)
            manual = manual || (text && memmem(t, tl, ph_of(k), strlen(ph_of(k))));
        size_t n_kind[GE_KIND_COUNT] = {0}, used[GE_KIND_COUNT] = {0};
        for (size_t k = 0; ok && k < sizeof fields / sizeof fields[0]; k++) {
            json_t *v = json_object_get(root, fields[k].key);
            size_t nv = json_is_array(v) ? json_array_size(v) : 1;
            for (size_t j = 0; v && ok && j < nv; j++) {
                json_t *e = json_is_array(v) ? json_array_get(v, j) : v;
                if (!json_is_string(e)) {
                    rec_fail(in, r, "bad_record", "\"%s\" must be a string or an array of "
                             "strings", fields[k].key);
                    return;
                }
                n_kind[fields[k].kind]++;
                if (!manual) /* manual: the placeholders below add them */
                    ok = add_item(in, r, fields[k].kind, json_string_value(e),
                                  json_string_length(e), fields[k].base64);
            }
        }
        while (ok && manual) {
            const char *ph = NULL;
            int kind = 0;
            for (int k = GE_KIND_IMAGE; k < GE_KIND_COUNT; k++) {
                const char *p = memmem(t, tl, ph_of(k), strlen(ph_of(k)));
                if (p && (!ph || p < ph))
                    ph = p, kind = k;
            }
            if (!ph)
                break;
            if (used[kind] == n_kind[kind]) {
                rec_fail(in, r, "bad_record", "more %s placeholders in the text than %s",
                         ph_of(kind), ge_modality_of(kind)->plural);
                return;
            }
            if (ph > t)
                ok = add_item(in, r, GE_KIND_TEXT, t, (size_t)(ph - t), false);
            /* the used[kind]-th item of that kind, in field order */
            size_t want = used[kind]++;
            for (size_t k = 0; ok && k < sizeof fields / sizeof fields[0]; k++) {
                json_t *v = json_object_get(root, fields[k].key);
                size_t nv = !v ? 0 : json_is_array(v) ? json_array_size(v) : 1;
                if ((int)fields[k].kind != kind)
                    continue;
                if (want >= nv) {
                    want -= nv;
                    continue;
                }
                json_t *e = json_is_array(v) ? json_array_get(v, want) : v;
                ok = add_item(in, r, fields[k].kind, json_string_value(e),
                              json_string_length(e), fields[k].base64);
                break;
            }
            tl -= (size_t)(ph - t) + strlen(ph_of(kind)), t = ph + strlen(ph_of(kind));
        }
        for (int k = GE_KIND_IMAGE; ok && manual && k < GE_KIND_COUNT; k++)
            if (used[k] != n_kind[k]) {
                rec_fail(in, r, "bad_record", "more %s than %s placeholders in the text",
                         ge_modality_of(k)->plural, ph_of(k));
                return;
            }
        if (ok && tl)
            ok = add_item(in, r, GE_KIND_TEXT, t, tl, false);
        if (ok && in->n_items == 0) {
            rec_fail(in, r, "bad_record", "nothing to embed: no media in the media fields and "
                     "no text");
            return;
        }
    }
    if (!ok)
        return;
    json_t *prompt = string_member(root, "prompt", false, &bad_prompt);
    json_t *title = string_member(root, "title", false, &bad_title);
    if (bad_prompt || bad_title) {
        rec_fail(in, r, "bad_record", "\"%s\" must be a string without NUL characters",
                 bad_prompt ? "prompt" : "title");
        return;
    }
    for (size_t i = 0; i < in->n_items; i++)
        if (in->items[i].kind == GE_KIND_TEXT &&
            ge_utf8_check(in->items[i].data, in->items[i].len) < in->items[i].len) {
            rec_fail(in, r, "bad_utf8", "text item %zu is not valid UTF-8", i + 1);
            return;
        }
    r->items = in->items;
    r->n_items = in->n_items;
    record_prefix(in, r, prompt, title);
}

/* ---- OpenAI Batch API requests ------------------------------------------------------------ */

/* A line with "custom_id" and "body": a request of the OpenAI Batch API, for /v1/embeddings.
 * Its inputs (a string, or a list of strings) become r->request; anything else the API would
 * refuse is an error record (code bad_request) that still carries the custom_id. */
static void parse_request(ge_in *in, ge_rec *r, json_t *root)
{
    const char *s = in->line;
    size_t n = in->line_len, off, len;
    json_t *cid = json_object_get(root, "custom_id");
    in->req = (ge_rec_request){.texts = in->req_texts, .lens = in->req_lens, .base64 = -1};
    r->request = &in->req;
    /* the answer names the request by its custom_id as written, even a wrong one (else
     * by its line number) */
    if ((json_is_string(cid) || json_is_number(cid)) &&
        ge_json_member_span(s, n, "custom_id", &off, &len) == 1)
        r->id = s + off, r->id_len = len;
    if (!json_is_string(cid)) {
        rec_fail(in, r, "bad_request", "\"custom_id\" must be a string");
        return;
    }
    json_t *method = json_object_get(root, "method"), *url = json_object_get(root, "url");
    json_t *body = json_object_get(root, "body");
    if (method && (!json_is_string(method) || strcmp(json_string_value(method), "POST"))) {
        rec_fail(in, r, "bad_request", "\"method\" must be \"POST\"");
        return;
    }
    if (url && (!json_is_string(url) || strcmp(json_string_value(url), "/v1/embeddings"))) {
        rec_fail(in, r, "bad_request", "\"url\" must be \"/v1/embeddings\" (gemmaembed only "
                 "embeds)");
        return;
    }
    if (!json_is_object(body)) {
        rec_fail(in, r, "bad_request", "\"body\" must be an object with \"input\"");
        return;
    }
    json_t *input = json_object_get(body, "input"), *dims = json_object_get(body, "dimensions");
    json_t *enc = json_object_get(body, "encoding_format"), *model = json_object_get(body, "model");
    if (json_is_string(input)) {
        in->req_texts[0] = json_string_value(input);
        in->req_lens[0] = json_string_length(input);
        in->req.n = 1;
    } else if (json_is_array(input) && json_array_size(input) > 0 &&
               json_array_size(input) <= GE_IN_MAX_INPUTS) {
        in->req.list = true;
        for (size_t i = 0; i < json_array_size(input); i++) {
            json_t *t = json_array_get(input, i);
            if (!json_is_string(t)) {
                rec_fail(in, r, "bad_request", "\"input\"[%zu] is %s: only strings are "
                         "embedded (token arrays belong to another tokenizer)", i,
                         json_kind(t));
                return;
            }
            in->req_texts[i] = json_string_value(t);
            in->req_lens[i] = json_string_length(t);
        }
        in->req.n = json_array_size(input);
    } else {
        rec_fail(in, r, "bad_request", "\"input\" must be a string or a list of 1 to %d "
                 "strings", GE_IN_MAX_INPUTS);
        return;
    }
    if (dims && !json_is_null(dims)) {
        const double d = json_number_value(dims); /* the parser may keep numbers as reals */
        if (!json_is_number(dims) || !(d >= 1 && d <= 1 << 20) || d != (double)(int)d) {
            in->req.n = 0;
            rec_fail(in, r, "bad_request", "\"dimensions\" must be a positive integer");
            return;
        }
        in->req.dim = (int)d;
    }
    if (enc && !json_is_null(enc)) {
        const char *e = json_is_string(enc) ? json_string_value(enc) : "";
        if (strcmp(e, "float") && strcmp(e, "base64")) {
            in->req.n = 0;
            rec_fail(in, r, "bad_request", "\"encoding_format\" must be \"float\" or "
                     "\"base64\"");
            return;
        }
        in->req.base64 = strcmp(e, "base64") == 0;
    }
    size_t boff, blen; /* "model" echoed as written: its span inside the body's */
    if (model && ge_json_member_span(s, n, "body", &boff, &blen) == 1 &&
        ge_json_member_span(s + boff, blen, "model", &off, &len) == 1) {
        in->req.model = s + boff + off;
        in->req.model_len = len;
    }
}

static void parse_jsonl(ge_in *in, ge_rec *r)
{
    const char *s = in->line;
    size_t n = in->line_len;
    json_error_t je;
    json_decref(in->root);
    in->root = json_loadb(s, n, JSON_FLAGS, &je);
    if (!in->root && json_error_code(&je) == json_error_numeric_overflow)
        in->root = parse_huge_numbers(in, s, n);
    json_t *root = in->root;
    if (!root) {
        bool utf8 = json_error_code(&je) == json_error_invalid_utf8;
        rec_fail(in, r, utf8 ? "bad_utf8" : "bad_json", "invalid JSON: %s (column %d)",
                 je.text, je.column);
        return;
    }
    if (!json_is_object(root)) {
        rec_fail(in, r, "bad_record", "record is not a JSON object");
        return;
    }
    if (json_object_get(root, "custom_id") && json_object_get(root, "body")) {
        parse_request(in, r, root);
        return;
    }

    json_t *id = json_object_get(root, "id");
    if (id) {
        size_t off, len;
        if (!json_is_string(id) && !json_is_number(id)) {
            rec_fail(in, r, "bad_record", "id must be a string or number");
            return;
        }
        if (ge_json_member_span(s, n, "id", &off, &len) != 1) {
            rec_fail(in, r, "internal", "could not locate the id in the line");
            return;
        }
        r->id = s + off;
        r->id_len = len;
    }

    json_t *content = json_object_get(root, "content");
    if (json_is_array(content) || json_object_get(root, "image") ||
        json_object_get(root, "image_b64") || json_object_get(root, "audio") ||
        json_object_get(root, "audio_b64") || json_object_get(root, "video")) {
        media_record(in, r, root, content);
        return;
    }
    bool bad_prompt = false, bad_title = false;
    json_t *text;
    if (!record_text(in, r, root, &text))
        return;
    json_t *prompt = string_member(root, "prompt", false, &bad_prompt);
    json_t *title = string_member(root, "title", false, &bad_title);
    if (!text) {
        rec_fail(in, r, "bad_record", "record has no \"text\" (nor \"content\")");
        return;
    }
    if (bad_prompt || bad_title) {
        rec_fail(in, r, "bad_record", "\"%s\" must be a string without NUL characters",
                 bad_prompt ? "prompt" : "title");
        return;
    }
    r->text = json_string_value(text);
    r->text_len = json_string_length(text);
    record_prefix(in, r, prompt, title);
}

/* ---- files: one media path per line ------------------------------------------------------ */

/* The item a file name's extension suggests when its first bytes say nothing, or -1. */
static int media_ext(const char *path)
{
    static const struct {
        const char *ext;
        ge_kind kind;
    } EXT[] = {
        {"jpg", GE_KIND_IMAGE},  {"jpeg", GE_KIND_IMAGE}, {"png", GE_KIND_IMAGE},
        {"webp", GE_KIND_IMAGE}, {"wav", GE_KIND_AUDIO},  {"flac", GE_KIND_AUDIO},
        {"ogg", GE_KIND_AUDIO},  {"oga", GE_KIND_AUDIO},  {"opus", GE_KIND_AUDIO},
        {"mp3", GE_KIND_AUDIO},  {"m4a", GE_KIND_AUDIO},  {"mp4", GE_KIND_VIDEO},
        {"m4v", GE_KIND_VIDEO},  {"mov", GE_KIND_VIDEO},  {"mkv", GE_KIND_VIDEO},
        {"webm", GE_KIND_VIDEO},
    };
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && slash > dot))
        return -1;
    for (size_t i = 0; i < sizeof EXT / sizeof EXT[0]; i++)
        if (strcasecmp(dot + 1, EXT[i].ext) == 0)
            return (int)EXT[i].kind;
    return -1;
}

/* A path record: its id is the path as a JSON string; the file's first bytes name the item
 * (ge_media_sniff; the extension only when they say nothing: content wins). An image, audio
 * or video file is a record with one item (a container of video and/or sound: its streams
 * decide, in the decode stage); otherwise an error record: "io" for a path that cannot be
 * read or is not a regular file (a FIFO is never opened for reading, so it cannot block),
 * "format" for an empty file or one that ends inside its signature, "unsupported" for an
 * image format we do not decode, "bad_record" for a file that is not media. */
static void parse_files(ge_in *in, ge_rec *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        rec_fail(in, r, "internal", "out of memory");
        return;
    }
    ge_json_put_string(m, in->line, in->line_len);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        rec_fail(in, r, "internal", "out of memory");
        return;
    }
    free(in->idjson);
    in->idjson = buf;
    in->idjson_len = len;
    r->id = in->idjson;
    r->id_len = in->idjson_len;

    if (memchr(in->line, '\0', in->line_len)) {
        rec_fail(in, r, "bad_record", "the path contains a NUL byte");
        return;
    }
    char *path = strndup(in->line, in->line_len); /* lines are not NUL-terminated */
    if (!path) {
        rec_fail(in, r, "internal", "out of memory");
        return;
    }
    ge_err e = {0};
    unsigned char head[GE_SNIFF_BYTES];
    size_t got = 0;
    int fd = ge_open_regular(path, &e);
    while (fd >= 0 && got < sizeof head) {
        ssize_t k = read(fd, head + got, sizeof head - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            ge_fail(&e, GE_E_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    if (fd >= 0)
        close(fd);
    ge_media_type t = ge_media_sniff(head, got);
    int kind = t.kind == GE_MEDIA_IMAGE ? GE_KIND_IMAGE
               : t.kind == GE_MEDIA_AUDIO ? GE_KIND_AUDIO
               : t.kind == GE_MEDIA_AV    ? GE_KIND_VIDEO
                                          : media_ext(path);
    if (e.code)
        rec_fail(in, r, "io", "%s", e.msg);
    else if (got == 0)
        rec_fail(in, r, "format", "%s: empty file", path);
    else if (t.truncated)
        rec_fail(in, r, "format", "%s: truncated: the file ends after %zu bytes, inside the "
                 "signature of %s", path, got, t.what);
    else if (t.kind == GE_MEDIA_IMAGE && !t.supported)
        rec_fail(in, r, "unsupported", "%s: %s image: not supported (JPEG, PNG, WebP are)", path,
                 t.name);
    else if (kind < 0)
        rec_fail(in, r, "bad_record", "%s: not a media file", path);
    else if (add_item(in, r, (ge_kind)kind, path, strlen(path), false)) {
        in->items[in->n_items - 1].by_streams = t.kind == GE_MEDIA_AV;
        r->items = in->items;
        r->n_items = in->n_items;
    }
    free(path);
}

/* Read the next line that is a record into in->line: 1, 0 at the end of all inputs, -1 on
 * error. Blank lines of jsonl and files inputs are not records. */
static int next_record_line(ge_in *in, ge_err *err)
{
    for (;;) {
        if (in->fd < 0) {
            int o = open_next(in, err);
            if (o <= 0)
                return o;
        }
        int l = next_line(in, err);
        if (l < 0)
            return -1;
        if (l == 0) {
            close_input(in);
            continue;
        }
        if (in->kind != GE_IN_LINES &&
            (in->line_over ? !in->over_text : all_blank(in->line, in->line_len)))
            continue; /* a blank line is not a record */
        return 1;
    }
}

ge_status ge_in_skip(ge_in *in, unsigned long long n, unsigned long long *skipped,
                     ge_err *err)
{
    *skipped = 0;
    while (*skipped < n) {
        int l = next_record_line(in, err);
        if (l < 0)
            return err ? err->code : GE_E_IO;
        if (l == 0)
            break;
        ++*skipped;
    }
    return GE_OK;
}

int ge_in_next(ge_in *in, ge_rec *r, ge_err *err)
{
    int l = next_record_line(in, err);
    if (l <= 0)
        return l;
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < in->n_items; i++)
        free(in->item_data[i]);
    in->n_items = 0;
    r->source = in->source;
    r->line = in->line_no;
    r->seq = in->seq;
    id_from_line(in, r);
    if (in->line_over)
        rec_fail(in, r, "too_long", "line longer than %zu bytes", GE_IN_MAX_LINE);
    else if (in->kind == GE_IN_LINES)
        parse_lines(in, r);
    else if (in->kind == GE_IN_FILES)
        parse_files(in, r);
    else
        parse_jsonl(in, r);
    return 1;
}
