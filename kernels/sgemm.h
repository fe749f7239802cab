/* sgemm.h - the SGEMM family's per-tier entry points (kern.h describes the contract).
 *
 * Packed layout (every tier): panel p holds outputs [16p, 16p + 16) of a {cols, rows}
 * weight as [cols][16] elements, i.e. W[16p + j][k] at element (p * cols + k) * 16 + j; the
 * last panel's slots past `rows` are zero. The panel element type is the weight's own type
 * (GE_T_F32, GE_T_F16 or GE_T_BF16, the bytes copied unchanged): a 16-bit weight stays 2
 * bytes wide in memory, so its panels take no more room than the file's tensor.
 *
 * Numerics (every tier): the kernels widen each panel element to fp32 in registers right
 * before its FMA (bf16: the 16 bits shifted into the top of a 32-bit lane; f16: F16C, FCVTL /
 * ge_fp16_to_fp32), which is exact. y[t][o] is then one fused-multiply-add chain over k in
 * increasing order, starting from +0: acc = fma(W[o][k], x[t][k], acc). Nothing else touches
 * it, so the value depends neither on the split, the other tokens, the tier nor the panel
 * type: all tiers agree bit for bit, and 16-bit panels give the bits of fp32 panels of the
 * expanded weight (the scalar oracle uses fmaf, a call into libm on baseline x86-64).
 *
 * Ranges: r0 is a multiple of 16 and r1 too, or r1 == rows (kern.h); sgemm clamps r1 to rows
 * and writes exactly y[t][o] for t in [t0, t1), o in [r0, r1). */
#ifndef GE_SGEMM_H
#define GE_SGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define GE_SG_PANEL 16

/* Bytes of one panel element of a weight of this type (GE_T_F32, GE_T_F16 or GE_T_BF16). */
static inline size_t ge_sg_elem_size(uint32_t type) { return type == GE_T_F32 ? 4 : 2; }

size_t ge_sg_packed_size(uint32_t type, int64_t rows, int64_t cols);

void ge_sg_pack_scalar(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                       int64_t r0, int64_t r1);
void ge_sgemm_scalar(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                     const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0,
                     int64_t r1, float *y, int64_t ldy);

#if defined(__x86_64__)
void ge_sg_pack_avx2(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1);
void ge_sgemm_avx2(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                   const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                   float *y, int64_t ldy);
void ge_sgemm_avx512(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                     const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0,
                     int64_t r1, float *y, int64_t ldy);
#elif defined(__aarch64__)
void ge_sg_pack_neon(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1);
void ge_sgemm_neon(uint32_t type, const void *packed, int64_t rows, int64_t cols,
                   const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                   float *y, int64_t ldy);
#endif

#endif
