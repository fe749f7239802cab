/* attn_rel_avx512.c - attn_rel, 16 lanes (attn_rel_tier.h). */
#include <immintrin.h>

#define VW 16
typedef __m512 vf;
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, x) _mm512_storeu_ps(p, x)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_SUM(x) _mm512_reduce_add_ps(x)
#define ATTN_REL_EXP ge_attn_exp_avx512
#define ATTN_REL_NAME ge_attn_rel_avx512
#include "attn_rel_tier.h"
