/* attn.c - the attention family's table entry for each tier, falling back to the best lower
 * tier implemented (avxvnni -> avx2, dotprod and i8mm -> neon). */
#include "attn.h"
#include "kern.h"

void ge_attn_fill(ge_kern *k, ge_tier tier)
{
    k->attn = ge_attn_scalar;
    k->attn_dense = NULL; /* the scalar tier runs dense attention through attn */
    k->attn_dense_ranges = false;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI) {
        k->attn = ge_attn_avx2, k->attn_dense = ge_attn_dense_avx2;
        k->attn_dense_ranges = true;
    }
    if (tier == GE_TIER_AVX512) {
        k->attn = ge_attn_avx512, k->attn_dense = ge_attn_dense_avx512;
        k->attn_dense_ranges = true;
    }
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM)
        k->attn = ge_attn_neon, k->attn_dense = ge_attn_dense_neon;
#else
    (void)tier;
#endif
}
