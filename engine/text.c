/* text.c - the text encoder's reference path (SPEC.md 3): fp32, scalar, one record at a time.
 *
 * It reads like the spec on purpose: it is the oracle every later fast path is tested
 * against. Shapes: T tokens, H hidden, L layers, P per-layer width, E output width. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- small blocks ------------------------------------------------------------------------ */

/* y = x / sqrt(mean(x^2) + eps) * w  (w NULL: no weight); in place allowed */
static void rmsnorm(float *y, const float *x, const ge_tensor *w, int n, float eps, float *wbuf)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    if (w)
        ge_tensor_row(w, 0, wbuf);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * inv * (w ? wbuf[i] : 1.0f);
}

static void rmsnorm_rows(float *x, int rows, int n, const ge_tensor *w, float eps, float *wbuf)
{
    for (int r = 0; r < rows; r++)
        rmsnorm(x + (size_t)r * n, x + (size_t)r * n, w, n, eps, wbuf);
}

/* gelu_pytorch_tanh */
static float gelu(float x)
{
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

/* NEOX rotate-half RoPE over a whole head of d values at position pos. */
static void rope(float *v, int d, int pos, float base)
{
    const int half = d / 2;
    for (int j = 0; j < half; j++) {
        double inv_freq = pow((double)base, -2.0 * j / d);
        double a = pos * inv_freq;
        float c = (float)cos(a), s = (float)sin(a);
        float x0 = v[j], x1 = v[j + half];
        v[j] = x0 * c - x1 * s;
        v[j + half] = x1 * c + x0 * s;
    }
}

/* ---- attention --------------------------------------------------------------------------- */

/* Bidirectional attention with scale 1.0 and GQA: q [T, nh*d], k/v [T, nkv*d] -> o [T, nh*d].
 * A sliding layer sees keys with |i - j| <= radius. probs holds T floats. */
static void attention(const float *q, const float *k, const float *v, float *o, int T, int nh,
                      int nkv, int d, bool sliding, int radius, float *probs)
{
    const int group = nh / nkv;
    for (int h = 0; h < nh; h++) {
        const int kh = h / group;
        for (int i = 0; i < T; i++) {
            int j0 = 0, j1 = T - 1;
            if (sliding) {
                j0 = i - radius > 0 ? i - radius : 0;
                j1 = i + radius < T - 1 ? i + radius : T - 1;
            }
            const float *qi = q + ((size_t)i * nh + h) * d;
            float mx = -INFINITY;
            for (int j = j0; j <= j1; j++) {
                const float *kj = k + ((size_t)j * nkv + kh) * d;
                float s = 0.0f;
                for (int e = 0; e < d; e++)
                    s += qi[e] * kj[e];
                probs[j] = s;
                mx = s > mx ? s : mx;
            }
            float sum = 0.0f;
            for (int j = j0; j <= j1; j++) {
                probs[j] = expf(probs[j] - mx);
                sum += probs[j];
            }
            float *oi = o + ((size_t)i * nh + h) * d;
            memset(oi, 0, (size_t)d * sizeof *oi);
            for (int j = j0; j <= j1; j++) {
                const float p = probs[j] / sum, *vj = v + ((size_t)j * nkv + kh) * d;
                for (int e = 0; e < d; e++)
                    oi[e] += p * vj[e];
            }
        }
    }
}

/* ---- the encoder ------------------------------------------------------------------------- */

typedef struct {
    float *x;     /* [T, H] residual stream */
    float *a;     /* [T, max(H, nh*d)] branch input / output */
    float *q;     /* [T, nh*dmax] */
    float *k, *v; /* [T, kvmax] */
    float *o;     /* [T, nh*dmax] */
    float *g, *u; /* [T, F] */
    float *ple;   /* [T, L*P] */
    float *row;   /* [max(H, F, P, dmax, nh*dmax, T, E)] scratch row */
    float *wbuf;  /* [max(H, P, dmax)] norm weights */
} buffers;

#define BUFFER_FIELDS(b) {&b->x, &b->a, &b->q, &b->k, &b->v, &b->o, &b->g, &b->u, &b->ple, \
                          &b->row, &b->wbuf}

static void free_buffers(buffers *b)
{
    float **fields[] = BUFFER_FIELDS(b);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        free(*fields[i]);
        *fields[i] = NULL;
    }
}

static ge_status alloc_buffers(buffers *b, const ge_model *m, int T)
{
    const ge_hparams *hp = &m->hp;
    int dmax = 0, kvmax = 0;
    for (int i = 0; i < hp->n_layer; i++) {
        const ge_layer *l = &m->layers[i];
        dmax = l->head_dim > dmax ? l->head_dim : dmax;
        kvmax = l->n_kv * l->head_dim > kvmax ? l->n_kv * l->head_dim : kvmax;
    }
    size_t qd = (size_t)hp->n_head * dmax, wide = (size_t)hp->n_embd;
    wide = qd > wide ? qd : wide;
    size_t rowlen = wide;
    const size_t others[] = {(size_t)hp->n_ff, (size_t)hp->n_ple, (size_t)T, (size_t)hp->n_out,
                             (size_t)dmax};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        rowlen = others[i] > rowlen ? others[i] : rowlen;
    const size_t t = (size_t)T;
    memset(b, 0, sizeof *b);
    b->x = calloc(t * hp->n_embd, sizeof(float));
    b->a = calloc(t * wide, sizeof(float));
    b->q = calloc(t * qd, sizeof(float));
    b->k = calloc(t * kvmax, sizeof(float));
    b->v = calloc(t * kvmax, sizeof(float));
    b->o = calloc(t * qd, sizeof(float));
    b->g = calloc(t * hp->n_ff, sizeof(float));
    b->u = calloc(t * hp->n_ff, sizeof(float));
    b->ple = calloc(t * hp->n_layer * hp->n_ple, sizeof(float));
    b->row = calloc(rowlen, sizeof(float));
    b->wbuf = calloc(rowlen, sizeof(float));
    float **fields[] = BUFFER_FIELDS(b);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!*fields[i]) {
            free_buffers(b);
            return GE_E_NOMEM;
        }
    return GE_OK;
}

static void layer_forward(const ge_model *m, const ge_layer *l, int li, int T, buffers *b)
{
    const ge_hparams *hp = &m->hp;
    const int H = hp->n_embd, nh = hp->n_head, d = l->head_dim, nkv = l->n_kv, P = hp->n_ple;
    const int F = hp->n_ff;
    const float eps = hp->eps;

    /* attention branch: a = post_norm(o_proj(attn(rope(qk_norm(q, k)), v_norm(v)))) */
    for (int t = 0; t < T; t++)
        rmsnorm(b->a + (size_t)t * H, b->x + (size_t)t * H, &l->attn_norm, H, eps, b->wbuf);
    ge_linear_ref(&l->wq, b->a, T, b->q, b->row);
    ge_linear_ref(&l->wk, b->a, T, b->k, b->row);
    ge_linear_ref(&l->wv, b->a, T, b->v, b->row);
    rmsnorm_rows(b->q, T * nh, d, &l->q_norm, eps, b->wbuf);
    rmsnorm_rows(b->k, T * nkv, d, &l->k_norm, eps, b->wbuf);
    rmsnorm_rows(b->v, T * nkv, d, NULL, eps, b->wbuf);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < nh; h++)
            rope(b->q + ((size_t)t * nh + h) * d, d, t, l->rope_base);
        for (int h = 0; h < nkv; h++)
            rope(b->k + ((size_t)t * nkv + h) * d, d, t, l->rope_base);
    }
    attention(b->q, b->k, b->v, b->o, T, nh, nkv, d, l->sliding, hp->swa_radius, b->row);
    ge_linear_ref(&l->wo, b->o, T, b->a, b->row);
    rmsnorm_rows(b->a, T, H, &l->post_attn_norm, eps, b->wbuf);
    for (size_t i = 0; i < (size_t)T * H; i++)
        b->x[i] += b->a[i];

    /* MLP branch: post_norm(down(gelu(gate(u)) * up(u))), u = pre_norm(x) */
    for (int t = 0; t < T; t++)
        rmsnorm(b->a + (size_t)t * H, b->x + (size_t)t * H, &l->ffn_norm, H, eps, b->wbuf);
    ge_linear_ref(&l->w_gate, b->a, T, b->g, b->row);
    ge_linear_ref(&l->w_up, b->a, T, b->u, b->row);
    for (size_t i = 0; i < (size_t)T * F; i++)
        b->g[i] = gelu(b->g[i]) * b->u[i];
    ge_linear_ref(&l->w_down, b->g, T, b->a, b->row);
    rmsnorm_rows(b->a, T, H, &l->post_ffn_norm, eps, b->wbuf);
    for (size_t i = 0; i < (size_t)T * H; i++)
        b->x[i] += b->a[i];

    /* PLE block: post_norm(proj(gelu(gate(x)) * ple[:, li])) */
    ge_linear_ref(&l->ple_gate, b->x, T, b->g, b->row); /* [T, P] */
    for (int t = 0; t < T; t++) {
        const float *ple = b->ple + ((size_t)t * hp->n_layer + li) * P;
        for (int i = 0; i < P; i++)
            b->g[(size_t)t * P + i] = gelu(b->g[(size_t)t * P + i]) * ple[i];
    }
    ge_linear_ref(&l->ple_proj, b->g, T, b->a, b->row);
    rmsnorm_rows(b->a, T, H, &l->ple_post_norm, eps, b->wbuf);
    for (size_t i = 0; i < (size_t)T * H; i++)
        b->x[i] = (b->x[i] + b->a[i]) * l->out_scale;
}

ge_status ge_embed(ge_model *m, const int32_t *ids, size_t n, float *out, ge_err *err)
{
    const ge_hparams *hp = &m->hp;
    if (n == 0)
        return ge_fail(err, GE_E_INPUT, "empty token sequence");
    if (n > (size_t)hp->max_tokens)
        return ge_fail(err, GE_E_LIMIT, "%zu tokens exceed the context limit of %d", n,
                       hp->max_tokens);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= hp->n_vocab)
            return ge_fail(err, GE_E_INPUT, "token id %d at position %zu is outside the "
                           "vocabulary of %d", ids[i], i, hp->n_vocab);
    const int T = (int)n, H = hp->n_embd, L = hp->n_layer, P = hp->n_ple;
    buffers b;
    if (alloc_buffers(&b, m, T))
        return ge_fail(err, GE_E_NOMEM, "out of memory for a %d-token record", T);

    /* input embedding: e = token_embd[id] * sqrt(H) */
    const float scale = sqrtf((float)H);
    for (int t = 0; t < T; t++) {
        float *e = b.x + (size_t)t * H;
        ge_tensor_row(&m->tok_embd, ids[t], e);
        for (int i = 0; i < H; i++)
            e[i] *= scale;
    }
    /* projection-only PLE, once from the merged embeddings: [T, L, P] */
    ge_linear_ref(&m->ple_model_proj, b.x, T, b.ple, b.row);
    const float ple_scale = 1.0f / sqrtf((float)H);
    for (size_t i = 0; i < (size_t)T * L * P; i++)
        b.ple[i] *= ple_scale;
    rmsnorm_rows(b.ple, T * L, P, &m->ple_norm, hp->eps, b.wbuf);

    for (int li = 0; li < L; li++)
        layer_forward(m, &m->layers[li], li, T, &b);

    /* final norm, mean over all tokens, then the (linear) projection once, L2 */
    float *mean = b.a;
    memset(mean, 0, (size_t)H * sizeof *mean);
    for (int t = 0; t < T; t++) {
        rmsnorm(b.x + (size_t)t * H, b.x + (size_t)t * H, &m->out_norm, H, hp->eps, b.wbuf);
        for (int i = 0; i < H; i++)
            mean[i] += b.x[(size_t)t * H + i];
    }
    for (int i = 0; i < H; i++)
        mean[i] /= (float)T;
    ge_linear_ref(&m->out_proj, mean, 1, out, b.row);
    ge_matryoshka(out, hp->n_out);
    free_buffers(&b);
    return GE_OK;
}

void ge_matryoshka(float *v, int dim)
{
    double ss = 0.0;
    for (int i = 0; i < dim; i++)
        ss += (double)v[i] * v[i];
    double norm = sqrt(ss);
    float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
    for (int i = 0; i < dim; i++)
        v[i] *= inv;
}

/* ---- tokenizer entry points (ge.h) ---------------------------------------------------- */

ge_status ge_tokenize(const ge_model *m, const char *prefix, const char *text, size_t len,
                      ge_tokens *out, ge_err *err)
{
    if (!prefix || !*prefix)
        return ge_tok_encode(m->tok, text, len, true, out, err);
    /* the prompt and the text are one string, so BPE can merge across the boundary */
    size_t pl = strlen(prefix);
    char *joined = malloc(pl + len + 1);
    if (!joined)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    memcpy(joined, prefix, pl);
    memcpy(joined + pl, text, len);
    ge_status st = ge_tok_encode(m->tok, joined, pl + len, true, out, err);
    free(joined);
    return st;
}

void ge_tokens_truncate(const ge_model *m, ge_tokens *t, size_t max)
{
    if (t->n <= max || max == 0)
        return;
    int32_t eos = ge_tok_eos_appended(m->tok);
    bool keep_eos = eos >= 0 && t->ids[t->n - 1] == eos;
    t->n = max;
    if (keep_eos)
        t->ids[max - 1] = eos;
}
