/* sgemm.h - the SGEMM family's per-tier entry points (kern.h describes the contract).
 *
 * Packed layout (every tier): panel p holds outputs [16p, 16p + 16) of a {cols, rows}
 * weight as [cols][16] fp32, i.e. W[16p + j][k] at packed[(p * cols + k) * 16 + j]; the last
 * panel's slots past `rows` are zero. Expansion is exact (bf16/f16 -> fp32 lose nothing).
 *
 * Numerics (every tier): y[t][o] is one fused-multiply-add chain over k in increasing order,
 * starting from +0: acc = fma(W[o][k], x[t][k], acc). Nothing else touches it, so the value
 * does not depend on the split, the other tokens or the tier: all tiers agree bit for bit
 * (the scalar oracle uses fmaf, a call into libm on baseline x86-64).
 *
 * Ranges: r0 is a multiple of 16 and r1 too, or r1 == rows (kern.h); sgemm clamps r1 to rows
 * and writes exactly y[t][o] for t in [t0, t1), o in [r0, r1). */
#ifndef GE_SGEMM_H
#define GE_SGEMM_H

#include <stddef.h>
#include <stdint.h>

#define GE_SG_PANEL 16

size_t ge_sg_packed_size(int64_t rows, int64_t cols);

void ge_sg_pack_scalar(uint32_t type, const void *src, int64_t rows, int64_t cols, float *dst,
                       int64_t r0, int64_t r1);
void ge_sgemm_scalar(const float *packed, int64_t rows, int64_t cols, const float *x,
                     int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                     int64_t ldy);

#if defined(__x86_64__)
void ge_sg_pack_avx2(uint32_t type, const void *src, int64_t rows, int64_t cols, float *dst,
                     int64_t r0, int64_t r1);
void ge_sgemm_avx2(const float *packed, int64_t rows, int64_t cols, const float *x,
                   int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                   int64_t ldy);
void ge_sgemm_avx512(const float *packed, int64_t rows, int64_t cols, const float *x,
                     int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                     int64_t ldy);
#endif

#endif
