/* gguf.h - zero-copy, overflow-checked reader of GGUF v2/v3 files.
 *
 * The file is mapped read-only and private; metadata values and tensor data are pointers
 * into the mapping. Every count, length, offset and size is checked against overflow and
 * the file size at open, so later accessors cannot read outside the mapping. The reader
 * knows nothing about any model: see model.c for the gemma-embedding2 binding. */
#ifndef GE_GGUF_H
#define GE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ge.h"

/* metadata value types */
enum {
    GE_GGUF_U8 = 0, GE_GGUF_I8, GE_GGUF_U16, GE_GGUF_I16, GE_GGUF_U32, GE_GGUF_I32,
    GE_GGUF_F32, GE_GGUF_BOOL, GE_GGUF_STR, GE_GGUF_ARR, GE_GGUF_U64, GE_GGUF_I64, GE_GGUF_F64
};

typedef struct {
    const char *ptr; /* not NUL-terminated: points into the mapping */
    uint64_t len;
} ge_gguf_str;

typedef struct {
    ge_gguf_str key;
    uint32_t type;       /* GE_GGUF_* */
    uint32_t arr_type;   /* element type when type == GE_GGUF_ARR */
    uint64_t arr_n;      /* element count when type == GE_GGUF_ARR */
    const uint8_t *val;  /* the value (or the first array element) in the mapping */
    uint64_t nbytes;     /* bytes from val to the value's end */
} ge_gguf_kv;

#define GE_GGUF_MAX_DIMS 4
typedef struct {
    char name[128];                 /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[GE_GGUF_MAX_DIMS];  /* ggml order: ne[0] is contiguous; unused dims are 1 */
    uint32_t type;                  /* ggml type id */
    uint64_t nbytes;
    const void *data;               /* inside the mapping, aligned */
} ge_gguf_tensor;

typedef struct {
    char *path;
    const uint8_t *base;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    ge_gguf_kv *kv;                        /* in file order */
    ge_gguf_tensor *tensors;               /* in file order */
    const ge_gguf_kv **kv_by_key;          /* sorted by key (byte order): the lookups */
    const ge_gguf_tensor **tensor_by_name; /* sorted by name */
} ge_gguf;

/* Open and fully validate a GGUF file. Tensor types unknown to this build are an error
 * (their size cannot be checked); known-but-unsupported types are accepted here. A key or a
 * tensor name given twice, an empty key, and two tensors whose data share a byte are
 * GE_E_FORMAT naming the file and the keys / tensors. The header's counts cost memory only
 * as their entries are read, and the holes of a sparse file are never read (a string array
 * over a hole is a run of empty strings, stepped over). */
ge_status ge_gguf_open(ge_gguf **out, const char *path, ge_err *err);
void ge_gguf_close(ge_gguf *g); /* accepts NULL */

const ge_gguf_kv *ge_gguf_find(const ge_gguf *g, const char *key);
const ge_gguf_tensor *ge_gguf_tensor_find(const ge_gguf *g, const char *name);

/* Typed metadata accessors. They fail with GE_E_FORMAT (naming the file and key) when the
 * key is missing or has an incompatible type / out-of-range value; the *_or variants
 * return dflt when the key is missing. Integer accessors accept any integer type. */
ge_status ge_gguf_get_u32(const ge_gguf *g, const char *key, uint32_t *out, ge_err *err);
ge_status ge_gguf_get_u32_or(const ge_gguf *g, const char *key, uint32_t dflt, uint32_t *out,
                             ge_err *err);
/* An integer within [lo, hi] (GE_E_FORMAT naming the file, key and range otherwise). */
ge_status ge_gguf_get_int_in(const ge_gguf *g, const char *key, int lo, int hi, int *out,
                             ge_err *err);
ge_status ge_gguf_get_f32(const ge_gguf *g, const char *key, float *out, ge_err *err);
/* A finite float in the open interval (lo, hi) (hi may be INFINITY): GE_E_FORMAT naming the
 * file, key, value and range otherwise (NaN and infinities never pass). */
ge_status ge_gguf_get_f32_in(const ge_gguf *g, const char *key, float lo, float hi, float *out,
                             ge_err *err);
ge_status ge_gguf_get_bool_or(const ge_gguf *g, const char *key, bool dflt, bool *out,
                              ge_err *err);
ge_status ge_gguf_get_str(const ge_gguf *g, const char *key, ge_gguf_str *out, ge_err *err);
/* Array of n integers (any integer or bool element type; a bool other than 0 or 1 is an
 * error) into out[0..n). A scalar integer key is broadcast to all n entries. */
ge_status ge_gguf_get_int_array(const ge_gguf *g, const char *key, int64_t *out, size_t n,
                                ge_err *err);
/* A string array's elements one by one, without allocating: ge_gguf_get_str_iter (missing
 * key or another type: GE_E_FORMAT naming the file and key), then ge_gguf_str_next while
 * it.left > 0. it.n and it.nbytes are the element count and the array's size in the file,
 * for checks that come before anything is allocated per element. */
typedef struct {
    const uint8_t *p; /* the next element */
    uint64_t left;    /* elements from p on */
    uint64_t n, nbytes;
} ge_gguf_str_iter;
ge_status ge_gguf_get_str_iter(const ge_gguf *g, const char *key, ge_gguf_str_iter *it,
                               ge_err *err);
static inline ge_gguf_str ge_gguf_str_next(ge_gguf_str_iter *it)
{
    ge_gguf_str s;
    memcpy(&s.len, it->p, 8); /* lengths were validated at open */
    s.ptr = (const char *)it->p + 8;
    it->p += 8 + s.len;
    it->left--;
    return s;
}
/* A string array: *n elements; strs (allocated, caller frees) receives each element. */
ge_status ge_gguf_get_str_array(const ge_gguf *g, const char *key, ge_gguf_str **strs,
                                size_t *n, ge_err *err);
/* A numeric array as float (F32 or integer elements). */
ge_status ge_gguf_get_f32_array(const ge_gguf *g, const char *key, float *out, size_t n,
                                ge_err *err);

bool ge_gguf_str_eq(ge_gguf_str s, const char *c);

/* Registry of open read-only file mappings: true when [p, p+len) lies entirely inside one
 * of them (a later page-release step must only ever drop pages of such mappings). */
bool ge_mapping_contains(const void *p, size_t len);

/* The path of a mapped model file that was cut short while mapped (a read past its new end
 * faulted and ge_mapping_fault replaced the mapping by zero pages), or NULL. Nothing
 * computed from it since can be trusted. */
const char *ge_mapping_damaged(void);

#endif
