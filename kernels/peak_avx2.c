/* peak_avx2.c - fp32 FMA-256 and int8 (vpmaddubsw + vpmaddwd) peak loops. */
#include <immintrin.h>

#include "peak.h"

double ge_peak_fp32_avx2(double seconds)
{
    __m256 a[10], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 10; i++)
        a[i] = _mm256_set1_ps(1.0f + (float)i);
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 10; i++)
                a[i] = _mm256_fmadd_ps(a[i], m, c);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    __m256 s = a[0];
    for (int i = 1; i < 10; i++)
        s = _mm256_add_ps(s, a[i]);
    volatile float sink = _mm256_cvtss_f32(s);
    (void)sink;
    return (double)iters * 10 * 8 / t * 1e-9;
}

/* One u8 x s8 step: maddubs (32 MACs into 16 lanes) then madd with ones and add. Eight
 * independent inputs, made opaque every round so that nothing is hoisted or shared. */
double ge_peak_int8_avx2(double seconds)
{
    __m256i acc[8], x[8], w = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
    for (int i = 0; i < 8; i++) {
        acc[i] = _mm256_setzero_si256();
        x[i] = _mm256_set1_epi8((char)(3 + i));
    }
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 16
            for (int i = 0; i < 8; i++) {
                __asm__ volatile("" : "+x"(x[i]));
                acc[i] = _mm256_add_epi32(
                    acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(x[i], w), one));
            }
        }
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    __m256i s = acc[0];
    for (int i = 1; i < 8; i++)
        s = _mm256_add_epi32(s, acc[i]);
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return (double)iters * 8 * 32 / t * 1e-9;
}
