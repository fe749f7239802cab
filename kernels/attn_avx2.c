/* attn_avx2.c - tiled attention, AVX2 + FMA (attn.h has the numerics, attn_tiled.h the
 * blocking). The tier's steps:
 *  - scores: 4 queries x 2 keys of ymm fma chains over the head dim (14 of the 16 registers),
 *    folded by one 8 -> 1 reduction network straight into [key][query] order;
 *  - probabilities: 8 at a time (2 keys x 4 queries), range masks by integer compares;
 *  - values: 4 queries x 3 ymm (24 dims; 2 or 1 for the rest) of o accumulators in
 *    registers across the tile's keys, one broadcast of p per query and key (all 16
 *    registers); the few keys outside some row's range (at the block's edges) go row by row.
 * Head dims must be a multiple of 8 (others go to the scalar kernel). */
#include <immintrin.h>

#include "attn_tiled.h"
#include "exp_avx2.h"

/* ---- exp (exp_avx2.h) ------------------------------------------------------------ */

void ge_attn_exp_avx2(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float in[8] = {0}, out[8];
        memcpy(in, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(out, exp8(_mm256_loadu_ps(in)));
        memcpy(y + i, out, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- scores ---------------------------------------------------------------------------- */

/* Fold 8 vectors into one holding their lane sums; every input goes through the same tree
 * ((x[l] + x[l+4]) + (x[l+2] + x[l+6])) + ..., and x[2q + t] lands in lane 4t + q. The
 * halves pair up by 128-bit inserts and extracts (vperm2f128 is 8 uops on Zen 1). */
INLINE __m256 reduce8(const __m256 *x)
{
    __m256 y[4], z[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const __m256 a = x[2 * i], b = x[2 * i + 1];
        y[i] = _mm256_add_ps(_mm256_insertf128_ps(a, _mm256_castps256_ps128(b), 1),
                             _mm256_insertf128_ps(b, _mm256_extractf128_ps(a, 1), 0));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        z[i] = _mm256_add_ps(_mm256_shuffle_ps(y[2 * i], y[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(y[2 * i], y[2 * i + 1], 0xee));
    return _mm256_add_ps(_mm256_shuffle_ps(z[0], z[1], 0x88), _mm256_shuffle_ps(z[0], z[1], 0xdd));
}

static void scores(const ctx *c, const block *b, int64_t j0, int64_t j1, float *S)
{
    const ge_attn_args *a = c->a;
    const int d = c->d;
    const float *qp[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++)
        qp[q] = a->q + b->i[q < b->n ? q : 0] * a->ldq + c->head;
    const __m256 scale = _mm256_set1_ps(a->scale);
    const int64_t jend = j0 + ((j1 - j0 + 3) & ~(int64_t)3); /* whole groups of 4 keys */
    for (int64_t jj = j0; jj < jend; jj += 2) {
        const float *k0 = a->k + (jj < j1 ? jj : j1 - 1) * a->ldkv + c->kvoff;
        const float *k1 = a->k + (jj + 1 < j1 ? jj + 1 : j1 - 1) * a->ldkv + c->kvoff;
        __m256 acc[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            acc[i] = _mm256_setzero_ps();
        for (int e = 0; e < d; e += 8) {
            const __m256 kv0 = _mm256_loadu_ps(k0 + e), kv1 = _mm256_loadu_ps(k1 + e);
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++) {
                __m256 qv = _mm256_loadu_ps(qp[q] + e);
                __asm__("" : "+x"(qv)); /* one load feeding two fmas, not two folded loads */
                acc[2 * q] = _mm256_fmadd_ps(qv, kv0, acc[2 * q]);
                acc[2 * q + 1] = _mm256_fmadd_ps(qv, kv1, acc[2 * q + 1]);
            }
        }
        _mm256_storeu_ps(S + (jj - j0) * QB, _mm256_mul_ps(reduce8(acc), scale));
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

static void probs(block *b, int64_t j0, int64_t j1, float *S)
{
    int32_t lo1[QB], hi[QB];
    float m[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++) { /* padding rows: j > 0 && j < 0, never */
        lo1[q] = q < b->n ? b->lo[q] - 1 : 0;
        hi[q] = q < b->n ? (int32_t)min64(b->hi[q], j1) : 0;
        m[q] = q < b->n ? b->m[q] : 0.0f;
    }
    const __m256 mv = _mm256_set_m128(_mm_loadu_ps(m), _mm_loadu_ps(m));
    const __m256i lov = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo1));
    const __m256i hiv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi));
    __m256i jv = _mm256_add_epi32(_mm256_set1_epi32((int32_t)j0),
                                  _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0));
    const __m256 room = _mm256_set1_ps(GE_ATTN_HEADROOM);
    __m128 l = _mm_loadu_ps(b->l);
    int over = 0;
    for (int64_t jj = j0; jj < j1; jj += 2) {
        float *s = S + (jj - j0) * QB;
        const __m256 in = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_cmpgt_epi32(jv, lov), _mm256_cmpgt_epi32(hiv, jv)));
        const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(s), mv);
        over |= _mm256_movemask_ps(_mm256_and_ps(in, _mm256_cmp_ps(t, room, _CMP_GT_OQ)));
        const __m256 p = _mm256_and_ps(in, exp8(t));
        _mm256_storeu_ps(s, p);
        l = _mm_add_ps(l, _mm256_castps256_ps128(p));
        l = _mm_add_ps(l, _mm256_extractf128_ps(p, 1));
        jv = _mm256_add_epi32(jv, _mm256_set1_epi32(2));
    }
    _mm_storeu_ps(b->l, l);
    for (int q = 0; q < b->n; q++)
        b->redo[q] |= (over & (0x11 << q)) != 0;
}

/* ---- values ---------------------------------------------------------------------------- */

/* o[q][e .. e + 8W) += sum_j S[j][q] v_j for keys [j0, j1) that every row sees. */
INLINE void pv_chunk(const int NQ, const int W, float *const *o, const float *v, int64_t ldv,
                     const float *S, int64_t sj0, int64_t j0, int64_t j1, int e)
{
    __m256 acc[QB][3];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            acc[q][w] = _mm256_loadu_ps(o[q] + e + 8 * w);
    for (int64_t j = j0; j < j1; j++) {
        const float *vj = v + j * ldv + e, *p = S + (j - sj0) * QB;
        __m256 vv[3];
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            vv[w] = _mm256_loadu_ps(vj + 8 * w);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; q++) {
            const __m256 pq = _mm256_broadcast_ss(p + q);
#pragma GCC unroll 3
            for (int w = 0; w < W; w++)
                acc[q][w] = _mm256_fmadd_ps(pq, vv[w], acc[q][w]);
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            _mm256_storeu_ps(o[q] + e + 8 * w, acc[q][w]);
}

INLINE void pv_rows(const int NQ, const ctx *c, float *const *o, const float *v,
                    const float *S, int64_t sj0, int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    int e = 0;
    for (; e + 24 <= c->d; e += 24)
        pv_chunk(NQ, 3, o, v, ldv, S, sj0, j0, j1, e);
    if (c->d - e == 16)
        pv_chunk(NQ, 2, o, v, ldv, S, sj0, j0, j1, e);
    else if (c->d - e == 8)
        pv_chunk(NQ, 1, o, v, ldv, S, sj0, j0, j1, e);
}

/* One row, keys [j0, j1) of its range. */
static void pv_one(const ctx *c, float *o, const float *v, const float *S, int64_t sj0, int q,
                   int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    for (int64_t j = j0; j < j1; j++) {
        const __m256 p = _mm256_broadcast_ss(S + (j - sj0) * QB + q);
        const float *vj = v + j * ldv;
        for (int e = 0; e < c->d; e += 8)
            _mm256_storeu_ps(o + e, _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + e),
                                                    _mm256_loadu_ps(o + e)));
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

/* ---- the rest -------------------------------------------------------------------------- */

static void finish(const ctx *c, const block *b)
{
    const ge_attn_args *a = c->a;
    for (int q = 0; q < b->n; q++) {
        if (b->redo[q])
            continue;
        float *o = a->o + b->i[q] * a->ldo + c->head;
        const __m256 l = _mm256_set1_ps(b->l[q]);
        for (int e = 0; e < c->d; e += 8)
            _mm256_storeu_ps(o + e, _mm256_div_ps(_mm256_loadu_ps(o + e), l));
    }
}

void ge_attn_avx2(const ge_attn_args *a, int head, int64_t q0, int64_t q1)
{
    if (a->head_dim % 8)
        ge_attn_scalar(a, head, q0, q1);
    else
        tiled(a, head, q0, q1);
}
