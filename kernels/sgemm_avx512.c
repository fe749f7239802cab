/* sgemm_avx512.c - SGEMM on fp32 panels, AVX-512F (sgemm.h has the layout and numerics).
 *
 * Register tile: MR tokens x NP panels (16 outputs each) of zmm accumulators, 6 x 4 = 24
 * accumulators + 4 panel loads + 1 broadcast per k (29 of the 32 zmm). Warm, 6 x 1..4 all
 * reach ~98% of the FMA peak; the four panel streams in flight make 6 x 4 the fastest when the
 * weights come from L3 or DRAM (PERF.md). The loop runs panel groups outer, token tiles inner:
 * a group (cols x 256 bytes) stays in L2 for every token tile, so no k blocking is needed.
 * Each accumulator is one output's fma chain over k in order, so tile shapes and the split
 * never change a value. */
#include <immintrin.h>

#include "sgemm.h"

#define P GE_SG_PANEL
#define INLINE static inline __attribute__((always_inline))

/* y[i][16j + l] = sum_k W[k][j][l] * x[i][k] for i < MR, j < NP: w points at the first
 * panel (ps floats between panels), x at token row 0, y at the tile's first output. The last
 * panel stores only the lanes in mlast. */
INLINE void tile(const int MR, const int NP, const float *w, size_t ps, const float *x,
                 size_t ldx, int64_t cols, float *y, size_t ldy, __mmask16 mlast)
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
            wv[j] = _mm512_loadu_ps(w + j * ps + (size_t)k * P);
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

typedef void tile_fn(const float *w, size_t ps, const float *x, size_t ldx, int64_t cols,
                     float *y, size_t ldy, __mmask16 mlast);

#define TILE(MR, NP)                                                                          \
    static void tile_##MR##x##NP(const float *w, size_t ps, const float *x, size_t ldx,       \
                                 int64_t cols, float *y, size_t ldy, __mmask16 mlast)         \
    {                                                                                         \
        tile(MR, NP, w, ps, x, ldx, cols, y, ldy, mlast);                                     \
    }
#define TILES(MR) TILE(MR, 1) TILE(MR, 2) TILE(MR, 3) TILE(MR, 4)
TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
#define ROW(MR) {tile_##MR##x1, tile_##MR##x2, tile_##MR##x3, tile_##MR##x4}
static tile_fn *const tiles[6][4] = {ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6)};

enum { MR = 6, NP = 4 };

void ge_sgemm_avx512(const float *packed, int64_t rows, int64_t cols, const float *x,
                     int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                     int64_t ldy)
{
    if (r1 > rows)
        r1 = rows;
    if (t0 >= t1 || r0 >= r1)
        return;
    const size_t ps = (size_t)cols * P;
    const int64_t p0 = r0 / P, p1 = (r1 + P - 1) / P;
    const __mmask16 mend = (__mmask16)((1u << (r1 - (p1 - 1) * P)) - 1);
    for (int64_t p = p0; p < p1; p += NP) {
        const int nq = p1 - p < NP ? (int)(p1 - p) : NP;
        const __mmask16 m = p + nq == p1 ? mend : 0xffff;
        const float *w = packed + (size_t)p * ps;
        for (int64_t t = t0; t < t1; t += MR) {
            const int mr = t1 - t < MR ? (int)(t1 - t) : MR;
            tiles[mr - 1][nq - 1](w, ps, x + (size_t)t * (size_t)ldx, (size_t)ldx, cols,
                                  y + (size_t)t * (size_t)ldy + (size_t)p * P, (size_t)ldy, m);
        }
    }
}
