/* kq.c - the quantised-type GEMM family's entry in the kernel table. Every tier runs the
 * scalar oracle until its own kernels land (kq.h: they must match it bit for bit). */
#include "kq.h"

void ge_kq_fill(ge_kern *k, ge_tier tier)
{
    (void)tier;
    k->kq_gemm = ge_kq_scalar_gemm;
}
