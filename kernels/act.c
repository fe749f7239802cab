/* act.c - activations (tanh GELU, quick-GELU, SiLU, sigmoid) times a gate, clamps, axpy, the
 * depthwise convolution, RMSNorm and RoPE rows: the scalar oracles and the table. */
#include <math.h>

#include "act.h"
#include "kern.h"

void ge_act_mul_scalar(float *g, const float *u, int64_t n, ge_act kind, const float *clip)
{
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        if (clip) {
            x = x < clip[0] ? clip[0] : x;
            x = x > clip[1] ? clip[1] : x;
        }
        float y;
        switch (kind) {
        case GE_GELU_QUICK: y = x / (1.0f + expf(-GE_QUICK_GELU_K * x)); break;
        case GE_SILU: y = x / (1.0f + expf(-x)); break;
        case GE_SIGMOID: y = 1.0f / (1.0f + expf(-x)); break;
        default: /* 0.5 x (1 + tanh z) = x sigmoid(2z): expf, not tanhf (act.h) */
            y = x / (1.0f + expf(-2.0f * (c * (x + 0.044715f * x * x * x))));
            break;
        }
        y = u ? y * u[i] : y;
        if (clip) {
            y = y < clip[2] ? clip[2] : y;
            y = y > clip[3] ? clip[3] : y;
        }
        g[i] = y;
    }
}

void ge_clamp_scalar(float *dst, const float *src, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = src[i] < lo ? lo : src[i];
        dst[i] = x > hi ? hi : x;
    }
}

void ge_axpy_scalar(float *y, const float *x, int64_t n, float a)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] + a * x[i];
}

void ge_dwconv_scalar(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                      int64_t c)
{
    for (int64_t t = t0; t < t1; t++)
        for (int64_t i = 0; i < c; i++) {
            float s = 0.0f;
            for (int q = t - (k - 1) < 0 ? (int)(k - 1 - t) : 0; q < k; q++)
                s += w[q * c + i] * x[(t - (k - 1) + q) * c + i];
            y[t * c + i] = s;
        }
}

/* The eight partial sums are the lanes of a 256-bit vector in the tiers (kern.h has the
 * order); w NULL skips the weight. */
void ge_rmsnorm_scalar(float *x, int64_t rows, int64_t n, const float *w, float eps)
{
    for (int64_t r = 0; r < rows; r++, x += n) {
        float s[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                s[k] += x[i + k] * x[i + k];
        for (; i < n; i++)
            s[i & 7] += x[i] * x[i];
        const float ss = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
        const float inv = 1.0f / sqrtf(ss / (float)n + eps);
        if (w)
            for (i = 0; i < n; i++)
                x[i] = x[i] * inv * w[i];
        else
            for (i = 0; i < n; i++)
                x[i] = x[i] * inv;
    }
}

void ge_rope_scalar(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn)
{
    const int64_t half = d / 2;
    for (int64_t h = 0; h < n_head; h++, v += d)
        for (int64_t j = 0; j < half; j++) {
            const float x0 = v[j], x1 = v[j + half];
            v[j] = x0 * cs[j] - x1 * sn[j];
            v[j + half] = x1 * cs[j] + x0 * sn[j];
        }
}

void ge_act_fill(ge_kern *k, ge_tier tier)
{
    k->act_mul = ge_act_mul_scalar;
    k->clamp = ge_clamp_scalar;
    k->dwconv = ge_dwconv_scalar;
    k->axpy = ge_axpy_scalar;
    k->rmsnorm = ge_rmsnorm_scalar;
    k->rope = ge_rope_scalar;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI) {
        k->act_mul = ge_act_mul_avx2;
        k->clamp = ge_clamp_avx2;
        k->dwconv = ge_dwconv_avx2;
        k->axpy = ge_axpy_avx2;
        k->rmsnorm = ge_rmsnorm_avx2;
        k->rope = ge_rope_avx2;
    }
    if (tier == GE_TIER_AVX512) {
        k->act_mul = ge_act_mul_avx512;
        k->clamp = ge_clamp_avx512;
        k->dwconv = ge_dwconv_avx512;
        k->axpy = ge_axpy_avx512;
        k->rmsnorm = ge_rmsnorm_avx512;
        k->rope = ge_rope_avx512;
    }
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM) {
        k->act_mul = ge_act_mul_neon;
        k->clamp = ge_clamp_neon;
        k->dwconv = ge_dwconv_neon;
        k->axpy = ge_axpy_neon;
        k->rmsnorm = ge_rmsnorm_neon;
        k->rope = ge_rope_neon;
    }
#else
    (void)tier;
#endif
}
