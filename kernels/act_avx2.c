/* act_avx2.c - act(x) * u, 8 lanes: gelu_tanh's 0.5 x (1 + tanh z) is x * sigmoid(2z) =
 * x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3); quick-GELU x / (1 + exp(-1.702 x)),
 * SiLU x / (1 + exp(-x)), the GLU gate 1 / (1 + exp(-x)),
 * with the attention family's polynomial exp (attn.h: ~1 ulp) on chunks. Large |z| saturates
 * cleanly: exp -> inf gives x / inf = -0 (gelu of a very negative x), exp -> 0 gives x.
 *
 * RMSNorm and RoPE rows, 8 lanes, bit-identical to the scalar tier (kern.h). */
#include <immintrin.h>
#include <math.h>

#include "act.h"
#include "attn.h"

#define CHUNK 256

void ge_act_mul_avx2(float *g, const float *u, int64_t n, ge_act kind, const float *clip)
{
    float arg[CHUNK], e[CHUNK];
    const __m256 c = _mm256_set1_ps(-2.0f * 0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    /* exp's argument is -k x for the sigmoid forms (k = 1.702 for quick-GELU, 1 otherwise) */
    const float kf = kind == GE_GELU_QUICK ? GE_QUICK_GELU_K : 1.0f;
    const __m256 ck = _mm256_set1_ps(-kf);
    const int tanh_form = kind == GE_GELU_TANH, gate = kind == GE_SIGMOID;
    /* without clip: bounds that change nothing (a NaN stays NaN either way) */
    const float b0 = clip ? clip[0] : -INFINITY, b1 = clip ? clip[1] : INFINITY;
    const float b2 = clip ? clip[2] : -INFINITY, b3 = clip ? clip[3] : INFINITY;
    const __m256 lo = _mm256_set1_ps(b0), hi = _mm256_set1_ps(b1);
    const __m256 lo2 = _mm256_set1_ps(b2), hi2 = _mm256_set1_ps(b3);
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK, i = 0;
        for (; i + 8 <= m; i += 8) {
            __m256 x = _mm256_loadu_ps(g + i0 + i);
            if (clip) {
                x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
                _mm256_storeu_ps(g + i0 + i, x);
            }
            __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
            _mm256_storeu_ps(arg + i, tanh_form ? _mm256_mul_ps(c, _mm256_fmadd_ps(k, x3, x))
                                               : _mm256_mul_ps(ck, x));
        }
        for (; i < m; i++) {
            float x = g[i0 + i];
            if (clip) {
                x = x < b0 ? b0 : x;
                g[i0 + i] = x = x > b1 ? b1 : x;
            }
            arg[i] = tanh_form ? -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x)
                               : -kf * x;
        }
        ge_attn_exp_avx2(arg, e, m);
        for (i = 0; i + 8 <= m; i += 8) {
            __m256 x = gate ? one : _mm256_loadu_ps(g + i0 + i);
            __m256 y = _mm256_div_ps(x, _mm256_add_ps(one, _mm256_loadu_ps(e + i)));
            y = u ? _mm256_mul_ps(y, _mm256_loadu_ps(u + i0 + i)) : y;
            _mm256_storeu_ps(g + i0 + i, clip ? _mm256_min_ps(hi2, _mm256_max_ps(lo2, y)) : y);
        }
        for (; i < m; i++) {
            float y = (gate ? 1.0f : g[i0 + i]) / (1.0f + e[i]);
            y = u ? y * u[i0 + i] : y;
            y = y < b2 ? b2 : y;
            g[i0 + i] = y > b3 ? b3 : y;
        }
    }
}

/* max(lo, x) then min(hi, .) with the bound first: a NaN x comes through, as in the scalar
 * tier's comparisons */
void ge_clamp_avx2(float *dst, const float *src, int64_t n, float lo, float hi)
{
    const __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_min_ps(h, _mm256_max_ps(l, _mm256_loadu_ps(src + i))));
    for (; i < n; i++) {
        const float x = src[i] < lo ? lo : src[i];
        dst[i] = x > hi ? hi : x;
    }
}

void ge_axpy_avx2(float *y, const float *x, int64_t n, float a)
{
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                            _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
    for (; i < n; i++)
        y[i] = y[i] + a * x[i];
}

void ge_dwconv_avx2(float *y, const float *x, int64_t t0, int64_t t1, const float *w,
                     int k, int64_t c)
{
    for (int64_t t = t0; t < t1; t++) {
        const int q0 = t - (k - 1) < 0 ? (int)(k - 1 - t) : 0; /* taps before row 0 are zeros */
        int64_t i = 0;
        for (; i + 8 <= c; i += 8) {
            __m256 s = _mm256_setzero_ps();
            for (int q = q0; q < k; q++)
                s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_loadu_ps(w + q * c + i),
                                            _mm256_loadu_ps(x + (t - (k - 1) + q) * c + i)));
            _mm256_storeu_ps(y + t * c + i, s);
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

/* lanes [0, m) of a row's partial last block: tail_mask + 8 - m */
static const int32_t tail_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static inline __m256i tail(int64_t m)
{
    return _mm256_loadu_si256((const __m256i *)(tail_mask + 8 - m));
}

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), the scalar tier's order */
static inline float sum8(__m256 s)
{
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 u = _mm_add_ps(t, _mm_movehdup_ps(t)); /* t0 + t1, ., t2 + t3, . */
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehl_ps(u, u)));
}

/* x * x added to the eight partial sums s (mul then add, never FMA) */
static inline __m256 addsq(__m256 s, __m256 x) { return _mm256_add_ps(s, _mm256_mul_ps(x, x)); }

/* x * inv (* w) over one row; the partial last block through the mask m */
static inline void scale_row(float *x, int64_t n, int64_t nb, __m256i m, const float *w,
                             float inv)
{
    const __m256 iv = _mm256_set1_ps(inv);
    for (int64_t i = 0; i < nb; i += 8) {
        const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), iv);
        _mm256_storeu_ps(x + i, w ? _mm256_mul_ps(y, _mm256_loadu_ps(w + i)) : y);
    }
    if (nb < n) {
        const __m256 y = _mm256_mul_ps(_mm256_maskload_ps(x + nb, m), iv);
        const __m256 wv = w ? _mm256_maskload_ps(w + nb, m) : _mm256_setzero_ps();
        _mm256_maskstore_ps(x + nb, m, w ? _mm256_mul_ps(y, wv) : y);
    }
}

/* The scalar tier's eight partial sums are the eight lanes; a partial last block adds +0 in
 * its missing lanes, which leaves a sum of squares unchanged. Four rows' sums run
 * interleaved: each row's lanes are serial add chains (latency-bound one row at a time,
 * 1.8x slower at n = 512). */
void ge_rmsnorm_avx2(float *x, int64_t rows, int64_t n, const float *w, float eps)
{
    const int64_t nb = n & ~(int64_t)7;
    const __m256i m = tail(n - nb);
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
                s0 = addsq(s0, _mm256_maskload_ps(x0 + nb, m));
                s1 = addsq(s1, _mm256_maskload_ps(x1 + nb, m));
                s2 = addsq(s2, _mm256_maskload_ps(x2 + nb, m));
                s3 = addsq(s3, _mm256_maskload_ps(x3 + nb, m));
            }
            ss[0] = sum8(s0), ss[1] = sum8(s1), ss[2] = sum8(s2), ss[3] = sum8(s3);
        } else {
            __m256 s0 = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; i += 8)
                s0 = addsq(s0, _mm256_loadu_ps(x0 + i));
            if (nb < n)
                s0 = addsq(s0, _mm256_maskload_ps(x0 + nb, m));
            ss[0] = sum8(s0);
        }
        for (int j = 0; j < k; j++)
            scale_row(x0 + j * n, n, nb, m, w, 1.0f / sqrtf(ss[j] / (float)n + eps));
        r += k;
    }
}

/* Eight j at a time; the products are rounded before the add / sub, as in the scalar tier. */
void ge_rope_avx2(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn)
{
    const int64_t half = d / 2, jb = half & ~(int64_t)7;
    const __m256i m = tail(half - jb);
    for (int64_t h = 0; h < n_head; h++, v += d) {
        float *a = v, *b = v + half;
        for (int64_t j = 0; j < jb; j += 8) {
            const __m256 x0 = _mm256_loadu_ps(a + j), x1 = _mm256_loadu_ps(b + j);
            const __m256 c = _mm256_loadu_ps(cs + j), s = _mm256_loadu_ps(sn + j);
            _mm256_storeu_ps(a + j, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
            _mm256_storeu_ps(b + j, _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s)));
        }
        if (jb < half) {
            const __m256 x0 = _mm256_maskload_ps(a + jb, m), x1 = _mm256_maskload_ps(b + jb, m);
            const __m256 c = _mm256_maskload_ps(cs + jb, m), s = _mm256_maskload_ps(sn + jb, m);
            const __m256 y0 = _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s));
            const __m256 y1 = _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s));
            _mm256_maskstore_ps(a + jb, m, y0);
            _mm256_maskstore_ps(b + jb, m, y1);
        }
    }
}
