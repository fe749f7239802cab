/* encoder.c - the text encoder (docs/model.md 3) over packed waves.
 *
 * A wave is several token sequences laid back to back; every token row is computed
 * independently of the others (attention sees only its own sequence, through per-query key
 * bounds), so a record's vector is the same whether it runs alone or packed. The heavy
 * operations go through linear.c and attention.c, whose switches select the fast kernels or
 * the reference paths; with every switch off this is the plain fp32 reference.
 * Shapes: T tokens in the wave, H hidden, L layers, P per-layer width, E output width. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "encoder.h"
#include "linear.h"

/* ---- small blocks ------------------------------------------------------------------------ */

/* RMSNorm and RoPE rows are kernels (kern.h rmsnorm, rope): bit-identical on every tier, the
 * scalar tier being the reference. */

/* cos/sin of pos * base^(-2j/d) for positions < len, computed in double (as the reference). */
static ge_status rope_tables(ge_model *m, int len, ge_err *err)
{
    if (len <= m->rope_len)
        return GE_OK;
    for (int type = 0; type < 2; type++) {
        const ge_layer *l = NULL;
        for (int i = 0; i < m->hp.n_layer && !l; i++)
            if (m->layers[i].sliding == (type == 0))
                l = &m->layers[i];
        free(m->rope_cos[type]);
        free(m->rope_sin[type]);
        m->rope_cos[type] = m->rope_sin[type] = NULL;
        if (!l)
            continue;
        const int half = l->head_dim / 2;
        float *cs = malloc((size_t)len * half * sizeof *cs), *sn = malloc((size_t)len * half * sizeof *sn);
        if (!cs || !sn) {
            free(cs), free(sn);
            m->rope_len = 0;
            return ge_fail(err, GE_E_NOMEM, "out of memory for rope tables");
        }
        for (int j = 0; j < half; j++) {
            double inv_freq = pow((double)l->rope_base, -2.0 * j / l->head_dim);
            for (int p = 0; p < len; p++) {
                double a = p * inv_freq;
                cs[(size_t)p * half + j] = (float)cos(a);
                sn[(size_t)p * half + j] = (float)sin(a);
            }
        }
        m->rope_cos[type] = cs, m->rope_sin[type] = sn;
    }
    m->rope_len = len;
    return GE_OK;
}

/* ---- the wave workspace ----------------------------------------------------------------- */

/* Rows of a layer after its key/value projection depend only on themselves and the keys and
 * values, so each layer runs over the wave in chunks of CHUNK tokens: the wide per-token
 * buffers (queries, attention output, MLP and PLE activations) hold one chunk, and only the
 * residual stream, the normalised input, keys, values and the input embeddings span the
 * wave. A chunk starts at a multiple of 32 tokens, so attention sees the same query blocks
 * (attention.c) as over the whole wave; the numbers do not depend on CHUNK. */
#define CHUNK 256

struct ge_wave_ws {
    /* [T, .] rows of the whole wave */
    float *x;     /* [T, H] residual stream */
    float *a;     /* [T, H] normalised input; a chunk's branch outputs; pooled means */
    float *k, *v; /* [T, kvmax] */
    float *e0;    /* [T, H] the input embeddings (the PLE source) */
    int32_t *pos; /* [T] position within its sequence */
    int32_t *lo[2], *hi[2]; /* [T] visible keys, sliding (0) and full (1) layers */
    /* [CHUNK, .] rows of one chunk */
    float *q, *o; /* [CHUNK, nh*dmax] */
    float *g, *u; /* [CHUNK, max(F, P)] */
    float *ple;   /* [CHUNK, P] this layer's per-layer input */
    float *w;     /* [2, w_len] two norm weights */
    size_t w_len; /* max(H, P, dmax) */
    int cap;      /* tokens the wave rows hold */
    ge_attn_planes *planes; /* a layer's keys for the dense attention kernel (attention.h) */
};

/* Kept by the model between waves and grown to the longest: freeing and re-mapping large
 * blocks for every wave cost about 8% of a run in page faults. */
#define WAVE_FLOAT_ROWS(b) {&b->x, &b->a, &b->k, &b->v, &b->e0}
#define WAVE_INT_ROWS(b) {&b->pos, &b->lo[0], &b->lo[1], &b->hi[0], &b->hi[1]}

static void ws_free_rows(ge_wave_ws *b)
{
    float **f[] = WAVE_FLOAT_ROWS(b);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        free(*f[i]), *f[i] = NULL;
    int32_t **n[] = WAVE_INT_ROWS(b);
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        free(*n[i]), *n[i] = NULL;
    b->cap = 0;
}

void ge_encoder_free(ge_model *m)
{
    for (int i = 0; i < 2; i++) {
        free(m->rope_cos[i]), free(m->rope_sin[i]);
        m->rope_cos[i] = m->rope_sin[i] = NULL;
    }
    ge_wave_ws *b = m->wave_ws;
    if (!b)
        return;
    ws_free_rows(b);
    free(b->q), free(b->o), free(b->g), free(b->u), free(b->ple), free(b->w);
    ge_attn_planes_free(b->planes);
    free(b);
    m->wave_ws = NULL;
}

static int kv_width(const ge_model *m, int *dmax)
{
    int kvmax = 0;
    *dmax = 0;
    for (int i = 0; i < m->hp.n_layer; i++) {
        const ge_layer *l = &m->layers[i];
        *dmax = l->head_dim > *dmax ? l->head_dim : *dmax;
        kvmax = l->n_kv * l->head_dim > kvmax ? l->n_kv * l->head_dim : kvmax;
    }
    return kvmax;
}

/* The model's workspace with wave rows for at least T tokens. Not zeroed: every row is
 * written before it is read. */
static ge_wave_ws *wave_ws(ge_model *m, int T)
{
    const ge_hparams *hp = &m->hp;
    int dmax;
    const size_t kvmax = (size_t)kv_width(m, &dmax), H = (size_t)hp->n_embd;
    ge_wave_ws *b = m->wave_ws;
    if (!b) {
        if (!(b = m->wave_ws = calloc(1, sizeof *b)))
            return NULL;
        size_t qd = (size_t)hp->n_head * dmax, c = CHUNK, P = (size_t)hp->n_ple;
        size_t ff = (size_t)(hp->n_ff > hp->n_ple ? hp->n_ff : hp->n_ple);
        size_t wlen = H > P ? H : P;
        wlen = wlen > (size_t)dmax ? wlen : (size_t)dmax;
        b->q = ge_floats(c * qd), b->o = ge_floats(c * qd);
        b->g = ge_floats(c * ff), b->u = ge_floats(c * ff);
        b->ple = ge_floats(c * P), b->w = ge_floats(2 * wlen), b->w_len = wlen;
        if (!b->q || !b->o || !b->g || !b->u || !b->ple || !b->w) {
            ge_encoder_free(m);
            return NULL;
        }
    }
    if (T <= b->cap)
        return b;
    ws_free_rows(b);
    const size_t t = (size_t)T;
    float **f[] = WAVE_FLOAT_ROWS(b);
    int32_t **n[] = WAVE_INT_ROWS(b);
    bool ok = true;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) /* k and v: [T, kvmax], the rest [T, H] */
        ok = (*f[i] = ge_floats(t * (f[i] == &b->k || f[i] == &b->v ? kvmax : H))) && ok;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        ok = (*n[i] = malloc(t * sizeof(int32_t))) && ok;
    if (!ok) {
        ws_free_rows(b);
        return NULL;
    }
    b->cap = T;
    return b;
}

/* ---- parallel elementwise blocks ---------------------------------------------------------- */

typedef struct {
    const ge_kern *kern;
    float *x;          /* rows of n */
    const float *w;    /* norm weight or NULL */
    int n;
    float eps;
    int64_t rows, per_task;
} norm_job;

static void norm_task(void *ctx, int64_t i, int worker)
{
    const norm_job *j = ctx;
    int64_t r1 = (i + 1) * j->per_task < j->rows ? (i + 1) * j->per_task : j->rows;
    const int64_t r0 = i * j->per_task;
    j->kern->rmsnorm(j->x + r0 * j->n, r1 - r0, j->n, j->w, j->eps);
}

/* RMSNorm (in place) of rows x [rows, n] with weight tensor w (NULL: none). */
static void norm_rows(ge_model *m, float *x, int64_t rows, int n, const ge_tensor *w, float *wbuf)
{
    if (w)
        ge_tensor_row(w, 0, wbuf);
    norm_job j = {m->cx.kern, x, w ? wbuf : NULL, n, m->hp.eps, rows, 0};
    j.per_task = (64 * 512 + n - 1) / n;
    double t0 = ge_now();
    ge_parallel(&m->cx, (rows + j.per_task - 1) / j.per_task, 0, norm_task, &j);
    ge_compute_count(&m->cx, GE_OP_NORM, t0, 0);
}

/* The per-token steps between a layer's matrix products, fused in groups: a task takes its
 * tokens' rows through every step of a group while they sit in L1, one parallel region per
 * group instead of one per step (7 calls per chunk and layer where there were 12 and two
 * serial loops: PERF.md "the per-token steps fused in groups"). Each token row is computed
 * on its own and each step does the arithmetic it did alone, so the result depends neither
 * on the split nor on the fusion. Wave rows
 * (x, a, k, v) are indexed by token, chunk rows (q, g, u, ple) from 0. */
typedef enum {
    RS_PRE_ATTN, /* a = attn_norm(x) */
    RS_KV,       /* k = rope(k_norm(k)), v = v / rms(v) */
    RS_Q,        /* q = rope(q_norm(q)) */
    RS_ATTN_OUT, /* x += post_attn_norm(a), then a = ffn_norm(x) */
    RS_GELU_MUL, /* g = gelu(g) * u over [n, F] */
    RS_MLP_OUT,  /* x += post_ffn_norm(a) */
    RS_PLE_IN,   /* ple = ple_norm(ple / sqrt(H)) */
    RS_GELU_PLE, /* g = gelu(g) * ple over [n, P] */
    RS_PLE_OUT,  /* x = (x + ple_post_norm(a)) * layer_output_scale */
} row_step;

typedef struct {
    ge_model *m;
    row_step step;
    ge_wave_ws *b;
    const ge_layer *l;
    const float *w0, *w1; /* the group's norm weights, in order (NULL: none) */
    int c0, n;
} row_job;

#define ROW_TOKENS 16 /* tokens per task */
#define ROW_SUB 4     /* tokens taken through a group together (rmsnorm's interleave) */

/* x = (x + a) * s and x = x * s, elementwise. The fixed 16-wide inner loops let the compiler
 * vectorise them at -O2 for any target (plain loops stayed scalar there); each element is the
 * same sum and product either way. */
static void add_scale(float *restrict x, const float *restrict a, size_t n, float s)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++)
            x[i + k] = (x[i + k] + a[i + k]) * s;
    for (; i < n; i++)
        x[i] = (x[i] + a[i]) * s;
}

static void scale(float *x, size_t n, float s)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++)
            x[i + k] *= s;
    for (; i < n; i++)
        x[i] *= s;
}

/* the rotary embedding of `rows` tokens' heads at base, tokens t0.. of the wave */
static void rope_rows(const row_job *j, float *base, int heads, size_t t0, size_t rows)
{
    const ge_layer *l = j->l;
    const int d = l->head_dim, half = d / 2, type = l->sliding ? 0 : 1;
    for (size_t i = 0; i < rows; i++) {
        const size_t p = (size_t)j->b->pos[t0 + i] * half;
        j->m->cx.kern->rope(base + i * heads * d, heads, d, j->m->rope_cos[type] + p,
                            j->m->rope_sin[type] + p);
    }
}

/* tokens [t, t + rows) of the wave (chunk row r = t - c0) through the group */
static void row_group(const row_job *j, size_t t, size_t r, size_t rows)
{
    const ge_hparams *hp = &j->m->hp;
    const ge_kern *kern = j->m->cx.kern;
    const size_t H = (size_t)hp->n_embd, F = (size_t)hp->n_ff, P = (size_t)hp->n_ple;
    const float eps = hp->eps;
    ge_wave_ws *b = j->b;
    const ge_layer *l = j->l;
    float *x = b->x + t * H, *a = b->a + t * H;
    switch (j->step) {
    case RS_PRE_ATTN:
        memcpy(a, x, rows * H * sizeof *a);
        kern->rmsnorm(a, (int64_t)rows, (int64_t)H, j->w0, eps);
        break;
    case RS_KV: {
        const size_t d = (size_t)l->head_dim, kv = (size_t)l->n_kv * d;
        kern->rmsnorm(b->k + t * kv, (int64_t)(rows * l->n_kv), (int64_t)d, j->w0, eps);
        kern->rmsnorm(b->v + t * kv, (int64_t)(rows * l->n_kv), (int64_t)d, NULL, eps);
        rope_rows(j, b->k + t * kv, l->n_kv, t, rows);
        break;
    }
    case RS_Q: {
        const size_t d = (size_t)l->head_dim, qd = (size_t)hp->n_head * d;
        kern->rmsnorm(b->q + r * qd, (int64_t)(rows * hp->n_head), (int64_t)d, j->w0, eps);
        rope_rows(j, b->q + r * qd, hp->n_head, t, rows);
        break;
    }
    case RS_ATTN_OUT:
        kern->rmsnorm(a, (int64_t)rows, (int64_t)H, j->w0, eps);
        kern->axpy(x, a, (int64_t)(rows * H), 1.0f);
        memcpy(a, x, rows * H * sizeof *a);
        kern->rmsnorm(a, (int64_t)rows, (int64_t)H, j->w1, eps);
        break;
    case RS_GELU_MUL:
        kern->act_mul(b->g + r * F, b->u + r * F, (int64_t)(rows * F), GE_GELU_TANH, NULL);
        break;
    case RS_MLP_OUT:
        kern->rmsnorm(a, (int64_t)rows, (int64_t)H, j->w0, eps);
        kern->axpy(x, a, (int64_t)(rows * H), 1.0f);
        break;
    case RS_PLE_IN: {
        float *ple = b->ple + r * P;
        scale(ple, rows * P, 1.0f / sqrtf((float)H));
        kern->rmsnorm(ple, (int64_t)rows, (int64_t)P, j->w0, eps);
        break;
    }
    case RS_GELU_PLE:
        kern->act_mul(b->g + r * P, b->ple + r * P, (int64_t)(rows * P), GE_GELU_TANH, NULL);
        break;
    case RS_PLE_OUT:
        kern->rmsnorm(a, (int64_t)rows, (int64_t)H, j->w0, eps);
        add_scale(x, a, rows * H, l->out_scale);
        break;
    }
}

static void row_task(void *ctx, int64_t task, int worker)
{
    const row_job *j = ctx;
    const int r0 = (int)task * ROW_TOKENS, r1 = r0 + ROW_TOKENS < j->n ? r0 + ROW_TOKENS : j->n;
    for (int r = r0; r < r1; r += ROW_SUB) {
        const int rows = r1 - r < ROW_SUB ? r1 - r : ROW_SUB;
        row_group(j, (size_t)(j->c0 + r), (size_t)r, (size_t)rows);
    }
}

/* Tokens [c0, c0 + n) through a group; w0, w1: its norm weights (NULL where it has fewer). */
static void row_steps(ge_model *m, row_step step, ge_wave_ws *b, const ge_layer *l, int c0,
                      int n, const ge_tensor *w0, const ge_tensor *w1)
{
    row_job j = {m, step, b, l, NULL, NULL, c0, n};
    if (w0)
        ge_tensor_row(w0, 0, b->w), j.w0 = b->w;
    if (w1)
        ge_tensor_row(w1, 0, b->w + b->w_len), j.w1 = b->w + b->w_len;
    const double t0 = ge_now();
    ge_parallel(&m->cx, (n + ROW_TOKENS - 1) / ROW_TOKENS, 0, row_task, &j);
    /* the groups with a norm count as "norm" in --bench, the GELU ones as "other" */
    if (step != RS_GELU_MUL && step != RS_GELU_PLE)
        ge_compute_count(&m->cx, GE_OP_NORM, t0, 0);
}

/* ---- one layer ---------------------------------------------------------------------------- */

/* Tokens [c0, c0 + n) of a layer, once the whole wave's keys and values are in b:
 * attention (queries, o_proj, post norm, residual), the MLP and the PLE block. */
static ge_status chunk_forward(ge_model *m, const ge_layer *l, int c0, int n,
                               ge_wave_ws *b, bool planes, ge_err *err)
{
    const ge_hparams *hp = &m->hp;
    const int H = hp->n_embd, nh = hp->n_head, d = l->head_dim, nkv = l->n_kv;
    const int type = l->sliding ? 0 : 1;
    float *x = b->x + (size_t)c0 * H, *a = b->a + (size_t)c0 * H;
    ge_status st;

    /* attention branch: a = o_proj(attn(rope(q_norm(q)), keys, values)), post-normed below */
    ge_linear_out q[] = {{&l->wq, b->q}};
    if ((st = ge_linear_many(&m->cx, a, n, q, 1, err)))
        return st;
    row_steps(m, RS_Q, b, l, c0, n, &l->q_norm, NULL);
    ge_attn_args args = {b->q, b->k, b->v, b->o, (int64_t)nh * d, (int64_t)nkv * d,
                         (int64_t)nh * d, nh, nkv, d, 1.0f, b->lo[type] + c0, b->hi[type] + c0};
    ge_attention(&m->cx, &args, n, planes ? b->planes : NULL);
    ge_linear_out o_proj[] = {{&l->wo, a}};
    if ((st = ge_linear_many(&m->cx, b->o, n, o_proj, 1, err)))
        return st;

    /* residual, then the MLP branch: post_norm(down(gelu(gate(u)) * up(u))), u = pre_norm(x) */
    row_steps(m, RS_ATTN_OUT, b, l, c0, n, &l->post_attn_norm, &l->ffn_norm);
    ge_linear_out gate_up[] = {{&l->w_gate, b->g}, {&l->w_up, b->u}};
    if ((st = ge_linear_many(&m->cx, a, n, gate_up, 2, err)))
        return st;
    row_steps(m, RS_GELU_MUL, b, l, c0, n, NULL, NULL);
    ge_linear_out down[] = {{&l->w_down, a}};
    if ((st = ge_linear_many(&m->cx, b->g, n, down, 1, err)))
        return st;
    row_steps(m, RS_MLP_OUT, b, l, c0, n, &l->post_ffn_norm, NULL);

    /* PLE block: post_norm(proj(gelu(gate(x)) * ple)), ple = norm(e0 W_ple[li]^T / sqrt(H)) */
    ge_linear_out ple_in[] = {{&l->ple_in, b->ple}};
    if ((st = ge_linear_many(&m->cx, b->e0 + (size_t)c0 * H, n, ple_in, 1, err)))
        return st;
    row_steps(m, RS_PLE_IN, b, l, c0, n, &m->ple_norm, NULL);
    ge_linear_out ple_gate[] = {{&l->ple_gate, b->g}};
    if ((st = ge_linear_many(&m->cx, x, n, ple_gate, 1, err)))
        return st;
    row_steps(m, RS_GELU_PLE, b, l, c0, n, NULL, NULL);
    ge_linear_out ple_proj[] = {{&l->ple_proj, a}};
    if ((st = ge_linear_many(&m->cx, b->g, n, ple_proj, 1, err)))
        return st;
    row_steps(m, RS_PLE_OUT, b, l, c0, n, &l->ple_post_norm, NULL);
    return GE_OK;
}

static ge_status layer_forward(ge_model *m, const ge_layer *l, int T, ge_wave_ws *b,
                               ge_err *err)
{
    const int d = l->head_dim, nkv = l->n_kv;
    ge_status st;
    /* the whole wave's keys and values: every chunk's queries read them */
    row_steps(m, RS_PRE_ATTN, b, l, 0, T, &l->attn_norm, NULL);
    ge_linear_out kv[] = {{&l->wk, b->k}, {&l->wv, b->v}};
    if ((st = ge_linear_many(&m->cx, b->a, T, kv, 2, err)))
        return st;
    row_steps(m, RS_KV, b, l, 0, T, &l->k_norm, NULL);
    const int type = l->sliding ? 0 : 1;
    const ge_attn_args keys = {NULL, b->k, b->v, NULL, 0, (int64_t)nkv * d, 0, m->hp.n_head,
                               nkv, d, 1.0f, b->lo[type], b->hi[type]};
    const bool planes = ge_attention_keys(&m->cx, &b->planes, &keys, T);
    for (int c0 = 0; c0 < T && !st; c0 += CHUNK)
        st = chunk_forward(m, l, c0, T - c0 < CHUNK ? T - c0 : CHUNK, b, planes, err);
    return st;
}

/* ---- one wave ----------------------------------------------------------------------------- */

/* One wave: the packed ids, sequence starts [n_seq + 1] (sequence s is ids[start[s] ..
 * start[s+1])), and per token the media row that replaces its embedding (NULL: a text
 * token). out receives n_pool L2-normalised [E] vectors, vector j the mean over the packed
 * tokens [pool[2 j], pool[2 j + 1]) (a whole sequence, or a span of one: late chunking). */
static ge_status forward_wave(ge_model *m, const int32_t *ids, const float *const *media,
                              const int64_t *start, int n_seq, const int64_t *pool, int n_pool,
                              float *out, ge_err *err)
{
    const ge_hparams *hp = &m->hp;
    const int T = (int)start[n_seq], H = hp->n_embd, L = hp->n_layer;
    ge_wave_ws *b = wave_ws(m, T);
    if (!b)
        return ge_fail(err, GE_E_NOMEM, "out of memory for a %d-token wave", T);
    int longest = 0;
    for (int s = 0; s < n_seq; s++) {
        int64_t s0 = start[s], s1 = start[s + 1], r = hp->swa_radius;
        longest = (int)(s1 - s0) > longest ? (int)(s1 - s0) : longest;
        for (int64_t i = s0; i < s1; i++) {
            b->pos[i] = (int32_t)(i - s0);
            b->lo[1][i] = (int32_t)s0, b->hi[1][i] = (int32_t)s1;
            b->lo[0][i] = (int32_t)(i - r > s0 ? i - r : s0);
            b->hi[0][i] = (int32_t)(i + r + 1 < s1 ? i + r + 1 : s1);
        }
    }
    /* on hybrid CPUs a small wave stays on the P-cores (the pool's first workers) */
    const ge_compute *cx = &m->cx;
    const bool pcores = cx->topo.hybrid && cx->cfg.v[GE_CFG_HYBRID] &&
                        T < cx->cfg.v[GE_CFG_HYBRID_TOKENS] && cx->topo.n_pcore > 0 &&
                        cx->topo.n_pcore < cx->max_threads;
    const int prev_cap = ge_compute_limit(&m->cx, pcores ? cx->topo.n_pcore : cx->max_threads);
    ge_status st = rope_tables(m, longest, err);
    if (st)
        goto done;

    /* input embedding: e = token_embd[id] * sqrt(H); media rows as they are */
    const float scale = sqrtf((float)H);
    for (int t = 0; t < T; t++) {
        float *e = b->x + (size_t)t * H;
        if (media[t]) {
            memcpy(e, media[t], (size_t)H * sizeof *e);
            continue;
        }
        ge_tensor_row(&m->tok_embd, ids[t], e);
        for (int i = 0; i < H; i++)
            e[i] *= scale;
    }
    /* projection-only PLE comes from these merged embeddings, one layer's slice at a time */
    memcpy(b->e0, b->x, (size_t)T * H * sizeof(float));

    for (int li = 0; li < L && !st; li++)
        st = layer_forward(m, &m->layers[li], T, b, err);
    if (st)
        goto done;

    /* final norm, mean over each pooled span's tokens, then the (linear) projection, L2: the
     * projection is linear, so a span's mean of projected tokens is this (docs/model.md 2.6) */
    const double t_pool = ge_now();
    norm_rows(m, b->x, T, H, &m->out_norm, b->w);
    float *mean = n_pool <= T ? b->a : malloc((size_t)n_pool * H * sizeof *mean);
    if (!mean) {
        st = ge_fail(err, GE_E_NOMEM, "out of memory for %d pooled spans", n_pool);
        goto done;
    }
    for (int s = 0; s < n_pool; s++) {
        float *ms = mean + (size_t)s * H;
        memset(ms, 0, (size_t)H * sizeof *ms);
        for (int64_t t = pool[2 * s]; t < pool[2 * s + 1]; t++)
            for (int i = 0; i < H; i++)
                ms[i] += b->x[(size_t)t * H + i];
        for (int i = 0; i < H; i++)
            ms[i] /= (float)(pool[2 * s + 1] - pool[2 * s]);
    }
    ge_linear_out proj[] = {{&m->out_proj, out}};
    st = ge_linear_many(&m->cx, mean, n_pool, proj, 1, err);
    if (mean != b->a)
        free(mean);
    if (st)
        goto done;
    for (int s = 0; s < n_pool; s++)
        ge_matryoshka(out + (size_t)s * hp->n_out, hp->n_out);
    m->cx.stats.pool_seconds += ge_now() - t_pool;
done:
    ge_compute_limit(&m->cx, prev_cap);
    return st;
}

/* ---- public entry points (ge.h) ------------------------------------------------------------ */

static ge_status check_ids(const ge_model *m, const int32_t *ids, size_t n, ge_err *err)
{
    if (n == 0)
        return ge_fail(err, GE_E_INPUT, "empty token sequence");
    if (n > (size_t)m->hp.max_tokens)
        return ge_fail(err, GE_E_LIMIT, "%zu tokens exceed the context limit of %d", n,
                       m->hp.max_tokens);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->hp.n_vocab)
            return ge_fail(err, GE_E_INPUT, "token id %d at position %zu is outside the "
                           "vocabulary of %d", ids[i], i, m->hp.n_vocab);
    return GE_OK;
}

ge_status ge_embed(ge_model *m, const int32_t *ids, size_t n, float *out, ge_err *err)
{
    return ge_embed_batch(m, &ids, &n, 1, out, err);
}

ge_status ge_embed_batch(ge_model *m, const int32_t *const *ids, const size_t *lens, size_t n,
                         float *out, ge_err *err)
{
    return ge_embed_batch_media(m, ids, lens, NULL, n, out, err);
}

int ge_model_hidden(const ge_model *m) { return m->hp.n_embd; }

/* The sequence's placeholders must match its media rows one for one. */
static ge_status check_media(const ge_model *m, const int32_t *ids, size_t n,
                             const ge_media_rows *media, ge_err *err)
{
    size_t k = 0;
    for (size_t i = 0; (i += ge_tok_find_placeholder(m->tok, ids + i, n - i, NULL)) < n; i++)
        k++;
    size_t rows = media ? media->n : 0;
    if (k != rows)
        return ge_fail(err, GE_E_INPUT, "%zu media placeholders but %zu media rows", k, rows);
    if (rows && !media->rows)
        return ge_fail(err, GE_E_INPUT, "no media rows given");
    return GE_OK;
}

ge_status ge_embed_batch_media(ge_model *m, const int32_t *const *ids, const size_t *lens,
                               const ge_media_rows *media, size_t n, float *out, ge_err *err)
{
    return ge_embed_spans(m, ids, lens, media, n, NULL, n, out, err);
}

ge_status ge_embed_spans(ge_model *m, const int32_t *const *ids, const size_t *lens,
                         const ge_media_rows *media, size_t n, const ge_span *spans,
                         size_t n_spans, float *out, ge_err *err)
{
    for (size_t j = 0; spans && j < n_spans; j++) {
        const ge_span *p = &spans[j];
        if (p->seq >= n || p->lo >= p->hi || p->hi > lens[p->seq] ||
            (j && p->seq < spans[j - 1].seq))
            return ge_fail(err, GE_E_USAGE, "span %zu (sequence %zu, tokens %zu..%zu) is not "
                           "a non-empty range of a sequence, in sequence order", j, p->seq,
                           p->lo, p->hi);
    }
    for (size_t s = 0; s < n; s++) {
        ge_status st = check_ids(m, ids[s], lens[s], err);
        if (!st)
            st = check_media(m, ids[s], lens[s], media ? &media[s] : NULL, err);
        if (st) {
            ge_err_prefix(err, "sequence %zu", s);
            return st;
        }
    }
    /* waves: consecutive sequences while they fit in wave_tokens; longer ones alone */
    const size_t cap = (size_t)m->cx.cfg.v[GE_CFG_WAVE_TOKENS];
    const double t_start = ge_now();
    const ge_phase_mark mark = ge_phase_begin(&m->cx, GE_PHASE_TEXT); /* from a tower's too */
    int64_t *start = malloc((n + 1) * sizeof *start);
    int64_t *pool = malloc(2 * (spans ? n_spans : n) * sizeof *pool + 1);
    size_t j0 = 0; /* the first span of the wave */
    int32_t *buf = NULL;
    const float **rows = NULL;
    size_t buf_cap = 0;
    ge_status st = start && pool ? GE_OK : ge_fail(err, GE_E_NOMEM, "out of memory");
    for (size_t s0 = 0; s0 < n && !st;) {
        size_t s1 = s0 + 1, total = lens[s0];
        while (s1 < n && total + lens[s1] <= cap)
            total += lens[s1++];
        if (total > buf_cap) {
            int32_t *nb = realloc(buf, total * sizeof *nb);
            const float **nr = nb ? realloc(rows, total * sizeof *nr) : NULL;
            buf = nb ? nb : buf;
            rows = nr ? nr : rows;
            if (!nb || !nr) {
                st = ge_fail(err, GE_E_NOMEM, "out of memory for a %zu-token wave", total);
                break;
            }
            buf_cap = total;
        }
        start[0] = 0;
        for (size_t s = s0; s < s1; s++) {
            int32_t *seq = buf + start[s - s0];
            const float **r = rows + start[s - s0];
            memcpy(seq, ids[s], lens[s] * sizeof *buf);
            size_t next = 0; /* the next media row of this sequence */
            for (size_t i = 0; i < lens[s]; i++) {
                bool ph = ge_tok_find_placeholder(m->tok, seq + i, 1, NULL) == 0;
                r[i] = ph ? media[s].rows + (next++) * (size_t)m->hp.n_embd : NULL;
            }
            start[s - s0 + 1] = start[s - s0] + (int64_t)lens[s];
        }
        size_t j1 = j0; /* the wave's spans: every sequence whole, or those given */
        for (; spans ? j1 < n_spans && spans[j1].seq < s1 : j1 < s1; j1++) {
            const size_t s = spans ? spans[j1].seq : j1;
            pool[2 * (j1 - j0)] = start[s - s0] + (int64_t)(spans ? spans[j1].lo : 0);
            pool[2 * (j1 - j0) + 1] = spans ? start[s - s0] + (int64_t)spans[j1].hi
                                            : start[s - s0 + 1];
        }
        st = forward_wave(m, buf, rows, start, (int)(s1 - s0), pool, (int)(j1 - j0),
                          out + j0 * (size_t)m->hp.n_out, err);
        j0 = j1;
        m->cx.stats.waves++;
        m->cx.stats.sequences += s1 - s0;
        m->cx.stats.tokens += total;
        s0 = s1;
    }
    /* "other": the rest of the forward (embedding gathers, RoPE, GELU, residuals, pooling) */
    const double elapsed = ge_now() - t_start;
    m->cx.stats.forward_seconds += elapsed;
    ge_phase_end(&m->cx, &mark, elapsed);
    free(buf);
    free(rows);
    free(start);
    free(pool);
    return st;
}
