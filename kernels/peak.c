/* peak.c - the peak family's table entries and the portable fp32 loop. */
#include <time.h>

#include "kern.h"
#include "peak.h"

/* Thread CPU time: on a shared machine wall time would count the other tenants' turns. */
double ge_peak_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Eight independent multiply-add chains (the compiler may contract them to FMA). */
double ge_peak_fp32_scalar(double seconds)
{
    float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float m = 0.999999f, c = 1e-7f;
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
            for (int i = 0; i < 8; i++)
                a[i] = a[i] * m + c;
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    volatile float sink = a[0] + a[7];
    (void)sink;
    return (double)iters * 8 / t * 1e-9;
}

void ge_peak_fill(ge_kern *k, ge_tier tier)
{
    k->peak_fp32 = ge_peak_fp32_scalar;
    k->peak_int8 = NULL;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI || tier == GE_TIER_AVX512) {
        k->peak_fp32 = ge_peak_fp32_avx2;
        k->peak_int8 = ge_peak_int8_avx2;
    }
    if (tier == GE_TIER_AVXVNNI)
        k->peak_int8 = ge_peak_int8_avxvnni;
    if (tier == GE_TIER_AVX512) {
        k->peak_fp32 = ge_peak_fp32_avx512;
        k->peak_int8 = ge_peak_int8_avx512;
    }
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM) {
        k->peak_fp32 = ge_peak_fp32_neon;
        k->peak_int8 = ge_peak_int8_neon;
    }
    if (tier == GE_TIER_DOTPROD)
        k->peak_int8 = ge_peak_int8_dotprod;
    if (tier == GE_TIER_I8MM)
        k->peak_int8 = ge_peak_int8_i8mm;
#else
    (void)tier;
#endif
}
