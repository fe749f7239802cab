/* merge.c - gemmaembed merge (merge.h). */
#include "merge.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_span.h"
#include "msg.h"
#include "output.h"
#include "paths.h"
#include "precision.h"
#include "resume.h"

typedef struct {
    const char *path;
    json_t *meta;
    unsigned long long i;      /* its shard */
    FILE *data, *ids, *recs;   /* the output (at its first row), the ids, the records map */
    unsigned long long rows;   /* binary: rows in the file */
    unsigned long long used;   /* binary: rows taken */
    FILE *npz_ids;             /* npz: at the ids.npy data (UTF-32 rows of id_width units) */
    size_t id_width;
    char *line, *idline;
    size_t cap, idcap;
} part;

static const char *meta_str(const json_t *m, const char *key)
{
    const char *s = json_string_value(json_object_get(m, key));
    return s ? s : "";
}

static unsigned long long meta_ull(const json_t *m, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(m, key));
    return v > 0 ? (unsigned long long)v : 0;
}

static FILE *open_beside(const char *path, const char *suffix)
{
    char name[4200];
    snprintf(name, sizeof name, "%s%s", path, suffix);
    return fopen(name, "rb");
}

/* The npy header at f's position: dtype descr and shape; f left at the data. */
static bool npy_read_header(FILE *f, char *descr, size_t dn, unsigned long long *rows,
                            unsigned long long *width)
{
    unsigned char pre[10];
    char h[4096];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01\x00", 8) != 0)
        return false;
    size_t hl = pre[8] | (size_t)pre[9] << 8;
    if (hl >= sizeof h || fread(h, 1, hl, f) != hl)
        return false;
    h[hl] = 0;
    const char *d = strstr(h, "'descr': '"), *s = strstr(h, "'shape': (");
    if (!d || !s || sscanf(d + 10, "%15[^']", descr) != 1 || dn < 16)
        return false;
    *width = 1;
    int got = sscanf(s + 10, "%llu, %llu", rows, width);
    return got >= 1;
}

/* Position f at the data of the stored zip member `name` (npz as gemmaembed writes it, or any
 * stored archive): its size into *size. */
static bool zip_member(FILE *f, const char *name, unsigned long long *size)
{
    unsigned char h[30];
    char nm[256];
    if (fseeko(f, 0, SEEK_SET) != 0)
        return false;
    while (fread(h, 1, 30, f) == 30 && h[0] == 'P' && h[1] == 'K' && h[2] == 3 && h[3] == 4) {
        unsigned method = h[8] | h[9] << 8, nl = h[26] | h[27] << 8, xl = h[28] | h[29] << 8;
        unsigned long long sz = h[18] | (unsigned long)h[19] << 8 | (unsigned long)h[20] << 16 |
                                (unsigned long)h[21] << 24;
        if (nl >= sizeof nm || fread(nm, 1, nl, f) != nl || method != 0)
            return false;
        nm[nl] = 0;
        unsigned char x[256];
        if (xl > sizeof x || fread(x, 1, xl, f) != xl)
            return false;
        for (unsigned k = 0; k + 4 <= xl;) { /* zip64: the real size */
            unsigned id = x[k] | x[k + 1] << 8, len = x[k + 2] | x[k + 3] << 8;
            if (id == 1 && len >= 8 && k + 12 <= xl) {
                sz = 0;
                for (int b = 7; b >= 0; b--)
                    sz = sz << 8 | x[k + 4 + b];
            }
            k += 4 + len;
        }
        if (strcmp(nm, name) == 0) {
            *size = sz;
            return true;
        }
        if (fseeko(f, (off_t)sz, SEEK_CUR) != 0)
            return false;
    }
    return false;
}

/* The part's meta and files; its data positioned at the first row. A message on failure. */
static bool open_part(part *p, char *why, size_t wn)
{
    char name[4200];
    json_error_t je;
    snprintf(name, sizeof name, "%s.meta.json", p->path);
    if (!(p->meta = json_load_file(name, 0, &je))) {
        snprintf(why, wn, "%s: no run description (%s): not the output of a gemmaembed run "
                 "to a file", p->path, je.text);
        return false;
    }
    json_t *sh = json_object_get(p->meta, "shard");
    if (!json_is_array(sh) || json_array_size(sh) != 2) {
        snprintf(why, wn, "%s: not the output of a --shard run", p->path);
        return false;
    }
    p->i = (unsigned long long)json_integer_value(json_array_get(sh, 0));
    if (!json_is_true(json_object_get(p->meta, "complete"))) {
        snprintf(why, wn, "%s: its run did not finish (shard %llu); run it again with --resume",
                 p->path, p->i);
        return false;
    }
    const char *fmt = meta_str(p->meta, "format");
    p->data = fopen(p->path, "rb");
    p->recs = open_beside(p->path, ".records");
    if (!p->data || !p->recs) {
        snprintf(why, wn, "%s%s: %s", p->path, p->data ? ".records" : "", strerror(errno));
        return false;
    }
    const ge_prec prec = (ge_prec)ge_prec_parse(meta_str(p->meta, "precision"));
    const size_t row = ge_prec_row_bytes(prec, (int)meta_ull(p->meta, "dim"));
    char descr[16];
    unsigned long long width = 0, size;
    if (!strcmp(fmt, "npy") || !strcmp(fmt, "npz")) {
        if ((!strcmp(fmt, "npz") && !zip_member(p->data, "embeddings.npy", &size)) ||
            !npy_read_header(p->data, descr, sizeof descr, &p->rows, &width) ||
            strcmp(descr, meta_str(p->meta, "dtype")) ||
            width != meta_ull(p->meta, "width")) {
            snprintf(why, wn, "%s: not the %s file its run description says", p->path, fmt);
            return false;
        }
    } else if (!strcmp(fmt, "f32")) {
        struct stat sb;
        if (fstat(fileno(p->data), &sb) != 0 || (size_t)sb.st_size % row) {
            snprintf(why, wn, "%s: not whole rows of %zu bytes", p->path, row);
            return false;
        }
        p->rows = (unsigned long long)sb.st_size / row;
    }
    if (!strcmp(fmt, "npy") || !strcmp(fmt, "f32")) {
        if (!(p->ids = open_beside(p->path, ".ids.jsonl"))) {
            snprintf(why, wn, "%s.ids.jsonl: %s (the ids sidecar must be beside the part)",
                     p->path, strerror(errno));
            return false;
        }
    } else if (!strcmp(fmt, "npz")) {
        unsigned long long n;
        p->npz_ids = fopen(p->path, "rb");
        if (!p->npz_ids || !zip_member(p->npz_ids, "ids.npy", &size) ||
            !npy_read_header(p->npz_ids, descr, sizeof descr, &n, &width) ||
            descr[0] != '<' || descr[1] != 'U' || n != p->rows) {
            snprintf(why, wn, "%s: its ids.npy is missing or does not match", p->path);
            return false;
        }
        p->id_width = (size_t)strtoul(descr + 2, NULL, 10);
    }
    return true;
}

/* The parts agree: one job's complete shards 0..n-1. *n gets n; the parts are put in shard
 * order into by[]. */
static bool check_parts(part *ps, int np, part **by, char *why, size_t wn)
{
    static const char *const same[] = {"format", "precision", "dim", "width", "mode",
                                       "input_records"};
    const unsigned long long n = (unsigned long long)json_integer_value(
        json_array_get(json_object_get(ps[0].meta, "shard"), 1));
    if ((unsigned long long)np < n && n <= 4096) { /* name the shards that are not there */
        char have[4096] = {0};
        int at = snprintf(why, wn, "%d parts given for a job of %llu shards; missing:", np, n);
        for (int k = 0; k < np; k++)
            if (ps[k].i < n)
                have[ps[k].i] = 1;
        for (unsigned long long i = 0; i < n && at > 0 && (size_t)at < wn - 32; i++)
            if (!have[i])
                at += snprintf(why + at, wn - (size_t)at, " %llu/%llu", i, n);
        return false;
    }
    if ((unsigned long long)np != n) {
        snprintf(why, wn, "%d parts given for a job of %llu shards", np, n);
        return false;
    }
    for (int k = 0; k < np; k++) {
        part *p = &ps[k];
        if ((unsigned long long)json_integer_value(json_array_get(json_object_get(p->meta,
                                                                   "shard"), 1)) != n) {
            snprintf(why, wn, "%s is a shard of %lld, %s of %llu", p->path,
                     json_integer_value(json_array_get(json_object_get(p->meta, "shard"), 1)),
                     ps[0].path, n);
            return false;
        }
        if (p->i >= n || by[p->i]) {
            snprintf(why, wn, "shard %llu/%llu is given twice (%s and %s)", p->i, n,
                     by[p->i] ? by[p->i]->path : "", p->path);
            return false;
        }
        by[p->i] = p;
        for (size_t f = 0; f < sizeof same / sizeof same[0]; f++)
            if (!json_equal(json_object_get(p->meta, same[f]),
                            json_object_get(ps[0].meta, same[f]))) {
                snprintf(why, wn, "%s and %s differ in %s", ps[0].path, p->path, same[f]);
                return false;
            }
        json_t *a = json_object_get(ps[0].meta, "identity"), *b = json_object_get(p->meta,
                                                                                 "identity");
        const char *key;
        json_t *v;
        json_object_foreach(a, key, v) {
            if (!json_equal(v, json_object_get(b, key))) {
                snprintf(why, wn, "%s and %s were made by other runs: %s differs (%s / %s)",
                         ps[0].path, p->path, key, json_string_value(v) ? json_string_value(v)
                         : "?", json_string_value(json_object_get(b, key)) ?
                         json_string_value(json_object_get(b, key)) : "missing");
                return false;
            }
        }
        if (json_object_size(a) != json_object_size(b)) {
            snprintf(why, wn, "%s and %s were made by other versions", ps[0].path, p->path);
            return false;
        }
    }
    return true;
}

/* Raw UTF-32LE id of `w` units into UTF-8 (the id as its run wrote it). */
static size_t utf8_of(const unsigned char *u, size_t w, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < w; i++) {
        unsigned long c = u[4 * i] | (unsigned long)u[4 * i + 1] << 8 |
                          (unsigned long)u[4 * i + 2] << 16 | (unsigned long)u[4 * i + 3] << 24;
        if (!c)
            break;
        if (c < 0x80) {
            out[n++] = (char)c;
        } else if (c < 0x800) {
            out[n++] = (char)(0xC0 | c >> 6), out[n++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out[n++] = (char)(0xE0 | c >> 12), out[n++] = (char)(0x80 | (c >> 6 & 0x3F));
            out[n++] = (char)(0x80 | (c & 0x3F));
        } else {
            out[n++] = (char)(0xF0 | c >> 18), out[n++] = (char)(0x80 | (c >> 12 & 0x3F));
            out[n++] = (char)(0x80 | (c >> 6 & 0x3F)), out[n++] = (char)(0x80 | (c & 0x3F));
        }
    }
    return n;
}

/* One line of f without its newline, or -1 at the end. */
static ssize_t line_of(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n > 0 && (*buf)[n - 1] == '\n')
        (*buf)[--n] = 0;
    return n;
}

/* The vectors an openai-batch line holds (its data), or a jsonl line (1, 0 for an error). */
static unsigned line_rows(const char *line, size_t n, bool openai)
{
    if (!openai) {
        size_t off, len;
        return ge_json_member_span(line, n, "error", &off, &len) == 1 ? 0 : 1;
    }
    json_t *j = json_loadb(line, n, 0, NULL);
    size_t rows = json_array_size(json_object_get(
        json_object_get(json_object_get(j, "response"), "body"), "data"));
    json_decref(j);
    return (unsigned)rows;
}

/* The fingerprint a part's run description stands for (the model file's name as its note),
 * without the fields the output adds. */
static void identity_fp(const json_t *meta, ge_fingerprint *fp)
{
    const json_t *id = json_object_get(meta, "identity");
    static const char *const own[] = {"format", "dim", "mode", "encoding", "precision"};
    const char *key;
    json_t *v;
    memset(fp, 0, sizeof *fp);
    json_object_foreach((json_t *)id, key, v) {
        bool skip = false;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
            skip |= !strcmp(key, own[k]);
        const char *val = json_string_value(v) ? json_string_value(v) : "";
        if (!skip && !strcmp(key, "model") && json_object_get(meta, "model_file"))
            ge_fp_add(fp, key, "%s  # %s", val, meta_str(meta, "model_file"));
        else if (!skip)
            ge_fp_add(fp, key, "%s", val);
    }
}

static void usage_text(FILE *f)
{
    fputs("usage: gemmaembed merge -o OUT PART...\n"
          "  the outputs of the --shard i/n runs of one job (jsonl, npy, f32, npz or\n"
          "  openai-batch, each with its PART.meta.json and PART.records) as the output of one\n"
          "  run, in input order; refuses parts of other runs, unfinished parts and missing or\n"
          "  repeated shards\n", f);
}

int ge_merge_main(int argc, char **argv)
{
    static const struct option lo[] = {{"output", required_argument, NULL, 'o'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
    const char *out_path = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        if (c == 'o')
            out_path = optarg;
        else if (c == 'h')
            return usage_text(stdout), GE_EXIT_OK;
        else
            return ge_say_usage("merge: unknown option");
    }
    const int np = argc - optind;
    if (!out_path || np < 1)
        return usage_text(stderr), ge_say_usage("merge: give -o OUT and the parts");
    part *ps = calloc((size_t)np, sizeof *ps);
    part **by = calloc((size_t)np, sizeof *by);
    ge_path_use *uses = calloc((size_t)np * 4 + 8, sizeof *uses);
    char (*names)[4200] = calloc((size_t)np * 3 + 4, sizeof *names);
    if (!ps || !by || !uses || !names)
        return ge_say("out of memory"), GE_EXIT_IO;
    char why[6000];
    ge_exit rc = GE_EXIT_OK;
    for (int k = 0; k < np && !rc; k++) {
        ps[k].path = argv[optind + k];
        if (!open_part(&ps[k], why, sizeof why))
            rc = ge_say_usage("merge: %s", why);
    }
    if (!rc && !check_parts(ps, np, by, why, sizeof why))
        rc = ge_say_usage("merge: %s", why);

    ge_out *out = NULL;
    ge_err err = {0};
    static ge_fingerprint fp;
    const json_t *m0 = ps[0].meta;
    const char *fmt = rc ? "" : meta_str(m0, "format");
    const bool text = !strcmp(fmt, "jsonl") || !strcmp(fmt, "openai-batch");
    ge_out_cfg oc = {0};
    if (!rc) {
        identity_fp(m0, &fp);
        const json_t *id = json_object_get(m0, "identity");
        oc = (ge_out_cfg){.format = ge_out_format_of(fmt),
                          .base64 = !strcmp(meta_str(id, "encoding"), "base64"),
                          .tokenize = !strcmp(meta_str(m0, "mode"), "tokenize"),
                          .path = out_path,
                          .dim = (int)meta_ull(m0, "dim"),
                          .precision = (ge_prec)ge_prec_parse(meta_str(m0, "precision")),
                          .tier = meta_str(m0, "kernel_tier"),
                          .merged = true,
                          .fp = &fp};
        /* the parts and their sidecars are read: the output must be none of them */
        size_t nu = 0;
        for (int k = 0; k < np; k++) {
            static const char *const sfx[] = {".meta.json", ".records", ".ids.jsonl"};
            uses[nu++] = (ge_path_use){ps[k].path, -1, "a part", false};
            for (int s = 0; s < 3; s++) {
                snprintf(names[3 * k + s], sizeof names[0], "%s%s", ps[k].path, sfx[s]);
                uses[nu++] = (ge_path_use){names[3 * k + s], -1, "a part's sidecar", false};
            }
        }
        static char onames[4][4200];
        nu += ge_out_uses(&oc, uses + nu, onames);
        unsigned long long skip;
        if (ge_paths_check(uses, nu, &err))
            rc = ge_say_usage("merge: %s", err.msg);
        else if (ge_out_open(&out, &oc, &skip, &err))
            rc = ge_say_err(&err, GE_EXIT_IO);
    }

    /* record k: the next record of shard k mod n */
    const unsigned long long records = rc ? 0 : meta_ull(m0, "input_records");
    const size_t row = rc ? 0 : ge_prec_row_bytes(oc.precision, oc.dim);
    unsigned char *bytes = row ? malloc(row) : NULL;
    char *zid = NULL; /* an npz part's id in UTF-8 */
    for (unsigned long long k = 0; !rc && k < records; k++) {
        part *p = by[k % (unsigned long long)np];
        unsigned long long units;
        char *end;
        if (line_of(p->recs, &p->line, &p->cap) < 1 ||
            ((units = strtoull(p->line, &end, 10)), *end)) {
            rc = ge_say_usage("merge: %s.records ends early or is damaged (record %llu of the "
                              "input)", p->path, k + 1);
            break;
        }
        for (unsigned long long u = 0; !rc && u < units; u++) {
            ge_row r = {.raw = NULL};
            if (text) {
                ssize_t n = line_of(p->data, &p->line, &p->cap);
                if (n < 0) {
                    rc = ge_say_usage("merge: %s ends before its records map", p->path);
                    break;
                }
                r = (ge_row){.id = "", .raw = p->line, .raw_len = (size_t)n,
                             .raw_rows = line_rows(p->line, (size_t)n,
                                                   oc.format == GE_FMT_OPENAI)};
            } else {
                ssize_t n = -1;
                const char *id = NULL;
                if (p->used == p->rows || fread(bytes, 1, row, p->data) != row) {
                    rc = ge_say_usage("merge: %s ends before its records map", p->path);
                    break;
                }
                p->used++;
                if (p->npz_ids) {
                    unsigned char *u32 = malloc(4 * p->id_width + 1);
                    char *z = realloc(zid, 4 * p->id_width + 1);
                    zid = z ? z : zid;
                    if (u32 && z && fread(u32, 4, p->id_width, p->npz_ids) == p->id_width)
                        n = (ssize_t)utf8_of(u32, p->id_width, zid), id = zid;
                    free(u32);
                } else if ((n = line_of(p->ids, &p->idline, &p->idcap)) >= 0) {
                    id = p->idline;
                }
                if (n < 0) {
                    rc = ge_say_usage("merge: the ids of %s end before its rows", p->path);
                    break;
                }
                r = (ge_row){.id = id, .id_len = (size_t)n, .raw = (const char *)bytes,
                             .raw_len = row};
            }
            if (ge_out_row(out, &r, &err))
                rc = ge_say_err(&err, GE_EXIT_IO);
        }
    }
    for (int k = 0; !rc && k < np; k++) { /* every part used up */
        part *p = &ps[k];
        bool left = getc(p->recs) != EOF || (text && getc(p->data) != EOF) ||
                    (!text && p->used != p->rows) || (p->ids && getc(p->ids) != EOF);
        if (left)
            rc = ge_say_usage("merge: %s holds more than its records map and the input "
                              "records say", p->path);
    }
    if (!rc && ge_out_checkpoint(out, records, &err))
        rc = ge_say_err(&err, GE_EXIT_IO);
    if (!rc)
        ge_out_mark_complete(out);
    char note[600];
    if (out && ge_out_close(out, note, sizeof note, &err) && !rc)
        rc = ge_say_err(&err, GE_EXIT_IO);
    for (int k = 0; k < np; k++) {
        part *p = &ps[k];
        json_decref(p->meta);
        if (p->data)
            fclose(p->data);
        if (p->ids)
            fclose(p->ids);
        if (p->recs)
            fclose(p->recs);
        if (p->npz_ids)
            fclose(p->npz_ids);
        free(p->line), free(p->idline);
    }
    free(zid);
    free(bytes), free(ps), free(by), free(uses), free(names);
    return rc;
}
