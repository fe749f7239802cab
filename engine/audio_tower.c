/* audio_tower.c - the gemma4a audio tower (conformer) of an mmproj GGUF (docs/gguf.md 4.3,
 * docs/model.md 4 and 6.2-6.4): binding with the same strict checks as the text model,
 * and the forward from a clip's log-mel features to the soft tokens that replace its
 * <|audio|> placeholders.
 *
 * One graph for both paths, as in vision.c: `fast` picks the engine's fast linears (Q8 GEMM,
 * SGEMM panels) and the tier's row kernels; otherwise the reference row dots and the scalar
 * kernels. The sub-sampling convolutions are GEMMs over patches gathered per chunk of output
 * rows, so they take the same two paths. The local attention (12 keys per query, about 2 % of
 * the work) has a single plain implementation that both paths share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "audio_tower.h"
#include "linear.h"

#define NORM_EPS 1e-6f  /* every norm of the tower (clip.cpp overrides the key's 1e-5) */
#define GRAD_CLIP 1e10f /* HF's grad_clip: a clamp to +-1e10 before most norms */
#define CONTEXT 12      /* keys per query: the frame and the 11 before it */
#define N_REL 13        /* relative positions with keys (d = 0..12; 12 is always masked) */
#define LOGIT_CAP 50.0f
#define K_SCALE 1.8946361239720115f /* ln(1 + e) / ln 2 (docs/model.md 6.3) */
#define MAX_HEAD_DIM GE_ATTN_REL_MAX_HEAD_DIM
#define CONV_K 3        /* the sub-sampling convolutions: 3x3, stride 2, padding 1 */

typedef struct {
    ge_tensor w;
    float in_lo, in_hi, out_lo, out_hi; /* ClippableLinear's four stored bounds */
} clin;

typedef struct {
    ge_tensor ffn_norm[2], ffn_post[2]; /* the two macaron half-step FFNs */
    clin up[2], down[2];
    ge_tensor attn_pre, attn_post, pds, k_rel;
    clin q, k, v, o;
    ge_tensor conv_norm, norm_conv, dw; /* the light convolution (names: docs/gguf.md 4.3) */
    clin pw1, pw2;
    ge_tensor ln2;
} alayer;

/* The forward's buffers: token-major [n][D] (x the residual stream), h [chunk][hw] for the
 * FFN and GLU widths, the sub-sampler's per-chunk patches and outputs. */
typedef struct {
    float *x, *a, *b, *q, *k, *v, *h, *sub;
    size_t cap; /* tokens they hold */
} awork;

struct ge_audio_tower {
    ge_gguf *gguf;
    int D, n_layer, n_head, head_dim, n_ff, n_mel, c0, c1, m2, m4, E, proj_dim, K;
    ge_tensor conv0, conv1;  /* as GEMM weights {9 * c_in, c_out}, patch order (dy, dx, c) */
    float *conv_w;           /* their data (fp32, reordered from the file at open) */
    ge_tensor norm0, norm1, in_proj, out_w, out_b, proj;
    alayer *layers;
    float *rel[2];           /* [n_layer][N_REL][D] relative keys per path (0 ref, 1 fast) */
    awork ws;
};

/* ---- binding ------------------------------------------------------------------------------ */

static ge_status bind(const ge_audio_tower *t, const char *name, int64_t ne0, int64_t ne1,
                      ge_tensor *out, ge_err *err)
{
    return ge_tensor_bind(t->gguf, name, (int64_t[4]){ne0, ne1, 1, 1}, 1, out, err);
}

/* One F32 [1] bound: a missing or non-finite one is an error (the clamps change the result). */
static ge_status bound(const ge_audio_tower *t, const char *base, const char *which, float *out,
                       ge_err *err)
{
    char name[112];
    snprintf(name, sizeof name, "%s.%s", base, which);
    ge_tensor s;
    ge_status st = bind(t, name, 1, 1, &s, err);
    if (st)
        return st;
    ge_tensor_row(&s, 0, out);
    if (isnan(*out))
        return ge_fail(err, GE_E_FORMAT, "%s: tensor %s is not a number", t->gguf->path, name);
    return GE_OK;
}

static ge_status bind_clin(const ge_audio_tower *t, int li, const char *what, int64_t ne0,
                           int64_t ne1, clin *c, ge_err *err)
{
    char base[96], name[112];
    snprintf(base, sizeof base, "a.blk.%d.%s", li, what);
    snprintf(name, sizeof name, "%s.weight", base);
    ge_status st = bind(t, name, ne0, ne1, &c->w, err);
    if (!st)
        st = bound(t, base, "input_min", &c->in_lo, err);
    if (!st)
        st = bound(t, base, "input_max", &c->in_hi, err);
    if (!st)
        st = bound(t, base, "output_min", &c->out_lo, err);
    if (!st)
        st = bound(t, base, "output_max", &c->out_hi, err);
    /* an infinite bound is "no clamp" on its side (HF's default), but a lower bound of +inf
     * or an upper one of -inf clamps everything to infinity */
    if (!st && (!(c->in_lo <= c->in_hi) || !(c->out_lo <= c->out_hi) ||
                c->in_lo == INFINITY || c->out_lo == INFINITY || c->in_hi == -INFINITY ||
                c->out_hi == -INFINITY))
        st = ge_fail(err, GE_E_FORMAT, "%s: %s: clamp bounds out of order or clamping to "
                     "infinity ([%g, %g], [%g, %g])", t->gguf->path, base, c->in_lo, c->in_hi,
                     c->out_lo, c->out_hi);
    return st;
}

static ge_status bind_layer(const ge_audio_tower *t, int i, alayer *l, ge_err *err)
{
    const int D = t->D, F = t->n_ff;
    const struct {
        const char *suffix;
        int64_t ne0, ne1;
        ge_tensor *t;
    } vec[] = {
        {"ffn_norm", D, 1, &l->ffn_norm[0]},     {"ffn_post_norm", D, 1, &l->ffn_post[0]},
        {"ffn_norm_1", D, 1, &l->ffn_norm[1]},   {"ffn_post_norm_1", D, 1, &l->ffn_post[1]},
        {"attn_pre_norm", D, 1, &l->attn_pre},   {"attn_post_norm", D, 1, &l->attn_post},
        {"attn_k_rel", D, D, &l->k_rel},
        {"conv_norm", D, 1, &l->conv_norm},      {"norm_conv", D, 1, &l->norm_conv},
        {"conv_dw", t->K, D, &l->dw},            {"ln2", D, 1, &l->ln2},
    };
    char name[96];
    ge_status st = GE_OK;
    for (size_t k = 0; k < sizeof vec / sizeof vec[0] && !st; k++) {
        snprintf(name, sizeof name, "a.blk.%d.%s.weight", i, vec[k].suffix);
        st = bind(t, name, vec[k].ne0, vec[k].ne1, vec[k].t, err);
    }
    /* per_dim_scale (stored after softplus): one listing of the layout names it without
     * ".weight", the files seen so far with it; either is taken (docs/gguf.md 4.3) */
    snprintf(name, sizeof name, "a.blk.%d.per_dim_scale", i);
    if (!st && !ge_gguf_tensor_find(t->gguf, name))
        snprintf(name, sizeof name, "a.blk.%d.per_dim_scale.weight", i);
    if (!st)
        st = bind(t, name, t->head_dim, 1, &l->pds, err);
    const struct {
        const char *what;
        int64_t ne0, ne1;
        clin *c;
    } lin[] = {
        {"ffn_up", D, F, &l->up[0]},    {"ffn_down", F, D, &l->down[0]},
        {"ffn_up_1", D, F, &l->up[1]},  {"ffn_down_1", F, D, &l->down[1]},
        {"attn_q", D, D, &l->q},        {"attn_k", D, D, &l->k},
        {"attn_v", D, D, &l->v},        {"attn_out", D, D, &l->o},
        {"conv_pw1", D, 2 * D, &l->pw1}, {"conv_pw2", D, D, &l->pw2},
    };
    for (size_t k = 0; k < sizeof lin / sizeof lin[0] && !st; k++)
        st = bind_clin(t, i, lin[k].what, lin[k].ne0, lin[k].ne1, lin[k].c, err);
    /* what EmbeddingGemma 2 does not have is refused rather than half-honoured */
    static const char *const extra[] = {"per_dim_k_scale.weight", "attn_q.bias",
                                        "ffn_up.bias", "conv_dw.bias"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0] && !st; k++) {
        snprintf(name, sizeof name, "a.blk.%d.%s", i, extra[k]);
        if (ge_gguf_tensor_find(t->gguf, name))
            st = ge_fail(err, GE_E_UNSUPPORTED, "%s: tensor %s is not supported in the audio "
                         "tower", t->gguf->path, name);
    }
    return st;
}

/* A sub-sampling convolution {3, 3, c_in, c_out} (w, bound with split 2) as a GEMM weight
 * {9 c_in, c_out} whose inputs run (dy, dx, c): the order in which gather() lays out a patch. */
static void reorder_conv(const ge_tensor *w, int c_in, int c_out, float *dst, ge_tensor *out)
{
    float row[CONV_K * CONV_K];
    for (int co = 0; co < c_out; co++)
        for (int ci = 0; ci < c_in; ci++) {
            /* row (co, ci) holds the 3x3 kernel, dy (time) major, dx (mel) minor */
            ge_tensor_row(w, (int64_t)co * c_in + ci, row);
            for (int k = 0; k < CONV_K * CONV_K; k++)
                dst[((size_t)co * CONV_K * CONV_K + k) * c_in + ci] = row[k];
        }
    *out = (ge_tensor){w->name, GE_T_F32, (int64_t)CONV_K * CONV_K * c_in, c_out,
                       (size_t)CONV_K * CONV_K * c_in * sizeof(float), (const uint8_t *)dst};
}

static ge_status bind_tower(ge_audio_tower *t, int text_hidden, ge_err *err)
{
    const ge_gguf *g = t->gguf;
    ge_status st = ge_mmproj_check(g, "audio", "gemma4a", GE_NO_AUDIO_ENCODER, err);
    const int big = 1 << 16;
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.embedding_length", 1, big, &t->D, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.block_count", 1, 1024, &t->n_layer, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.attention.head_count", 1, 1024, &t->n_head, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.feed_forward_length", 1, big * 4, &t->n_ff, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.projection_dim", 1, big, &t->proj_dim, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.audio.num_mel_bins", 1, 1024, &t->n_mel, err);
    /* the tower's norms use NORM_EPS whatever the key says (as clip.cpp), but a file whose
     * epsilon is no epsilon is damaged */
    float eps;
    if (!st && ge_gguf_find(g, "clip.audio.attention.layer_norm_epsilon"))
        st = ge_gguf_get_f32_in(g, "clip.audio.attention.layer_norm_epsilon", 0.0f, 1.0f, &eps,
                                err);
    if (st)
        return st;
    if (t->n_mel != GE_AUDIO_MEL)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: clip.audio.num_mel_bins %d: the front end "
                       "gives %d", g->path, t->n_mel, GE_AUDIO_MEL);
    if (t->D % t->n_head || t->D % 2)
        return ge_fail(err, GE_E_FORMAT, "%s: width %d does not split into %d heads", g->path,
                       t->D, t->n_head);
    t->head_dim = t->D / t->n_head;
    if (t->head_dim > MAX_HEAD_DIM)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: audio head dim %d is over %d", g->path,
                       t->head_dim, MAX_HEAD_DIM);
    if (t->proj_dim != text_hidden)
        return ge_fail(err, GE_E_FORMAT, "%s: clip.audio.projection_dim %d does not match the "
                       "text model's hidden size %d", g->path, t->proj_dim, text_hidden);
    /* the channel counts, output width and kernel come from the tensors' shapes */
    const ge_gguf_tensor *c0 = ge_gguf_tensor_find(g, "a.conv1d.0.weight");
    const ge_gguf_tensor *c1 = ge_gguf_tensor_find(g, "a.conv1d.1.weight");
    const ge_gguf_tensor *ow = ge_gguf_tensor_find(g, "a.pre_encode.out.weight");
    const ge_gguf_tensor *dw = ge_gguf_tensor_find(g, "a.blk.0.conv_dw.weight");
    const ge_gguf_tensor *fixed[] = {c0, c1, ow, dw};
    static const char *const fixed_name[] = {"a.conv1d.0.weight", "a.conv1d.1.weight",
                                             "a.pre_encode.out.weight", "a.blk.0.conv_dw.weight"};
    for (int i = 0; i < 4; i++)
        if (!fixed[i])
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %s is missing", g->path, fixed_name[i]);
    t->c0 = c0->ne[3] >= 1 && c0->ne[3] <= 4096 ? (int)c0->ne[3] : 1;
    t->c1 = c1->ne[3] >= 1 && c1->ne[3] <= 4096 ? (int)c1->ne[3] : 1;
    t->E = ow->ne[1] >= 1 && ow->ne[1] <= (uint64_t)big ? (int)ow->ne[1] : 1;
    t->K = dw->ne[0] >= 1 && dw->ne[0] <= 64 ? (int)dw->ne[0] : 1;
    t->m2 = (t->n_mel + 1) / 2;
    t->m4 = (t->m2 + 1) / 2;
    /* both shapes before the fp32 copy is sized from the channel counts they claim */
    ge_tensor w0, w1;
    if ((st = ge_tensor_bind(g, "a.conv1d.0.weight", (int64_t[4]){CONV_K, CONV_K, 1, t->c0}, 2,
                             &w0, err)) ||
        (st = ge_tensor_bind(g, "a.conv1d.1.weight",
                             (int64_t[4]){CONV_K, CONV_K, t->c0, t->c1}, 2, &w1, err)))
        return st;
    size_t nw = (size_t)CONV_K * CONV_K * ((size_t)t->c0 + (size_t)t->c0 * t->c1);
    if (!(t->conv_w = malloc(nw * sizeof *t->conv_w)))
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    reorder_conv(&w0, 1, t->c0, t->conv_w, &t->conv0);
    reorder_conv(&w1, t->c0, t->c1, t->conv_w + (size_t)CONV_K * CONV_K * t->c0, &t->conv1);
    if ((st = bind(t, "a.conv1d.0.norm.weight", t->c0, 1, &t->norm0, err)) ||
        (st = bind(t, "a.conv1d.1.norm.weight", t->c1, 1, &t->norm1, err)) ||
        (st = bind(t, "a.input_projection.weight", (int64_t)t->c1 * t->m4, t->D, &t->in_proj,
                   err)) ||
        (st = bind(t, "a.pre_encode.out.weight", t->D, t->E, &t->out_w, err)) ||
        (st = bind(t, "a.pre_encode.out.bias", t->E, 1, &t->out_b, err)) ||
        (st = bind(t, "mm.a.input_projection.weight", t->E, t->proj_dim, &t->proj, err)))
        return st;
    if (ge_gguf_tensor_find(g, "mm.a.soft_emb_norm.weight"))
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: mm.a.soft_emb_norm is not supported (the "
                       "projection's norm has no weight in EmbeddingGemma 2)", g->path);
    if (!(t->layers = calloc((size_t)t->n_layer, sizeof *t->layers)))
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    for (int i = 0; i < t->n_layer && !st; i++)
        st = bind_layer(t, i, &t->layers[i], err);
    return st;
}

ge_status ge_audio_tower_open(ge_audio_tower **out, const char *path, int text_hidden,
                              ge_err *err)
{
    *out = NULL;
    ge_audio_tower *t = calloc(1, sizeof *t);
    if (!t)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", path);
    ge_status st = ge_gguf_open(&t->gguf, path, err);
    if (!st)
        st = bind_tower(t, text_hidden, err);
    if (st) {
        ge_audio_tower_free(t);
        return st;
    }
    *out = t;
    return GE_OK;
}

static void work_free(awork *w)
{
    free(w->x), free(w->a), free(w->b), free(w->q), free(w->k), free(w->v), free(w->h);
    free(w->sub);
    memset(w, 0, sizeof *w);
}

void ge_audio_tower_free(ge_audio_tower *t)
{
    if (!t)
        return;
    free(t->layers);
    free(t->conv_w);
    free(t->rel[0]), free(t->rel[1]);
    work_free(&t->ws);
    ge_gguf_close(t->gguf);
    free(t);
}

void ge_audio_tower_trim(ge_audio_tower *t) { work_free(&t->ws); }

ge_status ge_audio_tower_prepack(ge_compute *cx, const ge_audio_tower *t, ge_err *err)
{
    ge_status st = ge_linear_prepack(cx, (const ge_tensor *const[]){&t->conv0, &t->conv1,
                                                                  &t->in_proj, &t->out_w,
                                                                  &t->proj}, 5, err);
    for (int i = 0; i < t->n_layer && !st; i++) {
        const alayer *l = &t->layers[i];
        const ge_tensor *const ts[] = {&l->up[0].w, &l->down[0].w, &l->up[1].w, &l->down[1].w,
                                       &l->q.w, &l->k.w, &l->v.w, &l->o.w, &l->pw1.w, &l->pw2.w};
        st = ge_linear_prepack(cx, ts, sizeof ts / sizeof ts[0], err);
    }
    return st;
}

/* ---- forward ------------------------------------------------------------------------------ */

#define ROW_BLOCK 32  /* tokens per task of the row passes */
#define CHUNK 256     /* tokens per FFN / GLU GEMM pass (its [tokens][hw] buffer: 4 MB, in L3) */
#define SUB_ROWS 16   /* sub-sampler output rows per chunk: bounds its patch buffers */

typedef struct {
    ge_compute *cx;
    bool fast;
    const ge_kern *k; /* row kernels: the tier's, or the scalar reference */
} path;

/* y = clamp(x, clip) W^T (clip: NULL or [lo, hi]) */
static ge_status linear_clip(const path *P, const float *x, int n, const float *clip,
                             const ge_tensor *w, float *y, ge_err *err)
{
    const ge_linear_out o = {w, y};
    return P->fast ? ge_linear_many_media(P->cx, x, n, clip, &o, 1, err)
                   : ge_linear_many_ref(P->cx, x, n, clip, &o, 1, err);
}

static ge_status linear(const path *P, const float *x, int n, const ge_tensor *w, float *y,
                        ge_err *err)
{
    return linear_clip(P, x, n, NULL, w, y, err);
}

/* One layer's vectors as fp32 (the row passes read them from every worker). */
typedef struct {
    float *ffn_norm[2], *ffn_post[2], *attn_pre, *attn_post, *conv_norm, *norm_conv, *ln2;
    float *dw;  /* [K][D] */
    float qs[MAX_HEAD_DIM]; /* q's scale per head dim: hd^-1/2 / ln 2 * per_dim_scale */
} vecs;

/* The per-token passes between the GEMMs, threaded over blocks of ROW_BLOCK tokens. */
typedef enum {
    PASS_FFN_IN,   /* a = clamp_in(up, norm(clamp(x))) */
    PASS_FFN_ACT,  /* h = clamp_in(down, silu(clamp_out(up, h))) (rows of n_ff) */
    PASS_FFN_OUT,  /* x += 0.5 post(clamp(clamp_out(down, a))); last: x = ln2(clamp(x)) */
    PASS_ATTN_IN,  /* a = attn_pre(clamp(x)) */
    PASS_QKV,      /* q, k, v = their clamp_out */
    PASS_ATTN,     /* b = the local attention of q, k, v; clamp_in(o, b) */
    PASS_ATTN_OUT, /* x += attn_post(clamp(clamp_out(o, a))) */
    PASS_CONV_IN,  /* a = clamp_in(pw1, conv_norm(x)) */
    PASS_GLU,      /* b = clamp_out(pw1, h)[:D] * sigmoid(clamp_out(pw1, h)[D:]) */
    PASS_DW,       /* a = clamp_in(pw2, silu(norm_conv(clamp(causal depthwise conv of b)))) */
    PASS_CONV_OUT, /* x += clamp_out(pw2, b) */
} pass_kind;

typedef struct {
    const ge_audio_tower *t;
    const path *P;
    pass_kind kind;
    const alayer *l;
    const vecs *nv;
    const float *rel;  /* this layer's [N_REL][D] */
    int ffn;           /* which FFN */
    int64_t n, off;    /* tokens of this pass; first token (chunked passes) */
    int64_t width;     /* row width of the pass's rows (FFN_ACT: n_ff) */
    bool last;         /* FFN_OUT of the second FFN: ln2 follows */
} pass_job;

/* dst = norm(clamp(src, [lo, hi] and +-GRAD_CLIP)) (dst may be src): a clipped linear's
 * output clamp and the grad clip before a norm are one clamp to the two ranges' overlap */
static void rmsnorm_clamped(const ge_kern *k, float *dst, const float *src, int64_t rows,
                            int64_t D, const float *w, float lo, float hi)
{
    k->clamp(dst, src, rows * D, lo > -GRAD_CLIP ? lo : -GRAD_CLIP,
             hi < GRAD_CLIP ? hi : GRAD_CLIP);
    k->rmsnorm(dst, rows, D, w, NORM_EPS);
}

static void pass_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const pass_job *j = ctx;
    const ge_audio_tower *t = j->t;
    const awork *w = &t->ws;
    const ge_kern *k = j->P->k;
    const alayer *l = j->l;
    const vecs *nv = j->nv;
    const int64_t t0 = task * ROW_BLOCK, t1 = t0 + ROW_BLOCK < j->n ? t0 + ROW_BLOCK : j->n;
    const int64_t rows = t1 - t0;
    const size_t D = (size_t)t->D, off = (size_t)t0 * D, len = (size_t)rows * D;
    switch (j->kind) {
    case PASS_FFN_IN:
        rmsnorm_clamped(k, w->a + off, w->x + off, rows, D, nv->ffn_norm[j->ffn], -INFINITY,
                        INFINITY);
        k->clamp(w->a + off, w->a + off, (int64_t)len, l->up[j->ffn].in_lo, l->up[j->ffn].in_hi);
        break;
    case PASS_FFN_ACT: {
        const clin *up = &l->up[j->ffn], *dn = &l->down[j->ffn];
        float *h = w->h + (size_t)t0 * j->width;
        const float clip[4] = {up->out_lo, up->out_hi, dn->in_lo, dn->in_hi};
        k->act_mul(h, NULL, rows * j->width, GE_SILU, clip);
        break;
    }
    case PASS_FFN_OUT: {
        float *a = w->a + off, *x = w->x + off;
        rmsnorm_clamped(k, a, a, rows, D, nv->ffn_post[j->ffn], l->down[j->ffn].out_lo,
                        l->down[j->ffn].out_hi);
        k->axpy(x, a, (int64_t)len, 0.5f); /* the macaron half step */
        if (j->last)
            rmsnorm_clamped(k, x, x, rows, D, nv->ln2, -INFINITY, INFINITY);
        break;
    }
    case PASS_ATTN_IN:
        rmsnorm_clamped(k, w->a + off, w->x + off, rows, D, nv->attn_pre, -INFINITY, INFINITY);
        break;
    case PASS_QKV: /* (the q and k scales are the attention kernel's) */
        k->clamp(w->q + off, w->q + off, (int64_t)len, l->q.out_lo, l->q.out_hi);
        k->clamp(w->k + off, w->k + off, (int64_t)len, l->k.out_lo, l->k.out_hi);
        k->clamp(w->v + off, w->v + off, (int64_t)len, l->v.out_lo, l->v.out_hi);
        break;
    case PASS_ATTN: {
        const ge_attn_rel_args aa = {.q = w->q, .k = w->k, .v = w->v, .r = j->rel, .o = w->b,
                                     .q_scale = nv->qs, .k_scale = K_SCALE,
                                     .ld = (int64_t)D, .n_head = t->n_head,
                                     .head_dim = t->head_dim, .window = CONTEXT,
                                     .cap = LOGIT_CAP};
        k->attn_rel(&aa, t0, t1);
        k->clamp(w->b + off, w->b + off, (int64_t)len, l->o.in_lo, l->o.in_hi);
        break;
    }
    case PASS_ATTN_OUT: {
        float *a = w->a + off, *x = w->x + off;
        rmsnorm_clamped(k, a, a, rows, D, nv->attn_post, l->o.out_lo, l->o.out_hi);
        k->axpy(x, a, (int64_t)len, 1.0f);
        break;
    }
    case PASS_CONV_IN:
        memcpy(w->a + off, w->x + off, len * sizeof *w->a);
        k->rmsnorm(w->a + off, rows, D, nv->conv_norm, NORM_EPS);
        k->clamp(w->a + off, w->a + off, (int64_t)len, l->pw1.in_lo, l->pw1.in_hi);
        break;
    case PASS_GLU: {
        /* rows of h [2 D] are chunk-relative; b rows are absolute (j->off + row) */
        for (int64_t r = t0; r < t1; r++) {
            float *h = w->h + (size_t)r * 2 * D, *b = w->b + (size_t)(j->off + r) * D;
            k->clamp(h, h, (int64_t)(2 * D), l->pw1.out_lo, l->pw1.out_hi);
            memcpy(b, h + D, D * sizeof *b);
            k->act_mul(b, h, (int64_t)D, GE_SIGMOID, NULL); /* first half x sigmoid(second half) */
        }
        break;
    }
    case PASS_DW:
        k->dwconv(w->a, w->b, t0, t1, nv->dw, t->K, (int64_t)D);
        rmsnorm_clamped(k, w->a + off, w->a + off, rows, D, nv->norm_conv, -INFINITY, INFINITY);
        k->act_mul(w->a + off, NULL, (int64_t)len, GE_SILU,
                   (const float[4]){-INFINITY, INFINITY, l->pw2.in_lo, l->pw2.in_hi});
        break;
    case PASS_CONV_OUT: {
        float *b = w->b + off, *x = w->x + off;
        k->clamp(b, b, (int64_t)len, l->pw2.out_lo, l->pw2.out_hi);
        k->axpy(x, b, (int64_t)len, 1.0f);
        break;
    }
    }
}

static void row_pass(pass_job *j, pass_kind kind, int64_t n)
{
    j->kind = kind;
    j->n = n;
    const double t0 = ge_now();
    ge_parallel(j->P->cx, (n + ROW_BLOCK - 1) / ROW_BLOCK, 0, pass_task, j);
    /* the attention pass under "attention" (with its MACs), the rest under "norm" */
    const ge_op op = kind == PASS_ATTN ? GE_OP_ATTENTION : GE_OP_NORM;
    /* attention: q . (k + r) and p . v over about CONTEXT keys per query */
    ge_compute_count(j->P->cx, op, t0,
                     kind == PASS_ATTN ? 2.0 * (double)n * CONTEXT * j->t->D : 0);
}

static void load_vecs(const ge_audio_tower *t, const alayer *l, vecs *v, float *buf)
{
    const size_t D = (size_t)t->D;
    float **dst[] = {&v->ffn_norm[0], &v->ffn_norm[1], &v->ffn_post[0], &v->ffn_post[1],
                     &v->attn_pre, &v->attn_post, &v->conv_norm, &v->norm_conv, &v->ln2};
    const ge_tensor *src[] = {&l->ffn_norm[0], &l->ffn_norm[1], &l->ffn_post[0],
                              &l->ffn_post[1], &l->attn_pre, &l->attn_post, &l->conv_norm,
                              &l->norm_conv, &l->ln2};
    for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++, buf += D) {
        *dst[i] = buf;
        ge_tensor_row(src[i], 0, buf);
    }
    v->dw = buf; /* [K][D], taps major, from the file's [D][K] */
    float taps[64];
    for (int c = 0; c < t->D; c++) {
        ge_tensor_row(&l->dw, c, taps);
        for (int q = 0; q < t->K; q++)
            v->dw[(size_t)q * t->D + c] = taps[q];
    }
    float pds[MAX_HEAD_DIM];
    ge_tensor_row(&l->pds, 0, pds);
    const double qs = 1.0 / sqrt((double)t->head_dim) / log(2.0);
    for (int e = 0; e < t->head_dim; e++)
        v->qs[e] = (float)qs * pds[e];
}

/* The relative keys of every layer on this path: R[d] = PE[d] W_rel^T, PE[d] = (sin(d tau_i),
 * cos(d tau_i)), tau_i = 10^4^(-i / (D/2 - 1)); kept for the tower's life. */
static ge_status rel_keys(const path *P, ge_audio_tower *t, ge_err *err)
{
    float **rel = &t->rel[P->fast];
    if (*rel)
        return GE_OK;
    const int D = t->D, half = D / 2;
    float *pe = malloc((size_t)N_REL * D * sizeof *pe);
    float *r = malloc((size_t)t->n_layer * N_REL * D * sizeof *r);
    if (!pe || !r) {
        free(pe), free(r);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    const double inc = log(1e4) / (half > 1 ? half - 1 : 1);
    for (int d = 0; d < N_REL; d++)
        for (int i = 0; i < half; i++) {
            const double a = d * exp(-i * inc);
            pe[(size_t)d * D + i] = (float)sin(a);
            pe[(size_t)d * D + half + i] = (float)cos(a);
        }
    ge_status st = GE_OK;
    for (int li = 0; li < t->n_layer && !st; li++)
        st = linear(P, pe, N_REL, &t->layers[li].k_rel, r + (size_t)li * N_REL * D, err);
    free(pe);
    if (st)
        free(r);
    else
        *rel = r;
    return st;
}

/* Floats per token of b: a row of D, or the sub-sampler's output row before its projection. */
static size_t work_width(const ge_audio_tower *t)
{
    const size_t sub = (size_t)t->c1 * t->m4;
    return sub > (size_t)t->D ? sub : (size_t)t->D;
}

static ge_status reserve(ge_audio_tower *t, size_t n, ge_err *err)
{
    awork *w = &t->ws;
    if (n <= w->cap)
        return GE_OK;
    work_free(w);
    const size_t D = (size_t)t->D, chunk = n < CHUNK ? n : CHUNK;
    size_t hw = (size_t)t->n_ff > 2 * D ? (size_t)t->n_ff : 2 * D;
    hw = hw > (size_t)t->E ? hw : (size_t)t->E;
    float **f[] = {&w->x, &w->a, &w->q, &w->k, &w->v};
    bool ok = true;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        ok &= (*f[i] = ge_floats(n * D)) != NULL;
    ok &= (w->b = ge_floats(n * work_width(t))) != NULL;
    ok &= (w->h = ge_floats(chunk * hw)) != NULL;
    /* the sub-sampler's chunk: layer-0 rows (with their patches) and layer-1 patches */
    const size_t r0 = 2 * SUB_ROWS + 1, m2 = (size_t)t->m2, m4 = (size_t)t->m4;
    const size_t sub = r0 * m2 * (9 + (size_t)t->c0) + SUB_ROWS * m4 * 9 * (size_t)t->c0;
    ok &= (w->sub = ge_floats(sub)) != NULL;
    if (!ok) {
        work_free(w);
        return ge_fail(err, GE_E_NOMEM, "out of memory for a %zu-token clip", n);
    }
    w->cap = n;
    return GE_OK;
}

/* LayerNorm (mean and biased variance, weight, no bias) over each position's c channels,
 * then ReLU: the sub-sampler's per-position pass. With the mean taken out, the LayerNorm is
 * the RMSNorm kernel of the centred row. */
typedef struct {
    const ge_kern *k;
    float *x;
    int64_t n;
    int c;
    const float *w;
} ln_job;

#define LN_BLOCK 256 /* positions per task */

static void ln_relu_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const ln_job *j = ctx;
    const int64_t p1 = (task + 1) * LN_BLOCK < j->n ? (task + 1) * LN_BLOCK : j->n;
    for (int64_t p = task * LN_BLOCK; p < p1; p++) {
        /* 16 partial sums: one dependent add per 16 values instead of one per value */
        float *x = j->x + (size_t)p * j->c, part[16] = {0}, mean = 0.0f;
        int i = 0;
        for (; i + 16 <= j->c; i += 16)
            for (int l = 0; l < 16; l++)
                part[l] += x[i + l];
        for (; i < j->c; i++)
            part[0] += x[i];
        for (int l = 0; l < 16; l++)
            mean += part[l];
        mean /= (float)j->c;
        for (i = 0; i < j->c; i++)
            x[i] -= mean;
    }
    float *x0 = j->x + (size_t)task * LN_BLOCK * j->c;
    const int64_t len = (p1 - task * LN_BLOCK) * j->c;
    j->k->rmsnorm(x0, p1 - task * LN_BLOCK, j->c, j->w, NORM_EPS);
    j->k->clamp(x0, x0, len, 0.0f, INFINITY); /* ReLU */
}

static void ln_relu(const path *P, float *x, int64_t n, int c, const float *w)
{
    ln_job j = {P->k, x, n, c, w};
    const double t0 = ge_now();
    ge_parallel(P->cx, (n + LN_BLOCK - 1) / LN_BLOCK, 0, ln_relu_task, &j);
    ge_compute_count(P->cx, GE_OP_NORM, t0, 0);
}

/* The 3x3 patch at output (r, f) of a stride-2, padding-1 convolution over rows [0, rows) of
 * an input [rows][cols][c] whose row 0 is input row `first`; rows outside [lo, hi) (absolute)
 * are zeros, as are columns outside [0, cols). Order (dy, dx, channel). */
static void gather(float *dst, const float *src, int64_t first, int64_t lo, int64_t hi,
                   int cols, int c, int64_t r, int f)
{
    for (int dy = 0; dy < CONV_K; dy++) {
        const int64_t y = 2 * r + dy - 1;
        for (int dx = 0; dx < CONV_K; dx++, dst += c) {
            const int x = 2 * f + dx - 1;
            if (y < lo || y >= hi || x < 0 || x >= cols)
                memset(dst, 0, (size_t)c * sizeof *dst);
            else
                memcpy(dst, src + ((size_t)(y - first) * cols + x) * c, (size_t)c * sizeof *dst);
        }
    }
}

/* docs/model.md 6.2: feat [L][n_mel] (the valid frames) to x [T2][D]: conv 1 -> c0 and LayerNorm +
 * ReLU, conv c0 -> c1 and LayerNorm + ReLU (each stride 2 in time and mel), flattened per time
 * step (mel major, channel minor), then the input projection. Streamed in chunks of SUB_ROWS
 * output rows: each chunk computes the layer-0 rows it needs. */
static ge_status subsample(const path *P, ge_audio_tower *t, const float *feat, int64_t L,
                           int64_t T1, int64_t T2, float *norms, ge_err *err)
{
    awork *w = &t->ws;
    const int M = t->n_mel, m2 = t->m2, m4 = t->m4, c0 = t->c0, c1 = t->c1;
    const size_t r0max = 2 * SUB_ROWS + 1;
    float *p0 = w->sub, *h0 = p0 + r0max * m2 * 9, *p1 = h0 + r0max * m2 * c0;
    float *out = w->b; /* [T2][m4 * c1] (b is free until the first layer) */
    ge_status st = GE_OK;
    for (int64_t r = 0; r < T2 && !st; r += SUB_ROWS) {
        const int64_t rn = T2 - r < SUB_ROWS ? T2 - r : SUB_ROWS;
        /* layer-0 rows [a, z) feed output rows [r, r + rn); those past T1 stay zero */
        const int64_t a = 2 * r - 1 > 0 ? 2 * r - 1 : 0;
        const int64_t z = 2 * (r + rn) < T1 ? 2 * (r + rn) : T1;
        for (int64_t y = a; y < z; y++)
            for (int f = 0; f < m2; f++)
                gather(p0 + ((size_t)(y - a) * m2 + f) * 9, feat, 0, 0, L, M, 1, y, f);
        if ((st = linear(P, p0, (int)((z - a) * m2), &t->conv0, h0, err)))
            break;
        ln_relu(P, h0, (z - a) * m2, c0, norms);
        for (int64_t y = 0; y < rn; y++)
            for (int f = 0; f < m4; f++)
                gather(p1 + ((size_t)y * m4 + f) * 9 * c0, h0, a, a, z, m2, c0, r + y, f);
        st = linear(P, p1, (int)(rn * m4), &t->conv1, out + (size_t)r * m4 * c1, err);
    }
    if (st)
        return st;
    ln_relu(P, out, T2 * m4, c1, norms + c0);
    return linear(P, out, (int)T2, &t->in_proj, w->x, err);
}

/* feed_forward1 (f 0) or feed_forward2 (f 1, then norm_out): the macaron half step, its
 * GEMMs in chunks of CHUNK tokens through h. */
static ge_status ffn(pass_job *pj, int f, int n, ge_err *err)
{
    const path *P = pj->P;
    const alayer *l = pj->l;
    awork *w = &((ge_audio_tower *)pj->t)->ws;
    const size_t D = (size_t)pj->t->D;
    ge_status st = GE_OK;
    pj->ffn = f;
    pj->last = f == 1;
    pj->width = pj->t->n_ff;
    row_pass(pj, PASS_FFN_IN, n);
    for (int c0 = 0; c0 < n && !st; c0 += CHUNK) {
        const int cn = n - c0 < CHUNK ? n - c0 : CHUNK;
        float *ac = w->a + (size_t)c0 * D;
        if ((st = linear(P, ac, cn, &l->up[f].w, w->h, err)))
            break;
        row_pass(pj, PASS_FFN_ACT, cn);
        st = linear(P, w->h, cn, &l->down[f].w, ac, err);
    }
    if (!st)
        row_pass(pj, PASS_FFN_OUT, n);
    return st;
}

/* The local relative-position attention block: q, k and v each from its own clamp of the
 * normed input (their bounds differ; the quantiser applies them). */
static ge_status attention(pass_job *pj, int n, ge_err *err)
{
    const alayer *l = pj->l;
    awork *w = &((ge_audio_tower *)pj->t)->ws;
    row_pass(pj, PASS_ATTN_IN, n);
    const clin *qkv[3] = {&l->q, &l->k, &l->v};
    float *dst[3] = {w->q, w->k, w->v};
    ge_status st = GE_OK;
    for (int i = 0; i < 3 && !st; i++) {
        const float clip[2] = {qkv[i]->in_lo, qkv[i]->in_hi};
        st = linear_clip(pj->P, w->a, n, clip, &qkv[i]->w, dst[i], err);
    }
    if (st)
        return st;
    row_pass(pj, PASS_QKV, n);
    row_pass(pj, PASS_ATTN, n);
    if ((st = linear(pj->P, w->b, n, &l->o.w, w->a, err)))
        return st;
    row_pass(pj, PASS_ATTN_OUT, n);
    return GE_OK;
}

/* The light convolution: pw1 and the GLU in chunks (into b), the causal depthwise conv with
 * its norm and SiLU (a), pw2 (b), the residual. */
static ge_status light_conv(pass_job *pj, int n, ge_err *err)
{
    const alayer *l = pj->l;
    awork *w = &((ge_audio_tower *)pj->t)->ws;
    const size_t D = (size_t)pj->t->D;
    ge_status st = GE_OK;
    row_pass(pj, PASS_CONV_IN, n);
    for (int c0 = 0; c0 < n && !st; c0 += CHUNK) {
        const int cn = n - c0 < CHUNK ? n - c0 : CHUNK;
        if ((st = linear(pj->P, w->a + (size_t)c0 * D, cn, &l->pw1.w, w->h, err)))
            break;
        pj->off = c0;
        row_pass(pj, PASS_GLU, cn);
    }
    pj->off = 0;
    if (st)
        return st;
    row_pass(pj, PASS_DW, n);
    if ((st = linear(pj->P, w->a, n, &l->pw2.w, w->b, err)))
        return st;
    row_pass(pj, PASS_CONV_OUT, n);
    return GE_OK;
}

ge_status ge_audio_tower_encode(ge_compute *cx, ge_audio_tower *t, bool fast, const float *feat,
                                int64_t n_valid, float *out, const ge_yield *yield, ge_err *err)
{
    const int64_t L = n_valid, T1 = (L + 1) / 2, T2 = (T1 + 1) / 2;
    if (L <= 0)
        return ge_fail(err, GE_E_INPUT, "the clip has no valid feature frame");
    if (T2 > (int64_t)(((size_t)1 << 30) / work_width(t)))
        return ge_fail(err, GE_E_LIMIT, "a clip of %lld frames is too long", (long long)L);
    path P = {cx, fast, fast ? cx->kern : ge_kern_get(GE_TIER_SCALAR)};
    const int D = t->D, n = (int)T2;
    ge_status st = ge_compute_row_scratch(cx, ge_audio_tower_widest(t), err);
    if (!st)
        st = reserve(t, (size_t)n, err);
    if (!st)
        st = rel_keys(&P, t, err);
    const size_t per_layer = (size_t)9 * D + (size_t)D * t->K;
    float *nbuf = st ? NULL : malloc((2 * per_layer + (size_t)t->c0 + t->c1 + t->E) *
                                     sizeof *nbuf);
    vecs *nv = st ? NULL : calloc(2, sizeof *nv);
    if (!st && (!nbuf || !nv))
        st = ge_fail(err, GE_E_NOMEM, "out of memory");
    if (st) {
        free(nbuf), free(nv);
        return st;
    }
    awork *w = &t->ws;
    float *conv_norms = nbuf + 2 * per_layer, *bias = conv_norms + t->c0 + t->c1;
    ge_tensor_row(&t->norm0, 0, conv_norms);
    ge_tensor_row(&t->norm1, 0, conv_norms + t->c0);
    ge_tensor_row(&t->out_b, 0, bias);
    st = subsample(&P, t, feat, L, T1, T2, conv_norms, err);

    pass_job pj = {.t = t, .P = &P};
    for (int li = 0; li < t->n_layer && !st; li++) {
        load_vecs(t, &t->layers[li], &nv[li & 1], nbuf + (size_t)(li & 1) * per_layer);
        pj.l = &t->layers[li];
        pj.nv = &nv[li & 1];
        pj.rel = t->rel[fast] + (size_t)li * N_REL * D;
        if ((st = ffn(&pj, 0, n, err)) || (st = attention(&pj, n, err)) ||
            (st = light_conv(&pj, n, err)) || (st = ffn(&pj, 1, n, err)))
            break;
        if (yield && li + 1 < t->n_layer)
            yield->fn(yield->ctx); /* let waiting text waves run (--yield) */
    }

    /* output_proj with its bias, the weightless norm, and the projection into the text
     * width, in chunks through h */
    for (int c0 = 0; c0 < n && !st; c0 += CHUNK) {
        const int cn = n - c0 < CHUNK ? n - c0 : CHUNK;
        if ((st = linear(&P, w->x + (size_t)c0 * D, cn, &t->out_w, w->h, err)))
            break;
        for (int64_t i = 0; i < cn; i++)
            P.k->axpy(w->h + (size_t)i * t->E, bias, t->E, 1.0f);
        P.k->rmsnorm(w->h, cn, t->E, NULL, NORM_EPS);
        st = linear(&P, w->h, cn, &t->proj, out + (size_t)c0 * t->proj_dim, err);
    }
    free(nbuf), free(nv);
    return st;
}

/* The widest linear input (the per-worker row scratch of the reference path). */
int ge_audio_tower_widest(const ge_audio_tower *t)
{
    const int w[] = {t->D, t->n_ff, t->E, CONV_K * CONV_K * t->c0, t->c1 * t->m4};
    int m = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        m = w[i] > m ? w[i] : m;
    return m;
}
