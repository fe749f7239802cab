/* act.c - GELU (tanh form, gelu_pytorch_tanh) times a gate: the scalar oracle and the table. */
#include <math.h>

#include "act.h"
#include "kern.h"

void ge_gelu_mul_scalar(float *g, const float *u, int64_t n)
{
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void ge_act_fill(ge_kern *k, ge_tier tier)
{
    k->gelu_mul = ge_gelu_mul_scalar;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI)
        k->gelu_mul = ge_gelu_mul_avx2;
    if (tier == GE_TIER_AVX512)
        k->gelu_mul = ge_gelu_mul_avx512;
#else
    (void)tier;
#endif
}
