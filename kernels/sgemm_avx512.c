/* sgemm_avx512.c - SGEMM on F32/F16/BF16 panels, AVX-512F (sgemm.h has the layout and
 * numerics).
 *
 * Register tile: MR tokens x NP panels (16 outputs each) of zmm accumulators, 6 x 4 = 24
 * accumulators + 4 panel loads + 1 broadcast per k (29 of the 32 zmm). Warm, 6 x 1..4 all
 * reach ~98% of the FMA peak; the four panel streams in flight make 6 x 4 the fastest when the
 * weights come from L3 or DRAM (PERF.md). The loop runs panel groups outer, token tiles inner:
 * a group (cols x 256 bytes) stays in L2 for every token tile, so no k blocking is needed.
 * Each accumulator is one output's fma chain over k in order, so tile shapes and the split
 * never change a value. The tile is one template over the panel type T, whose only step of
 * its own is widen16. */
#include <immintrin.h>

#include "sgemm.h"

#define P GE_SG_PANEL
#define INLINE static inline __attribute__((always_inline))

/* Panel elements [i, i + 16) of w as fp32, exactly (vcvtph2ps equals ge_fp16_to_fp32 but
 * for quietening a signalling NaN; bf16 is the top half of an fp32). */
INLINE __m512 widen16(const uint32_t T, const void *w, size_t i)
{
    if (T == GE_T_F32)
        return _mm512_loadu_ps((const float *)w + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (T == GE_T_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* y[i][16j + l] = sum_k W[k][j][l] * x[i][k] for i < MR, j < NP: w points at the first
 * panel (ps elements between panels), x at token row 0, y at the tile's first output. The
 * last panel stores only the lanes in mlast. */
INLINE void tile(const uint32_t T, const int MR, const int NP, const void *w, size_t ps,
                 const float *x, size_t ldx, int64_t cols, float *y, size_t ldy,
                 __mmask16 mlast)
{
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NP; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols; k++) {
        __m512 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NP; j++)
            wv[j] = widen16(T, w, j * ps + (size_t)k * P);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m512 b = _mm512_set1_ps(x[i * ldx + (size_t)k]);
#pragma GCC unroll 4
            for (int j = 0; j < NP; j++)
                acc[i][j] = _mm512_fmadd_ps(wv[j], b, acc[i][j]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NP; j++)
            _mm512_mask_storeu_ps(y + i * ldy + j * P, j == NP - 1 ? mlast : 0xffff, acc[i][j]);
}

typedef void tile_fn(const void *w, size_t ps, const float *x, size_t ldx, int64_t cols,
                     float *y, size_t ldy, __mmask16 mlast);

#define TILE(T, MR, NP)                                                                       \
    static void tile_##T##_##MR##x##NP(const void *w, size_t ps, const float *x, size_t ldx,  \
                                       int64_t cols, float *y, size_t ldy, __mmask16 mlast)   \
    {                                                                                         \
        tile(GE_T_##T, MR, NP, w, ps, x, ldx, cols, y, ldy, mlast);                           \
    }
#define TILES(T, MR) TILE(T, MR, 1) TILE(T, MR, 2) TILE(T, MR, 3) TILE(T, MR, 4)
#define ALL_TILES(T)                                                                          \
    TILES(T, 1) TILES(T, 2) TILES(T, 3) TILES(T, 4) TILES(T, 5) TILES(T, 6)
ALL_TILES(F32) ALL_TILES(F16) ALL_TILES(BF16)
#define ROW(T, MR)                                                                            \
    {tile_##T##_##MR##x1, tile_##T##_##MR##x2, tile_##T##_##MR##x3, tile_##T##_##MR##x4}
#define TABLE(T) {ROW(T, 1), ROW(T, 2), ROW(T, 3), ROW(T, 4), ROW(T, 5), ROW(T, 6)}
static tile_fn *const tiles_f32[6][4] = TABLE(F32), *const tiles_f16[6][4] = TABLE(F16),
               *const tiles_bf16[6][4] = TABLE(BF16);

enum { MR = 6, NP = 4 };

void ge_sgemm_avx512(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                     const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0,
                     int64_t r1, float *y, int64_t ldy)
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
    const __mmask16 mend = (__mmask16)((1u << (r1 - (p1 - 1) * P)) - 1);
    for (int64_t p = p0; p < p1; p += NP) {
        const int nq = p1 - p < NP ? (int)(p1 - p) : NP;
        const __mmask16 m = p + nq == p1 ? mend : 0xffff;
        const void *w = (const char *)packed + (size_t)p * ps * es;
        for (int64_t t = t0; t < t1; t += MR) {
            const int mr = t1 - t < MR ? (int)(t1 - t) : MR;
            tiles[mr - 1][nq - 1](w, ps, x + (size_t)t * (size_t)ldx, (size_t)ldx, cols,
                                  y + (size_t)t * (size_t)ldy + (size_t)p * P, (size_t)ldy, m);
        }
    }
}
