/* sgemm.c - the SGEMM family's table entries: panel packing and the panel GEMM for each tier,
 * falling back to the best lower tier implemented (avxvnni -> avx2, dotprod, i8mm -> neon). */
#include "kern.h"
#include "sgemm.h"

void ge_sgemm_fill(ge_kern *k, ge_tier tier)
{
    k->sg_panel = GE_SG_PANEL;
    k->sg_packed_size = ge_sg_packed_size;
    k->sg_pack = ge_sg_pack_scalar;
    k->sgemm = ge_sgemm_scalar;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI || tier == GE_TIER_AVX512) {
        k->sg_pack = ge_sg_pack_avx2;
        k->sgemm = ge_sgemm_avx2;
    }
    if (tier == GE_TIER_AVX512)
        k->sgemm = ge_sgemm_avx512;
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM) {
        k->sg_pack = ge_sg_pack_neon;
        k->sgemm = ge_sgemm_neon;
    }
#else
    (void)tier;
#endif
}
