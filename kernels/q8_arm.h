/* q8_arm.h - the Q8_0 GEMM driver of the ARM tiers (q8.h has the layout and the rule).
 * Included by kernels/q8_neon.c, q8_dotprod.c and q8_i8mm.c at the top (the helpers) and
 * again after each defines its register tile
 *   tile(n, gp, nb, a, lda, da, y, ldy, nrow): y rows [0, nrow) of a row group (packed at
 *     gp) for tokens 0 .. n-1 (n <= NT, a compile-time constant at each call: the tile is
 *     specialised per n) over all nb blocks,
 * and Q8_ARM_GEMM, the name of the tier's q8_gemm. Tokens go by cache blocks of TB (their
 * activations stay in L2 across the row groups), each block by tiles of NT. The split changes
 * no value: each token's sums follow the same instructions whatever its tile holds. */
#ifndef GE_Q8_ARM_H
#define GE_Q8_ARM_H

#include <arm_neon.h>
#include <string.h>

#include "q8.h"

#define G 8
#define NT 4
#define TB 64
#define BLK GE_Q8_BLOCK_BYTES(G)
#define INLINE static inline __attribute__((always_inline))

/* the 8 outputs of one token (rows 0-3 in lo, 4-7 in hi), nrow of them */
INLINE void store8(float *y, float32x4_t lo, float32x4_t hi, int nrow)
{
    if (nrow == G) {
        vst1q_f32(y, lo);
        vst1q_f32(y + 4, hi);
    } else {
        float tmp[G];
        vst1q_f32(tmp, lo);
        vst1q_f32(tmp + 4, hi);
        memcpy(y, tmp, (size_t)nrow * sizeof(float));
    }
}

/* acc + (float)isum * (dw * da), each operation rounded (q8.h's rule) */
INLINE float32x4_t q8_rule(float32x4_t acc, int32x4_t isum, float32x4_t dw, float da)
{
    return vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dw, da)));
}

#endif

/* ---- the driver (included again after the tier's tile, with Q8_ARM_GEMM defined) ------ */
#ifdef Q8_ARM_GEMM
void Q8_ARM_GEMM(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                 int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const int64_t nb = cols / 32;
    const uint8_t *pk = packed;
    for (int64_t tb = t0; tb < t1; tb += TB) {
        const int64_t te = t1 - tb < TB ? t1 : tb + TB;
        for (int64_t g = r0 / G; g * G < r1; g++) {
            const uint8_t *gp = pk + g * nb * BLK;
            const int nrow = r1 - g * G < G ? (int)(r1 - g * G) : G;
            for (int64_t t = tb; t < te; t += NT) {
                const int8_t *a = act->qs + t * cols;
                const float *da = act->d + t * nb;
                float *yt = y + t * ldy + g * G;
                switch (te - t < NT ? te - t : NT) {
                case 1: tile(1, gp, nb, a, cols, da, yt, ldy, nrow); break;
                case 2: tile(2, gp, nb, a, cols, da, yt, ldy, nrow); break;
                case 3: tile(3, gp, nb, a, cols, da, yt, ldy, nrow); break;
                default: tile(4, gp, nb, a, cols, da, yt, ldy, nrow); break;
                }
            }
        }
    }
}
#endif
