/* kq_dotprod.c - the quantised-type GEMM at the dotprod tier (and i8mm, which has no kernel of
 * its own for these types): kq_arm.h with SDOT by lane as the dot. */
#define DOT_T int32x4_t
#define DOT_ZERO(d) ((d) = vdupq_n_s32(0))
#define DOT2(d, w0, w1, x, l0, l1) \
    ((d) = vdotq_laneq_s32(vdotq_laneq_s32(d, w0, x, l0), w1, x, l1))
#define DOT_ROWS(d) (d)
#define KQ_ARM_GEMM ge_kq_dotprod_gemm
#include "kq_arm.h"
