/* kq_neon.c - the quantised-type GEMM at the neon tier: kq_arm.h with a widening 16-byte dot,
 * SMULL + SMLAL2 (two products per int16 lane: the largest, 2 x 128 x 127, fits) then SADALP
 * into int32. */
#define DOT16(acc, w, a)                                                                    \
    vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a))
#define KQ_ARM_GEMM ge_kq_neon_gemm
#include "kq_arm.h"
