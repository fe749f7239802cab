/* bench_sgemm.c - SGEMM throughput per tier on the model's linear shapes, next to the
 * machine's measured fp32 FMA peak. Not a test: `make bench-sgemm`, then
 * build/rel/tests/bench_sgemm [tier...] [--weights f32|f16|bf16] [--cold] [-j N]
 * [-s COLSxROWS[,...]] [-n N_TOK[,...]] [--no-peak] [--wall]
 * (default tiers: avx2 and avx512; make bench-sgemm ARGS="...").
 *
 * Method: one sample is as many calls as take >= 2 ms of thread CPU time; GMAC/s is the
 * median of 7 samples (p20..p80 shown; tests/bench.h). The peaks are the kernel table's
 * peak_fp32 loops (thread CPU time, also with --wall). x and y rows are 64-byte aligned
 * (ldy = rows).
 * --weights f16|bf16: weights of that type (default f32), timed from panels of their own type
 * and from fp32 panels of their expansion (the layout before 16-bit panels; the same output
 * bits), the two alternating sample by sample; "x f32" is the ratio of the medians.
 * -j N: the engine's split (engine/linear.c: tasks of 64 outputs x 64 tokens, claimed from
 * an engine pool of N threads), timed in process CPU time / N: the wall time of a call with
 * the N cores to itself (wall time would charge this shared machine's other tenants to it;
 * the pool's spin-waits count). --wall times it in wall time. Without -j one thread computes
 * the whole (t, o) range per call.
 * "warm": the same packed weight every call (it stays in L2/L3 when it fits); "cold": calls
 * rotate over copies totalling > 96 MB, so weights come from DRAM, as in a real forward pass
 * where each layer's weights are touched once per wave. Also: pack speed per weight type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dtype.h"
#include "kern.h"
#include "rng.h"
#include "threads.h"

enum { MAX_LIST = 16, TASK_ROWS = 64, TASK_TOKENS = 64 }; /* the engine's task (linear.c) */

/* ---- sgemm ---------------------------------------------------------------------------- */
typedef struct {
    const ge_kern *k;
    uint32_t type; /* panel type */
    void **packed;
    int ncopies;
    float *x, *y;
    int64_t rows, cols, n_tok;
    ge_pool *pool; /* NULL: one call over everything */
    void *cur;     /* this call's copy (pool tasks) */
} job;

static void task(void *arg, int64_t i, int worker)
{
    (void)worker;
    const job *j = arg;
    const int64_t n_tb = (j->n_tok + TASK_TOKENS - 1) / TASK_TOKENS;
    const int64_t r0 = i / n_tb * TASK_ROWS, t0 = i % n_tb * TASK_TOKENS;
    const int64_t r1 = r0 + TASK_ROWS < j->rows ? r0 + TASK_ROWS : j->rows;
    const int64_t t1 = t0 + TASK_TOKENS < j->n_tok ? t0 + TASK_TOKENS : j->n_tok;
    j->k->sgemm(j->type, j->cur, j->rows, j->cols, j->x, j->cols, t0, t1, r0, r1, j->y,
                j->rows);
}

static void run_sgemm(void *arg, long call)
{
    job *j = arg;
    j->cur = j->packed[call % j->ncopies];
    if (!j->pool) {
        j->k->sgemm(j->type, j->cur, j->rows, j->cols, j->x, j->cols, 0, j->n_tok, 0, j->rows,
                    j->y, j->rows);
        return;
    }
    const int64_t n_tasks = (j->rows + TASK_ROWS - 1) / TASK_ROWS *
                            ((j->n_tok + TASK_TOKENS - 1) / TASK_TOKENS);
    ge_pool_run(j->pool, n_tasks, 0, task, j);
}

typedef struct {
    const ge_kern *k;
    uint32_t type;
    const void *src;
    void *dst;
    int64_t rows, cols;
} pack_job;

static void run_pack(void *arg, long call)
{
    (void)call;
    pack_job *j = arg;
    j->k->sg_pack(j->type, j->src, j->rows, j->cols, j->dst, 0, j->rows);
}

/* GMAC/s (or Gvalues/s) of a sample time: median, p20, p80 (the p20 rate is the p80 time's) */
static void rates(const bench_stats *st, double units, double out[3])
{
    out[0] = units / st->med * 1e-9;
    out[1] = units / st->p80 * 1e-9, out[2] = units / st->p20 * 1e-9;
}

/* "a,b,c" (two: "axb,cxd") -> up to MAX_LIST items; their count, or -1 */
static int parse_list(const char *s, long long (*v)[2], int two)
{
    int n = 0;
    while (n < MAX_LIST) {
        int used = 0;
        if (two ? sscanf(s, "%lldx%lld%n", &v[n][0], &v[n][1], &used) != 2
                : sscanf(s, "%lld%n", &v[n][0], &used) != 1)
            return -1;
        n++;
        s += used;
        if (*s != ',')
            return *s ? -1 : n;
        s++;
    }
    return -1;
}

int main(int argc, char **argv)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    int want[GE_TIER_COUNT] = {0}, any = 0, cold = 0, no_peak = 0, threads = 0, wall = 0;
    uint32_t wtype = GE_T_F32;
    /* cols x rows of the text model's linears (q, k/v, o, gate/up, down, ple, projection),
     * then the vision tower's (q/k/v/o, up/gate, down) */
    long long shapes[MAX_LIST][2] = {{512, 1024}, {512, 512},   {1024, 512}, {512, 2048},
                                     {2048, 512}, {512, 12288}, {512, 768},  {768, 768},
                                     {768, 3072}, {3072, 768}};
    long long toks[MAX_LIST][2] = {{1}, {6}, {64}, {512}};
    int n_shapes = 10, n_toks = 4, toks_given = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cold") == 0) {
            cold = 1;
        } else if (strcmp(argv[i], "--wall") == 0) {
            wall = 1;
        } else if (strcmp(argv[i], "--no-peak") == 0) {
            no_peak = 1;
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            if ((n_shapes = parse_list(argv[++i], shapes, 1)) < 0)
                return 2;
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            if ((n_toks = parse_list(argv[++i], toks, 0)) < 0)
                return 2;
            toks_given = 1;
        } else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc) {
            const char *t = argv[++i];
            wtype = strcmp(t, "bf16") == 0 ? GE_T_BF16 : strcmp(t, "f16") == 0 ? GE_T_F16
                                                                                : GE_T_F32;
        } else {
            int t = ge_tier_from_name(argv[i]);
            if (t < 0) {
                fprintf(stderr, "bench_sgemm: unknown argument %s\n", argv[i]);
                return 2;
            }
            want[t] = any = 1;
        }
    }
    if (!any)
        for (int t = GE_TIER_AVX2; t < GE_TIER_COUNT; t++)
            want[t] = t != GE_TIER_AVXVNNI; /* avxvnni runs the avx2 kernel */
    ge_pool *pool = NULL;
    if (threads > 0) {
        ge_err err;
        if (ge_pool_create(&pool, threads, NULL, false, &err)) {
            fprintf(stderr, "bench_sgemm: %s\n", err.msg);
            return 1;
        }
    }
    /* -j: a call's process CPU time / cores = its time with the cores to itself */
    const double cores = wall || threads < 1 ? 1.0 : threads;
    bench_clock = wall ? CLOCK_MONOTONIC : threads > 0 ? CLOCK_PROCESS_CPUTIME_ID : bench_clock;

    double peak = 0; /* the kernel table's peak loops (kernels/peak*.c), 7 runs of 20 ms */
    if (!no_peak && ge_tier_supported(&f, GE_TIER_AVX512)) {
        const bench_stats pk =
            bench_peak(ge_kern_get(GE_TIER_AVX512)->peak_fp32, 0.02, BENCH_SAMPLES);
        printf("peak fp32 FMA-512 (12 zmm chains): %.1f GMAC/s [%.1f..%.1f] = %.1f GFLOP/s\n",
               pk.med, pk.p20, pk.p80, 2 * pk.med);
        peak = pk.med;
    }
    if (!no_peak && ge_tier_supported(&f, GE_TIER_AVX2)) {
        const bench_stats pk =
            bench_peak(ge_kern_get(GE_TIER_AVX2)->peak_fp32, 0.02, BENCH_SAMPLES);
        printf("peak fp32 FMA-256 (10 ymm chains): %.1f GMAC/s [%.1f..%.1f]\n", pk.med, pk.p20,
               pk.p80);
        if (peak < pk.med)
            peak = pk.med;
    }
    if (!no_peak && peak == 0) { /* no x86 vector tier: the best tier's loop, for reference */
        const ge_kern *best = ge_kern_get(ge_tier_best(&f));
        if (best->peak_fp32)
            printf("kern.h peak_fp32 (%s): %.1f GMAC/s\n", best->name, best->peak_fp32(0.2));
    }
    if (threads > 0 && peak > 0) {
        peak *= threads;
        printf("%%peak below: of %d x the one-core peak (%.1f GMAC/s)\n", threads, peak);
    }

    /* the panel types timed: the weight's own, and fp32 panels of its expansion */
    const int n_var = wtype == GE_T_F32 ? 1 : 2;
    const uint32_t var[2] = {GE_T_F32, wtype};
    printf("%-8s %-12s %5s %-6s %10s %16s %7s %6s\n", "tier", "cols x rows", "n_tok", "panels",
           "GMAC/s", "p20..p80", "%peak", "x f32");
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        if (!want[t])
            continue;
        if (!ge_tier_supported(&f, (ge_tier)t)) {
            printf("%-8s (not supported here)\n", ge_tier_name((ge_tier)t));
            continue;
        }
        const ge_kern *k = ge_kern_get((ge_tier)t);
        if (!toks_given) { /* pack: values per second, 512 x 2048 */
            static const uint32_t types[] = {GE_T_F32, GE_T_F16, GE_T_BF16};
            const int64_t rows = 2048, cols = 512;
            float *src = malloc((size_t)(rows * cols) * 4);
            for (int64_t i = 0; i < rows * cols; i++) /* weight-like values in every format */
                src[i] = 0.05f * frand();
            void *dst = malloc(k->sg_packed_size(GE_T_F32, rows, cols));
            for (int i = 0; i < 3; i++) {
                if (types[i] == GE_T_F16) /* half-size rows: an F16 view of the same bytes */
                    for (int64_t e = 0; e < rows * cols; e++)
                        ((uint16_t *)src)[e] = ge_fp32_to_fp16(0.05f * frand());
                pack_job pj = {k, types[i], src, dst, rows, cols};
                double r[3];
                bench_stats st = bench_time(run_pack, &pj, 2e-3, BENCH_SAMPLES);
                rates(&st, (double)(rows * cols), r);
                printf("%-8s pack %-4s %lldx%lld: %.2f Gvalues/s [%.2f..%.2f]\n", k->name,
                       ge_dtype(types[i])->name, (long long)cols, (long long)rows, r[0], r[1],
                       r[2]);
            }
            free(src);
            free(dst);
        }
        for (int s = 0; s < n_shapes; s++) {
            const int64_t cols = shapes[s][0], rows = shapes[s][1];
            /* the weight in its type (values in [-1, 1)) and its exact fp32 expansion */
            const size_t n_w = (size_t)(rows * cols);
            float *w32 = malloc(n_w * sizeof *w32);
            uint16_t *w16 = malloc(n_w * sizeof *w16);
            for (size_t i = 0; i < n_w; i++) {
                const float v = frand();
                uint32_t u;
                memcpy(&u, &v, 4);
                if (wtype == GE_T_F32)
                    w32[i] = v;
                else
                    w16[i] = wtype == GE_T_F16 ? ge_fp32_to_fp16(v) : (uint16_t)(u >> 16);
            }
            if (wtype != GE_T_F32)
                ge_dequant_row(wtype, w16, w32, n_w);
            job jobs[2];
            for (int v = 0; v < n_var; v++) {
                const size_t bytes = k->sg_packed_size(var[v], rows, cols);
                const int ncopies = cold ? (int)((96u << 20) / bytes) + 2 : 1;
                jobs[v] = (job){k, var[v], malloc((size_t)ncopies * sizeof(void *)), ncopies,
                                NULL, NULL, rows, cols, 0, pool, NULL};
                for (int c = 0; c < ncopies; c++) {
                    jobs[v].packed[c] = aligned_alloc(64, (bytes + 63) / 64 * 64);
                    k->sg_pack(var[v], var[v] == GE_T_F32 ? (const void *)w32 : w16, rows,
                               cols, jobs[v].packed[c], 0, rows);
                }
            }
            free(w32);
            free(w16);
            for (int ti = 0; ti < n_toks; ti++) {
                const int64_t n = toks[ti][0];
                float *x = aligned_alloc(64, (size_t)(n * cols) * 4);
                for (int64_t i = 0; i < n * cols; i++)
                    x[i] = frand();
                void (*fns[2])(void *, long) = {run_sgemm, run_sgemm};
                void *args[2] = {&jobs[0], &jobs[1]};
                for (int v = 0; v < n_var; v++) {
                    jobs[v].x = x, jobs[v].n_tok = n;
                    jobs[v].y = aligned_alloc(64, (size_t)(n * rows) * 4);
                }
                bench_stats st[2];
                bench_time_alt(n_var, fns, args, 2e-3, BENCH_SAMPLES, st);
                double r[2][3];
                for (int v = 0; v < n_var; v++) {
                    rates(&st[v], (double)n * (double)rows * (double)cols * cores, r[v]);
                    char sh[32], pr[32], pc[16] = "-", ra[16] = "";
                    snprintf(sh, sizeof sh, "%lldx%lld", (long long)cols, (long long)rows);
                    snprintf(pr, sizeof pr, "%.1f..%.1f", r[v][1], r[v][2]);
                    if (peak > 0)
                        snprintf(pc, sizeof pc, "%.1f%%", 100 * r[v][0] / peak);
                    if (v > 0)
                        snprintf(ra, sizeof ra, "%.3f", r[v][0] / r[0][0]);
                    printf("%-8s %-12s %5lld %-6s %10.2f %16s %7s %6s%s\n", k->name, sh,
                           (long long)n, ge_dtype(var[v])->name, r[v][0], pr, pc, ra,
                           cold ? " cold" : "");
                }
                fflush(stdout);
                for (int v = 0; v < n_var; v++)
                    free(jobs[v].y);
                free(x);
            }
            for (int v = 0; v < n_var; v++) {
                for (int c = 0; c < jobs[v].ncopies; c++)
                    free(jobs[v].packed[c]);
                free(jobs[v].packed);
            }
        }
    }
    ge_pool_free(pool);
    return 0;
}
