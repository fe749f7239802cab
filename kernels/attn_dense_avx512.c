/* attn_dense_avx512.c - dense attention over head-major planes, AVX-512F (attn.h has the
 * numerics, kern.h the layout, attn_dense_driver.h the blocking and the key ranges). Steps:
 *  - scores: 12 rows x one K^T panel (32 keys, 2 zmm) of fma chains over the head dim, each
 *    step a broadcast of q[r][e] times the panel's row e (24 accumulators); scaled, stored
 *    in the scratch rows;
 *  - probabilities, row by row over the row's own keys: m = their max, p = exp(s - m) 16
 *    keys at a time counted from the row's first key, l summed in those 16 lanes;
 *  - values: 6 rows x 4 zmm (64 dims) of o accumulators in registers across the keys all 6
 *    rows see, one load per 16 dims of v and one broadcast of p per row and key; one row at
 *    a time (4 zmm) for the others. */
#include <immintrin.h>

#define PV_ROWS 6
#include "attn_dense_driver.h"
#include "exp_avx512.h"

static inline __mmask16 lanes(int64_t left) /* the first min(left, 16) lanes (left may be <= 0) */
{
    return left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

/* ---- scores ---------------------------------------------------------------------------- */

/* r[i] = row i of a 16 x 16 tile in, column i out. */
INLINE void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        const int a = i / 4 * 8 + i % 4;
        t[a] = _mm512_shuffle_f32x4(r[a], r[a + 4], 0x88);
        t[a + 4] = _mm512_shuffle_f32x4(r[a], r[a + 4], 0xdd);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
}

/* Qt[e][r] = dim e of query row r < nr (rows ldq apart), 0 for the padding rows: 16 dims at
 * a time through a register transpose (copying them one by one took ~15% of a short record's
 * attention). */
static void transpose_q(float *Qt, const float *q, int64_t ldq, int nr, int d)
{
    for (int e = 0; e < d; e += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < nr ? _mm512_loadu_ps(q + i * ldq + e) : _mm512_setzero_ps();
        transpose16(r);
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++)
            _mm512_mask_storeu_ps(Qt + (e + k) * ROWS, (1u << ROWS) - 1, r[k]);
    }
}

/* Block b's scores on the panel of keys j0 .. j0 + KEYS - 1: scale * Q K^T. */
static void scores(const planes *pl, const blk *b, int64_t j0)
{
    const int d = pl->d;
    const __m512 scale = _mm512_set1_ps(pl->scale);
    const float *pan = pl->kt + j0 * d;
    __m512 acc[ROWS][2];
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int e = 0; e < d; e++) {
        const __m512 k0 = _mm512_load_ps(pan + e * KEYS);
        const __m512 k1 = _mm512_load_ps(pan + e * KEYS + 16);
        const float *qe = b->Qt + e * ROWS;
#pragma GCC unroll 12
        for (int r = 0; r < ROWS; r++) {
            const __m512 qv = _mm512_set1_ps(qe[r]);
            acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
        }
    }
    float *s = b->S + (j0 - b->p0);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; r++) {
        _mm512_store_ps(s + r * pl->np, _mm512_mul_ps(acc[r][0], scale));
        _mm512_store_ps(s + r * pl->np + 16, _mm512_mul_ps(acc[r][1], scale));
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* Row r's scores (its keys [lo, hi)) -> exp(s - m), m their max; returns l = their sum. */
static float probs(const planes *pl, const blk *b, int r)
{
    float *s = b->S + r * pl->np + (b->lo[r] - b->p0);
    const int64_t len = b->hi[r] - b->lo[r];
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int64_t j = 0; j < len; j += 16) {
        const __mmask16 in = lanes(len - j);
        mx = _mm512_mask_max_ps(mx, in, _mm512_maskz_loadu_ps(in, s + j), mx);
    }
    const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 l = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        const __mmask16 in = lanes(len - j);
        const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + j), mv);
        const __m512 p = _mm512_maskz_mov_ps(in, exp16_unclamped(t));
        _mm512_mask_storeu_ps(s + j, in, p);
        l = _mm512_add_ps(l, p);
    }
    return _mm512_reduce_add_ps(l);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 16W) += sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS. */
INLINE void pv_chunk(const int W, const planes *pl, const blk *b, int r0, int e, int64_t j0,
                     int64_t j1)
{
    const int d = pl->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * pl->np - b->p0;
    __m512 acc[PV_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            acc[r][w] = _mm512_load_ps(o[r] + 16 * w);
    const float *vj = pl->v + j0 * d + e;
    for (int64_t j = j0; j < j1; j++, vj += d) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            vv[w] = _mm512_loadu_ps(vj + 16 * w);
#pragma GCC unroll 6
        for (int r = 0; r < PV_ROWS; r++) {
            const __m512 pr = _mm512_set1_ps(p[r][j]);
#pragma GCC unroll 4
            for (int w = 0; w < W; w++)
                acc[r][w] = _mm512_fmadd_ps(pr, vv[w], acc[r][w]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            _mm512_store_ps(o[r] + 16 * w, acc[r][w]);
}

/* O[r] += sum_j p[r][j] v_j over keys [j0, j1): one row (the keys the others do not see). */
static void pv_row(const planes *pl, const blk *b, int r, int64_t j0, int64_t j1)
{
    const int d = pl->d;
    const float *p = b->S + r * pl->np - b->p0;
    for (int e = 0; e < d; e += 64) {
        const int W = d - e >= 64 ? 4 : (d - e) / 16;
        float *o = b->O + r * d + e;
        __m512 acc[4];
        for (int w = 0; w < W; w++)
            acc[w] = _mm512_load_ps(o + 16 * w);
        for (int64_t j = j0; j < j1; j++) {
            const __m512 pr = _mm512_set1_ps(p[j]);
            for (int w = 0; w < W; w++)
                acc[w] = _mm512_fmadd_ps(pr, _mm512_loadu_ps(pl->v + j * d + e + 16 * w), acc[w]);
        }
        for (int w = 0; w < W; w++)
            _mm512_store_ps(o + 16 * w, acc[w]);
    }
}

/* O[r0 + r] += sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS, 64 dims at a time. */
static void pv_group(const planes *pl, const blk *b, int r0, int64_t j0, int64_t j1)
{
    for (int e = 0; e < pl->d; e += 64)
        switch (pl->d - e >= 64 ? 4 : (pl->d - e) / 16) {
        case 1: pv_chunk(1, pl, b, r0, e, j0, j1); break;
        case 2: pv_chunk(2, pl, b, r0, e, j0, j1); break;
        case 3: pv_chunk(3, pl, b, r0, e, j0, j1); break;
        default: pv_chunk(4, pl, b, r0, e, j0, j1); break;
        }
}

static void finish_row(float *o, const float *O, float l, int d)
{
    const __m512 lv = _mm512_set1_ps(l);
    for (int e = 0; e < d; e += 16)
        _mm512_storeu_ps(o + e, _mm512_div_ps(_mm512_load_ps(O + e), lv));
}

void ge_attn_dense_avx512(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                          float *scratch)
{
    dense(a, head, q0, q1, scratch);
}
