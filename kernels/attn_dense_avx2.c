/* attn_dense_avx2.c - dense attention over head-major planes, AVX2 + FMA (attn.h has the
 * numerics, kern.h the layout). Per block of GE_ATTN_DENSE_ROWS = 12 query rows:
 *  - scores: 6 rows x half a K^T panel (16 keys, 2 ymm) of fma chains over the head dim, each
 *    step a broadcast of q[r][e] times the panel's row e (12 accumulators, 15 registers);
 *    scaled, stored in the scratch rows and folded into each row's running max;
 *  - probabilities: p = exp(s - max) 8 keys at a time, l summed in 8 lanes;
 *  - values: 4 rows x 3 ymm (24 dims) of o accumulators in registers across a chunk of KC
 *    keys (all 16 registers), one load per 8 dims of v and one broadcast of p per row and
 *    key; the chunk's v rows come from L1/L2 for the block's other rows and dims.
 * The rows of a partial block past q1 are padding (zero q, never stored). */
#include <immintrin.h>
#include <string.h>

#include "attn.h"
#include "exp_avx2.h"

#define KEYS GE_ATTN_DENSE_KEYS
#define ROWS GE_ATTN_DENSE_ROWS
#define QK_ROWS 6
#define PV_ROWS 4
#define KC 256 /* keys per chunk of the values pass */
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const float *kt, *v; /* this head's planes */
    int64_t n, np;
    int d, nr;           /* head dim; real rows in the block */
    float scale;
    float *S;            /* [ROWS][np]: scores, then probabilities */
    float *Qt;           /* [d][ROWS]: the block's q rows, transposed */
    float *O;            /* [ROWS][d]: output accumulators */
} blk;

/* all-ones in the lanes j + lane < n */
static inline __m256 lanes(int64_t j, int64_t n)
{
    const int64_t left = n - j;
    const __m256i k = _mm256_set1_epi32(left >= 8 ? 8 : left <= 0 ? 0 : (int)left);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* ---- scores ---------------------------------------------------------------------------- */

/* S[r0 + r][j0 .. j0 + 16) for r < QK_ROWS; mx[8 (r0 + r) ..] folds them in (max per lane;
 * in memory, so that it takes no registers from the accumulators). */
static void score_tile(const blk *b, int r0, const float *pan, int64_t j0, float *mx)
{
    const int d = b->d;
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
    const __m256 scale = _mm256_set1_ps(b->scale);
    const __m256 m0 = lanes(j0, b->n), m1 = lanes(j0 + 8, b->n);
#pragma GCC unroll 6
    for (int r = 0; r < QK_ROWS; r++) {
        const __m256 s0 = _mm256_mul_ps(acc[r][0], scale), s1 = _mm256_mul_ps(acc[r][1], scale);
        _mm256_store_ps(b->S + (r0 + r) * b->np + j0, s0);
        _mm256_store_ps(b->S + (r0 + r) * b->np + j0 + 8, s1);
        __m256 m = _mm256_load_ps(mx + 8 * (r0 + r));
        m = _mm256_blendv_ps(m, _mm256_max_ps(s0, m), m0);
        _mm256_store_ps(mx + 8 * (r0 + r), _mm256_blendv_ps(m, _mm256_max_ps(s1, m), m1));
    }
}

__attribute__((noinline)) static void scores(const blk *b, float *mx)
{
    for (int64_t j0 = 0; j0 < b->np; j0 += KEYS) {
        const float *pan = b->kt + j0 * b->d;
        for (int r0 = 0; r0 < b->nr; r0 += QK_ROWS) {
            score_tile(b, r0, pan, j0, mx);
            score_tile(b, r0, pan + 16, j0 + 16, mx);
        }
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

/* Row r of S (keys [0, n)) -> exp(s - m); returns l = their sum. */
static float probs(const blk *b, int r, float m)
{
    float *s = b->S + r * b->np;
    const __m256 mv = _mm256_set1_ps(m);
    __m256 l = _mm256_setzero_ps();
    for (int64_t j = 0; j < b->n; j += 8) {
        const __m256 p = _mm256_and_ps(lanes(j, b->n),
                                       exp8(_mm256_sub_ps(_mm256_load_ps(s + j), mv)));
        _mm256_store_ps(s + j, p);
        l = _mm256_add_ps(l, p);
    }
    return sum8(l);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 8W) (+)= sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS; from
 * zero when j0 == 0. */
INLINE void pv_chunk(const int W, const blk *b, int r0, int e, int64_t j0, int64_t j1)
{
    const int d = b->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * b->np;
    __m256 acc[PV_ROWS][3];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 3
        for (int w = 0; w < W; w++)
            acc[r][w] = j0 ? _mm256_loadu_ps(o[r] + 8 * w) : _mm256_setzero_ps();
    const float *vj = b->v + j0 * d + e;
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

static void values(const blk *b)
{
    for (int64_t j0 = 0; j0 < b->n; j0 += KC) {
        const int64_t j1 = j0 + KC < b->n ? j0 + KC : b->n;
        for (int r0 = 0; r0 < b->nr; r0 += PV_ROWS) {
            int e = 0;
            for (; e + 24 <= b->d; e += 24)
                pv_chunk(3, b, r0, e, j0, j1);
            if (b->d - e == 16)
                pv_chunk(2, b, r0, e, j0, j1);
            else if (b->d - e == 8)
                pv_chunk(1, b, r0, e, j0, j1);
        }
    }
}

/* ---- driver ---------------------------------------------------------------------------- */

void ge_attn_dense_avx2(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                        float *scratch)
{
    const int d = a->head_dim;
    const int64_t np = GE_ATTN_DENSE_NP(a->n), g = head / (a->n_head / a->n_kv);
    blk b = {a->kt + g * np * d, a->v + g * a->n * d, a->n, np, d, 0, a->scale,
             scratch, scratch + ROWS * np, scratch + ROWS * (np + d)};
    for (int64_t i0 = q0; i0 < q1; i0 += ROWS) {
        b.nr = q1 - i0 < ROWS ? (int)(q1 - i0) : ROWS;
        for (int e = 0; e < d; e++)
            for (int r = 0; r < ROWS; r++)
                b.Qt[e * ROWS + r] = r < b.nr ? a->q[(i0 + r) * a->ldq + (int64_t)head * d + e]
                                              : 0.0f;
        float mx[ROWS * 8] __attribute__((aligned(32)));
        for (int r = 0; r < ROWS * 8; r++)
            mx[r] = -__builtin_inff();
        scores(&b, mx);
        float l[ROWS];
        for (int r = 0; r < b.nr; r++)
            l[r] = probs(&b, r, max8(_mm256_load_ps(mx + 8 * r)));
        values(&b);
        for (int r = 0; r < b.nr; r++) {
            float *o = a->o + (i0 + r) * a->ldo + (int64_t)head * d;
            const __m256 lv = _mm256_set1_ps(l[r]);
            for (int e = 0; e < d; e += 8)
                _mm256_storeu_ps(o + e, _mm256_div_ps(_mm256_loadu_ps(b.O + r * d + e), lv));
        }
    }
}
