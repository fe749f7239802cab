/* q8_avx512.c - Q8_0 GEMM family, avx512 tier (AVX-512 F/BW/VL/DQ + AVX-512 VNNI): the
 * activation quantiser and a 512-bit vpdpbusd GEMM on 16-row groups.
 *
 * Packed layout: kernels/q8.h with G = 16, bias 0x80: per 4-column chunk one 64-byte load
 * holds 16 rows x 4 weight bytes as u8 = w + 128 (vpdpbusd's unsigned operand). The token's
 * 4 signed activation bytes are broadcast straight from ge_q8_act (vpbroadcastd from memory:
 * a pure load; the embedded {1to16} operand form measured no faster). Each block's int32 sums
 * start from -128 * act->sum[block] (cancels the bias exactly; no horizontal reduction).
 * Register tile (plain rule): two row groups x NT2 tokens, so each activation broadcast feeds
 * two vpdpbusd and each weight register NT2 of them (one group x NT tokens for the wide rule,
 * whose span sums take the registers, and for a lone token, which streams the weights). Per
 * block the sums go through the common fp32 rule acc = acc + (float)isum * (dw * da)
 * (bit-identical to the scalar tier).
 *
 * Ceiling: per 16 rows x token x block that rule costs a vcvtdq2ps, 2 vmulps and a vaddps next
 * to 8 vpdpbusd. On AMD Zen 4 a zmm vmulps (or FMA) takes the same pipe slot as a zmm vpdpbusd,
 * which caps the kernel at 80% of the VNNI-512 peak; on Zen 5 a register-only loop of that mix
 * reaches 82%. One group per tile ran at 62-68% on Zen 5 (its broadcast loads: one per
 * vpdpbusd), two groups at 73-79% (PERF.md "Q8_0 GEMM: two row groups per register tile"). */
#include <immintrin.h>
#include <string.h>

#include "q8.h"

#define G 16
#define NT 8      /* tokens per register tile (one row group) */
#define NT2 6     /* tokens per register tile of two row groups */
#define NT2_MIN 2 /* two groups at a time from this many tokens (one token streams one) */
#define KB 64     /* blocks per K chunk (the fp32 partial sums carry through y) */
#define SCR 2048  /* scratch (token, block) entries: 16 KiB of stack */
#define BLK GE_Q8_BLOCK_BYTES(G)

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- quantiser (bit-identical to ge_q8_scalar_quantize) ------------------------------ */

/* 16 values of x, through the act's clip if it has one (bound first: a NaN comes through,
 * as in the clamp kernel) */
static inline __m512 load_x(const float *p, int clip, __m512 clo, __m512 chi)
{
    const __m512 v = _mm512_loadu_ps(p);
    return clip ? _mm512_min_ps(chi, _mm512_max_ps(clo, v)) : v;
}

void ge_q8_avx512_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act)
{
    const int64_t cols = act->cols, nb = cols / 32, span = act->span > 1 ? act->span : 1;
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const int clip = act->clip;
    const __m512 clo = _mm512_set1_ps(clip ? act->lo : 0.0f);
    const __m512 chi = _mm512_set1_ps(clip ? act->hi : 0.0f);
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t s = 0; s < nb; s += span) { /* a scale per span (cols holds whole spans) */
            /* max(a, m) keeps m when a is NaN, like the scalar loop */
            __m512 m = _mm512_setzero_ps();
            for (int64_t i = 0; i < 32 * span; i += 16)
                m = _mm512_max_ps(_mm512_abs_ps(load_x(x + t * ldx + s * 32 + i, clip, clo, chi)),
                                  m);
            const float amax = _mm512_reduce_max_ps(m); /* no NaN left: order-free */
            const float d = amax / 127.0f;
            const __m512 vid = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
            for (int64_t b = s; b < s + span; b++) {
                const float *xb = x + t * ldx + b * 32;
                __m512 v0 = load_x(xb, clip, clo, chi), v1 = load_x(xb + 16, clip, clo, chi);
                __m512i q0 = _mm512_cvtps_epi32(
                    _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, vid), lo), hi));
                __m512i q1 = _mm512_cvtps_epi32(
                    _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, vid), lo), hi));
                int8_t *q = act->qs + t * cols + b * 32;
                _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(q0));
                _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(q1));
                act->d[t * nb + b] = d;
                act->sum[t * nb + b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            }
        }
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

/* Per (token tile, block): the tile's seeds (-128 * sum of the activation block) and
 * activation scales, side by side so one pointer with constant offsets reaches them. */
typedef struct {
    int32_t seed[NT];
    float da[NT];
} scr_t;

/* Rows of ng row groups (ng = 1 or 2; the second one's rows masked by m2) for tokens
 * [t, t + n), blocks [kb0, kb0 + kn); first: kb0 == 0 (start from +0.0f, else continue the
 * partial sums stored in y). n and ng are compile-time constants at each call site; each
 * token's arithmetic is the same for any n and ng. Two groups share each activation
 * broadcast (one load per two vpdpbusd instead of one each). */
static inline __attribute__((always_inline)) void tile(const int n, const int ng,
                                                       const int wide, const uint8_t *gp,
                                                       int64_t gstride, int64_t kn,
                                                       const int8_t *a, int64_t lda,
                                                       const scr_t *sc, int first, float *y,
                                                       int64_t ldy, __mmask16 m, __mmask16 m2,
                                                       const uint8_t *pf)
{
    __m512 f[2][NT], p[NT];
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
#pragma GCC unroll 2
        for (int h = 0; h < ng; h++)
            f[h][i] = first ? _mm512_setzero_ps()
                            : _mm512_maskz_loadu_ps(h ? m2 : m, y + i * ldy + h * G);
        p[i] = _mm512_setzero_ps();
    }
    /* wide: spans of GE_Q8_WIDE blocks, unrolled (kn is a multiple of it) */
    const int step = wide ? GE_Q8_WIDE : 1;
    for (int64_t b0 = 0; b0 < kn; b0 += step)
#pragma GCC unroll 4
    for (int bb = 0; bb < step; bb++) {
        const int64_t b = b0 + bb;
        const uint8_t *bp = gp + b * BLK;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next row group's weights, one block per block */
            for (int l = 0; l < BLK / 64; l++)
                _mm_prefetch((const char *)(pf + b * BLK + 64 * l), _MM_HINT_T0);
        __m512i s[2][NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
#pragma GCC unroll 2
            for (int h = 0; h < ng; h++)
                s[h][i] = _mm512_set1_epi32(sc[b].seed[i]);
        }
#pragma GCC unroll 16
        for (int c = 0; c < 8; c++) {
            __m512i w0 = _mm512_loadu_si512(bp + 64 * c);
            __m512i w1 = ng > 1 ? _mm512_loadu_si512(bp + gstride + 64 * c) : w0;
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                __m512i av = _mm512_set1_epi32(ld32(ab + i * lda + 4 * c));
                s[0][i] = _mm512_dpbusd_epi32(s[0][i], w0, av);
                if (ng > 1)
                    s[1][i] = _mm512_dpbusd_epi32(s[1][i], w1, av);
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < ng; h++) {
            __m512 dw = _mm512_loadu_ps(bp + h * gstride + 32 * G);
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                if (wide) { /* p += isum * dw; at the span's end acc += p * da (ng == 1) */
                    if (bb == 0)
                        p[i] = _mm512_setzero_ps();
                    p[i] = _mm512_add_ps(p[i], _mm512_mul_ps(_mm512_cvtepi32_ps(s[h][i]), dw));
                    if (bb == GE_Q8_WIDE - 1)
                        f[h][i] = _mm512_add_ps(f[h][i],
                                                _mm512_mul_ps(p[i], _mm512_set1_ps(sc[b].da[i])));
                } else {
                    __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(sc[b].da[i]));
                    f[h][i] = _mm512_add_ps(f[h][i],
                                            _mm512_mul_ps(_mm512_cvtepi32_ps(s[h][i]), scale));
                }
            }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
#pragma GCC unroll 2
        for (int h = 0; h < ng; h++)
            _mm512_mask_storeu_ps(y + i * ldy + h * G, h ? m2 : m, f[h][i]);
    }
}

#define CASE(k)                                                                                \
    case k:                                                                                    \
        if (ng2)                                                                               \
            tile(k < NT2 ? k : NT2, 2, 0, gp, nb * BLK, kn, a, cols, sc, first, yt, ldy, mask, \
                 mask2, pf);                                                                   \
        else                                                                                   \
            tile(k, 1, wide, gp, 0, kn, a, cols, sc, first, yt, ldy, mask, 0, pf);             \
        break;
#if NT != 4 && NT != 8 && NT != 12
#error "NT must be 4, 8 or 12"
#endif

/* wide: the wide rule (q8.h), a compile-time constant at both entries. The plain rule runs
 * two row groups at a time in tiles of NT2 tokens (registers: 2 x NT2 int32 sums and as many
 * fp32 ones), the wide rule one group in tiles of NT. */
static inline __attribute__((always_inline)) void gemm(const int wide, const void *packed,
                                                       int64_t cols, const ge_q8_act *act,
                                                       int64_t t0, int64_t t1, int64_t r0,
                                                       int64_t r1, float *y, int64_t ldy)
{
    const int nt = wide ? NT : NT2;
    const int64_t nb = cols / 32, kb = nb < KB ? nb : KB;
    const int64_t tbs = SCR / NT / kb * nt; /* tokens per cache block (whole tiles), >= 24 */
    const uint8_t *pk = packed;
    scr_t scr[SCR / NT];
    for (int64_t tb = t0; tb < t1; tb += tbs) {
        const int64_t te = t1 - tb < tbs ? t1 : tb + tbs;
        for (int64_t kb0 = 0; kb0 < nb; kb0 += kb) {
            const int64_t kn = nb - kb0 < kb ? nb - kb0 : kb;
            const int first = kb0 == 0;
            for (int64_t t = tb; t < te; t++) {
                scr_t *row = scr + (t - tb) / nt * kn;
                for (int64_t b = 0; b < kn; b++) {
                    row[b].seed[(t - tb) % nt] = -128 * act->sum[t * nb + kb0 + b];
                    row[b].da[(t - tb) % nt] = act->d[t * nb + kb0 + b];
                }
            }
            for (int64_t g = r0 / G; g * G < r1;) {
                const uint8_t *gp = pk + (g * nb + kb0) * BLK;
                const int ng2 = !wide && (g + 1) * G < r1 && te - tb >= NT2_MIN;
                const int64_t nrow = r1 - g * G < G ? r1 - g * G : G;
                const __mmask16 mask = (__mmask16)((1u << nrow) - 1);
                const int64_t nrow2 = ng2 ? (r1 - (g + 1) * G < G ? r1 - (g + 1) * G : G) : 0;
                const __mmask16 mask2 = (__mmask16)((1u << nrow2) - 1);
                const int64_t gn = g + 1 + ng2; /* the next tile's first group */
                for (int64_t t = tb; t < te; t += nt) {
                    const int8_t *a = act->qs + t * cols + kb0 * 32;
                    const scr_t *sc = scr + (t - tb) / nt * kn;
                    float *yt = y + t * ldy + g * G;
                    /* with several tiles per group, the first one fetches the next group's
                     * weights (L3 -> L1 ahead of use); a lone tile streams them, and there
                     * the hardware prefetcher does better than explicit prefetches */
                    const uint8_t *pf =
                        te - tb > nt && t == tb && gn * G < r1 ? pk + (gn * nb + kb0) * BLK : NULL;
                    switch (te - t < nt ? te - t : nt) {
                    CASE(1) CASE(2) CASE(3) CASE(4)
#if NT > 4
                    CASE(5) CASE(6) CASE(7) CASE(8)
#endif
#if NT > 8
                    CASE(9) CASE(10) CASE(11) CASE(12)
#endif
                    }
                }
                g = gn;
            }
        }
    }
}

void ge_q8_avx512_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                       int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    gemm(0, packed, cols, act, t0, t1, r0, r1, y, ldy);
}

void ge_q8_avx512_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                            const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                            int64_t r1, float *y, int64_t ldy)
{
    gemm(1, packed, cols, act, t0, t1, r0, r1, y, ldy);
}
