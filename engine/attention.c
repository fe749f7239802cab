/* attention.c - one layer's attention over a packed wave: the tier's tiled (flash) kernel,
 * or with --no-flash the row-by-row reference, as (head x query block) tasks. */
#include "model.h"

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

void ge_attention(ge_model *m, const ge_attn_args *a, int64_t n_tok)
{
    ge_attention_with(m, a, n_tok, m->cfg.v[GE_CFG_FLASH]);
}

void ge_attention_with(ge_model *m, const ge_attn_args *a, int64_t n_tok, bool fast)
{
    const ge_kern *k = fast ? m->kern : ge_kern_get(GE_TIER_SCALAR);
    attn_job j = {a, k->attn, n_tok, (n_tok + QUERY_BLOCK - 1) / QUERY_BLOCK};
    double t0 = ge_now();
    ge_parallel(m, (int64_t)a->n_head * j.n_qb, 0, attn_task, &j);
    m->stats.seconds[GE_OP_ATTENTION] += ge_now() - t0;
    m->stats.calls[GE_OP_ATTENTION]++;
    double keys = 0; /* q.k and p.v: 2 * keys * head_dim MACs per query and head */
    for (int64_t i = 0; i < n_tok; i++)
        keys += a->key_hi[i] - a->key_lo[i];
    m->stats.macs[GE_OP_ATTENTION] += 2.0 * keys * a->head_dim * a->n_head;
}
