/* exp_avx512.h - the attention family's polynomial exp, 16 lanes (attn.h has the numerics).
 * Included only by the avx512 tier files (it needs that tier's flags): the tiled and the dense
 * attention kernels and act_mul's GELU and sigmoid share it. */
#ifndef GE_EXP_AVX512_H
#define GE_EXP_AVX512_H

#include <immintrin.h>

#include "attn.h"

/* e^r for |r| <= ln2/2: the degree-6 polynomial (attn.h) by Horner */
static inline __attribute__((always_inline)) __m512 exp16_poly(__m512 r)
{
    __m512 p = _mm512_set1_ps(GE_ATTN_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C1));
    return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

/* e^t for t <= GE_ATTN_EXP_MAX or a quiet NaN, with the bits of the clamped scalef(p, n) form
 * it replaced (all 2^32 inputs checked, PERF.md) in fewer operations, and no denormal ever
 * reaching an fp operation (the shape of exp_avx2.h's exp8_unclamped):
 *  - 2^n goes in by an integer add to the polynomial's exponent field: exactly p * 2^n
 *    wherever that is normal, which it is for FLUSH <= t <= MAX;
 *  - no clamp: lanes under FLUSH are zeroed by the add's mask whatever it made of them;
 *  - no NaN blend: n = NaN converts to INT_MIN, whose shift is 0, so the polynomial's NaN
 *    (t, quieted: t itself unless t is a signaling NaN) passes unchanged.
 * The dense softmax calls it directly: its arguments s - max are never above 0. */
static inline __attribute__((always_inline)) __m512 exp16_unclamped(__m512 t)
{
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(GE_ATTN_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(GE_ATTN_LN2_LO),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(GE_ATTN_LN2_HI), t));
    const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    const __mmask16 keep = _mm512_cmp_ps_mask(t, _mm512_set1_ps(GE_ATTN_EXP_FLUSH), _CMP_NLT_UQ);
    return _mm512_castsi512_ps(_mm512_maskz_add_epi32(keep, _mm512_castps_si512(exp16_poly(r)), e));
}

/* e^t (attn.h): exp16_unclamped, +inf above GE_ATTN_EXP_MAX */
static inline __attribute__((always_inline)) __m512 exp16(__m512 t)
{
    return _mm512_mask_mov_ps(exp16_unclamped(t),
                              _mm512_cmp_ps_mask(t, _mm512_set1_ps(GE_ATTN_EXP_MAX), _CMP_GT_OQ),
                              _mm512_set1_ps(__builtin_inff()));
}

#endif
