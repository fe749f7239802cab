/* attn.h - the attention family's per-tier entry points (kern.h describes the contract).
 *
 * Numerics of the tiled tiers (avx2, avx512). Every query row is computed alone, from its own
 * q row and its own keys [key_lo, key_hi), whatever the task split or the other rows:
 *  - score s_j = scale * (q . k_j): one fma chain per lane over the head dim, then a fixed
 *    lane-reduction tree, the same for every (query, key) pair;
 *  - softmax reference m: the max score over the row's first GE_ATTN_PREFIX keys (counted
 *    from key_lo), fixed before anything is accumulated. It replaces the running max of the
 *    textbook online softmax: with a fixed m no partial sum is ever rescaled, so the tile
 *    boundaries (and which queries share a tile) cannot change a bit;
 *  - p_j = exp(s_j - m) with the polynomial exp below; l = sum of p_j and o = sum p_j v_j
 *    accumulate in key order j = key_lo .. key_hi-1 (o with one fma per element per key,
 *    l with one add per key), then o /= l;
 *  - if a later score exceeds m by more than GE_ATTN_HEADROOM (p_j > e^32 could overflow the
 *    sums), the row is redone with m = its exact max. Whether that happens depends only on
 *    the row's own scores.
 * Keys outside a row's range are never read into its sums (masked by selection, never by
 * -inf or by multiplying with 0), so NaN or inf in another record cannot leak in.
 *
 * The exp polynomial (both tiers): e^t = 2^n e^r, n = round(t / ln 2), r = t - n ln 2 with a
 * two-constant Cody-Waite split (|r| <= ln2/2), e^r ~ 1 + r(c1 + r(c2 + ... + r c6)) (degree 6,
 * weighted minimax fit of the relative error, 2.0e-9 in exact arithmetic; the fp32 evaluation
 * brings it to ~1 ulp, tests/test_kern_attn measures it). t < GE_ATTN_EXP_FLUSH gives exactly
 * 0 (never a denormal; e^-87 = 1.6e-38 is just above FLT_MIN), t > 88 gives +inf, NaN stays
 * NaN.
 *
 * Numerics of the dense kernels (attn_dense: each query row sees keys [lo, hi): [0, n) for
 * the vision tower; with key ranges, on tiers with attn_dense_ranges, its own). Every query
 * row is computed alone, from its own q row, its range and the planes, whatever the split or
 * the other rows (so a record gives the same bits alone or packed in a wave):
 *  - score s_j = scale * (q . k_j): one fma chain over the head dim in order, from 0;
 *  - m = the exact max of the row's scores (no prefix reference, no redo);
 *  - p_j = exp(s_j - m) with the polynomial exp; l = the sum of the p_j in the tier's lanes
 *    (lane (j - lo) % 16 or % 8, in key order), then the lanes by a fixed reduction;
 *  - o = sum p_j v_j: one fma chain per element in key order from lo, then o /= l.
 * Rows of other queries (the padding of a partial block included) never enter a row's sums,
 * so NaN or inf elsewhere cannot leak in. */
#ifndef GE_ATTN_H
#define GE_ATTN_H

#include <stdint.h>

#include "kern.h"

#define GE_ATTN_PREFIX 64       /* keys that fix a row's softmax reference */
#define GE_ATTN_HEADROOM 32.0f  /* largest s - m accepted before a row is redone */
#define GE_ATTN_EXP_FLUSH -87.0f
#define GE_ATTN_EXP_MAX 88.0f

#define GE_ATTN_LOG2E 1.44269504088896341f
#define GE_ATTN_LN2_HI 0.693147182464599609375f /* fp32(ln 2) */
#define GE_ATTN_LN2_LO -1.9046542999577679e-09f /* ln 2 - GE_ATTN_LN2_HI */
#define GE_ATTN_EXP_C1 1.0f
#define GE_ATTN_EXP_C2 4.999999404e-01f
#define GE_ATTN_EXP_C3 1.666643173e-01f
#define GE_ATTN_EXP_C4 4.166800156e-02f
#define GE_ATTN_EXP_C5 8.374155499e-03f
#define GE_ATTN_EXP_C6 1.384365489e-03f

/* Row-by-row exact softmax (exact max, expf), fp32: the oracle. */
void ge_attn_scalar(const ge_attn_args *a, int head, int64_t q0, int64_t q1);

#if defined(__x86_64__)
/* Tiled kernels; head dims that are not a multiple of 8 go to ge_attn_scalar. */
void ge_attn_avx2(const ge_attn_args *a, int head, int64_t q0, int64_t q1);
void ge_attn_avx512(const ge_attn_args *a, int head, int64_t q0, int64_t q1);
/* Dense attention (kern.h attn_dense); head dims must be a multiple of 16. */
void ge_attn_dense_avx2(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                        float *scratch);
void ge_attn_dense_avx512(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                          float *scratch);
/* The tiers' polynomial exp on n floats (for the tests). */
void ge_attn_exp_avx2(const float *x, float *y, int64_t n);
void ge_attn_exp_avx512(const float *x, float *y, int64_t n);
#endif

#if defined(__aarch64__)
/* The ARM tiers' kernels (neon, dotprod and i8mm all run these): the avx2 tier's operations
 * on pairs of 4-lane registers where it has 8 lanes. Tiled: head dims that are not a multiple
 * of 8 go to ge_attn_scalar. */
void ge_attn_neon(const ge_attn_args *a, int head, int64_t q0, int64_t q1);
/* Dense attention (kern.h attn_dense); head dims must be a multiple of 16. */
void ge_attn_dense_neon(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                        float *scratch);
/* attn_rel (attn_rel.h): 4 lanes; head dims that are not a multiple of 4 go to the scalar
 * tier. */
void ge_attn_rel_neon(const ge_attn_rel_args *a, int64_t q0, int64_t q1);
/* The polynomial exp on n floats (the tests, attn_rel and the activations use it). */
void ge_attn_exp_neon(const float *x, float *y, int64_t n);
#endif

#endif
