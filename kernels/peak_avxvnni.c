/* peak_avxvnni.c - int8 peak with 256-bit vpdpbusd (AVX-VNNI). */
#include <immintrin.h>

#include "peak.h"

double ge_peak_int8_avxvnni(double seconds)
{
    __m256i acc[10], x = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-2);
    for (int i = 0; i < 10; i++)
        acc[i] = _mm256_setzero_si256();
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 10; i++)
                acc[i] = _mm256_dpbusd_avx_epi32(acc[i], x, w);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    __m256i s = acc[0];
    for (int i = 1; i < 10; i++)
        s = _mm256_add_epi32(s, acc[i]);
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return (double)iters * 10 * 32 / t * 1e-9;
}
