/* attention.c - one layer's attention over a packed wave: the tier's tiled (flash) kernel,
 * or with --no-flash the row-by-row reference, as (head x query block) tasks; and dense
 * attention through the tier's kernel over head-major K^T / V planes, repacked here one KV
 * head at a time: the vision tower (every query sees every key) on every tier with a dense
 * kernel, and the text wave (per-row key ranges) on the tiers whose kernel takes ranges. */
#include <stdlib.h>
#include <string.h>

#include "attention.h"

#define QUERY_BLOCK 32

typedef struct {
    const ge_attn_args *a;
    void (*attn)(const ge_attn_args *, int, int64_t, int64_t);
    int64_t n_tok, n_qb;
} attn_job;

static void attn_task(void *ctx, int64_t task, int worker)
{
    const attn_job *j = ctx;
    int h = (int)(task / j->n_qb);
    int64_t q0 = (task % j->n_qb) * QUERY_BLOCK, q1 = q0 + QUERY_BLOCK;
    j->attn(j->a, h, q0, q1 < j->n_tok ? q1 : j->n_tok);
}


/* q.k and p.v MACs of a layer: 2 * keys * head_dim per query row and head. */
static double attention_macs(const ge_attn_args *a, int64_t n_tok)
{
    double keys = 0;
    for (int64_t i = 0; i < n_tok; i++)
        keys += a->key_hi[i] > a->key_lo[i] ? a->key_hi[i] - a->key_lo[i] : 0;
    return 2.0 * keys * a->head_dim * a->n_head;
}

void ge_attention_with(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast)
{
    const ge_kern *k = fast ? cx->kern : ge_kern_get(GE_TIER_SCALAR);
    attn_job j = {a, k->attn, n_tok, (n_tok + QUERY_BLOCK - 1) / QUERY_BLOCK};
    double t0 = ge_now();
    ge_parallel(cx, (int64_t)a->n_head * j.n_qb, 0, attn_task, &j);
    ge_compute_count(cx, GE_OP_ATTENTION, t0, attention_macs(a, n_tok));
}

/* ---- dense attention over head-major planes -------------------------------------------- */

#define DENSE_PANELS 4 /* K^T panels per repack task */


struct ge_attn_planes {
    float *buf;          /* kt, v, then the workers' scratch */
    size_t cap;          /* floats in buf */
    int32_t *ranges;     /* [4][rows]: the ranges ge_attention gives each kernel */
    size_t ranges_cap;   /* rows */
    float *kt, *v;       /* KV heads [g0, g0 + n_g) of n keys (kern.h ge_attn_dense_args) */
    float *scratch;      /* [threads][scratch_len] */
    size_t scratch_len;
    int64_t n;
    int g0, n_g;
    int blocks;          /* per dense task (dense_blocks), the scratch's room */
};

void ge_attn_planes_free(ge_attn_planes *P)
{
    if (P)
        free(P->buf), free(P->ranges), free(P);
}

/* Round a float count up to whole 64-byte lines. */
static size_t lines(size_t floats) { return (floats + 15) & ~(size_t)15; }

/* Blocks one dense task keeps at once over a's first n rows. Wide heads go several blocks to
 * a task, which share each K^T panel and V chunk while it is in L2: 4, and 16 when the K and
 * V a row sees fill half the last-level cache or more (a full layer over a long text: 4,096
 * keys of 512 wide on a 32 MB L3, 1,024 on a Zen 1's 8 MB), where each block more saves a
 * pass over them from L3 or memory (PERF.md "Dense attention: blocks per task", "... by the
 * cache sizes"). Narrow heads (the vision tower's 64) go one block to a task: their planes
 * stay in L2 anyway, and smaller tasks balance better. */
static int dense_blocks(const ge_compute *cx, const ge_attn_args *a, int64_t n)
{
    if (a->head_dim < 256)
        return 1;
    int64_t widest = 0;
    for (int64_t i = 0; i < n; i++)
        widest = a->key_hi[i] - a->key_lo[i] > widest ? a->key_hi[i] - a->key_lo[i] : widest;
    const size_t llc = cx->topo.llc_bytes ? cx->topo.llc_bytes : (size_t)32 << 20;
    const size_t kv = (size_t)widest * a->head_dim * 2 * sizeof(float);
    return kv >= llc / 2 ? GE_ATTN_DENSE_BLOCKS : 4;
}

/* Keys per chunk of the dense kernel's values pass: a chunk of V at most half the L2, so that
 * it stays there while every block of the task takes it (128 keys at 512 wide on a Zen 1's
 * 512 KB, 256 on a 1 MB L2; PERF.md "... by the cache sizes"). */
static int dense_chunk(const ge_compute *cx, int head_dim)
{
    const size_t l2 = cx->topo.l2_bytes ? cx->topo.l2_bytes : (size_t)1 << 20;
    const size_t keys = l2 / 2 / ((size_t)head_dim * sizeof(float));
    return keys >= 256 ? 256 : keys < 32 ? 32 : (int)keys;
}

/* Room in P for n_g KV heads of a's first n keys and the workers' scratch (grown, never
 * shrunk: a text run repacks every layer). */
static bool planes_reserve(ge_compute *cx, ge_attn_planes *P, const ge_attn_args *a, int64_t n,
                           int n_g)
{
    const int d = a->head_dim, blocks = dense_blocks(cx, a, n);
    const size_t kt = (size_t)n_g * GE_ATTN_DENSE_NP(n) * d, v = lines((size_t)n_g * n * d);
    const size_t sl = lines(GE_ATTN_DENSE_SCRATCH(n, d, blocks)), need = kt + v + cx->threads * sl;
    if (need > P->cap) {
        free(P->buf);
        P->cap = 0;
        if (!(P->buf = ge_floats(need)))
            return false;
        P->cap = need;
    }
    P->kt = P->buf, P->v = P->buf + kt, P->scratch = P->buf + kt + v, P->scratch_len = sl;
    P->n = n, P->n_g = n_g, P->blocks = blocks;
    return true;
}

typedef struct {
    const ge_attn_args *a;
    const ge_attn_planes *P;
    ge_attn_dense_args d; /* the query heads over the planes */
    void (*attn)(const ge_attn_dense_args *, int, int64_t, int64_t, float *);
    int64_t n_q, rows, n_qb;  /* query rows; rows per task; tasks per head */
    int64_t pack_tasks;       /* repack tasks per KV head */
} dense_job;

/* Keys [t0, t1) of one KV head into its planes: K^T panels (zero past n), V rows. */
static void repack_task(void *ctx, int64_t task, int worker)
{
    const dense_job *j = ctx;
    const ge_attn_args *a = j->a;
    const ge_attn_planes *P = j->P;
    const int d = a->head_dim, gp = (int)(task / j->pack_tasks), g = P->g0 + gp;
    const int64_t n = P->n, np = GE_ATTN_DENSE_NP(n), K = GE_ATTN_DENSE_KEYS;
    const int64_t t0 = task % j->pack_tasks * DENSE_PANELS * K;
    const int64_t t1 = t0 + DENSE_PANELS * K < np ? t0 + DENSE_PANELS * K : np;
    float *kth = P->kt + gp * np * d, *vh = P->v + gp * n * d;
    for (int64_t t = t0; t < t1; t++) {
        float *kt = kth + t / K * K * d + t % K; /* panel t / K, column t % K */
        if (t >= n) {
            for (int e = 0; e < d; e++)
                kt[e * K] = 0.0f;
            continue;
        }
        const float *k = a->k + t * a->ldkv + (int64_t)g * d;
        const float *v = a->v + t * a->ldkv + (int64_t)g * d;
        float *vp = vh + t * d;
        /* token-major rows are ldkv apart: fetch a few ahead of the misses */
        for (int e = 0; e < d && t + 8 < n; e += 16)
            __builtin_prefetch(k + 8 * a->ldkv + e), __builtin_prefetch(v + 8 * a->ldkv + e);
        for (int e = 0; e < d; e++)
            kt[e * K] = k[e], vp[e] = v[e];
    }
}

/* KV heads [g0, g0 + n_g) of a's first n keys into P. */
static bool planes_pack(ge_compute *cx, ge_attn_planes *P, const ge_attn_args *a, int64_t n,
                        int g0, int n_g)
{
    if (!planes_reserve(cx, P, a, n, n_g))
        return false;
    P->g0 = g0;
    dense_job j = {a, P, {0}, NULL, 0, 0, 0,
                   (GE_ATTN_DENSE_NP(n) / GE_ATTN_DENSE_KEYS + DENSE_PANELS - 1) / DENSE_PANELS};
    ge_parallel(cx, n_g * j.pack_tasks, 0, repack_task, &j);
    return true;
}

static void dense_task(void *ctx, int64_t task, int worker)
{
    const dense_job *j = ctx;
    const int h = (int)(task / j->n_qb);
    const int64_t q0 = (task % j->n_qb) * j->rows, q1 = q0 + j->rows;
    j->attn(&j->d, h, q0, q1 < j->n_q ? q1 : j->n_q,
            j->P->scratch + (size_t)worker * j->P->scratch_len);
}

/* The query heads of P's KV heads, rows [0, n_tok), through the tier's dense kernel, in tasks
 * of P->blocks blocks. */
static void planes_run(ge_compute *cx, const ge_attn_args *a, int64_t n_tok,
                       const ge_attn_planes *P, bool ranges)
{
    const int d = a->head_dim, group = a->n_head / a->n_kv;
    const int64_t off = (int64_t)P->g0 * group * d; /* the first query head's columns */
    const int64_t rows = (int64_t)GE_ATTN_DENSE_ROWS * P->blocks;
    dense_job j = {a, P,
                   {a->q + off, P->kt, P->v, a->o + off, a->ldq, a->ldo, P->n, group * P->n_g,
                    P->n_g, d, a->scale, ranges ? a->key_lo : NULL, ranges ? a->key_hi : NULL,
                    P->blocks, dense_chunk(cx, d)},
                   cx->kern->attn_dense, n_tok, rows, (n_tok + rows - 1) / rows, 0};
    ge_parallel(cx, (int64_t)group * P->n_g * j.n_qb, 0, dense_task, &j);
}

/* The dense kernel runs for this head dim (and, with ranges, takes them). */
static bool dense_ok(const ge_compute *cx, const ge_attn_args *a, bool fast, bool ranges)
{
    const ge_kern *k = cx->kern;
    return fast && k->attn_dense && (!ranges || k->attn_dense_ranges) && a->head_dim % 16 == 0;
}

void ge_attention_dense(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast)
{
    const bool ranges = cx->kern->attn_dense_ranges;
    bool dense = dense_ok(cx, a, fast, false) && n_tok > 0;
    for (int64_t i = 0; dense && !ranges && i < n_tok; i++)
        dense = a->key_lo[i] == 0 && a->key_hi[i] == n_tok;
    ge_attn_planes P = {0};
    if (!dense || !planes_reserve(cx, &P, a, n_tok, 1)) {
        /* no dense kernel for this tier or head dim, or no memory for the planes */
        ge_attention_with(cx, a, n_tok, fast);
        return;
    }
    const double t0 = ge_now();
    /* one KV head's planes at a time: 1 / n_kv of the memory, and they stay in L3 */
    for (int g = 0; g < a->n_kv; g++) {
        planes_pack(cx, &P, a, n_tok, g, 1);
        planes_run(cx, a, n_tok, &P, ranges);
    }
    free(P.buf);
    ge_compute_count(cx, GE_OP_ATTENTION, t0, attention_macs(a, n_tok));
}

static bool dense_row(const ge_attn_args *a, int64_t i)
{
    return a->key_hi[i] - a->key_lo[i] >= GE_ATTN_DENSE_MIN_KEYS;
}

bool ge_attention_keys(ge_compute *cx, ge_attn_planes **P, const ge_attn_args *a,
                       int64_t n_keys)
{
    if (!dense_ok(cx, a, cx->cfg.v[GE_CFG_FLASH], true) || n_keys <= 0)
        return false;
    bool any = false; /* rows that will read the planes */
    for (int64_t i = 0; i < n_keys && !any; i++)
        any = dense_row(a, i);
    if (!any || (!*P && !(*P = calloc(1, sizeof **P))))
        return false;
    const double t0 = ge_now();
    const bool ok = planes_pack(cx, *P, a, n_keys, 0, a->n_kv);
    ge_compute_count(cx, GE_OP_ATTENTION, t0, 0);
    return ok;
}

void ge_attention(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, ge_attn_planes *P)
{
    if (P && (size_t)n_tok > P->ranges_cap) {
        free(P->ranges);
        P->ranges_cap = 0;
        if ((P->ranges = malloc((size_t)n_tok * 4 * sizeof(int32_t))))
            P->ranges_cap = (size_t)n_tok;
    }
    if (!P || !P->ranges) {
        ge_attention_with(cx, a, n_tok, cx->cfg.v[GE_CFG_FLASH]);
        return;
    }
    /* short rows to the tiled kernel (the others empty there: it zeroes them), then long
     * ones to the dense kernel (the others skipped there: key_lo > key_hi) */
    int32_t *tlo = P->ranges, *thi = tlo + n_tok, *dlo = thi + n_tok, *dhi = dlo + n_tok;
    int64_t n_dense = 0;
    for (int64_t i = 0; i < n_tok; i++) {
        const bool dense = dense_row(a, i);
        n_dense += dense;
        tlo[i] = a->key_lo[i], thi[i] = dense ? a->key_lo[i] : a->key_hi[i];
        dlo[i] = dense ? a->key_lo[i] : 1, dhi[i] = dense ? a->key_hi[i] : 0;
    }
    if (n_dense < n_tok) {
        ge_attn_args t = *a;
        t.key_lo = tlo, t.key_hi = thi;
        ge_attention_with(cx, &t, n_tok, true);
    }
    if (n_dense) {
        ge_attn_args d = *a;
        d.key_lo = dlo, d.key_hi = dhi;
        const double t0 = ge_now();
        planes_run(cx, &d, n_tok, P, true);
        ge_compute_count(cx, GE_OP_ATTENTION, t0, attention_macs(&d, n_tok));
    }
}
