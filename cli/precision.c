/* precision.c - output element types and calibration files (precision.h). */
#include "precision.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const NAMES[GE_PREC_COUNT] = {"float32", "float16", "int8",
                                                 "uint8",   "binary",  "ubinary"};
const char ge_prec_names[] = "float32|float16|int8|uint8|binary|ubinary";

int ge_prec_parse(const char *name)
{
    for (int i = 0; i < GE_PREC_COUNT; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

const char *ge_prec_name(ge_prec p) { return NAMES[p]; }

bool ge_prec_calibrated(ge_prec p) { return p == GE_PREC_INT8 || p == GE_PREC_UINT8; }

int ge_prec_width(ge_prec p, int dim)
{
    return p == GE_PREC_BINARY || p == GE_PREC_UBINARY ? (dim + 7) / 8 : dim;
}

size_t ge_prec_row_bytes(ge_prec p, int dim)
{
    size_t w = (size_t)ge_prec_width(p, dim);
    return p == GE_PREC_FLOAT32 ? 4 * w : p == GE_PREC_FLOAT16 ? 2 * w : w;
}

const char *ge_prec_npy_descr(ge_prec p)
{
    return p == GE_PREC_FLOAT32 ? "<f4" : p == GE_PREC_FLOAT16 ? "<f2"
         : ge_prec_is_signed_byte(p) ? "|i1" : "|u1";
}

bool ge_prec_is_signed_byte(ge_prec p) { return p == GE_PREC_INT8 || p == GE_PREC_BINARY; }

/* ---- rows ---------------------------------------------------------------------------- */

/* trunc(q) clamped to [lo, hi]; a NaN gives lo */
static int clamp_trunc(double q, int lo, int hi)
{
    if (!(q > lo))
        return lo;
    if (q >= hi)
        return hi;
    return (int)q;
}

void ge_prec_encode(ge_prec p, const ge_calib *c, const float *v, int dim, unsigned char *out)
{
    switch (p) {
    case GE_PREC_FLOAT32:
        for (int i = 0; i < dim; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++)
                out[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        break;
    case GE_PREC_FLOAT16:
        for (int i = 0; i < dim; i++) {
            uint16_t h = ge_fp32_to_fp16(v[i]);
            out[2 * i] = (unsigned char)h;
            out[2 * i + 1] = (unsigned char)(h >> 8);
        }
        break;
    case GE_PREC_INT8:
    case GE_PREC_UINT8: {
        /* numpy's arithmetic: float32 throughout for a '<f4' calibration file (every step
         * rounded to float: ISO C mode contracts nothing), float64 for a '<f8' one */
        const int lo = p == GE_PREC_INT8 ? -128 : 0, hi = p == GE_PREC_INT8 ? 127 : 255;
        for (int i = 0; i < dim; i++) {
            double q;
            if (c->f64) {
                double step = (c->hi[i] - c->lo[i]) / 255;
                q = ((double)v[i] - c->lo[i]) / step;
                if (p == GE_PREC_INT8)
                    q = q - 128;
            } else {
                float step = ((float)c->hi[i] - (float)c->lo[i]) / 255.0f;
                float qf = (v[i] - (float)c->lo[i]) / step;
                if (p == GE_PREC_INT8)
                    qf = qf - 128.0f;
                q = qf;
            }
            out[i] = (unsigned char)(clamp_trunc(q, lo, hi) & 0xff);
        }
        break;
    }
    case GE_PREC_BINARY:
    case GE_PREC_UBINARY:
        for (int b = 0; b < (dim + 7) / 8; b++) {
            unsigned bits = 0;
            for (int k = 0; k < 8; k++)
                bits = bits << 1 | (8 * b + k < dim && v[8 * b + k] > 0.0f);
            out[b] = (unsigned char)(p == GE_PREC_BINARY ? bits ^ 0x80 : bits); /* -128 */
        }
        break;
    default:
        break;
    }
}

/* ---- calibration files ----------------------------------------------------------------- */

/* The value of a header dict's key ('descr': ...), or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char k[32];
    snprintf(k, sizeof k, "'%s':", key);
    const char *at = strstr(h, k);
    if (!at)
        return NULL;
    at += strlen(k);
    while (*at == ' ')
        at++;
    return at;
}

static double le_value(const unsigned char *p, bool f64)
{
    uint64_t u = 0;
    for (int k = f64 ? 7 : 3; k >= 0; k--)
        u = u << 8 | p[k];
    if (f64) {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    uint32_t u32 = (uint32_t)u;
    float f;
    memcpy(&f, &u32, 4);
    return f;
}

ge_status ge_calib_load(const char *path, int dim, ge_calib *c, ge_err *err)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ge_fail(err, GE_E_USAGE, "--calibration %s: %s", path, strerror(errno));
    unsigned char pre[12];
    char hdr[4096];
    const char *why = NULL;
    size_t hl = 0;
    unsigned char *data = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 ||
        pre[6] > 3) {
        why = "not an npy file";
        goto out;
    }
    hl = pre[8] | (size_t)pre[9] << 8;
    if (pre[6] > 1) { /* versions 2 and 3: a 4-byte header length */
        if (fread(pre + 10, 1, 2, f) != 2) {
            why = "not an npy file";
            goto out;
        }
        hl |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hl >= sizeof hdr || fread(hdr, 1, hl, f) != hl) {
        why = "its npy header is damaged or too long";
        goto out;
    }
    hdr[hl] = 0;
    const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
               *sh = dict_value(hdr, "shape");
    long rows = -1, cols = -1;
    if (!d || !fo || !sh || sscanf(sh, "(%ld, %ld)", &rows, &cols) != 2) {
        why = "its npy header is damaged";
        goto out;
    }
    if (strncmp(d, "'<f4'", 5) != 0 && strncmp(d, "'<f8'", 5) != 0) {
        why = "its dtype is not float32 or float64 ('<f4' or '<f8')";
        goto out;
    }
    if (rows != 2 || cols != dim) {
        snprintf(hdr, sizeof hdr, "its shape is (%ld, %ld), and this run's rows need (2, %d): "
                 "the minimum and maximum of each of the %d dimensions", rows, cols, dim, dim);
        why = hdr;
        goto out;
    }
    c->dim = dim;
    c->f64 = d[3] == '8';
    const bool fortran = strncmp(fo, "True", 4) == 0;
    const size_t es = c->f64 ? 8 : 4, n = 2 * (size_t)dim;
    data = malloc(n * es);
    c->lo = malloc((size_t)dim * sizeof *c->lo);
    c->hi = malloc((size_t)dim * sizeof *c->hi);
    if (!data || !c->lo || !c->hi) {
        fclose(f);
        free(data);
        ge_calib_free(c);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    if (fread(data, es, n, f) != n) {
        why = "it is shorter than its header says";
        goto out;
    }
    for (int i = 0; i < dim && !why; i++) {
        /* C order: row r at r * dim; Fortran order: column i holds (lo, hi) */
        c->lo[i] = le_value(data + es * (fortran ? 2 * (size_t)i : (size_t)i), c->f64);
        c->hi[i] = le_value(data + es * (fortran ? 2 * (size_t)i + 1 : (size_t)dim + i), c->f64);
        if (!isfinite(c->lo[i]) || !isfinite(c->hi[i]))
            why = "it holds a value that is not finite";
        else if (c->lo[i] > c->hi[i]) {
            snprintf(hdr, sizeof hdr, "dimension %d has minimum %.9g above maximum %.9g", i,
                     c->lo[i], c->hi[i]);
            why = hdr;
        }
    }
out:
    fclose(f);
    free(data);
    if (!why)
        return GE_OK;
    ge_calib_free(c);
    return ge_fail(err, GE_E_USAGE, "--calibration %s: %s", path, why);
}

void ge_calib_free(ge_calib *c)
{
    free(c->lo);
    free(c->hi);
    c->lo = c->hi = NULL;
}

ge_status ge_calib_write(const char *path, const float *lo, const float *hi, int dim,
                         ge_err *err)
{
    char h[128];
    int k = snprintf(h + 10, sizeof h - 10,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (2, %d), }", dim);
    const size_t hl = ((size_t)k + 10 + 1 + 63) / 64 * 64;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)((hl - 10) & 0xff);
    h[9] = (char)((hl - 10) >> 8);
    memset(h + 10 + k, ' ', hl - 10 - (size_t)k - 1);
    h[hl - 1] = '\n';

    size_t n = strlen(path) + sizeof ".XXXXXX";
    char *tmp = malloc(n);
    if (!tmp)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd >= 0) { /* the mode a plain create gives (mkstemp makes 0600) */
        const mode_t mask = umask(022);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        ge_status st = ge_fail(err, GE_E_IO, "--write-calibration %s: %s", path,
                               strerror(errno));
        if (fd >= 0)
            close(fd), unlink(tmp);
        free(tmp);
        return st;
    }
    fwrite(h, 1, hl, f);
    unsigned char b[4];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < dim; i++) {
            ge_prec_encode(GE_PREC_FLOAT32, NULL, r ? &hi[i] : &lo[i], 1, b);
            fwrite(b, 1, 4, f);
        }
    int bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    int e = errno;
    ge_status st = GE_OK;
    if (bad || rename(tmp, path) != 0) {
        st = ge_fail(err, GE_E_IO, "--write-calibration %s: %s", path,
                     strerror(bad ? (e ? e : EIO) : errno));
        unlink(tmp);
    }
    free(tmp);
    return st;
}
