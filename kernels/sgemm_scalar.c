/* sgemm_scalar.c - the SGEMM oracle: panel packing and the plain fma chain (sgemm.h). */
#include <math.h>
#include <string.h>

#include "sgemm.h"

#define P GE_SG_PANEL

size_t ge_sg_packed_size(uint32_t type, int64_t rows, int64_t cols)
{
    return (size_t)((rows + P - 1) / P) * P * (size_t)cols * ge_sg_elem_size(type);
}

/* Rows [r0, r1) (r0 a multiple of 16; r1 too, or rows) -> their panels, es-byte elements
 * copied unchanged, 64 columns at a time so that the 16 x 64 block written stays in L1. */
static inline __attribute__((always_inline)) void pack(const size_t es, const uint8_t *s,
                                                       int64_t rows, int64_t cols, uint8_t *dst,
                                                       int64_t r0, int64_t r1)
{
    enum { KC = 64 };
    for (int64_t p = r0 / P; p * P < r1; p++) {
        uint8_t *pd = dst + (size_t)p * (size_t)cols * P * es;
        int64_t nr = rows - p * P;
        if (nr > P)
            nr = P;
        for (int64_t k0 = 0; k0 < cols; k0 += KC) {
            const int64_t kn = cols - k0 < KC ? cols - k0 : KC;
            for (int64_t j = 0; j < P; j++) {
                const uint8_t *sr = s + ((size_t)(p * P + j) * (size_t)cols + (size_t)k0) * es;
                for (int64_t k = 0; k < kn; k++) {
                    uint8_t *d = pd + ((size_t)(k0 + k) * P + (size_t)j) * es;
                    if (j < nr)
                        memcpy(d, sr + (size_t)k * es, es);
                    else
                        memset(d, 0, es);
                }
            }
        }
    }
}

void ge_sg_pack_scalar(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                       int64_t r0, int64_t r1)
{
    if (ge_sg_elem_size(type) == 4) /* a constant element size per call: a plain copy loop */
        pack(4, src, rows, cols, dst, r0, r1);
    else
        pack(2, src, rows, cols, dst, r0, r1);
}

/* Panel element i as fp32 (exact; the same conversions as ge_dequant_row). */
static float widen(uint32_t type, const void *w, size_t i)
{
    if (type == GE_T_F32)
        return ((const float *)w)[i];
    const uint16_t h = ((const uint16_t *)w)[i];
    return type == GE_T_F16 ? ge_fp16_to_fp32(h) : ge_bf16_to_fp32(h);
}

void ge_sgemm_scalar(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                     const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0,
                     int64_t r1, float *y, int64_t ldy)
{
    if (r1 > rows)
        r1 = rows;
    for (int64_t o = r0; o < r1; o++) {
        /* output o's elements: base + k * P */
        const size_t base = (size_t)(o / P) * (size_t)cols * P + (size_t)(o % P);
        for (int64_t t = t0; t < t1; t++) {
            const float *xt = x + (size_t)t * (size_t)ldx;
            float acc = 0.0f;
            for (int64_t k = 0; k < cols; k++)
                acc = fmaf(widen(type, packed, base + (size_t)k * P), xt[k], acc);
            y[(size_t)t * (size_t)ldy + (size_t)o] = acc;
        }
    }
}
