/* kq_avx512.c - the quantised-type GEMM, avx512 tier (AVX-512 F/BW/VL/DQ + AVX-512 VNNI):
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS on 16-row groups (kq.h layouts, G = 16); the other types
 * through the scalar oracle on the file's rows. Every type's integer sums are exact (bounds
 * below) and go, per super-block, through kq.h's fp32 rule in its order: bit-identical to
 * the scalar tier. |a| <= 127: the quantiser never emits -128.
 *
 * Q4_K:
 * Per 4-value chunk one 64-byte load holds 16 rows x 4 code bytes (low nibbles: sub-block
 * 2p, high: 2p + 1); the unsigned codes are vpdpbusd's unsigned operand and the token's
 * signed activation bytes, broadcast, the signed one, so no bias is needed. Each sub-block's
 * exact int32 dot (|.| <= 32 * 15 * 127) is scaled by the row's 6-bit scale with one
 * vpmulld; the mins term sum_j m_j * asum_j is one vpdpwssd per two sub-blocks (int16
 * pairs: m <= 63, |asum| <= 4064).
 *
 * Q5_K: Q4_K's kernel with the fifth bit or-ed in (vpternlogd) from its plane byte, shifted
 * to bit 4 (a 16-bit shift by at most 4 keeps it in its byte); codes 0..31.
 *
 * Q6_K: the unsigned 6-bit codes u = c + 32, rebuilt from the two planes, go to vpdpbusd as
 * they are; each 16-value sub-block's int32 sum starts from -32 * act->sum16 (cancelling
 * the bias exactly), then one vpmulld by the row's int8 scale.
 *
 * IQ4_XS: the nibble indices are looked up (vpshufb, the table in every 128-bit lane) into
 * u = v + 128 (1..241), vpdpbusd's unsigned operand; each sub-block's sum u a (|.| < 2^20)
 * is scaled by the row's int8 scale with vpmulld, and the bias comes off once per
 * super-block: 128 sum_j s_j asum_j, one vpdpwssd per two sub-blocks as Q4_K's mins
 * (|isum| < 2^27 before and after).
 *
 * Q3_K, Q2_K (16-value sub-blocks): the unsigned codes u (Q3_K: c + 4, 0..7, the 2-bit and
 * third-bit planes or-ed by vpternlogd; Q2_K: c, 0..3) go to vpdpbusd; Q3_K's sums start
 * from -4 * act->sum16 (cancelling the bias). A 16-value sub-block's exact sum fits int16
 * (Q3_K after its seed: |.| <= 16 * 4 * 127 = 8128; Q2_K: <= 16 * 3 * 127), so two
 * sub-blocks' sums are packed as the int16 halves of each lane (a shift and a word blend)
 * and one vpdpwssd with the rows' scale pairs adds s_j dot_j + s_j' dot_j' to the int32
 * isum: no vpmulld. Q2_K's mins term sum_j m_j * asum16_j is one vpdpwssd per two
 * sub-blocks (m <= 15, |asum16| <= 2032).
 *
 * Per token block and K chunk, a scratch (32 KiB of stack) holds each (token tile,
 * super-block)'s activation scales and seeds or int16 sum pairs, reached by one pointer at
 * constant offsets: broadcast loads instead of per-token scalar work in the loop (measured
 * 12-18% faster on every type than forming them in place). The fp32 partial sums carry
 * through y between K chunks (stored and reloaded exactly). */
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 16
#define NT 8  /* tokens per register tile */
#define TB 64 /* tokens per cache block */
#define SB GE_KQ_Q4K_BYTES(G)

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 16 u8 plane values as int32 lanes */
static inline __m512i u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The per-(token tile, super-block) scratch (filled once per token block and K chunk, for
 * every row group): per token of the tile NE int32 words, then its activation scale (fp32
 * bits), the NT tokens one after the other, so that one pointer with constant offsets
 * reaches them:
 *   Q4_K, Q5_K, IQ4_XS: 4 words, (asum_2q, asum_2q+1) as int16 pairs (|asum| <= 4064);
 *   Q2_K: 8 words, (asum16_2q, asum16_2q+1) as int16 pairs;
 *   Q3_K, Q6_K: 16 words, the sub-blocks' seeds -4 (Q3_K) or -32 (Q6_K) x asum16. */
static inline int scr_ne(uint32_t type)
{
    return type == GE_T_Q3_K || type == GE_T_Q6_K ? 16 : type == GE_T_Q2_K ? 8 : 4;
}
#define ES(ty) ((scr_ne(ty) + 1) * NT) /* int32 words per (tile, super-block) */
#define SW(ty, i, k) ((i) * (scr_ne(ty) + 1) + (k)) /* word k of the tile's token i */

/* the tile's accumulators: +0.0f on the first K chunk, else the partial sums left in y */
#define LOAD_F(f, n, first, y, ldy, m)                                                     \
    _Pragma("GCC unroll 16") for (int i = 0; i < NT; i++)                                  \
    {                                                                                      \
        if (i >= n)                                                                        \
            break;                                                                         \
        f[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y + i * ldy);        \
    }

static inline __m512 bcast_f32(const int32_t *p)
{
    return _mm512_castsi512_ps(_mm512_set1_epi32(*p));
}

/* Q4_K, Q5_K, IQ4_XS (ty, a constant): rows of one row group (mask m) for tokens
 * [t, t + n) over kn super-blocks (a, gp at the K chunk; sc its scratch row) */
static inline __attribute__((always_inline)) void tile(const uint32_t ty, const int n,
                                                       const uint8_t *gp, int64_t kn,
                                                       const int8_t *a, int64_t lda,
                                                       const int32_t *sc0, int first,
                                                       float *y, int64_t ldy, __mmask16 m)
{
    const int five = ty == GE_T_Q5_K, iq4 = ty == GE_T_IQ4_XS;
    const int64_t sbb = five ? GE_KQ_Q5K_BYTES(G) : iq4 ? GE_KQ_IQ4XS_BYTES(G) : SB;
    const int64_t so = five ? 160 * G : 128 * G; /* scales, then mins, d, dmin */
    const __m512i low = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
    uint8_t tb[16]; /* IQ4_XS: the table's values + 128, unsigned */
    for (int k = 0; k < 16; k++)
        tb[k] = (uint8_t)(ge_iq4nl_values[k] + 128);
    const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tb));
    __m512 f[NT];
    LOAD_F(f, n, first, y, ldy, m)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * sbb, *hb = bp + 128 * G, *sc = bp + so, *mn = sc + 8 * G;
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(ty);
        __m512i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const int p = j / 2, h = j % 2;
            const uint8_t *q = bp + p * 32 * G;
            __m512i acc[NT];
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++)
                acc[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m512i w = _mm512_loadu_si512(q + 4 * G * c);
                __m512i x = _mm512_and_si512(h ? _mm512_srli_epi16(w, 4) : w, low);
                if (five) { /* the fifth bit sits at bit b: to bit 4 (16-bit shifts by <= 4
                             * keep it inside its byte) */
                    const __m512i hv = _mm512_loadu_si512(hb + 4 * G * (2 * p + c / 4));
                    const int b = 4 * h + c % 4;
                    const __m512i hs = b < 4   ? _mm512_slli_epi16(hv, 4 - b)
                                       : b > 4 ? _mm512_srli_epi16(hv, b - 4)
                                               : hv;
                    x = _mm512_ternarylogic_epi32(x, hs, bit4, 0xf8); /* a | (b & c) */
                }
                if (iq4)
                    x = _mm512_shuffle_epi8(tab, x);
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    __m512i av = _mm512_set1_epi32(ld32(as + i * lda + 32 * j + 4 * c));
                    acc[i] = _mm512_dpbusd_epi32(acc[i], x, av);
                }
            }
            const __m512i scale = iq4 ? _mm512_cvtepi8_epi32(
                                            _mm_loadu_si128((const __m128i *)(sc + j * G)))
                                      : u8x16(sc + j * G);
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(acc[i], scale));
            }
        }
        /* mins (Q4_K, Q5_K) or, for IQ4_XS, the scales: m_j (or s_j) times the sub-block's
         * activation sum */
        const uint8_t *mv = iq4 ? sc : mn;
        __m512i m2[4];
        for (int q = 0; q < 4; q++) /* (m_2q, m_2q+1) as int16 pairs */
            m2[q] = iq4 ? _mm512_or_si512(
                              _mm512_and_si512(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                                   (const __m128i *)(mv + 2 * q * G))),
                                               _mm512_set1_epi32(0xffff)),
                              _mm512_slli_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                                    (const __m128i *)(mv + (2 * q + 1) * G))),
                                                16))
                        : _mm512_or_si512(u8x16(mv + 2 * q * G),
                                          _mm512_slli_epi32(u8x16(mv + (2 * q + 1) * G), 16));
        const __m512 d = _mm512_loadu_ps(sc + (iq4 ? 8 : 16) * G);
        const __m512 dmin = iq4 ? d : _mm512_loadu_ps(sc + 20 * G);
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            __m512i msum = _mm512_setzero_si512();
            for (int q = 0; q < 4; q++) /* (asum_2q, asum_2q+1) as int16 pairs */
                msum = _mm512_dpwssd_epi32(msum, m2[q], _mm512_set1_epi32(e[SW(ty, i, q)]));
            const __m512 vda = bcast_f32(e + SW(ty, i, 4));
            if (iq4) { /* the codes were biased by +128: sum_j s_j (dot_j + 128 asum_j) */
                const __m512i is = _mm512_sub_epi32(isum[i], _mm512_slli_epi32(msum, 7));
                f[i] = _mm512_add_ps(f[i], _mm512_mul_ps(_mm512_cvtepi32_ps(is),
                                                         _mm512_mul_ps(d, vda)));
                continue;
            }
            const __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(d, vda));
            const __m512 t2 = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, vda));
            f[i] = _mm512_add_ps(f[i], _mm512_sub_ps(t1, t2));
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, m, f[i]);
    }
}

/* Q6_K: rows of one row group (mask m) for tokens [t, t + n) over all super-blocks */
static inline __attribute__((always_inline)) void tile6(const int n, const uint8_t *gp,
                                                        int64_t kn, const int8_t *a,
                                                        int64_t lda, const int32_t *sc0,
                                                        int first, float *y, int64_t ldy,
                                                        __mmask16 m)
{
    const __m512i low = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
    __m512 f[NT];
    LOAD_F(f, n, first, y, ldy, m)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * GE_KQ_Q6K_BYTES(G), *hb = bp + 128 * G;
        const int8_t *sc = (const int8_t *)(bp + 192 * G);
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(GE_T_Q6_K);
        __m512i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm512_setzero_si512();
        /* sub-block j: unit p, half h (values +32), q; the four of a unit unrolled, so that
         * each shift below has a constant count (a loop over j left them to runtime: variable
         * shifts and branches per chunk, the kernel at 39-59% of the VNNI-512 peak on a Zen 4
         * against 66-68% unrolled; PERF.md) */
        for (int p = 0; p < 4; p++)
#pragma GCC unroll 4
        for (int hq = 0; hq < 4; hq++) {
            const int j = 4 * p + hq, h = hq / 2, q = hq % 2;
            __m512i acc[NT];
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                acc[i] = _mm512_set1_epi32(e[SW(GE_T_Q6_K, i, j)]);
            }
#pragma GCC unroll 4
            for (int c = 4 * q; c < 4 * q + 4; c++) {
                const __m512i l = _mm512_loadu_si512(bp + 4 * G * (8 * p + c));
                const __m512i hi = _mm512_loadu_si512(hb + 4 * G * (4 * p + c / 2));
                /* the 2 high bits of this value sit at bit sh = 4 (c % 2) + 2 h: to bits 4-5 */
                const int sh = 4 * (c % 2) + 2 * h;
                const __m512i hb2 = sh <= 4 ? _mm512_slli_epi16(hi, 4 - sh)
                                            : _mm512_srli_epi16(hi, sh - 4);
                const __m512i u = _mm512_ternarylogic_epi32(
                    _mm512_and_si512(h ? _mm512_srli_epi16(l, 4) : l, low), hb2, top,
                    0xf8); /* a | (b & c) */
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) {
                    if (i >= n)
                        break;
                    const int off = 64 * p + 32 * h + 4 * c;
                    acc[i] = _mm512_dpbusd_epi32(acc[i], u,
                                                 _mm512_set1_epi32(ld32(as + i * lda + off)));
                }
            }
            const __m512i sv = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sc + j * G)));
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(acc[i], sv));
                /* folded before the next sub-block starts: else gcc defers the four
                 * sub-blocks' products to the unit's end and spills (66% -> 71% on a Zen 4) */
                __asm__("" : "+v"(isum[i]));
            }
        }
        const __m512 d = _mm512_loadu_ps(bp + 208 * G);
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const __m512 vda = bcast_f32(e + SW(GE_T_Q6_K, i, 16));
            f[i] = _mm512_add_ps(f[i], _mm512_mul_ps(_mm512_cvtepi32_ps(isum[i]),
                                                     _mm512_mul_ps(d, vda)));
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, m, f[i]);
    }
}

/* (lo of p0, lo of p1) as int16 pairs from two 16-byte planes: signed bytes (sgn) or their
 * low nibbles (else) */
static inline __m512i pairs16(const uint8_t *p0, const uint8_t *p1, int sgn)
{
    __m512i a = sgn ? _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p0)) : u8x16(p0);
    __m512i b = sgn ? _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p1)) : u8x16(p1);
    const __m512i m = _mm512_set1_epi32(sgn ? 0xffff : 0x0f);
    return _mm512_or_si512(_mm512_and_si512(a, m), _mm512_slli_epi32(_mm512_and_si512(b, m), 16));
}

/* Q2_K, Q3_K (ty, a constant): rows of one row group (mask m) for tokens [t, t + n) over all
 * super-blocks */
static inline __attribute__((always_inline)) void tile2(const uint32_t ty, const int n,
                                                        const uint8_t *gp, int64_t kn,
                                                        const int8_t *a, int64_t lda,
                                                        const int32_t *sc0, int first,
                                                        float *y, int64_t ldy, __mmask16 m)
{
    const int three = ty == GE_T_Q3_K;
    const int64_t sbb = three ? GE_KQ_Q3K_BYTES(G) : GE_KQ_Q2K_BYTES(G);
    const __m512i two = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4);
    __m512 f[NT];
    LOAD_F(f, n, first, y, ldy, m)
    for (int64_t s = 0; s < kn; s++) {
        const uint8_t *bp = gp + s * sbb, *hb = bp + 64 * G;
        const uint8_t *sc = bp + (three ? 96 : 64) * G;
        const int8_t *as = a + s * 256;
        const int32_t *e = sc0 + s * ES(ty);
        __m512i isum[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++)
            isum[i] = _mm512_setzero_si512();
        for (int vp = 0; vp < 8; vp++) { /* sub-blocks 2 vp, 2 vp + 1 */
            const __m512i hv = _mm512_loadu_si512(hb + 4 * G * vp);
            __m512i acc[2][NT];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const int v = 2 * vp + h;
                const __m512i w = _mm512_loadu_si512(bp + 4 * G * v);
#pragma GCC unroll 16
                for (int i = 0; i < NT; i++) /* Q3_K: minus 4 asum16 cancels the bias */
                    acc[h][i] = three ? _mm512_set1_epi32(e[SW(ty, i, v)])
                                      : _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    __m512i u = _mm512_and_si512(q ? _mm512_srli_epi16(w, 2 * q) : w, two);
                    if (three) { /* the third bit sits at bit b: to bit 2 (16-bit shifts
                                  * that keep it in its byte) */
                        const int b = 4 * h + q;
                        const __m512i hs = b < 2   ? _mm512_slli_epi16(hv, 2 - b)
                                           : b > 2 ? _mm512_srli_epi16(hv, b - 2)
                                                   : hv;
                        u = _mm512_ternarylogic_epi32(u, hs, bit2, 0xf8); /* a | (b & c) */
                    }
#pragma GCC unroll 16
                    for (int i = 0; i < NT; i++) {
                        if (i >= n)
                            break;
                        acc[h][i] = _mm512_dpbusd_epi32(
                            acc[h][i], u, _mm512_set1_epi32(ld32(as + i * lda + 16 * v + 4 * q)));
                    }
                }
            }
            /* the two sub-blocks' sums (|.| <= 8128) as int16 pairs, times
             * the rows' scale pairs */
            const __m512i sv = pairs16(sc + 2 * vp * G, sc + (2 * vp + 1) * G, three);
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m512i pr = _mm512_mask_blend_epi16(0xaaaaaaaau, acc[0][i],
                                                           _mm512_slli_epi32(acc[1][i], 16));
                isum[i] = _mm512_dpwssd_epi32(isum[i], pr, sv);
            }
        }
        const __m512 d = _mm512_loadu_ps(sc + 16 * G);
        if (three) {
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m512 vda = bcast_f32(e + SW(ty, i, 16));
                f[i] = _mm512_add_ps(f[i], _mm512_mul_ps(_mm512_cvtepi32_ps(isum[i]),
                                                         _mm512_mul_ps(d, vda)));
            }
            continue;
        }
        const __m512 dmin = _mm512_loadu_ps(sc + 20 * G);
        __m512i m2[8];
        for (int q = 0; q < 8; q++) /* (m_2q, m_2q+1) as int16 pairs */
            m2[q] = _mm512_or_si512(
                _mm512_srli_epi32(u8x16(sc + 2 * q * G), 4),
                _mm512_slli_epi32(_mm512_srli_epi32(u8x16(sc + (2 * q + 1) * G), 4), 16));
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            __m512i msum = _mm512_setzero_si512();
            for (int q = 0; q < 8; q++) /* (asum16_2q, asum16_2q+1) as int16 pairs */
                msum = _mm512_dpwssd_epi32(msum, m2[q], _mm512_set1_epi32(e[SW(ty, i, q)]));
            const __m512 vda = bcast_f32(e + SW(ty, i, 8));
            const __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(d, vda));
            const __m512 t2 = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, vda));
            f[i] = _mm512_add_ps(f[i], _mm512_sub_ps(t1, t2));
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, m, f[i]);
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
    case 4: CALL(4); break;                                                                \
    case 5: CALL(5); break;                                                                \
    case 6: CALL(6); break;                                                                \
    case 7: CALL(7); break;                                                                \
    default: CALL(8); break;                                                               \
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
            if (ne == 16) { /* the seeds -4 or -32 x asum16 */
                const __m512i v = _mm512_loadu_si512(act->sum16 + t * 2 * nb32 + (s0 + s) * 16);
                const __m512i sh = _mm512_slli_epi32(v, type == GE_T_Q3_K ? 2 : 5);
                _mm512_storeu_si512(e, _mm512_sub_epi32(_mm512_setzero_si512(), sh));
            } else if (ne == 8) { /* the 16 asum16 as int16: 8 pairs */
                const __m512i v = _mm512_loadu_si512(act->sum16 + t * 2 * nb32 + (s0 + s) * 16);
                _mm256_storeu_si256((__m256i *)e, _mm512_cvtepi32_epi16(v));
            } else { /* the 8 asum as int16: 4 pairs */
                const __m256i v = _mm256_loadu_si256((const __m256i *)s32);
                _mm_storeu_si128((__m128i *)e, _mm256_cvtepi32_epi16(v));
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
                                               int64_t ldy, __mmask16 m)                  \
    {                                                                                      \
        BY_N(n, CALL);                                                                     \
    }
#define T6(k) tile6(k, gp, kn, a, lda, sc, first, yt, ldy, m)
#define T4(k) tile(GE_T_Q4_K, k, gp, kn, a, lda, sc, first, yt, ldy, m)
#define T5(k) tile(GE_T_Q5_K, k, gp, kn, a, lda, sc, first, yt, ldy, m)
#define TX(k) tile(GE_T_IQ4_XS, k, gp, kn, a, lda, sc, first, yt, ldy, m)
#define T3(k) tile2(GE_T_Q3_K, k, gp, kn, a, lda, sc, first, yt, ldy, m)
#define T2(k) tile2(GE_T_Q2_K, k, gp, kn, a, lda, sc, first, yt, ldy, m)
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
                const __mmask16 m = (__mmask16)((1u << nrow) - 1);
                for (int64_t t = tb; t < te; t += NT) {
                    const int8_t *a = act->qs + t * cols + s0 * GE_QK_K;
                    const int32_t *sc = scr + (t - tb) / NT * kn * es;
                    float *yt = y + t * ldy + g * G;
                    const int64_t n = te - t < NT ? te - t : NT;
                    void (*fn)(int64_t, const uint8_t *, int64_t, const int8_t *, int64_t,
                               const int32_t *, int, float *, int64_t, __mmask16) =
                        type == GE_T_Q3_K   ? tiles_q3k
                        : type == GE_T_Q2_K ? tiles_q2k
                        : type == GE_T_Q4_K ? tiles_q4k
                        : type == GE_T_Q5_K ? tiles_q5k
                        : type == GE_T_Q6_K ? tiles_q6k
                                            : tiles_iq4xs;
                    fn(n, gp, kn, a, cols, sc, first, yt, ldy, m);
                }
            }
        }
    }
}

size_t ge_kq_avx512_packed_size(uint32_t type, int64_t rows, int64_t cols)
{
    return ge_kq_packed_size_g(type, rows, cols, G);
}

void ge_kq_avx512_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                       int64_t r0, int64_t r1)
{
    ge_kq_pack_g(type, src, rows, cols, dst, r0, r1, G);
}

void ge_kq_avx512_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy)
{
    if (ge_kq_span(type) == GE_QK_K / 32)
        gemm_packed(type, w, cols, act, t0, t1, r0, r1, y, ldy);
    else if (ge_kq_span(type) == 1)
        ge_kq32_avx512_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
    else
        ge_kq_scalar_gemm(type, w, rows, cols, act, t0, t1, r0, r1, y, ldy);
}
