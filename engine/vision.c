/* vision.c - the gemma4v vision tower of an mmproj GGUF (docs/gguf.md 4, docs/model.md 4 and
 * 5.2-5.3): binding with the same strict checks as the text model, and the forward from an
 * image's patches to the soft tokens that replace its <|image|> placeholders.
 *
 * The forward is one graph for both paths: `fast` picks the engine's fast linears (Q8 GEMM,
 * SGEMM panels), the tier's tiled attention and vector row kernels; otherwise every step
 * runs its reference (fp32 row dots, row-by-row attention, scalar kernels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "attention.h"
#include "linear.h"
#include "vision.h"

#define ROPE_THETA 100.0 /* docs/model.md 5.2: hard-coded for gemma4v */
#define POOL 3           /* 3x3 average pooling of the patch grid */
#define PROJ_EPS 1e-6f   /* the weightless RMSNorm before mm.input_projection (docs/model.md 4) */

typedef struct {
    ge_tensor wq, wk, wv, wo, q_norm, k_norm, ln1, attn_post, ln2, ffn_post;
    ge_tensor gate, up, down;
} vlayer;

/* The forward's buffers, token-major [n][width] (g and u: one MLP chunk), and the RoPE table. */
typedef struct {
    float *x, *a, *q, *k, *v, *g, *u;
    int32_t *lo, *hi;
    size_t cap;   /* tokens they hold */
    float *cs, *sn;
    int rope_len; /* positions in the RoPE table */
} vwork;

static void work_free(vwork *w);

struct ge_vision {
    ge_gguf *gguf;
    int D, n_layer, n_head, head_dim, n_ff, patch, n_pos, proj_dim;
    float eps;
    ge_tensor patch_embd; /* {patch * patch * 3, D}: rows in (channel, y, x) order */
    ge_tensor pos_embd;   /* {D, 2 * n_pos}: the x table, then the y table */
    ge_tensor proj;       /* {D, proj_dim} */
    vlayer *layers;
    vwork ws;
};

/* ---- binding ------------------------------------------------------------------------------ */

static ge_status bind_layer(const ge_vision *v, int i, vlayer *l, ge_err *err)
{
    const int D = v->D, F = v->n_ff, hd = v->head_dim;
    const struct {
        const char *suffix;
        int64_t ne0, ne1;
        ge_tensor *t;
    } want[] = {
        {"attn_q", D, D, &l->wq},          {"attn_k", D, D, &l->wk},
        {"attn_v", D, D, &l->wv},          {"attn_out", D, D, &l->wo},
        {"attn_q_norm", hd, 1, &l->q_norm}, {"attn_k_norm", hd, 1, &l->k_norm},
        {"ln1", D, 1, &l->ln1},            {"attn_post_norm", D, 1, &l->attn_post},
        {"ln2", D, 1, &l->ln2},            {"ffn_post_norm", D, 1, &l->ffn_post},
        {"ffn_gate", D, F, &l->gate},      {"ffn_up", D, F, &l->up},
        {"ffn_down", F, D, &l->down},
    };
    char name[96];
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        snprintf(name, sizeof name, "v.blk.%d.%s.weight", i, want[k].suffix);
        ge_status st = ge_tensor_bind(v->gguf, name, (int64_t[4]){want[k].ne0, want[k].ne1, 1, 1},
                                      1, want[k].t, err);
        if (st)
            return st;
    }
    /* clipped linears and layer scalars are not part of EmbeddingGemma 2's tower: a file that
     * has them computes something else, so it is refused rather than half-honoured */
    static const char *const extra[] = {"attn_q.input_min", "out_scale"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
        snprintf(name, sizeof name, "v.blk.%d.%s.weight", i, extra[k]);
        if (ge_gguf_tensor_find(v->gguf, name) ||
            (snprintf(name, sizeof name, "v.blk.%d.%s", i, extra[k]),
             ge_gguf_tensor_find(v->gguf, name)))
            return ge_fail(err, GE_E_UNSUPPORTED, "%s: tensor %s: clipped linears and layer "
                           "scalars are not supported in the vision tower", v->gguf->path, name);
    }
    return GE_OK;
}

static ge_status bind_vision(ge_vision *v, int text_hidden, ge_err *err)
{
    const ge_gguf *g = v->gguf;
    ge_status st = ge_mmproj_check(g, "vision", "gemma4v", GE_NO_VISION_ENCODER, err);
    const int big = 1 << 16;
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.embedding_length", 1, big, &v->D, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.block_count", 1, 1024, &v->n_layer, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.attention.head_count", 1, 1024, &v->n_head, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.feed_forward_length", 1, big * 4, &v->n_ff, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.patch_size", 1, 64, &v->patch, err);
    if (!st)
        st = ge_gguf_get_int_in(g, "clip.vision.projection_dim", 1, big, &v->proj_dim, err);
    if (!st)
        st = ge_gguf_get_f32_in(g, "clip.vision.attention.layer_norm_epsilon", 0.0f, 1.0f,
                                &v->eps, err);
    /* the pixel mean and std are not read (the graph scales pixels to [-1, 1] itself), but a
     * file whose std is not positive or whose values are not finite is damaged */
    float mean[3] = {0}, sd[3] = {1, 1, 1};
    if (!st && ge_gguf_find(g, "clip.vision.image_mean"))
        st = ge_gguf_get_f32_array(g, "clip.vision.image_mean", mean, 3, err);
    if (!st && ge_gguf_find(g, "clip.vision.image_std"))
        st = ge_gguf_get_f32_array(g, "clip.vision.image_std", sd, 3, err);
    for (int c = 0; c < 3 && !st; c++)
        if (!isfinite(mean[c]) || !isfinite(sd[c]) || !(sd[c] > 0.0f))
            st = ge_fail(err, GE_E_FORMAT, "%s: clip.vision.image_mean / image_std: channel %d "
                         "is %g / %g", g->path, c, (double)mean[c], (double)sd[c]);
    if (st)
        return st;
    /* the image path cuts GE_IMAGE_PATCH-pixel patches (GE_IMAGE_PATCH_DIM values each): a
     * tower with other patches would read past every patch buffer */
    if (v->patch != GE_IMAGE_PATCH)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: clip.vision.patch_size %d is not supported "
                       "(images are cut into %d-pixel patches)", g->path, v->patch,
                       GE_IMAGE_PATCH);
    if (v->D % v->n_head || (v->D / v->n_head) % 4)
        return ge_fail(err, GE_E_FORMAT, "%s: width %d does not split into %d heads of a "
                       "multiple of 4 (2-D RoPE)", g->path, v->D, v->n_head);
    v->head_dim = v->D / v->n_head;
    if (v->proj_dim != text_hidden)
        return ge_fail(err, GE_E_FORMAT, "%s: clip.vision.projection_dim %d does not match the "
                       "text model's hidden size %d", g->path, v->proj_dim, text_hidden);
    const ge_gguf_tensor *pt = ge_gguf_tensor_find(g, "v.position_embd.weight");
    v->n_pos = pt && pt->ne[1] > 0 && pt->ne[1] <= (uint64_t)big ? (int)pt->ne[1] : 1;
    const int p = v->patch;
    if ((st = ge_tensor_bind(g, "v.patch_embd.weight", (int64_t[4]){p, p, 3, v->D}, 3,
                             &v->patch_embd, err)) ||
        (st = ge_tensor_bind(g, "v.position_embd.weight", (int64_t[4]){v->D, v->n_pos, 2, 1}, 1,
                             &v->pos_embd, err)) ||
        (st = ge_tensor_bind(g, "mm.input_projection.weight",
                             (int64_t[4]){v->D, v->proj_dim, 1, 1}, 1, &v->proj, err)))
        return st;
    if (ge_gguf_tensor_find(g, "v.std_bias") || ge_gguf_tensor_find(g, "v.std_bias.weight"))
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: a standardized vision tower (v.std_bias) is "
                       "not supported", g->path);
    v->layers = calloc((size_t)v->n_layer, sizeof *v->layers);
    if (!v->layers)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    for (int i = 0; i < v->n_layer && !st; i++)
        st = bind_layer(v, i, &v->layers[i], err);
    return st;
}

ge_status ge_vision_open(ge_vision **out, const char *path, int text_hidden, ge_err *err)
{
    *out = NULL;
    ge_vision *v = calloc(1, sizeof *v);
    if (!v)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", path);
    ge_status st = ge_gguf_open(&v->gguf, path, err);
    if (!st)
        st = bind_vision(v, text_hidden, err);
    if (st) {
        ge_vision_free(v);
        return st;
    }
    *out = v;
    return GE_OK;
}

void ge_vision_free(ge_vision *v)
{
    if (!v)
        return;
    free(v->layers);
    work_free(&v->ws);
    ge_gguf_close(v->gguf);
    free(v);
}

void ge_vision_trim(ge_vision *v) { work_free(&v->ws); }

ge_status ge_vision_prepack(ge_compute *cx, const ge_vision *v, ge_err *err)
{
    ge_status st = ge_linear_prepack(cx, (const ge_tensor *const[]){&v->patch_embd, &v->proj}, 2,
                                     err);
    for (int i = 0; i < v->n_layer && !st; i++) {
        const vlayer *l = &v->layers[i];
        const ge_tensor *const ts[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->gate, &l->up,
                                       &l->down};
        st = ge_linear_prepack(cx, ts, sizeof ts / sizeof ts[0], err);
    }
    return st;
}

int ge_vision_patch(const ge_vision *v) { return v->patch; }
int ge_vision_widest(const ge_vision *v) { return v->n_ff > v->D ? v->n_ff : v->D; }

/* ---- forward ------------------------------------------------------------------------------ */

#define ROW_BLOCK 32    /* tokens per task of the per-token row passes */
#define MLP_CHUNK 1024  /* tokens per gate/up/down pass: bounds the [tokens][n_ff] buffers */

typedef struct {
    ge_compute *cx;
    bool fast;
    const ge_kern *k; /* row kernels: the tier's, or the scalar reference */
} path;

static ge_status linear(const path *P, const float *x, int n, const ge_linear_out *o, int n_o,
                        ge_err *err)
{
    return P->fast ? ge_linear_many_media(P->cx, x, n, NULL, o, n_o, err)
                   : ge_linear_many_ref(P->cx, x, n, NULL, o, n_o, err);
}

/* The workspace, kept between images and grown to the largest grid seen. */
static ge_status reserve(ge_vision *v, size_t n, ge_err *err)
{
    vwork *w = &v->ws;
    if (n <= w->cap)
        return GE_OK;
    const size_t D = (size_t)v->D;
    const size_t chunk = n < MLP_CHUNK ? n : MLP_CHUNK, F = (size_t)v->n_ff;
    float **f[] = {&w->x, &w->a, &w->q, &w->k, &w->v};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        free(*f[i]);
        *f[i] = ge_floats(n * D);
    }
    free(w->g), free(w->u), free(w->lo), free(w->hi);
    w->g = ge_floats(chunk * F);
    w->u = ge_floats(chunk * F);
    w->lo = calloc(n, sizeof *w->lo);
    w->hi = malloc(n * sizeof *w->hi);
    w->cap = n;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!*f[i])
            w->cap = 0;
    if (!w->g || !w->u || !w->lo || !w->hi)
        w->cap = 0;
    return w->cap ? GE_OK : ge_fail(err, GE_E_NOMEM, "out of memory for a %zu-patch image", n);
}

static void work_free(vwork *w)
{
    free(w->x), free(w->a), free(w->q), free(w->k), free(w->v);
    free(w->g), free(w->u), free(w->lo), free(w->hi);
    free(w->cs), free(w->sn);
    memset(w, 0, sizeof *w);
}

/* cos/sin of pos * theta^(-2j/half) for j < half / 2, pos < n (double, as the reference);
 * kept and grown like the workspace */
static ge_status rope_table(vwork *w, int n, int half, ge_err *err)
{
    if (n <= w->rope_len)
        return GE_OK;
    const int q = half / 2;
    free(w->cs), free(w->sn);
    w->cs = malloc((size_t)n * q * sizeof *w->cs);
    w->sn = malloc((size_t)n * q * sizeof *w->sn);
    w->rope_len = 0;
    if (!w->cs || !w->sn)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    for (int p = 0; p < n; p++)
        for (int j = 0; j < q; j++) {
            double a = p * pow(ROPE_THETA, -2.0 * j / half);
            w->cs[(size_t)p * q + j] = (float)cos(a);
            w->sn[(size_t)p * q + j] = (float)sin(a);
        }
    w->rope_len = n;
    return GE_OK;
}

/* One layer's norm weights as fp32 (the row passes read them from every worker). */
typedef struct {
    float *ln1, *q_norm, *k_norm, *attn_post, *ln2, *ffn_post;
} norms;

/* The per-token row passes between the GEMMs, threaded over blocks of ROW_BLOCK tokens. */
typedef enum {
    PASS_PRE_ATTN, /* a = ln1(x) */
    PASS_QKV,      /* q, k: their norms and 2-D RoPE; v: the weightless norm */
    PASS_POST_ATTN,/* x += attn_post(q) (the attention's projection); a = ln2(x) */
    PASS_GELU,     /* g = gelu(g) * u (rows of n_ff) */
    PASS_POST_MLP, /* x += ffn_post(a); then a = ln1(x) of the next layer when there is one */
} pass_kind;

typedef struct {
    const ge_vision *v;
    const path *P;
    pass_kind kind;
    const norms *cur, *next;
    const int32_t *pos;
    int64_t n;    /* tokens */
    ge_act gelu;
} pass_job;

static void pass_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const pass_job *j = ctx;
    const ge_vision *v = j->v;
    const vwork *w = &v->ws;
    const ge_kern *k = j->P->k;
    const int64_t t0 = task * ROW_BLOCK, t1 = t0 + ROW_BLOCK < j->n ? t0 + ROW_BLOCK : j->n;
    const size_t D = (size_t)v->D, off = (size_t)t0 * D, len = (size_t)(t1 - t0) * D;
    const int nh = v->n_head, hd = v->head_dim, q4 = hd / 4;
    switch (j->kind) {
    case PASS_POST_ATTN:
    case PASS_POST_MLP: {
        const bool attn = j->kind == PASS_POST_ATTN;
        float *branch = attn ? w->q : w->a; /* the attention's or the MLP's output */
        k->rmsnorm(branch + off, t1 - t0, D, attn ? j->cur->attn_post : j->cur->ffn_post, v->eps);
        k->axpy(w->x + off, branch + off, (int64_t)len, 1.0f);
        const float *next = attn ? j->cur->ln2 : j->next ? j->next->ln1 : NULL;
        if (next) {
            memcpy(w->a + off, w->x + off, len * sizeof *w->a);
            k->rmsnorm(w->a + off, t1 - t0, D, next, v->eps);
        }
        break;
    }
    case PASS_PRE_ATTN:
        memcpy(w->a + off, w->x + off, len * sizeof *w->a);
        k->rmsnorm(w->a + off, t1 - t0, D, j->cur->ln1, v->eps);
        break;
    case PASS_QKV:
        k->rmsnorm(w->q + off, (t1 - t0) * nh, hd, j->cur->q_norm, v->eps);
        k->rmsnorm(w->k + off, (t1 - t0) * nh, hd, j->cur->k_norm, v->eps);
        k->rmsnorm(w->v + off, (t1 - t0) * nh, hd, NULL, v->eps);
        /* 2-D RoPE: the first half of each head turns with the column, the second with the row */
        for (int64_t t = t0; t < t1; t++)
            for (int axis = 0; axis < 2; axis++) {
                const float *c = w->cs + (size_t)j->pos[2 * t + axis] * q4;
                const float *s = w->sn + (size_t)j->pos[2 * t + axis] * q4;
                for (int h = 0; h < nh; h++) {
                    size_t at = (size_t)t * D + (size_t)h * hd + (size_t)axis * (hd / 2);
                    k->rope(w->q + at, 1, hd / 2, c, s);
                    k->rope(w->k + at, 1, hd / 2, c, s);
                }
            }
        break;
    case PASS_GELU:
        k->act_mul(w->g + (size_t)t0 * v->n_ff, w->u + (size_t)t0 * v->n_ff,
                    (t1 - t0) * v->n_ff, j->gelu, NULL);
        break;
    }
}

static void row_pass(pass_job *j, pass_kind kind, int64_t n)
{
    j->kind = kind;
    j->n = n;
    ge_parallel(j->P->cx, (n + ROW_BLOCK - 1) / ROW_BLOCK, 0, pass_task, j);
}

static void load_norms(const ge_vision *v, const vlayer *l, norms *nm, float *buf)
{
    const int D = v->D, hd = v->head_dim;
    *nm = (norms){buf, buf + D, buf + D + hd, buf + D + 2 * hd, buf + 2 * D + 2 * hd,
                  buf + 3 * D + 2 * hd};
    ge_tensor_row(&l->ln1, 0, nm->ln1);
    ge_tensor_row(&l->q_norm, 0, nm->q_norm);
    ge_tensor_row(&l->k_norm, 0, nm->k_norm);
    ge_tensor_row(&l->attn_post, 0, nm->attn_post);
    ge_tensor_row(&l->ln2, 0, nm->ln2);
    ge_tensor_row(&l->ffn_post, 0, nm->ffn_post);
}

ge_status ge_vision_encode(ge_compute *cx, ge_vision *v, bool fast, const float *patches,
                           const int32_t *pos, int n, int pw, int ph, float *out,
                           const ge_yield *yield, ge_err *err)
{
    const int D = v->D, hd = v->head_dim, nh = v->n_head, pp = v->patch;
    const int in_w = pp * pp * 3;
    if (n != pw * ph || pw % POOL || ph % POOL || n <= 0)
        return ge_fail(err, GE_E_INPUT, "a %dx%d patch grid cannot be pooled %dx%d", pw, ph,
                       POOL, POOL);
    if (pw > v->n_pos || ph > v->n_pos)
        return ge_fail(err, GE_E_LIMIT, "a %dx%d patch grid exceeds the position tables (%d)",
                       pw, ph, v->n_pos);
    path P = {cx, fast, fast ? cx->kern : ge_kern_get(GE_TIER_SCALAR)};
    const size_t N = (size_t)n;
    ge_status st = ge_compute_row_scratch(cx, ge_vision_widest(v) > in_w ? ge_vision_widest(v)
                                                                       : in_w, err);
    if (!st)
        st = reserve(v, N, err);
    if (!st)
        st = rope_table(&v->ws, pw > ph ? pw : ph, hd / 2, err);
    float *nbuf = st ? NULL : malloc((size_t)(2 * (4 * D + 2 * hd) + D) * sizeof *nbuf);
    if (!st && !nbuf)
        st = ge_fail(err, GE_E_NOMEM, "out of memory");
    if (st)
        return st;
    vwork *w = &v->ws;
    float *row = nbuf + 2 * (4 * D + 2 * hd);

    /* patch embedding: the patch (y, x, c) to the kernel's (c, y, x) order, scaled to [-1, 1];
     * the reordered copy is freed at once, before the layers touch the workspace (peak RSS) */
    float *in = malloc(N * in_w * sizeof *in);
    if (!in) {
        st = ge_fail(err, GE_E_NOMEM, "out of memory for a %d-patch image", n);
        goto done;
    }
    for (size_t t = 0; t < N; t++)
        for (int c = 0; c < 3; c++)
            for (int yx = 0; yx < pp * pp; yx++)
                in[t * in_w + (size_t)c * pp * pp + yx] =
                    2.0f * (patches[t * in_w + (size_t)yx * 3 + c] - 0.5f);
    st = linear(&P, in, n, (ge_linear_out[]){{&v->patch_embd, w->x}}, 1, err);
    free(in);
    if (st)
        goto done;
    for (size_t t = 0; t < N; t++) {
        for (int axis = 0; axis < 2; axis++) {
            ge_tensor_row(&v->pos_embd, (int64_t)axis * v->n_pos + pos[2 * t + axis], row);
            for (int i = 0; i < D; i++)
                w->x[t * D + i] += row[i];
        }
        w->lo[t] = 0;
        w->hi[t] = n;
    }

    norms nm[2];
    pass_job pj = {.v = v, .P = &P, .pos = pos,
                   .gelu = cx->cfg.v[GE_CFG_SEMANTICS] == GE_SEM_LLAMACPP ? GE_GELU_QUICK
                                                                        : GE_GELU_TANH};
    load_norms(v, &v->layers[0], &nm[0], nbuf);
    pj.cur = &nm[0];
    row_pass(&pj, PASS_PRE_ATTN, n);
    for (int li = 0; li < v->n_layer && !st; li++) {
        const vlayer *l = &v->layers[li];
        pj.cur = &nm[li & 1];
        pj.next = NULL;
        if (li + 1 < v->n_layer) {
            load_norms(v, &v->layers[li + 1], &nm[(li + 1) & 1],
                       nbuf + (size_t)((li + 1) & 1) * (4 * D + 2 * hd));
            pj.next = &nm[(li + 1) & 1];
        }
        if ((st = linear(&P, w->a, n, (ge_linear_out[]){{&l->wq, w->q}, {&l->wk, w->k},
                                                        {&l->wv, w->v}}, 3, err)))
            break;
        row_pass(&pj, PASS_QKV, n);
        /* a is free from the QKV GEMM to the attention output's projection: it takes the
         * attention output, and q (free after the attention) the projection's */
        ge_attn_args aa = {.q = w->q, .k = w->k, .v = w->v, .o = w->a, .ldq = D, .ldkv = D,
                           .ldo = D, .n_head = nh, .n_kv = nh, .head_dim = hd, .scale = 1.0f,
                           .key_lo = w->lo, .key_hi = w->hi};
        ge_attention_dense(cx, &aa, n, fast); /* every patch sees every patch */
        if ((st = linear(&P, w->a, n, (ge_linear_out[]){{&l->wo, w->q}}, 1, err)))
            break;
        row_pass(&pj, PASS_POST_ATTN, n);
        /* the MLP in chunks of tokens: a -> g, u -> gelu -> a (the chunk's rows of a are read
         * by gate/up before down overwrites them) */
        for (int c0 = 0; c0 < n && !st; c0 += MLP_CHUNK) {
            const int cn = n - c0 < MLP_CHUNK ? n - c0 : MLP_CHUNK;
            float *ac = w->a + (size_t)c0 * D;
            if ((st = linear(&P, ac, cn, (ge_linear_out[]){{&l->gate, w->g}, {&l->up, w->u}},
                             2, err)))
                break;
            row_pass(&pj, PASS_GELU, cn);
            st = linear(&P, w->g, cn, (ge_linear_out[]){{&l->down, ac}}, 1, err);
        }
        if (st)
            break;
        row_pass(&pj, PASS_POST_MLP, n);
        /* let waiting text waves run between layers (--yield) */
        if (yield && li + 1 < v->n_layer)
            yield->fn(yield->ctx);
    }
    if (st)
        goto done;

    /* 3x3 average pooling in pooled row-major order, times sqrt(D); then the weightless norm
     * and the projection into the text model's width */
    const int qw = pw / POOL, qh = ph / POOL, n_img = qw * qh;
    const float root = sqrtf((float)D);
    for (int qy = 0; qy < qh; qy++)
        for (int qx = 0; qx < qw; qx++) {
            float *dst = w->a + ((size_t)qy * qw + qx) * D;
            memset(dst, 0, (size_t)D * sizeof *dst);
            for (int dy = 0; dy < POOL; dy++)
                for (int dx = 0; dx < POOL; dx++) {
                    const float *src = w->x + ((size_t)(qy * POOL + dy) * pw + qx * POOL + dx) * D;
                    for (int i = 0; i < D; i++)
                        dst[i] += src[i];
                }
            for (int i = 0; i < D; i++)
                dst[i] = dst[i] / (float)(POOL * POOL) * root;
        }
    P.k->rmsnorm(w->a, n_img, D, NULL, PROJ_EPS);
    st = linear(&P, w->a, n_img, (ge_linear_out[]){{&v->proj, out}}, 1, err);
done:
    free(nbuf);
    return st;
}
