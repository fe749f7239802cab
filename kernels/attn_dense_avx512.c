/* attn_dense_avx512.c - dense attention over head-major planes, AVX-512F (attn.h has the
 * numerics, kern.h the layout), with per-row key ranges (a text wave: each record's keys, a
 * sliding window) or every key (the vision tower). The rows of a call go in blocks of up to
 * GE_ATTN_DENSE_ROWS = 12 neighbours whose ranges differ by at most SLACK at either end, and
 * up to GE_ATTN_DENSE_BLOCKS blocks are taken together, so that each K^T panel and V chunk
 * comes from memory once for all of them and from L2 for the others:
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
#define NB GE_ATTN_DENSE_BLOCKS
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const float *kt, *v; /* this head's planes */
    int64_t n, np;
    int d;
    float scale;
} planes;

typedef struct {
    int64_t i0;          /* its first row */
    int nr;              /* real rows */
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
        const __m512 p =
            _mm512_maskz_mov_ps(in, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + j), mv)));
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

/* A group of up to PV_ROWS rows of a block and the keys [c0, c1) all of its real rows see
 * (c0 >= c1: none). */
typedef struct {
    const blk *b;
    int r0, r1;
    int64_t c0, c1;
} group;

/* O = P V for every row of the blocks, each over its own keys in increasing order: the keys
 * before those all of its group sees, those (chunk by chunk, every group inside a chunk), the
 * keys after them. */
static void values(const planes *pl, const blk *B, int nb)
{
    group G[NB * (ROWS / PV_ROWS)];
    int ng = 0;
    int64_t cmin = INT64_MAX, cmax = 0;
    for (int k = 0; k < nb; k++) {
        memset(B[k].O, 0, (size_t)ROWS * pl->d * sizeof(float));
        for (int r0 = 0; r0 < B[k].nr; r0 += PV_ROWS) {
            group *g = &G[ng++];
            *g = (group){&B[k], r0, r0 + PV_ROWS < B[k].nr ? r0 + PV_ROWS : B[k].nr, 0, INT64_MAX};
            for (int r = g->r0; r < g->r1; r++)
                g->c0 = max64(g->c0, B[k].lo[r]), g->c1 = min64(g->c1, B[k].hi[r]);
            for (int r = g->r0; r < g->r1; r++) /* before the common keys, or all */
                pv_row(pl, g->b, r, B[k].lo[r], g->c0 < g->c1 ? g->c0 : B[k].hi[r]);
            if (g->c0 < g->c1)
                cmin = min64(cmin, g->c0), cmax = max64(cmax, g->c1);
        }
    }
    for (int64_t c0 = cmin; c0 < cmax; c0 += KC) {
        const int64_t c1 = min64(c0 + KC, cmax);
        for (int e = 0; e < pl->d; e += 64)
            for (int k = 0; k < ng; k++) {
                const group *g = &G[k];
                const int64_t j0 = max64(c0, g->c0), j1 = min64(c1, g->c1);
                if (j0 >= j1)
                    continue;
                switch (pl->d - e >= 64 ? 4 : (pl->d - e) / 16) {
                case 1: pv_chunk(1, pl, g->b, g->r0, e, j0, j1); break;
                case 2: pv_chunk(2, pl, g->b, g->r0, e, j0, j1); break;
                case 3: pv_chunk(3, pl, g->b, g->r0, e, j0, j1); break;
                default: pv_chunk(4, pl, g->b, g->r0, e, j0, j1); break;
                }
            }
    }
    for (int k = 0; k < ng; k++) /* after the common keys */
        for (int r = G[k].r0; r < G[k].r1 && G[k].c0 < G[k].c1; r++)
            pv_row(pl, G[k].b, r, G[k].c1, G[k].b->hi[r]);
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
    const planes pl = {a->kt + g * np * d, a->v + g * a->n * d, a->n, np, d, a->scale};
    const size_t per_block = (size_t)ROWS * (np + 2 * d);
    blk B[NB];
    for (int64_t i = q0; i < q1;) {
        int nb = 0;
        while (nb < NB && i < q1) {
            if (key_lo(a, i) >= key_hi(a, i)) { /* no keys: o = 0, or a row skipped */
                if (key_lo(a, i) == key_hi(a, i))
                    memset(a->o + i * a->ldo + (int64_t)head * d, 0, (size_t)d * sizeof(float));
                i++;
                continue;
            }
            blk *b = &B[nb++];
            b->S = scratch + nb * per_block - per_block;
            b->Qt = b->S + ROWS * np, b->O = b->Qt + ROWS * d;
            b->i0 = i, b->nr = block_rows(a, i, q1);
            int64_t lmin = INT64_MAX, hmax = 0;
            for (int r = 0; r < b->nr; r++) {
                b->lo[r] = key_lo(a, i + r), b->hi[r] = key_hi(a, i + r);
                lmin = min64(lmin, b->lo[r]), hmax = max64(hmax, b->hi[r]);
            }
            b->p0 = lmin / KEYS * KEYS, b->p1 = min64(np, (hmax + KEYS - 1) / KEYS * KEYS);
            transpose_q(b->Qt, a->q + i * a->ldq + (int64_t)head * d, a->ldq, b->nr, d);
            i += b->nr;
        }
        int64_t pmin = INT64_MAX, pmax = 0;
        for (int k = 0; k < nb; k++)
            pmin = min64(pmin, B[k].p0), pmax = max64(pmax, B[k].p1);
        for (int64_t j0 = pmin; j0 < pmax; j0 += KEYS) /* each panel once for all blocks */
            for (int k = 0; k < nb; k++)
                if (B[k].p0 <= j0 && j0 < B[k].p1)
                    scores(&pl, &B[k], j0);
        float l[NB][ROWS];
        for (int k = 0; k < nb; k++)
            for (int r = 0; r < B[k].nr; r++)
                l[k][r] = probs(&pl, &B[k], r);
        values(&pl, B, nb);
        for (int k = 0; k < nb; k++)
            for (int r = 0; r < B[k].nr; r++) {
                float *o = a->o + (B[k].i0 + r) * a->ldo + (int64_t)head * d;
                const __m512 lv = _mm512_set1_ps(l[k][r]);
                for (int e = 0; e < d; e += 16)
                    _mm512_storeu_ps(o + e,
                                     _mm512_div_ps(_mm512_load_ps(B[k].O + r * d + e), lv));
            }
    }
}
