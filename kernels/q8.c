/* q8.c - the Q8_0 GEMM family's entry in the kernel table: which functions each tier uses.
 * x86-64 builds implement scalar, avx2, avxvnni and avx512; arm64 builds scalar, neon,
 * dotprod and i8mm (the quantiser is neon's on all three). Each tier brings its own packed
 * layout (q8.h), so q8_row_group, q8_packed_size, q8_pack and q8_gemm always come from the
 * same tier. */
#include "q8.h"

static void set_scalar(ge_kern *k)
{
    k->q8_row_group = 1;
    k->q8_packed_size = ge_q8_scalar_packed_size;
    k->q8_pack = ge_q8_scalar_pack;
    k->q8_quantize = ge_q8_scalar_quantize;
    k->q8_gemm = ge_q8_scalar_gemm;
    k->q8_gemm_wide = ge_q8_scalar_gemm_wide;
}

void ge_q8_fill(ge_kern *k, ge_tier tier)
{
    set_scalar(k);
#if defined(__x86_64__)
    switch (tier) {
    case GE_TIER_AVX2:
        k->q8_row_group = 8;
        k->q8_packed_size = ge_q8_g8_packed_size;
        k->q8_pack = ge_q8_g8_pack;
        k->q8_quantize = ge_q8_avx2_quantize;
        k->q8_gemm = ge_q8_avx2_gemm;
        k->q8_gemm_wide = ge_q8_avx2_gemm_wide;
        break;
    case GE_TIER_AVXVNNI:
        k->q8_row_group = 8;
        k->q8_packed_size = ge_q8_g8_packed_size;
        k->q8_pack = ge_q8_g8b_pack;
        k->q8_quantize = ge_q8_avx2_quantize;
        k->q8_gemm = ge_q8_avxvnni_gemm;
        k->q8_gemm_wide = ge_q8_avxvnni_gemm_wide;
        break;
    case GE_TIER_AVX512:
        k->q8_row_group = 16;
        k->q8_packed_size = ge_q8_g16_packed_size;
        k->q8_pack = ge_q8_g16b_pack;
        k->q8_quantize = ge_q8_avx512_quantize;
        k->q8_gemm = ge_q8_avx512_gemm;
        k->q8_gemm_wide = ge_q8_avx512_gemm_wide;
        break;
    default:
        break;
    }
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM) {
        k->q8_row_group = 8;
        k->q8_packed_size = ge_q8_g8_packed_size;
        k->q8_pack = tier == GE_TIER_I8MM ? ge_q8_g8w8_pack : ge_q8_g8_pack;
        k->q8_quantize = ge_q8_neon_quantize;
        k->q8_gemm = tier == GE_TIER_I8MM      ? ge_q8_i8mm_gemm
                     : tier == GE_TIER_DOTPROD ? ge_q8_dotprod_gemm
                                               : ge_q8_neon_gemm;
        k->q8_gemm_wide = NULL;
    }
#else
    (void)tier;
#endif
}

int ge_q8_evex256_supported(const ge_cpu_feats *f)
{
    return ge_tier_supported(f, GE_TIER_AVX2) && f->os_avx512 && f->avx512f && f->avx512bw &&
           f->avx512vl && f->avx512vnni;
}

int ge_q8_fill_evex256(ge_kern *k)
{
#if defined(__x86_64__)
    ge_q8_fill(k, GE_TIER_AVXVNNI);
    k->q8_gemm = ge_q8_evex256_gemm;
    k->q8_gemm_wide = ge_q8_evex256_gemm_wide;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
