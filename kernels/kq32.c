/* kq32.c - the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) of the kq GEMM: until
 * its packed kernels land, every tier reads these types' file rows in place through the
 * scalar oracle (kq.h's rule; correct, slow). */
#include "kq.h"

size_t ge_kq32_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group)
{
    (void)type, (void)rows, (void)cols, (void)group;
    return 0;
}

void ge_kq32_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                    int64_t r0, int64_t r1, int group)
{
    (void)type, (void)src, (void)rows, (void)cols, (void)dst, (void)r0, (void)r1, (void)group;
}

#if defined(__x86_64__)
void ge_kq32_avx2_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy)
{
    ge_kq_scalar_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}

void ge_kq32_avxvnni_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                          const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                          float *y, int64_t ldy)
{
    ge_kq32_avx2_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}

void ge_kq32_avx512_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                         const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                         float *y, int64_t ldy)
{
    ge_kq_scalar_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}
#endif
