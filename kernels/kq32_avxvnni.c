/* kq32_avxvnni.c - the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) of the kq GEMM,
 * avxvnni tier: 256-bit vpdpbusd (AVX-VNNI, VEX) on 8-row groups, for CPUs with AVX-VNNI but
 * no AVX-512.
 *
 * Packed layout: kq.h's 32-block layout with G = 8 (the avx2 tier's packing). Chunk k = 0..7
 * of a block (values 4k .. 4k+3 of each row): k < 4 the low nibbles of code load k, k >= 4
 * the high nibbles (16-bit shift and mask) of load k - 4; Q5_0 / Q5_1 or in the fifth bit
 * from the block's high-bit load (bit k moved to bit 4 by a 16-bit shift of at most 4, which
 * brings nothing from the neighbouring byte to bit 4, then masked); IQ4_NL turns the nibble
 * into its table value + 128 with one vpshufb. Every type so reaches vpdpbusd as unsigned
 * bytes u (0..15, 0..31 or 1..241) against the token's signed activation bytes, broadcast
 * from ge_q8_act.
 *
 * Exactness: u = c + bias, bias 8 (Q4_0), 16 (Q5_0), 128 (IQ4_NL), 0 (Q4_1 / Q5_1). Each
 * block's int32 sum starts from -bias * act->sum[block], so it ends as isum = sum c a
 * exactly (|sum u a| <= 32 * 241 * 127 < 2^20, |seed| < 2^19: inside int32, and vpdpbusd
 * does not saturate). Per block the integers go through kq.h's fp32 rule in the oracle's
 * order (-std=c11: no FMA contraction):
 *   acc = acc + (float)isum * (d * da)                                  (Q4_0, Q5_0, IQ4_NL)
 *   acc = acc + ((float)isum * (d * da) + (float)asum * (m * da))       (Q4_1, Q5_1)
 * so results are bit-identical to the scalar tier.
 *
 * Tile: two row groups (16 rows) x NT tokens share each activation broadcast; the fp32 sums
 * live in memory (VEX has 16 vector registers, all needed for the integers), as in
 * q8_avxvnni.c, whose loop nest (token cache blocks, K chunks carrying partial sums through
 * y, the next pair's prefetch) this file follows. */
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 8
#define NT 4      /* tokens per register tile (of 2 row groups: 16 rows) */
#define KB 64     /* blocks per K chunk (the fp32 partial sums carry through y) */
#define SCR 2048  /* scratch (token, block) entries */

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Per (token tile, block): the seeds (-bias * act->sum), activation scales and, for the
 * types with a min, the sums as floats. */
typedef struct {
    int32_t seed[NT];
    float da[NT];
    float fs[NT];
} scr_t;

/* chunk k (0..7) of the block at bp as vpdpbusd's unsigned bytes (kq.h layout, G = 8) */
static inline __attribute__((always_inline)) __m256i chunk(const uint32_t type,
                                                           const uint8_t *bp, const int k)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i w = _mm256_loadu_si256((const __m256i *)(bp + 32 * (k % 4)));
    __m256i x = _mm256_and_si256(k < 4 ? w : _mm256_srli_epi16(w, 4), low);
    if (five) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(bp + 16 * G));
        const __m256i hk = k < 4 ? _mm256_slli_epi16(h, 4 - k)
                           : k > 4 ? _mm256_srli_epi16(h, k - 4) : h;
        x = _mm256_or_si256(x, _mm256_and_si256(hk, _mm256_set1_epi8(0x10)));
    }
    if (type == GE_T_IQ4_NL) {
        int8_t t[16];
        for (int i = 0; i < 16; i++)
            t[i] = (int8_t)(ge_iq4nl_values[i] + 128);
        x = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t)), x);
    }
    return x;
}

/* Rows [o, o + nrow) of y (ng row groups: o = g * G, nrow <= ng * G) for tokens [t, t + n),
 * blocks [0, kn) of the K chunk at gp / a / sc; first: start from +0.0f, else continue the
 * partial sums stored in y. type, ng and n are compile-time constants at each call site;
 * each token's arithmetic is the same for any ng and n. */
static inline __attribute__((always_inline)) void tile(const uint32_t type, const int ng,
                                                       const int n, const uint8_t *gp,
                                                       int64_t gstride, int64_t kn,
                                                       const int8_t *a, int64_t lda,
                                                       const scr_t *sc, int first, float *y,
                                                       int64_t ldy, int nrow, const uint8_t *pf)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
    const int64_t BB = GE_KQ32_BYTES(G, five, min), DOFF = GE_KQ32_D_OFF(G, five);
    float f[NT][2 * G] __attribute__((aligned(32)));
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        memset(f[i], 0, sizeof f[i]);
        if (!first)
            memcpy(f[i], y + i * ldy, (size_t)nrow * sizeof(float));
    }
    for (int64_t b = 0; b < kn; b++) {
        const uint8_t *bp0 = gp + b * BB, *bp1 = bp0 + gstride;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next two row groups' weights, block by block */
            for (int l = 0; l < BB; l += 64) {
                _mm_prefetch((const char *)(pf + b * BB + l), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + gstride + b * BB + l), _MM_HINT_T0);
            }
        __m256i s0[NT], s1[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            s0[i] = min ? _mm256_setzero_si256() : _mm256_set1_epi32(sc[b].seed[i]);
            s1[i] = s0[i];
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m256i w0 = chunk(type, bp0, k);
            const __m256i w1 = ng == 2 ? chunk(type, bp1, k) : w0;
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m256i av = _mm256_set1_epi32(ld32(ab + i * lda + 4 * k));
                s0[i] = _mm256_dpbusd_avx_epi32(s0[i], w0, av);
                if (ng == 2)
                    s1[i] = _mm256_dpbusd_avx_epi32(s1[i], w1, av);
            }
        }
        const __m256 d0 = _mm256_loadu_ps((const float *)(bp0 + DOFF));
        const __m256 d1 = ng == 2 ? _mm256_loadu_ps((const float *)(bp1 + DOFF)) : d0;
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const __m256 da = _mm256_set1_ps(sc[b].da[i]);
            __m256 t0 = _mm256_mul_ps(_mm256_cvtepi32_ps(s0[i]), _mm256_mul_ps(d0, da));
            if (min) {
                const __m256 m0 = _mm256_loadu_ps((const float *)(bp0 + DOFF + 4 * G));
                t0 = _mm256_add_ps(t0, _mm256_mul_ps(_mm256_set1_ps(sc[b].fs[i]),
                                                     _mm256_mul_ps(m0, da)));
            }
            _mm256_store_ps(f[i], _mm256_add_ps(_mm256_load_ps(f[i]), t0));
            if (ng == 2) {
                __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(s1[i]), _mm256_mul_ps(d1, da));
                if (min) {
                    const __m256 m1 = _mm256_loadu_ps((const float *)(bp1 + DOFF + 4 * G));
                    t1 = _mm256_add_ps(t1, _mm256_mul_ps(_mm256_set1_ps(sc[b].fs[i]),
                                                         _mm256_mul_ps(m1, da)));
                }
                _mm256_store_ps(f[i] + G, _mm256_add_ps(_mm256_load_ps(f[i] + G), t1));
            }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        memcpy(y + i * ldy, f[i], (size_t)nrow * sizeof(float));
    }
}

#define CASE(ng, k)                                                                            \
    case k:                                                                                    \
        tile(type, ng, k, gp, nb * BB, kn, a, cols, sc, first, yt, ldy, nrow, pf);             \
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
            for (int64_t g = r0 / G; g * G < r1; g += 2) {
                const uint8_t *gp = pk + (g * nb + kb0) * BB;
                const int nrow = r1 - g * G < 2 * G ? (int)(r1 - g * G) : 2 * G;
                for (int64_t t = tb; t < te; t += NT) {
                    const int8_t *a = act->qs + t * cols + kb0 * 32;
                    const scr_t *sc = scr + (t - tb) / NT * kn;
                    float *yt = y + t * ldy + g * G;
                    const int64_t n = te - t < NT ? te - t : NT;
                    /* with several tiles per group pair, the first one fetches the next
                     * pair's weights (as q8_avxvnni.c) */
                    const uint8_t *pf =
                        te - tb > NT && t == tb && (g + 2) * G < r1 ? gp + 2 * nb * BB : NULL;
                    if (nrow > G) {
                        switch (n) { CASE(2, 1) CASE(2, 2) CASE(2, 3) default: CASE(2, 4) }
                    } else {
                        switch (n) { CASE(1, 1) CASE(1, 2) CASE(1, 3) default: CASE(1, 4) }
                    }
                }
            }
        }
    }
}

void ge_kq32_avxvnni_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
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
