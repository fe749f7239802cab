/* q8_avx2.c - Q8_0 GEMM family, avx2 tier (AVX2 + FMA + F16C, no VNNI): the activation
 * quantiser (also used by the avxvnni tier) and a maddubs/madd GEMM on 8-row groups.
 *
 * Packed layout: kernels/q8.h with G = 8, bias 0 (plain signed weights). Per 4-column chunk
 * one 32-byte load holds 8 rows x 4 bytes; the token's 4 activation bytes are broadcast to
 * every row. maddubs needs an unsigned operand and saturates int16 pairs, so it multiplies
 * |w| (u8, up to 128) by sign(a, w) (|a| <= 127, the quantiser never emits -128): each pair
 * is at most 2 * 128 * 127 = 32512, no saturation; madd with ones widens to int32. Per block
 * the exact int32 sum goes through the common fp32 rule acc = acc + (float)isum * (dw * da),
 * or for q8_gemm_wide the wide rule (p = p + (float)isum * dw over a span of 4 blocks, then
 * acc = acc + p * da; kernels/q8.h), so results are bit-identical to the scalar tier. */
#include <immintrin.h>
#include <string.h>

#include "q8.h"

#define G 8
#define NT 4   /* tokens per register tile */
#define TB 64  /* tokens per cache block: their activations stay in L2 across row groups */
#define BLK GE_Q8_BLOCK_BYTES(G)

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- quantiser (bit-identical to ge_q8_scalar_quantize) ------------------------------ */

void ge_q8_avx2_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act)
{
    const int64_t cols = act->cols, nb = cols / 32, span = act->span > 1 ? act->span : 1;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const int clip = act->clip; /* clamp first, bound first (a NaN comes through) */
    const __m256 clo = _mm256_set1_ps(clip ? act->lo : 0.0f);
    const __m256 chi = _mm256_set1_ps(clip ? act->hi : 0.0f);
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t s0 = 0; s0 < nb; s0 += span) { /* a scale per span (cols holds whole spans) */
            __m256 m = _mm256_setzero_ps();
            for (int64_t i = 0; i < 32 * span; i += 8) {
                __m256 v = _mm256_loadu_ps(x + t * ldx + s0 * 32 + i);
                if (clip)
                    v = _mm256_min_ps(chi, _mm256_max_ps(clo, v));
                /* max(a, m) keeps m when a is NaN, like the scalar loop */
                m = _mm256_max_ps(_mm256_and_ps(v, absmask), m);
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4);
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            __m256 vid = _mm256_set1_ps(id);
            for (int64_t b = s0; b < s0 + span; b++) {
                const float *xb = x + t * ldx + b * 32;
                __m256i q[4];
                for (int k = 0; k < 4; k++) {
                    __m256 v = _mm256_loadu_ps(xb + 8 * k);
                    if (clip)
                        v = _mm256_min_ps(chi, _mm256_max_ps(clo, v));
                    __m256 s = _mm256_max_ps(_mm256_mul_ps(v, vid), lo);
                    q[k] = _mm256_cvtps_epi32(_mm256_min_ps(s, hi));
                }
                __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                               _mm256_packs_epi32(q[2], q[3]));
                _mm256_storeu_si256((__m256i *)(act->qs + t * cols + b * 32),
                                    _mm256_permutevar8x32_epi32(p, perm));
                __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                             _mm256_add_epi32(q[2], q[3]));
                __m128i s4 =
                    _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
                act->d[t * nb + b] = d;
                act->sum[t * nb + b] = _mm_cvtsi128_si32(s4);
            }
        }
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

/* y rows [o, o + nrow) of tokens [t, t + n) over all nb blocks of one row group, by the
 * Q8_0 rule or (wide; nb a multiple of GE_Q8_WIDE) the wide rule. n and wide are compile-time
 * constants at each call site (the tile is specialised per n), and every token's sums follow
 * the same instruction sequence whatever n is. */
static inline __attribute__((always_inline)) void tile(const int n, const int wide,
                                                       const uint8_t *gp, int64_t nb,
                                                       const int8_t *a, int64_t lda,
                                                       const float *da, float *y, int64_t ldy,
                                                       int nrow, const uint8_t *pf)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[NT], p[NT];
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++)
        f[i] = p[i] = _mm256_setzero_ps();
    const int step = wide ? GE_Q8_WIDE : 1;
    for (int64_t b0 = 0; b0 < nb; b0 += step)
#pragma GCC unroll 4
    for (int bb = 0; bb < step; bb++) {
        const int64_t b = b0 + bb;
        const uint8_t *bp = gp + b * BLK;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next row group's weights, block by block */
            for (int l = 0; l < BLK; l += 64)
                _mm_prefetch((const char *)(pf + b * BLK + l), _MM_HINT_T0);
        __m256i s[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            s[i] = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int c = 0; c < 8; c++) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(bp + 32 * c));
            __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                __m256i av = _mm256_set1_epi32(ld32(ab + i * lda + 4 * c));
                __m256i pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(av, w));
                s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(pr, ones));
                /* keep the running sum in a register: GCC may otherwise reassociate the
                 * integer adds into a tree and spill the partial products */
                __asm__("" : "+x"(s[i]));
            }
        }
        __m256 dw = _mm256_loadu_ps((const float *)(bp + 32 * G));
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            if (wide) { /* p += isum * dw; at the span's end acc += p * da */
                p[i] = _mm256_add_ps(bb == 0 ? _mm256_setzero_ps() : p[i],
                                     _mm256_mul_ps(_mm256_cvtepi32_ps(s[i]), dw));
                if (bb == GE_Q8_WIDE - 1)
                    f[i] = _mm256_add_ps(f[i],
                                         _mm256_mul_ps(p[i], _mm256_set1_ps(da[i * nb + b])));
            } else {
                __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(da[i * nb + b]));
                f[i] = _mm256_add_ps(f[i], _mm256_mul_ps(_mm256_cvtepi32_ps(s[i]), sc));
            }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        if (nrow == G) {
            _mm256_storeu_ps(y + i * ldy, f[i]);
        } else {
            float tmp[G];
            _mm256_storeu_ps(tmp, f[i]);
            memcpy(y + i * ldy, tmp, (size_t)nrow * sizeof(float));
        }
    }
}

/* wide: the wide rule (q8.h), a compile-time constant at both entries */
static inline __attribute__((always_inline)) void gemm(const int wide, const void *packed,
                                                       int64_t cols, const ge_q8_act *act,
                                                       int64_t t0, int64_t t1, int64_t r0,
                                                       int64_t r1, float *y, int64_t ldy)
{
    const int64_t nb = cols / 32;
    const uint8_t *pk = packed;
    for (int64_t tb = t0; tb < t1; tb += TB) {
        const int64_t te = t1 - tb < TB ? t1 : tb + TB;
        for (int64_t g = r0 / G; g * G < r1; g++) {
            const uint8_t *gp = pk + g * nb * BLK;
            const int nrow = r1 - g * G < G ? (int)(r1 - g * G) : G;
            for (int64_t t = tb; t < te; t += NT) {
                const int8_t *a = act->qs + t * cols;
                const float *da = act->d + t * nb;
                float *yt = y + t * ldy + g * G;
                /* with several tiles per group, the first one fetches the next group's
                 * weights (see q8_avx512.c) */
                const uint8_t *pf =
                    te - tb > NT && t == tb && (g + 1) * G < r1 ? gp + nb * BLK : NULL;
                switch (te - t < NT ? te - t : NT) {
                case 1: tile(1, wide, gp, nb, a, cols, da, yt, ldy, nrow, pf); break;
                case 2: tile(2, wide, gp, nb, a, cols, da, yt, ldy, nrow, pf); break;
                case 3: tile(3, wide, gp, nb, a, cols, da, yt, ldy, nrow, pf); break;
                default: tile(4, wide, gp, nb, a, cols, da, yt, ldy, nrow, pf); break;
                }
            }
        }
    }
}

void ge_q8_avx2_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                     int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    gemm(0, packed, cols, act, t0, t1, r0, r1, y, ldy);
}

void ge_q8_avx2_gemm_wide(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                          int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                          int64_t ldy)
{
    gemm(1, packed, cols, act, t0, t1, r0, r1, y, ldy);
}
