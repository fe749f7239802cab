/* bench.h - the benchmarks' timing (tests/bench_*.c, tests/tokbench.c): a clock, order
 * statistics of samples, "grow the repetitions until a sample is long enough, then take N
 * samples", and N runs of a machine-peak loop (the kernel table's peak_int8 / peak_fp32). */
#ifndef GE_TEST_BENCH_H
#define GE_TEST_BENCH_H

#include <stdlib.h>
#include <time.h>

/* This thread's CPU time by default: on a shared machine other processes take time slices in
 * the middle of samples, which wall time would charge to the code measured. A bench may set
 * CLOCK_MONOTONIC instead (bench_sgemm --wall). */
static clockid_t bench_clock = CLOCK_THREAD_CPUTIME_ID;

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { BENCH_SAMPLES = 7, BENCH_MAX_SAMPLES = 64 };

/* Order statistics of n values: median, p20 and p80 (the 2nd and 6th of 7), min and max. */
typedef struct {
    double med, p20, p80, min, max;
} bench_stats;

/* Sorts v[0..n) (1 <= n) in place. */
static inline bench_stats bench_stats_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
    const bench_stats s = {v[n / 2], v[n / 5], v[n - 1 - n / 5], v[0], v[n - 1]};
    return s;
}

/* Seconds per call of f(arg, call): reps calls make one sample, reps grown until a sample
 * takes >= min_s; then n samples (n <= BENCH_MAX_SAMPLES). The sampled calls are numbered
 * 0, 1, 2, ... across samples (for benches that rotate over inputs). */
static inline bench_stats bench_time(void (*f)(void *arg, long call), void *arg, double min_s,
                                     int n)
{
    long reps = 1;
    for (;;) {
        double t = bench_now();
        for (long i = 0; i < reps; i++)
            f(arg, i);
        t = bench_now() - t;
        if (t >= min_s)
            break;
        reps = t < 1e-5 ? reps * 16 : (long)((double)reps * (1.25 * min_s / t)) + 1;
    }
    double s[BENCH_MAX_SAMPLES];
    long call = 0;
    for (int k = 0; k < n; k++) {
        double t = bench_now();
        for (long i = 0; i < reps; i++)
            f(arg, call++);
        s[k] = (bench_now() - t) / (double)reps;
    }
    return bench_stats_of(s, n);
}

/* n runs of a peak loop from the kernel table (ge_kern.peak_int8 / peak_fp32: GMAC/s over
 * about `seconds` of thread CPU time each); n <= BENCH_MAX_SAMPLES. */
static inline bench_stats bench_peak(double (*peak)(double seconds), double seconds, int n)
{
    double s[BENCH_MAX_SAMPLES];
    for (int k = 0; k < n; k++)
        s[k] = peak(seconds);
    return bench_stats_of(s, n);
}

#endif
