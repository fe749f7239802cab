/* attn_dense_avx2.c - dense attention over head-major planes, AVX2 + FMA (attn.h has the
 * numerics, kern.h the layout, attn_dense_driver.h the blocking and the key ranges). Steps:
 *  - scores: 6 rows x half a K^T panel (16 keys, 2 ymm) of fma chains over the head dim, each
 *    step a broadcast of q[r][e] times the panel's row e (12 accumulators, 15 registers);
 *    scaled, stored in the scratch rows;
 *  - probabilities, row by row over the row's own keys: m = their max, p = exp(s - m) 8 keys
 *    at a time counted from the row's first key, l summed in those 8 lanes;
 *  - values: 4 rows x 3 ymm (24 dims) of o accumulators in registers across the keys all 4
 *    rows see (all 16 registers), one load per 8 dims of v and one broadcast of p per row and
 *    key; one row at a time for the others. */
#include <immintrin.h>

#define PV_ROWS 4
#include "attn_dense_driver.h"
#include "exp_avx2.h"

#define QK_ROWS 6

/* all-ones in the first min(left, 8) lanes (left may be <= 0) */
static inline __m256i lanes(int64_t left)
{
    const __m256i k = _mm256_set1_epi32(left >= 8 ? 8 : left <= 0 ? 0 : (int)left);
    return _mm256_cmpgt_epi32(k, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- scores ---------------------------------------------------------------------------- */

/* r[i] = row i of an 8 x 8 tile in, column i out. */
INLINE void transpose8(__m256 r[8])
{
    __m256 t[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
        t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        r[j] = t[j];
}

/* Qt[e][r] = dim e of query row r < nr, 0 for the padding rows: 8 dims of rows 0-7, then of
 * rows 8-11, at a time through register transposes. */
static void transpose_q(float *Qt, const float *q, int64_t ldq, int nr, int d)
{
    for (int e = 0; e < d; e += 8)
        for (int r0 = 0; r0 < ROWS; r0 += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = r0 + i < nr ? _mm256_loadu_ps(q + (r0 + i) * ldq + e) : _mm256_setzero_ps();
            transpose8(r);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                if (ROWS - r0 >= 8)
                    _mm256_storeu_ps(Qt + (e + k) * ROWS + r0, r[k]);
                else
                    _mm_storeu_ps(Qt + (e + k) * ROWS + r0, _mm256_castps256_ps128(r[k]));
            }
        }
}

/* Rows r0 .. r0 + QK_ROWS - 1 of b on keys j0 .. j0 + 16 (the panel's columns from pan). */
static void score_tile(const planes *pl, const blk *b, int r0, const float *pan, int64_t j0)
{
    const int d = pl->d;
    __m256 acc[QK_ROWS][2];
#pragma GCC unroll 6
    for (int r = 0; r < QK_ROWS; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int e = 0; e < d; e++) {
        const __m256 k0 = _mm256_load_ps(pan + e * KEYS), k1 = _mm256_load_ps(pan + e * KEYS + 8);
        const float *qe = b->Qt + e * ROWS + r0;
#pragma GCC unroll 6
        for (int r = 0; r < QK_ROWS; r++) {
            const __m256 qv = _mm256_broadcast_ss(qe + r);
            acc[r][0] = _mm256_fmadd_ps(qv, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(qv, k1, acc[r][1]);
        }
    }
    const __m256 scale = _mm256_set1_ps(pl->scale);
    float *s = b->S + r0 * pl->np + (j0 - b->p0);
#pragma GCC unroll 6
    for (int r = 0; r < QK_ROWS; r++) {
        _mm256_store_ps(s + r * pl->np, _mm256_mul_ps(acc[r][0], scale));
        _mm256_store_ps(s + r * pl->np + 8, _mm256_mul_ps(acc[r][1], scale));
    }
}

static void scores(const planes *pl, const blk *b, int64_t j0)
{
    const float *pan = pl->kt + j0 * pl->d;
    for (int r0 = 0; r0 < b->nr; r0 += QK_ROWS) {
        score_tile(pl, b, r0, pan, j0);
        score_tile(pl, b, r0, pan + 16, j0 + 16);
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* the eight lanes' sum: (x0 + x4) + (x2 + x6) + ... in a fixed order */
static inline float sum8(__m256 x)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

static inline float max8(__m256 x)
{
    __m128 t = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    t = _mm_max_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

/* Row r's scores (its keys [lo, hi)) -> exp(s - m), m their max; returns l = their sum.
 * Whole vectors by plain loads and stores, the last partial one masked (a masked store is
 * slow on AMD cores). */
static float probs(const planes *pl, const blk *b, int r)
{
    float *s = b->S + r * pl->np + (b->lo[r] - b->p0);
    const int64_t len = b->hi[r] - b->lo[r], full = len / 8 * 8;
    const __m256i tail = lanes(len - full);
    __m256 mx = _mm256_set1_ps(-__builtin_inff());
    for (int64_t j = 0; j < full; j += 8)
        mx = _mm256_max_ps(_mm256_loadu_ps(s + j), mx);
    if (full < len)
        mx = _mm256_blendv_ps(mx, _mm256_max_ps(_mm256_maskload_ps(s + full, tail), mx),
                              _mm256_castsi256_ps(tail));
    const __m256 mv = _mm256_set1_ps(max8(mx));
    __m256 l = _mm256_setzero_ps();
    for (int64_t j = 0; j < full; j += 8) {
        const __m256 p = exp8_unclamped(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(s + j, p);
        l = _mm256_add_ps(l, p);
    }
    if (full < len) {
        const __m256 t = _mm256_sub_ps(_mm256_maskload_ps(s + full, tail), mv);
        const __m256 p = _mm256_and_ps(_mm256_castsi256_ps(tail), exp8_unclamped(t));
        _mm256_maskstore_ps(s + full, tail, p);
        l = _mm256_add_ps(l, p);
    }
    return sum8(l);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 8W) += sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS. */
INLINE void pv_chunk(const int W, const planes *pl, const blk *b, int r0, int e, int64_t j0,
                     int64_t j1)
{
    const int d = pl->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * pl->np - b->p0;
    __m256 acc[PV_ROWS][3];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            acc[r][w] = _mm256_loadu_ps(o[r] + 8 * w);
    const float *vj = pl->v + j0 * d + e;
    for (int64_t j = j0; j < j1; j++, vj += d) {
        __m256 vv[3];
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            vv[w] = _mm256_loadu_ps(vj + 8 * w);
#pragma GCC unroll 4
        for (int r = 0; r < PV_ROWS; r++) {
            const __m256 pr = _mm256_broadcast_ss(p[r] + j);
#pragma GCC unroll 3
            for (int w = 0; w < W; w++)
                acc[r][w] = _mm256_fmadd_ps(pr, vv[w], acc[r][w]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            _mm256_storeu_ps(o[r] + 8 * w, acc[r][w]);
}

static void pv_group(const planes *pl, const blk *b, int r0, int64_t j0, int64_t j1)
{
    int e = 0;
    for (; e + 24 <= pl->d; e += 24)
        pv_chunk(3, pl, b, r0, e, j0, j1);
    if (pl->d - e == 16)
        pv_chunk(2, pl, b, r0, e, j0, j1);
    else if (pl->d - e == 8)
        pv_chunk(1, pl, b, r0, e, j0, j1);
}

/* O[r] += sum_j p[r][j] v_j over keys [j0, j1): one row, 32 dims at a time. */
static void pv_row(const planes *pl, const blk *b, int r, int64_t j0, int64_t j1)
{
    const int d = pl->d;
    const float *p = b->S + r * pl->np - b->p0;
    for (int e = 0; e < d; e += 32) {
        const int W = d - e >= 32 ? 4 : (d - e) / 8;
        float *o = b->O + r * d + e;
        __m256 acc[4];
        for (int w = 0; w < W; w++)
            acc[w] = _mm256_loadu_ps(o + 8 * w);
        for (int64_t j = j0; j < j1; j++) {
            const __m256 pr = _mm256_broadcast_ss(p + j);
            for (int w = 0; w < W; w++)
                acc[w] = _mm256_fmadd_ps(pr, _mm256_loadu_ps(pl->v + j * d + e + 8 * w), acc[w]);
        }
        for (int w = 0; w < W; w++)
            _mm256_storeu_ps(o + 8 * w, acc[w]);
    }
}

static void finish_row(float *o, const float *O, float l, int d)
{
    const __m256 lv = _mm256_set1_ps(l);
    for (int e = 0; e < d; e += 8)
        _mm256_storeu_ps(o + e, _mm256_div_ps(_mm256_loadu_ps(O + e), lv));
}

void ge_attn_dense_avx2(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                        float *scratch)
{
    dense(a, head, q0, q1, scratch);
}
