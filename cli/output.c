/* output.c - result writers (output.h): jsonl, npy, f32, behind one small vtable.
 *
 * Every writer has begin/row/error/end. Output goes through stdio with a large buffer; each
 * call checks the stream afterwards, so a failed write (ENOSPC, EPIPE with SIGPIPE ignored,
 * EIO) surfaces as GE_E_IO on the record where it happened. On a pipe or a terminal the
 * stream is flushed after every record, so downstream tools see results as they come. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <jansson.h>
#include <unistd.h>
#include <zlib.h>

#include "base64.h"
#include "json_span.h"
#include "msg.h"
#include "paths.h"
#include "resume.h"

typedef struct {
    const char *name;
    ge_status (*begin)(ge_out *o, ge_err *err);
    ge_status (*row)(ge_out *o, const ge_row *r, ge_err *err);
    ge_status (*error)(ge_out *o, const ge_row *r, const char *code, const char *msg,
                       ge_err *err);
    ge_status (*end)(ge_out *o, ge_err *err);
} writer;

struct ge_out {
    const writer *w;
    ge_out_cfg cfg;
    FILE *f;              /* the main output */
    const char *f_name;   /* its name for messages */
    bool f_std;           /* f is stdout (flushed, not closed) */
    FILE *ids;            /* ids sidecar, or NULL */
    char *ids_name;
    FILE *errf;           /* error records, or NULL = inline in f */
    const char *errf_name;
    bool errf_std;        /* errf is stderr */
    off_t npy_at;         /* offset of the npy header */
    size_t npy_len;       /* its fixed length */
    size_t row_bytes;     /* bytes of one row in the precision's element type */
    unsigned char *bytes; /* [row_bytes] one row, little-endian */
    char *b64;            /* base64 of one row */
    float *cal_lo, *cal_hi; /* --write-calibration: each dimension's minimum and maximum */
    unsigned long long rows;
    unsigned long long records; /* input records covered (all shards), at the last checkpoint */
    bool complete;        /* the run read its whole input (ge_out_mark_complete) */
    char *meta_name;      /* PATH.meta.json, or NULL */
    FILE *recs;           /* PATH.records (sharded outputs), or NULL */
    char *recs_name;
    unsigned long long units, rec_units; /* units of the output written; at the record's start */
    bool began;           /* begin succeeded: end must run */
    bool resumed;         /* reopened an existing output: no header to write */
    bool broken;          /* a write failed: close cuts the files back to `last` */
    bool created;         /* f is a file this run created by its path (not a descriptor) */

    /* resume state file (see output.h, resume.h) */
    bool stateful;
    int state_fd;         /* -1 when none */
    char *state_name;
    ge_fingerprint fp;    /* what writes this output */
    ge_ckpt last;         /* the last checkpoint: what the files hold for sure */
    char note[600];       /* something main should tell the user, or "" */

    /* openai-batch: the request being answered, until its last row */
    char *oa;                /* its "data" entries so far */
    size_t oa_len, oa_cap;
    unsigned long long oa_tokens;
    const char *oa_code;     /* its first error (static), and the message */
    char *oa_msg;

    /* npz: rows and ids go to unlinked temporary files until close */
    FILE *npz_data, *npz_ids;
    unsigned long npz_crc;   /* crc32 of the rows */
    size_t npz_id_max;       /* longest id, in code points */
    unsigned long long npz_at; /* bytes of the zip written */
};

static bool g_epipe;

bool ge_out_epipe(void) { return g_epipe; }

/* ---- helpers ---------------------------------------------------------------------------- */

static ge_status check(FILE *f, const char *name, ge_err *err)
{
    if (!ferror(f))
        return GE_OK;
    int e = errno ? errno : EIO;
    if (e == EPIPE)
        g_epipe = true;
    return ge_fail(err, GE_E_IO, "%s: write failed: %s", name, strerror(e));
}

/* Flush f and check that nothing written to it failed (an error seen by an earlier fwrite
 * leaves nothing to flush, so fflush alone would report success). */
static ge_status flush_checked(FILE *f, const char *name, ge_err *err)
{
    if (fflush(f) != 0 || ferror(f)) {
        if (!ferror(f)) /* fflush failed but left no error flag */
            return ge_fail(err, GE_E_IO, "%s: write failed: %s", name,
                           strerror(errno ? errno : EIO));
        return check(f, name, err);
    }
    return GE_OK;
}

/* A row or error line is written to f: one more unit when f is the output. */
static ge_status done_record(ge_out *o, FILE *f, const char *name, ge_err *err)
{
    o->units += f == o->f;
    return check(f, name, err);
}

/* A row's vector in the output's precision into o->bytes (row_bytes of them); its float
 * values into the --write-calibration ranges. A merged row comes encoded already. */
static void encode_row(ge_out *o, const ge_row *r)
{
    if (r->raw) {
        memcpy(o->bytes, r->raw, o->row_bytes);
        return;
    }
    const float *v = r->vec;
    const int dim = o->cfg.dim;
    ge_prec_encode(o->cfg.precision, o->cfg.calib, v, dim, o->bytes);
    if (o->cal_lo)
        for (int i = 0; i < dim; i++) {
            if (o->rows == 0 || v[i] < o->cal_lo[i])
                o->cal_lo[i] = v[i];
            if (o->rows == 0 || v[i] > o->cal_hi[i])
                o->cal_hi[i] = v[i];
        }
}

/* {"id":<raw>,"error":{"code":"...","message":"..."}} on its own line. */
static ge_status put_error(ge_out *o, FILE *f, const char *name, const char *id, size_t id_len,
                           const char *code, const char *msg, ge_err *err)
{
    fputs("{\"id\":", f);
    fwrite(id, 1, id_len, f);
    fputs(",\"error\":{\"code\":", f);
    ge_json_put_string(f, code, strlen(code));
    fputs(",\"message\":", f);
    ge_json_put_string(f, msg, strlen(msg));
    fputs("}}\n", f);
    return done_record(o, f, name, err);
}

/* Error records of the binary formats (and of jsonl with --errors) go to the errors file. */
static ge_status error_to_file(ge_out *o, const ge_row *r, const char *code, const char *msg,
                               ge_err *err)
{
    return put_error(o, o->errf, o->errf_name, r->id, r->id_len, code, msg, err);
}

/* A passage's fields after its id (jsonl rows, id lines). */
static void put_chunk(FILE *f, const ge_row_chunk *c)
{
    fprintf(f, ",\"chunk\":%zu,\"chunks\":%zu,\"start\":%zu,\"end\":%zu", c->chunk, c->chunks,
            c->start, c->end);
}

/* A row's line of the ids sidecar (and of an npz's ids): its raw id, or its passage's object. */
static void put_id(FILE *f, const ge_row *r)
{
    if (r->chunk)
        fputs("{\"id\":", f);
    fwrite(r->id, 1, r->id_len, f);
    if (r->chunk) {
        put_chunk(f, r->chunk);
        putc('}', f);
    }
    putc('\n', f);
}

static ge_status put_id_line(ge_out *o, const ge_row *r, ge_err *err)
{
    if (!o->ids)
        return GE_OK;
    put_id(o->ids, r);
    return check(o->ids, o->ids_name, err);
}

/* ---- the run description (PATH.meta.json; meta.json in an npz) ------------------------- */

static const char *fmt_name(ge_fmt f)
{
    return f == GE_FMT_NPY ? "npy" : f == GE_FMT_F32 ? "f32" : f == GE_FMT_NPZ ? "npz"
         : f == GE_FMT_OPENAI ? "openai-batch" : "jsonl";
}

ge_fmt ge_out_format_of(const char *name)
{
    for (ge_fmt f = GE_FMT_JSONL; f <= GE_FMT_OPENAI; f++)
        if (!strcmp(name, fmt_name(f)))
            return f;
    return GE_FMT_AUTO;
}

/* One line of text per record (jsonl, openai-batch): error records go inline. */
static bool text_format(ge_fmt f) { return f == GE_FMT_JSONL || f == GE_FMT_OPENAI; }

/* The description as indented JSON (malloc'd), or NULL when out of memory. identity: the
 * fingerprint's fields that decide the rows, as strings, the notes after "  # " left out (a
 * model file's name goes to model_file instead). */
static char *meta_text(const ge_out *o, bool complete)
{
    const ge_out_cfg *cfg = &o->cfg;
    json_t *m = json_object(), *id = json_object();
    if (!m || !id) {
        json_decref(m);
        json_decref(id);
        return NULL;
    }
    json_object_set_new(m, "gemmaembed", json_string(GEMMAEMBED_VERSION));
    json_object_set_new(m, "format", json_string(fmt_name(cfg->format)));
    json_object_set_new(m, "mode", json_string(cfg->tokenize ? "tokenize" : "embed"));
    json_object_set_new(m, "precision", json_string(ge_prec_name(cfg->precision)));
    json_object_set_new(m, "dtype", json_string(ge_prec_npy_descr(cfg->precision)));
    json_object_set_new(m, "dim", json_integer(cfg->dim));
    json_object_set_new(m, "width", json_integer(ge_prec_width(cfg->precision, cfg->dim)));
    json_object_set_new(m, "rows", json_integer((json_int_t)o->rows));
    json_object_set_new(m, "input_records", json_integer((json_int_t)o->records));
    json_object_set_new(m, "shard", cfg->shard_n ? json_pack("[II]", (json_int_t)cfg->shard_i,
                                                             (json_int_t)cfg->shard_n)
                                                 : json_null());
    json_object_set_new(m, "complete", json_boolean(complete));
    json_object_set_new(m, "kernel_tier", cfg->tier ? json_string(cfg->tier) : json_null());
    for (const char *l = o->fp.text; l < o->fp.text + o->fp.len;) {
        const char *eq = memchr(l, '=', (size_t)(o->fp.text + o->fp.len - l));
        const char *nl = eq ? memchr(eq, '\n', (size_t)(o->fp.text + o->fp.len - eq)) : NULL;
        if (!nl)
            break;
        const char *note = eq, *end = nl;
        while (note + 3 < nl && memcmp(note, "  # ", 4) != 0)
            note++;
        if (note + 3 < nl)
            end = note;
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - l), l);
        /* where the ids and errors go, and the shard (a field of its own), say nothing of
         * the rows: shards of one job may differ there */
        if (strcmp(key, "errors") && strcmp(key, "ids") && strcmp(key, "shard"))
            json_object_set_new(id, key, json_stringn(eq + 1, (size_t)(end - eq - 1)));
        if (end != nl && strcmp(key, "model") == 0)
            json_object_set_new(m, "model_file", json_stringn(note + 4, (size_t)(nl - note - 4)));
        l = nl + 1;
    }
    json_object_set_new(m, "identity", id);
    char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(m);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *out = realloc(text, n + 2); /* a final newline, as text files have */
    if (!out) {
        free(text);
        return NULL;
    }
    memcpy(out + n, "\n", 2);
    return out;
}

/* PATH.meta.json written whole under a temporary name and renamed into place, so a reader
 * (or a kill) never sees half of it. */
static ge_status meta_write(const ge_out *o, bool complete, ge_err *err)
{
    if (!o->meta_name)
        return GE_OK;
    char *text = meta_text(o, complete);
    if (!text)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    size_t n = strlen(o->meta_name) + sizeof ".XXXXXX";
    char *tmp = malloc(n);
    if (!tmp) {
        free(text);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    snprintf(tmp, n, "%s.XXXXXX", o->meta_name);
    int fd = mkostemp(tmp, O_CLOEXEC);
    ge_status st = GE_OK;
    if (fd < 0) {
        st = ge_fail(err, GE_E_IO, "%s: %s", o->meta_name, strerror(errno));
    } else {
        const mode_t mask = umask(022); /* the mode a plain create gives (mkostemp: 0600) */
        umask(mask);
        fchmod(fd, 0666 & ~mask);
        size_t len = strlen(text);
        errno = 0;
        bool bad = write(fd, text, len) != (ssize_t)len;
        int e = errno ? errno : EIO;
        bad |= close(fd) != 0 && !bad && (e = errno);
        if (bad || rename(tmp, o->meta_name) != 0) {
            st = ge_fail(err, GE_E_IO, "%s: write failed: %s", o->meta_name,
                         strerror(bad ? e : errno));
            unlink(tmp);
        }
    }
    free(tmp);
    free(text);
    return st;
}

/* ---- jsonl ------------------------------------------------------------------------------ */

static ge_status jsonl_begin(ge_out *o, ge_err *err) { return GE_OK; }

/* A merged line, as the shard wrote it. */
static ge_status raw_line(ge_out *o, const ge_row *r, ge_err *err)
{
    fwrite(r->raw, 1, r->raw_len, o->f);
    putc('\n', o->f);
    o->rows += r->raw_rows;
    return done_record(o, o->f, o->f_name, err);
}

static ge_status jsonl_row(ge_out *o, const ge_row *r, ge_err *err)
{
    FILE *f = o->f;
    if (r->raw)
        return raw_line(o, r, err);
    fputs("{\"id\":", f);
    fwrite(r->id, 1, r->id_len, f);
    if (r->chunk)
        put_chunk(f, r->chunk);
    if (r->truncated)
        fprintf(f, ",\"truncated\":true,\"n_tokens\":%zu", r->orig_tokens);
    if (o->cfg.tokenize) {
        fputs(",\"tokens\":[", f);
        for (size_t i = 0; i < r->n_tokens; i++)
            fprintf(f, i ? ",%ld" : "%ld", (long)r->tokens[i]);
        fputs("]}\n", f);
    } else if (o->cfg.base64) {
        encode_row(o, r);
        size_t k = ge_base64_encode(o->b64, o->bytes, o->row_bytes);
        fputs(",\"embedding\":\"", f);
        fwrite(o->b64, 1, k, f);
        fputs("\"}\n", f);
    } else {
        encode_row(o, r);
        const ge_prec p = o->cfg.precision;
        const int w = ge_prec_width(p, o->cfg.dim);
        fputs(",\"embedding\":[", f);
        for (int i = 0; i < w; i++) {
            if (i)
                putc(',', f);
            if (p == GE_PREC_FLOAT32) /* %.9g: nine significant digits round-trip a float32 */
                fprintf(f, "%.9g", (double)r->vec[i]);
            else if (p == GE_PREC_FLOAT16) /* the binary16 value, exactly */
                fprintf(f, "%.9g", (double)ge_fp16_to_fp32(
                                     (uint16_t)(o->bytes[2 * i] | o->bytes[2 * i + 1] << 8)));
            else if (ge_prec_is_signed_byte(p))
                fprintf(f, "%d", (int)(signed char)o->bytes[i]);
            else
                fprintf(f, "%d", (int)o->bytes[i]);
        }
        fputs("]}\n", f);
    }
    o->rows++;
    return done_record(o, f, o->f_name, err);
}

static ge_status jsonl_error(ge_out *o, const ge_row *r, const char *code, const char *msg,
                             ge_err *err)
{
    return put_error(o, o->f, o->f_name, r->id, r->id_len, code, msg, err);
}

static ge_status jsonl_end(ge_out *o, ge_err *err) { return GE_OK; }

/* ---- openai-batch ----------------------------------------------------------------------- */

/* Append n bytes to the request's "data" so far. */
static bool oa_put(ge_out *o, const char *p, size_t n)
{
    if (o->oa_len + n > o->oa_cap) {
        size_t c = (o->oa_len + n) * 2 + 256;
        char *b = realloc(o->oa, c);
        if (!b)
            return false;
        o->oa = b, o->oa_cap = c;
    }
    memcpy(o->oa + o->oa_len, p, n);
    o->oa_len += n;
    return true;
}

/* A record that is no request answers as a request of one input, its id the custom_id. */
static ge_row_request oa_request(const ge_out *o, const ge_row *r)
{
    return r->req ? *r->req
                  : (ge_row_request){.custom_id = r->id, .custom_id_len = r->id_len, .n = 1,
                                     .base64 = o->cfg.base64};
}

/* The request's line, once its last row or error is in: its data, or its first error. */
static ge_status oa_line(ge_out *o, const ge_row *r, const ge_row_request *q, ge_err *err)
{
    FILE *f = o->f;
    fprintf(f, "{\"id\":\"batch_req_%llu\",\"custom_id\":", r->index);
    fwrite(q->custom_id, 1, q->custom_id_len, f);
    fprintf(f, ",\"response\":{\"status_code\":");
    if (o->oa_code) { /* ours (out of memory, internal) are server errors, the rest the request's */
        bool ours = !strcmp(o->oa_code, "internal") || !strcmp(o->oa_code, "out_of_memory");
        fprintf(f, "%d,\"request_id\":\"req_%llu\",\"body\":{\"error\":{\"message\":",
                ours ? 500 : 400, r->index);
        const char *m = o->oa_msg ? o->oa_msg : "out of memory";
        ge_json_put_string(f, m, strlen(m));
        fprintf(f, ",\"type\":\"%s\",\"param\":null,\"code\":",
                ours ? "server_error" : "invalid_request_error");
        ge_json_put_string(f, o->oa_code, strlen(o->oa_code));
        fputs("}}},\"error\":null}\n", f);
    } else {
        fprintf(f, "200,\"request_id\":\"req_%llu\",\"body\":{\"object\":\"list\",\"data\":[",
                r->index);
        fwrite(o->oa, 1, o->oa_len, f);
        fputs("],\"model\":", f);
        if (q->model)
            fwrite(q->model, 1, q->model_len, f);
        else
            ge_json_put_string(f, o->cfg.model_name ? o->cfg.model_name : "",
                               o->cfg.model_name ? strlen(o->cfg.model_name) : 0);
        fprintf(f, ",\"usage\":{\"prompt_tokens\":%llu,\"total_tokens\":%llu}}},"
                "\"error\":null}\n", o->oa_tokens, o->oa_tokens);
    }
    o->oa_len = 0, o->oa_tokens = 0, o->oa_code = NULL;
    free(o->oa_msg), o->oa_msg = NULL;
    return done_record(o, f, o->f_name, err);
}

static ge_status oa_begin(ge_out *o, ge_err *err) { return GE_OK; }

static ge_status oa_row(ge_out *o, const ge_row *r, ge_err *err)
{
    if (r->raw)
        return raw_line(o, r, err);
    const ge_row_request q = oa_request(o, r);
    const int dim = r->dim ? r->dim : o->cfg.dim;
    char head[96], num[32];
    int k = snprintf(head, sizeof head, "%s{\"object\":\"embedding\",\"index\":%u,\"embedding\":",
                     q.i ? "," : "", q.i);
    bool ok = oa_put(o, head, (size_t)k);
    if (q.base64) { /* little-endian float32, as the API encodes it */
        ge_prec_encode(GE_PREC_FLOAT32, NULL, r->vec, dim, o->bytes);
        size_t n = ge_base64_encode(o->b64, o->bytes, (size_t)dim * 4);
        ok = ok && oa_put(o, "\"", 1) && oa_put(o, o->b64, n) && oa_put(o, "\"", 1);
    } else {
        ok = ok && oa_put(o, "[", 1);
        for (int i = 0; ok && i < dim; i++) {
            k = snprintf(num, sizeof num, i ? ",%.9g" : "%.9g", (double)r->vec[i]);
            ok = oa_put(o, num, (size_t)k);
        }
        ok = ok && oa_put(o, "]", 1);
    }
    ok = ok && oa_put(o, "}", 1);
    if (!ok)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    o->oa_tokens += r->used_tokens;
    o->rows++;
    return q.i + 1 == q.n ? oa_line(o, r, &q, err) : GE_OK;
}

static ge_status oa_error(ge_out *o, const ge_row *r, const char *code, const char *msg,
                          ge_err *err)
{
    const ge_row_request q = oa_request(o, r);
    if (!o->oa_code) { /* the request fails with its first error */
        o->oa_code = code;
        o->oa_msg = strdup(msg);
    }
    return q.i + 1 >= q.n ? oa_line(o, r, &q, err) : GE_OK;
}

static ge_status oa_end(ge_out *o, ge_err *err) { return GE_OK; }

/* ---- f32 -------------------------------------------------------------------------------- */

static ge_status f32_begin(ge_out *o, ge_err *err) { return GE_OK; }

static ge_status f32_row(ge_out *o, const ge_row *r, ge_err *err)
{
    encode_row(o, r);
    fwrite(o->bytes, 1, o->row_bytes, o->f);
    o->rows++;
    ge_status st = done_record(o, o->f, o->f_name, err);
    return st ? st : put_id_line(o, r, err);
}

static ge_status f32_end(ge_out *o, ge_err *err) { return GE_OK; }

/* ---- npy -------------------------------------------------------------------------------- */

/* NumPy format v1.0: magic "\x93NUMPY", version 1 0, u16 LE header length, then a Python
 * dict literal padded with spaces and ended by '\n' so that data starts at a multiple of 64.
 * The header is always npy_len bytes, sized for the largest possible row count, so it can be
 * rewritten in place with the final N. */
#define NPY_DICT "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %d), }"

/* o's rows: (rows, width) of the precision's dtype */
static void npy_header(const ge_out *o, char *h, size_t total, unsigned long long rows)
{
    const ge_prec p = o->cfg.precision;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)((total - 10) & 0xff);
    h[9] = (char)((total - 10) >> 8);
    int k = snprintf(h + 10, total - 10, NPY_DICT, ge_prec_npy_descr(p), rows,
                     ge_prec_width(p, o->cfg.dim));
    memset(h + 10 + k, ' ', total - 10 - (size_t)k - 1);
    h[total - 1] = '\n';
}

static size_t npy_size(const ge_out *o)
{
    const ge_prec p = o->cfg.precision;
    char tmp[160];
    int k = snprintf(tmp, sizeof tmp, NPY_DICT, ge_prec_npy_descr(p), ULLONG_MAX,
                     ge_prec_width(p, o->cfg.dim));
    return ((size_t)k + 10 + 1 + 63) / 64 * 64;
}

static ge_status npy_write_header(ge_out *o, ge_err *err)
{
    char h[256];
    npy_header(o, h, o->npy_len, o->rows);
    fwrite(h, 1, o->npy_len, o->f);
    return check(o->f, o->f_name, err);
}

/* Rewrite the header in place for `rows` rows (the data must be flushed first). */
static ge_status npy_patch(ge_out *o, unsigned long long rows, ge_err *err)
{
    char h[256];
    npy_header(o, h, o->npy_len, rows);
    errno = 0;
    if (pwrite(fileno(o->f), h, o->npy_len, o->npy_at) != (ssize_t)o->npy_len)
        return ge_fail(err, GE_E_IO, "%s: cannot patch the npy header: %s", o->f_name,
                       strerror(errno ? errno : EIO));
    return GE_OK;
}

static ge_status npy_begin(ge_out *o, ge_err *err)
{
    if (o->resumed) { /* the header was checked when the file was reopened */
        o->npy_at = 0;
        o->npy_len = npy_size(o);
        return GE_OK;
    }
    o->npy_at = ftello(o->f);
    if (o->npy_at < 0)
        return ge_fail(err, GE_E_USAGE, "%s: npy output must be seekable (%s)", o->f_name,
                       strerror(errno));
    o->npy_len = npy_size(o);
    return npy_write_header(o, err);
}

/* The header counts the rows only once they are all on their way to the disk. */
static ge_status npy_end(ge_out *o, ge_err *err)
{
    ge_status st = flush_checked(o->f, o->f_name, err);
    return st ? st : npy_patch(o, o->rows, err);
}

static bool is_stdout(const char *path) { return !path || strcmp(path, "-") == 0; }

/* ---- npz -------------------------------------------------------------------------------- */

/* A zip archive (method 0 "stored", fixed 1980-01-01 timestamps, crc32 from zlib) holding
 * embeddings.npy, the same array as the npy format, and ids.npy, a 1-d '<U' array (UTF-32)
 * of the raw JSON ids (as in the ids sidecar), which numpy.load reads without allow_pickle.
 * The row count is known only at the end, so rows and ids go to unlinked temporary files next
 * to the output and the archive is written at close (in one forward pass: a pipe works).
 * Members larger than 4 GiB use the zip64 extensions. */

static FILE *temp_near(const char *path)
{
    char tmpl[4096];
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (path) {
        int dl = slash ? (int)(slash - path + 1) : 0;
        snprintf(tmpl, sizeof tmpl, "%.*s.gemmaembed-npz-XXXXXX", dl, path);
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(tmpl, sizeof tmpl, "%s/gemmaembed-npz-XXXXXX", t && *t ? t : "/tmp");
    }
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return NULL;
    unlink(tmpl);
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}

static ge_status npz_begin(ge_out *o, ge_err *err)
{
    /* beside the output file; for a descriptor, in $TMPDIR */
    const char *near = o->created ? o->cfg.path : NULL;
    o->npz_data = temp_near(near);
    o->npz_ids = o->npz_data ? temp_near(near) : NULL;
    if (!o->npz_ids)
        return ge_fail(err, GE_E_IO, "%s: cannot create a temporary file: %s", o->f_name,
                       strerror(errno));
    o->npz_crc = crc32(0L, Z_NULL, 0);
    return GE_OK;
}

static ge_status npz_row(ge_out *o, const ge_row *r, ge_err *err)
{
    encode_row(o, r);
    size_t nb = o->row_bytes;
    fwrite(o->bytes, 1, nb, o->npz_data);
    o->npz_crc = crc32(o->npz_crc, o->bytes, (uInt)nb);
    const long before = ftell(o->npz_ids);
    put_id(o->npz_ids, r);
    size_t cp = ge_utf8_chars(r->id, r->id_len);
    if (r->chunk) /* the object's length in code points: the id's and the ASCII around it */
        cp += (size_t)(ftell(o->npz_ids) - before - 1) - r->id_len;
    if (cp > o->npz_id_max)
        o->npz_id_max = cp;
    o->rows++;
    o->units++;
    if (ferror(o->npz_data) || ferror(o->npz_ids))
        return ge_fail(err, GE_E_IO, "%s: temporary file: write failed: %s", o->f_name,
                       strerror(errno ? errno : EIO));
    return GE_OK;
}

static void le16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void le32(unsigned char *p, unsigned long v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void le64(unsigned char *p, unsigned long long v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void zput(ge_out *o, const void *p, size_t n)
{
    fwrite(p, 1, n, o->f);
    o->npz_at += n;
}

#define Z32 0xFFFFFFFFull

typedef struct {
    const char *name;
    unsigned long crc;
    unsigned long long size, at;
} zmember;

static void zip_local(ge_out *o, zmember *m)
{
    unsigned char h[30 + 20];
    size_t nl = strlen(m->name);
    bool big = m->size >= Z32;
    m->at = o->npz_at;
    le32(h, 0x04034b50);
    le16(h + 4, big ? 45 : 20);
    le16(h + 6, 0);
    le16(h + 8, 0);
    le16(h + 10, 0);          /* 00:00:00 */
    le16(h + 12, 0x21);       /* 1980-01-01 */
    le32(h + 14, m->crc);
    le32(h + 18, big ? Z32 : m->size);
    le32(h + 22, big ? Z32 : m->size);
    le16(h + 26, (unsigned)nl);
    le16(h + 28, big ? 20 : 0);
    zput(o, h, 30);
    zput(o, m->name, nl);
    if (big) {
        le16(h, 1);
        le16(h + 2, 16);
        le64(h + 4, m->size);
        le64(h + 12, m->size);
        zput(o, h, 20);
    }
}

static void zip_central(ge_out *o, const zmember *m)
{
    unsigned char h[46 + 28];
    size_t nl = strlen(m->name);
    bool big = m->size >= Z32, far = m->at >= Z32;
    unsigned xl = (big ? 16 : 0) + (far ? 8 : 0);
    le32(h, 0x02014b50);
    le16(h + 4, 0x0300 | 45);  /* made by: unix, 4.5 */
    le16(h + 6, big || far ? 45 : 20);
    le16(h + 8, 0);
    le16(h + 10, 0);
    le16(h + 12, 0);
    le16(h + 14, 0x21);
    le32(h + 16, m->crc);
    le32(h + 20, big ? Z32 : m->size);
    le32(h + 24, big ? Z32 : m->size);
    le16(h + 28, (unsigned)nl);
    le16(h + 30, xl ? xl + 4 : 0);
    le16(h + 32, 0);
    le16(h + 34, 0);
    le16(h + 36, 0);
    le32(h + 38, 0100644ul << 16);
    le32(h + 42, far ? Z32 : m->at);
    zput(o, h, 46);
    zput(o, m->name, nl);
    if (xl) {
        size_t k = 4;
        le16(h, 1);
        le16(h + 2, xl);
        if (big) {
            le64(h + k, m->size);
            le64(h + k + 8, m->size);
            k += 16;
        }
        if (far) {
            le64(h + k, m->at);
            k += 8;
        }
        zput(o, h, k);
    }
}

static void zip_end(ge_out *o, unsigned long long cd_at, unsigned long long cd_len, unsigned n)
{
    unsigned char h[56];
    if (cd_at >= Z32) {
        unsigned long long z64_at = o->npz_at;
        le32(h, 0x06064b50);
        le64(h + 4, 44);
        le16(h + 12, 0x0300 | 45);
        le16(h + 14, 45);
        le32(h + 16, 0);
        le32(h + 20, 0);
        le64(h + 24, n);
        le64(h + 32, n);
        le64(h + 40, cd_len);
        le64(h + 48, cd_at);
        zput(o, h, 56);
        le32(h, 0x07064b50);
        le32(h + 4, 0);
        le64(h + 8, z64_at);
        le32(h + 16, 1);
        zput(o, h, 20);
    }
    le32(h, 0x06054b50);
    le16(h + 4, 0);
    le16(h + 6, 0);
    le16(h + 8, n);
    le16(h + 10, n);
    le32(h + 12, cd_len);
    le32(h + 16, cd_at >= Z32 ? Z32 : cd_at);
    le16(h + 20, 0);
    zput(o, h, 22);
}

/* One id line (raw UTF-8) as `width` little-endian UTF-32 code units, zero padded. */
static void id_utf32(const char *s, size_t n, size_t width, unsigned char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0;
    for (size_t i = 0; i < n && k < width;) {
        unsigned long c = u[i];
        int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (len > 1)
            c &= 0x3Fu >> (len - 1);
        for (int j = 1; j < len && i + (size_t)j < n; j++)
            c = c << 6 | (u[i + (size_t)j] & 0x3F);
        i += (size_t)len;
        le32(out + 4 * k++, c);
    }
    memset(out + 4 * k, 0, 4 * (width - k));
}

/* Copy the ids temp file as UTF-32 rows, to f (write) or only into the crc. */
static ge_status npz_ids_pass(ge_out *o, size_t width, unsigned long *crc, bool write,
                              ge_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned char *row = malloc(4 * width);
    if (!row)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    rewind(o->npz_ids);
    while ((n = getline(&line, &cap, o->npz_ids)) > 0) {
        if (line[n - 1] == '\n')
            n--;
        id_utf32(line, (size_t)n, width, row);
        if (write)
            zput(o, row, 4 * width);
        else
            *crc = crc32(*crc, row, (uInt)(4 * width));
    }
    free(line);
    free(row);
    if (ferror(o->npz_ids))
        return ge_fail(err, GE_E_IO, "%s: temporary file: read failed: %s", o->f_name,
                       strerror(errno));
    return GE_OK;
}

static ge_status npz_end(ge_out *o, ge_err *err)
{
    if (fflush(o->npz_data) != 0 || fflush(o->npz_ids) != 0)
        return ge_fail(err, GE_E_IO, "%s: temporary file: write failed: %s", o->f_name,
                       strerror(errno));
    /* embeddings.npy: the npy header, then the rows */
    size_t hl = npy_size(o);
    char h[256];
    npy_header(o, h, hl, o->rows);
    unsigned long long data = o->rows * (unsigned long long)o->row_bytes;
    zmember m[3] = {{"embeddings.npy", 0, hl + data, 0}, {"ids.npy", 0, 0, 0},
                    {"meta.json", 0, 0, 0}};
    m[0].crc = crc32_combine(crc32(crc32(0L, Z_NULL, 0), (const Bytef *)h, (uInt)hl),
                             o->npz_crc, (z_off_t)data);
    zip_local(o, &m[0]);
    zput(o, h, hl);
    rewind(o->npz_data);
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, o->npz_data)) > 0)
        zput(o, buf, got);
    if (ferror(o->npz_data))
        return ge_fail(err, GE_E_IO, "%s: temporary file: read failed: %s", o->f_name,
                       strerror(errno));

    /* ids.npy: '<U{width}' of shape (rows,) */
    size_t width = o->npz_id_max ? o->npz_id_max : 1;
    char ih[256];
    int k = snprintf(ih + 10, sizeof ih - 10,
                     "{'descr': '<U%zu', 'fortran_order': False, 'shape': (%llu,), }", width,
                     o->rows);
    size_t ihl = ((size_t)k + 10 + 1 + 63) / 64 * 64;
    memcpy(ih, "\x93NUMPY\x01\x00", 8);
    ih[8] = (char)((ihl - 10) & 0xff);
    ih[9] = (char)((ihl - 10) >> 8);
    memset(ih + 10 + k, ' ', ihl - 10 - (size_t)k - 1);
    ih[ihl - 1] = '\n';
    unsigned long crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)ih, (uInt)ihl);
    ge_status st = npz_ids_pass(o, width, &crc, false, err);
    if (st)
        return st;
    m[1].crc = crc;
    m[1].size = ihl + o->rows * (unsigned long long)width * 4;
    zip_local(o, &m[1]);
    zput(o, ih, ihl);
    if ((st = npz_ids_pass(o, width, NULL, true, err)) != GE_OK)
        return st;

    /* meta.json: the run description (complete when the run read all its input) */
    char *meta = meta_text(o, o->complete);
    if (!meta)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    m[2].size = strlen(meta);
    m[2].crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)meta, (uInt)m[2].size);
    zip_local(o, &m[2]);
    zput(o, meta, m[2].size);
    free(meta);

    unsigned long long cd_at = o->npz_at;
    for (int i = 0; i < 3; i++)
        zip_central(o, &m[i]);
    zip_end(o, cd_at, o->npz_at - cd_at, 3);
    return check(o->f, o->f_name, err);
}

/* ---- checkpoints and resume (output.h, resume.h) ------------------------------------------ */

static ge_status state_write(ge_out *o, const ge_ckpt *c, ge_err *err)
{
    char slot[GE_STATE_SLOT];
    ge_state_slot(c, &o->fp, slot);
    errno = 0;
    if (pwrite(o->state_fd, slot, GE_STATE_SLOT, (off_t)(c->seq % 2) * GE_STATE_SLOT) !=
        GE_STATE_SLOT)
        return ge_fail(err, GE_E_IO, "%s: write failed: %s", o->state_name,
                       strerror(errno ? errno : EIO));
    return GE_OK;
}

/* Byte length of an output stream so far, -1 when it is not a file. */
static long long stream_len(FILE *f)
{
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        return -1;
    return (long long)ftello(f);
}

ge_status ge_out_checkpoint(ge_out *o, unsigned long long records, ge_err *err)
{
    if (o->broken)
        return ge_fail(err, GE_E_IO, "%s: an earlier write failed", o->f_name);
    errno = 0;
    ge_status st = flush_checked(o->f, o->f_name, err);
    if (!st && o->ids)
        st = flush_checked(o->ids, o->ids_name, err);
    if (!st && o->errf && !o->errf_std)
        st = flush_checked(o->errf, o->errf_name, err);
    if (!st && o->recs)
        st = flush_checked(o->recs, o->recs_name, err);
    if (!st)
        o->records = records;
    if (st || !o->stateful) { /* a pipe's reader gets every finished record now */
        o->broken = st != GE_OK;
        return st;
    }
    /* the data is with the kernel: now the header and the state may say so */
    if (o->cfg.format == GE_FMT_NPY && (st = npy_patch(o, o->rows, err)) != GE_OK) {
        o->broken = true;
        return st;
    }
    ge_ckpt c = {.seq = o->last.seq + 1, .records = records, .rows = o->rows,
                 .out = (long long)ftello(o->f), .ids = stream_len(o->ids),
                 .errors = o->errf_std ? -1 : stream_len(o->errf)};
    if ((st = state_write(o, &c, err)) != GE_OK) {
        o->broken = true;
        return st;
    }
    o->last = c;
    return GE_OK;
}

static unsigned long long shard_records(const ge_out_cfg *cfg, unsigned long long records);
static ge_status records_reopen(ge_out *o, unsigned long long lines, ge_err *err);

/* After a failed write: every file of the set back to the last checkpoint, which the state
 * file holds, so the output loads (the npy header counts what is there) and resumes. The
 * bytes still buffered are dropped first, or closing would write them after the cut. */
static void rollback(ge_out *o)
{
    FILE *fs[3] = {o->f, o->ids, o->errf_std ? NULL : o->errf};
    long long lens[3] = {o->last.out, o->last.ids, o->last.errors};
    for (int i = 0; i < 3; i++) {
        if (!fs[i])
            continue;
        __fpurge(fs[i]);
        if (lens[i] >= 0 && ftruncate(fileno(fs[i]), (off_t)lens[i]) != 0)
            snprintf(o->note, sizeof o->note, "cannot cut %s back to its last checkpoint: %s",
                     i == 0 ? o->f_name : i == 1 ? o->ids_name : o->errf_name,
                     strerror(errno));
    }
    if (o->cfg.format == GE_FMT_NPY)
        npy_patch(o, o->last.rows, NULL);
    if (o->recs) { /* the checkpoint's records */
        __fpurge(o->recs);
        fclose(o->recs);
        o->recs = NULL;
        if (records_reopen(o, shard_records(&o->cfg, o->last.records), NULL) != GE_OK)
            snprintf(o->note, sizeof o->note, "cannot cut %s back to its last checkpoint",
                     o->recs_name);
    }
}

/* Open a file of the set that must be a regular file (state, or one reopened to resume)
 * without blocking on a FIFO: a descriptor, or -1 with errno set (ENOENT when missing). */
static int open_regular(const char *path, int flags, bool *not_regular)
{
    *not_regular = false;
    int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0666);
    struct stat sb;
    if (fd < 0)
        return -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        *not_regular = true;
        errno = EINVAL;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Before anything is cut: a file of output's set must be there (a regular file) and hold at
 * least its checkpoint's len bytes. Missing and empty are the same when it held nothing. */
static ge_status check_len(const char *output, const char *path, const char *role,
                           long long len, ge_err *err)
{
    struct stat sb;
    bool there = stat(path, &sb) == 0;
    const char *why = !there ? (errno == ENOENT ? "missing" : strerror(errno))
                    : !S_ISREG(sb.st_mode) ? "not a regular file" : NULL;
    if (why && !(len == 0 && !there && errno == ENOENT))
        return ge_fail(err, GE_E_USAGE, "%s: cannot resume: %s %s is %s (it held %lld bytes at "
                       "the last checkpoint); restore it, or remove %s and %s.resume to start "
                       "again", output, role, path, why, len, output, output);
    if (there && !why && sb.st_size < len)
        return ge_fail(err, GE_E_USAGE,
                       "%s: cannot resume: %s %s is shorter (%lld bytes) than at the last "
                       "checkpoint (%lld bytes); restore it, or remove %s and %s.resume to start "
                       "again", output, role, path, (long long)sb.st_size, len, output, output);
    return GE_OK;
}

/* Reopen a file of the set (checked by check_len) and cut it back to len bytes. */
static ge_status reopen_cut(FILE **f, const char *path, long long len, ge_err *err)
{
    bool odd;
    int fd = open_regular(path, O_RDWR | (len == 0 ? O_CREAT : 0), &odd);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 || lseek(fd, 0, SEEK_END) < 0 ||
        !(*f = fdopen(fd, "r+b"))) {
        int e = odd ? EINVAL : errno;
        if (fd >= 0)
            close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot resume: %s", path, strerror(e));
    }
    return GE_OK;
}

/* ---- the table -------------------------------------------------------------------------- */

static const writer WRITERS[] = {
    [GE_FMT_JSONL] = {"jsonl", jsonl_begin, jsonl_row, jsonl_error, jsonl_end},
    [GE_FMT_NPY] = {"npy", npy_begin, f32_row, error_to_file, npy_end},
    [GE_FMT_F32] = {"f32", f32_begin, f32_row, error_to_file, f32_end},
    [GE_FMT_NPZ] = {"npz", npz_begin, npz_row, error_to_file, npz_end},
    [GE_FMT_OPENAI] = {"openai-batch", oa_begin, oa_row, oa_error, oa_end},
};

ge_fmt ge_out_guess(const char *path)
{
    if (is_stdout(path))
        return GE_FMT_JSONL;
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".npy") == 0)
        return GE_FMT_NPY;
    if (dot && strcmp(dot, ".f32") == 0)
        return GE_FMT_F32;
    if (dot && strcmp(dot, ".npz") == 0)
        return GE_FMT_NPZ;
    return GE_FMT_JSONL;
}

/* The descriptor the output goes to: stdout for "-", one the path names, or -1 (a path). */
static int out_descriptor(const char *path)
{
    return is_stdout(path) ? STDOUT_FILENO : ge_path_descriptor(path);
}

ge_status ge_out_check(const ge_out_cfg *cfg, ge_err *err)
{
    int fd = out_descriptor(cfg->path);
    const char *name = is_stdout(cfg->path) ? "stdout" : cfg->path;
    struct stat st;
    bool exists = fd >= 0 ? fstat(fd, &st) == 0 : stat(cfg->path, &st) == 0;
    if (cfg->resume && fd >= 0)
        return ge_fail(err, GE_E_USAGE, "--resume needs an output file (-o PATH), and %s is "
                       "the descriptor %d", name, fd);
    if (cfg->resume && exists && !S_ISREG(st.st_mode))
        return ge_fail(err, GE_E_USAGE, "--resume: %s is not a regular file, so it cannot be "
                       "continued", name);
    if (cfg->resume && cfg->format == GE_FMT_NPZ)
        return ge_fail(err, GE_E_USAGE,
                       "--resume: npz output is written whole at the end and cannot be "
                       "continued (use npy, f32 or jsonl)");
    if (cfg->format != GE_FMT_NPY)
        return GE_OK;
    if (fd >= 0) {
        if (lseek(fd, 0, SEEK_CUR) < 0)
            return ge_fail(err, GE_E_USAGE,
                           "npy output needs a seekable file, and %s is a pipe or terminal "
                           "(use -o FILE.npy, or --format f32)", name);
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_APPEND))
            return ge_fail(err, GE_E_USAGE,
                           "npy output cannot be appended to (%s is in append mode)", name);
        return GE_OK;
    }
    if (exists && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return ge_fail(err, GE_E_USAGE,
                       "%s: npy output needs a seekable file, not a pipe (use "
                       "--format f32)", cfg->path);
    return GE_OK;
}

/* Check that an npy file reopened for resuming has the header gemmaembed writes for this
 * width and holds exactly the checkpoint's rows in its first c->out bytes. */
static ge_status npy_check_header(ge_out *o, const ge_ckpt *c, ge_err *err)
{
    size_t hl = npy_size(o);
    char h[256], want[256];
    unsigned long long rows = 0;
    const char *at = NULL;
    if (hl < sizeof h && pread(fileno(o->f), h, hl, 0) == (ssize_t)hl) {
        h[hl] = 0;
        at = strstr(h + 10, "'shape': ("); /* the dict, after the magic and its length */
    }
    if (!at || sscanf(at, "'shape': (%llu,", &rows) != 1)
        goto bad;
    npy_header(o, want, hl, rows);
    if (memcmp(h, want, hl) != 0)
        goto bad;
    if (c->out != (long long)(hl + c->rows * o->row_bytes))
        return ge_fail(err, GE_E_USAGE, "%s: cannot resume: its checkpoint (%llu rows, %lld "
                       "bytes) does not match the file", o->f_name, c->rows, c->out);
    return GE_OK;
bad:
    return ge_fail(err, GE_E_USAGE,
                   "%s: cannot resume: not an npy file of %d-wide %s rows as gemmaembed "
                   "writes them", o->f_name, ge_prec_width(o->cfg.precision, o->cfg.dim),
                   ge_prec_name(o->cfg.precision));
}

/* A regular file this run writes by its path (or one still to be created): not /dev/null, a
 * FIFO or a descriptor. */
static bool regular_path(const ge_out_cfg *cfg)
{
    struct stat sb;
    return out_descriptor(cfg->path) < 0 && (stat(cfg->path, &sb) != 0 || S_ISREG(sb.st_mode));
}

/* A --shard run's output by its path keeps PATH.records (output.h). */
static bool has_records(const ge_out_cfg *cfg)
{
    return cfg->shard_n && !cfg->merged && regular_path(cfg);
}

bool ge_out_has_meta(const ge_out_cfg *cfg)
{
    return cfg->format == GE_FMT_NPZ || regular_path(cfg);
}

bool ge_out_has_state(const ge_out_cfg *cfg)
{
    /* beside a regular file written by its path; npz is written whole at the end, it has
     * none, and a merged output is not resumed */
    return cfg->format != GE_FMT_NPZ && !cfg->merged && regular_path(cfg);
}

/* The rest of the fingerprint: what the output itself decides. */
static void fp_output_fields(ge_out *o)
{
    const ge_out_cfg *cfg = &o->cfg;
    char where[4096];
    ge_fp_add(&o->fp, "format", "%s", fmt_name(cfg->format));
    ge_fp_add(&o->fp, "dim", "%d", cfg->dim);
    ge_fp_add(&o->fp, "mode", "%s", cfg->tokenize ? "tokenize" : "embed");
    ge_fp_add(&o->fp, "encoding", "%s", cfg->base64 ? "base64" : "float");
    ge_fp_add(&o->fp, "precision", "%s", ge_prec_name(cfg->precision));
    ge_fp_add(&o->fp, "shard", "%llu/%llu", cfg->shard_i, cfg->shard_n);
    if (!cfg->errors)
        ge_fp_add(&o->fp, "errors", "%s", text_format(cfg->format) ? "inline" : "stderr");
    else
        ge_fp_add(&o->fp, "errors", "%s", ge_path_resolve(cfg->errors, where, sizeof where));
    if (text_format(cfg->format))
        ge_fp_add(&o->fp, "ids", "none");
    else if (!cfg->ids)
        ge_fp_add(&o->fp, "ids", "beside the output");
    else
        ge_fp_add(&o->fp, "ids", "%s", ge_path_resolve(cfg->ids, where, sizeof where));
}

/* A fresh start of a stateful output: the state (nothing done yet, and what writes it) is on
 * disk before any output is truncated, so that a kill in between resumes from zero. It is
 * written whole to a new file first and renamed over the old one: a kill while it is written
 * leaves the old state, never a torn one that no later --resume could read. */
static ge_status state_create(ge_out *o, ge_err *err)
{
    struct stat sb;
    if (stat(o->state_name, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ge_fail(err, GE_E_USAGE, "%s: not a regular file: it cannot hold the resume "
                       "state", o->state_name);
    size_t n = strlen(o->state_name) + sizeof ".XXXXXX";
    char *tmp = malloc(n);
    if (!tmp)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.XXXXXX", o->state_name);
    o->state_fd = mkostemp(tmp, O_CLOEXEC);
    if (o->state_fd < 0) {
        ge_status st = ge_fail(err, GE_E_IO, "%s: %s", o->state_name, strerror(errno));
        free(tmp);
        return st;
    }
    /* the mode a plain create would give (mkostemp makes 0600); the umask is read by setting
     * it, before the pipeline's threads exist */
    const mode_t mask = umask(022);
    umask(mask);
    fchmod(o->state_fd, 0666 & ~mask);
    char block[GE_STATE_FP_MAX + 64];
    size_t bl;
    ge_state_fp_block(&o->fp, block, &bl);
    o->last = (ge_ckpt){.seq = 1, .ids = -1, .errors = -1};
    errno = 0;
    ge_status st = pwrite(o->state_fd, block, bl, GE_STATE_FP_AT) == (ssize_t)bl
                       ? state_write(o, &o->last, err)
                       : ge_fail(err, GE_E_IO, "%s: write failed: %s", o->state_name,
                                 strerror(errno ? errno : EIO));
    if (!st && rename(tmp, o->state_name) != 0)
        st = ge_fail(err, GE_E_IO, "%s: %s", o->state_name, strerror(errno));
    if (st)
        unlink(tmp);
    free(tmp);
    return st;
}

/* --resume of an existing output: its state read and checked against this run's
 * fingerprint; *c gets the checkpoint to continue from. */
static ge_status state_resume(ge_out *o, ge_ckpt *c, ge_err *err)
{
    bool odd;
    o->state_fd = open_regular(o->state_name, O_RDWR, &odd);
    if (o->state_fd < 0)
        return ge_fail(err, GE_E_USAGE,
                       "%s: cannot resume: its state file %s is %s, so what it holds and "
                       "what wrote it are unknown (remove %s to start again)",
                       o->cfg.path, o->state_name, odd ? "not a regular file" :
                       errno == ENOENT ? "missing" : strerror(errno), o->cfg.path);
    static char buf[GE_STATE_FP_AT + GE_STATE_FP_MAX + 128];
    ssize_t n = pread(o->state_fd, buf, sizeof buf, 0);
    ge_fingerprint was;
    ge_err why;
    if (n < 0 || (size_t)n == sizeof buf ||
        ge_state_parse(buf, (size_t)n, c, &was, &why) != GE_OK)
        return ge_fail(err, GE_E_USAGE,
                       "%s: cannot resume: its state file %s is %s (remove %s and %s to start "
                       "again)", o->cfg.path, o->state_name,
                       n < 0 ? strerror(errno) : (size_t)n == sizeof buf ? "damaged: too long" :
                       why.msg,
                       o->cfg.path, o->state_name);
    char diff[400];
    if (ge_fp_diff(&was, &o->fp, diff, sizeof diff))
        return ge_fail(err, GE_E_USAGE,
                       "%s: cannot resume: written with other settings: %s. Run with those, "
                       "or remove %s and %s to start again",
                       o->cfg.path, diff, o->cfg.path, o->state_name);
    o->last = *c;
    return GE_OK;
}

static char *ids_path(const ge_out_cfg *cfg)
{
    if (cfg->ids)
        return strdup(cfg->ids);
    size_t n = strlen(cfg->path) + sizeof ".ids.jsonl";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s.ids.jsonl", cfg->path);
    return p;
}

size_t ge_out_uses(const ge_out_cfg *cfg, ge_path_use *u, char names[][4200])
{
    size_t n = 0;
    int fd = out_descriptor(cfg->path);
    bool binary = !text_format(cfg->format);
    u[n++] = fd == STDOUT_FILENO && is_stdout(cfg->path)
                 ? (ge_path_use){NULL, STDOUT_FILENO, "the output", true}
                 : (ge_path_use){cfg->path, -1, "the output (-o)", true};
    if (ge_out_has_state(cfg)) {
        snprintf(names[0], sizeof names[0], "%s.resume", cfg->path);
        u[n++] = (ge_path_use){names[0], -1, "the output's resume state", true};
    }
    if (regular_path(cfg)) {
        snprintf(names[2], sizeof names[2], "%s.meta.json", cfg->path);
        u[n++] = (ge_path_use){names[2], -1, "the output's run description", true};
    }
    if (has_records(cfg)) {
        snprintf(names[3], sizeof names[3], "%s.records", cfg->path);
        u[n++] = (ge_path_use){names[3], -1, "the output's records map", true};
    }
    if (cfg->write_calib)
        u[n++] = (ge_path_use){cfg->write_calib, -1, "the --write-calibration file", true};
    if (binary && cfg->format != GE_FMT_NPZ && (cfg->ids || fd < 0)) {
        char *ids = ids_path(cfg);
        snprintf(names[1], sizeof names[1], "%s", ids ? ids : "");
        free(ids);
        u[n++] = (ge_path_use){names[1], -1, "the ids file", true};
    }
    if (cfg->errors)
        u[n++] = (ge_path_use){cfg->errors, -1, "the errors file (--errors)", true};
    else if (binary)
        u[n++] = (ge_path_use){NULL, STDERR_FILENO, "the error records", true};
    return n;
}

/* Every file of a resumed output's set is there and long enough, before any is cut. */
static ge_status check_set(ge_out *o, const ge_ckpt *c, ge_err *err)
{
    const char *out = o->cfg.path;
    ge_status st = check_len(out, out, "the output", c->out, err);
    if (!st && c->ids >= 0) {
        char *ids = ids_path(&o->cfg);
        st = ids ? check_len(out, ids, "the ids file", c->ids, err)
                 : ge_fail(err, GE_E_NOMEM, "out of memory");
        free(ids);
    }
    if (!st && c->errors >= 0)
        st = check_len(out, o->cfg.errors ? o->cfg.errors : "", "the errors file", c->errors,
                       err);
    return st;
}

/* The records of shard i/n among the first `records` input records. */
static unsigned long long shard_records(const ge_out_cfg *cfg, unsigned long long records)
{
    return records > cfg->shard_i ? (records - cfg->shard_i + cfg->shard_n - 1) / cfg->shard_n
                                  : 0;
}

/* The records map reopened to append, its first `lines` lines kept (they are the records of
 * the checkpoint). GE_E_USAGE when it holds fewer. */
static ge_status records_reopen(ge_out *o, unsigned long long lines, ge_err *err)
{
    bool odd;
    int fd = open_regular(o->recs_name, O_RDWR | O_CREAT, &odd);
    FILE *f = fd >= 0 ? fdopen(fd, "r+b") : NULL;
    if (!f) {
        int e = odd ? EINVAL : errno;
        if (fd >= 0)
            close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot resume: %s", o->recs_name, strerror(e));
    }
    unsigned long long seen = 0;
    int c;
    while (seen < lines && (c = getc(f)) != EOF)
        seen += c == '\n';
    if (seen < lines) {
        fclose(f);
        return ge_fail(err, GE_E_USAGE, "%s: cannot resume: the records map holds %llu records "
                       "and the checkpoint %llu; restore it, or remove %s and %s.resume to start "
                       "again", o->recs_name, seen, lines, o->cfg.path, o->cfg.path);
    }
    off_t at = ftello(f);
    if (at < 0 || ftruncate(fd, at) != 0 || fseeko(f, at, SEEK_SET) != 0) {
        ge_status st = ge_fail(err, GE_E_IO, "%s: cannot resume: %s", o->recs_name,
                               strerror(errno));
        fclose(f);
        return st;
    }
    o->recs = f;
    return GE_OK;
}

ge_status ge_out_open(ge_out **out, const ge_out_cfg *cfg, unsigned long long *skip,
                      ge_err *err)
{
    *out = NULL;
    *skip = 0;
    ge_status st = ge_out_check(cfg, err);
    if (st)
        return st;
    ge_out *o = calloc(1, sizeof *o);
    if (!o)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    o->state_fd = -1;
    o->cfg = *cfg;
    o->w = &WRITERS[cfg->format];
    o->row_bytes = ge_prec_row_bytes(cfg->precision, cfg->dim);
    /* openai-batch rows may be as wide as the model (a request's "dimensions") */
    const size_t buf = cfg->max_dim > cfg->dim ? (size_t)cfg->max_dim * 4 : o->row_bytes;
    o->bytes = malloc(buf);
    o->b64 = malloc((buf + 2) / 3 * 4 + 1);
    if (cfg->write_calib) {
        o->cal_lo = malloc((size_t)cfg->dim * sizeof *o->cal_lo);
        o->cal_hi = malloc((size_t)cfg->dim * sizeof *o->cal_hi);
    }
    if (regular_path(cfg)) {
        size_t n = strlen(cfg->path) + sizeof ".meta.json";
        if ((o->meta_name = malloc(n)))
            snprintf(o->meta_name, n, "%s.meta.json", cfg->path);
        n = strlen(cfg->path) + sizeof ".records";
        if (has_records(cfg) && (o->recs_name = malloc(n)))
            snprintf(o->recs_name, n, "%s.records", cfg->path);
    }
    if (cfg->fp)
        o->fp = *cfg->fp;
    fp_output_fields(o);
    if (!o->bytes || !o->b64 || (cfg->write_calib && (!o->cal_lo || !o->cal_hi)) ||
        (regular_path(cfg) && !o->meta_name) || (has_records(cfg) && !o->recs_name)) {
        ge_out_close(o, NULL, 0, NULL);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    if (o->fp.overflow) {
        ge_out_close(o, NULL, 0, NULL);
        return ge_fail(err, GE_E_USAGE, "the options are too long to record for --resume");
    }

    int fd = out_descriptor(cfg->path);
    bool binary = !text_format(cfg->format);
    struct stat sb;
    bool exists = fd < 0 && stat(cfg->path, &sb) == 0;
    o->stateful = ge_out_has_state(cfg);
    ge_ckpt c = {0};
    if (o->stateful) {
        size_t n = strlen(cfg->path) + sizeof ".resume";
        if (!(o->state_name = malloc(n))) {
            st = ge_fail(err, GE_E_NOMEM, "out of memory");
            goto fail;
        }
        snprintf(o->state_name, n, "%s.resume", cfg->path);
        bool has_state = access(o->state_name, F_OK) == 0;
        if (cfg->resume && exists && (sb.st_size > 0 || has_state) &&
            (st = state_resume(o, &c, err)) != GE_OK)
            goto fail;
        if (cfg->resume && !exists && has_state)
            snprintf(o->note, sizeof o->note, "%s is missing: starting again from the first "
                     "record", cfg->path);
        if (c.records == 0) { /* nothing to keep: a fresh state for this run */
            if (o->state_fd >= 0)
                close(o->state_fd);
            if ((st = state_create(o, err)) != GE_OK)
                goto fail;
        }
    }
    o->resumed = c.records > 0;
    o->records = c.records;

    if (fd == STDOUT_FILENO && is_stdout(cfg->path)) {
        o->f = stdout;
        o->f_std = true;
        o->f_name = "<stdout>";
    } else {
        o->f_name = cfg->path;
        if (o->resumed) {
            if ((st = check_set(o, &c, err)) != GE_OK ||
                (st = reopen_cut(&o->f, cfg->path, c.out, err)) != GE_OK ||
                (cfg->format == GE_FMT_NPY && (st = npy_check_header(o, &c, err)) != GE_OK))
                goto fail;
            o->rows = c.rows;
            *skip = c.records;
        } else if (!(o->f = ge_path_create(cfg->path, err))) {
            st = GE_E_IO;
            goto fail;
        }
        o->created = fd < 0;
    }
    setvbuf(o->f, NULL, _IOFBF, (size_t)1 << 20);

    if (binary && cfg->format != GE_FMT_NPZ && (cfg->ids || fd < 0)) {
        if (!(o->ids_name = ids_path(cfg))) {
            st = ge_fail(err, GE_E_NOMEM, "out of memory");
            goto fail;
        }
        if (o->resumed && c.ids >= 0)
            st = reopen_cut(&o->ids, o->ids_name, c.ids, err);
        else if (!(o->ids = ge_path_create(o->ids_name, err)))
            st = GE_E_IO;
        if (st)
            goto fail;
    }
    if (o->recs_name) {
        if (o->resumed)
            st = records_reopen(o, shard_records(cfg, c.records), err);
        else if (!(o->recs = ge_path_create(o->recs_name, err)))
            st = GE_E_IO;
        if (st)
            goto fail;
    }
    if (cfg->errors) {
        o->errf_name = cfg->errors;
        if (o->resumed && c.errors >= 0)
            st = reopen_cut(&o->errf, cfg->errors, c.errors, err);
        else if (!(o->errf = ge_path_create(cfg->errors, err)))
            st = GE_E_IO;
        if (st)
            goto fail;
    } else if (binary) {
        o->errf = stderr;
        o->errf_std = true;
        o->errf_name = "<stderr>";
    }
    if (o->resumed && cfg->format == GE_FMT_NPY) {
        /* a kill after the last checkpoint may have patched the header further */
        o->npy_len = npy_size(o);
        if ((st = npy_patch(o, c.rows, err)) != GE_OK)
            goto fail;
    }

    errno = 0;
    if ((st = o->w->begin(o, err)) != GE_OK)
        goto fail;
    o->began = true;
    if ((st = meta_write(o, false, err)) != GE_OK)
        goto fail;
    if (o->stateful && !o->resumed) /* what a fresh output holds: its header */
        o->last = (ge_ckpt){.seq = o->last.seq, .out = stream_len(o->f),
                            .ids = stream_len(o->ids),
                            .errors = o->errf_std ? -1 : stream_len(o->errf)};
    *out = o;
    return GE_OK;
fail:
    ge_out_close(o, NULL, 0, NULL);
    return st;
}

const char *ge_out_note(const ge_out *o) { return o->note; }

void ge_out_mark_complete(ge_out *o) { o->complete = true; }

/* After a record's last row or error: its units into the records map. */
static ge_status record_end(ge_out *o, const ge_row *r, ge_err *err)
{
    if (!o->recs || (r->req && r->req->i + 1 < r->req->n) ||
        (r->chunk && r->chunk->chunk + 1 < r->chunk->chunks))
        return GE_OK;
    fprintf(o->recs, "%llu\n", o->units - o->rec_units);
    o->rec_units = o->units;
    return check(o->recs, o->recs_name, err);
}

ge_status ge_out_row(ge_out *o, const ge_row *r, ge_err *err)
{
    errno = 0;
    ge_status st = o->w->row(o, r, err);
    if (!st)
        st = record_end(o, r, err);
    o->broken |= st != GE_OK;
    return st;
}

ge_status ge_out_error(ge_out *o, const ge_row *r, const char *code, const char *msg,
                       ge_err *err)
{
    errno = 0;
    ge_status st = o->errf && o->cfg.format != GE_FMT_OPENAI ? error_to_file(o, r, code, msg, err)
                                                            : o->w->error(o, r, code, msg, err);
    if (!st)
        st = record_end(o, r, err);
    o->broken |= st != GE_OK;
    return st;
}

unsigned long long ge_out_rows(const ge_out *o) { return o->rows; }

/* Flush and close one stream, keeping the first error in st. */
static ge_status finish(FILE *f, const char *name, bool is_std, ge_status st, ge_err *err)
{
    if (!f)
        return st;
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno ? errno : EIO;
    if (!is_std && fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad && e == EPIPE)
        g_epipe = true;
    if (bad && !st)
        st = ge_fail(err, GE_E_IO, "%s: write failed: %s", name, strerror(e));
    return st;
}

ge_status ge_out_close(ge_out *o, char *note, size_t note_len, ge_err *err)
{
    if (note_len)
        note[0] = 0;
    if (!o)
        return GE_OK;
    ge_status st = GE_OK;
    errno = 0;
    if (o->began && !o->broken) {
        st = o->w->end(o, err);
        /* the rest of the set on its way to the disk too, before the output counts as done */
        if (!st && o->ids)
            st = flush_checked(o->ids, o->ids_name, err);
        if (!st && o->errf && !o->errf_std)
            st = flush_checked(o->errf, o->errf_name, err);
        o->broken = st != GE_OK;
        if (!st && o->cal_lo && o->rows)
            st = ge_calib_write(o->cfg.write_calib, o->cal_lo, o->cal_hi, o->cfg.dim, err);
        else if (!st && o->cal_lo)
            snprintf(o->note, sizeof o->note, "--write-calibration %s: not written: no vectors "
                     "to measure", o->cfg.write_calib);
    }
    if (o->began && o->meta_name) { /* after a failure too: it then says incomplete */
        ge_err merr;
        ge_status ms = meta_write(o, o->complete && !o->broken && !st, &merr);
        if (ms && !st) {
            st = ms;
            if (err)
                *err = merr;
        }
    }
    if (o->began && o->broken && o->stateful) {
        rollback(o);
        if (!o->note[0])
            snprintf(o->note, sizeof o->note, "%s: cut back to its last checkpoint (%llu input "
                     "records, %llu rows); continue with --resume", o->f_name, o->last.records,
                     o->last.rows);
    }
    bool drop_npz = o->began && o->broken && o->cfg.format == GE_FMT_NPZ && o->created;
    st = finish(o->f, o->f_name, o->f_std, st, err);
    st = finish(o->ids, o->ids_name, false, st, err);
    st = finish(o->recs, o->recs_name, false, st, err);
    st = finish(o->errf, o->errf_name, o->errf_std, st, err);
    if (drop_npz && unlink(o->cfg.path) == 0) /* half a zip is no use to anyone */
        snprintf(o->note, sizeof o->note, "%s was removed: the archive could not be completed",
                 o->cfg.path);
    if (o->npz_data)
        fclose(o->npz_data);
    if (o->npz_ids)
        fclose(o->npz_ids);
    if (o->state_fd >= 0)
        close(o->state_fd);
    if (note_len && o->note[0])
        snprintf(note, note_len, "%s", o->note);
    free(o->state_name);
    free(o->meta_name);
    free(o->recs_name);
    free(o->cal_lo);
    free(o->cal_hi);
    free(o->oa);
    free(o->oa_msg);
    free(o->ids_name);
    free(o->bytes);
    free(o->b64);
    free(o);
    return st;
}
