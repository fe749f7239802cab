/* bench_attn.c - single-thread speed of the attention kernels on the model's layer shapes
 * (make bench-attn; not part of make test). For T = 128, 512, 2048 tokens of one record:
 *   sliding layer: 4 heads of 256 over 2 KV heads, keys |i - j| <= 512;
 *   full layer:    4 heads of 512 over 1 KV head, every key.
 * A layer is run as the engine runs it: (head, 32-query block) calls. Reported: median time
 * per layer, GFLOP/s counting 4 d flops per (query, key) pair (2 for q.k, 2 for p v), and
 * the fraction of the measured fp32 FMA peak of one core (the kernel table's peak_fp32 loop,
 * best of 5 runs of 50 ms). The scalar oracle runs every 8th query block on T = 2048 (its
 * rate does not change). Times are the thread's CPU time (medians of 7 samples of >= 50 ms;
 * tests/bench.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kern.h"
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

int main(void)
{
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
