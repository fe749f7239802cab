/* act_avx512.c - act(x) * u, 16 lanes: gelu_tanh's 0.5 x (1 + tanh z) is x * sigmoid(2z) =
 * x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3); quick-GELU x / (1 + exp(-1.702 x)),
 * SiLU x / (1 + exp(-x)), the GLU gate 1 / (1 + exp(-x)),
 * with the attention family's polynomial exp (attn.h: ~1 ulp) inline, one pass per 16 lanes.
 * Large |z| saturates cleanly: exp -> inf gives x / inf = -0 (gelu of a very negative x),
 * exp -> 0 gives x.
 *
 * RMSNorm and RoPE rows, 16 lanes, bit-identical to the scalar tier (kern.h). */
#include <immintrin.h>
#include <math.h>

#include "act.h"
#include "exp_avx512.h"

void ge_act_mul_avx512(float *g, const float *u, int64_t n, ge_act kind, const float *clip)
{
    const __m512 c = _mm512_set1_ps(-2.0f * 0.7978845608028654f), k = _mm512_set1_ps(0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f);
    /* exp's argument is -k x for the sigmoid forms (k = 1.702 for quick-GELU, 1 otherwise) */
    const float kf = kind == GE_GELU_QUICK ? GE_QUICK_GELU_K : 1.0f;
    const __m512 ck = _mm512_set1_ps(-kf);
    const int tanh_form = kind == GE_GELU_TANH, gate = kind == GE_SIGMOID;
    /* without clip: bounds that change nothing (a NaN stays NaN either way) */
    const float b0 = clip ? clip[0] : -INFINITY, b1 = clip ? clip[1] : INFINITY;
    const float b2 = clip ? clip[2] : -INFINITY, b3 = clip ? clip[3] : INFINITY;
    const __m512 lo = _mm512_set1_ps(b0), hi = _mm512_set1_ps(b1);
    const __m512 lo2 = _mm512_set1_ps(b2), hi2 = _mm512_set1_ps(b3);
    /* the tail through the same lanes, masked */
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 msk = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(msk, g + i);
        if (clip)
            x = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
        const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        const __m512 e = exp16(tanh_form ? _mm512_mul_ps(c, _mm512_fmadd_ps(k, x3, x))
                                         : _mm512_mul_ps(ck, x));
        __m512 y = _mm512_div_ps(gate ? one : x, _mm512_add_ps(one, e));
        y = u ? _mm512_mul_ps(y, _mm512_maskz_loadu_ps(msk, u + i)) : y;
        _mm512_mask_storeu_ps(g + i, msk, clip ? _mm512_min_ps(hi2, _mm512_max_ps(lo2, y)) : y);
    }
}

/* max(lo, x) then min(hi, .) with the bound first: a NaN x comes through, as in the scalar
 * tier's comparisons */
void ge_clamp_avx512(float *dst, const float *src, int64_t n, float lo, float hi)
{
    const __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_min_ps(h, _mm512_max_ps(l, _mm512_loadu_ps(src + i))));
    for (; i < n; i++) {
        const float x = src[i] < lo ? lo : src[i];
        dst[i] = x > hi ? hi : x;
    }
}

void ge_axpy_avx512(float *y, const float *x, int64_t n, float a)
{
    const __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i),
                                            _mm512_mul_ps(av, _mm512_loadu_ps(x + i))));
    for (; i < n; i++)
        y[i] = y[i] + a * x[i];
}

void ge_dwconv_avx512(float *y, const float *x, int64_t t0, int64_t t1, const float *w,
                     int k, int64_t c)
{
    for (int64_t t = t0; t < t1; t++) {
        const int q0 = t - (k - 1) < 0 ? (int)(k - 1 - t) : 0; /* taps before row 0 are zeros */
        int64_t i = 0;
        for (; i + 16 <= c; i += 16) {
            __m512 s = _mm512_setzero_ps();
            for (int q = q0; q < k; q++)
                s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_loadu_ps(w + q * c + i),
                                            _mm512_loadu_ps(x + (t - (k - 1) + q) * c + i)));
            _mm512_storeu_ps(y + t * c + i, s);
        }
        for (; i < c; i++) {
            float s = 0.0f;
            for (int q = q0; q < k; q++)
                s += w[q * c + i] * x[(t - (k - 1) + q) * c + i];
            y[t * c + i] = s;
        }
    }
}

/* ---- per-row operations (kern.h: bit-identical to the scalar tier) ------------------- */

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), the scalar tier's order */
static inline float sum8(__m256 s)
{
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 u = _mm_add_ps(t, _mm_movehdup_ps(t)); /* t0 + t1, ., t2 + t3, . */
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehl_ps(u, u)));
}

/* x * x added to the eight partial sums s (mul then add, never FMA) */
static inline __m256 addsq(__m256 s, __m256 x) { return _mm256_add_ps(s, _mm256_mul_ps(x, x)); }

/* x * inv (* w) over one row, 16 wide; the partial last block through the mask m */
static inline void scale_row(float *x, int64_t n, int64_t nb, __mmask16 m, const float *w,
                             float inv)
{
    const __m512 iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < nb; i += 16) {
        const __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + i), iv);
        _mm512_storeu_ps(x + i, w ? _mm512_mul_ps(y, _mm512_loadu_ps(w + i)) : y);
    }
    if (nb < n) {
        const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + nb), iv);
        const __m512 wv = w ? _mm512_maskz_loadu_ps(m, w + nb) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(x + nb, m, w ? _mm512_mul_ps(y, wv) : y);
    }
}

/* The sum of squares stays 8 lanes wide: the scalar tier's eight partial sums are serial
 * chains, and a 16-lane accumulator would split each into two (other bits). A partial last
 * block adds +0 in its missing lanes. Four rows' sums run interleaved (one row at a time,
 * the chains are latency-bound: 1.8x slower at n = 512). The scaling pass is 16 wide. */
void ge_rmsnorm_avx512(float *x, int64_t rows, int64_t n, const float *w, float eps)
{
    const int64_t nb = n & ~(int64_t)7, nb16 = n & ~(int64_t)15;
    const __mmask8 m = (__mmask8)((1u << (n - nb)) - 1);
    const __mmask16 m16 = (__mmask16)((1u << (n - nb16)) - 1);
    for (int64_t r = 0; r < rows;) {
        float ss[4];
        int k = rows - r >= 4 ? 4 : 1;
        float *x0 = x + r * n;
        if (k == 4) {
            const float *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t i = 0; i < nb; i += 8) {
                s0 = addsq(s0, _mm256_loadu_ps(x0 + i)), s1 = addsq(s1, _mm256_loadu_ps(x1 + i));
                s2 = addsq(s2, _mm256_loadu_ps(x2 + i)), s3 = addsq(s3, _mm256_loadu_ps(x3 + i));
            }
            if (nb < n) {
                s0 = addsq(s0, _mm256_maskz_loadu_ps(m, x0 + nb));
                s1 = addsq(s1, _mm256_maskz_loadu_ps(m, x1 + nb));
                s2 = addsq(s2, _mm256_maskz_loadu_ps(m, x2 + nb));
                s3 = addsq(s3, _mm256_maskz_loadu_ps(m, x3 + nb));
            }
            ss[0] = sum8(s0), ss[1] = sum8(s1), ss[2] = sum8(s2), ss[3] = sum8(s3);
        } else {
            __m256 s0 = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; i += 8)
                s0 = addsq(s0, _mm256_loadu_ps(x0 + i));
            if (nb < n)
                s0 = addsq(s0, _mm256_maskz_loadu_ps(m, x0 + nb));
            ss[0] = sum8(s0);
        }
        for (int j = 0; j < k; j++)
            scale_row(x0 + j * n, n, nb16, m16, w, 1.0f / sqrtf(ss[j] / (float)n + eps));
        r += k;
    }
}

/* Sixteen j at a time, the rest masked; the products are rounded before the add / sub, as in
 * the scalar tier. */
void ge_rope_avx512(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn)
{
    const int64_t half = d / 2, jb = half & ~(int64_t)15;
    const __mmask16 m = (__mmask16)((1u << (half - jb)) - 1);
    for (int64_t h = 0; h < n_head; h++, v += d) {
        float *a = v, *b = v + half;
        for (int64_t j = 0; j < jb; j += 16) {
            const __m512 x0 = _mm512_loadu_ps(a + j), x1 = _mm512_loadu_ps(b + j);
            const __m512 c = _mm512_loadu_ps(cs + j), s = _mm512_loadu_ps(sn + j);
            _mm512_storeu_ps(a + j, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
            _mm512_storeu_ps(b + j, _mm512_add_ps(_mm512_mul_ps(x1, c), _mm512_mul_ps(x0, s)));
        }
        if (jb < half) {
            const __m512 x0 = _mm512_maskz_loadu_ps(m, a + jb);
            const __m512 x1 = _mm512_maskz_loadu_ps(m, b + jb);
            const __m512 c = _mm512_maskz_loadu_ps(m, cs + jb);
            const __m512 s = _mm512_maskz_loadu_ps(m, sn + jb);
            const __m512 y0 = _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s));
            const __m512 y1 = _mm512_add_ps(_mm512_mul_ps(x1, c), _mm512_mul_ps(x0, s));
            _mm512_mask_storeu_ps(a + jb, m, y0);
            _mm512_mask_storeu_ps(b + jb, m, y1);
        }
    }
}
