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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "json_span.h"

typedef struct {
    const char *name;
    ge_status (*begin)(ge_out *o, ge_err *err);
    ge_status (*row)(ge_out *o, const ge_row *r, ge_err *err);
    ge_status (*error)(ge_out *o, const char *id, size_t id_len, const char *code,
                       const char *msg, ge_err *err);
    ge_status (*end)(ge_out *o, ge_err *err);
} writer;

struct ge_out {
    const writer *w;
    ge_out_cfg cfg;
    FILE *f;              /* the main output */
    const char *f_name;   /* its name for messages */
    bool f_std;           /* f is stdout (flushed, not closed) */
    bool flush_each;      /* f is not a regular file */
    FILE *ids;            /* ids sidecar, or NULL */
    char *ids_name;
    FILE *errf;           /* error records, or NULL = inline in f */
    const char *errf_name;
    bool errf_std;        /* errf is stderr */
    off_t npy_at;         /* offset of the npy header */
    size_t npy_len;       /* its fixed length */
    unsigned char *bytes; /* [dim * 4] one row as little-endian float32 */
    char *b64;            /* base64 of one row */
    unsigned long long rows;
    bool began;           /* begin succeeded: end must run */
};

/* ---- helpers ---------------------------------------------------------------------------- */

static ge_status check(FILE *f, const char *name, ge_err *err)
{
    if (!ferror(f))
        return GE_OK;
    int e = errno ? errno : EIO;
    return ge_fail(err, GE_E_IO, "%s: write failed: %s", name, strerror(e));
}

static ge_status done_record(ge_out *o, FILE *f, const char *name, ge_err *err)
{
    if (f == o->f && o->flush_each)
        fflush(f);
    return check(f, name, err);
}

/* v[0..n) as little-endian IEEE float32 bytes into o->bytes. */
static void to_le(ge_out *o, const float *v, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        o->bytes[4 * i + 0] = (unsigned char)u;
        o->bytes[4 * i + 1] = (unsigned char)(u >> 8);
        o->bytes[4 * i + 2] = (unsigned char)(u >> 16);
        o->bytes[4 * i + 3] = (unsigned char)(u >> 24);
    }
}

static size_t base64(char *out, const unsigned char *in, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[k++] = A[v >> 18];
        out[k++] = A[(v >> 12) & 63];
        out[k++] = A[(v >> 6) & 63];
        out[k++] = A[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[k++] = A[v >> 18];
        out[k++] = A[(v >> 12) & 63];
        out[k++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        out[k++] = '=';
    }
    return k;
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
static ge_status error_to_file(ge_out *o, const char *id, size_t id_len, const char *code,
                               const char *msg, ge_err *err)
{
    return put_error(o, o->errf, o->errf_name, id, id_len, code, msg, err);
}

static ge_status put_id_line(ge_out *o, const ge_row *r, ge_err *err)
{
    if (!o->ids)
        return GE_OK;
    fwrite(r->id, 1, r->id_len, o->ids);
    putc('\n', o->ids);
    return check(o->ids, o->ids_name, err);
}

/* ---- jsonl ------------------------------------------------------------------------------ */

static ge_status jsonl_begin(ge_out *o, ge_err *err) { return GE_OK; }

static ge_status jsonl_row(ge_out *o, const ge_row *r, ge_err *err)
{
    FILE *f = o->f;
    fputs("{\"id\":", f);
    fwrite(r->id, 1, r->id_len, f);
    if (r->truncated)
        fprintf(f, ",\"truncated\":true,\"n_tokens\":%zu", r->orig_tokens);
    if (o->cfg.tokenize) {
        fputs(",\"tokens\":[", f);
        for (size_t i = 0; i < r->n_tokens; i++)
            fprintf(f, i ? ",%ld" : "%ld", (long)r->tokens[i]);
        fputs("]}\n", f);
    } else if (o->cfg.base64) {
        to_le(o, r->vec, o->cfg.dim);
        size_t k = base64(o->b64, o->bytes, (size_t)o->cfg.dim * 4);
        fputs(",\"embedding\":\"", f);
        fwrite(o->b64, 1, k, f);
        fputs("\"}\n", f);
    } else {
        /* %.9g: nine significant digits round-trip every float32 exactly */
        fputs(",\"embedding\":[", f);
        for (int i = 0; i < o->cfg.dim; i++)
            fprintf(f, i ? ",%.9g" : "%.9g", (double)r->vec[i]);
        fputs("]}\n", f);
    }
    o->rows++;
    return done_record(o, f, o->f_name, err);
}

static ge_status jsonl_error(ge_out *o, const char *id, size_t id_len, const char *code,
                             const char *msg, ge_err *err)
{
    return put_error(o, o->f, o->f_name, id, id_len, code, msg, err);
}

static ge_status jsonl_end(ge_out *o, ge_err *err) { return GE_OK; }

/* ---- f32 -------------------------------------------------------------------------------- */

static ge_status f32_begin(ge_out *o, ge_err *err) { return GE_OK; }

static ge_status f32_row(ge_out *o, const ge_row *r, ge_err *err)
{
    to_le(o, r->vec, o->cfg.dim);
    fwrite(o->bytes, 4, (size_t)o->cfg.dim, o->f);
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
static void npy_header(char *h, size_t total, unsigned long long rows, int dim)
{
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)((total - 10) & 0xff);
    h[9] = (char)((total - 10) >> 8);
    int k = snprintf(h + 10, total - 10,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %d), }", rows,
                     dim);
    memset(h + 10 + k, ' ', total - 10 - (size_t)k - 1);
    h[total - 1] = '\n';
}

static size_t npy_size(int dim)
{
    char tmp[160];
    int k = snprintf(tmp, sizeof tmp,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %d), }",
                     ULLONG_MAX, dim);
    return ((size_t)k + 10 + 1 + 63) / 64 * 64;
}

static ge_status npy_write_header(ge_out *o, ge_err *err)
{
    char h[256];
    npy_header(h, o->npy_len, o->rows, o->cfg.dim);
    fwrite(h, 1, o->npy_len, o->f);
    return check(o->f, o->f_name, err);
}

static ge_status npy_begin(ge_out *o, ge_err *err)
{
    o->npy_at = ftello(o->f);
    if (o->npy_at < 0)
        return ge_fail(err, GE_E_USAGE, "%s: npy output must be seekable (%s)", o->f_name,
                       strerror(errno));
    o->npy_len = npy_size(o->cfg.dim);
    return npy_write_header(o, err);
}

static ge_status npy_end(ge_out *o, ge_err *err)
{
    if (fflush(o->f) != 0)
        return check(o->f, o->f_name, err);
    off_t end = ftello(o->f);
    if (end < 0 || fseeko(o->f, o->npy_at, SEEK_SET) != 0)
        return ge_fail(err, GE_E_IO, "%s: cannot seek to patch the npy header: %s", o->f_name,
                       strerror(errno));
    ge_status st = npy_write_header(o, err);
    if (st)
        return st;
    if (fseeko(o->f, end, SEEK_SET) != 0)
        return ge_fail(err, GE_E_IO, "%s: seek failed: %s", o->f_name, strerror(errno));
    return GE_OK;
}

/* ---- the table -------------------------------------------------------------------------- */

static const writer WRITERS[] = {
    [GE_FMT_JSONL] = {"jsonl", jsonl_begin, jsonl_row, jsonl_error, jsonl_end},
    [GE_FMT_NPY] = {"npy", npy_begin, f32_row, error_to_file, npy_end},
    [GE_FMT_F32] = {"f32", f32_begin, f32_row, error_to_file, f32_end},
};

static bool is_stdout(const char *path) { return !path || strcmp(path, "-") == 0; }

ge_fmt ge_out_guess(const char *path)
{
    if (is_stdout(path))
        return GE_FMT_JSONL;
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".npy") == 0)
        return GE_FMT_NPY;
    if (dot && strcmp(dot, ".f32") == 0)
        return GE_FMT_F32;
    return GE_FMT_JSONL;
}

ge_status ge_out_check(const ge_out_cfg *cfg, ge_err *err)
{
    if (cfg->format != GE_FMT_NPY)
        return GE_OK;
    if (is_stdout(cfg->path)) {
        if (lseek(STDOUT_FILENO, 0, SEEK_CUR) < 0)
            return ge_fail(err, GE_E_USAGE,
                           "npy output needs a seekable file, and stdout is a pipe or "
                           "terminal (use -o FILE.npy, or --format f32)");
        int fl = fcntl(STDOUT_FILENO, F_GETFL);
        if (fl >= 0 && (fl & O_APPEND))
            return ge_fail(err, GE_E_USAGE,
                           "npy output cannot be appended to (stdout is in append mode)");
        return GE_OK;
    }
    struct stat st;
    if (stat(cfg->path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return ge_fail(err, GE_E_USAGE,
                       "%s: npy output needs a seekable file, not a pipe (use --format f32)",
                       cfg->path);
    return GE_OK;
}

static ge_status open_file(FILE **f, const char *path, ge_err *err)
{
    *f = fopen(path, "wb");
    if (!*f)
        return ge_fail(err, GE_E_IO, "%s: %s", path, strerror(errno));
    return GE_OK;
}

ge_status ge_out_open(ge_out **out, const ge_out_cfg *cfg, ge_err *err)
{
    *out = NULL;
    ge_status st = ge_out_check(cfg, err);
    if (st)
        return st;
    ge_out *o = calloc(1, sizeof *o);
    if (!o)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    o->cfg = *cfg;
    o->w = &WRITERS[cfg->format];
    o->bytes = malloc((size_t)cfg->dim * 4);
    o->b64 = malloc(((size_t)cfg->dim * 4 + 2) / 3 * 4 + 1);
    if (!o->bytes || !o->b64) {
        ge_out_close(o, NULL);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }

    if (is_stdout(cfg->path)) {
        o->f = stdout;
        o->f_std = true;
        o->f_name = "<stdout>";
    } else {
        o->f_name = cfg->path;
        if ((st = open_file(&o->f, cfg->path, err)) != GE_OK) {
            ge_out_close(o, NULL);
            return st;
        }
    }
    struct stat sb;
    o->flush_each = fstat(fileno(o->f), &sb) != 0 || !S_ISREG(sb.st_mode);
    setvbuf(o->f, NULL, _IOFBF, (size_t)1 << 20);

    bool binary = cfg->format != GE_FMT_JSONL;
    if (binary && (cfg->ids || !o->f_std)) {
        const char *ids = cfg->ids;
        if (!ids) {
            size_t n = strlen(cfg->path) + sizeof ".ids.jsonl";
            o->ids_name = malloc(n);
            if (o->ids_name)
                snprintf(o->ids_name, n, "%s.ids.jsonl", cfg->path);
        } else
            o->ids_name = strdup(ids);
        if (!o->ids_name) {
            ge_out_close(o, NULL);
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        }
        if ((st = open_file(&o->ids, o->ids_name, err)) != GE_OK) {
            ge_out_close(o, NULL);
            return st;
        }
    }
    if (cfg->errors) {
        o->errf_name = cfg->errors;
        if ((st = open_file(&o->errf, cfg->errors, err)) != GE_OK) {
            ge_out_close(o, NULL);
            return st;
        }
    } else if (binary) {
        o->errf = stderr;
        o->errf_std = true;
        o->errf_name = "<stderr>";
    }

    errno = 0;
    if ((st = o->w->begin(o, err)) != GE_OK) {
        ge_out_close(o, NULL);
        return st;
    }
    o->began = true;
    *out = o;
    return GE_OK;
}

ge_status ge_out_row(ge_out *o, const ge_row *r, ge_err *err)
{
    errno = 0;
    return o->w->row(o, r, err);
}

ge_status ge_out_error(ge_out *o, const char *id, size_t id_len, const char *code,
                       const char *msg, ge_err *err)
{
    errno = 0;
    if (o->errf)
        return error_to_file(o, id, id_len, code, msg, err);
    return o->w->error(o, id, id_len, code, msg, err);
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
    if (bad && !st)
        st = ge_fail(err, GE_E_IO, "%s: write failed: %s", name, strerror(e));
    return st;
}

ge_status ge_out_close(ge_out *o, ge_err *err)
{
    if (!o)
        return GE_OK;
    ge_status st = GE_OK;
    errno = 0;
    if (o->began)
        st = o->w->end(o, err);
    st = finish(o->f, o->f_name, o->f_std, st, err);
    st = finish(o->ids, o->ids_name, false, st, err);
    st = finish(o->errf, o->errf_name, o->errf_std, st, err);
    free(o->ids_name);
    free(o->bytes);
    free(o->b64);
    free(o);
    return st;
}
