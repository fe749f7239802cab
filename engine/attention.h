/* attention.h - attention over a packed wave or a media tower's tokens (attention.c). */
#ifndef GE_ATTENTION_H
#define GE_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "compute.h"

/* Rows with fewer keys than this run on the tiled kernel even where the dense one takes
 * ranges: a short record's 12-row blocks and 32-key panels are mostly padding (bench_attn
 * text: records of 40 tokens ran 1.5-2x slower dense). The choice depends on the row's own
 * range only, so a record's bits do not depend on its neighbours in the wave. */
#define GE_ATTN_DENSE_MIN_KEYS 192

/* A layer's keys and values repacked as K^T / V planes for the tier's dense kernel (kern.h
 * ge_attn_dense_args), kept and grown between layers; freed by ge_attn_planes_free. */
typedef struct ge_attn_planes ge_attn_planes;

/* Before a layer's queries: when its attention runs on the tier's dense kernel with key
 * ranges (fast paths on, kern.h attn_dense_ranges, a head dim that is a multiple of 16) and
 * some row of a (key_lo, key_hi over the n_keys rows) is long enough for it, repacks the
 * n_keys keys and values of a (every KV head) into *P (allocated on first use) and returns
 * true; otherwise (or without memory) false, and the layer runs tiled. */
bool ge_attention_keys(ge_compute *cx, ge_attn_planes **P, const ge_attn_args *a,
                       int64_t n_keys);
/* Attention for query rows [0, n_tok) of a packed wave (kern.h ge_attn_args; key indices
 * refer to the keys given to ge_attention_keys): with planes P, rows with many keys on the
 * dense kernel and the others on the tiled one (by each row's own range, so a record's bits
 * do not depend on the wave); without, the tier's tiled (flash) kernel, or with --no-flash
 * the reference. */
void ge_attention(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, ge_attn_planes *P);
/* The tiled kernel or the reference, chosen by the caller (fast: the tier's tiled kernel). */
void ge_attention_with(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast);
/* Attention where keys and queries are the same n_tok rows (the vision tower) through the
 * tier's dense kernel over planes repacked one KV head at a time, when fast, the tier has one
 * for this head dim, and either it takes key ranges or every row sees every key [0, n_tok);
 * otherwise (or without memory for the planes) ge_attention_with. Each row's bits do not
 * depend on the thread count, nor (with ranges) on the other rows. */
void ge_attention_dense(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast);
void ge_attn_planes_free(ge_attn_planes *P);

#endif
