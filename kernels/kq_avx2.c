/* kq_avx2.c - the quantised-type GEMM, avx2 tier (AVX2 + FMA + F16C): Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K and IQ4_XS on 8-row groups (kq.h layouts, G = 8); the other types through the
 * scalar oracle on the file's rows. Every type's integer sums are exact (bounds below) and go, per
 * super-block, through kq.h's fp32 rule in its order, so results are bit-identical to the
 * scalar tier. |a| <= 127: the quantiser never emits -128.
 *
 * Q4_K:
 * Per 4-value chunk one 32-byte load holds 8 rows x 4 code bytes; the low nibbles are
 * sub-block 2p, the high nibbles sub-block 2p + 1. maddubs multiplies the unsigned codes
 * (0..15) by the token's broadcast activation bytes: a pair is at most 2 * 15 * 127 = 3810,
 * so the 8 chunks of a sub-block add up in int16 (<= 30480) before one madd with the row's
 * scale widens them to int32 (the 4-bit codes leave this room; Q8_0's maddubs cannot). The
 * mins term sum_j m_j * asum_j is one madd per two sub-blocks.
 *
 * Q5_K: Q4_K's kernel with the fifth bit or-ed in (shifted from its plane byte to bit 4 of
 * each code byte, a 16-bit shift by at most 4 that keeps it in its byte). A pair is at most
 * 2 * 31 * 127 = 7874, so only 4 chunks add up in int16 (<= 31496): two madds per sub-block.
 *
 * Q6_K: the unsigned 6-bit codes u (0..63, the code c = u - 32) are rebuilt from the
 * low-nibble and high-bit planes and go to maddubs as they are (a pair is at most 2 * 63 *
 * 127 = 16002, no saturation). A 16-value sub-block's 4 chunks add up in int16 from a seed of
 * -32 x the activations each int16 half covers, so each half ends at sum c * a over its 8
 * values (|.| <= 8 * 32 * 127 = 32512) before one madd with the row's int8 scale; the sums on
 * the way may wrap, which vpaddw does exactly modulo 2^16, so the end is exact. (Before: c
 * made signed and multiplied as maddubs(|c|, sign(a, c)), two more operations per chunk and
 * a sign per token; this is 1.24x faster on a Zen 1, PERF.md.)
 *
 * IQ4_XS: the nibble indices are looked up (vpshufb) into the signed table values v
 * (-127..113) and multiplied as maddubs(|v|, sign(a, v)): a pair reaches 2 * 127 * 127 =
 * 32258, so no two chunks fit int16 and each chunk's pairs are widened at once by a madd
 * with the row's int8 scale pair (s, s) (|s| <= 32: a 4-value product sum times s is below
 * 2^21, the super-block's isum below 2^26). (Tried: v = 16 (H - 8) + L as two unsigned
 * nibble lookups with int16 sums over a sub-block: two maddubs per chunk, 20% slower.)
 *
 * Q3_K, Q2_K (16-value sub-blocks): the unsigned codes u (Q3_K: c + 4, 0..7, its 2-bit and
 * third-bit planes or-ed; Q2_K: c, 0..3) go to maddubs as they are. Each sub-block's 4 chunks
 * add up in int16 before one madd with the row's scale pair (s, s); for Q3_K the int16 sum
 * starts from -4 * act->sum16 in its low half, cancelling the bias exactly (either half
 * covers 8 values: |.| <= 4 * 16 * 127 + 8 * 7 * 127 = 15240). Q2_K's mins term sum_j m_j *
 * asum16_j is one madd per two sub-blocks (|asum16| <= 2032).
 *
 * As in kq_avx512.c, the activation scales, Q3_K's seeds and the int16 sum pairs come from a
 * scratch (32 KiB of stack) filled once per token block and K chunk; the fp32 partial sums
 * carry through y between K chunks (stored and reloaded exactly). */
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 8
#define NT 4  /* tokens per register tile */
#define TB 64 /* tokens per cache block */
#define SB GE_KQ_Q4K_BYTES(G)

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 8 u8 of row-major plane bytes as int32 lanes, each lane's int16 halves both the value */
static inline __m256i pair16(const uint8_t *p)
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* two sub-blocks' u8 plane values as int32 lanes: low half from p0, high half from p1 */
static inline __m256i two16(const uint8_t *p0, const uint8_t *p1)
{
    __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p0));
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p1));
    return _mm256_or_si256(a, _mm256_slli_epi32(b, 16));
}

/* the 16 IQ4 table values (int8) in both lanes */
static inline __m256i iq4_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ge_iq4nl_values));
}

/* 8 int8 plane values as int32 lanes, each lane's int16 halves both the value */
static inline __m256i pair16s(const uint8_t *p)
{
    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)),
                           _mm256_slli_epi32(v, 16));
}

/* The per-(token tile, super-block) scratch (filled once per token block and K chunk, for
 * every row group): per token of the tile NE int32 words, then its activation scale (fp32
 * bits), the NT tokens one after the other, so that one pointer with constant offsets
 * reaches them:
 *   Q4_K, Q5_K: 4 words, (asum_2q, asum_2q+1) as int16 pairs (|asum| <= 4064);
 *   Q2_K: 8 words, (asum16_2q, asum16_2q+1) as int16 pairs;
 *   Q3_K: 16 words, the sub-blocks' seeds -4 x asum16 in the low int16 half;
 *   Q6_K: 16 words, the sub-blocks' seeds -32 x (the sum of values 4c, 4c + 1 | 4c + 2,
 *   4c + 3 over its chunks c) in the low | high int16 half (|.| <= 32 * 8 * 127 = 32512);
 *   IQ4_XS: none. */
static inline int scr_ne(uint32_t type)
{
    switch (type) {
    case GE_T_Q3_K: case GE_T_Q6_K: return 16;
    case GE_T_Q2_K: return 8;
    case GE_T_Q4_K: case GE_T_Q5_K: return 4;
    default: return 0;
    }
}
#define ES(ty) ((scr_ne(ty) + 1) * NT) /* int32 words per (tile, super-block) */
#define SW(ty, i, k) ((i) * (scr_ne(ty) + 1) + (k)) /* word k of the tile's token i */

static inline __m256 bcast_f32(const int32_t *p)
{
    return _mm256_castsi256_ps(_mm256_set1_epi32(*p));
}

/* the tile's accumulators: +0.0f on the first K chunk, else the partial sums left in y */
#define LOAD_F(f, n, first, y, ldy, nrow)                                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < NT; i++)                                  \
    {                                                                                      \
        if (i >= n)                                                                        \
            break;                                                                         \
        if (first) {                                                                       \
            f[i] = _mm256_setzero_ps();                                                    \
        } else if (nrow == G) {                                                            \
            f[i] = _mm256_loadu_ps(y + i * ldy);                                           \
        } else {                                                                           \
            float tmp_[G] = {0};                                                           \
            memcpy(tmp_, y + i * ldy, (size_t)nrow * sizeof(float));                       \
            f[i] = _mm256_loadu_ps(tmp_);                                                  \
        }                                                                                  \
    }

/* Q4_K, Q5_K, IQ4_XS (ty, a constant): y rows [o, o + nrow) of tokens [t, t + n) over kn
 * super-blocks of one row group (a, gp at the K chunk; sc0 its scratch row). */
static inline __attribute__((always_inline)) void tile(const uint32_t ty, const int n,
                                                       const uint8_t *gp, int64_t kn,
                                                       const int8_t *a, int64_t lda,
                                                       const int32_t *sc0, int first,
                                                       float *y, int64_t ldy, int nrow)
{
    const int five = ty == GE_T_Q5_K, iq4 = ty == GE_T_IQ4_XS;
    const int64_t sbb = five ? GE_KQ_Q5K_BYTES(G) : iq4 ? GE_KQ_IQ4XS_BYTES(G) : SB;
    const int64_t so = five ? 160 * G : 128 * G; /* scales, then mins, d, dmin */
    const __m256i low = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    const __m256i tabv = iq4_table();
    __m256 f[NT];
    LOAD_F(f, n, first, y, ldy, nrow)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * sbb, *hb = bp + 128 * G, *sc = bp + so, *mn = sc + 8 * G;
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(ty);
        __m256i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const int p = j / 2, h = j % 2;
            const uint8_t *q = bp + p * 32 * G;
            const __m256i scale = iq4 ? pair16s(sc + j * G) : pair16(sc + j * G);
            __m256i acc[NT];
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++)
                acc[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m256i w = _mm256_loadu_si256((const __m256i *)(q + 4 * G * c));
                __m256i x = _mm256_and_si256(h ? _mm256_srli_epi16(w, 4) : w, low);
                if (five) { /* the fifth bit sits at bit b: to bit 4 (16-bit shifts by <= 4
                             * keep it inside its byte) */
                    const __m256i hv =
                        _mm256_loadu_si256((const __m256i *)(hb + 4 * G * (2 * p + c / 4)));
                    const int b = 4 * h + c % 4;
                    const __m256i hs = b < 4   ? _mm256_slli_epi16(hv, 4 - b)
                                       : b > 4 ? _mm256_srli_epi16(hv, b - 4)
                                               : hv;
                    x = _mm256_or_si256(x, _mm256_and_si256(hs, bit4));
                }
                if (iq4) {
                    const __m256i sv = _mm256_shuffle_epi8(tabv, x);
                    const __m256i av = _mm256_abs_epi8(sv);
#pragma GCC unroll 16
                    for (int i = 0; i < NT; i++) {
                        if (i >= n)
                            break;
                        __m256i at = _mm256_set1_epi32(ld32(as + i * lda + 32 * j + 4 * c));
                        isum[i] = _mm256_add_epi32(
                            isum[i], _mm256_madd_epi16(
                                         _mm256_maddubs_epi16(av, _mm256_sign_epi8(at, sv)),
                                         scale));
                        __asm__("" : "+x"(isum[i])); /* no add tree (see q8_avx2.c) */
                    }
                    continue;
                }
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    __m256i av = _mm256_set1_epi32(ld32(as + i * lda + 32 * j + 4 * c));
                    acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(x, av));
                }
                if (five && c == 3) /* 4 chunks of 5-bit codes: <= 4 * 2 * 31 * 127 = 31496 */
#pragma GCC unroll 16
                    for (int i = 0; i < NT; i++) {
                        if (i >= n)
                            break;
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(acc[i], scale));
                        acc[i] = _mm256_setzero_si256();
                    }
            }
            if (!iq4)
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(acc[i], scale));
                }
        }
        const __m256 d = _mm256_loadu_ps((const float *)(sc + (iq4 ? 8 : 16) * G));
        if (iq4) {
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m256 vda = bcast_f32(e + SW(ty, i, scr_ne(ty)));
                f[i] = _mm256_add_ps(f[i], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[i]),
                                                         _mm256_mul_ps(d, vda)));
            }
            continue;
        }
        const __m256 dmin = _mm256_loadu_ps((const float *)(sc + 20 * G));
        __m256i m2[4];
        for (int q = 0; q < 4; q++)
            m2[q] = two16(mn + 2 * q * G, mn + (2 * q + 1) * G);
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            __m256i msum = _mm256_setzero_si256();
            for (int q = 0; q < 4; q++) /* (asum_2q, asum_2q+1) as int16 pairs */
                msum = _mm256_add_epi32(
                    msum, _mm256_madd_epi16(m2[q], _mm256_set1_epi32(e[SW(ty, i, q)])));
            const __m256 vda = bcast_f32(e + SW(ty, i, 4));
            const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(d, vda));
            const __m256 t2 =
                _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vda));
            f[i] = _mm256_add_ps(f[i], _mm256_sub_ps(t1, t2));
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

/* Q6_K: y rows [o, o + nrow) of tokens [t, t + n) over kn super-blocks of one row group. */
static inline __attribute__((always_inline)) void tile6(const int n, const uint8_t *gp,
                                                        int64_t kn, const int8_t *a,
                                                        int64_t lda, const int32_t *sc0,
                                                        int first, float *y, int64_t ldy,
                                                        int nrow)
{
    const __m256i low = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    __m256 f[NT];
    LOAD_F(f, n, first, y, ldy, nrow)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * GE_KQ_Q6K_BYTES(G), *hb = bp + 128 * G;
        const int8_t *sc = (const int8_t *)(bp + 192 * G);
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(GE_T_Q6_K);
        __m256i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm256_setzero_si256();
        /* sub-block j: unit p, half h (values +32), q; the four of a unit unrolled, so that
         * each shift below has a constant count (kq_avx512.c) */
        for (int p = 0; p < 4; p++)
#pragma GCC unroll 4
        for (int hq = 0; hq < 4; hq++) {
            const int j = 4 * p + hq, h = hq / 2, q = hq % 2;
            __m256i acc[NT];
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++)
                acc[i] = _mm256_set1_epi32(e[SW(GE_T_Q6_K, i, j)]);
#pragma GCC unroll 4
            for (int c = 4 * q; c < 4 * q + 4; c++) {
                const __m256i l = _mm256_loadu_si256((const __m256i *)(bp + 4 * G * (8 * p + c)));
                const __m256i hi = _mm256_loadu_si256(
                    (const __m256i *)(hb + 4 * G * (4 * p + c / 2)));
                /* the 2 high bits of this value sit at bit sh = 4 (c % 2) + 2 h: to bits 4-5 */
                const int sh = 4 * (c % 2) + 2 * h;
                const __m256i hb2 = sh <= 4 ? _mm256_slli_epi16(hi, 4 - sh)
                                            : _mm256_srli_epi16(hi, sh - 4);
                const __m256i u = _mm256_or_si256(
                    _mm256_and_si256(h ? _mm256_srli_epi16(l, 4) : l, low),
                    _mm256_and_si256(hb2, top));
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    const int off = 64 * p + 32 * h + 4 * c;
                    __m256i av = _mm256_set1_epi32(ld32(as + i * lda + off));
                    acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(u, av));
                }
            }
            __m256i sv = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + j * G)));
            sv = _mm256_or_si256(_mm256_and_si256(sv, _mm256_set1_epi32(0xffff)),
                                 _mm256_slli_epi32(sv, 16));
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(acc[i], sv));
            }
        }
        const __m256 d = _mm256_loadu_ps((const float *)(bp + 208 * G));
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const __m256 vda = bcast_f32(e + SW(GE_T_Q6_K, i, 16));
            f[i] = _mm256_add_ps(f[i], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[i]),
                                                     _mm256_mul_ps(d, vda)));
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

/* Q2_K, Q3_K (ty, a constant): y rows [o, o + nrow) of tokens [t, t + n) over kn
 * super-blocks of one row group */
static inline __attribute__((always_inline)) void tile2(const uint32_t ty, const int n,
                                                        const uint8_t *gp, int64_t kn,
                                                        const int8_t *a, int64_t lda,
                                                        const int32_t *sc0, int first,
                                                        float *y, int64_t ldy, int nrow)
{
    const int three = ty == GE_T_Q3_K;
    const int64_t sbb = three ? GE_KQ_Q3K_BYTES(G) : GE_KQ_Q2K_BYTES(G);
    const __m256i two = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
    __m256 f[NT];
    LOAD_F(f, n, first, y, ldy, nrow)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * sbb, *hb = bp + 64 * G;
        const uint8_t *sc = bp + (three ? 96 : 64) * G;
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(ty);
        __m256i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm256_setzero_si256();
        /* sub-block v; pairs unrolled, so that the third bit's shift (by v % 2) has a
         * constant count (as Q6_K's) */
        for (int v2 = 0; v2 < 16; v2 += 2)
#pragma GCC unroll 2
        for (int v = v2; v < v2 + 2; v++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(bp + 4 * G * v));
            const __m256i hv = _mm256_loadu_si256((const __m256i *)(hb + 4 * G * (v / 2)));
            __m256i acc[NT];
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) /* Q3_K: -4 asum16 in the low half cancels the bias */
                acc[i] = three ? _mm256_set1_epi32(e[SW(ty, i, v)])
                               : _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m256i u = _mm256_and_si256(q ? _mm256_srli_epi16(w, 2 * q) : w, two);
                if (three) { /* the third bit sits at bit b: to bit 2 */
                    const int b = 4 * (v % 2) + q;
                    const __m256i hs = b < 2   ? _mm256_slli_epi16(hv, 2 - b)
                                       : b > 2 ? _mm256_srli_epi16(hv, b - 2)
                                               : hv;
                    u = _mm256_or_si256(u, _mm256_and_si256(hs, bit2));
                }
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    __m256i av = _mm256_set1_epi32(ld32(as + i * lda + 16 * v + 4 * q));
                    acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(u, av));
                }
            }
            const __m256i sv =
                three ? pair16s(sc + v * G) : _mm256_and_si256(pair16(sc + v * G),
                                                               _mm256_set1_epi16(0x0f));
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(acc[i], sv));
            }
        }
        const __m256 d = _mm256_loadu_ps((const float *)(sc + 16 * G));
        if (three) {
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m256 vda = bcast_f32(e + SW(ty, i, scr_ne(ty)));
                f[i] = _mm256_add_ps(f[i], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[i]),
                                                         _mm256_mul_ps(d, vda)));
            }
            continue;
        }
        const __m256 dmin = _mm256_loadu_ps((const float *)(sc + 20 * G));
        __m256i m2[8];
        for (int q = 0; q < 8; q++) /* (m_2q, m_2q+1) as int16 pairs */
            m2[q] = _mm256_srli_epi16(two16(sc + 2 * q * G, sc + (2 * q + 1) * G), 4);
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            __m256i msum = _mm256_setzero_si256();
            for (int q = 0; q < 8; q++) /* (asum16_2q, asum16_2q+1) as int16 pairs */
                msum = _mm256_add_epi32(
                    msum, _mm256_madd_epi16(m2[q], _mm256_set1_epi32(e[SW(ty, i, q)])));
            const __m256 vda = bcast_f32(e + SW(ty, i, scr_ne(ty)));
            const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(d, vda));
            const __m256 t2 =
                _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vda));
            f[i] = _mm256_add_ps(f[i], _mm256_sub_ps(t1, t2));
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

/* bytes of a packed super-block of G rows */
static int64_t sb_bytes(uint32_t type)
{
    switch (type) {
    case GE_T_Q4_K: return SB;
    case GE_T_Q5_K: return GE_KQ_Q5K_BYTES(G);
    case GE_T_Q6_K: return GE_KQ_Q6K_BYTES(G);
    case GE_T_Q3_K: return GE_KQ_Q3K_BYTES(G);
    case GE_T_Q2_K: return GE_KQ_Q2K_BYTES(G);
    default: return GE_KQ_IQ4XS_BYTES(G);
    }
}

/* one register tile of n tokens (n a constant in each case) */
#define BY_N(n, CALL)                                                                      \
    switch (n) {                                                                           \
    case 1: CALL(1); break;                                                                \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    default: CALL(4); break;                                                               \
    }

#define SCR 8192 /* int32 words of scratch: 32 KiB of stack */

/* the scratch rows of tokens [tb, te) (tiles of NT from tb) for super-blocks [s0, s0 + kn):
 * a few vector ops per token and super-block (the sums fit int16: |asum| <= 4064) */
static void fill_scr(uint32_t type, const ge_q8_act *act, int64_t tb, int64_t te, int64_t s0,
                     int64_t kn, int32_t *scr)
{
    const int ne = scr_ne(type), es = (ne + 1) * NT;
    const int64_t nb32 = act->cols / 32;
    for (int64_t t = tb; t < te; t++) {
        int32_t *row = scr + (t - tb) / NT * kn * es + (t - tb) % NT * (ne + 1);
        for (int64_t s = 0; s < kn; s++) {
            int32_t *e = row + s * es;
            const int32_t *s32 = act->sum + t * nb32 + (s0 + s) * 8;
            const int32_t *s16 = act->sum16 ? act->sum16 + t * 2 * nb32 + (s0 + s) * 16 : NULL;
            if (type == GE_T_Q6_K) { /* sub-block j = values [16 j, 16 j + 16) */
                const int8_t *x = act->qs + t * act->cols + (s0 + s) * GE_QK_K;
                const __m256i ones = _mm256_set1_epi8(1);
                for (int j = 0; j < 16; j += 2) { /* one 128-bit lane per sub-block */
                    __m256i v = _mm256_maddubs_epi16(
                        ones, _mm256_loadu_si256((const __m256i *)(x + 16 * j)));
                    v = _mm256_add_epi16(v, _mm256_shuffle_epi32(v, 0x4e));
                    v = _mm256_add_epi16(v, _mm256_shuffle_epi32(v, 0xb1));
                    v = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(v, 5));
                    e[j] = _mm256_extract_epi32(v, 0);
                    e[j + 1] = _mm256_extract_epi32(v, 4);
                }
            } else if (ne == 16) { /* Q3_K: the seeds -4 x asum16 in the low int16 half */
                for (int k = 0; k < 16; k += 8) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(s16 + k));
                    _mm256_storeu_si256((__m256i *)(e + k),
                                        _mm256_and_si256(_mm256_sub_epi32(_mm256_setzero_si256(),
                                                                          _mm256_slli_epi32(v, 2)),
                                                         _mm256_set1_epi32(0xffff)));
                }
            } else if (ne == 8) { /* the 16 asum16 as int16: 8 pairs */
                const __m256i v = _mm256_packs_epi32(
                    _mm256_loadu_si256((const __m256i *)s16),
                    _mm256_loadu_si256((const __m256i *)(s16 + 8)));
                _mm256_storeu_si256((__m256i *)e, _mm256_permute4x64_epi64(v, 0xd8));
            } else if (ne == 4) { /* the 8 asum as int16: 4 pairs */
                const __m256i v = _mm256_loadu_si256((const __m256i *)s32);
                _mm_storeu_si128((__m128i *)e, _mm_packs_epi32(_mm256_castsi256_si128(v),
                                                               _mm256_extracti128_si256(v, 1)));
            }
            memcpy(e + ne, act->d + t * nb32 + (s0 + s) * 8, 4);
        }
    }
}

/* one tile of n tokens, per type in a function of its own (each type's register allocation
 * on its own: measured faster than one function holding every type's tiles) */
#define TILE_FN(name, CALL)                                                                \
    static __attribute__((noinline)) void name(int64_t n, const uint8_t *gp, int64_t kn,   \
                                               const int8_t *a, int64_t lda,               \
                                               const int32_t *sc, int first, float *yt,    \
                                               int64_t ldy, int nrow)                  \
    {                                                                                      \
        BY_N(n, CALL);                                                                     \
    }
#define T6(k) tile6(k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
#define T4(k) tile(GE_T_Q4_K, k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
#define T5(k) tile(GE_T_Q5_K, k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
#define TX(k) tile(GE_T_IQ4_XS, k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
#define T3(k) tile2(GE_T_Q3_K, k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
#define T2(k) tile2(GE_T_Q2_K, k, gp, kn, a, lda, sc, first, yt, ldy, nrow)
TILE_FN(tiles_q6k, T6)
TILE_FN(tiles_q4k, T4)
TILE_FN(tiles_q5k, T5)
TILE_FN(tiles_iq4xs, TX)
TILE_FN(tiles_q3k, T3)
TILE_FN(tiles_q2k, T2)
#undef T6
#undef T4
#undef T5
#undef TX
#undef T3
#undef T2

static void gemm_packed(uint32_t type, const void *packed, int64_t cols, const ge_q8_act *act,
                        int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const int64_t nsb = cols / GE_QK_K, sbb = sb_bytes(type), es = ES(type);
    /* K chunks of kn super-blocks with TB tokens' scratch (the fp32 partial sums carry
     * through y, exactly) */
    const int64_t kn0 = SCR / es / (TB / NT) < nsb ? SCR / es / (TB / NT) : nsb;
    const uint8_t *pk = packed;
    int32_t scr[SCR];
    for (int64_t tb = t0; tb < t1; tb += TB) {
        const int64_t te = t1 - tb < TB ? t1 : tb + TB;
        for (int64_t s0 = 0; s0 < nsb; s0 += kn0) {
            const int64_t kn = nsb - s0 < kn0 ? nsb - s0 : kn0;
            const int first = s0 == 0;
            fill_scr(type, act, tb, te, s0, kn, scr);
            for (int64_t g = r0 / G; g * G < r1; g++) {
                const uint8_t *gp = pk + (g * nsb + s0) * sbb;
                const int nrow = r1 - g * G < G ? (int)(r1 - g * G) : G;
                for (int64_t t = tb; t < te; t += NT) {
                    const int8_t *a = act->qs + t * cols + s0 * GE_QK_K;
                    const int32_t *sc = scr + (t - tb) / NT * kn * es;
                    float *yt = y + t * ldy + g * G;
                    const int64_t n = te - t < NT ? te - t : NT;
                    void (*fn)(int64_t, const uint8_t *, int64_t, const int8_t *, int64_t,
                               const int32_t *, int, float *, int64_t, int) =
                        type == GE_T_Q3_K   ? tiles_q3k
                        : type == GE_T_Q2_K ? tiles_q2k
                        : type == GE_T_Q4_K ? tiles_q4k
                        : type == GE_T_Q5_K ? tiles_q5k
                        : type == GE_T_Q6_K ? tiles_q6k
                                            : tiles_iq4xs;
                    fn(n, gp, kn, a, cols, sc, first, yt, ldy, nrow);
                }
            }
        }
    }
}

size_t ge_kq_avx2_packed_size(uint32_t type, int64_t rows, int64_t cols)
{
    return ge_kq_packed_size_g(type, rows, cols, G);
}

void ge_kq_avx2_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1)
{
    ge_kq_pack_g(type, src, rows, cols, dst, r0, r1, G);
}

void ge_kq_avx2_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                     const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                     float *y, int64_t ldy)
{
    if (ge_kq_span(type) == GE_QK_K / 32)
        gemm_packed(type, w, cols, act, t0, t1, r0, r1, y, ldy);
    else if (ge_kq_span(type) == 1)
        ge_kq32_avx2_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
    else
        ge_kq_scalar_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}
