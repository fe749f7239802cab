/* kq.c - the quantised-type GEMM family's entry in the kernel table: which functions each
 * tier uses. A tier packs the types it has kernels for (kq.h layouts) and runs the scalar
 * oracle on the file's rows for the others; kq_row_group, kq_packed_size, kq_pack and
 * kq_gemm always come from the same tier. */
#include "kq.h"

void ge_kq_fill(ge_kern *k, ge_tier tier)
{
    k->kq_row_group = 1;
    k->kq_packed_size = ge_kq_scalar_packed_size;
    k->kq_pack = NULL;
    k->kq_gemm = ge_kq_scalar_gemm;
#if defined(__x86_64__)
    switch (tier) {
    case GE_TIER_AVX2:
    case GE_TIER_AVXVNNI: /* the same layouts */
        k->kq_row_group = 8;
        k->kq_packed_size = ge_kq_avx2_packed_size;
        k->kq_pack = ge_kq_avx2_pack;
        k->kq_gemm = tier == GE_TIER_AVXVNNI ? ge_kq_avxvnni_gemm : ge_kq_avx2_gemm;
        break;
    case GE_TIER_AVX512:
        k->kq_row_group = 16;
        k->kq_packed_size = ge_kq_avx512_packed_size;
        k->kq_pack = ge_kq_avx512_pack;
        k->kq_gemm = ge_kq_avx512_gemm;
        break;
    default:
        break;
    }
#elif defined(__aarch64__)
    /* the file's rows in place (row group 1, no packing), like the scalar tier */
    if (tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM)
        k->kq_gemm = ge_kq_dotprod_gemm;
    else if (tier == GE_TIER_NEON)
        k->kq_gemm = ge_kq_neon_gemm;
#else
    (void)tier;
#endif
}
