/* act_neon.c - act(x) * u, 4 lanes (arm64 Advanced SIMD): the operations of act_avx2.c's
 * vector lanes, gelu_tanh's 0.5 x (1 + tanh z) as x / (1 + exp(-2z)), z = sqrt(2/pi) (x +
 * 0.044715 x^3) with the x^3 term fused as there; quick-GELU x / (1 + exp(-1.702 x)), SiLU
 * x / (1 + exp(-x)), the GLU gate 1 / (1 + exp(-x)); exp is exp_neon.h's exp4, the bits of
 * exp8. A partial last vector goes through the same lanes from a padded copy, so every
 * element gets the vector rule (avx2's tails use a scalar argument instead).
 *
 * clamp, axpy, dwconv, RMSNorm and RoPE rows, bit-identical to the scalar tier (kern.h):
 * products and sums as separate vmulq / vaddq, never vfmaq (the compiler does not contract
 * intrinsics), and clamps by compare and select (FMAX would turn max(+0, -0) into +0 and
 * a NaN into NaN by another path than the scalar comparisons). */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "act.h"
#include "exp_neon.h"

#define INLINE static inline __attribute__((always_inline))

/* The scalar tier's x < lo ? lo : x, then x > hi ? hi : x: a NaN fails both compares. */
INLINE float32x4_t clamp4(float32x4_t x, float32x4_t lo, float32x4_t hi)
{
    x = vbslq_f32(vcltq_f32(x, lo), lo, x);
    return vbslq_f32(vcgtq_f32(x, hi), hi, x);
}

/* act(x) (* u) for 4 lanes; with clip, x is clamped first and the result after (the
 * clamped x need not be written back: the result overwrites it). */
INLINE float32x4_t act4(float32x4_t x, const float *u, int clip, int tanh_form, int gate,
                        float kf, const float32x4_t b[4])
{
    if (clip)
        x = clamp4(x, b[0], b[1]);
    const float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
    const float32x4_t arg =
        tanh_form ? vmulq_f32(vdupq_n_f32(-2.0f * 0.7978845608028654f),
                              vfmaq_f32(x, vdupq_n_f32(0.044715f), x3))
                  : vmulq_f32(vdupq_n_f32(-kf), x);
    const float32x4_t e = exp4(arg);
    float32x4_t y = vdivq_f32(gate ? vdupq_n_f32(1.0f) : x, vaddq_f32(vdupq_n_f32(1.0f), e));
    if (u)
        y = vmulq_f32(y, vld1q_f32(u));
    return clip ? clamp4(y, b[2], b[3]) : y;
}

void ge_act_mul_neon(float *g, const float *u, int64_t n, ge_act kind, const float *clip)
{
    const float kf = kind == GE_GELU_QUICK ? GE_QUICK_GELU_K : 1.0f;
    const int tanh_form = kind == GE_GELU_TANH, gate = kind == GE_SIGMOID;
    float32x4_t b[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    if (clip)
        for (int j = 0; j < 4; j++)
            b[j] = vdupq_n_f32(clip[j]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t y = act4(vld1q_f32(g + i), u ? u + i : NULL, clip != NULL,
                                   tanh_form, gate, kf, b);
        vst1q_f32(g + i, y);
    }
    if (i < n) { /* the same lanes on a zero-padded copy */
        float gx[4] = {0}, ux[4] = {0}, out[4];
        const size_t m = (size_t)(n - i) * sizeof(float);
        memcpy(gx, g + i, m);
        if (u)
            memcpy(ux, u + i, m);
        vst1q_f32(out,
                  act4(vld1q_f32(gx), u ? ux : NULL, clip != NULL, tanh_form, gate, kf, b));
        memcpy(g + i, out, m);
    }
}

void ge_clamp_neon(float *dst, const float *src, int64_t n, float lo, float hi)
{
    const float32x4_t l = vdupq_n_f32(lo), h = vdupq_n_f32(hi);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t a = vld1q_f32(src + i), b = vld1q_f32(src + i + 4);
        const float32x4_t c = vld1q_f32(src + i + 8), d = vld1q_f32(src + i + 12);
        vst1q_f32(dst + i, clamp4(a, l, h));
        vst1q_f32(dst + i + 4, clamp4(b, l, h));
        vst1q_f32(dst + i + 8, clamp4(c, l, h));
        vst1q_f32(dst + i + 12, clamp4(d, l, h));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, clamp4(vld1q_f32(src + i), l, h));
    for (; i < n; i++) {
        const float x = src[i] < lo ? lo : src[i];
        dst[i] = x > hi ? hi : x;
    }
}

void ge_axpy_neon(float *y, const float *x, int64_t n, float a)
{
    const float32x4_t av = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t p0 = vmulq_f32(av, vld1q_f32(x + i));
        const float32x4_t p1 = vmulq_f32(av, vld1q_f32(x + i + 4));
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), p0));
        vst1q_f32(y + i + 4, vaddq_f32(vld1q_f32(y + i + 4), p1));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(av, vld1q_f32(x + i))));
    for (; i < n; i++)
        y[i] = y[i] + a * x[i];
}

/* Sixteen channels per pass: four independent add chains hide FADD's latency. */
void ge_dwconv_neon(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                    int64_t c)
{
    for (int64_t t = t0; t < t1; t++) {
        const int q0 = t - (k - 1) < 0 ? (int)(k - 1 - t) : 0; /* taps before row 0 are zeros */
        const float *xr = x + (t - (k - 1) + q0) * c; /* tap q reads xr[(q - q0) * c] */
        int64_t i = 0;
        for (; i + 16 <= c; i += 16) {
            float32x4_t s[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0),
                                vdupq_n_f32(0)};
            for (int q = q0; q < k; q++)
                for (int j = 0; j < 4; j++)
                    s[j] = vaddq_f32(s[j],
                                     vmulq_f32(vld1q_f32(w + q * c + i + 4 * j),
                                               vld1q_f32(xr + (q - q0) * c + i + 4 * j)));
            for (int j = 0; j < 4; j++)
                vst1q_f32(y + t * c + i + 4 * j, s[j]);
        }
        for (; i + 4 <= c; i += 4) {
            float32x4_t s = vdupq_n_f32(0);
            for (int q = q0; q < k; q++)
                s = vaddq_f32(s, vmulq_f32(vld1q_f32(w + q * c + i),
                                           vld1q_f32(xr + (q - q0) * c + i)));
            vst1q_f32(y + t * c + i, s);
        }
        for (; i < c; i++) {
            float s = 0.0f;
            for (int q = q0; q < k; q++)
                s += w[q * c + i] * xr[(q - q0) * c + i];
            y[t * c + i] = s;
        }
    }
}

/* ---- per-row operations (kern.h: bit-identical to the scalar tier) ------------------- */

/* The scalar tier's eight partial sums s[i % 8]: lanes 0..3 of lo, 0..3 of hi. */
typedef struct {
    float32x4_t lo, hi;
} sum8_t;

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)): FADDP pairs t0 + t1 and t2 + t3 */
INLINE float sum8(sum8_t s)
{
    const float32x4_t t = vaddq_f32(s.lo, s.hi);
    return vpadds_f32(vget_low_f32(vpaddq_f32(t, t)));
}

/* x * x added to the partial sums (mul then add, never FMA) */
INLINE void addsq(sum8_t *s, const float *x)
{
    const float32x4_t a = vld1q_f32(x), b = vld1q_f32(x + 4);
    s->lo = vaddq_f32(s->lo, vmulq_f32(a, a));
    s->hi = vaddq_f32(s->hi, vmulq_f32(b, b));
}

/* The last n - nb < 8 values zero-padded: +0 squared leaves a sum of squares unchanged. */
INLINE void addsq_tail(sum8_t *s, const float *x, int64_t m)
{
    float b[8] = {0};
    memcpy(b, x, (size_t)m * sizeof(float));
    addsq(s, b);
}

/* x * inv (* w) over one row: the scalar expression per element, vectorised */
static void scale_row(float *x, int64_t n, const float *w, float inv)
{
    const float32x4_t iv = vdupq_n_f32(inv);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t y = vmulq_f32(vld1q_f32(x + i), iv);
        vst1q_f32(x + i, w ? vmulq_f32(y, vld1q_f32(w + i)) : y);
    }
    for (; i < n; i++)
        x[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}

/* Four rows' sums interleaved (eight independent add chains), as the avx2 tier does. */
void ge_rmsnorm_neon(float *x, int64_t rows, int64_t n, const float *w, float eps)
{
    const int64_t nb = n & ~(int64_t)7;
    const sum8_t zero = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t r = 0; r < rows;) {
        float ss[4];
        const int k = rows - r >= 4 ? 4 : 1;
        float *x0 = x + r * n;
        if (k == 4) {
            const float *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
            sum8_t s0 = zero, s1 = zero, s2 = zero, s3 = zero;
            for (int64_t i = 0; i < nb; i += 8) {
                addsq(&s0, x0 + i), addsq(&s1, x1 + i);
                addsq(&s2, x2 + i), addsq(&s3, x3 + i);
            }
            if (nb < n) {
                addsq_tail(&s0, x0 + nb, n - nb), addsq_tail(&s1, x1 + nb, n - nb);
                addsq_tail(&s2, x2 + nb, n - nb), addsq_tail(&s3, x3 + nb, n - nb);
            }
            ss[0] = sum8(s0), ss[1] = sum8(s1), ss[2] = sum8(s2), ss[3] = sum8(s3);
        } else {
            sum8_t s0 = zero;
            for (int64_t i = 0; i < nb; i += 8)
                addsq(&s0, x0 + i);
            if (nb < n)
                addsq_tail(&s0, x0 + nb, n - nb);
            ss[0] = sum8(s0);
        }
        for (int j = 0; j < k; j++)
            scale_row(x0 + j * n, n, w, 1.0f / sqrtf(ss[j] / (float)n + eps));
        r += k;
    }
}

/* Four j at a time; the products are rounded before the add / sub, as in the scalar tier. */
void ge_rope_neon(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn)
{
    const int64_t half = d / 2;
    for (int64_t h = 0; h < n_head; h++, v += d) {
        float *a = v, *b = v + half;
        int64_t j = 0;
        for (; j + 4 <= half; j += 4) {
            const float32x4_t x0 = vld1q_f32(a + j), x1 = vld1q_f32(b + j);
            const float32x4_t c = vld1q_f32(cs + j), s = vld1q_f32(sn + j);
            vst1q_f32(a + j, vsubq_f32(vmulq_f32(x0, c), vmulq_f32(x1, s)));
            vst1q_f32(b + j, vaddq_f32(vmulq_f32(x1, c), vmulq_f32(x0, s)));
        }
        for (; j < half; j++) {
            const float x0 = a[j], x1 = b[j];
            a[j] = x0 * cs[j] - x1 * sn[j];
            b[j] = x1 * cs[j] + x0 * sn[j];
        }
    }
}
