/* attn_dense_avx512.c - dense attention over head-major planes, AVX-512F (attn.h has the
 * numerics, kern.h the layout). Per block of GE_ATTN_DENSE_ROWS = 12 query rows:
 *  - scores: 12 rows x one K^T panel (32 keys, 2 zmm) of fma chains over the head dim, each
 *    step a broadcast of q[r][e] times the panel's row e (24 accumulators); scaled, stored
 *    in the scratch rows and folded into each row's running max;
 *  - probabilities: p = exp(s - max) 16 keys at a time, l summed in 16 lanes;
 *  - values: 6 rows x 4 zmm (64 dims) of o accumulators in registers across a chunk of KC
 *    keys, one load per 16 dims of v and one broadcast of p per row and key; the chunk's v
 *    rows come from L2 for the block's second 6 rows.
 * The rows of a partial block past q1 are padding (zero q, never stored). */
#include <immintrin.h>
#include <string.h>

#include "attn.h"
#include "exp_avx512.h"

#define KEYS GE_ATTN_DENSE_KEYS
#define ROWS GE_ATTN_DENSE_ROWS
#define PV_ROWS 6
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

static inline __mmask16 lanes(int64_t left) /* the first min(left, 16) lanes (left may be <= 0) */
{
    return left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

/* ---- scores ---------------------------------------------------------------------------- */

/* S = scale * Q K^T over all panels; mx[16 r ..] = the max of row r's scores per lane. mx
 * stays in memory (noinline): held in registers it would push accumulators onto the stack. */
__attribute__((noinline)) static void scores(const blk *b, float *mx)
{
    const int d = b->d;
    const __m512 scale = _mm512_set1_ps(b->scale);
    for (int64_t j0 = 0; j0 < b->np; j0 += KEYS) {
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
        const __mmask16 m0 = lanes(b->n - j0), m1 = lanes(b->n - j0 - 16);
#pragma GCC unroll 12
        for (int r = 0; r < ROWS; r++) {
            const __m512 s0 = _mm512_mul_ps(acc[r][0], scale);
            const __m512 s1 = _mm512_mul_ps(acc[r][1], scale);
            _mm512_store_ps(b->S + r * b->np + j0, s0);
            _mm512_store_ps(b->S + r * b->np + j0 + 16, s1);
            __m512 m = _mm512_load_ps(mx + 16 * r);
            m = _mm512_mask_max_ps(m, m0, s0, m);
            _mm512_store_ps(mx + 16 * r, _mm512_mask_max_ps(m, m1, s1, m));
        }
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* Row r of S (keys [0, n)) -> exp(s - m); returns l = their sum. */
static float probs(const blk *b, int r, float m)
{
    float *s = b->S + r * b->np;
    const __m512 mv = _mm512_set1_ps(m);
    __m512 l = _mm512_setzero_ps();
    for (int64_t j = 0; j < b->n; j += 16) {
        const __mmask16 in = lanes(b->n - j);
        const __m512 p = _mm512_maskz_mov_ps(in, exp16(_mm512_sub_ps(_mm512_load_ps(s + j), mv)));
        _mm512_store_ps(s + j, p);
        l = _mm512_add_ps(l, p);
    }
    return _mm512_reduce_add_ps(l);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 16W) (+)= sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS;
 * from zero when j0 == 0. */
INLINE void pv_chunk(const int W, const blk *b, int r0, int e, int64_t j0, int64_t j1)
{
    const int d = b->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * b->np;
    __m512 acc[PV_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < W; w++)
            acc[r][w] = j0 ? _mm512_load_ps(o[r] + 16 * w) : _mm512_setzero_ps();
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

static void values(const blk *b)
{
    for (int64_t j0 = 0; j0 < b->n; j0 += KC) {
        const int64_t j1 = j0 + KC < b->n ? j0 + KC : b->n;
        for (int r0 = 0; r0 < b->nr; r0 += PV_ROWS)
            for (int e = 0; e < b->d; e += 64)
                switch (b->d - e >= 64 ? 4 : (b->d - e) / 16) {
                case 1: pv_chunk(1, b, r0, e, j0, j1); break;
                case 2: pv_chunk(2, b, r0, e, j0, j1); break;
                case 3: pv_chunk(3, b, r0, e, j0, j1); break;
                default: pv_chunk(4, b, r0, e, j0, j1); break;
                }
    }
}

/* ---- driver ---------------------------------------------------------------------------- */

void ge_attn_dense_avx512(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
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
        float mx[ROWS * 16] __attribute__((aligned(64)));
        for (int r = 0; r < ROWS * 16; r++)
            mx[r] = -__builtin_inff();
        scores(&b, mx);
        float l[ROWS];
        for (int r = 0; r < b.nr; r++)
            l[r] = probs(&b, r, _mm512_reduce_max_ps(_mm512_load_ps(mx + 16 * r)));
        values(&b);
        for (int r = 0; r < b.nr; r++) {
            float *o = a->o + (i0 + r) * a->ldo + (int64_t)head * d;
            const __m512 lv = _mm512_set1_ps(l[r]);
            for (int e = 0; e < d; e += 16)
                _mm512_storeu_ps(o + e, _mm512_div_ps(_mm512_load_ps(b.O + r * d + e), lv));
        }
    }
}
