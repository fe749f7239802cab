/* exp_avx2.h - the attention family's polynomial exp, 8 lanes (attn.h has the numerics).
 * Included only by the avx2 tier files (it needs that tier's flags): the tiled and the dense
 * attention kernels share it. */
#ifndef GE_EXP_AVX2_H
#define GE_EXP_AVX2_H

#include <immintrin.h>

#include "attn.h"

/* e^x for x in [-87.5, GE_ATTN_EXP_MAX], without the edge cases */
static inline __attribute__((always_inline)) __m256 exp8_core(__m256 x)
{
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(GE_ATTN_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(GE_ATTN_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(GE_ATTN_LN2_LO), r);
    __m256 p = _mm256_set1_ps(GE_ATTN_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __attribute__((always_inline)) __m256 exp8(__m256 t)
{
    /* clamped so that 2^n is a normal float; the ends are overridden below (max/min return
     * the second operand for NaN, so x is never NaN) */
    const __m256 x = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-87.5f)),
                                   _mm256_set1_ps(GE_ATTN_EXP_MAX));
    __m256 y = exp8_core(x);
    y = _mm256_andnot_ps(_mm256_cmp_ps(t, _mm256_set1_ps(GE_ATTN_EXP_FLUSH), _CMP_LT_OQ), y);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()),
                         _mm256_cmp_ps(t, _mm256_set1_ps(GE_ATTN_EXP_MAX), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, t, _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
}

/* exp8 for t <= 0 or NaN (s - m with m the exact max of the scores): the same bits without
 * the upper clamp and its +inf case */
static inline __attribute__((always_inline)) __m256 exp8_nonpos(__m256 t)
{
    __m256 y = exp8_core(_mm256_max_ps(t, _mm256_set1_ps(-87.5f)));
    y = _mm256_andnot_ps(_mm256_cmp_ps(t, _mm256_set1_ps(GE_ATTN_EXP_FLUSH), _CMP_LT_OQ), y);
    return _mm256_blendv_ps(y, t, _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
}

#endif
