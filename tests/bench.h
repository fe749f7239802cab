/* bench.h - the benchmarks' timing (tests/bench_*.c, tests/tokbench.c): a clock, order
 * statistics of samples, "grow the repetitions until a sample is long enough, then take N
 * samples" (also for variants measured in alternation), and N runs of a machine-peak loop
 * (the kernel table's peak_int8 / peak_fp32). */
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

/* Calls of f(arg, call) per sample: grown until a sample takes >= min_s. */
static inline long bench_reps(void (*f)(void *arg, long call), void *arg, double min_s)
{
    long reps = 1;
    for (;;) {
        double t = bench_now();
        for (long i = 0; i < reps; i++)
            f(arg, i);
        t = bench_now() - t;
        if (t >= min_s)
            return reps;
        reps = t < 1e-5 ? reps * 16 : (long)((double)reps * (1.25 * min_s / t)) + 1;
    }
}

/* Seconds per call over one sample of reps calls, numbered from *call on. */
static inline double bench_sample(void (*f)(void *arg, long call), void *arg, long reps,
                                  long *call)
{
    double t = bench_now();
    for (long i = 0; i < reps; i++)
        f(arg, (*call)++);
    return (bench_now() - t) / (double)reps;
}

/* Seconds per call of f(arg, call): reps calls make one sample, reps grown until a sample
 * takes >= min_s; then n samples (n <= BENCH_MAX_SAMPLES). The sampled calls are numbered
 * 0, 1, 2, ... across samples (for benches that rotate over inputs). */
static inline bench_stats bench_time(void (*f)(void *arg, long call), void *arg, double min_s,
                                     int n)
{
    const long reps = bench_reps(f, arg, min_s);
    double s[BENCH_MAX_SAMPLES];
    long call = 0;
    for (int k = 0; k < n; k++)
        s[k] = bench_sample(f, arg, reps, &call);
    return bench_stats_of(s, n);
}

/* bench_time of m (<= 8) variants f[i](arg[i], call) at once, A/B style: their samples
 * alternate (sample k runs the variants in turn, in reverse order when k is odd), so a change
 * of machine load in the middle falls on all of them alike. */
static inline void bench_time_alt(int m, void (*const f[])(void *arg, long call),
                                  void *const arg[], double min_s, int n, bench_stats out[])
{
    long reps[8], call[8] = {0};
    double s[8][BENCH_MAX_SAMPLES];
    for (int i = 0; i < m; i++)
        reps[i] = bench_reps(f[i], arg[i], min_s);
    for (int k = 0; k < n; k++)
        for (int ii = 0; ii < m; ii++) {
            const int i = k % 2 ? m - 1 - ii : ii;
            s[i][k] = bench_sample(f[i], arg[i], reps[i], &call[i]);
        }
    for (int i = 0; i < m; i++)
        out[i] = bench_stats_of(s[i], n);
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
