/* sgemm_neon.c - SGEMM on F32/F16/BF16 panels, arm64 Advanced SIMD (sgemm.h has the layout
 * and numerics).
 *
 * Register tile: MR tokens x NP panels, a panel being four q registers (16 outputs): 6 x 1 in
 * the steady state (24 accumulators + 6 x vectors + 1 panel quarter = 31 of the 32 registers),
 * wider in panels when the call has 1 to 3 tokens (1 x 4, 2 x 3, 3 x 2: 16..24 chains). x is
 * read four k at a time as one q register per token and each FMLA takes its k by lane
 * (FMLA Vd.4S, Vn.4S, Vm.S[l]), so that fp32 panels need 4 + MR / 4 loads per 4 MR FMLAs
 * (16-bit panels: 2 + MR / 4, widened by FCVTL/FCVTL2 or SHLL/SHLL2, which keep the lanes in
 * output order). FMLA is fused: each accumulator lane is one output's fmaf chain over k in
 * order from +0, so tile shapes and the split never change a value. */
/* (Built with -fno-schedule-insns, Makefile: GCC's pre-RA scheduler hoists panel loads ahead
 * of the FMAs that free their registers and spills a third of the 6 x 1 accumulators.) */
#include <arm_neon.h>
#include <string.h>

#include "sgemm.h"

#define P GE_SG_PANEL
#define INLINE static inline __attribute__((always_inline))

/* Quarters 2h and 2h + 1 (outputs 8h..8h+7) of the 16-element panel row at element r of w as
 * fp32, exactly: f16 by FCVTL (ge_fp16_to_fp32's values, but for quietening a signalling
 * NaN), bf16 shifted into the top half of each lane. */
INLINE void widen8(const uint32_t T, const void *w, size_t r, int h, float32x4_t *lo,
                   float32x4_t *hi)
{
    if (T == GE_T_F32) {
        *lo = vld1q_f32((const float *)w + r + 8 * h);
        *hi = vld1q_f32((const float *)w + r + 8 * h + 4);
        return;
    }
    const uint16x8_t v = vld1q_u16((const uint16_t *)w + r + 8 * h);
    if (T == GE_T_F16) {
        const float16x8_t f = vreinterpretq_f16_u16(v);
        *lo = vcvt_f32_f16(vget_low_f16(f));
        *hi = vcvt_high_f32_f16(f);
    } else {
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
        *hi = vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
    }
}

/* The tile's FMLAs for one k: panel rows at element r of each panel (ps apart), the k's x
 * in lane L of xv[i] */
#define KSTEP(L, r)                                                                           \
    do {                                                                                      \
        _Pragma("GCC unroll 4") for (int j = 0; j < NP; j++)                                  \
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)                                   \
        {                                                                                     \
            float32x4_t w0, w1;                                                               \
            widen8(T, w, (size_t)j * ps + (r), h, &w0, &w1);                                  \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) acc[i][4 * j + 2 * h] =      \
                vfmaq_laneq_f32(acc[i][4 * j + 2 * h], w0, xv[i], L);                         \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) acc[i][4 * j + 2 * h + 1] =  \
                vfmaq_laneq_f32(acc[i][4 * j + 2 * h + 1], w1, xv[i], L);                     \
        }                                                                                     \
    } while (0)

/* y[i][16j + l] = sum_k W[k][j][l] * x[i][k] for i < MR, j < NP: w points at the first
 * panel (ps elements between panels), x at token row 0, y at the tile's first output. The
 * last panel stores only its first `last` lanes. */
INLINE void tile(const uint32_t T, const int MR, const int NP, const void *w, size_t ps,
                 const float *x, size_t ldx, int64_t cols, float *y, size_t ldy, int last)
{
    float32x4_t acc[6][16];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 16
        for (int q = 0; q < 4 * NP; q++)
            acc[i][q] = vdupq_n_f32(0.0f);
    int64_t k = 0;
    for (; k + 4 <= cols; k += 4) {
        float32x4_t xv[6];
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            xv[i] = vld1q_f32(x + i * ldx + (size_t)k);
        KSTEP(0, (size_t)k * P);
        KSTEP(1, (size_t)(k + 1) * P);
        KSTEP(2, (size_t)(k + 2) * P);
        KSTEP(3, (size_t)(k + 3) * P);
    }
    for (; k < cols; k++) { /* the last cols % 4, one k each from lane 0 */
        float32x4_t xv[6];
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            xv[i] = vld1q_dup_f32(x + i * ldx + (size_t)k);
        KSTEP(0, (size_t)k * P);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NP; j++) {
            float *yj = y + i * ldy + j * P;
            if (j < NP - 1 || last == P) {
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++)
                    vst1q_f32(yj + 4 * q, acc[i][4 * j + q]);
            } else { /* the zero-padded end of the weight: its real lanes only */
                float b[P];
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++)
                    vst1q_f32(b + 4 * q, acc[i][4 * j + q]);
                memcpy(yj, b, (size_t)last * sizeof(float));
            }
        }
}

typedef void tile_fn(const void *w, size_t ps, const float *x, size_t ldx, int64_t cols,
                     float *y, size_t ldy, int last);

#define TILE(T, MR, NP)                                                                       \
    static void tile_##T##_##MR##x##NP(const void *w, size_t ps, const float *x, size_t ldx,  \
                                       int64_t cols, float *y, size_t ldy, int last)          \
    {                                                                                         \
        tile(GE_T_##T, MR, NP, w, ps, x, ldx, cols, y, ldy, last);                            \
    }
#define TILES(T)                                                                              \
    TILE(T, 1, 1) TILE(T, 1, 2) TILE(T, 1, 3) TILE(T, 1, 4) TILE(T, 2, 1) TILE(T, 2, 2)       \
    TILE(T, 2, 3) TILE(T, 3, 1) TILE(T, 3, 2) TILE(T, 4, 1) TILE(T, 5, 1) TILE(T, 6, 1)
TILES(F32) TILES(F16) TILES(BF16)
/* [tokens - 1][panels - 1]: the shapes the driver below asks for */
#define TABLE(T)                                                                              \
    {{tile_##T##_1x1, tile_##T##_1x2, tile_##T##_1x3, tile_##T##_1x4},                        \
     {tile_##T##_2x1, tile_##T##_2x2, tile_##T##_2x3, NULL},                                  \
     {tile_##T##_3x1, tile_##T##_3x2, NULL, NULL},                                            \
     {tile_##T##_4x1, NULL, NULL, NULL},                                                      \
     {tile_##T##_5x1, NULL, NULL, NULL},                                                      \
     {tile_##T##_6x1, NULL, NULL, NULL}}
static tile_fn *const tiles_f32[6][4] = TABLE(F32), *const tiles_f16[6][4] = TABLE(F16),
               *const tiles_bf16[6][4] = TABLE(BF16);

void ge_sgemm_neon(uint32_t type, const void *packed, int64_t rows, int64_t cols,
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
    const int end_lanes = (int)(r1 - (p1 - 1) * P);
    const int64_t n = t1 - t0;
    /* tokens x panels: 6 x 1 (24 chains); 1 to 3 tokens take 4, 3 or 2 panels (16..24) */
    const int mr_max = n >= 4 ? 6 : (int)n, np = n >= 4 ? 1 : n == 3 ? 2 : n == 2 ? 3 : 4;
    for (int64_t p = p0; p < p1; p += np) {
        const int nq = p1 - p < np ? (int)(p1 - p) : np;
        const int last = p + nq == p1 ? end_lanes : P;
        const void *w = (const char *)packed + (size_t)p * ps * es;
        for (int64_t t = t0; t < t1; t += mr_max) {
            const int mr = t1 - t < mr_max ? (int)(t1 - t) : mr_max;
            tiles[mr - 1][nq - 1](w, ps, x + (size_t)t * (size_t)ldx, (size_t)ldx, cols,
                                  y + (size_t)t * (size_t)ldy + (size_t)p * P, (size_t)ldy,
                                  last);
        }
    }
}

/* ---- packing: 4 x 4 blocks (fp32) and 8 x 8 blocks (16-bit) transposed in registers ------ */

/* r[i] (row i, 4 columns) -> r[i] = column i of the 4 rows */
INLINE void transpose4(float32x4_t r[4])
{
    const float32x4x2_t a = vtrnq_f32(r[0], r[1]), b = vtrnq_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a.val[0]),
                                            vreinterpretq_f64_f32(b.val[0])));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a.val[1]),
                                            vreinterpretq_f64_f32(b.val[1])));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a.val[0]),
                                            vreinterpretq_f64_f32(b.val[0])));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a.val[1]),
                                            vreinterpretq_f64_f32(b.val[1])));
}

/* r[i] (row i, 8 16-bit columns) -> r[i] = column i of the 8 rows */
INLINE void transpose8x8(uint16x8_t r[8])
{
    uint16x8_t a[8];
    uint32x4_t b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = vtrn1q_u16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = vtrn2q_u16(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const uint32x4_t u = vreinterpretq_u32_u16(a[4 * i + j]);
            const uint32x4_t v = vreinterpretq_u32_u16(a[4 * i + j + 2]);
            b[4 * i + j] = vtrn1q_u32(u, v);
            b[4 * i + j + 2] = vtrn2q_u32(u, v);
        }
    for (int i = 0; i < 4; i++) {
        const uint64x2_t u = vreinterpretq_u64_u32(b[i]), v = vreinterpretq_u64_u32(b[i + 4]);
        r[i] = vreinterpretq_u16_u64(vtrn1q_u64(u, v));
        r[i + 4] = vreinterpretq_u16_u64(vtrn2q_u64(u, v));
    }
}

/* Columns [k, k + 8) of the 16 rows at s (rb bytes apart) -> panel rows k..k+7 at pd. */
INLINE void block(const size_t es, const uint8_t *s, size_t rb, uint8_t *pd)
{
    if (es == 4) {
        for (int c = 0; c < 2; c++)     /* columns 4c..4c+3 */
            for (int g = 0; g < 4; g++) { /* rows 4g..4g+3 */
                float32x4_t r[4];
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++)
                    r[i] = vld1q_f32((const float *)(s + (size_t)(4 * g + i) * rb) + 4 * c);
                transpose4(r);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++)
                    vst1q_f32((float *)(pd + (size_t)(4 * c + i) * P * 4) + 4 * g, r[i]);
            }
        return;
    }
    for (int g = 0; g < 2; g++) { /* rows 8g..8g+7 */
        uint16x8_t r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = vld1q_u16((const uint16_t *)(s + (size_t)(8 * g + i) * rb));
        transpose8x8(r);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            vst1q_u16((uint16_t *)(pd + (size_t)i * P * 2) + 8 * g, r[i]);
    }
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
                memcpy(pd + ((size_t)k * P + (size_t)j) * es, s + (size_t)j * rb + (size_t)k * es,
                       es);
    }
}

void ge_sg_pack_neon(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1)
{
    if (ge_sg_elem_size(type) == 4) /* one specialisation per element size */
        pack(4, type, src, rows, cols, dst, r0, r1);
    else
        pack(2, type, src, rows, cols, dst, r0, r1);
}
