/* peak_avx512.c - fp32 FMA-512 and int8 VNNI-512 (vpdpbusd zmm) peak loops. */
#include <immintrin.h>

#include "peak.h"

double ge_peak_fp32_avx512(double seconds)
{
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm512_set1_ps(1.0f + (float)i);
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 12; i++)
                a[i] = _mm512_fmadd_ps(a[i], m, c);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    __m512 s = a[0];
    for (int i = 1; i < 12; i++)
        s = _mm512_add_ps(s, a[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iters * 12 * 16 / t * 1e-9;
}

double ge_peak_int8_avx512(double seconds)
{
    __m512i acc[12], x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
    for (int i = 0; i < 12; i++)
        acc[i] = _mm512_setzero_si512();
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 12; i++)
                acc[i] = _mm512_dpbusd_epi32(acc[i], x, w);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    __m512i s = acc[0];
    for (int i = 1; i < 12; i++)
        s = _mm512_add_epi32(s, acc[i]);
    /* one lane, as the other tiers: the scalar adds of a reduction overflow int (UB) */
    volatile int sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
    (void)sink;
    return (double)iters * 12 * 64 / t * 1e-9;
}
