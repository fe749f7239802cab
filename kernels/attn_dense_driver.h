/* attn_dense_driver.h - the dense attention driver shared by the x86 tiers' kernels (attn.h
 * has the numerics, kern.h the layout). Included once by each kernels/attn_dense_<tier>.c
 * after it defines PV_ROWS and the tier's steps:
 *
 *   transpose_q(Qt, q, ldq, nr, d)   Qt[e][r] = dim e of query row r < nr (rows ldq apart),
 *                                    0 for the padding rows r < ROWS;
 *   scores(pl, b, j0)                b's ROWS rows on the K^T panel of keys j0 .. j0 + KEYS:
 *                                    S = scale * q . k, stored at b->S + r * np + j0 - b->p0;
 *   probs(pl, b, r)                  row r's scores over its keys [lo, hi) -> exp(s - m), m
 *                                    their max, lanes counted from lo; returns l, their sum;
 *   pv_group(pl, b, r0, j0, j1)      O[r0 + r] += sum_j p[r0 + r][j] v_j over keys [j0, j1),
 *                                    r < PV_ROWS (padding rows included; never stored);
 *   pv_row(pl, b, r, j0, j1)         the same for one row;
 *   finish_row(o, O, l, d)           o = O / l.
 *
 * The rows of a call go in blocks of up to ROWS neighbours whose ranges differ by at most
 * SLACK at either end, and up to a->blocks of them go together: each K^T panel is scored,
 * and each chunk of a->chunk keys taken, for all of them while it is in L2. Within a block,
 * each group of PV_ROWS rows takes the keys all its rows see in the tier's register tile and
 * the others (the ends of a sliding window) row by row, before and after them, so that every
 * row's sums run over its own keys in increasing order whatever the grouping: a row's bits
 * depend on its q row, its range and the planes only. */
#ifndef GE_ATTN_DENSE_DRIVER_H
#define GE_ATTN_DENSE_DRIVER_H

#include <stdint.h>
#include <string.h>

#include "attn.h"

#define KEYS GE_ATTN_DENSE_KEYS
#define ROWS GE_ATTN_DENSE_ROWS
#define NB GE_ATTN_DENSE_BLOCKS
#define KC 256   /* keys per chunk of the values pass (at most; ge_attn_dense_args.chunk) */
#define SLACK 16 /* spread of the first (and of the last) key within a block */
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const float *kt, *v; /* this head's planes */
    int64_t n, np;
    int d;
    float scale;
    int64_t chunk; /* keys per chunk of the values pass */
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

static void transpose_q(float *Qt, const float *q, int64_t ldq, int nr, int d);
static void scores(const planes *pl, const blk *b, int64_t j0);
static float probs(const planes *pl, const blk *b, int r);
static void pv_group(const planes *pl, const blk *b, int r0, int64_t j0, int64_t j1);
static void pv_row(const planes *pl, const blk *b, int r, int64_t j0, int64_t j1);
static void finish_row(float *o, const float *O, float l, int d);

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }
static inline int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

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
    group G[NB * ((ROWS + PV_ROWS - 1) / PV_ROWS)];
    int ng = 0;
    int64_t cmin = INT64_MAX, cmax = 0;
    for (int k = 0; k < nb; k++) {
        memset(B[k].O, 0, (size_t)ROWS * pl->d * sizeof(float));
        for (int r0 = 0; r0 < B[k].nr; r0 += PV_ROWS) {
            group *g = &G[ng++];
            *g = (group){&B[k], r0, r0 + PV_ROWS < B[k].nr ? r0 + PV_ROWS : B[k].nr, 0, INT64_MAX};
            for (int r = g->r0; r < g->r1; r++)
                g->c0 = max64(g->c0, B[k].lo[r]), g->c1 = min64(g->c1, B[k].hi[r]);
            for (int r = g->r0; r < g->r1; r++) { /* before the common keys, or all */
                const int64_t end = g->c0 < g->c1 ? g->c0 : B[k].hi[r];
                if (B[k].lo[r] < end) /* (an empty call would still pass O through registers) */
                    pv_row(pl, g->b, r, B[k].lo[r], end);
            }
            if (g->c0 < g->c1)
                cmin = min64(cmin, g->c0), cmax = max64(cmax, g->c1);
        }
    }
    const int64_t kc = pl->chunk;
    for (int64_t c0 = cmin; c0 < cmax; c0 += kc) {
        const int64_t c1 = min64(c0 + kc, cmax);
        for (int k = 0; k < ng; k++) {
            const int64_t j0 = max64(c0, G[k].c0), j1 = min64(c1, G[k].c1);
            if (j0 < j1)
                pv_group(pl, G[k].b, G[k].r0, j0, j1);
        }
    }
    for (int k = 0; k < ng; k++) /* after the common keys */
        for (int r = G[k].r0; r < G[k].r1 && G[k].c0 < G[k].c1; r++)
            if (G[k].c1 < G[k].b->hi[r])
                pv_row(pl, G[k].b, r, G[k].c1, G[k].b->hi[r]);
}

/* Query rows [q0, q1) of one head (kern.h attn_dense). */
static void dense(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1, float *scratch)
{
    const int d = a->head_dim;
    const int64_t np = GE_ATTN_DENSE_NP(a->n), g = head / (a->n_head / a->n_kv);
    const planes pl = {a->kt + g * np * d, a->v + g * a->n * d, a->n, np, d, a->scale,
                       a->chunk > 0 && a->chunk < KC ? a->chunk : KC};
    const size_t per_block = (size_t)ROWS * (np + 2 * d);
    blk B[NB];
    for (int64_t i = q0; i < q1;) {
        int nb = 0;
        while (nb < a->blocks && i < q1) {
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
            for (int r = 0; r < B[k].nr; r++)
                finish_row(a->o + (B[k].i0 + r) * a->ldo + (int64_t)head * d, B[k].O + r * d,
                           l[k][r], d);
    }
}

#endif
