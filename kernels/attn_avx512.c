/* attn_avx512.c - tiled attention, AVX-512F (attn.h has the numerics, attn_tiled.h the
 * blocking). The tier's steps:
 *  - scores: 4 queries x 4 keys of zmm fma chains over the head dim, folded by one 16 -> 1
 *    reduction network straight into [key][query] order;
 *  - probabilities: 16 at a time (4 keys x 4 queries), range masks by integer compares;
 *  - values: 4 queries x up to 4 zmm (64 dims) of o accumulators in registers across the
 *    tile's keys, one broadcast of p per query and key; the few keys outside some row's range
 *    (at the block's edges) go row by row.
 * A head dim that is 8 mod 16 uses masked loads for its last half vector. */
#include <immintrin.h>

#include "attn_tiled.h"
#include "exp_avx512.h"

/* ---- exp (exp_avx512.h) ---------------------------------------------------------- */

void ge_attn_exp_avx512(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* ---- scores ---------------------------------------------------------------------------- */

/* Fold 16 vectors into one holding their lane sums; every input goes through the same tree
 * ((x[l] + x[l+8]) + (x[l+4] + x[l+12])) + ..., and x[4q + t] lands in lane 4t + q. */
INLINE __m512 reduce16(__m512 *x)
{
    __m512 y[8], z[4], w[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xee));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xdd));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * i], z[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(z[2 * i], z[2 * i + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
}

/* S[(j - j0) * QB + q] = scale * q_q . k_j for j in [j0, j1) rounded up to 4 keys (the extra
 * keys repeat the last one; rows past b->n repeat row 0: both are discarded). */
static void scores(const ctx *c, const block *b, int64_t j0, int64_t j1, float *S)
{
    const ge_attn_args *a = c->a;
    const int d = c->d;
    const float *qp[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++)
        qp[q] = a->q + b->i[q < b->n ? q : 0] * a->ldq + c->head;
    const __m512 scale = _mm512_set1_ps(a->scale);
    for (int64_t jj = j0; jj < j1; jj += 4) {
        const float *kp[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            kp[t] = a->k + (jj + t < j1 ? jj + t : j1 - 1) * a->ldkv + c->kvoff;
        __m512 acc[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            acc[i] = _mm512_setzero_ps();
        int e = 0;
        for (; e + 16 <= d; e += 16) {
            __m512 qv[QB], kv[4];
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++)
                qv[q] = _mm512_loadu_ps(qp[q] + e);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                kv[t] = _mm512_loadu_ps(kp[t] + e);
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++)
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++)
                    acc[4 * q + t] = _mm512_fmadd_ps(qv[q], kv[t], acc[4 * q + t]);
        }
        if (e < d) {
            __m512 qv[QB], kv[4];
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++)
                qv[q] = _mm512_maskz_loadu_ps(c->tail, qp[q] + e);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                kv[t] = _mm512_maskz_loadu_ps(c->tail, kp[t] + e);
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++)
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++)
                    acc[4 * q + t] = _mm512_fmadd_ps(qv[q], kv[t], acc[4 * q + t]);
        }
        _mm512_storeu_ps(S + (jj - j0) * QB, _mm512_mul_ps(reduce16(acc), scale));
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* S (keys [j0, j1)) -> p = exp(s - m), 0 outside each row's range; l += p key by key;
 * rows with s - m > headroom are marked for a redo. */
static void probs(block *b, int64_t j0, int64_t j1, float *S)
{
    int32_t lo[QB], hi[QB];
    float m[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++) {
        lo[q] = q < b->n ? b->lo[q] : 1; /* empty for padding rows */
        hi[q] = q < b->n ? (int32_t)min64(b->hi[q], j1) : 0;
        m[q] = q < b->n ? b->m[q] : 0.0f;
    }
    const __m512 mv = _mm512_broadcast_f32x4(_mm_loadu_ps(m));
    const __m512i lov = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lo));
    const __m512i hiv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)hi));
    __m512i jv = _mm512_add_epi32(_mm512_set1_epi32((int32_t)j0),
                                  _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0));
    const __m512 room = _mm512_set1_ps(GE_ATTN_HEADROOM);
    __m128 l = _mm_loadu_ps(b->l);
    __mmask16 over = 0;
    for (int64_t jj = j0; jj < j1; jj += 4) {
        float *s = S + (jj - j0) * QB;
        const __mmask16 in = _mm512_cmpge_epi32_mask(jv, lov) & _mm512_cmplt_epi32_mask(jv, hiv);
        const __m512 t = _mm512_sub_ps(_mm512_loadu_ps(s), mv);
        over |= _mm512_mask_cmp_ps_mask(in, t, room, _CMP_GT_OQ);
        const __m512 p = _mm512_maskz_mov_ps(in, exp16(t));
        _mm512_storeu_ps(s, p);
        l = _mm_add_ps(l, _mm512_castps512_ps128(p));
        l = _mm_add_ps(l, _mm512_extractf32x4_ps(p, 1));
        l = _mm_add_ps(l, _mm512_extractf32x4_ps(p, 2));
        l = _mm_add_ps(l, _mm512_extractf32x4_ps(p, 3));
        jv = _mm512_add_epi32(jv, _mm512_set1_epi32(4));
    }
    _mm_storeu_ps(b->l, l);
    for (int q = 0; q < b->n; q++)
        b->redo[q] |= (over & (0x1111u << q)) != 0;
}

/* ---- values ---------------------------------------------------------------------------- */

/* o[q][e .. e + 16W) += sum_j S[j][q] v_j for keys [j0, j1) that every row sees. */
INLINE void pv_chunk(const int NQ, const int W, float *const *o, const float *v, int64_t ldv,
                     const float *S, int64_t sj0, int64_t j0, int64_t j1, int e,
                     __mmask16 mlast)
{
    __m512 acc[QB][4];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            acc[q][w] = _mm512_maskz_loadu_ps(w == W - 1 ? mlast : 0xffff, o[q] + e + 16 * w);
    for (int64_t j = j0; j < j1; j++) {
        const float *vj = v + j * ldv + e, *p = S + (j - sj0) * QB;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            vv[w] = _mm512_maskz_loadu_ps(w == W - 1 ? mlast : 0xffff, vj + 16 * w);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; q++) {
            const __m512 pq = _mm512_set1_ps(p[q]);
#pragma GCC unroll 4
            for (int w = 0; w < W; w++)
                acc[q][w] = _mm512_fmadd_ps(pq, vv[w], acc[q][w]);
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            _mm512_mask_storeu_ps(o[q] + e + 16 * w, w == W - 1 ? mlast : 0xffff, acc[q][w]);
}

INLINE void pv_rows(const int NQ, const ctx *c, float *const *o, const float *v,
                    const float *S, int64_t sj0, int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    const int d = c->d;
    int e = 0;
    for (; e + 64 <= d; e += 64)
        pv_chunk(NQ, 4, o, v, ldv, S, sj0, j0, j1, e, 0xffff);
    if (d - e >= 32) {
        pv_chunk(NQ, 2, o, v, ldv, S, sj0, j0, j1, e, 0xffff);
        e += 32;
    }
    if (d - e >= 16) {
        pv_chunk(NQ, 1, o, v, ldv, S, sj0, j0, j1, e, 0xffff);
        e += 16;
    }
    if (e < d)
        pv_chunk(NQ, 1, o, v, ldv, S, sj0, j0, j1, e, c->tail);
}

/* One row, keys [j0, j1) of its range: o += p_j v_j. */
static void pv_one(const ctx *c, float *o, const float *v, const float *S, int64_t sj0, int q,
                   int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    const int d = c->d;
    for (int64_t j = j0; j < j1; j++) {
        const __m512 p = _mm512_set1_ps(S[(j - sj0) * QB + q]);
        const float *vj = v + j * ldv;
        int e = 0;
        for (; e + 16 <= d; e += 16)
            _mm512_storeu_ps(o + e, _mm512_fmadd_ps(p, _mm512_loadu_ps(vj + e),
                                                    _mm512_loadu_ps(o + e)));
        if (e < d)
            _mm512_mask_storeu_ps(o + e, c->tail,
                                  _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(c->tail, vj + e),
                                                  _mm512_maskz_loadu_ps(c->tail, o + e)));
    }
}

/* The block kernel for rows 0..n-1 of a block (o += p_j v_j for keys [j0, j1)). */
static void pv_block(const ctx *c, int n, float *const *o, const float *v, const float *S,
                     int64_t sj0, int64_t j0, int64_t j1)
{
    switch (n) {
    case 1: pv_rows(1, c, o, v, S, sj0, j0, j1); break;
    case 2: pv_rows(2, c, o, v, S, sj0, j0, j1); break;
    case 3: pv_rows(3, c, o, v, S, sj0, j0, j1); break;
    default: pv_rows(4, c, o, v, S, sj0, j0, j1); break;
    }
}

/* ---- the rest ---------------------------------------------------------------------------- */

static void finish(const ctx *c, const block *b)
{
    const ge_attn_args *a = c->a;
    for (int q = 0; q < b->n; q++) {
        if (b->redo[q])
            continue;
        float *o = a->o + b->i[q] * a->ldo + c->head;
        const __m512 l = _mm512_set1_ps(b->l[q]);
        int e = 0;
        for (; e + 16 <= c->d; e += 16)
            _mm512_storeu_ps(o + e, _mm512_div_ps(_mm512_loadu_ps(o + e), l));
        if (e < c->d)
            _mm512_mask_storeu_ps(o + e, c->tail,
                                  _mm512_div_ps(_mm512_maskz_loadu_ps(c->tail, o + e), l));
    }
}

void ge_attn_avx512(const ge_attn_args *a, int head, int64_t q0, int64_t q1)
{
    if (a->head_dim % 8)
        ge_attn_scalar(a, head, q0, q1);
    else
        tiled(a, head, q0, q1);
}
