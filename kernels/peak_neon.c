/* peak_neon.c - fp32 FMLA (128-bit) and int8 peak loops by the widening rule (SMULL, SMLAL2
 * into 16-bit lanes, SADALP into 32-bit ones), arm64 Advanced SIMD. */
#include <arm_neon.h>

#include "peak.h"

/* Twelve independent FMLA chains (a = a + b * m): 4-cycle latency on up to four pipes needs
 * at least 16 in flight on the widest cores, 8 on most; the addend is the chain so that no
 * register copy goes with each FMLA. */
double ge_peak_fp32_neon(double seconds)
{
    float32x4_t a[12];
    const float32x4_t m = vdupq_n_f32(0.999999f), b = vdupq_n_f32(1e-7f);
#pragma GCC unroll 16
    for (int i = 0; i < 12; i++)
        a[i] = vdupq_n_f32(1.0f + (float)i);
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 12; i++)
                a[i] = vfmaq_f32(a[i], b, m);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    float32x4_t s = a[0];
#pragma GCC unroll 16
    for (int i = 1; i < 12; i++)
        s = vaddq_f32(s, a[i]);
    volatile float sink = vgetq_lane_f32(s, 0);
    (void)sink;
    return (double)iters * 12 * 4 / t * 1e-9;
}

/* One s8 x s8 step, 16 MACs: SMULL of the low halves, SMLAL2 of the high halves into the
 * same 8 int16 lanes, SADALP of those into 4 int32 lanes (3 instructions). Eight
 * independent inputs, made opaque every round so that the products are not hoisted. */
double ge_peak_int8_neon(double seconds)
{
    int32x4_t acc[8];
    int8x16_t x[8];
    const int8x16_t w = vdupq_n_s8(-2);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        acc[i] = vdupq_n_s32(0);
        x[i] = vdupq_n_s8((int8_t)(3 + i));
    }
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 16
            for (int i = 0; i < 8; i++) {
                __asm__ volatile("" : "+w"(x[i]));
                const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(x[i]), vget_low_s8(w)),
                                                  x[i], w);
                acc[i] = vpadalq_s16(acc[i], p);
            }
        }
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    int32x4_t s = acc[0];
#pragma GCC unroll 16
    for (int i = 1; i < 8; i++)
        s = vaddq_s32(s, acc[i]);
    volatile int sink = vgetq_lane_s32(s, 0);
    (void)sink;
    return (double)iters * 8 * 16 / t * 1e-9;
}
