/* attention.h - attention over a packed wave or a media tower's tokens (attention.c). */
#ifndef GE_ATTENTION_H
#define GE_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "compute.h"

/* Attention for one layer over a packed wave (kern.h ge_attn_args), flash or reference. */
void ge_attention(ge_compute *cx, const ge_attn_args *a, int64_t n_tok);
/* The same with the path chosen by the caller (fast: the tier's tiled kernel). */
void ge_attention_with(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast);
/* Attention where every query row sees every key [0, n_tok) (key_lo 0, key_hi n_tok: the
 * vision tower). fast: the tier's dense kernel (kern.h attn_dense) over K^T / V planes
 * repacked from k and v one KV head at a time, when the tier has one for this head dim;
 * otherwise (or without memory for the planes) ge_attention_with. Each row's bits do not
 * depend on the thread count. */
void ge_attention_dense(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast);

#endif
