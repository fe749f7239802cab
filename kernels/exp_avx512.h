/* exp_avx512.h - the attention family's polynomial exp, 16 lanes (attn.h has the numerics).
 * Included only by the avx512 tier files (it needs that tier's flags): the tiled and the dense
 * attention kernels share it. */
#ifndef GE_EXP_AVX512_H
#define GE_EXP_AVX512_H

#include <immintrin.h>

#include "attn.h"

static inline __attribute__((always_inline)) __m512 exp16(__m512 t)
{
    /* clamped to [FLUSH, MAX], where the result is a normal float (the ends are overridden
     * below): a lower bound of -100 let scalef make denormals, which can cost a microcode
     * assist each, for lanes that are then flushed to 0 anyway */
    const __m512 x = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(GE_ATTN_EXP_FLUSH)),
                                   _mm512_set1_ps(GE_ATTN_EXP_MAX));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(GE_ATTN_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(GE_ATTN_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(GE_ATTN_LN2_LO), r);
    __m512 p = _mm512_set1_ps(GE_ATTN_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GE_ATTN_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512 y = _mm512_scalef_ps(p, n);
    y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, _mm512_set1_ps(GE_ATTN_EXP_FLUSH), _CMP_NLT_UQ),
                            y);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(t, _mm512_set1_ps(GE_ATTN_EXP_MAX), _CMP_GT_OQ),
                           _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q), t);
}

#endif
