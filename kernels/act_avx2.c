/* act_avx2.c - gelu_tanh(x) * u, 8 lanes: 0.5 x (1 + tanh z) is x * sigmoid(2z) =
 * x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3), with the attention family's
 * polynomial exp (attn.h: ~1 ulp) on chunks. Large |z| saturates cleanly: exp -> inf gives
 * x / inf = -0 (gelu of a very negative x), exp -> 0 gives x. */
#include <immintrin.h>

#include "act.h"
#include "attn.h"

#define CHUNK 256

void ge_gelu_mul_avx2(float *g, const float *u, int64_t n)
{
    float arg[CHUNK], e[CHUNK];
    const __m256 c = _mm256_set1_ps(-2.0f * 0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK, i = 0;
        for (; i + 8 <= m; i += 8) {
            __m256 x = _mm256_loadu_ps(g + i0 + i);
            __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
            _mm256_storeu_ps(arg + i, _mm256_mul_ps(c, _mm256_fmadd_ps(k, x3, x)));
        }
        for (; i < m; i++) {
            float x = g[i0 + i];
            arg[i] = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
        }
        ge_attn_exp_avx2(arg, e, m);
        for (i = 0; i + 8 <= m; i += 8) {
            __m256 x = _mm256_loadu_ps(g + i0 + i);
            __m256 y = _mm256_div_ps(x, _mm256_add_ps(one, _mm256_loadu_ps(e + i)));
            _mm256_storeu_ps(g + i0 + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i0 + i)));
        }
        for (; i < m; i++)
            g[i0 + i] = g[i0 + i] / (1.0f + e[i]) * u[i0 + i];
    }
}
