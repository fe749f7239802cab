/* linear.c - y = x W^T for the encoder: Q8_0 GEMM, the other quantised types' GEMM, panel
 * SGEMM or the reference row dots, split into (output rows x token block) tasks on the pool.
 *
 * Weights are repacked once into the kernel tier's layout on first use (or all at load with
 * --prepack) and cached by their identity (data pointer, type, shape); with --release-weights
 * the file pages of a repacked tensor are dropped so that resident memory holds one copy.
 * SGEMM panels keep the weight's type (kernels/sgemm.h), so that copy is no bigger than the
 * file's tensor. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dtype.h"
#include "kq.h"
#include "linear.h"

enum { PACK_Q8 = 1, PACK_SG = 2, KQ = 3 /* packed by the tier, or its file rows in place */ };

typedef struct {
    /* key: the weight's whole identity, so that two weights can never share an entry (a
     * smaller one's buffer handed to a bigger one is an out-of-bounds read) even if their
     * data starts at the same address (the GGUF reader refuses overlapping tensors) */
    const void *src;
    uint32_t type;
    int64_t ne0, ne1;
    size_t row_bytes;
    int kind;     /* PACK_Q8 / PACK_SG */
    ge_tier tier; /* layouts differ between tiers */
    void *data;
} pack_entry;

static bool same_weight(const pack_entry *e, const ge_tensor *w, int kind, ge_tier tier)
{
    return e->src == w->data && e->type == w->type && e->ne0 == w->ne0 && e->ne1 == w->ne1 &&
           e->row_bytes == w->row_bytes && e->kind == kind && e->tier == tier;
}

/* Repacked weights live in a few large anonymous mappings that ask for transparent huge
 * pages: the first touch of ~150 MB in 4 KiB pages was 37,000 page faults, about 3% of a
 * 64-text run. Untouched tails stay unmapped, so resident memory is what was packed (plus
 * at most one huge page per mapping). */
#define ARENA_MIN ((size_t)64 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

typedef struct arena_chunk {
    struct arena_chunk *next;
    void *map;
    size_t map_len, used, len; /* bump offset and usable length from `base` */
    uint8_t *base;             /* map rounded up to a huge page */
} arena_chunk;

struct ge_packed_cache {
    pthread_mutex_t mu;
    arena_chunk *arena;
    pack_entry *v;
    size_t n, cap;
    ge_q8_act act; /* activation scratch, grown as needed */
    size_t act_cap_q, act_cap_d, act_cap_16;
    int32_t *sum16; /* act.sum16 when the span needs it */
};

static ge_packed_cache *cache_of(ge_compute *cx)
{
    if (!cx->packed) {
        ge_packed_cache *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        pthread_mutex_init(&c->mu, NULL);
        cx->packed = c;
    }
    return cx->packed;
}

/* bytes (64-byte aligned) from the cache's arena, NULL when out of memory */
static void *arena_alloc(ge_packed_cache *c, size_t bytes)
{
    bytes = (bytes + 63) / 64 * 64;
    arena_chunk *a = c->arena;
    if (!a || a->len - a->used < bytes) {
        size_t len = bytes > ARENA_MIN ? (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE
                                       : ARENA_MIN;
        size_t map_len = len + HUGE_PAGE;
        void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED)
            return NULL;
        if (!(a = malloc(sizeof *a))) {
            munmap(map, map_len);
            return NULL;
        }
        a->map = map, a->map_len = map_len, a->used = 0, a->len = len;
        a->base = (uint8_t *)(((uintptr_t)map + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
        madvise(a->base, len, MADV_HUGEPAGE); /* a hint: without THP, plain pages */
#endif
        a->next = c->arena;
        c->arena = a;
    }
    void *p = a->base + a->used;
    a->used += bytes;
    return p;
}

void ge_linear_cache_free(ge_compute *cx)
{
    ge_packed_cache *c = cx->packed;
    if (!c)
        return;
    for (arena_chunk *a = c->arena, *next; a; a = next) {
        next = a->next;
        munmap(a->map, a->map_len);
        free(a);
    }
    free(c->v);
    free(c->act.qs);
    free(c->act.d);
    free(c->act.sum);
    free(c->sum16);
    pthread_mutex_destroy(&c->mu);
    free(c);
    cx->packed = NULL;
}

/* ---- which path ---------------------------------------------------------------------------- */

/* The kernel table for a Q8_0 GEMM over n_tok tokens, or NULL for the reference path. */
static const ge_kern *q8_kernels(const ge_compute *cx, int n_tok)
{
    const ge_kern *k = cx->kern;
    if (k->tier == GE_TIER_AVXVNNI &&
        (!cx->cfg.v[GE_CFG_VNNI256] || (n_tok <= 8 && !cx->cfg.v[GE_CFG_VNNI256_SHORT])))
        k = ge_kern_get(GE_TIER_AVX2);
    return k->q8_gemm ? k : NULL;
}

/* The kernel table for a quantised type other than Q8_0, or NULL for the reference path. */
static const ge_kern *kq_kernels(const ge_compute *cx, uint32_t type)
{
    return cx->kern->kq_gemm && ge_kq_span(type) ? cx->kern : NULL;
}

static const ge_kern *sg_kernels(const ge_compute *cx, uint32_t type)
{
    /* the scalar tier's SGEMM is a bit-exact oracle built on fmaf (a library call without
     * FMA hardware): on that tier the reference row dots are both the reference and faster */
    if (!cx->cfg.v[GE_CFG_SGEMM] || !cx->kern->sgemm || cx->kern->tier == GE_TIER_SCALAR)
        return NULL;
    return type == GE_T_F32 || type == GE_T_F16 || type == GE_T_BF16 ? cx->kern : NULL;
}

/* ---- packing ---------------------------------------------------------------------------- */

typedef struct {
    const ge_kern *k;
    const ge_tensor *w;
    void *dst;
    int kind;
    int64_t rows_per_task;
} pack_job;

static void pack_task(void *ctx, int64_t i, int worker)
{
    const pack_job *j = ctx;
    int64_t r0 = i * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->w->ne1)
        r1 = j->w->ne1;
    if (j->kind == PACK_Q8)
        j->k->q8_pack(j->w->data, j->w->ne1, j->w->ne0, j->dst, r0, r1);
    else if (j->kind == KQ)
        j->k->kq_pack(j->w->type, j->w->data, j->w->ne1, j->w->ne0, j->dst, r0, r1);
    else
        j->k->sg_pack(j->w->type, j->w->data, j->w->ne1, j->w->ne0, j->dst, r0, r1);
}

/* Drop the file pages under a repacked tensor (only ever inside a registered read-only
 * model mapping; partial pages at the ends are kept, they may hold a neighbour's data). */
static void release_pages(const ge_tensor *w)
{
    size_t n = w->row_bytes * (size_t)w->ne1, page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)w->data + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)w->data + n) & ~(uintptr_t)(page - 1);
    if (b > a && ge_mapping_contains(w->data, n))
        madvise((void *)a, b - a, MADV_DONTNEED);
}

static const void *packed_weight(ge_compute *cx, const ge_kern *k, const ge_tensor *w, int kind,
                                 ge_err *err)
{
    ge_packed_cache *c = cache_of(cx);
    if (!c) {
        ge_fail(err, GE_E_NOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++)
        if (same_weight(&c->v[i], w, kind, k->tier)) {
            void *d = c->v[i].data;
            pthread_mutex_unlock(&c->mu);
            return d;
        }
    size_t bytes = kind == PACK_Q8 ? k->q8_packed_size(w->ne1, w->ne0)
                   : kind == KQ    ? k->kq_packed_size(w->type, w->ne1, w->ne0)
                                   : k->sg_packed_size(w->type, w->ne1, w->ne0);
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        pack_entry *v = realloc(c->v, cap * sizeof *v);
        if (v)
            c->v = v, c->cap = cap;
    }
    void *data = c->n < c->cap ? arena_alloc(c, bytes) : NULL;
    if (!data) {
        pthread_mutex_unlock(&c->mu);
        ge_fail(err, GE_E_NOMEM, "out of memory repacking %s (%zu bytes)", w->name, bytes);
        return NULL;
    }
    int group = kind == PACK_Q8 ? k->q8_row_group : kind == KQ ? k->kq_row_group : k->sg_panel;
    pack_job j = {k, w, data, kind, (int64_t)group * ((256 + group - 1) / group)};
    ge_parallel(cx, (w->ne1 + j.rows_per_task - 1) / j.rows_per_task, 0, pack_task, &j);
    c->v[c->n++] = (pack_entry){w->data, w->type, w->ne0, w->ne1, w->row_bytes, kind, k->tier,
                                data};
    if (cx->cfg.v[GE_CFG_RELEASE_WEIGHTS])
        release_pages(w);
    pthread_mutex_unlock(&c->mu);
    return data;
}

/* ---- the GEMM tasks --------------------------------------------------------------------- */

#define MAX_OUTS 4
#define TOKEN_BLOCK 64

typedef struct {
    const ge_compute *cx;
    const float *x;
    int n_tok, n_tb; /* tokens, token blocks */
    int n;           /* outputs */
    struct {
        const ge_tensor *w;
        float *y;
        const ge_kern *k; /* NULL: reference */
        int kind;         /* PACK_Q8 / PACK_SG / KQ */
        bool wide;        /* PACK_Q8 by q8_gemm_wide */
        const void *packed;
        int64_t rows_per_task, n_rb;
    } o[MAX_OUTS];
    int64_t first_task[MAX_OUTS + 1];
    const ge_q8_act *act;
} gemm_job;

/* The reference path: each weight row expanded to fp32 once, dotted with every token. */
static void ref_rows(const ge_tensor *w, const float *x, int t0, int t1, int64_t r0,
                     int64_t r1, float *y, float *row)
{
    const size_t in = (size_t)w->ne0, out = (size_t)w->ne1;
    for (int64_t o = r0; o < r1; o++) {
        ge_tensor_row(w, o, row);
        for (int t = t0; t < t1; t++)
            y[(size_t)t * out + (size_t)o] = ge_dot_row(GE_T_F32, row, x + (size_t)t * in, in);
    }
}

static void gemm_task(void *ctx, int64_t task, int worker)
{
    const gemm_job *j = ctx;
    int i = 0;
    while (task >= j->first_task[i + 1])
        i++;
    int64_t local = task - j->first_task[i];
    int64_t rb = local / j->n_tb, tb = local % j->n_tb;
    const ge_tensor *w = j->o[i].w;
    int64_t r0 = rb * j->o[i].rows_per_task, r1 = r0 + j->o[i].rows_per_task;
    if (r1 > w->ne1)
        r1 = w->ne1;
    int t0 = (int)(tb * TOKEN_BLOCK), t1 = t0 + TOKEN_BLOCK;
    if (t1 > j->n_tok)
        t1 = j->n_tok;
    const ge_kern *k = j->o[i].k;
    if (!k)
        ref_rows(w, j->x, t0, t1, r0, r1, j->o[i].y,
                 j->cx->row_scratch + (size_t)worker * j->cx->row_scratch_len);
    else if (j->o[i].kind == PACK_Q8)
        (j->o[i].wide ? k->q8_gemm_wide : k->q8_gemm)(j->o[i].packed, w->ne1, w->ne0, j->act, t0,
                                                      t1, r0, r1, j->o[i].y, w->ne1);
    else if (j->o[i].kind == KQ)
        k->kq_gemm(w->type, j->o[i].packed, w->ne1, w->ne0, j->act, t0, t1, r0, r1, j->o[i].y,
                   w->ne1);
    else
        k->sgemm(w->type, j->o[i].packed, w->ne1, w->ne0, j->x, w->ne0, t0, t1, r0, r1,
                 j->o[i].y, w->ne1);
}

typedef struct {
    const ge_kern *k;
    const float *x;
    int64_t ldx, n_tok;
    ge_q8_act *act;
} quant_job;

static void quant_task(void *ctx, int64_t i, int worker)
{
    const quant_job *q = ctx;
    int64_t t0 = i * TOKEN_BLOCK, t1 = t0 + TOKEN_BLOCK < q->n_tok ? t0 + TOKEN_BLOCK : q->n_tok;
    q->k->q8_quantize(q->x, q->ldx, t0, t1, q->act);
    if (q->act->sum16)
        ge_q8_sum16(q->act, t0, t1);
}

static ge_status quantize(ge_compute *cx, const ge_kern *k, const float *x, int n_tok,
                          int64_t cols, int span, bool sums16, const float *clip,
                          ge_q8_act **out, ge_err *err)
{
    ge_packed_cache *c = cache_of(cx);
    size_t nq = (size_t)n_tok * (size_t)cols, nd = nq / 32;
    if (!c)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    if (nq > c->act_cap_q) {
        free(c->act.qs);
        c->act.qs = aligned_alloc(64, (nq + 63) / 64 * 64);
        c->act_cap_q = c->act.qs ? nq : 0;
    }
    if (nd > c->act_cap_d) {
        free(c->act.d);
        free(c->act.sum);
        c->act.d = malloc(nd * sizeof *c->act.d);
        c->act.sum = malloc(nd * sizeof *c->act.sum);
        c->act_cap_d = c->act.d && c->act.sum ? nd : 0;
    }
    const size_t n16 = sums16 ? 2 * nd : 0;
    if (n16 > c->act_cap_16) {
        free(c->sum16);
        c->sum16 = malloc(n16 * sizeof *c->sum16);
        c->act_cap_16 = c->sum16 ? n16 : 0;
    }
    if (c->act_cap_q < nq || c->act_cap_d < nd || c->act_cap_16 < n16)
        return ge_fail(err, GE_E_NOMEM, "out of memory for %d quantised tokens", n_tok);
    c->act.n_tok = n_tok;
    c->act.cols = cols;
    c->act.span = span;
    c->act.sum16 = n16 ? c->sum16 : NULL;
    c->act.clip = clip != NULL;
    c->act.lo = clip ? clip[0] : 0.0f;
    c->act.hi = clip ? clip[1] : 0.0f;
    quant_job q = {k, x, cols, n_tok, &c->act};
    double t0 = ge_now();
    ge_parallel(cx, (n_tok + TOKEN_BLOCK - 1) / TOKEN_BLOCK, 0, quant_task, &q);
    ge_compute_count(cx, GE_OP_QUANTIZE, t0, 0);
    *out = &c->act;
    return GE_OK;
}

/* The activation span weight w takes on this path (the quantiser's span: kern.h), or 0 when
 * it takes the fp32 inputs (SGEMM, reference). wide: Q8_0 weights by q8_gemm_wide where the
 * tier has it and the inputs come in whole spans. */
static int act_span(const ge_compute *cx, const ge_tensor *w, int n_tok, bool fast, bool wide)
{
    const ge_kern *k;
    if (!fast)
        return 0;
    if (w->type == GE_T_Q8_0 && (k = q8_kernels(cx, n_tok)))
        return wide && k->q8_gemm_wide && w->ne0 % (32 * GE_Q8_WIDE) == 0 ? GE_Q8_WIDE : 1;
    return kq_kernels(cx, w->type) ? ge_kq_span(w->type) : 0;
}

/* fast: the kernels (else the reference row dots); span: the one activation span of every
 * quantised output (act_span; they share one quantisation); clip (NULL or [lo, hi]): the
 * quantiser clamps x (the caller has checked that every output is quantised) */
static ge_status run_many(ge_compute *cx, const float *x, int n_tok, const float *clip,
                          const ge_linear_out *outs, int n_outs, bool fast, int span,
                          ge_err *err)
{
    gemm_job j = {.cx = cx, .x = x, .n_tok = n_tok, .n = n_outs};
    j.n_tb = (n_tok + TOKEN_BLOCK - 1) / TOKEN_BLOCK;
    const ge_kern *qk = NULL;
    bool sums16 = false; /* some output's kernel reads act->sum16 */
    j.first_task[0] = 0;
    if (n_outs < 1 || n_outs > MAX_OUTS)
        return ge_fail(err, GE_E_INTERNAL, "ge_linear_many: %d outputs", n_outs);
    for (int i = 0; i < n_outs; i++) {
        const ge_tensor *w = outs[i].w;
        if (w->ne0 != outs[0].w->ne0 || (size_t)w->ne0 > cx->row_scratch_len)
            return ge_fail(err, GE_E_INTERNAL, "ge_linear_many: %s has %lld inputs", w->name,
                           (long long)w->ne0);
        j.o[i].w = w;
        j.o[i].y = outs[i].y;
        j.o[i].k = NULL;
        int group = 16;
        const ge_kern *k;
        const int s = act_span(cx, w, n_tok, fast, span == GE_Q8_WIDE);
        if (s && s != span)
            return ge_fail(err, GE_E_INTERNAL, "ge_linear_many: %s takes span %d, not %d",
                           w->name, s, span);
        if (!fast) {
            /* the reference row dots */
        } else if (w->type == GE_T_Q8_0 && (k = q8_kernels(cx, n_tok))) {
            j.o[i].k = k, j.o[i].kind = PACK_Q8, group = k->q8_row_group;
            j.o[i].wide = span == GE_Q8_WIDE;
            qk = k;
        } else if ((k = kq_kernels(cx, w->type))) {
            j.o[i].k = k, j.o[i].kind = KQ, qk = k;
            sums16 |= ge_kq_uses_sum16(w->type);
            if (k->kq_packed_size(w->type, w->ne1, w->ne0))
                group = k->kq_row_group;
            else /* read in place */
                group = 1, j.o[i].packed = w->data;
        } else if ((k = sg_kernels(cx, w->type))) {
            j.o[i].k = k, j.o[i].kind = PACK_SG, group = k->sg_panel;
        }
        if (j.o[i].k && !j.o[i].packed &&
            !(j.o[i].packed = packed_weight(cx, j.o[i].k, w, j.o[i].kind, err)))
            return err->code;
        /* row blocks: whole groups each; for a Q8 GEMM up to 256 rows while there are still
         * 8 tasks per thread (each call fills a scratch per token and block, which 4 row
         * groups amortised poorly: 64-row tasks ran the audio tower's GEMMs 5-8% slower);
         * every packed type of the kq family too (its tiers fill the same kind of scratch:
         * 256-row tasks ran a real-shape Q4_0 model's kq_gemm 18% faster at avx512, a
         * Q4_K_M run 2.7% faster end to end) */
        const bool scratch = j.o[i].kind == PACK_Q8 || (j.o[i].kind == KQ && group > 1);
        int64_t rows = 64 > group ? (64 / group) * group : group;
        while (scratch && rows < 256 &&
               (w->ne1 + 2 * rows - 1) / (2 * rows) * j.n_tb >= 8 * (int64_t)cx->threads)
            rows *= 2;
        j.o[i].rows_per_task = rows;
        j.o[i].n_rb = (w->ne1 + rows - 1) / rows;
        j.first_task[i + 1] = j.first_task[i] + j.o[i].n_rb * j.n_tb;
    }
    if (qk) {
        ge_q8_act *act = NULL;
        ge_status st = quantize(cx, qk, x, n_tok, outs[0].w->ne0, span, sums16, clip, &act, err);
        if (st)
            return st;
        j.act = act;
    }
    double t0 = ge_now();
    ge_parallel(cx, j.first_task[n_outs], 0, gemm_task, &j);
    const int kind = j.o[0].k ? j.o[0].kind : 0;
    ge_op op = kind == PACK_Q8 ? GE_OP_Q8_GEMM : kind == KQ ? GE_OP_KQ_GEMM
             : kind == PACK_SG ? GE_OP_SGEMM : GE_OP_LINEAR_REF;
    double macs = 0;
    for (int i = 0; i < n_outs; i++)
        macs += (double)n_tok * (double)outs[i].w->ne0 * (double)outs[i].w->ne1;
    ge_compute_count(cx, op, t0, macs);
    return GE_OK;
}

/* run_many with the input clamped to clip first (inside the quantiser when every output is
 * quantised: no pass over x; else through a clamped copy), once per activation span among
 * the outputs (fp32-input outputs join the first) */
static ge_status linear_many(ge_compute *cx, const float *x, int n_tok, const float *clip,
                             const ge_linear_out *outs, int n_outs, bool fast, bool wide,
                             ge_err *err)
{
    if (n_outs < 1 || n_outs > MAX_OUTS)
        return ge_fail(err, GE_E_INTERNAL, "ge_linear_many: %d outputs", n_outs);
    int spans[MAX_OUTS];
    bool all_quant = true, done[MAX_OUTS] = {false};
    for (int i = 0; i < n_outs; i++)
        all_quant &= (spans[i] = act_span(cx, outs[i].w, n_tok, fast, wide)) != 0;
    float *xc = NULL;
    if (clip && !all_quant) {
        const size_t n = (size_t)n_tok * (size_t)outs[0].w->ne0;
        if (!(xc = ge_floats(n)))
            return ge_fail(err, GE_E_NOMEM, "out of memory for %d clamped tokens", n_tok);
        cx->kern->clamp(xc, x, (int64_t)n, clip[0], clip[1]); /* exact on every tier */
        x = xc, clip = NULL;
    }
    ge_status st = GE_OK;
    for (int i = 0; i < n_outs && !st; i++) {
        if (done[i])
            continue;
        int span = 0, n = 0;
        for (int k = i; k < n_outs && !span; k++)
            span = done[k] ? 0 : spans[k];
        ge_linear_out sub[MAX_OUTS];
        for (int k = i; k < n_outs; k++)
            if (!done[k] && (spans[k] == span || spans[k] == 0))
                sub[n++] = outs[k], done[k] = true;
        st = run_many(cx, x, n_tok, clip, sub, n, fast, span, err);
    }
    free(xc);
    return st;
}

ge_status ge_linear_many(ge_compute *cx, const float *x, int n_tok, const ge_linear_out *outs,
                         int n_outs, ge_err *err)
{
    return linear_many(cx, x, n_tok, NULL, outs, n_outs, true, false, err);
}

ge_status ge_linear_many_media(ge_compute *cx, const float *x, int n_tok, const float *clip,
                               const ge_linear_out *outs, int n_outs, ge_err *err)
{
    return linear_many(cx, x, n_tok, clip, outs, n_outs, true, cx->cfg.v[GE_CFG_MEDIA_Q8_WIDE],
                       err);
}

ge_status ge_linear_many_ref(ge_compute *cx, const float *x, int n_tok, const float *clip,
                             const ge_linear_out *outs, int n_outs, ge_err *err)
{
    return linear_many(cx, x, n_tok, clip, outs, n_outs, false, false, err);
}

void ge_linear_kernel(const ge_compute *cx, uint32_t type, char *buf, size_t n)
{
    const ge_kern *k;
    if (type == GE_T_Q8_0 && (k = q8_kernels(cx, 1 << 20)))
        snprintf(buf, n, "q8_gemm %s, packed", k->name);
    else if ((k = kq_kernels(cx, type)))
        snprintf(buf, n, "kq_gemm %s, %s", k->name,
                 k->kq_packed_size(type, GE_QK_K, GE_QK_K)
                     ? "packed"
                     : k->tier == GE_TIER_SCALAR ? "in place" : "in place, scalar oracle");
    else if ((k = sg_kernels(cx, type)))
        snprintf(buf, n, "sgemm %s, panels", k->name);
    else
        snprintf(buf, n, "reference rows");
}

ge_status ge_linear_prepack(ge_compute *cx, const ge_tensor *const *ts, size_t n, ge_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const ge_kern *k;
        if (ts[i]->type == GE_T_Q8_0 && (k = q8_kernels(cx, 1 << 20))) {
            if (!packed_weight(cx, k, ts[i], PACK_Q8, err))
                return err->code;
        } else if ((k = kq_kernels(cx, ts[i]->type))) {
            if (k->kq_packed_size(ts[i]->type, ts[i]->ne1, ts[i]->ne0) &&
                !packed_weight(cx, k, ts[i], KQ, err))
                return err->code;
        } else if ((k = sg_kernels(cx, ts[i]->type))) {
            if (!packed_weight(cx, k, ts[i], PACK_SG, err))
                return err->code;
        }
    }
    return GE_OK;
}
