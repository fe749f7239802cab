/* attn_tiled.h - the tiled attention driver shared by the x86 tiers (attn.h has the numerics).
 * Included once by each kernels/attn_<tier>.c after it defines the tier's four steps:
 *
 *   scores(c, b, j0, j1, S)  S[(j - j0) * QB + q] = scale * q_q . k_j, j in [j0, j1) rounded
 *                            up to 4 keys (extra keys repeat key j1 - 1, rows past b->n
 *                            repeat row 0: both are discarded);
 *   probs(b, j0, j1, S)      S -> exp(S - m), 0 outside each row's range, l += p key by key,
 *                            redo set for rows with s - m > GE_ATTN_HEADROOM;
 *   pv_block(c, n, o, v, S, sj0, j0, j1)  o[q] += p_j v_j, j in [j0, j1), for rows q < n
 *                            that all see these keys (p_j at S[(j - sj0) * QB + q]);
 *   pv_one(c, o, v, S, sj0, q, j0, j1)    the same for one row q;
 *   finish(c, b)             o /= l for the rows not marked redo.
 *
 * Work unit: a block of up to QB = 4 query rows whose key ranges differ by at most SLACK at
 * either end (the rows of one sequence in a full layer share a range; in a sliding layer
 * neighbours shift by one), so the block shares every key and value load. A task's rows go
 * by chunks of QC: each block first runs its prefix (the keys that fix its rows' m, scored
 * once), then the rest of the keys go tile by tile (KB keys) with every block of the chunk
 * inside the tile loop, so that a K/V tile comes from memory once per chunk and from L2 for
 * the chunk's other blocks. Rows whose scores outgrew the headroom are redone at the end with
 * m = their exact max. o itself is the accumulator (the task owns its rows), so any head dim
 * fits and nothing is allocated. None of this grouping changes a row's value: m is a function
 * of the row's own keys and the sums run key by key in increasing order (attn.h). */
#ifndef GE_ATTN_TILED_H
#define GE_ATTN_TILED_H

#include <stdint.h>
#include <string.h>

#include "attn.h"

#define QB 4    /* queries per block */
#define QC 32   /* queries per chunk */
#define KB 64   /* keys per tile */
#define SLACK 8 /* spread of key_lo (and of key_hi) within a block */
#define SKEYS (GE_ATTN_PREFIX + SLACK + 4)
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const ge_attn_args *a;
    int64_t head;  /* query column offset: head * d */
    int64_t kvoff; /* key/value column offset: kv head * d */
    int d;
    unsigned tail; /* avx512: lanes of the last 16-dim chunk (0xff when d % 16 == 8) */
} ctx;

typedef struct {
    int n;                  /* rows in the block */
    int64_t i[QB];          /* token index of each row */
    int32_t lo[QB], hi[QB]; /* key ranges */
    int32_t lomin, lomax, himin, himax;
    int64_t done;           /* keys below this are accumulated */
    float m[QB], l[QB];     /* softmax reference and running sum */
    int redo[QB];
} block;

static void scores(const ctx *c, const block *b, int64_t j0, int64_t j1, float *S);
static void probs(block *b, int64_t j0, int64_t j1, float *S);
static void pv_block(const ctx *c, int n, float *const *o, const float *v, const float *S,
                     int64_t sj0, int64_t j0, int64_t j1);
static void pv_one(const ctx *c, float *o, const float *v, const float *S, int64_t sj0, int q,
                   int64_t j0, int64_t j1);
static void finish(const ctx *c, const block *b);

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }
static inline int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

/* o += P V for keys [j0, j1) (S holds their probabilities from key j0 on). Every row takes
 * its keys in increasing order and only ever touches keys of its own range: the keys all the
 * block's rows see go through the tier's block kernel, the few at the edges row by row. */
static void values(const ctx *c, const block *b, int64_t j0, int64_t j1, const float *S)
{
    const ge_attn_args *a = c->a;
    float *o[QB];
    for (int q = 0; q < b->n; q++)
        o[q] = a->o + b->i[q] * a->ldo + c->head;
    const float *v = a->v + c->kvoff;
    const int64_t c0 = max64(j0, b->lomax), c1 = min64(j1, b->himin);
    const int64_t e0 = c0 < c1 ? c0 : j1, e1 = c0 < c1 ? c1 : j1; /* common keys [e0, e1) */
    for (int q = 0; q < b->n; q++) /* before them */
        pv_one(c, o[q], v, S, j0, q, max64(j0, b->lo[q]), min64(e0, b->hi[q]));
    if (e0 < e1)
        pv_block(c, b->n, o, v, S, j0, e0, e1);
    for (int q = 0; q < b->n; q++) /* after them */
        pv_one(c, o[q], v, S, j0, q, max64(e1, b->lo[q]), min64(j1, b->hi[q]));
}

/* Keys [j0, j1) of a block whose references are set, tile by tile. */
static void run(const ctx *c, block *b, int64_t j0, int64_t j1)
{
    float S[KB * QB] __attribute__((aligned(64)));
    for (int64_t t = j0; t < j1; t += KB) {
        const int64_t t1 = min64(t + KB, j1);
        scores(c, b, t, t1, S);
        probs(b, t, t1, S);
        values(c, b, t, t1, S);
    }
    b->done = max64(b->done, j1);
}

/* The block's prefix: score it once, fix each row's m from its own first GE_ATTN_PREFIX
 * keys, accumulate it. */
static void prefix(const ctx *c, block *b)
{
    float S[SKEYS * QB] __attribute__((aligned(64)));
    const int64_t j0 = b->lomin, j1 = min64(b->lomax + GE_ATTN_PREFIX, b->himax);
    scores(c, b, j0, j1, S);
    for (int q = 0; q < b->n; q++) {
        const int64_t k1 = min64(b->lo[q] + GE_ATTN_PREFIX, b->hi[q]);
        float m = S[(b->lo[q] - j0) * QB + q];
        for (int64_t j = b->lo[q] + 1; j < k1; j++)
            m = S[(j - j0) * QB + q] > m ? S[(j - j0) * QB + q] : m;
        b->m[q] = m;
    }
    probs(b, j0, j1, S);
    values(c, b, j0, j1, S);
    b->done = j1;
}

/* m = the exact max score of each row of the block. */
static void exact_max(const ctx *c, block *b)
{
    float S[KB * QB] __attribute__((aligned(64)));
    for (int q = 0; q < b->n; q++)
        b->m[q] = -__builtin_inff();
    for (int64_t t = b->lomin; t < b->himax; t += KB) {
        const int64_t t1 = min64(t + KB, b->himax);
        scores(c, b, t, t1, S);
        for (int q = 0; q < b->n; q++)
            for (int64_t j = max64(t, b->lo[q]); j < min64(t1, b->hi[q]); j++)
                b->m[q] = S[(j - t) * QB + q] > b->m[q] ? S[(j - t) * QB + q] : b->m[q];
    }
}

/* Group rows (token indices idx[0..n), non-empty ranges) into blocks, in order. */
static int group(const ge_attn_args *a, const int64_t *idx, int n, block *blocks)
{
    int nb = 0;
    for (int r = 0; r < n; r++) {
        const int64_t i = idx[r];
        const int32_t lo = a->key_lo[i], hi = a->key_hi[i];
        block *b = nb ? &blocks[nb - 1] : NULL;
        if (b && b->n < QB) {
            const int32_t lmin = (int32_t)min64(lo, b->lomin), lmax = (int32_t)max64(lo, b->lomax);
            const int32_t hmin = (int32_t)min64(hi, b->himin), hmax = (int32_t)max64(hi, b->himax);
            if (lmax - lmin <= SLACK && hmax - hmin <= SLACK) {
                b->lomin = lmin, b->lomax = lmax, b->himin = hmin, b->himax = hmax;
                b->i[b->n] = i, b->lo[b->n] = lo, b->hi[b->n] = hi;
                b->n++;
                continue;
            }
        }
        b = &blocks[nb++];
        memset(b, 0, sizeof *b);
        b->n = 1;
        b->i[0] = i, b->lo[0] = lo, b->hi[0] = hi;
        b->lomin = b->lomax = lo, b->himin = b->himax = hi;
    }
    return nb;
}

static void zero_row(const ctx *c, int64_t i)
{
    memset(c->a->o + i * c->a->ldo + c->head, 0, (size_t)c->d * sizeof(float));
}

static void chunk(const ctx *c, int64_t q0, int64_t q1)
{
    const ge_attn_args *a = c->a;
    int64_t idx[QC];
    block blocks[QC];
    int n = 0;
    for (int64_t i = q0; i < q1; i++) {
        zero_row(c, i); /* the accumulator; rows without keys stay 0 */
        if (a->key_lo[i] < a->key_hi[i])
            idx[n++] = i;
    }
    const int nb = group(a, idx, n, blocks);
    int64_t t0 = INT64_MAX, t1 = 0;
    for (int k = 0; k < nb; k++) {
        prefix(c, &blocks[k]);
        t0 = min64(t0, blocks[k].done);
        t1 = max64(t1, blocks[k].himax);
    }
    for (int64_t t = t0; t < t1; t += KB) /* the rest: each K/V tile once for all blocks */
        for (int k = 0; k < nb; k++) {
            block *b = &blocks[k];
            const int64_t j0 = max64(t, b->done), j1 = min64(t + KB, b->himax);
            if (j0 < j1)
                run(c, b, j0, j1);
        }
    int nr = 0;
    for (int k = 0; k < nb; k++) {
        finish(c, &blocks[k]);
        for (int q = 0; q < blocks[k].n; q++)
            if (blocks[k].redo[q])
                idx[nr++] = blocks[k].i[q];
    }
    /* rows whose scores outgrew the headroom: again from zero with m = their exact max */
    const int nbr = group(a, idx, nr, blocks);
    for (int k = 0; k < nbr; k++) {
        block *b = &blocks[k];
        for (int q = 0; q < b->n; q++)
            zero_row(c, b->i[q]);
        exact_max(c, b);
        run(c, b, b->lomin, b->himax);
        memset(b->redo, 0, sizeof b->redo);
        finish(c, b);
    }
}

/* Query rows [q0, q1) of one head. */
static void tiled(const ge_attn_args *a, int head, int64_t q0, int64_t q1)
{
    const int d = a->head_dim;
    const ctx c = {a, (int64_t)head * d, (int64_t)(head / (a->n_head / a->n_kv)) * d, d,
                   d % 16 ? 0x00ffu : 0xffffu};
    for (int64_t i = q0; i < q1; i += QC)
        chunk(&c, i, min64(i + QC, q1));
}

#endif
