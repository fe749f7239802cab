/* act_avx512.c - gelu_tanh(x) * u, 16 lanes: 0.5 x (1 + tanh z) is x * sigmoid(2z) =
 * x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3), with the attention family's
 * polynomial exp (attn.h: ~1 ulp) on chunks. Large |z| saturates cleanly: exp -> inf gives
 * x / inf = -0 (gelu of a very negative x), exp -> 0 gives x. */
#include <immintrin.h>

#include "act.h"
#include "attn.h"

#define CHUNK 256

void ge_gelu_mul_avx512(float *g, const float *u, int64_t n)
{
    float arg[CHUNK], e[CHUNK];
    const __m512 c = _mm512_set1_ps(-2.0f * 0.7978845608028654f), k = _mm512_set1_ps(0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK, i = 0;
        for (; i + 16 <= m; i += 16) {
            __m512 x = _mm512_loadu_ps(g + i0 + i);
            __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
            _mm512_storeu_ps(arg + i, _mm512_mul_ps(c, _mm512_fmadd_ps(k, x3, x)));
        }
        for (; i < m; i++) {
            float x = g[i0 + i];
            arg[i] = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
        }
        ge_attn_exp_avx512(arg, e, m);
        for (i = 0; i + 16 <= m; i += 16) {
            __m512 x = _mm512_loadu_ps(g + i0 + i);
            __m512 y = _mm512_div_ps(x, _mm512_add_ps(one, _mm512_loadu_ps(e + i)));
            _mm512_storeu_ps(g + i0 + i, _mm512_mul_ps(y, _mm512_loadu_ps(u + i0 + i)));
        }
        for (; i < m; i++)
            g[i0 + i] = g[i0 + i] / (1.0f + e[i]) * u[i0 + i];
    }
}
