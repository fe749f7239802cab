/* bench_attn.c - single-thread speed of the attention kernels on the model's layer shapes
 * (make bench-attn; not part of make test). For T = 128, 512, 2048 tokens of one record:
 *   sliding layer: 4 heads of 256 over 2 KV heads, keys |i - j| <= 512;
 *   full layer:    4 heads of 512 over 1 KV head, every key.
 * A layer is run as the engine runs it: (head, 32-query block) calls. Reported: median time
 * per layer, GFLOP/s counting 4 d flops per (query, key) pair (2 for q.k, 2 for p v), and
 * the fraction of the measured fp32 FMA peak of one core (the kernel table's peak_fp32 loop,
 * best of 5 runs of 50 ms). The scalar oracle runs every 8th query block on T = 2048 (its
 * rate does not change). Times are the thread's CPU time (medians of 7 samples of >= 50 ms;
 * tests/bench.h).
 *
 * bench_attn vision [avx512|avx2] [ROUNDS]: the vision tower's dense attention (12 heads of
 * 64, every patch sees every patch) for n = 630, 2376, 9900 patches (image budgets 70, 280,
 * 1120), through the engine as the tower calls it, with 1 and 2 threads: the tiled kernel
 * (ge_attention_with, fast) against the dense kernel over head-major planes
 * (ge_attention_dense, repack included), alternating the two in each round (both orders),
 * wall time, medians of ROUNDS (default 5). GMAC/s count 2 * keys * d * heads MACs (q.k and
 * p v); the peak is the tier's fp32 FMA loop times the threads.
 * bench_attn text [avx512] [ROUNDS]: the same for the text layers (one record of 512 and 2048
 * tokens, and of 8192 for a full layer: a --late-chunk window; waves of records of 128 and 40
 * tokens), the dense side as the encoder calls it on tiers whose dense kernel takes key ranges
 * (ge_attention_keys, then ge_attention). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kern.h"
#include "attention.h"
#include "model.h"
#include "rng.h"

#define QBLOCK 32

/* ---- layers ---------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int nh, nkv, d, radius; /* radius < 0: full */
} layer;

typedef struct {
    ge_attn_args a;
    float *q, *k, *v, *o;
    int32_t *lo, *hi;
    int T;
} problem;

static problem make(const layer *L, int T)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.T = T;
    const size_t nq = (size_t)T * L->nh * L->d, nk = (size_t)T * L->nkv * L->d;
    p.q = malloc(nq * 4), p.o = malloc(nq * 4), p.k = malloc(nk * 4), p.v = malloc(nk * 4);
    p.lo = malloc((size_t)T * 4), p.hi = malloc((size_t)T * 4);
    if (!p.q || !p.o || !p.k || !p.v || !p.lo || !p.hi) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* scores with a spread of a few units, like a trained model's */
    const float amp = 2.0f * sqrtf(3.0f) / sqrtf(sqrtf((float)L->d));
    for (size_t i = 0; i < nq; i++)
        p.q[i] = amp * frand();
    for (size_t i = 0; i < nk; i++)
        p.k[i] = amp * frand(), p.v[i] = frand();
    for (int i = 0; i < T; i++) {
        int lo = 0, hi = T;
        if (L->radius >= 0) {
            lo = i - L->radius > 0 ? i - L->radius : 0;
            hi = i + L->radius + 1 < T ? i + L->radius + 1 : T;
        }
        p.lo[i] = lo, p.hi[i] = hi;
    }
    ge_attn_args a = {p.q, p.k, p.v, p.o, (int64_t)L->nh * L->d, (int64_t)L->nkv * L->d,
                      (int64_t)L->nh * L->d, L->nh, L->nkv, L->d, 1.0f, p.lo, p.hi};
    p.a = a;
    return p;
}

static void drop(problem *p)
{
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->lo), free(p->hi);
}

/* One layer: every head, every stride-th 32-query block. Returns the flops done. */
static double layer_run(const ge_kern *k, const problem *p, int stride)
{
    double flops = 0;
    const int nqb = (p->T + QBLOCK - 1) / QBLOCK;
    for (int h = 0; h < p->a.n_head; h++)
        for (int b = 0; b < nqb; b += stride) {
            const int64_t q0 = (int64_t)b * QBLOCK, q1 = q0 + QBLOCK < p->T ? q0 + QBLOCK : p->T;
            k->attn(&p->a, h, q0, q1);
            for (int64_t i = q0; i < q1; i++)
                flops += 4.0 * p->a.head_dim * (p->hi[i] - p->lo[i]);
        }
    return flops;
}

typedef struct {
    const ge_kern *k;
    const problem *p;
    int stride;
} layer_job;

static void run_layer(void *arg, long call)
{
    const layer_job *j = arg;
    layer_run(j->k, j->p, j->stride);
}

/* ---- the vision tower's dense attention through the engine ----------------------------- */

static double now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall and process CPU seconds per call of one path (reps calls): 0 the tiled kernel, 1 the
 * dense kernel as the vision tower calls it, 2 as the text encoder calls it (the planes
 * repacked by ge_attention_keys into *P, then ge_attention; *P kept between calls, as the
 * encoder keeps it between layers: a fresh one costs its page faults every call). */
static void engine_sample(ge_model *m, ge_attn_planes **P, const ge_attn_args *a, int64_t n,
                          int path, int reps, double *wall, double *cpu)
{
    const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < reps; i++)
        if (path == 1) {
            ge_attention_dense(&m->cx, a, n, true);
        } else if (path == 2) {
            ge_attention_keys(&m->cx, P, a, n);
            ge_attention(&m->cx, a, n, *P);
        } else {
            ge_attention_with(&m->cx, a, n, true);
        }
    *wall = (now(CLOCK_MONOTONIC) - w0) / reps;
    *cpu = (now(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
}

typedef struct {
    const char *name;
    int nh, nkv, d, radius; /* radius < 0: every key */
    int ns[3];
    int record;             /* > 0: the n rows are records of this many tokens */
} engine_shape;

static int engine(const char *what, const char *tier, int rounds)
{
    const int t = ge_tier_from_name(tier), text = strcmp(what, "text") == 0;
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    const ge_kern *kt = t < 0 ? NULL : ge_kern_get((ge_tier)t);
    if (!kt || !ge_tier_supported(&f, (ge_tier)t) || !kt->attn_dense ||
        (text && !kt->attn_dense_ranges)) {
        fprintf(stderr, "bench_attn: tier %s: not supported here or no dense kernel%s\n", tier,
                text ? " with key ranges" : "");
        return 2;
    }
    rounds = rounds < 1 ? 1 : rounds > BENCH_MAX_SAMPLES ? BENCH_MAX_SAMPLES : rounds;
    const double peak = bench_peak(kt->peak_fp32, 0.05, 5).max;
    printf("tier %s, fp32 FMA peak %.1f GMAC/s per thread; %d rounds alternating the paths, "
           "medians.\nwall: GMAC/s on wall time (%% of threads x peak); cpu: GMAC/s per thread on "
           "process CPU time (%% of peak), what the threads got done while they ran\n\n"
           "| shape | n | threads | tiled: ms | wall | cpu | dense: ms | wall | cpu | speed-up "
           "wall / cpu |\n|---|---|---|---|---|---|---|---|---|---|\n", tier, peak, rounds);
    static const engine_shape vis[] = {{"vision 12x64", 12, 12, 64, -1, {630, 2376, 9900}, 0}};
    static const engine_shape txt[] = {
        {"sliding 4x256 / 2 kv, radius 512", 4, 2, 256, 512, {512, 2048, 0}, 0},
        {"full 4x512 / 1 kv", 4, 1, 512, -1, {512, 2048, 8192}, 0},
        {"sliding, records of 128", 4, 2, 256, 512, {2048, 0, 0}, 128},
        {"full, records of 128", 4, 1, 512, -1, {2048, 0, 0}, 128},
        {"sliding, records of 40", 4, 2, 256, 512, {2040, 0, 0}, 40}};
    const engine_shape *shapes = text ? txt : vis;
    const int nshapes = text ? 5 : 1;
    for (int si = 0; si < nshapes; si++)
        for (int ni = 0; ni < 3 && shapes[si].ns[ni]; ni++) {
            const engine_shape *S = &shapes[si];
            const int n = S->ns[ni], reps = n < 1000 ? 20 : n < 5000 ? 2 : 1;
            const int D = S->nh * S->d, DK = S->nkv * S->d;
            float *q = malloc((size_t)n * D * 4), *k = malloc((size_t)n * DK * 4);
            float *v = malloc((size_t)n * DK * 4), *o = malloc((size_t)n * D * 4);
            int32_t *lo = calloc((size_t)n, 4), *hi = malloc((size_t)n * 4);
            if (!q || !k || !v || !o || !lo || !hi) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            /* scores with a spread of a few units (speed does not depend on the values) */
            for (size_t i = 0; i < (size_t)n * D; i++)
                q[i] = 1.7f * frand();
            for (size_t i = 0; i < (size_t)n * DK; i++)
                k[i] = 0.4f * frand(), v[i] = frand();
            double keys = 0;
            for (int i = 0; i < n; i++) {
                const int r = S->radius, s0 = S->record ? i / S->record * S->record : 0;
                const int s1 = S->record ? s0 + S->record : n;
                lo[i] = r < 0 || i - r < s0 ? s0 : i - r;
                hi[i] = r < 0 || i + r + 1 > s1 ? s1 : i + r + 1;
                keys += hi[i] - lo[i];
            }
            const ge_attn_args a = {q, k, v, o, D, DK, D, S->nh, S->nkv, S->d, 1.0f, lo, hi};
            const double gmac = 2.0 * keys * S->d * S->nh * 1e-9;
            for (int threads = 1; threads <= 2; threads++) {
                ge_config cfg;
                ge_err err = {0};
                ge_config_defaults(&cfg);
                cfg.v[GE_CFG_CPU_TIER] = t;
                cfg.v[GE_CFG_THREADS] = threads;
                ge_model *m = NULL;
                if (ge_model_open(&m, "testdata/tiny-f32.gguf", &cfg, &err)) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                double wall[2][BENCH_MAX_SAMPLES], cpu[2][BENCH_MAX_SAMPLES];
                ge_attn_planes *P = NULL;
                for (int r = 0; r < rounds; r++)
                    for (int w = 0; w < 2; w++) {
                        const int dense = (r + w) % 2;
                        engine_sample(m, &P, &a, n, dense ? 1 + text : 0, reps,
                                      &wall[dense][r], &cpu[dense][r]);
                    }
                ge_attn_planes_free(P);
                double ws[2], cs[2];
                for (int p = 0; p < 2; p++) {
                    ws[p] = bench_stats_of(wall[p], rounds).med;
                    cs[p] = bench_stats_of(cpu[p], rounds).med;
                }
                printf("| %s | %d | %d |", S->name, n, threads);
                for (int p = 0; p < 2; p++)
                    printf(" %.1f | %.1f (%.0f%%) | %.1f (%.0f%%) |", ws[p] * 1e3, gmac / ws[p],
                           100 * gmac / ws[p] / (peak * threads), gmac / cs[p],
                           100 * gmac / cs[p] / peak);
                printf(" %.2fx / %.2fx |\n", ws[0] / ws[1], cs[0] / cs[1]);
                fflush(stdout);
                ge_model_free(m);
            }
            free(q), free(k), free(v), free(o), free(lo), free(hi);
        }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "vision") == 0 || strcmp(argv[1], "text") == 0))
        return engine(argv[1], argc > 2 ? argv[2] : "avx512", argc > 3 ? atoi(argv[3]) : 5);
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    const int has512 = ge_tier_supported(&f, GE_TIER_AVX512);
    const int has256 = ge_tier_supported(&f, GE_TIER_AVX2);
    double peak512 = 0, peak256 = 0; /* a peak is a best case: the best of 5 runs */
    if (has512)
        peak512 = bench_peak(ge_kern_get(GE_TIER_AVX512)->peak_fp32, 0.05, 5).max;
    if (has256)
        peak256 = bench_peak(ge_kern_get(GE_TIER_AVX2)->peak_fp32, 0.05, 5).max;
    printf("fp32 FMA peak, one core: %.1f GMAC/s with zmm, %.1f GMAC/s with ymm\n", peak512,
           peak256);
    const double peak_flops = 2 * (peak512 > peak256 ? peak512 : peak256);

    static const layer layers[] = {{"sliding 4x256 / 2 kv, radius 512", 4, 2, 256, 512},
                                   {"full 4x512 / 1 kv", 4, 1, 512, -1}};
    static const int Ts[] = {128, 512, 2048};
    static const ge_tier tiers[] = {GE_TIER_SCALAR, GE_TIER_AVX2, GE_TIER_AVX512};
    printf("\n| layer | T | tier | ms / layer | GFLOP/s | of peak | vs scalar |\n"
           "|---|---|---|---|---|---|---|\n");
    for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            problem p = make(&layers[li], Ts[ti]);
            double scalar_rate = 0;
            for (size_t k = 0; k < sizeof tiers / sizeof tiers[0]; k++) {
                if (!ge_tier_supported(&f, tiers[k]))
                    continue;
                const ge_kern *kern = ge_kern_get(tiers[k]);
                const int stride = tiers[k] == GE_TIER_SCALAR && Ts[ti] >= 2048 ? 8 : 1;
                const double flops = layer_run(kern, &p, stride); /* warm-up */
                layer_job j = {kern, &p, stride};
                const int samples = tiers[k] == GE_TIER_SCALAR ? 3 : BENCH_SAMPLES;
                const double med = bench_time(run_layer, &j, 0.05, samples).med;
                const double rate = flops / med;
                if (tiers[k] == GE_TIER_SCALAR)
                    scalar_rate = rate;
                printf("| %s | %d | %s | %.2f%s | %.1f | %.0f%% | %.1fx |\n", layers[li].name,
                       Ts[ti], kern->name, med * stride * 1e3, stride > 1 ? " (1/8 timed)" : "",
                       rate * 1e-9, 100 * rate / (peak_flops * 1e9), rate / scalar_rate);
                fflush(stdout);
            }
            drop(&p);
        }
    return 0;
}
