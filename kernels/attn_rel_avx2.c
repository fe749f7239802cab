/* attn_rel_avx2.c - attn_rel, 8 lanes (attn_rel_tier.h). */
#include <immintrin.h>

static inline float sum8(__m256 x)
{
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 u = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

#define VW 8
typedef __m256 vf;
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, x) _mm256_storeu_ps(p, x)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_SUM(x) sum8(x)
#define ATTN_REL_EXP ge_attn_exp_avx2
#define ATTN_REL_NAME ge_attn_rel_avx2
#include "attn_rel_tier.h"
