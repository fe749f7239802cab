/* attn_dense_avx512.c - dense attention over head-major planes, AVX-512F (attn.h has the
 * numerics, kern.h the layout), with per-row key ranges (a text wave: each record's keys, a
 * sliding window) or every key (the vision tower). The rows of a call go in blocks of up to
 * GE_ATTN_DENSE_ROWS = 12 neighbours whose ranges differ by at most SLACK at either end:
 *  - scores: 12 rows x one K^T panel (32 keys, 2 zmm) of fma chains over the head dim, each
 *    step a broadcast of q[r][e] times the panel's row e (24 accumulators), over the panels
 *    that hold the block's keys; scaled and stored in the scratch rows;
 *  - probabilities, row by row over the row's own keys: m = their max, p = exp(s - m) 16
 *    keys at a time counted from the row's first key, l summed in those 16 lanes;
 *  - values: 6 rows x 4 zmm (64 dims) of o accumulators in registers across a chunk of KC
 *    keys that all 6 rows see, one load per 16 dims of v and one broadcast of p per row and
 *    key; the keys only some rows see (the ends of a sliding window) go row by row before
 *    and after them, so every row's sums run over its own keys in increasing order.
 * The rows of a partial block are padding (zero q, never stored). */
#include <immintrin.h>
#include <string.h>

#include "attn.h"
#include "exp_avx512.h"

#define KEYS GE_ATTN_DENSE_KEYS
#define ROWS GE_ATTN_DENSE_ROWS
#define PV_ROWS 6
#define KC 256  /* keys per chunk of the values pass */
#define SLACK 16 /* spread of the first (and of the last) key within a block */
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const float *kt, *v; /* this head's planes */
    int64_t n, np;
    int d, nr;           /* head dim; real rows in the block */
    float scale;
    float *S;            /* [ROWS][np]: scores, then probabilities, of keys p0 + j */
    float *Qt;           /* [d][ROWS]: the block's q rows, transposed */
    float *O;            /* [ROWS][d]: output accumulators */
    int64_t p0, p1;      /* the panels that hold the block's keys: [p0, p1), whole panels */
    int64_t lo[ROWS], hi[ROWS]; /* each row's keys */
} blk;

static inline __mmask16 lanes(int64_t left) /* the first min(left, 16) lanes (left may be <= 0) */
{
    return left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }
static inline int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

/* ---- scores ---------------------------------------------------------------------------- */

/* S = scale * Q K^T over the panels [p0, p1). */
static void scores(const blk *b)
{
    const int d = b->d;
    const __m512 scale = _mm512_set1_ps(b->scale);
    for (int64_t j0 = b->p0; j0 < b->p1; j0 += KEYS) {
        const float *pan = b->kt + j0 * d;
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
            _mm512_store_ps(s + r * b->np, _mm512_mul_ps(acc[r][0], scale));
            _mm512_store_ps(s + r * b->np + 16, _mm512_mul_ps(acc[r][1], scale));
        }
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* Row r's scores (its keys [lo, hi)) -> exp(s - m), m their max; returns l = their sum. */
static float probs(const blk *b, int r)
{
    float *s = b->S + r * b->np + (b->lo[r] - b->p0);
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
        const __m512 p =
            _mm512_maskz_mov_ps(in, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + j), mv)));
        _mm512_mask_storeu_ps(s + j, in, p);
        l = _mm512_add_ps(l, p);
    }
    return _mm512_reduce_add_ps(l);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 16W) += sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS. */
INLINE void pv_chunk(const int W, const blk *b, int r0, int e, int64_t j0, int64_t j1)
{
    const int d = b->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * b->np - b->p0;
    __m512 acc[PV_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            acc[r][w] = _mm512_load_ps(o[r] + 16 * w);
    const float *vj = b->v + j0 * d + e;
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
static void pv_row(const blk *b, int r, int64_t j0, int64_t j1)
{
    const int d = b->d;
    const float *p = b->S + r * b->np - b->p0;
    for (int e = 0; e < d; e += 64) {
        const int W = d - e >= 64 ? 4 : (d - e) / 16;
        float *o = b->O + r * d + e;
        __m512 acc[4];
        for (int w = 0; w < W; w++)
            acc[w] = _mm512_load_ps(o + 16 * w);
        for (int64_t j = j0; j < j1; j++) {
            const __m512 pr = _mm512_set1_ps(p[j]);
            for (int w = 0; w < W; w++)
                acc[w] = _mm512_fmadd_ps(pr, _mm512_loadu_ps(b->v + j * d + e + 16 * w), acc[w]);
        }
        for (int w = 0; w < W; w++)
            _mm512_store_ps(o + 16 * w, acc[w]);
    }
}

/* Keys [j0, j1), which rows r0 .. r0 + PV_ROWS - 1 all see, chunk by chunk. */
static void pv_common(const blk *b, int r0, int64_t j0, int64_t j1)
{
    for (int64_t c0 = j0; c0 < j1; c0 += KC) {
        const int64_t c1 = min64(c0 + KC, j1);
        for (int e = 0; e < b->d; e += 64)
            switch (b->d - e >= 64 ? 4 : (b->d - e) / 16) {
            case 1: pv_chunk(1, b, r0, e, c0, c1); break;
            case 2: pv_chunk(2, b, r0, e, c0, c1); break;
            case 3: pv_chunk(3, b, r0, e, c0, c1); break;
            default: pv_chunk(4, b, r0, e, c0, c1); break;
            }
    }
}

/* O = P V, each row over its own keys in increasing order: the keys before those all of its
 * group of PV_ROWS see, those, the keys after them. */
static void values(const blk *b)
{
    memset(b->O, 0, (size_t)ROWS * b->d * sizeof(float));
    for (int r0 = 0; r0 < b->nr; r0 += PV_ROWS) {
        const int r1 = r0 + PV_ROWS < b->nr ? r0 + PV_ROWS : b->nr;
        int64_t c0 = 0, c1 = INT64_MAX; /* the keys all real rows of the group see */
        for (int r = r0; r < r1; r++)
            c0 = max64(c0, b->lo[r]), c1 = min64(c1, b->hi[r]);
        if (c0 >= c1) { /* no common keys: row by row */
            for (int r = r0; r < r1; r++)
                pv_row(b, r, b->lo[r], b->hi[r]);
            continue;
        }
        for (int r = r0; r < r1; r++)
            pv_row(b, r, b->lo[r], c0);
        pv_common(b, r0, c0, c1);
        for (int r = r0; r < r1; r++)
            pv_row(b, r, c1, b->hi[r]);
    }
}

/* ---- driver ---------------------------------------------------------------------------- */

static int64_t key_lo(const ge_attn_dense_args *a, int64_t i) { return a->key_lo ? a->key_lo[i] : 0; }
static int64_t key_hi(const ge_attn_dense_args *a, int64_t i) { return a->key_hi ? a->key_hi[i] : a->n; }

/* Rows i0 .. of [i0, q1) that join row i0's block: non-empty ranges within SLACK of each
 * other, at most ROWS. */
static int block_rows(const ge_attn_dense_args *a, int64_t i0, int64_t q1)
{
    int64_t lmin = key_lo(a, i0), lmax = lmin, hmin = key_hi(a, i0), hmax = hmin;
    int nr = 1;
    for (int64_t i = i0 + 1; i < q1 && nr < ROWS; i++, nr++) {
        const int64_t lo = key_lo(a, i), hi = key_hi(a, i);
        if (lo >= hi || max64(lmax, lo) - min64(lmin, lo) > SLACK ||
            max64(hmax, hi) - min64(hmin, hi) > SLACK)
            break;
        lmin = min64(lmin, lo), lmax = max64(lmax, lo), hmin = min64(hmin, hi), hmax = max64(hmax, hi);
    }
    return nr;
}

void ge_attn_dense_avx512(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                          float *scratch)
{
    const int d = a->head_dim;
    const int64_t np = GE_ATTN_DENSE_NP(a->n), g = head / (a->n_head / a->n_kv);
    blk b = {a->kt + g * np * d, a->v + g * a->n * d, a->n, np, d, 0, a->scale,
             scratch, scratch + ROWS * np, scratch + ROWS * (np + d), 0, 0, {0}, {0}};
    for (int64_t i0 = q0; i0 < q1; i0 += b.nr) {
        float *o0 = a->o + i0 * a->ldo + (int64_t)head * d;
        if (key_lo(a, i0) >= key_hi(a, i0)) { /* no keys: o = 0 */
            memset(o0, 0, (size_t)d * sizeof(float));
            b.nr = 1;
            continue;
        }
        b.nr = block_rows(a, i0, q1);
        int64_t lmin = INT64_MAX, hmax = 0;
        for (int r = 0; r < b.nr; r++) {
            b.lo[r] = key_lo(a, i0 + r), b.hi[r] = key_hi(a, i0 + r);
            lmin = min64(lmin, b.lo[r]), hmax = max64(hmax, b.hi[r]);
        }
        b.p0 = lmin / KEYS * KEYS, b.p1 = min64(np, (hmax + KEYS - 1) / KEYS * KEYS);
        for (int e = 0; e < d; e++)
            for (int r = 0; r < ROWS; r++)
                b.Qt[e * ROWS + r] = r < b.nr ? a->q[(i0 + r) * a->ldq + (int64_t)head * d + e]
                                              : 0.0f;
        scores(&b);
        float l[ROWS];
        for (int r = 0; r < b.nr; r++)
            l[r] = probs(&b, r);
        values(&b);
        for (int r = 0; r < b.nr; r++) {
            float *o = a->o + (i0 + r) * a->ldo + (int64_t)head * d;
            const __m512 lv = _mm512_set1_ps(l[r]);
            for (int e = 0; e < d; e += 16)
                _mm512_storeu_ps(o + e, _mm512_div_ps(_mm512_load_ps(b.O + r * d + e), lv));
        }
    }
}
