/* attention.c - one layer's attention over a packed wave: the tier's tiled (flash) kernel,
 * or with --no-flash the row-by-row reference, as (head x query block) tasks; and dense
 * attention (every query sees every key: the vision tower) through the tier's kernel over
 * head-major K^T / V planes, repacked here one KV head at a time. */
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

void ge_attention(ge_compute *cx, const ge_attn_args *a, int64_t n_tok)
{
    ge_attention_with(cx, a, n_tok, cx->cfg.v[GE_CFG_FLASH]);
}

void ge_attention_with(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast)
{
    const ge_kern *k = fast ? cx->kern : ge_kern_get(GE_TIER_SCALAR);
    attn_job j = {a, k->attn, n_tok, (n_tok + QUERY_BLOCK - 1) / QUERY_BLOCK};
    double t0 = ge_now();
    ge_parallel(cx, (int64_t)a->n_head * j.n_qb, 0, attn_task, &j);
    double keys = 0; /* q.k and p.v: 2 * keys * head_dim MACs per query and head */
    for (int64_t i = 0; i < n_tok; i++)
        keys += a->key_hi[i] - a->key_lo[i];
    ge_compute_count(cx, GE_OP_ATTENTION, t0, 2.0 * keys * a->head_dim * a->n_head);
}

/* ---- dense attention over head-major planes (the vision tower) ------------------------- */

#define DENSE_PANELS 4 /* K^T panels per repack task */

typedef struct {
    const ge_attn_args *a;
    int g;                /* the KV head being repacked */
    float *kt, *v;        /* its planes */
    ge_attn_dense_args d; /* its query heads, over the planes */
    float *scratch;       /* [threads][scratch_len] */
    size_t scratch_len;
    void (*attn)(const ge_attn_dense_args *, int, int64_t, int64_t, float *);
    int64_t n_qb;
} dense_job;

/* Keys [t0, t1) of KV head g into its planes: K^T panels (zero past n), V rows. */
static void repack_task(void *ctx, int64_t task, int worker)
{
    const dense_job *j = ctx;
    const ge_attn_args *a = j->a;
    const int d = a->head_dim;
    const int64_t n = j->d.n, np = GE_ATTN_DENSE_NP(n), K = GE_ATTN_DENSE_KEYS;
    const int64_t t0 = task * DENSE_PANELS * K;
    const int64_t t1 = t0 + DENSE_PANELS * K < np ? t0 + DENSE_PANELS * K : np;
    for (int64_t t = t0; t < t1; t++) {
        float *kt = j->kt + t / K * K * d + t % K; /* panel t / K, column t % K */
        if (t >= n) {
            for (int e = 0; e < d; e++)
                kt[e * K] = 0.0f;
            continue;
        }
        const float *k = a->k + t * a->ldkv + (int64_t)j->g * d;
        const float *v = a->v + t * a->ldkv + (int64_t)j->g * d;
        float *vp = j->v + t * d;
        /* token-major rows are ldkv apart: fetch a few ahead of the misses */
        for (int e = 0; e < d && t + 8 < n; e += 16)
            __builtin_prefetch(k + 8 * a->ldkv + e), __builtin_prefetch(v + 8 * a->ldkv + e);
        for (int e = 0; e < d; e++)
            kt[e * K] = k[e], vp[e] = v[e];
    }
}

static void dense_task(void *ctx, int64_t task, int worker)
{
    const dense_job *j = ctx;
    const int h = (int)(task / j->n_qb);
    const int64_t q0 = (task % j->n_qb) * GE_ATTN_DENSE_ROWS, q1 = q0 + GE_ATTN_DENSE_ROWS;
    j->attn(&j->d, h, q0, q1 < j->d.n ? q1 : j->d.n, j->scratch + (size_t)worker * j->scratch_len);
}

/* Round a float count up to whole 64-byte lines. */
static size_t lines(size_t floats) { return (floats + 15) & ~(size_t)15; }

void ge_attention_dense(ge_compute *cx, const ge_attn_args *a, int64_t n_tok, bool fast)
{
    const ge_kern *k = cx->kern;
    const int d = a->head_dim, group = a->n_head / a->n_kv;
    bool dense = fast && k->attn_dense && d % 16 == 0 && n_tok > 0;
    for (int64_t i = 0; dense && i < n_tok; i++)
        dense = a->key_lo[i] == 0 && a->key_hi[i] == n_tok;
    /* one KV head's planes at a time: 1 / n_kv of the memory, and they stay in L3 */
    const size_t kt_len = lines((size_t)GE_ATTN_DENSE_NP(n_tok) * d);
    const size_t v_len = lines((size_t)n_tok * d);
    const size_t scratch_len = lines(GE_ATTN_DENSE_SCRATCH(n_tok, d));
    float *buf = dense ? aligned_alloc(64, (kt_len + v_len + (size_t)cx->threads * scratch_len) *
                                               sizeof(float))
                       : NULL;
    if (!buf) { /* no dense kernel for this tier or head dim, or no memory for the planes */
        ge_attention_with(cx, a, n_tok, fast);
        return;
    }
    const double t0 = ge_now();
    dense_job j = {a, 0, buf, buf + kt_len, {0}, buf + kt_len + v_len, scratch_len, k->attn_dense,
                   (n_tok + GE_ATTN_DENSE_ROWS - 1) / GE_ATTN_DENSE_ROWS};
    for (int g = 0; g < a->n_kv; g++) {
        /* KV head g and its query heads g * group .. (g + 1) * group - 1, as heads 0 .. of a
         * problem with one KV head */
        const int64_t off = (int64_t)g * group * d;
        j.g = g;
        j.d = (ge_attn_dense_args){a->q + off, j.kt, j.v, a->o + off, a->ldq, a->ldo, n_tok, group,
                                   1, d, a->scale};
        ge_parallel(cx, (GE_ATTN_DENSE_NP(n_tok) / GE_ATTN_DENSE_KEYS + DENSE_PANELS - 1) /
                           DENSE_PANELS, 0, repack_task, &j);
        ge_parallel(cx, (int64_t)group * j.n_qb, 0, dense_task, &j);
    }
    free(buf);
    ge_compute_count(cx, GE_OP_ATTENTION, t0,
                     2.0 * (double)n_tok * (double)n_tok * d * a->n_head);
}
