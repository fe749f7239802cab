/* sgemm_avx2.c - SGEMM on F32/F16/BF16 panels, AVX2 + FMA + F16C (sgemm.h has the layout and
 * numerics).
 *
 * Register tile: MR tokens x NP panels, a panel being two ymm (16 outputs): 3 x 2 in the
 * steady state (12 accumulators + 3 broadcasts + 1 panel half: 7 loads per 12 FMAs on fp32
 * panels; 6 x 1 needs 8 and measured 1-4% slower warm, a quarter slower when the weights
 * stream from DRAM with few tokens, PERF.md), wider in panels when the call has 1 or 2 tokens.
 * Each accumulator lane is one output's fma chain over k in order, so tile shapes and the
 * split never change a value. The tile is one template over the panel type T, whose steps of
 * its own are widen8 and in_order. */
#include <immintrin.h>
#include <string.h>

#include "sgemm.h"

#define P GE_SG_PANEL
#define INLINE static inline __attribute__((always_inline))

/* Half h of the 16-element panel row at element r of w as fp32, exactly. F32, F16: outputs
 * 8h..8h+7 (F16C's conversion equals ge_fp16_to_fp32 but for quietening a signalling NaN).
 * BF16, a bf16 being the top half of an fp32: each 32-bit lane of the row holds outputs 2m
 * (low) and 2m + 1 (high), so half 0 is the even outputs (shifted up) and half 1 the odd ones
 * (the low half masked off), one ALU op each; in_order puts them back at the store. */
INLINE __m256 widen8(const uint32_t T, const void *w, size_t r, int h)
{
    if (T == GE_T_F32)
        return _mm256_loadu_ps((const float *)w + r + 8 * h);
    if (T == GE_T_F16)
        return _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)((const uint16_t *)w + r + 8 * h)));
    const __m256i v = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + r));
    return _mm256_castsi256_ps(h ? _mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u))
                                 : _mm256_slli_epi32(v, 16));
}

/* The two halves of widen8 as outputs 0..7 and 8..15 (BF16: interleave even and odd) */
INLINE void in_order(const uint32_t T, __m256 *lo, __m256 *hi)
{
    if (T != GE_T_BF16)
        return;
    const __m256 a = _mm256_unpacklo_ps(*lo, *hi), b = _mm256_unpackhi_ps(*lo, *hi);
    *lo = _mm256_permute2f128_ps(a, b, 0x20);
    *hi = _mm256_permute2f128_ps(a, b, 0x31);
}

/* y[i][16j + l] = sum_k W[k][j][l] * x[i][k] for i < MR, j < NP: w points at the first
 * panel (ps elements between panels), x at token row 0, y at the tile's first output. The
 * last panel's two halves store only the lanes set in m_lo / m_hi. */
INLINE void tile(const uint32_t T, const int MR, const int NP, const void *w, size_t ps,
                 const float *x, size_t ldx, int64_t cols, float *y, size_t ldy, __m256i m_lo,
                 __m256i m_hi)
{
    __m256 acc[3][8];
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int h = 0; h < 2 * NP; h++)
            acc[i][h] = _mm256_setzero_ps();
    /* per k: MR broadcasts, then one widened panel half at a time for its MR FMAs: at most
     * 12 accumulators + 3 + 1 = 16 ymm (widening all halves first spilled an accumulator) */
    for (int64_t k = 0; k < cols; k++) {
        __m256 b[3];
#pragma GCC unroll 3
        for (int i = 0; i < MR; i++)
            b[i] = _mm256_broadcast_ss(x + i * ldx + (size_t)k);
#pragma GCC unroll 8
        for (int h = 0; h < 2 * NP; h++) {
            const __m256 wv = widen8(T, w, (h >> 1) * ps + (size_t)k * P, h & 1);
#pragma GCC unroll 3
            for (int i = 0; i < MR; i++)
                acc[i][h] = _mm256_fmadd_ps(wv, b[i], acc[i][h]);
        }
    }
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NP; j++) {
            in_order(T, &acc[i][2 * j], &acc[i][2 * j + 1]);
            if (j < NP - 1) {
                _mm256_storeu_ps(y + i * ldy + j * P, acc[i][2 * j]);
                _mm256_storeu_ps(y + i * ldy + j * P + 8, acc[i][2 * j + 1]);
            } else {
                _mm256_maskstore_ps(y + i * ldy + j * P, m_lo, acc[i][2 * j]);
                _mm256_maskstore_ps(y + i * ldy + j * P + 8, m_hi, acc[i][2 * j + 1]);
            }
        }
}

typedef void tile_fn(const void *w, size_t ps, const float *x, size_t ldx, int64_t cols,
                     float *y, size_t ldy, __m256i m_lo, __m256i m_hi);

#define TILE(T, MR, NP)                                                                       \
    static void tile_##T##_##MR##x##NP(const void *w, size_t ps, const float *x, size_t ldx,  \
                                       int64_t cols, float *y, size_t ldy, __m256i m_lo,      \
                                       __m256i m_hi)                                          \
    {                                                                                         \
        tile(GE_T_##T, MR, NP, w, ps, x, ldx, cols, y, ldy, m_lo, m_hi);                      \
    }
#define TILES(T)                                                                              \
    TILE(T, 1, 1) TILE(T, 1, 2) TILE(T, 1, 3) TILE(T, 1, 4) TILE(T, 2, 1) TILE(T, 2, 2)       \
    TILE(T, 2, 3) TILE(T, 3, 1) TILE(T, 3, 2)
TILES(F32) TILES(F16) TILES(BF16)
/* [tokens - 1][panels - 1]: the shapes the driver below asks for */
#define TABLE(T)                                                                              \
    {{tile_##T##_1x1, tile_##T##_1x2, tile_##T##_1x3, tile_##T##_1x4},                        \
     {tile_##T##_2x1, tile_##T##_2x2, tile_##T##_2x3, NULL},                                  \
     {tile_##T##_3x1, tile_##T##_3x2, NULL, NULL}}
static tile_fn *const tiles_f32[3][4] = TABLE(F32), *const tiles_f16[3][4] = TABLE(F16),
               *const tiles_bf16[3][4] = TABLE(BF16);

enum { MR = 3 };

/* lanes [0, n) of a 16-wide panel row, as the two halves' maskstore masks */
static void lane_masks(int n, __m256i *lo, __m256i *hi)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    *lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
    *hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), idx);
}

void ge_sgemm_avx2(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                   const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                   float *y, int64_t ldy)
{
    if (r1 > rows)
        r1 = rows;
    if (t0 >= t1 || r0 >= r1)
        return;
    tile_fn *const(*tiles)[4] = type == GE_T_F32   ? tiles_f32
                                : type == GE_T_F16 ? tiles_f16
                                                   : tiles_bf16;
    const size_t ps = (size_t)cols * P, es = ge_sg_elem_size(type);
    const int64_t p0 = r0 / P, p1 = (r1 + P - 1) / P;
    __m256i full_lo, full_hi, end_lo, end_hi;
    lane_masks(P, &full_lo, &full_hi);
    lane_masks((int)(r1 - (p1 - 1) * P), &end_lo, &end_hi);
    const int64_t n = t1 - t0;
    /* 3 x 2 (12 chains); wider in panels for 1 or 2 tokens: 8..12 chains in flight */
    const int np = n >= 3 ? 2 : n == 2 ? 3 : 4;
    for (int64_t p = p0; p < p1; p += np) {
        const int nq = p1 - p < np ? (int)(p1 - p) : np;
        const int end = p + nq == p1;
        const void *w = (const char *)packed + (size_t)p * ps * es;
        for (int64_t t = t0; t < t1; t += MR) {
            const int mr = t1 - t < MR ? (int)(t1 - t) : MR;
            tiles[mr - 1][nq - 1](w, ps, x + (size_t)t * (size_t)ldx, (size_t)ldx, cols,
                                  y + (size_t)t * (size_t)ldy + (size_t)p * P, (size_t)ldy,
                                  end ? end_lo : full_lo, end ? end_hi : full_hi);
        }
    }
}

/* ---- packing: blocks transposed in registers, elements copied unchanged ----------------- */

/* 8 x 8 fp32 transpose: r[i] = column i of the 8 rows */
INLINE void transpose8(__m256 r[8])
{
    __m256 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        s[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

/* 8 x 8 transposes of 16-bit elements in each 128-bit lane: with rows 0..7 in the low lanes
 * and rows 8..15 in the high lanes, r[i] becomes column i of all 16 rows, one panel row. */
INLINE void transpose8x16(__m256i r[8])
{
    __m256i t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        s[2 * i] = _mm256_unpacklo_epi32(t[i], t[i + 2]);
        s[2 * i + 1] = _mm256_unpackhi_epi32(t[i], t[i + 2]);
        s[2 * i + 4] = _mm256_unpacklo_epi32(t[i + 4], t[i + 6]);
        s[2 * i + 5] = _mm256_unpackhi_epi32(t[i + 4], t[i + 6]);
    }
    for (int i = 0; i < 4; i++) {
        r[2 * i] = _mm256_unpacklo_epi64(s[i], s[i + 4]);
        r[2 * i + 1] = _mm256_unpackhi_epi64(s[i], s[i + 4]);
    }
}

/* Columns [k, k + 8) of the 16 rows at s (rb bytes apart) -> panel rows k..k+7 at pd. */
INLINE void block(const size_t es, const uint8_t *s, size_t rb, uint8_t *pd)
{
    if (es == 4) {
        for (int h = 0; h < 2; h++) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps((const float *)(s + (size_t)(8 * h + i) * rb));
            transpose8(r);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps((float *)(pd + (size_t)i * P * 4) + 8 * h, r[i]);
        }
        return;
    }
    __m256i r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(s + (size_t)i * rb))),
            _mm_loadu_si128((const __m128i *)(s + (size_t)(i + 8) * rb)), 1);
    transpose8x16(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        _mm256_storeu_si256((__m256i *)(pd + (size_t)i * P * 2), r[i]);
}

INLINE void pack(const size_t es, uint32_t type, const uint8_t *src, int64_t rows,
                 int64_t cols, uint8_t *dst, int64_t r0, int64_t r1)
{
    const size_t rb = (size_t)cols * es;
    for (int64_t p = r0 / P; p * P < r1; p++) {
        if (rows - p * P < P) { /* the zero-padded last panel */
            ge_sg_pack_scalar(type, src, rows, cols, dst, p * P, rows);
            continue;
        }
        uint8_t *pd = dst + (size_t)p * P * rb;
        const uint8_t *s = src + (size_t)p * P * rb;
        int64_t k = 0;
        for (; k + 8 <= cols; k += 8)
            block(es, s + (size_t)k * es, rb, pd + (size_t)k * P * es);
        for (; k < cols; k++)
            for (int j = 0; j < P; j++)
                memcpy(pd + ((size_t)k * P + (size_t)j) * es,
                                 s + (size_t)j * rb + (size_t)k * es, es);
    }
}

void ge_sg_pack_avx2(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1)
{
    if (ge_sg_elem_size(type) == 4) /* one specialisation per element size */
        pack(4, type, src, rows, cols, dst, r0, r1);
    else
        pack(2, type, src, rows, cols, dst, r0, r1);
}
