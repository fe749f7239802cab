/* kq_dotprod.c - the quantised-type GEMM at the dotprod tier (and i8mm, which has no kernel of
 * its own for these types): kq_arm.h with SDOT as the 16-byte dot. */
#define DOT16(acc, w, a) vdotq_s32(acc, w, a)
#define KQ_ARM_GEMM ge_kq_dotprod_gemm
#include "kq_arm.h"
