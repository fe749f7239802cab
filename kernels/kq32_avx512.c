/* kq32_avx512.c - the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) of the kq GEMM,
 * avx512 tier (AVX-512 F/BW/VL/DQ + AVX-512 VNNI): 512-bit vpdpbusd on 16-row groups.
 *
 * Packed layout: kq.h's 32-block layout with G = 16. Per 4-value chunk c one 64-byte load
 * holds 16 rows x 4 code bytes; masking gives the low nibbles (values 4c + j) and a 16-bit
 * shift plus mask the high ones (values 16 + 4c + j). Q5_0 / Q5_1 add 16 where the fifth bit
 * is set: vptestmb of the block's one high-bit load against bit k gives the byte mask of a
 * masked vpaddb (no shifts: 6% faster than shift + vpternlogd, the shifts competing with
 * vpdpbusd for their pipes). IQ4_NL turns the nibble into its table value + 128 with one
 * vpshufb. So every type reaches vpdpbusd as unsigned bytes u (0..15, 0..31, or 1..241)
 * against the token's signed activation bytes, broadcast straight from ge_q8_act.
 *
 * Exactness: u = c + bias with bias 8 (Q4_0), 16 (Q5_0), 128 (IQ4_NL), 0 (Q4_1 / Q5_1:
 * their code is u). Each block's int32 sum starts from -bias * act->sum[block], so it ends as
 * isum = sum c a exactly: |sum u a| <= 32 * 241 * 127 < 2^20 and the seed's magnitude <=
 * 128 * 32 * 127 < 2^19, far inside int32 (vpdpbusd adds its four u8 x s8 products without
 * saturation). Per block the integers then go through kq.h's fp32 rule, one rounded
 * operation at a time in the oracle's order:
 *   acc = acc + (float)isum * (d * da)                                  (Q4_0, Q5_0, IQ4_NL)
 *   acc = acc + ((float)isum * (d * da) + (float)asum * (m * da))       (Q4_1, Q5_1)
 * (-std=c11: no contraction into FMA), so every result is bit-identical to the scalar tier.
 *
 * Register tile: 16 rows x NT tokens, each unpacked code register used NT times; the rest of
 * the loop nest (token cache blocks, K chunks whose partial sums carry through y, the next
 * group's prefetch) is q8_avx512.c's. */
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 16
#define NT 8      /* tokens per register tile */
#define KB 64     /* blocks per K chunk (the fp32 partial sums carry through y) */
#define SCR 2048  /* scratch (token, block) entries */

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Per (token tile, block): the seeds (-bias * act->sum), activation scales and, for the
 * types with a min, the sums as floats, side by side for constant offsets. */
typedef struct {
    int32_t seed[NT];
    float da[NT];
    float fs[NT];
} scr_t;

/* Rows of one row group (mask m) for tokens [t, t + n), blocks [0, kn) of the K chunk at gp
 * / a / sc; first: start from +0.0f, else continue the partial sums stored in y. type and n
 * are compile-time constants at each call site; each token's arithmetic is the same for any
 * n. */
static inline __attribute__((always_inline)) void tile(const uint32_t type, const int n,
                                                       const uint8_t *gp, int64_t kn,
                                                       const int8_t *a, int64_t lda,
                                                       const scr_t *sc, int first, float *y,
                                                       int64_t ldy, __mmask16 m,
                                                       const uint8_t *pf)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1, iq = type == GE_T_IQ4_NL;
    const int64_t BB = GE_KQ32_BYTES(G, five, min), DOFF = GE_KQ32_D_OFF(G, five);
    const __m512i low = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    __m512i tbl = _mm512_setzero_si512();
    if (iq) {
        int8_t t[16];
        for (int i = 0; i < 16; i++)
            t[i] = (int8_t)(ge_iq4nl_values[i] + 128);
        tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
    }
    __m512 f[NT];
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        f[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y + i * ldy);
    }
    for (int64_t b = 0; b < kn; b++) {
        const uint8_t *bp = gp + b * BB;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next row group's weights, one block per block */
            for (int l = 0; l < BB / 64; l++)
                _mm_prefetch((const char *)(pf + b * BB + 64 * l), _MM_HINT_T0);
        __m512i s[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            s[i] = min ? _mm512_setzero_si512() : _mm512_set1_epi32(sc[b].seed[i]);
        }
        const __m512i h = five ? _mm512_loadu_si512(bp + 16 * G) : _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i w = _mm512_loadu_si512(bp + 64 * c);
            __m512i lo = _mm512_and_si512(w, low);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
            if (five) { /* + 16 where bit c (c + 4) of the lane's high-bit byte is set */
                const __mmask64 ml = _mm512_test_epi8_mask(h, _mm512_set1_epi8((char)(1 << c)));
                const __mmask64 mh = _mm512_test_epi8_mask(h, _mm512_set1_epi8((char)(16 << c)));
                lo = _mm512_mask_add_epi8(lo, ml, lo, b4);
                hi = _mm512_mask_add_epi8(hi, mh, hi, b4);
            }
            if (iq) {
                lo = _mm512_shuffle_epi8(tbl, lo);
                hi = _mm512_shuffle_epi8(tbl, hi);
            }
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const int8_t *ai = ab + i * lda + 4 * c;
                s[i] = _mm512_dpbusd_epi32(s[i], lo, _mm512_set1_epi32(ld32(ai)));
                s[i] = _mm512_dpbusd_epi32(s[i], hi, _mm512_set1_epi32(ld32(ai + 16)));
            }
        }
        const __m512 d = _mm512_loadu_ps(bp + DOFF);
        const __m512 mn = min ? _mm512_loadu_ps(bp + DOFF + 4 * G) : _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const __m512 da = _mm512_set1_ps(sc[b].da[i]);
            __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[i]), _mm512_mul_ps(d, da));
            if (min)
                t = _mm512_add_ps(t, _mm512_mul_ps(_mm512_set1_ps(sc[b].fs[i]),
                                                   _mm512_mul_ps(mn, da)));
            f[i] = _mm512_add_ps(f[i], t);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, m, f[i]);
    }
}

#define CASE(k)                                                                                \
    case k:                                                                                    \
        tile(type, k, gp, kn, a, cols, sc, first, yt, ldy, mask, pf);                          \
        break;

static inline __attribute__((always_inline)) void gemm(const uint32_t type, const void *packed,
                                                       int64_t cols, const ge_q8_act *act,
                                                       int64_t t0, int64_t t1, int64_t r0,
                                                       int64_t r1, float *y, int64_t ldy)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
    const int32_t bias = type == GE_T_Q4_0 ? 8 : type == GE_T_Q5_0 ? 16 : min ? 0 : 128;
    const int64_t BB = GE_KQ32_BYTES(G, five, min);
    const int64_t nb = cols / 32, kb = nb < KB ? nb : KB;
    const int64_t tbs = SCR / kb / NT * NT; /* tokens per cache block, >= 32 */
    const uint8_t *pk = packed;
    scr_t scr[SCR / NT];
    for (int64_t tb = t0; tb < t1; tb += tbs) {
        const int64_t te = t1 - tb < tbs ? t1 : tb + tbs;
        for (int64_t kb0 = 0; kb0 < nb; kb0 += kb) {
            const int64_t kn = nb - kb0 < kb ? nb - kb0 : kb;
            const int first = kb0 == 0;
            for (int64_t t = tb; t < te; t++) {
                scr_t *row = scr + (t - tb) / NT * kn;
                for (int64_t b = 0; b < kn; b++) {
                    const int32_t s = act->sum[t * nb + kb0 + b];
                    row[b].seed[(t - tb) % NT] = -bias * s;
                    row[b].da[(t - tb) % NT] = act->d[t * nb + kb0 + b];
                    row[b].fs[(t - tb) % NT] = (float)s;
                }
            }
            for (int64_t g = r0 / G; g * G < r1; g++) {
                const uint8_t *gp = pk + (g * nb + kb0) * BB;
                const int64_t nrow = r1 - g * G < G ? r1 - g * G : G;
                const __mmask16 mask = (__mmask16)((1u << nrow) - 1);
                for (int64_t t = tb; t < te; t += NT) {
                    const int8_t *a = act->qs + t * cols + kb0 * 32;
                    const scr_t *sc = scr + (t - tb) / NT * kn;
                    float *yt = y + t * ldy + g * G;
                    /* with several tiles per group, the first one fetches the next group's
                     * weights (as q8_avx512.c) */
                    const uint8_t *pf =
                        te - tb > NT && t == tb && (g + 1) * G < r1 ? gp + nb * BB : NULL;
                    switch (te - t < NT ? te - t : NT) {
                    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
                    }
                }
            }
        }
    }
}

void ge_kq32_avx512_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
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
