/* kq_neon.c - the quantised-type GEMM at the neon tier: kq_arm.h with a widening dot. Each
 * chunk's activation lane is broadcast (DUP), SMULL/SMULL2 multiply it with rows 0-1 / 2-3 of
 * the first chunk and SMLAL/SMLAL2 add the second chunk's products in int16 (two products are
 * at most 2 x 127 x 127: exact), SADALP widens the pairs into two int32 lanes per row, and
 * one pairwise add per sub-block gives the 4 rows' dots. */
#define DOT_T int32x4x2_t
#define DOT_ZERO(d) ((d).val[0] = (d).val[1] = vdupq_n_s32(0))
#define DOT2(d, w0, w1, x, l0, l1)                                                          \
    do {                                                                                    \
        const int8x16_t a0_ = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), l0)); \
        const int8x16_t a1_ = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), l1)); \
        (d).val[0] = vpadalq_s16((d).val[0], vmlal_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(a0_)), \
                                                      vget_low_s8(w1), vget_low_s8(a1_)));  \
        (d).val[1] = vpadalq_s16((d).val[1], vmlal_high_s8(vmull_high_s8(w0, a0_), w1, a1_)); \
    } while (0)
#define DOT_ROWS(d) vpaddq_s32((d).val[0], (d).val[1])
#define KQ_ARM_GEMM ge_kq_neon_gemm
#include "kq_arm.h"
