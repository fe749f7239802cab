/* peak_arm.h - the int8 peak loop of the dotprod and i8mm tiers: twelve independent chains
 * of the tier's dot instruction. Included by kernels/peak_dotprod.c and peak_i8mm.c after
 * they define PEAK_OP(acc, x, w) (one instruction), PEAK_MACS (its multiply-adds) and
 * PEAK_NAME. */
#include <arm_neon.h>

#include "peak.h"

double PEAK_NAME(double seconds)
{
    int32x4_t acc[12];
    const int8x16_t x = vdupq_n_s8(3), w = vdupq_n_s8(-2);
#pragma GCC unroll 16
    for (int i = 0; i < 12; i++)
        acc[i] = vdupq_n_s32(i); /* distinct chains: equal ones would be merged */
    double t0 = ge_peak_clock(), t;
    long iters = 0;
    do {
        for (int r = 0; r < 100000; r++)
#pragma GCC unroll 16
            for (int i = 0; i < 12; i++)
                acc[i] = PEAK_OP(acc[i], x, w);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    int32x4_t s = acc[0];
#pragma GCC unroll 16
    for (int i = 1; i < 12; i++)
        s = vaddq_s32(s, acc[i]);
    volatile int sink = vgetq_lane_s32(s, 0);
    (void)sink;
    return (double)iters * 12 * PEAK_MACS / t * 1e-9;
}
