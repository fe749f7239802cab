/* peak_dotprod.c - int8 peak with SDOT (vdotq_s32: 16 MACs into 4 int32 lanes), armv8.2-a
 * dotprod. */
#include <arm_neon.h>

#include "peak.h"

double ge_peak_int8_dotprod(double seconds)
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
                acc[i] = vdotq_s32(acc[i], x, w);
        iters += 100000;
    } while ((t = ge_peak_clock() - t0) < seconds);
    int32x4_t s = acc[0];
#pragma GCC unroll 16
    for (int i = 1; i < 12; i++)
        s = vaddq_s32(s, acc[i]);
    volatile int sink = vgetq_lane_s32(s, 0);
    (void)sink;
    return (double)iters * 12 * 16 / t * 1e-9;
}
