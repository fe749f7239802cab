/* kq_avxvnni.c - the quantised-type GEMM, avxvnni tier (AVX2 + 256-bit AVX-VNNI): the avx2
 * tier's layouts (G = 8) and kernels; the 32-value block family through its own entry. */
#include "kq.h"

void ge_kq_avxvnni_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                        const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                        float *y, int64_t ldy)
{
    if (ge_kq_span(type) == 1)
        ge_kq32_avxvnni_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
    else
        ge_kq_avx2_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}
