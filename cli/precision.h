/* precision.h - the element type of the output rows (--precision), as sentence-transformers'
 * quantize_embeddings defines it, applied to each row after the Matryoshka cut:
 *
 *   float32  the vector as computed;
 *   float16  each value rounded to the nearest binary16 (ties to even, as numpy's astype);
 *   uint8    trunc((x - lo) / step) with step = (hi - lo) / 255, per dimension, in float32
 *            (float64 when the calibration file is float64, as numpy would promote);
 *   int8     trunc((x - lo) / step - 128), the same;
 *            both clamp to the type's range (a value outside [lo, hi] lands on an end; a NaN,
 *            which only a zero-width range can make, on the low end);
 *   ubinary  the signs x > 0 as bits, most significant first, ceil(dim / 8) bytes (numpy's
 *            packbits: the last byte's unused bits are 0);
 *   binary   the same bytes minus 128, as int8.
 *
 * lo and hi come from a calibration file (--calibration PATH.npy: shape (2, dim), row 0 the
 * minimum and row 1 the maximum of each dimension, '<f4' or '<f8'), never from the batch, so
 * shards, resumed runs and single records agree. --write-calibration writes one from a run's
 * float vectors. */
#ifndef GE_CLI_PRECISION_H
#define GE_CLI_PRECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge.h"

typedef enum {
    GE_PREC_FLOAT32 = 0,
    GE_PREC_FLOAT16,
    GE_PREC_INT8,
    GE_PREC_UINT8,
    GE_PREC_BINARY,
    GE_PREC_UBINARY,
    GE_PREC_COUNT
} ge_prec;

/* The precision a name means; -1 when none (names: ge_prec_names). */
int ge_prec_parse(const char *name);
const char *ge_prec_name(ge_prec p);
extern const char ge_prec_names[]; /* "float32|float16|int8|uint8|binary|ubinary" */

bool ge_prec_calibrated(ge_prec p);       /* int8 and uint8: a calibration file is needed */
int ge_prec_width(ge_prec p, int dim);    /* elements per row: dim, or ceil(dim / 8) */
size_t ge_prec_row_bytes(ge_prec p, int dim);
const char *ge_prec_npy_descr(ge_prec p); /* "<f4", "<f2", "|i1" or "|u1" */
bool ge_prec_is_signed_byte(ge_prec p);   /* int8 and binary: the bytes read as int8 */

/* Per-dimension ranges of a calibration file, kept in the file's own precision. */
typedef struct {
    int dim;
    bool f64;
    double *lo, *hi; /* [dim] each */
} ge_calib;

/* Read a calibration file for rows of dim values. GE_E_USAGE naming the path and the cause
 * (not an npy file, another dtype or shape, a value that is not finite, min > max). */
ge_status ge_calib_load(const char *path, int dim, ge_calib *c, ge_err *err);
void ge_calib_free(ge_calib *c);

/* Write lo and hi (dim values each) as a (2, dim) '<f4' npy file, whole under a temporary
 * name and then renamed over path. GE_E_IO naming the path on failure. */
ge_status ge_calib_write(const char *path, const float *lo, const float *hi, int dim,
                         ge_err *err);

/* One row v[0..dim) in precision p as its little-endian bytes, ge_prec_row_bytes(p, dim) of
 * them, into out. c: the ranges (NULL unless ge_prec_calibrated(p)). */
void ge_prec_encode(ge_prec p, const ge_calib *c, const float *v, int dim, unsigned char *out);

#endif
