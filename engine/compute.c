/* compute.c - the compute context: kernel tier, topology, pool, per-worker scratch, the
 * thread cap of the current call, and the clock the stats use. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute.h"

/* The tier cfg asks for on this CPU, the topology and the pool size. */
static ge_status plan(const ge_config *cfg, ge_tier *tier, ge_topo *topo, int *threads,
                      ge_cpu_feats *f, ge_err *err)
{
    ge_cpu_detect(f);
    int t = cfg->v[GE_CFG_CPU_TIER];
    if (t < 0)
        t = ge_tier_best(f);
    else if (!ge_tier_supported(f, (ge_tier)t))
        return ge_fail(err, GE_E_USAGE, "cpu tier %s: this CPU (or its OS) cannot run it",
                       ge_tier_name((ge_tier)t));
    *tier = (ge_tier)t;
    int cpus[1024], n = ge_topo_allowed(cpus, 1024);
    ge_status st = ge_topo_read("/sys", cpus, n, topo, err);
    *threads = cfg->v[GE_CFG_THREADS] > 0 ? cfg->v[GE_CFG_THREADS] : topo->n;
    return st;
}

static void describe_cpu(const ge_topo *t, const ge_cpu_feats *f, char *buf, size_t n)
{
    char caches[64] = "";
    if (t->llc_bytes) /* the attention blocking follows them (engine/attention.c) */
        snprintf(caches, sizeof caches, ", L2 %zu KiB, last level %zu KiB", t->l2_bytes >> 10,
                 t->llc_bytes >> 10);
    snprintf(buf, n, "%d CPUs allowed, %d cores%s%s; %s%s%s%s%s%s%s%s%s%s", t->n, t->n_core,
             t->hybrid ? " (hybrid)" : "", caches, f->x86 ? "x86-64" : f->arm64 ? "arm64" : "other",
             f->avx2 ? " avx2" : "", f->fma ? " fma" : "", f->avxvnni ? " avx-vnni" : "",
             f->avx512f ? " avx512f" : "", f->avx512vnni ? " avx512-vnni" : "",
             f->neon ? " neon" : "", f->dotprod ? " dotprod" : "", f->i8mm ? " i8mm" : "",
             f->bf16 ? " bf16" : "");
}

ge_status ge_compute_plan(const ge_config *cfg, const char **tier, int *threads, char *cpu,
                          size_t n, ge_err *err)
{
    ge_tier t;
    ge_topo topo;
    ge_cpu_feats f;
    ge_status st = plan(cfg, &t, &topo, threads, &f, err);
    if (st)
        return st;
    *tier = ge_tier_name(t);
    describe_cpu(&topo, &f, cpu, n);
    return GE_OK;
}

ge_status ge_compute_open(ge_compute *cx, const ge_config *cfg, int64_t row_len, ge_err *err)
{
    memset(cx, 0, sizeof *cx);
    cx->cfg = *cfg;
    ge_tier tier;
    ge_cpu_feats f;
    ge_status st = plan(cfg, &tier, &cx->topo, &cx->threads, &f, err);
    if (st)
        return st;
    cx->kern = ge_kern_get(tier);
    int cap = cfg->v[GE_CFG_THREAD_CAP];
    cx->max_threads = cap > 0 && cap < cx->threads ? cap : cx->threads;
    bool pin = cfg->v[GE_CFG_HYBRID] && cx->topo.hybrid;
    if ((st = ge_pool_create(&cx->pool, cx->threads, &cx->topo, pin, err)))
        return st;
    return ge_compute_row_scratch(cx, row_len, err);
}

void ge_compute_free(ge_compute *cx)
{
    ge_pool_free(cx->pool);
    free(cx->row_scratch);
    cx->pool = NULL;
    cx->row_scratch = NULL;
    cx->row_scratch_len = 0;
}

ge_status ge_compute_row_scratch(ge_compute *cx, int64_t n, ge_err *err)
{
    if (cx->row_scratch && (size_t)n <= cx->row_scratch_len)
        return GE_OK;
    float *r = realloc(cx->row_scratch, (size_t)cx->threads * (size_t)n * sizeof *r);
    if (!r)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    cx->row_scratch = r;
    cx->row_scratch_len = (size_t)n;
    return GE_OK;
}

void ge_parallel(ge_compute *cx, int64_t n, int max, ge_task_fn fn, void *ctx)
{
    int cap = cx->call_threads > 0 ? cx->call_threads : cx->max_threads;
    ge_pool_run(cx->pool, n, max > 0 && max < cap ? max : cap, fn, ctx);
}

int ge_compute_limit(ge_compute *cx, int n)
{
    int prev = cx->call_threads;
    cx->call_threads = n;
    return prev;
}

float *ge_floats(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

double ge_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *ge_op_name(ge_op op)
{
    static const char *const names[GE_OP_COUNT] = {"q8_gemm", "kq_gemm", "sgemm", "linear_ref",
                                                   "quantize", "attention", "norm", "other"};
    return op < GE_OP_COUNT ? names[op] : "?";
}

ge_phase_mark ge_phase_begin(ge_compute *cx, ge_phase phase)
{
    const ge_phase_mark k = {cx->phase, cx->stats.ops[phase]};
    cx->phase = phase;
    return k;
}

void ge_phase_end(ge_compute *cx, const ge_phase_mark *k, double seconds)
{
    ge_op_stats *ops = &cx->stats.ops[cx->phase];
    double counted = 0;
    for (int op = 0; op < GE_OP_COUNT; op++)
        counted += ops->seconds[op] - k->before.seconds[op];
    ops->seconds[GE_OP_OTHER] += seconds - counted;
    cx->phase = k->prev;
}

void ge_compute_count(ge_compute *cx, ge_op op, double t0, double macs)
{
    ge_op_stats *s = &cx->stats.ops[cx->phase];
    s->seconds[op] += ge_now() - t0;
    s->calls[op]++;
    s->macs[op] += macs;
}
