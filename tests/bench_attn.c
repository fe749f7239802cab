/* bench_attn.c - single-thread speed of the attention kernels on the model's layer shapes
 * (make bench-attn; not part of make test). For T = 128, 512, 2048 tokens of one record:
 *   sliding layer: 4 heads of 256 over 2 KV heads, keys |i - j| <= 512;
 *   full layer:    4 heads of 512 over 1 KV head, every key.
 * A layer is run as the engine runs it: (head, 32-query block) calls. Reported: median time
 * per layer, GFLOP/s counting 4 d flops per (query, key) pair (2 for q.k, 2 for p v), and
 * the fraction of the measured fp32 FMA peak of one core (a tight loop of independent FMAs).
 * The scalar oracle runs every 8th query block on T = 2048 (its rate does not change). Times
 * are the thread's CPU time (medians of 7 samples of >= 50 ms). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QBLOCK 32

/* This thread's CPU time: the machine is shared, and time spent preempted is not ours. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- FMA peak -------------------------------------------------------------------------- */

#if defined(__x86_64__)
/* 16 independent fma chains (4-cycle latency x 2 pipes needs >= 8), n rounds. */
__attribute__((target("avx512f"), noinline)) static float fma_loop_512(int64_t n)
{
    __m512 acc[16];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (int64_t k = 0; k < n; k++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], m, c);
    __m512 s = acc[0];
    for (int i = 1; i < 16; i++)
        s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) static float fma_loop_256(int64_t n)
{
    __m256 acc[12];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        acc[i] = _mm256_set1_ps((float)i);
    for (int64_t k = 0; k < n; k++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], m, c);
    __m256 s = acc[0];
    for (int i = 1; i < 12; i++)
        s = _mm256_add_ps(s, acc[i]);
    float o[8];
    _mm256_storeu_ps(o, s);
    return o[0] + o[7];
}
#endif

/* Best GMAC/s (fp32 lanes x fma per second) of 5 runs: the machine is shared, and a peak is
 * a best case. */
static double fma_peak(int wide)
{
    double r[5];
    volatile float sink = 0;
    for (int k = 0; k < 5; k++) {
        const int64_t n = 20000000;
        const double t0 = now();
#if defined(__x86_64__)
        sink += wide ? fma_loop_512(n) : fma_loop_256(n);
#endif
        r[k] = (double)n * (wide ? 16 * 16 : 12 * 8) / (now() - t0) * 1e-9;
    }
    (void)sink;
    qsort(r, 5, sizeof r[0], cmp_double);
    return r[4];
}

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

int main(void)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    const int has512 = ge_tier_supported(&f, GE_TIER_AVX512);
    const int has256 = ge_tier_supported(&f, GE_TIER_AVX2);
    double peak512 = 0, peak256 = 0;
    if (has512)
        peak512 = fma_peak(1);
    if (has256)
        peak256 = fma_peak(0);
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
                double t[7], flops = layer_run(kern, &p, stride); /* warm-up */
                int reps = 1;
                double t0 = now();
                layer_run(kern, &p, stride);
                const double one = now() - t0;
                reps = one > 0.05 ? 1 : (int)(0.05 / (one + 1e-9)) + 1;
                const int samples = tiers[k] == GE_TIER_SCALAR ? 3 : 7;
                for (int s = 0; s < samples; s++) {
                    t0 = now();
                    for (int r = 0; r < reps; r++)
                        layer_run(kern, &p, stride);
                    t[s] = (now() - t0) / reps;
                }
                qsort(t, (size_t)samples, sizeof t[0], cmp_double);
                const double med = t[samples / 2], rate = flops / med;
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
