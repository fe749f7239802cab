/* vision.c - the gemma4v vision tower of an mmproj GGUF (GGUF.md 4, SPEC.md 4 and 5.2-5.3):
 * binding with the same strict checks as the text model, and the forward from an image's
 * patches to the soft tokens that replace its <|image|> placeholders.
 *
 * The forward is one graph for both paths: `fast` picks the engine's fast linears (Q8 GEMM,
 * SGEMM panels), the tier's tiled attention and vector row kernels; otherwise every step
 * runs its reference (fp32 row dots, row-by-row attention, scalar kernels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "model.h"

#define ROPE_THETA 100.0 /* SPEC.md 5.2: hard-coded for gemma4v */
#define POOL 3           /* 3x3 average pooling of the patch grid */
#define PROJ_EPS 1e-6f   /* the weightless RMSNorm before mm.input_projection (SPEC.md 4) */

typedef struct {
    ge_tensor wq, wk, wv, wo, q_norm, k_norm, ln1, attn_post, ln2, ffn_post;
    ge_tensor gate, up, down;
} vlayer;

struct ge_vision {
    ge_gguf *gguf;
    int D, n_layer, n_head, head_dim, n_ff, patch, n_pos, proj_dim;
    float eps;
    ge_tensor patch_embd; /* {patch * patch * 3, D}: rows in (channel, y, x) order */
    ge_tensor pos_embd;   /* {D, 2 * n_pos}: the x table, then the y table */
    ge_tensor proj;       /* {D, proj_dim} */
    vlayer *layers;
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
    ge_gguf_str s;
    ge_status st = ge_gguf_get_str(g, "general.architecture", &s, err);
    if (!st && !ge_gguf_str_eq(s, "clip"))
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: architecture \"%.*s\" is not an mmproj "
                     "(expected \"clip\")", g->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
    bool has = false;
    if (!st)
        st = ge_gguf_get_bool_or(g, "clip.has_vision_encoder", false, &has, err);
    if (!st && !has)
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: the mmproj has no vision encoder "
                     "(clip.has_vision_encoder)", g->path);
    if (!st)
        st = ge_gguf_get_str(g, "clip.vision.projector_type", &s, err);
    if (!st && !ge_gguf_str_eq(s, "gemma4v"))
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: vision projector \"%.*s\" is not supported "
                     "(expected \"gemma4v\")", g->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
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
        st = ge_gguf_get_f32(g, "clip.vision.attention.layer_norm_epsilon", &v->eps, err);
    if (st)
        return st;
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
    ge_gguf_close(v->gguf);
    free(v);
}

int ge_vision_patch(const ge_vision *v) { return v->patch; }
int ge_vision_widest(const ge_vision *v) { return v->n_ff > v->D ? v->n_ff : v->D; }

/* ---- forward ------------------------------------------------------------------------------ */

typedef struct {
    ge_model *m;
    bool fast;
    const ge_kern *k; /* row kernels: the tier's, or the scalar reference */
} path;

static ge_status linear(const path *P, const float *x, int n, const ge_linear_out *o, int n_o,
                        ge_err *err)
{
    return P->fast ? ge_linear_many(P->m, x, n, o, n_o, err)
                   : ge_linear_many_ref(P->m, x, n, o, n_o, err);
}

/* cos/sin of pos * theta^(-2j/half) for j < half / 2, pos < n (double, as the reference) */
static ge_status rope_table(int n, int half, float **cs, float **sn, ge_err *err)
{
    const int q = half / 2;
    *cs = malloc((size_t)n * q * sizeof **cs);
    *sn = malloc((size_t)n * q * sizeof **sn);
    if (!*cs || !*sn)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    for (int p = 0; p < n; p++)
        for (int j = 0; j < q; j++) {
            double a = p * pow(ROPE_THETA, -2.0 * j / half);
            (*cs)[(size_t)p * q + j] = (float)cos(a);
            (*sn)[(size_t)p * q + j] = (float)sin(a);
        }
    return GE_OK;
}

ge_status ge_vision_encode(ge_model *m, const ge_vision *v, bool fast, const float *patches,
                           const int32_t *pos, int n, int pw, int ph, float *out, ge_err *err)
{
    const int D = v->D, F = v->n_ff, hd = v->head_dim, nh = v->n_head, pp = v->patch;
    const int in_w = pp * pp * 3;
    if (n != pw * ph || pw % POOL || ph % POOL || n <= 0)
        return ge_fail(err, GE_E_INPUT, "a %dx%d patch grid cannot be pooled %dx%d", pw, ph,
                       POOL, POOL);
    if (pw > v->n_pos || ph > v->n_pos)
        return ge_fail(err, GE_E_LIMIT, "a %dx%d patch grid exceeds the position tables (%d)",
                       pw, ph, v->n_pos);
    path P = {m, fast, fast ? m->kern : ge_kern_get(GE_TIER_SCALAR)};
    ge_status st = ge_model_row_scratch(m, ge_vision_widest(v) > in_w ? ge_vision_widest(v)
                                                                       : in_w, err);
    if (st)
        return st;
    const size_t N = (size_t)n;
    float *x = malloc(N * D * sizeof *x), *a = malloc(N * D * sizeof *a);
    float *q = malloc(N * D * sizeof *q), *k = malloc(N * D * sizeof *k);
    float *vv = malloc(N * D * sizeof *vv), *o = malloc(N * D * sizeof *o);
    float *g = malloc(N * F * sizeof *g), *u = malloc(N * F * sizeof *u);
    float *in = malloc(N * in_w * sizeof *in), *row = malloc((size_t)D * sizeof *row);
    int32_t *lo = calloc(N, sizeof *lo), *hi = malloc(N * sizeof *hi);
    float *cs = NULL, *sn = NULL;
    if (!x || !a || !q || !k || !vv || !o || !g || !u || !in || !row || !lo || !hi) {
        st = ge_fail(err, GE_E_NOMEM, "out of memory for a %d-patch image", n);
        goto done;
    }
    int longest = pw > ph ? pw : ph;
    if ((st = rope_table(longest, hd / 2, &cs, &sn, err)))
        goto done;

    /* patch embedding: the patch (y, x, c) to the kernel's (c, y, x) order, scaled to [-1, 1] */
    for (size_t t = 0; t < N; t++)
        for (int c = 0; c < 3; c++)
            for (int yx = 0; yx < pp * pp; yx++)
                in[t * in_w + (size_t)c * pp * pp + yx] =
                    2.0f * (patches[t * in_w + (size_t)yx * 3 + c] - 0.5f);
    if ((st = linear(&P, in, n, (ge_linear_out[]){{&v->patch_embd, x}}, 1, err)))
        goto done;
    for (size_t t = 0; t < N; t++) {
        for (int axis = 0; axis < 2; axis++) {
            ge_tensor_row(&v->pos_embd, (int64_t)axis * v->n_pos + pos[2 * t + axis], row);
            for (int i = 0; i < D; i++)
                x[t * D + i] += row[i];
        }
        hi[t] = n;
    }

    float *w = malloc((size_t)(F > D ? F : D) * sizeof *w);
    if (!w) {
        st = ge_fail(err, GE_E_NOMEM, "out of memory");
        goto done;
    }
    const int q4 = hd / 4; /* rope table columns per axis */
    for (int li = 0; li < v->n_layer && !st; li++) {
        const vlayer *l = &v->layers[li];
        memcpy(a, x, N * D * sizeof *a);
        ge_tensor_row(&l->ln1, 0, w);
        P.k->rmsnorm(a, n, D, w, v->eps);
        if ((st = linear(&P, a, n, (ge_linear_out[]){{&l->wq, q}, {&l->wk, k}, {&l->wv, vv}}, 3,
                         err)))
            break;
        ge_tensor_row(&l->q_norm, 0, w);
        P.k->rmsnorm(q, (int64_t)n * nh, hd, w, v->eps);
        ge_tensor_row(&l->k_norm, 0, w);
        P.k->rmsnorm(k, (int64_t)n * nh, hd, w, v->eps);
        P.k->rmsnorm(vv, (int64_t)n * nh, hd, NULL, v->eps);
        /* 2-D RoPE: the first half of each head turns with the column, the second with the row */
        for (size_t t = 0; t < N; t++)
            for (int h = 0; h < nh; h++)
                for (int axis = 0; axis < 2; axis++) {
                    const float *c = cs + (size_t)pos[2 * t + axis] * q4;
                    const float *s = sn + (size_t)pos[2 * t + axis] * q4;
                    size_t at = t * D + (size_t)h * hd + (size_t)axis * (hd / 2);
                    P.k->rope(q + at, 1, hd / 2, c, s);
                    P.k->rope(k + at, 1, hd / 2, c, s);
                }
        ge_attn_args aa = {.q = q, .k = k, .v = vv, .o = o, .ldq = D, .ldkv = D, .ldo = D,
                           .n_head = nh, .n_kv = nh, .head_dim = hd, .scale = 1.0f,
                           .key_lo = lo, .key_hi = hi};
        ge_attention_dense(m, &aa, n, fast); /* every patch sees every patch */
        if ((st = linear(&P, o, n, (ge_linear_out[]){{&l->wo, a}}, 1, err)))
            break;
        ge_tensor_row(&l->attn_post, 0, w);
        P.k->rmsnorm(a, n, D, w, v->eps);
        for (size_t i = 0; i < N * D; i++)
            x[i] += a[i];
        memcpy(a, x, N * D * sizeof *a);
        ge_tensor_row(&l->ln2, 0, w);
        P.k->rmsnorm(a, n, D, w, v->eps);
        if ((st = linear(&P, a, n, (ge_linear_out[]){{&l->gate, g}, {&l->up, u}}, 2, err)))
            break;
        P.k->gelu_mul(g, u, (int64_t)N * F);
        if ((st = linear(&P, g, n, (ge_linear_out[]){{&l->down, a}}, 1, err)))
            break;
        ge_tensor_row(&l->ffn_post, 0, w);
        P.k->rmsnorm(a, n, D, w, v->eps);
        for (size_t i = 0; i < N * D; i++)
            x[i] += a[i];
    }
    free(w);
    if (st)
        goto done;

    /* 3x3 average pooling in pooled row-major order, times sqrt(D); then the weightless norm
     * and the projection into the text model's width */
    const int qw = pw / POOL, qh = ph / POOL, n_img = qw * qh;
    const float root = sqrtf((float)D);
    for (int cy = 0; cy < qh; cy++)
        for (int cx = 0; cx < qw; cx++) {
            float *dst = a + ((size_t)cy * qw + cx) * D;
            memset(dst, 0, (size_t)D * sizeof *dst);
            for (int dy = 0; dy < POOL; dy++)
                for (int dx = 0; dx < POOL; dx++) {
                    const float *src = x + ((size_t)(cy * POOL + dy) * pw + cx * POOL + dx) * D;
                    for (int i = 0; i < D; i++)
                        dst[i] += src[i];
                }
            for (int i = 0; i < D; i++)
                dst[i] = dst[i] / (float)(POOL * POOL) * root;
        }
    P.k->rmsnorm(a, n_img, D, NULL, PROJ_EPS);
    st = linear(&P, a, n_img, (ge_linear_out[]){{&v->proj, out}}, 1, err);
done:
    free(x), free(a), free(q), free(k), free(vv), free(o), free(g), free(u), free(in);
    free(row), free(lo), free(hi), free(cs), free(sn);
    return st;
}
