/* exp_avx2.h - the attention family's polynomial exp, 8 lanes (attn.h has the numerics).
 * Included only by the avx2 tier files (it needs that tier's flags): the tiled and the dense
 * attention kernels share it. */
#ifndef GE_EXP_AVX2_H
#define GE_EXP_AVX2_H

#include <immintrin.h>

#include "attn.h"

/* e^r for |r| <= ln2/2: the degree-6 polynomial (attn.h) by Horner */
static inline __attribute__((always_inline)) __m256 exp8_poly(__m256 r)
{
    __m256 p = _mm256_set1_ps(GE_ATTN_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GE_ATTN_EXP_C1));
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

/* x = n ln2 + r: returns n = round(x / ln 2), r by the two-constant split */
static inline __attribute__((always_inline)) __m256 exp8_split(__m256 x, __m256 *r)
{
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(GE_ATTN_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *r = _mm256_fnmadd_ps(n, _mm256_set1_ps(GE_ATTN_LN2_LO),
                          _mm256_fnmadd_ps(n, _mm256_set1_ps(GE_ATTN_LN2_HI), x));
    return n;
}

/* e^t for t <= GE_ATTN_EXP_MAX or a quiet NaN, with the bits of the clamped p * 2^n form it
 * replaced (all 2^32 inputs checked, PERF.md) in fewer operations, and no denormal ever
 * reaching an fp operation:
 *  - 2^n goes in by an integer add to the polynomial's exponent field: exactly the product
 *    p * 2^n wherever that is normal, which it is for FLUSH <= t <= MAX;
 *  - no clamp: lanes under FLUSH are zeroed by the mask whatever the add made of them;
 *  - no NaN blend: n = NaN converts to INT_MIN, whose shift is 0, so the polynomial's NaN
 *    (t, quieted: t itself unless t is a signaling NaN) passes unchanged.
 * The dense softmax calls it directly: its arguments s - max are never above 0. */
static inline __attribute__((always_inline)) __m256 exp8_unclamped(__m256 t)
{
    __m256 r;
    const __m256 n = exp8_split(t, &r);
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    const __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(exp8_poly(r)), e));
    return _mm256_andnot_ps(_mm256_cmp_ps(t, _mm256_set1_ps(GE_ATTN_EXP_FLUSH), _CMP_LT_OQ), y);
}

/* e^t (attn.h): exp8_unclamped, +inf above GE_ATTN_EXP_MAX */
static inline __attribute__((always_inline)) __m256 exp8(__m256 t)
{
    return _mm256_blendv_ps(exp8_unclamped(t), _mm256_set1_ps(__builtin_inff()),
                            _mm256_cmp_ps(t, _mm256_set1_ps(GE_ATTN_EXP_MAX), _CMP_GT_OQ));
}

#endif
