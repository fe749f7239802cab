/* kq32_avx2.c - the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) of the kq GEMM,
 * avx2 tier (AVX2 + FMA + F16C, no VNNI): maddubs on 8-row groups.
 *
 * Packed layout: kq.h's 32-block layout with G = 8. Per 4-value chunk c one 32-byte load
 * holds 8 rows x 4 code bytes: a mask gives the low nibbles (values 4c + j), a 16-bit shift
 * and the mask the high ones (values 16 + 4c + j); Q5_0 / Q5_1 or in the fifth bit from the
 * block's one high-bit load (bit k of a lane shifted to bit 4 and masked: the bits a 16-bit
 * shift of at most 4 brings in from the neighbouring byte never reach bit 4).
 *
 * Q4_0, Q4_1, Q5_0, Q5_1: the unsigned code u (0..15 or 0..31; u = c + 8 for Q4_0, c + 16 for
 * Q5_0, the code itself for Q4_1 / Q5_1) is maddubs' unsigned operand against the token's
 * broadcast signed activation bytes (|a| <= 127, the quantiser never emits -128). A pair is
 * at most 2 * 31 * 127 = 7874, so pairs add up in int16 before one madd with ones widens
 * them: the 4-bit codes for the whole block (16 products of <= 15 * 127 per lane: 30480), the
 * 5-bit codes per 16 values (8 products of <= 31 * 127: 31496), below 32767 either way:
 * nothing saturates. The bias goes exactly: isum = sum u a - bias * act->sum[block].
 *
 * IQ4_NL: one vpshufb turns the nibbles into the table's signed values (|c| <= 127), which
 * go through Q8_0's maddubs(|c|, sign(a, c)) + madd per chunk (q8_avx2.c): a pair is at most
 * 2 * 127 * 127 = 32258.
 *
 * Per block the exact int32 sum goes through kq.h's fp32 rule, one rounded operation at a
 * time in the oracle's order (-std=c11: no FMA contraction):
 *   acc = acc + (float)isum * (d * da)                                  (Q4_0, Q5_0, IQ4_NL)
 *   acc = acc + ((float)isum * (d * da) + (float)asum * (m * da))       (Q4_1, Q5_1)
 * so results are bit-identical to the scalar tier. Loop nest and prefetch: q8_avx2.c's. */
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 8
#define NT 4  /* tokens per register tile */
#define TB 64 /* tokens per cache block: their activations stay in L2 across row groups */

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* the high-bit plane h with bit k of each byte moved to bit 4 (other bits: garbage) */
static inline __m256i bit_k(__m256i h, const int k)
{
    return k < 4 ? _mm256_slli_epi16(h, 4 - k) : k > 4 ? _mm256_srli_epi16(h, k - 4) : h;
}

/* y rows [o, o + nrow) of tokens [t, t + n) over all nb blocks of one row group. type and n
 * are compile-time constants at each call site; every token's sums follow the same
 * instruction sequence whatever n is. */
static inline __attribute__((always_inline)) void tile(const uint32_t type, const int n,
                                                       const uint8_t *gp, int64_t nb,
                                                       const int8_t *a, int64_t lda,
                                                       const float *da, const int32_t *as,
                                                       float *y, int64_t ldy, int nrow,
                                                       const uint8_t *pf)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1, iq = type == GE_T_IQ4_NL;
    const int32_t bias = type == GE_T_Q4_0 ? 8 : type == GE_T_Q5_0 ? 16 : 0;
    const int64_t BB = GE_KQ32_BYTES(G, five, min), DOFF = GE_KQ32_D_OFF(G, five);
    const __m256i low = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i tbl = _mm256_setzero_si256();
    if (iq)
        tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ge_iq4nl_values));
    __m256 f[NT];
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++)
        f[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *bp = gp + b * BB;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next row group's weights, block by block */
            for (int l = 0; l < BB; l += 64)
                _mm_prefetch((const char *)(pf + b * BB + l), _MM_HINT_T0);
        __m256i s[NT], p[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            s[i] = _mm256_setzero_si256(), p[i] = _mm256_setzero_si256();
        const __m256i h = five ? _mm256_loadu_si256((const __m256i *)(bp + 16 * G))
                               : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(bp + 32 * c));
            __m256i lo = _mm256_and_si256(w, low);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(bit_k(h, c), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(bit_k(h, c + 4), b4));
            }
            if (iq) {
                lo = _mm256_shuffle_epi8(tbl, lo);
                hi = _mm256_shuffle_epi8(tbl, hi);
                const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    const int8_t *ai = ab + i * lda + 4 * c;
                    const __m256i x0 = _mm256_set1_epi32(ld32(ai));
                    const __m256i x1 = _mm256_set1_epi32(ld32(ai + 16));
                    const __m256i p0 = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(x0, lo));
                    const __m256i p1 = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(x1, hi));
                    s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p0, ones));
                    s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p1, ones));
                    __asm__("" : "+x"(s[i])); /* keep the running sum in a register */
                }
                continue;
            }
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const int8_t *ai = ab + i * lda + 4 * c;
                p[i] = _mm256_add_epi16(
                    p[i], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ld32(ai))));
                p[i] = _mm256_add_epi16(
                    p[i], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ld32(ai + 16))));
                /* keep the running sum in a register: GCC may otherwise reassociate the
                 * adds into a tree and spill the products (as in q8_avx2.c) */
                __asm__("" : "+x"(p[i]));
                if (five && c % 2 == 1) { /* 8 products of <= 31 * 127 per lane: widen */
                    s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p[i], ones));
                    p[i] = _mm256_setzero_si256();
                }
            }
        }
        const __m256 d = _mm256_loadu_ps((const float *)(bp + DOFF));
        const __m256 mn =
            min ? _mm256_loadu_ps((const float *)(bp + DOFF + 4 * G)) : _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const int32_t asum = as[i * nb + b];
            __m256i is = s[i];
            if (!five && !iq)
                is = _mm256_madd_epi16(p[i], ones);
            if (bias)
                is = _mm256_add_epi32(is, _mm256_set1_epi32(-bias * asum));
            const __m256 vda = _mm256_set1_ps(da[i * nb + b]);
            __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, vda));
            if (min)
                t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_set1_ps((float)asum),
                                                   _mm256_mul_ps(mn, vda)));
            f[i] = _mm256_add_ps(f[i], t);
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

static inline __attribute__((always_inline)) void gemm(const uint32_t type, const void *packed,
                                                       int64_t cols, const ge_q8_act *act,
                                                       int64_t t0, int64_t t1, int64_t r0,
                                                       int64_t r1, float *y, int64_t ldy)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
    const int64_t nb = cols / 32, BB = GE_KQ32_BYTES(G, five, min);
    const uint8_t *pk = packed;
    for (int64_t tb = t0; tb < t1; tb += TB) {
        const int64_t te = t1 - tb < TB ? t1 : tb + TB;
        for (int64_t g = r0 / G; g * G < r1; g++) {
            const uint8_t *gp = pk + g * nb * BB;
            const int nrow = r1 - g * G < G ? (int)(r1 - g * G) : G;
            for (int64_t t = tb; t < te; t += NT) {
                const int8_t *a = act->qs + t * cols;
                const float *da = act->d + t * nb;
                const int32_t *as = act->sum + t * nb;
                float *yt = y + t * ldy + g * G;
                /* with several tiles per group, the first one fetches the next group's
                 * weights (as q8_avx2.c) */
                const uint8_t *pf =
                    te - tb > NT && t == tb && (g + 1) * G < r1 ? gp + nb * BB : NULL;
                switch (te - t < NT ? te - t : NT) {
                case 1: tile(type, 1, gp, nb, a, cols, da, as, yt, ldy, nrow, pf); break;
                case 2: tile(type, 2, gp, nb, a, cols, da, as, yt, ldy, nrow, pf); break;
                case 3: tile(type, 3, gp, nb, a, cols, da, as, yt, ldy, nrow, pf); break;
                default: tile(type, 4, gp, nb, a, cols, da, as, yt, ldy, nrow, pf); break;
                }
            }
        }
    }
}

void ge_kq32_avx2_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy)
{
    switch (type) {
    case GE_T_Q4_0: gemm(GE_T_Q4_0, w, cols, act, t0, t1, r0, r1, y, ldy); break;
    case GE_T_Q4_1: gemm(GE_T_Q4_1, w, cols, act, t0, t1, r0, r1, y, ldy); break;
    case GE_T_Q5_0: gemm(GE_T_Q5_0, w, cols, act, t0, t1, r0, r1, y, ldy); break;
    case GE_T_Q5_1: gemm(GE_T_Q5_1, w, cols, act, t0, t1, r0, r1, y, ldy); break;
    case GE_T_IQ4_NL: gemm(GE_T_IQ4_NL, w, cols, act, t0, t1, r0, r1, y, ldy); break;
    default: break;
    }
}
